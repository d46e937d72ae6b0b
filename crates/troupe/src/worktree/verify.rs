//! A worktree record checked against git before it is used.
//!
//! `.troupe/worktrees/<name>.json` is a file of the workspace: a cloned repository can ship one
//! (with a `team.json` naming the teammate), so its `git_dir` is a claim, never an instruction.
//! Before troupe runs git in a teammate's worktree — `troupe worktrees`, a commit, a merge,
//! removal at a run's close, a reattach — [`Worktrees::confirm`] asks git:
//!
//! 1. the workspace is the top level of its repository, whose common git folder is
//!    `git rev-parse --git-common-dir` (the person's own `.git`);
//! 2. `git worktree list --porcelain` has a worktree at `.troupe/worktrees/<name>` of this
//!    workspace, with branch `troupe/<name>` checked out;
//! 3. git's admin folder of that worktree is the folder of `<common>/worktrees/` whose `gitdir`
//!    names `<worktree>/.git`, and the record's `git_dir` is that folder.
//!
//! The worktree's own `.git` file (which its teammate can write) is never read. A record that
//! disagrees is refused (`worktree_corrupt`, naming the record and what disagreed), and git then
//! runs with the admin folder git reported, not with the record's path.

use std::path::{Path, PathBuf};

use super::git::{Confirmed, Git, Place};
use super::record::WorktreeRecord;
use super::{WorktreeError, Worktrees};
use crate::store::read::{read_regular, Links};

/// One worktree of `git worktree list --porcelain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Listed {
    pub path: PathBuf,
    /// `refs/heads/...`, or `None` when detached or bare.
    pub branch: Option<String>,
}

impl Worktrees {
    /// Where `record`'s worktree runs git, once git agrees with the record (see the module's
    /// steps); otherwise `worktree_corrupt` naming the record.
    pub(super) fn confirm(&self, record: &WorktreeRecord) -> Result<Place, WorktreeError> {
        let refused = |why: String| WorktreeError::Corrupt {
            path: self
                .layout
                .worktree_record(&record.name)
                .display()
                .to_string(),
            why,
        };
        if !record.git_dir.is_absolute() {
            return Err(refused(format!(
                "its git_dir {} is a relative path",
                record.git_dir.display()
            )));
        }
        let files = real(&self.path_of(&record.name));
        let common = self.lead_common_dir().map_err(refused)?;
        let listed = self.listed().map_err(|e| refused(e.to_string()))?;
        let Some(entry) = listed.iter().find(|w| real(&w.path) == files) else {
            return Err(refused(format!(
                "git knows no worktree at {} (`git worktree list` of the workspace)",
                files.display()
            )));
        };
        let expected_branch = format!("refs/heads/{}", record.branch);
        if entry.branch.as_deref() != Some(expected_branch.as_str()) {
            return Err(refused(format!(
                "git has {} checked out at {}, not {}",
                entry.branch.as_deref().unwrap_or("no branch"),
                files.display(),
                record.branch
            )));
        }
        let Some(admin) = admin_of(&common, &files) else {
            return Err(refused(format!(
                "no admin folder in {} names the worktree {}",
                common.join("worktrees").display(),
                files.display()
            )));
        };
        if real(&record.git_dir) != admin {
            return Err(refused(format!(
                "its git_dir {} is not git's admin folder of the worktree ({})",
                record.git_dir.display(),
                admin.display()
            )));
        }
        Ok(Place::Worktree(Confirmed::new(admin, files)))
    }

    /// git's admin folder of the worktree at `path` (for a new record), found in the
    /// repository's `worktrees/`, never read from the worktree's `.git` file.
    pub(super) fn admin_dir(&self, path: &Path) -> Result<PathBuf, WorktreeError> {
        let common = self
            .lead_common_dir()
            .map_err(|why| WorktreeError::Corrupt {
                path: path.display().to_string(),
                why,
            })?;
        admin_of(&common, &real(path)).ok_or_else(|| WorktreeError::Corrupt {
            path: path.display().to_string(),
            why: format!(
                "no admin folder in {} names it: it is not a worktree of this repository",
                common.join("worktrees").display()
            ),
        })
    }

    /// The lead's common git folder, once the workspace is known to be its repository's top
    /// level; otherwise why not.
    fn lead_common_dir(&self) -> Result<PathBuf, String> {
        let workspace = real(self.workspace());
        let top = Git::new(&self.lead(), ["rev-parse", "--show-toplevel"])
            .read_only()
            .run()
            .map_err(|e| format!("the workspace is not a git repository ({e})"))?;
        if real(Path::new(top.trim())) != workspace {
            return Err(format!(
                "the workspace {} is not the top level of its git repository",
                workspace.display()
            ));
        }
        self.common_dir().map_err(|e| e.to_string())
    }

    /// `git worktree list --porcelain` of the lead's repository.
    fn listed(&self) -> Result<Vec<Listed>, WorktreeError> {
        let out = Git::new(&self.lead(), ["worktree", "list", "--porcelain"])
            .read_only()
            .run()?;
        Ok(parse_list(&out))
    }
}

/// The entries of `git worktree list --porcelain` (blank-line separated stanzas).
pub(super) fn parse_list(text: &str) -> Vec<Listed> {
    let mut listed = Vec::new();
    let mut current: Option<Listed> = None;
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("worktree ") {
            listed.extend(current.take());
            current = Some(Listed {
                path: PathBuf::from(path),
                branch: None,
            });
        } else if let (Some(branch), Some(entry)) = (line.strip_prefix("branch "), &mut current) {
            entry.branch = Some(branch.to_owned());
        }
    }
    listed.extend(current);
    listed
}

/// The folder of `<common>/worktrees/` whose `gitdir` file names `<worktree>/.git`.
fn admin_of(common: &Path, worktree: &Path) -> Option<PathBuf> {
    let wanted = real(&worktree.join(".git"));
    let entries = std::fs::read_dir(common.join("worktrees")).ok()?;
    let mut found = None;
    for entry in entries.flatten() {
        let dir = entry.path();
        let Ok(Some(bytes)) = read_regular(&dir.join("gitdir"), Links::Refuse, 4096) else {
            continue;
        };
        let named = PathBuf::from(String::from_utf8_lossy(&bytes).trim());
        if named.is_absolute() && real(&named) == wanted {
            if found.is_some() {
                // Two admin folders claim one worktree: git's view is not clear.
                return None;
            }
            found = Some(real(&dir));
        }
    }
    found
}

/// `path` without symlinks where it exists (the sandbox's resolution).
fn real(path: &Path) -> PathBuf {
    crate::sandbox::real(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_porcelain_list_is_parsed_by_stanza() {
        let text = "worktree /repo\nHEAD abc\nbranch refs/heads/main\n\n\
                    worktree /repo/.troupe/worktrees/alice\nHEAD def\nbranch refs/heads/troupe/alice\n\n\
                    worktree /elsewhere\nHEAD 123\ndetached\n\n";
        assert_eq!(
            parse_list(text),
            vec![
                Listed {
                    path: "/repo".into(),
                    branch: Some("refs/heads/main".into())
                },
                Listed {
                    path: "/repo/.troupe/worktrees/alice".into(),
                    branch: Some("refs/heads/troupe/alice".into())
                },
                Listed {
                    path: "/elsewhere".into(),
                    branch: None
                },
            ]
        );
    }
}
