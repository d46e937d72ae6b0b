//! What each teammate's worktree is like (`troupe worktrees`): its branch and base, how far it
//! is ahead of and behind the lead's `HEAD`, whether it has uncommitted changes, whether its
//! branch is merged — and its removal, which happens only when it is merged and clean.
//!
//! Looking never writes: git runs without its optional locks, and nothing is created.

use serde::Serialize;
use troupe_wire::AgentName;

use super::git::Git;
use super::merge::{is_ancestor, lead_changes};
use super::record::WorktreeRecord;
use super::{WorktreeError, Worktrees};

/// One worktree as `troupe worktrees` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorktreeView {
    pub name: AgentName,
    pub branch: String,
    /// The commit the branch was made from.
    pub base: String,
    /// The worktree's folder, relative to the workspace.
    pub path: String,
    /// Commits on the branch that the lead's `HEAD` does not have.
    pub ahead: Option<u64>,
    /// Commits of the lead's `HEAD` that the branch does not have.
    pub behind: Option<u64>,
    /// Uncommitted changes (or untracked files) in the worktree.
    pub dirty: Option<bool>,
    /// The branch is part of the lead's `HEAD`.
    pub merged: Option<bool>,
    /// Why some of the above could not be found (the folder or branch is gone, git failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// What became of a worktree asked to go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// Merged and clean: the worktree, its record and its (merged) branch are gone.
    Removed,
    /// Kept, and why (not merged, uncommitted changes).
    Kept(String),
}

impl Worktrees {
    /// Every worktree troupe made here, by name. Never writes.
    pub fn list(&self) -> Result<Vec<WorktreeView>, WorktreeError> {
        let mut views = Vec::new();
        for name in WorktreeRecord::names(&self.layout)? {
            let view = match WorktreeRecord::read(&self.layout, &name) {
                Ok(Some(record)) => self.view(&record),
                Ok(None) => continue,
                Err(e) => WorktreeView {
                    path: self.shown_path(&name),
                    name: name.clone(),
                    branch: super::branch_of(&name),
                    base: String::new(),
                    ahead: None,
                    behind: None,
                    dirty: None,
                    merged: None,
                    problem: Some(e.to_string()),
                },
            };
            views.push(view);
        }
        Ok(views)
    }

    fn view(&self, record: &WorktreeRecord) -> WorktreeView {
        let mut view = WorktreeView {
            name: record.name.clone(),
            branch: record.branch.clone(),
            base: record.base.clone(),
            path: self.shown_path(&record.name),
            ahead: None,
            behind: None,
            dirty: None,
            merged: None,
            problem: None,
        };
        // A record git disagrees with is refused: shown with why, and no git runs for it.
        let place = if self.path_of(&record.name).is_dir() {
            match self.confirm(record) {
                Ok(place) => Some(place),
                Err(e) => {
                    view.problem = Some(e.to_string());
                    return view;
                }
            }
        } else {
            None
        };
        let lead = self.lead();
        let range = format!("HEAD...{}", record.branch);
        let counted = Git::new(&lead, ["rev-list", "--left-right", "--count", &range])
            .read_only()
            .run();
        let mut problems = Vec::new();
        match counted {
            Ok(text) => {
                let mut numbers = text.split_whitespace().map(str::parse::<u64>);
                if let (Some(Ok(behind)), Some(Ok(ahead))) = (numbers.next(), numbers.next()) {
                    view.behind = Some(behind);
                    view.ahead = Some(ahead);
                }
            }
            Err(e) => problems.push(e.to_string()),
        }
        match is_ancestor(&lead, &record.branch, "HEAD") {
            Ok(merged) => view.merged = Some(merged),
            Err(e) => problems.push(e.to_string()),
        }
        if let Some(place) = &place {
            match lead_changes(place) {
                Ok(changes) => view.dirty = Some(!changes.is_clean()),
                Err(e) => problems.push(e.to_string()),
            }
        } else {
            problems.push("its folder is missing".into());
        }
        if !problems.is_empty() {
            view.problem = Some(problems.join("; "));
        }
        view
    }

    /// Removes `name`'s worktree if its branch is merged into the lead's `HEAD` and its tree
    /// is clean (`git worktree remove`, never forced), then its branch (`git branch -d`, which
    /// refuses an unmerged one) and its record. Otherwise keeps it and says why.
    pub fn remove_if_done(&self, name: &AgentName) -> Result<Removal, WorktreeError> {
        let _serial = self.locked();
        let (record, place) = self.record_of(name)?;
        let lead = self.lead();
        if !is_ancestor(&lead, &record.branch, "HEAD")? {
            return Ok(Removal::Kept(format!(
                "{} is not merged into the lead's HEAD",
                record.branch
            )));
        }
        if !lead_changes(&place)?.is_clean() {
            return Ok(Removal::Kept("it has uncommitted changes".into()));
        }
        let path = self.path_of(name);
        let shown = path.to_string_lossy().into_owned();
        Git::new(&lead, ["worktree", "remove", &shown]).run()?;
        if let Err(e) = Git::new(&lead, ["branch", "-d", &record.branch]).run() {
            tracing::warn!("kept branch {}: {e}", record.branch);
        }
        WorktreeRecord::remove(&self.layout, name)?;
        Ok(Removal::Removed)
    }

    fn shown_path(&self, name: &AgentName) -> String {
        let path = self.path_of(name);
        path.strip_prefix(self.workspace())
            .unwrap_or(&path)
            .display()
            .to_string()
    }
}
