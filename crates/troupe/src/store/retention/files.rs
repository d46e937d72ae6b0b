//! The file adapter of [`super::Prune`]: the store's own kinds under a workspace's `.troupe/`
//! — done and quarantined messages, archived requests and their answers, earlier
//! conversations, recordings, usage lines (compacted), audit lines and finished board tasks. Jobs, artifacts, events and
//! worktrees are pruned by `crate::gc`, which knows their records and locks.
//!
//! An item's time is its file's modification time: a message's send (renames keep it), a
//! recording's last call, a conversation's last line. Only regular files are considered: a
//! symlink or FIFO planted in a state folder is left where it is. Removals are unlinks with one
//! folder fsync per folder, so a gc killed midway leaves each file either there or gone, and
//! the next gc finishes.

use std::ffi::OsString;
use std::path::Path;

use troupe_wire::UtcTime;

pub use super::listing::{listing, subfolders, utc_of, Listed};
use super::{decide, needed, Candidate, Kind, Prune, Report, Sweep};
use crate::layout::Layout;
use crate::store::{durable, IoError, PortError};

/// A workspace's state under `.troupe/`, pruned kind by kind.
#[derive(Debug, Clone)]
pub struct FileState {
    layout: Layout,
    live_since: Option<UtcTime>,
    run_live: bool,
}

impl FileState {
    pub fn new(layout: Layout) -> Self {
        Self {
            layout,
            live_since: None,
            run_live: false,
        }
    }

    /// A run is live and started at `since`: what it may be writing (recordings changed since)
    /// is kept.
    pub fn with_live_run(mut self, since: Option<UtcTime>) -> Self {
        self.live_since = since;
        self
    }

    /// Another process's run is live: no current conversation is rewritten (it may append).
    pub fn with_run_live(mut self, live: bool) -> Self {
        self.run_live = live;
        self
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    fn prune_blocking(&self, sweep: &Sweep, report: &mut Report) -> Result<(), IoError> {
        self.prune_mailboxes(sweep, report)?;
        crate::store::protocol::retention::prune(&self.layout, sweep, report)?;
        self.prune_transcripts(sweep, report)?;
        self.prune_recordings(sweep, report)?;
        self.compact_usage(sweep, report)?;
        super::lines::prune(&self.layout.audit_log(), Kind::Audit, sweep, report)?;
        crate::store::tasks::file::prune(&self.layout, sweep, report)
            .map_err(|e| board_error(&self.layout, e))?;
        Ok(())
    }

    /// Usage lines past the age become per-day totals (`usage_groups::compact`): never removed,
    /// so every total `troupe usage` prints stays what it was.
    fn compact_usage(&self, sweep: &Sweep, report: &mut Report) -> Result<(), IoError> {
        let Some(cut) = sweep.cutoff(Kind::Usage) else {
            return Ok(());
        };
        let done =
            crate::store::usage_groups::compact(&self.layout.usage_log(), cut, sweep.dry_run)?;
        report.removed_many(Kind::Usage, done.lines_removed, done.bytes_removed);
        let kept = done
            .lines_before
            .saturating_sub(done.lines_removed + done.totals_written);
        report.kept_many(Kind::Usage, super::WITHIN_AGE, kept, 0);
        report.kept_many(Kind::Usage, needed::USAGE_TOTALS, done.totals_written, 0);
        Ok(())
    }

    fn prune_mailboxes(&self, sweep: &Sweep, report: &mut Report) -> Result<(), IoError> {
        for agent in subfolders(&self.layout.mailboxes_dir())? {
            for (folder, kind) in [("done", Kind::Messages), ("quarantine", Kind::Quarantine)] {
                let dir = agent.join(folder);
                let files = listing(&dir)?;
                prune_folder(&dir, kind, sweep, report, files, |_| None)?;
            }
        }
        Ok(())
    }

    /// Earlier conversations (`<agent>.<n>.jsonl`); the current `<agent>.jsonl` stays, but
    /// what it holds before its last compaction boundary is set aside first (see
    /// [`set_aside_compacted`]).
    fn prune_transcripts(&self, sweep: &Sweep, report: &mut Report) -> Result<(), IoError> {
        let dir = self.layout.transcripts_dir();
        if !sweep.dry_run && !self.run_live {
            for file in listing(&dir)? {
                if !is_earlier_conversation(&file.name) {
                    set_aside_compacted(&file.path)?;
                }
            }
        }
        let files = listing(&dir)?;
        prune_folder(&dir, Kind::Transcripts, sweep, report, files, |file| {
            (!is_earlier_conversation(&file.name)).then_some(needed::CURRENT)
        })
    }

    fn prune_recordings(&self, sweep: &Sweep, report: &mut Report) -> Result<(), IoError> {
        let dir = self.layout.recordings_dir();
        let files = listing(&dir)?;
        let live = self.live_since;
        prune_folder(&dir, Kind::Recordings, sweep, report, files, |file| {
            live.is_some_and(|since| file.modified >= since)
                .then_some(needed::LIVE_RUN)
        })
    }
}

/// A board gc cannot read is left whole, and said so (its error names the file).
fn board_error(layout: &Layout, error: crate::store::tasks::TaskError) -> IoError {
    match error {
        crate::store::tasks::TaskError::Io(e) => e,
        other => IoError::new(
            "prune the task board",
            &layout.tasks_dir(),
            std::io::Error::new(std::io::ErrorKind::InvalidData, other.to_string()),
        ),
    }
}

/// Less than this before a conversation's last compaction boundary is left where it is.
pub const SET_ASIDE_ABOVE: usize = 256 * 1024;

/// A current conversation keeps growing across runs even though compaction bounds what is
/// sent: everything before its last compaction boundary is history no load reads (the
/// boundary is followed by the whole compacted conversation). That part moves to an earlier
/// conversation file, `<agent>.<n>.jsonl`, which the `transcripts` rule then ages out: first
/// the earlier file is created whole, then the current one replaced by what follows the
/// boundary (one atomic step each; killed between, the earlier file merely repeats history).
/// Only while no run is live: a run appends to the current file.
fn set_aside_compacted(path: &Path) -> Result<(), IoError> {
    let Some(bytes) = crate::store::journal::read_complete(path)? else {
        return Ok(());
    };
    let mut last_boundary = None;
    let mut at = 0;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        if line.starts_with(b"{\"compaction\"") {
            last_boundary = Some(at);
        }
        at += line.len();
    }
    let Some(cut) = last_boundary.filter(|cut| *cut >= SET_ASIDE_ABOVE) else {
        return Ok(());
    };
    let (Some(dir), Some(stem)) = (path.parent(), path.file_stem()) else {
        return Ok(());
    };
    let stem = stem.to_string_lossy();
    let mut kept = false;
    for n in next_earlier_number(dir, &stem)?..=u64::MAX {
        let earlier = dir.join(format!("{stem}.{n}.jsonl"));
        match durable::create_new(&earlier, &bytes[..cut]) {
            Ok(()) => {
                kept = true;
                break;
            }
            Err(e) if e.source.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    // The history is cut from the current file only once it is kept elsewhere.
    if !kept {
        return Err(IoError::new(
            "set aside",
            path,
            std::io::Error::other("no number is left for an earlier conversation"),
        ));
    }
    durable::replace(path, &bytes[cut..])
}

/// The number for `stem`'s next earlier conversation in `dir`: one past the highest of its
/// `<stem>.<n>.jsonl` files (1 when there is none). Numbers grow with age, and gc removing
/// the oldest never makes a number come back while a later one is kept; nor does choosing
/// one try every number taken. (Whoever creates the file still refuses to overwrite one.)
pub fn next_earlier_number(dir: &Path, stem: &str) -> Result<u64, IoError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(1),
        Err(e) => return Err(IoError::new("list", dir, e)),
    };
    let mut highest = 0u64;
    for entry in entries {
        let entry = entry.map_err(|e| IoError::new("list", dir, e))?;
        let name = entry.file_name();
        let n = name
            .to_str()
            .and_then(|name| name.strip_suffix(".jsonl"))
            .and_then(|rest| rest.strip_prefix(stem))
            .and_then(|rest| rest.strip_prefix('.'))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok());
        highest = highest.max(n.unwrap_or(0));
    }
    Ok(highest.saturating_add(1))
}

/// `lead.3.jsonl`: an agent's conversation set aside by a fresh start. Agent names have no dots.
pub fn is_earlier_conversation(name: &OsString) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    name.strip_suffix(".jsonl")
        .and_then(|stem| stem.rsplit_once('.'))
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Runs the rule engine over the files of one folder and removes what it allows.
pub fn prune_folder(
    dir: &Path,
    kind: Kind,
    sweep: &Sweep,
    report: &mut Report,
    files: Vec<Listed>,
    needed: impl Fn(&Listed) -> Option<&'static str>,
) -> Result<(), IoError> {
    let candidates = files
        .into_iter()
        .map(|file| Candidate {
            at: file.modified,
            bytes: file.bytes,
            needed: needed(&file),
            item: file.name,
        })
        .collect();
    let gone = decide(kind, sweep, candidates, report);
    if gone.is_empty() {
        return Ok(());
    }
    if !sweep.dry_run {
        let names: Vec<OsString> = gone.iter().map(|(name, _)| name.clone()).collect();
        durable::remove_in(dir, &names)?;
    }
    for (_, bytes) in gone {
        report.removed(kind, bytes);
    }
    Ok(())
}

#[async_trait::async_trait]
impl Prune for FileState {
    async fn prune(&self, sweep: &Sweep, report: &mut Report) -> Result<(), PortError> {
        crate::sync::blocking(|| self.prune_blocking(sweep, report))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
