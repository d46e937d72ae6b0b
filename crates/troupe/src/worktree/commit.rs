//! Committing a teammate's changes on its branch: everything in its worktree (`git add -A`),
//! authored and committed by the teammate (`<name> <name@troupe.invalid>`), with a message from
//! the work it finished. Nothing changed, no commit.

use troupe_wire::AgentName;

use super::git::{Git, Place};
use super::{identity_of, WorktreeError, Worktrees};

/// The longest first line troupe gives a commit (git's own advice for a subject).
pub const SUBJECT_CHARS: usize = 72;

/// A commit message's subject from `text`: its first non-blank line, cut to
/// [`SUBJECT_CHARS`] characters; `fallback` when it has none.
pub fn subject_of(text: &str, fallback: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(fallback);
    match line.char_indices().nth(SUBJECT_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

impl Worktrees {
    /// Commits every change in `name`'s worktree with `message` (its first line cut to a
    /// subject). The new commit's id, or `None` when nothing changed.
    pub fn commit(&self, name: &AgentName, message: &str) -> Result<Option<String>, WorktreeError> {
        let _serial = self.locked();
        self.commit_unlocked(name, message)
    }

    pub(super) fn commit_unlocked(
        &self,
        name: &AgentName,
        message: &str,
    ) -> Result<Option<String>, WorktreeError> {
        let (_, place) = self.record_of(name)?;
        // A nested repository already in the index (a submodule, or one the teammate made)
        // is left out: `git add` would look inside it with a `git status` of its own, under
        // that repository's config, which the teammate can write.
        let mut add: Vec<String> = ["add", "--all", "--", "."].map(str::to_owned).into();
        add.extend(
            nested_repositories(&place)?
                .into_iter()
                .map(|path| format!(":(top,exclude,literal){path}")),
        );
        Git::new(&place, &add).run()?;
        let staged = Git::new(&place, ["diff", "--cached", "--quiet"]).output()?;
        match staged.status.code() {
            Some(0) => return Ok(None),
            Some(1) => {}
            _ => {
                return Err(WorktreeError::Git {
                    command: "git diff --cached --quiet".into(),
                    why: staged.why(),
                })
            }
        }
        let subject = subject_of(message, &format!("work of {name}"));
        let (who, email) = identity_of(name);
        Git::new(&place, ["commit", "--quiet", "--no-verify", "-m", &subject])
            .env("GIT_AUTHOR_NAME", &who)
            .env("GIT_AUTHOR_EMAIL", &email)
            .env("GIT_COMMITTER_NAME", &who)
            .env("GIT_COMMITTER_EMAIL", &email)
            .run()?;
        let id = Git::new(&place, ["rev-parse", "HEAD"]).run()?;
        Ok(Some(id.trim().to_owned()))
    }
}

/// The paths of the index's gitlinks (mode 160000): nested repositories.
fn nested_repositories(place: &Place) -> Result<Vec<String>, WorktreeError> {
    let out = Git::new(place, ["ls-files", "--stage", "-z"])
        .read_only()
        .run()?;
    Ok(out
        .split('\0')
        .filter_map(|entry| {
            let (meta, path) = entry.split_once('\t')?;
            meta.starts_with("160000 ").then(|| path.to_owned())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_is_the_first_line_cut() {
        assert_eq!(
            subject_of("\n  Fix the parser  \nmore", "x"),
            "Fix the parser"
        );
        assert_eq!(subject_of(" \n", "work of bob"), "work of bob");
        let long = "a".repeat(100);
        assert_eq!(subject_of(&long, "x"), format!("{}…", "a".repeat(72)));
    }
}
