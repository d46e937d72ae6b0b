//! `troupe gc` and `[retention] auto` (issue 45): one pass over a team's state that removes
//! what its retention allows, and says what it removed and what it kept and why.
//!
//! [`collect`] runs every kind, each through the one rule engine
//! (`store::retention::decide`):
//! - the store's own kinds on files (`store::retention::files::FileState`: done and
//!   quarantined messages, archived requests and their answers, earlier conversations,
//!   recordings) and, for a shared team, on the database (its `Prune` adapter);
//! - [`jobs`]: finished jobs' records; [`artifacts`]: artifacts nothing refers to;
//!   [`worktrees`]: merged, clean worktrees and their branches.
//!
//! **Beside a live run.** A run that holds the workspace's run lock is live: everything it may
//! be writing (files changed since it started) and every worktree stay. Each kind takes the
//! lock its writers take (the protocol lock for the archive), so gc and a run never race on a
//! file. **Interrupted.** Every removal is an unlink or an atomic replace: a gc killed midway
//! leaves consistent state, and the next one finishes.

pub mod artifacts;
pub mod jobs;
pub mod size;
pub mod worktrees;

use std::sync::Arc;

use serde::Serialize;
use troupe_wire::UtcTime;

use crate::error::ErrorCode;
use crate::layout::Layout;
use crate::store::lock::{try_lock_exclusive, LockGuard};
use crate::store::lock_probe::{probe, LockState};
use crate::store::retention::files::{utc_of, FileState};
use crate::store::retention::{Policy, Prune, Report, Sweep};
use crate::store::{IoError, PortError};
use crate::worktree::WorktreeError;

/// Why a gc pass stopped. Whatever it removed before stays removed; the next pass goes on.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Port(#[from] PortError),
    #[error(transparent)]
    Worktree(#[from] WorktreeError),
    /// The pass's work on the blocking pool did not come back (a panic, a runtime shut down).
    #[error("{0}")]
    Stopped(#[from] crate::sync::Stopped),
}

impl ErrorCode for GcError {
    fn code(&self) -> &'static str {
        match self {
            Self::Io(e) => e.code(),
            Self::Port(e) => e.code(),
            Self::Worktree(e) => e.code(),
            Self::Stopped(_) => "gc_stopped",
        }
    }
}

/// What `troupe gc` writes as the run lock's holder while it closes the event stream's open
/// segment: a run starting meanwhile waits for it (`bootstrap`) instead of saying the
/// workspace is busy.
pub const ROLLING: &str = "troupe gc, closing the event stream's open segment";

/// [`ROLLING`] with this process's id.
pub fn rolling_holder() -> String {
    format!("{ROLLING} (pid {})", std::process::id())
}

/// Whether a run lock's holder is gc rolling the event stream.
pub fn is_rolling(holder: &str) -> bool {
    holder.starts_with(ROLLING)
}

/// Who holds the workspace's run lock while gc runs.
pub enum RunLock<'a> {
    /// gc was asked from outside a run (`troupe gc`): a run holding the lock is live.
    Probe,
    /// The run closing now holds it (`auto`): nothing else is live.
    Held(&'a LockGuard),
}

/// What a pass did, with the state's size before and after.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    #[serde(flatten)]
    pub report: Report,
    /// Bytes under `.troupe/` before and after (after = before with `--dry-run`).
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// When the live run beside which gc ran started, if one was.
    pub live_run_since: Option<String>,
}

/// One gc pass over `layout`'s state and `shared` (a shared team's database, or
/// `NoSharedState`), at `now`.
pub async fn collect(
    layout: &Layout,
    shared: Arc<dyn Prune>,
    policy: &Policy,
    now: UtcTime,
    dry_run: bool,
    lock: RunLock<'_>,
) -> Result<Outcome, GcError> {
    let sweep = Sweep {
        policy: policy.clone(),
        now,
        dry_run,
    };
    let live_run = match lock {
        RunLock::Held(_) => None,
        RunLock::Probe => live_run_since(layout)?,
    };
    // What changes after the pass began is never a candidate either way.
    let live_since = Some(live_run.unwrap_or(now));
    let bytes_before = state_bytes(layout).await?;
    let mut report = Report::new(dry_run);
    FileState::new(layout.clone())
        .with_live_run(live_since)
        .with_run_live(live_run.is_some())
        .prune(&sweep, &mut report)
        .await?;
    let held_by_us = matches!(lock, RunLock::Held(_));
    let (files, pass) = (layout.clone(), sweep.clone());
    let live = live_run.is_some();
    report = crate::sync::offload("gc", move || -> Result<Report, GcError> {
        jobs::prune(&files, &pass, &mut report)?;
        artifacts::prune(&files, live_since, &pass, &mut report)?;
        worktrees::prune(&files, live, &pass, &mut report)?;
        events(&files, held_by_us, live, &pass, &mut report)?;
        Ok(report)
    })
    .await??;
    shared.prune(&sweep, &mut report).await?;
    let bytes_after = if dry_run {
        bytes_before
    } else {
        state_bytes(layout).await?
    };
    Ok(Outcome {
        report,
        bytes_before,
        bytes_after,
        live_run_since: live_run.map(|t| t.to_string()),
    })
}

/// The event stream: its open segment is rolled into a closed one only by whoever holds the
/// run lock with no appender left — `troupe gc` when no run is live, taking the lock for the
/// roll alone, [`ROLLING`] written as the holder (a run starting meanwhile waits for it) — then
/// whole closed segments go. The closing run's own stream stays open (its `run_ended` is still
/// to come): it is rolled by the next `troupe gc` or by a run's start once large.
fn events(
    layout: &Layout,
    held_by_us: bool,
    live: bool,
    sweep: &Sweep,
    report: &mut Report,
) -> Result<(), GcError> {
    use crate::store::events::segments;
    // A dry run creates nothing: where no run ever took the lock there is none to take (and
    // no run's stream to roll).
    let lock_file_missing = sweep.dry_run && !layout.run_lock().exists();
    let mut taken = if !held_by_us && !live && layout.state_dir().is_dir() && !lock_file_missing {
        try_lock_exclusive(&layout.run_lock())?.ok()
    } else {
        None
    };
    // A dry run changes no file, the lock's own included.
    if let Some(guard) = taken.as_mut().filter(|_| !sweep.dry_run) {
        guard.write_holder(&rolling_holder())?;
    }
    segments::prune(layout, taken.as_ref(), sweep, report)?;
    Ok(())
}

/// The bytes under `.troupe/`, walked on the blocking pool.
async fn state_bytes(layout: &Layout) -> Result<u64, GcError> {
    let layout = layout.clone();
    Ok(crate::sync::offload("gc: the state's size", move || size::state_bytes(&layout)).await??)
}

/// When the run holding `layout`'s run lock took it (the lock file's time), if one does.
fn live_run_since(layout: &Layout) -> Result<Option<UtcTime>, IoError> {
    let path = layout.run_lock();
    match probe(&path)? {
        Some((LockState::Held { .. } | LockState::Unknown, _)) => {
            let modified = std::fs::symlink_metadata(&path)
                .and_then(|m| m.modified())
                .map_err(|e| IoError::new("inspect", &path, e))?;
            Ok(Some(utc_of(modified)))
        }
        _ => Ok(None),
    }
}
