//! Merging a teammate's branch into the lead's checkout (`merge_teammate`).
//!
//! 1. The teammate's pending changes are committed on its branch first (when its worktree is
//!    in this checkout). With `[team] remote`, the branch is pushed, the remote's copy fetched,
//!    and the one that is ahead is merged (see `remote`).
//! 2. The lead's checkout is looked at before anything changes: staged changes, or unstaged
//!    and untracked files that the merge would touch, refuse the merge (`merge_blocked`) with
//!    the files named — nothing is changed.
//! 3. `git merge` (fast-forward when it can, else a merge commit by `lead
//!    <lead@troupe.invalid>`). A conflict is aborted (`git merge --abort`) before returning:
//!    the result names the conflicting files, the branch stays as it was, and the lead's tree
//!    is as it was before the call.

use std::collections::BTreeSet;

use troupe_wire::AgentName;

use super::git::{Git, Place};
use super::{branch_of, identity_of, WorktreeError, Worktrees};

/// How a merge ended (a refusal that changed nothing is an error instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// The branch is in the lead's `HEAD` now.
    Done {
        branch: String,
        /// The lead's `HEAD` after the merge.
        commit: String,
        /// `HEAD` moved to the branch without a merge commit.
        fast_forward: bool,
        /// The teammate's pending changes committed first, if there were any.
        committed: Option<String>,
    },
    /// The branch was already part of the lead's `HEAD`: nothing to do.
    AlreadyMerged { branch: String },
    /// The merge conflicted and was aborted: nothing changed in the lead's checkout.
    Conflict {
        branch: String,
        /// The files both sides changed, relative to the workspace, sorted.
        files: Vec<String>,
        committed: Option<String>,
    },
}

impl Worktrees {
    /// Merges `name`'s branch into the lead's checkout (see the module's steps).
    pub fn merge(&self, name: &AgentName) -> Result<Merged, WorktreeError> {
        let _serial = self.locked();
        // Its worktree is here unless it worked in another clone of a shared team.
        // A record git disagrees with is refused here too, not taken for "no worktree".
        let has_worktree = match self.record_of(name) {
            Ok(_) => true,
            Err(WorktreeError::NoWorktree(_)) => false,
            Err(e) => return Err(e),
        };
        let committed = if has_worktree {
            self.commit_unlocked(
                name,
                &format!("work of {name} in progress, committed for a merge"),
            )?
        } else {
            None
        };
        let lead = self.lead();
        let branch = branch_of(name);
        let source = self.merge_source(name, has_worktree)?;
        if is_ancestor(&lead, &source, "HEAD")? {
            return Ok(Merged::AlreadyMerged { branch });
        }
        let before = lead_changes(&lead)?;
        if !before.staged.is_empty() {
            return Err(WorktreeError::LeadDirty {
                why: "in its index (staged)",
                files: before.staged.into_iter().collect(),
            });
        }
        let touched = files_changed_on(&lead, &source)?;
        let blocked: Vec<String> = touched.intersection(&before.unstaged).cloned().collect();
        if !blocked.is_empty() {
            return Err(WorktreeError::LeadDirty {
                why: "in files the merge would change",
                files: blocked,
            });
        }
        let fast_forward = is_ancestor(&lead, "HEAD", &source)?;
        let (who, email) = identity_of(&AgentName::lead());
        let message = format!("Merge {branch} (teammate {name})");
        let merged = Git::new(
            &lead,
            ["merge", "--no-edit", "--no-stat", "-m", &message, &source],
        )
        .env("GIT_AUTHOR_NAME", &who)
        .env("GIT_AUTHOR_EMAIL", &email)
        .env("GIT_COMMITTER_NAME", &who)
        .env("GIT_COMMITTER_EMAIL", &email)
        .output()?;
        if merged.ok() {
            let commit = Git::new(&lead, ["rev-parse", "HEAD"])
                .run()?
                .trim()
                .to_owned();
            let branch_tip = Git::new(&lead, ["rev-parse", &source])
                .run()?
                .trim()
                .to_owned();
            return Ok(Merged::Done {
                branch,
                fast_forward: fast_forward && commit == branch_tip,
                commit,
                committed,
            });
        }
        let files = nul_separated(
            &Git::new(&lead, ["diff", "--name-only", "-z", "--diff-filter=U"])
                .output()?
                .stdout,
        );
        let merging = Git::new(&lead, ["rev-parse", "--verify", "--quiet", "MERGE_HEAD"])
            .output()?
            .ok();
        if merging {
            Git::new(&lead, ["merge", "--abort"]).run()?;
        }
        if files.is_empty() {
            // Refused before it started (git checks what it would overwrite): nothing changed.
            return Err(WorktreeError::Git {
                command: format!("git merge {branch}"),
                why: merged.why(),
            });
        }
        Ok(Merged::Conflict {
            branch,
            files: files.into_iter().collect(),
            committed,
        })
    }
}

/// Whether `ancestor` is an ancestor of (or equal to) `of`.
pub(super) fn is_ancestor(place: &Place, ancestor: &str, of: &str) -> Result<bool, WorktreeError> {
    let out = Git::new(place, ["merge-base", "--is-ancestor", ancestor, of])
        .read_only()
        .output()?;
    match out.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(WorktreeError::Git {
            command: format!("git merge-base --is-ancestor {ancestor} {of}"),
            why: out.why(),
        }),
    }
}

/// The files `branch` changed since it left `HEAD`'s history (`HEAD...branch`).
fn files_changed_on(lead: &Place, branch: &str) -> Result<BTreeSet<String>, WorktreeError> {
    let range = format!("HEAD...{branch}");
    let out = Git::new(lead, ["diff", "--name-only", "-z", "--no-renames", &range])
        .read_only()
        .run()?;
    Ok(nul_separated(&out))
}

/// The lead's uncommitted changes, by kind.
#[derive(Debug, Default)]
pub(super) struct Changes {
    /// Paths whose index differs from `HEAD`.
    pub staged: BTreeSet<String>,
    /// Paths changed in the tree but not staged, and untracked files.
    pub unstaged: BTreeSet<String>,
}

impl Changes {
    pub fn is_clean(&self) -> bool {
        self.staged.is_empty() && self.unstaged.is_empty()
    }
}

/// `git status` of `place`, every untracked file listed.
pub(super) fn lead_changes(place: &Place) -> Result<Changes, WorktreeError> {
    let out = Git::new(
        place,
        [
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            // Never look inside a nested repository: its `git status` would run under its
            // own config.
            "--ignore-submodules=all",
        ],
    )
    .read_only()
    .run()?;
    let mut changes = Changes::default();
    let mut entries = out.split('\0');
    while let Some(entry) = entries.next() {
        let (Some(code), Some(path)) = (entry.get(..2), entry.get(3..)) else {
            continue;
        };
        let mut codes = code.chars();
        let (x, y) = (codes.next().unwrap_or(' '), codes.next().unwrap_or(' '));
        if matches!(x, 'R' | 'C') {
            // The next entry is the path it came from.
            if let Some(from) = entries.next() {
                changes.staged.insert(from.to_owned());
            }
        }
        if x == '?' {
            changes.unstaged.insert(path.to_owned());
            continue;
        }
        if x != ' ' {
            changes.staged.insert(path.to_owned());
        }
        if y != ' ' {
            changes.unstaged.insert(path.to_owned());
        }
    }
    Ok(changes)
}

fn nul_separated(text: &str) -> BTreeSet<String> {
    text.split('\0')
        .filter(|p| !p.is_empty())
        .map(|p| p.trim_end_matches('\n').to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}
