//! The file adapter of [`super::Prune`]: the store's own kinds under a workspace's `.troupe/`
//! — done and quarantined messages, archived requests and their answers, earlier
//! conversations, recordings, and usage lines (compacted). Jobs, artifacts, events and
//! worktrees are pruned by `crate::gc`, which knows their records and locks.
//!
//! An item's time is its file's modification time: a message's send (renames keep it), a
//! recording's last call, a conversation's last line. Only regular files are considered: a
//! symlink or FIFO planted in a state folder is left where it is. Removals are unlinks with one
//! folder fsync per folder, so a gc killed midway leaves each file either there or gone, and
//! the next gc finishes.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use troupe_wire::UtcTime;

use super::{decide, needed, Candidate, Kind, Prune, Report, Sweep};
use crate::layout::Layout;
use crate::store::{durable, IoError, PortError};

/// A workspace's state under `.troupe/`, pruned kind by kind.
#[derive(Debug, Clone)]
pub struct FileState {
    layout: Layout,
    live_since: Option<UtcTime>,
}

impl FileState {
    pub fn new(layout: Layout) -> Self {
        Self {
            layout,
            live_since: None,
        }
    }

    /// A run is live and started at `since`: what it may be writing (recordings changed since)
    /// is kept.
    pub fn with_live_run(mut self, since: Option<UtcTime>) -> Self {
        self.live_since = since;
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

    /// Earlier conversations (`<agent>.<n>.jsonl`); the current `<agent>.jsonl` stays.
    fn prune_transcripts(&self, sweep: &Sweep, report: &mut Report) -> Result<(), IoError> {
        let dir = self.layout.transcripts_dir();
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

/// One regular file of a state folder.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: OsString,
    pub path: PathBuf,
    pub modified: UtcTime,
    pub bytes: u64,
}

/// The regular files of `dir` (not what symlinks name, not troupe's temp files `.…`, not
/// folders), with their times and sizes. A missing folder has none; a symlinked folder is
/// refused by reading nothing from it.
pub fn listing(dir: &Path) -> Result<Vec<Listed>, IoError> {
    let mut out = Vec::new();
    if !is_real_dir(dir)? {
        return Ok(out);
    }
    let entries = std::fs::read_dir(dir).map_err(|e| IoError::new("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| IoError::new("list", dir, e))?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(IoError::new("inspect", &path, e)),
        };
        if !meta.file_type().is_file() {
            continue;
        }
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        out.push(Listed {
            name,
            path,
            modified: utc_of(modified),
            bytes: meta.len(),
        });
    }
    Ok(out)
}

/// The real (not symlinked) subfolders of `dir`.
pub fn subfolders(dir: &Path) -> Result<Vec<PathBuf>, IoError> {
    let mut out = Vec::new();
    if !is_real_dir(dir)? {
        return Ok(out);
    }
    let entries = std::fs::read_dir(dir).map_err(|e| IoError::new("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| IoError::new("list", dir, e))?;
        let path = entry.path();
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

fn is_real_dir(dir: &Path) -> Result<bool, IoError> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) => Ok(meta.is_dir()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(IoError::new("inspect", dir, e)),
    }
}

/// A file time as troupe's UTC time (before 1970, or unreadable: the epoch).
pub fn utc_of(time: SystemTime) -> UtcTime {
    let at = chrono::DateTime::<chrono::Utc>::from(time).max(chrono::DateTime::UNIX_EPOCH);
    UtcTime::from_datetime(at)
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
