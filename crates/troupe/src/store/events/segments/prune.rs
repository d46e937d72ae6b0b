//! Retention of the event stream (`troupe gc`): whole closed segments, aged by their last
//! event, through the one rule engine ([`retention::decide`]).
//!
//! With the run lock (no run is live) the open segment is rolled first, so that its events
//! age like the others; without it (a run appends) the open segment is left alone and reported
//! kept. Before the newest closed segment is removed, its last `seq` is written to
//! `.troupe/events/last-seq`, so the next run continues after it. Segments are removed oldest
//! first, one unlink each: a gc killed midway leaves the newer ones, and the next gc finishes.
//! With `dry_run` nothing on disk changes — not even a roll: the open segment is judged as the
//! one segment a roll would make of it.

use troupe_wire::UtcTime;

use super::super::read::last_event;
use super::super::EventLogError;
use super::read::last_at;
use super::{as_io, closed, roll, size_of, write_last_seq, SegmentInfo};
use crate::layout::Layout;
use crate::store::durable;
use crate::store::lock::LockGuard;
use crate::store::retention::{self, needed, Candidate, Kind, Report, Sweep};
use crate::store::IoError;

/// What a candidate of the events is.
enum Item {
    Closed(SegmentInfo),
    /// The open segment as a roll would close it (a dry run with the run lock).
    Open,
}

/// Prunes the event stream under `sweep`, recording every segment in `report`. `run_lock`:
/// the workspace's run lock when the caller holds it (then the open segment is rolled first),
/// `None` while a run is live. A corrupt stream is an `InvalidData` error naming the file.
pub fn prune(
    layout: &Layout,
    run_lock: Option<&LockGuard>,
    sweep: &Sweep,
    report: &mut Report,
) -> Result<(), IoError> {
    let mut candidates = Vec::new();
    let open_bytes = size_of(&layout.events_log())?;
    match run_lock {
        Some(lock) if !sweep.dry_run => {
            roll(layout, lock).map_err(as_io)?;
        }
        Some(_) => {
            if let Some(at) = open_to_close(layout).map_err(as_io)? {
                candidates.push(Candidate {
                    item: Item::Open,
                    at,
                    bytes: open_bytes,
                    needed: None,
                });
            }
        }
        None if open_bytes > 0 => report.kept(Kind::Events, needed::OPEN_SEGMENT, open_bytes),
        None => {}
    }
    let closed = closed(layout).map_err(as_io)?;
    for segment in closed.segments {
        let Some(at) = last_at(&segment)? else {
            continue;
        };
        candidates.push(Candidate {
            bytes: segment.bytes,
            item: Item::Closed(segment),
            at,
            needed: None,
        });
    }
    let newest = candidates
        .iter()
        .filter_map(|c| match &c.item {
            Item::Closed(s) => Some(s.last),
            Item::Open => None,
        })
        .max();
    let mut going: Vec<(SegmentInfo, u64)> = Vec::new();
    for (item, bytes) in retention::decide(Kind::Events, sweep, candidates, report) {
        match item {
            Item::Closed(segment) => going.push((segment, bytes)),
            Item::Open => report.removed(Kind::Events, bytes),
        }
    }
    going.sort_by_key(|(s, _)| s.first);
    if sweep.dry_run {
        for (_, bytes) in going {
            report.removed(Kind::Events, bytes);
        }
        return Ok(());
    }
    if going.iter().any(|(s, _)| Some(s.last) == newest) {
        write_last_seq(layout, closed.through)?;
    }
    for (segment, bytes) in going {
        if durable::remove(&segment.path)? {
            report.removed(Kind::Events, bytes);
        }
    }
    Ok(())
}

/// The time of the open segment's last event, when it holds one a roll would close.
fn open_to_close(layout: &Layout) -> Result<Option<UtcTime>, EventLogError> {
    let through = closed(layout)?.through;
    Ok(last_event(&layout.events_log())?
        .filter(|e| e.seq > through)
        .map(|e| e.at))
}
