//! A git worktree per teammate (SPEC §12, issue 25 part 4).
//!
//! A teammate spawned with `isolation: "worktree"` works in `.troupe/worktrees/<name>`, a git
//! worktree of the lead's repository on branch `troupe/<name>`, made from the lead's `HEAD` at
//! spawn time. Its changes are committed on that branch when it finishes a message, and the
//! lead merges the branch into its own checkout with `merge_teammate`.
//!
//! **Where the agent's files are vs where the team's state is.** A worktree holds only the
//! teammate's files: its mailbox, transcript, artifacts, job records and audit lines stay in the
//! lead's `.troupe/` (the team's [`Layout`]); only the runner's workspace — what its file tools,
//! `glob`, `shell`, background jobs and the sandbox's writable root see — is the worktree.
//!
//! # Layout
//!
//! - this file: [`Worktrees`] (the team's worktrees, one lock over troupe's git commands on
//!   them), [`WorktreeError`] and the identities troupe commits with;
//! - [`git`]: the one runner of troupe's git, hardened against the repository (no shell, no
//!   inherited `GIT_*`, no system config, hooks from an empty folder, no fsmonitor, no
//!   external diff or text conversion, a transport allow-list without `ext::`, a timeout);
//! - [`record`]: `.troupe/worktrees/<name>.json`, what troupe keeps of each worktree;
//! - [`verify`]: a record checked against `git worktree list` before it is used (a cloned
//!   repository can ship one);
//! - [`attach`]: making a worktree, or reattaching to one a run that died (or an earlier
//!   teammate of the name) left;
//! - [`commit`]: committing a teammate's changes on its branch;
//! - [`merge`]: merging a branch into the lead's checkout, aborting cleanly on a conflict;
//! - [`status`]: what `troupe worktrees` shows, and removal when merged and clean;
//! - [`remote`]: a shared team's branches travelling through a git remote
//!   (`[team] remote`) between the lead's clone and its workers'.
//!
//! **Architecture Invariant:** every git command troupe runs goes through [`git::Git`]; a
//! teammate's worktree is named to git only by the admin folder git itself reported for it
//! ([`git::Place::Worktree`] holds a [`git::Confirmed`], which only `verify` builds), never by
//! a path read from a file of the workspace.
//!
//! **Architecture Invariant:** troupe never removes a worktree with `--force` and never
//! leaves the lead's checkout half-merged: a merge that conflicts is aborted before the call
//! returns.

pub mod attach;
pub mod commit;
pub mod git;
pub mod merge;
pub mod record;
pub mod remote;
pub mod status;
mod verify;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use troupe_wire::AgentName;

use crate::error::ErrorCode;
use crate::layout::Layout;
use crate::store::IoError;

pub use attach::Attached;
pub use merge::Merged;
pub use record::WorktreeRecord;
pub use status::{Removal, WorktreeView};

/// The branch of teammate `name`'s worktree: `troupe/<name>`.
pub fn branch_of(name: &AgentName) -> String {
    format!("troupe/{name}")
}

/// The identity troupe commits a teammate's work with: `<name> <name@troupe.invalid>`
/// (`.invalid` is reserved: the address can never reach anyone).
pub fn identity_of(name: &AgentName) -> (String, String) {
    (name.to_string(), format!("{name}@troupe.invalid"))
}

/// The teammates' worktrees of one workspace (the lead's checkout).
#[derive(Debug)]
pub struct Worktrees {
    /// The team's state: where worktrees and their records live (`.troupe/worktrees/`).
    layout: Layout,
    /// Serialises troupe's own git commands on the team's worktrees and the lead's checkout
    /// (a commit on a teammate's result and a merge of the same branch never interleave).
    lock: Mutex<()>,
    /// `[team] remote`: the git remote teammates' branches travel through (see [`remote`]).
    remote: Option<String>,
}

impl Worktrees {
    pub fn new(layout: Layout) -> Self {
        Self {
            layout,
            lock: Mutex::new(()),
            remote: None,
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The lead's checkout: the workspace.
    pub fn workspace(&self) -> &Path {
        self.layout.workspace()
    }

    /// Where teammate `name`'s files are when it has a worktree.
    pub fn path_of(&self, name: &AgentName) -> PathBuf {
        self.layout.worktree(name)
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, ()> {
        crate::sync::lock(&self.lock)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// Isolation was asked for where it cannot be had.
    #[error("isolation \"worktree\" needs {0}")]
    Unavailable(String),
    #[error("teammate {0} has no worktree here (it was not spawned with isolation \"worktree\", its worktree was removed after a merge, or it worked in another clone of a shared team without [team] remote to bring its branch here)")]
    NoWorktree(AgentName),
    #[error("{command} failed: {why}")]
    Git { command: String, why: String },
    #[error("{command} did not finish within {after:?} and was stopped")]
    Timeout { command: String, after: Duration },
    #[error("{path} cannot be used: {why}")]
    Corrupt { path: String, why: String },
    /// The lead's checkout holds changes the merge would touch; nothing was changed.
    #[error("the lead's checkout has uncommitted changes {why}: {}; commit or undo them first (nothing was changed)", .files.join(", "))]
    LeadDirty {
        why: &'static str,
        files: Vec<String>,
    },
    /// The teammate's branch here and on the remote both have commits the other lacks.
    #[error("{branch} here and on git remote {remote} have diverged (both have commits the other lacks); merge or rebase one onto the other by hand (nothing was changed)")]
    Diverged { branch: String, remote: String },
    #[error(transparent)]
    Io(#[from] IoError),
}

impl ErrorCode for WorktreeError {
    fn code(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "invalid_arguments",
            Self::NoWorktree(_) => "worktree_not_found",
            Self::Git { .. } => "git_failed",
            Self::Timeout { .. } => "git_timeout",
            Self::Corrupt { .. } => "worktree_corrupt",
            Self::LeadDirty { .. } => "merge_blocked",
            Self::Diverged { .. } => "branch_diverged",
            Self::Io(e) => e.code(),
        }
    }
}
