//! Teammates' worktrees ([`Kind::Worktrees`]): one whose branch is merged into the lead's
//! `HEAD` and whose tree is clean goes, with its local branch, once its record is older than
//! the rule allows (`Worktrees::remove_if_done`, which checks both again under its lock and
//! never forces). Unmerged, dirty or unreadable ones stay, and so do all of them while a run
//! is live (its teammates may be working in them).

use std::collections::HashMap;

use crate::layout::Layout;
use crate::store::retention::files::listing;
use crate::store::retention::{decide, needed, Candidate, Kind, Report, Sweep};
use crate::worktree::{Removal, WorktreeError, Worktrees};

/// Why a worktree with uncommitted changes is kept.
pub const DIRTY: &str = "it has uncommitted changes";
/// Why a worktree git could not describe is kept.
pub const UNKNOWN: &str = "git could not say whether it is merged";

pub fn prune(
    layout: &Layout,
    live: bool,
    sweep: &Sweep,
    report: &mut Report,
) -> Result<(), WorktreeError> {
    let records = listing(&layout.worktrees_dir())?;
    if records.is_empty() {
        return Ok(());
    }
    let made: HashMap<String, _> = records
        .into_iter()
        .filter_map(|f| {
            let name = f.name.to_str()?.strip_suffix(".json")?.to_owned();
            Some((name, f.modified))
        })
        .collect();
    let worktrees = Worktrees::new(layout.clone());
    let mut candidates = Vec::new();
    for view in worktrees.list()? {
        let Some(at) = made.get(view.name.as_str()).copied() else {
            continue;
        };
        let needed = if live {
            Some(needed::LIVE_RUN)
        } else {
            match (view.merged, view.dirty) {
                (Some(false), _) => Some(needed::UNMERGED_BRANCH),
                (Some(true), Some(false)) => None,
                (Some(true), Some(true)) => Some(DIRTY),
                _ => Some(UNKNOWN),
            }
        };
        candidates.push(Candidate {
            item: view.name,
            at,
            bytes: 0,
            needed,
        });
    }
    for (name, bytes) in decide(Kind::Worktrees, sweep, candidates, report) {
        if sweep.dry_run {
            report.removed(Kind::Worktrees, bytes);
            continue;
        }
        match worktrees.remove_if_done(&name)? {
            Removal::Removed => report.removed(Kind::Worktrees, bytes),
            Removal::Kept(why) if why.contains("not merged") => {
                report.kept(Kind::Worktrees, needed::UNMERGED_BRANCH, bytes)
            }
            Removal::Kept(_) => report.kept(Kind::Worktrees, DIRTY, bytes),
        }
    }
    Ok(())
}
