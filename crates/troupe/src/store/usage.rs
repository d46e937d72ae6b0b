//! `.troupe/usage.jsonl`: the token usage of every model response, one JSON line each.
//!
//! The log is how a person learns what a workspace has cost, per agent and per run, long after
//! the runs ended (`troupe status`). It is append-only ([`journal`]), so a crash mid-append
//! loses at most the line being written, and readers ignore that torn tail. Any other line that
//! does not parse is an error naming its line: totals silently short of a line would mislead.
//!
//! ```text
//! {"at":"2026-07-30T08:00:00.000Z","run_id":"…","agent":"lead","model":"gpt-4.1","purpose":"turn","prompt_tokens":1200,"completion_tokens":34,"total_tokens":1234}
//! ```
//!
//! A line with `"estimated":true` holds troupe's estimate for a server that reported no usage
//! (`crate::model::estimate`); lines without the field (every older log's) were counted by the
//! server.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::team_copy::CopyTo;
use super::{durable, journal, IoError};
use crate::clock::Clock;
use crate::layout::Layout;

/// One model response's token usage: one line of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageRecord {
    /// When the response was recorded (RFC 3339, UTC, milliseconds, `…Z`).
    pub at: String,
    /// The run the call belonged to: one `troupe run` (or other command that calls a model).
    pub run_id: String,
    pub agent: String,
    /// The model that answered, as the server named it.
    pub model: String,
    /// Why the call was made (`turn`, `summary`, `memory_extract`, …).
    pub purpose: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Of `prompt_tokens`, those read from the provider's prompt cache (Anthropic's
    /// `cache_read_input_tokens`, OpenAI's `prompt_tokens_details.cached_tokens`); left out of
    /// the line when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Of `prompt_tokens`, those written to the prompt cache (Anthropic's
    /// `cache_creation_input_tokens`); left out when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// The server reported no usage and these counts are troupe's estimate from the sizes of
    /// the request and the answer (`crate::model::estimate`); left out of the line when false
    /// (a line without it, as older logs have, was counted by the server).
    #[serde(default, skip_serializing_if = "is_false")]
    pub estimated: bool,
}

/// One line of the log as written: a [`UsageRecord`] and, on a line compaction wrote
/// (`usage_groups::compact`), how many responses it stands for (`"calls"`, left out when 1, so
/// every line of an older log reads unchanged). Kept out of [`UsageRecord`]: what reads the log
/// adds tokens, which a compacted line already sums; none counts responses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsageLine {
    pub at: String,
    pub run_id: String,
    pub agent: String,
    pub model: String,
    pub purpose: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub estimated: bool,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub calls: u64,
}

fn one() -> u64 {
    1
}

fn is_one(count: &u64) -> bool {
    *count == 1
}

impl UsageLine {
    /// The record, and how many responses it stands for.
    pub(crate) fn into_record(self) -> (UsageRecord, u64) {
        let record = UsageRecord {
            at: self.at,
            run_id: self.run_id,
            agent: self.agent,
            model: self.model,
            purpose: self.purpose,
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            total_tokens: self.total_tokens,
            cache_read_tokens: self.cache_read_tokens,
            cache_write_tokens: self.cache_write_tokens,
            estimated: self.estimated,
        };
        (record, self.calls)
    }

    /// Parses one line of the log (strictly: an unknown key is an error).
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        troupe_wire::strict::from_json_str(text, "a usage record").map_err(|e| e.to_string())
    }
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

impl UsageRecord {
    pub fn counts(&self) -> TokenCounts {
        TokenCounts {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            total_tokens: self.total_tokens,
            cache_read_tokens: self.cache_read_tokens,
            cache_write_tokens: self.cache_write_tokens,
            estimated_tokens: if self.estimated { self.total_tokens } else { 0 },
        }
    }
}

/// A team's token usage, as read: a workspace's `usage.jsonl` (`FileUsage`) or every
/// process's records in a shared team's table (the PostgreSQL adapter): what `troupe
/// status` and `troupe usage` show. (`FileUsage` is in `usage_groups.rs`.)
#[async_trait::async_trait]
pub trait TeamUsage: Send + Sync {
    async fn totals(&self) -> Result<UsageTotals, super::PortError>;
    /// The team's records made at or after `since` (all when `None`), summed per agent, model
    /// and day: what `troupe usage --store` reports.
    async fn buckets(
        &self,
        since: Option<troupe_wire::UtcTime>,
    ) -> Result<UsageBuckets, super::PortError>;
    /// Up to `limit` of the team's records after the row `after` (0: from the first), in the
    /// table's order, each with its row id (a file's: its line number): for a reader that folds
    /// them as they arrive (the page's cost chart).
    async fn records_after(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, UsageRecord)>, super::PortError>;

    /// Calls `each` with every record made since `cursor` stopped, and its `at`, once each,
    /// moving the cursor on: the fold of a reader that follows the usage as it grows (the
    /// page's cost chart) reads each record once. [`NewUsage::Restarted`] (nothing given to
    /// `each`) when the records read before are no longer the team's — a workspace's log
    /// replaced by a shorter one: the reader starts its fold again and calls once more.
    ///
    /// The default reads rows by id ([`Self::records_after`]). Ids are handed out when a row
    /// is inserted, not when it commits: a process may commit a row with a smaller id after a
    /// larger one was read. So it reads again from [`LATE_ROWS`] ids below the last one,
    /// skipping the ids already given: a row late by fewer than that many later inserts is
    /// still counted, once.
    async fn read_new(
        &self,
        cursor: &mut UsageCursor,
        each: &mut (dyn for<'r> FnMut(&'r UsageRecord, troupe_wire::UtcTime) + Send),
    ) -> Result<NewUsage, super::PortError> {
        let mut from = cursor.after.saturating_sub(LATE_ROWS);
        loop {
            let rows = self.records_after(from, ROWS_PER_READ).await?;
            let full = rows.len() == ROWS_PER_READ;
            for (id, record) in rows {
                from = id;
                if !cursor.recent.insert(id) {
                    continue;
                }
                let at = troupe_wire::UtcTime::parse(&record.at).map_err(|e| {
                    super::BackendError::new(
                        "store_corrupt",
                        format!("usage row {id} of the team: {e}"),
                    )
                })?;
                each(&record, at);
                cursor.after = cursor.after.max(id);
            }
            if !full {
                break;
            }
        }
        let low = cursor.after.saturating_sub(LATE_ROWS);
        cursor.recent = cursor.recent.split_off(&low);
        Ok(NewUsage::Read)
    }
}

/// How far below the last row id given a reader of usage rows reads again (see
/// [`TeamUsage::read_new`]).
pub const LATE_ROWS: i64 = 1_024;

/// How many rows one read of [`TeamUsage::read_new`]'s default takes.
const ROWS_PER_READ: usize = 5_000;

/// Where a reader of a team's usage stopped ([`TeamUsage::read_new`]); a new one is at the
/// start.
#[derive(Debug, Default)]
pub struct UsageCursor {
    /// A workspace's log: the byte offset after the last line given.
    pub(crate) offset: u64,
    /// A workspace's log: the (device, inode) of the file `offset` is in.
    pub(crate) file: Option<(u64, u64)>,
    /// A table: the largest row id given, and the ids given above `after - LATE_ROWS`.
    after: i64,
    recent: std::collections::BTreeSet<i64>,
}

/// What [`TeamUsage::read_new`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewUsage {
    /// Everything new was given.
    Read,
    /// The records read before are gone (the log was replaced): start the fold again.
    Restarted,
}

/// The usage log of one workspace, for appending. Opening it touches nothing on disk; the first
/// append creates the file.
pub struct UsageLog {
    path: PathBuf,
    /// Stamps each record's `at`, so tests control it.
    clock: Arc<dyn Clock>,
    /// Where each record is copied too (a shared team's database, so that its totals cover
    /// every process): after the append; a failed copy is reported once, the line stands.
    copy: CopyTo<UsageRecord>,
}

impl UsageLog {
    pub fn open(layout: &Layout, clock: Arc<dyn Clock>) -> Self {
        Self {
            path: layout.usage_log(),
            clock,
            copy: CopyTo::nowhere(),
        }
    }

    /// This log, copying every record to `copy` as well.
    pub fn with_copy(mut self, copy: CopyTo<UsageRecord>) -> Self {
        self.copy = copy;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The time to stamp a record made now with, as the log writes it.
    pub fn now(&self) -> String {
        self.clock.now().to_string()
    }

    /// Appends one record as one line, synced (creating the log, and `.troupe/` if need be),
    /// off the async threads; then copies it (see [`UsageLog::with_copy`]).
    pub async fn append(&self, record: &UsageRecord) -> Result<(), IoError> {
        crate::sync::blocking(|| self.append_line(record))?;
        self.copy.copy(record, &self.path.display()).await;
        Ok(())
    }

    pub(crate) fn append_line(&self, record: &UsageRecord) -> Result<(), IoError> {
        let mut line = serde_json::to_vec(record)
            .map_err(|e| IoError::new("encode a record for", &self.path, io::Error::other(e)))?;
        line.push(b'\n');
        if let Some(dir) = self.path.parent() {
            durable::ensure_real_dir(dir)?;
        }
        // Opened under the lock compaction replaces the log under (see `usage_groups::compact`).
        journal::append_replaceable(&self.path, &line, journal::Durability::Synced)
    }
}

/// Prompt, completion and total tokens, and of the prompt tokens those read from and written to
/// a prompt cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TokenCounts {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// Of `total_tokens`, those troupe estimated because the server reported none (records
    /// marked `estimated`); left out of JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub estimated_tokens: u64,
}

impl TokenCounts {
    /// Adds `other`, saturating: a hand-edited log with absurd numbers must not panic a reader.
    pub fn add(&mut self, other: TokenCounts) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
        self.estimated_tokens = self.estimated_tokens.saturating_add(other.estimated_tokens);
    }
}

/// Where a record's tokens are added up for `troupe usage`: who, on which model, which UTC day.
/// The model is part of every bucket because a price is per model: a group's cost is the sum of
/// its buckets' costs, never one price applied to tokens of several models.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BucketKey {
    pub agent: String,
    pub model: String,
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
}

/// Usage summed per [`BucketKey`], in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageBuckets {
    pub buckets: BTreeMap<BucketKey, TokenCounts>,
}

impl UsageBuckets {
    /// Adds `counts` to `key`'s bucket.
    pub fn add(&mut self, key: BucketKey, counts: TokenCounts) {
        self.buckets.entry(key).or_default().add(counts);
    }
}

/// One run's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RunTotals {
    pub run_id: String,
    #[serde(flatten)]
    pub counts: TokenCounts,
}

/// What the whole log adds up to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UsageTotals {
    pub total: TokenCounts,
    /// Per agent, by name.
    pub agents: BTreeMap<String, TokenCounts>,
    /// How many distinct runs recorded usage.
    pub runs: usize,
    /// The run of the last line, with everything it recorded; `None` for an empty log.
    pub latest_run: Option<RunTotals>,
}

/// Adds up the log at `path`. A missing log is all zeros (and is not created); the torn last
/// line of an interrupted append is ignored; any other line that is not a record is an error
/// naming the line. Only a regular file is read, never through a symlink.
pub fn read_totals(path: &Path) -> Result<UsageTotals, IoError> {
    let mut totals = UsageTotals::default();
    let mut per_run: BTreeMap<String, TokenCounts> = BTreeMap::new();
    let mut latest = None;
    for_each_record(path, |_, record| {
        let counts = record.counts();
        totals.total.add(counts);
        totals
            .agents
            .entry(record.agent.clone())
            .or_default()
            .add(counts);
        per_run
            .entry(record.run_id.clone())
            .or_default()
            .add(counts);
        latest = Some(record.run_id);
        Ok(())
    })?;
    totals.runs = per_run.len();
    totals.latest_run = latest.map(|run_id| RunTotals {
        counts: per_run.get(&run_id).copied().unwrap_or_default(),
        run_id,
    });
    Ok(totals)
}

/// Calls `each` with every record of the log at `path` and its line number, in order, reading it
/// a line at a time (a log of any size). A missing log has none; a torn tail is ignored; blank
/// lines are skipped; any other line that is not a record is an error naming the line.
pub fn for_each_record(
    path: &Path,
    mut each: impl FnMut(usize, UsageRecord) -> Result<(), IoError>,
) -> Result<(), IoError> {
    journal::for_each_line(path, |number, bytes| {
        let line = std::str::from_utf8(bytes)
            .map_err(|_| corrupt(path, format!("line {number}: it is not UTF-8")))?;
        if line.trim().is_empty() {
            return Ok(());
        }
        let (record, _) = UsageLine::parse(line)
            .map_err(|e| corrupt(path, format!("line {number}: {e}")))?
            .into_record();
        each(number, record)
    })?;
    Ok(())
}

/// Calls `each` with every complete record of the log at `path` from byte `*offset` on (where
/// an earlier call stopped) and its `at`, moving `*offset` past each line read: a reader that
/// follows the log reads each line once, and a torn tail is left for the next call. `Ok(false)`
/// when the log is now shorter than `*offset` (it was replaced: start again from 0); a missing
/// log has nothing. A line that is not a record, or whose `at` is not troupe's UTC time, is an
/// error naming its byte offset, and `*offset` stays before it.
///
/// `file` is the identity (device, inode) of the log the offset belongs to: a log replaced by
/// compaction is another file, whatever its length, and is read again from the start
/// (`Ok(false)`).
pub fn for_each_record_after(
    path: &Path,
    offset: &mut u64,
    file_id: &mut Option<(u64, u64)>,
    mut each: impl FnMut(&UsageRecord, troupe_wire::UtcTime),
) -> Result<bool, IoError> {
    use std::io::{BufRead, Seek};
    use std::os::unix::fs::MetadataExt;
    let Some(file) = super::read::open_regular(path, super::read::Links::Refuse)? else {
        return Ok(*offset == 0);
    };
    let meta = file
        .metadata()
        .map_err(|e| IoError::new("inspect", path, e))?;
    let id = (meta.dev(), meta.ino());
    if meta.len() < *offset || file_id.is_some_and(|known| known != id) {
        *file_id = None;
        return Ok(false);
    }
    *file_id = Some(id);
    let mut reader = io::BufReader::new(file);
    reader
        .seek(io::SeekFrom::Start(*offset))
        .map_err(|e| IoError::new("read", path, e))?;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| IoError::new("read", path, e))?;
        if read == 0 || line.last() != Some(&b'\n') {
            return Ok(true);
        }
        let at = *offset;
        let text = std::str::from_utf8(&line[..read - 1])
            .map_err(|_| corrupt(path, format!("byte {at}: the line is not UTF-8")))?;
        if !text.trim().is_empty() {
            let (record, _) = UsageLine::parse(text)
                .map_err(|e| corrupt(path, format!("byte {at}: {e}")))?
                .into_record();
            let time = troupe_wire::UtcTime::parse(&record.at)
                .map_err(|e| corrupt(path, format!("byte {at}: {e}")))?;
            each(&record, time);
        }
        *offset += u64::try_from(read).unwrap_or(u64::MAX);
    }
}

/// A log at `path` that is not what it should be, and why (`line 3: …`).
pub(super) fn corrupt(path: &Path, reason: String) -> IoError {
    IoError::new(
        "read the usage log",
        path,
        io::Error::new(io::ErrorKind::InvalidData, reason),
    )
}
