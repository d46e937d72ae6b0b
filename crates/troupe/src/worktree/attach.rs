//! Making a teammate's worktree — `git worktree add -b troupe/<name> .troupe/worktrees/<name>
//! <base>`, base the lead's `HEAD` (with `[team] remote`: the branch the lead published on the
//! remote, see `remote`) — or reattaching to the one a run that died, or an earlier teammate of
//! the same name, left (worktree and branch kept, never made twice).
//!
//! The lead's checkout must be the top level of a git repository with at least one commit.
//! The first worktree also adds `/.troupe/` to the repository's `info/exclude`, so that troupe's
//! state and the nested worktrees never show as untracked files of the lead.

use std::path::{Path, PathBuf};

use troupe_wire::AgentName;

use super::git::{Git, Place};
use super::record::WorktreeRecord;
use super::{branch_of, WorktreeError, Worktrees};
use crate::store::durable;
use crate::store::read::{read_regular, Links};

/// The line troupe adds to `info/exclude`.
const EXCLUDE_LINE: &str = "/.troupe/";

/// A teammate's worktree, ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// Its files: `.troupe/worktrees/<name>`.
    pub path: PathBuf,
    pub record: WorktreeRecord,
    /// Made now (false: an existing worktree was reattached).
    pub created: bool,
}

impl Worktrees {
    /// Whether teammates' worktrees can be made here: the workspace is the top level of a
    /// git repository that has a commit. The error says what is missing.
    pub fn check_available(&self) -> Result<(), WorktreeError> {
        let lead = self.lead();
        let top = Git::new(&lead, ["rev-parse", "--show-toplevel"])
            .read_only()
            .output()?;
        if !top.ok() {
            return Err(WorktreeError::Unavailable(format!(
                "the workspace to be a git repository ({} is not one: {}); spawn with \
                 isolation \"none\"",
                self.workspace().display(),
                top.why()
            )));
        }
        let top = PathBuf::from(top.stdout.trim());
        if real(&top) != real(self.workspace()) {
            return Err(WorktreeError::Unavailable(format!(
                "the workspace to be the top level of its git repository ({} is inside {}); \
                 spawn with isolation \"none\"",
                self.workspace().display(),
                top.display()
            )));
        }
        let head = Git::new(&lead, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
            .read_only()
            .output()?;
        if !head.ok() {
            return Err(WorktreeError::Unavailable(
                "a commit to branch from (the repository has none yet); commit first or spawn \
                 with isolation \"none\""
                    .into(),
            ));
        }
        Ok(())
    }

    /// Teammate `name`'s worktree: made from the lead's `HEAD`, or reattached when it (or its
    /// branch) is already there.
    pub fn attach(&self, name: &AgentName) -> Result<Attached, WorktreeError> {
        let _serial = self.locked();
        self.check_available()?;
        let path = self.path_of(name);
        if let Some(record) = WorktreeRecord::read(&self.layout, name)? {
            if path.is_dir() {
                // Its record must agree with git (`verify`): one that does not is refused,
                // never used, never silently replaced.
                let place = self.confirm(&record)?;
                if let Some(remote) = self.remote.as_deref() {
                    self.catch_up(remote, name, &place);
                }
                return Ok(Attached {
                    path,
                    record,
                    created: false,
                });
            }
        }
        let lead = self.lead();
        let branch = branch_of(name);
        let branch_ref = format!("refs/heads/{branch}");
        let common = self.common_dir()?;
        exclude_state(&common)?;
        if !path.exists() {
            // A worktree folder deleted by hand leaves its registration behind, which would
            // refuse the add: `prune` drops registrations whose folder is gone.
            Git::new(&lead, ["worktree", "prune"]).run()?;
        }
        let branch_exists = Git::new(&lead, ["rev-parse", "--verify", "--quiet", &branch_ref])
            .read_only()
            .output()?
            .ok();
        let created = !path.exists();
        let base = if !created {
            // The folder exists: it must be this teammate's worktree, reattached as it is.
            if !branch_exists || !path.join(".git").is_file() {
                return Err(WorktreeError::Corrupt {
                    path: path.display().to_string(),
                    why: format!(
                        "it exists but is not the worktree of branch {branch}; move it away"
                    ),
                });
            }
            self.fork_point(&branch)?
        } else if branch_exists {
            Git::new(&lead, ["worktree", "add", path_str(&path)?, &branch]).run()?;
            self.fork_point(&branch)?
        } else if let Some(remote) = self.remote.as_deref() {
            // A shared team's teammate: its branch is the one the lead published.
            let base = self.fetch_published(remote, name)?;
            Git::new(
                &lead,
                [
                    "worktree",
                    "add",
                    "--no-track",
                    "-b",
                    &branch,
                    path_str(&path)?,
                    &base,
                ],
            )
            .run()?;
            base
        } else {
            let base = Git::new(&lead, ["rev-parse", "--verify", "HEAD^{commit}"])
                .run()?
                .trim()
                .to_owned();
            Git::new(
                &lead,
                ["worktree", "add", "-b", &branch, path_str(&path)?, &base],
            )
            .run()?;
            base
        };
        let git_dir = self.admin_dir(&path)?;
        let record = match WorktreeRecord::read(&self.layout, name)? {
            // A reattach keeps the base the branch was first made from.
            Some(earlier) => WorktreeRecord { git_dir, ..earlier },
            None => WorktreeRecord {
                version: WorktreeRecord::VERSION,
                name: name.clone(),
                branch,
                base,
                git_dir,
            },
        };
        // What was just written is what later commands check: confirmed now, so a worktree
        // git does not see as troupe's is refused at once.
        self.confirm(&record)?;
        record.write(&self.layout)?;
        Ok(Attached {
            path,
            record,
            created,
        })
    }

    /// Keeps troupe's state (`.troupe/`, and the worktrees in it) out of the checkout's
    /// untracked files: adds `/.troupe/` to the repository's `info/exclude` once.
    pub(super) fn exclude_troupe_state(&self) -> Result<(), WorktreeError> {
        exclude_state(&self.common_dir()?)
    }

    /// The lead's checkout as a place to run git.
    pub(super) fn lead(&self) -> Place {
        Place::Checkout(self.workspace().to_owned())
    }

    /// The record of `name`'s worktree and where git runs in it, once git agrees with the
    /// record (`verify`): `worktree_not_found` without a record or folder, `worktree_corrupt`
    /// when git disagrees.
    pub(super) fn record_of(
        &self,
        name: &AgentName,
    ) -> Result<(WorktreeRecord, Place), WorktreeError> {
        let record = WorktreeRecord::read(&self.layout, name)?
            .filter(|_| self.path_of(name).is_dir())
            .ok_or_else(|| WorktreeError::NoWorktree(name.clone()))?;
        let place = self.confirm(&record)?;
        Ok((record, place))
    }

    /// The repository's common git folder (`.git` of the lead's checkout), absolute.
    pub(super) fn common_dir(&self) -> Result<PathBuf, WorktreeError> {
        let out = Git::new(&self.lead(), ["rev-parse", "--git-common-dir"])
            .read_only()
            .run()?;
        let dir = PathBuf::from(out.trim());
        Ok(real(&if dir.is_absolute() {
            dir
        } else {
            self.workspace().join(dir)
        }))
    }

    /// Where an existing branch left the lead's history: its merge base with `HEAD`.
    fn fork_point(&self, branch: &str) -> Result<String, WorktreeError> {
        Ok(Git::new(&self.lead(), ["merge-base", "HEAD", branch])
            .read_only()
            .run()?
            .trim()
            .to_owned())
    }
}

/// Adds [`EXCLUDE_LINE`] to `<common>/info/exclude` unless a line already ignores `.troupe`.
fn exclude_state(common: &Path) -> Result<(), WorktreeError> {
    let info = common.join("info");
    let exclude = info.join("exclude");
    let current = read_regular(&exclude, Links::Refuse, 1024 * 1024)?.unwrap_or_default();
    let text = String::from_utf8_lossy(&current);
    let listed = text.lines().map(str::trim).any(|l| {
        matches!(
            l,
            "/.troupe/" | "/.troupe" | ".troupe/" | ".troupe" | "/.troupe/*"
        )
    });
    if listed {
        return Ok(());
    }
    std::fs::create_dir_all(&info).map_err(|e| crate::store::IoError::new("create", &info, e))?;
    let mut updated = text.into_owned();
    if !updated.is_empty() && !updated.ends_with('\n') {
        updated.push('\n');
    }
    updated.push_str("# troupe's state and its teammates' worktrees\n");
    updated.push_str(EXCLUDE_LINE);
    updated.push('\n');
    durable::replace(&exclude, updated.as_bytes())?;
    Ok(())
}

fn path_str(path: &Path) -> Result<&str, WorktreeError> {
    path.to_str().ok_or_else(|| WorktreeError::Corrupt {
        path: path.display().to_string(),
        why: "not valid UTF-8".into(),
    })
}

/// `path` without symlinks where it exists (the sandbox's resolution).
fn real(path: &Path) -> PathBuf {
    crate::sandbox::real(path)
}
