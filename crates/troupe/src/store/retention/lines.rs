//! Logs of JSON lines that each carry their time in `"at"` (the audit log), pruned line by line:
//! the rule engine decides over the lines, and the log is replaced whole by the lines that stay,
//! in one atomic replace, under the sidecar lock every appender opens the log under
//! (`journal::append_replaceable`). So an append waits for the replace and lands in the new log,
//! and a gc killed midway leaves the old log or the new one. A line whose time cannot be read is
//! kept (taken as new: nothing is removed on a guess); a torn tail, never a record, is left out.

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;
use troupe_wire::UtcTime;

use super::{decide, Candidate, Kind, Report, Sweep};
use crate::store::durable::StagedFile;
use crate::store::journal::{self, replace_lock};
use crate::store::{lock, IoError};

/// Removes the lines of the log at `path` that `kind`'s rule lets go. With `sweep.dry_run`
/// nothing is locked or written.
pub fn prune(path: &Path, kind: Kind, sweep: &Sweep, report: &mut Report) -> Result<(), IoError> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    let _replacing = if sweep.dry_run {
        None
    } else {
        Some(lock::lock_exclusive(&replace_lock(path))?)
    };
    let mut candidates = Vec::new();
    journal::for_each_line(path, |number, bytes| {
        candidates.push(Candidate {
            item: number,
            at: time_of(bytes).unwrap_or(sweep.now),
            bytes: bytes.len() as u64 + 1,
            needed: None,
        });
        Ok(())
    })?;
    let gone = decide(kind, sweep, candidates, report);
    if gone.is_empty() {
        return Ok(());
    }
    if !sweep.dry_run {
        let doomed: HashSet<usize> = gone.iter().map(|(number, _)| *number).collect();
        let mut staged = StagedFile::create(path)?;
        journal::for_each_line(path, |number, bytes| {
            if !doomed.contains(&number) {
                staged.write_all(bytes)?;
                staged.write_all(b"\n")?;
            }
            Ok(())
        })?;
        staged.place(path)?;
    }
    for (_, bytes) in gone {
        report.removed(kind, bytes);
    }
    Ok(())
}

/// The time in a line's `"at"`, if it has one troupe can read.
fn time_of(line: &[u8]) -> Option<UtcTime> {
    #[derive(Deserialize)]
    struct At {
        at: String,
    }
    let at: At = serde_json::from_slice(line).ok()?;
    UtcTime::parse(&at.at).ok()
}

#[cfg(test)]
mod tests;
