//! `.troupe/usage.jsonl` summed per agent, model and day ([`UsageBuckets`]), read a line at a
//! time: what `troupe usage` reports on (a shared team's sums come from PostgreSQL instead,
//! [`super::usage::TeamUsage::buckets`]); [`FileUsage`] is the file adapter of that port.

use std::path::{Path, PathBuf};

use troupe_wire::UtcTime;

use super::usage::{corrupt, for_each_record, BucketKey, UsageBuckets};
use super::IoError;
use crate::layout::Layout;

/// The log at `path` summed per agent, model and day, counting only records made at or after
/// `since` when given. Read a line at a time; a missing log has none (and is not created); a
/// torn tail is ignored; a line that is not a record, or whose `at` is not troupe's UTC time, is
/// an error naming the line.
pub fn read_buckets(path: &Path, since: Option<UtcTime>) -> Result<UsageBuckets, IoError> {
    let mut buckets = UsageBuckets::default();
    for_each_record(path, |line, record| {
        let at =
            UtcTime::parse(&record.at).map_err(|e| corrupt(path, format!("line {line}: {e}")))?;
        if since.is_some_and(|since| at < since) {
            return Ok(());
        }
        let counts = record.counts();
        let day = record.at.get(..10).unwrap_or_default().to_owned();
        buckets.add(
            BucketKey {
                agent: record.agent,
                model: record.model,
                day,
            },
            counts,
        );
        Ok(())
    })?;
    Ok(buckets)
}

/// A workspace's token usage, read from `.troupe/usage.jsonl` (nothing there: zeros). Reading
/// creates nothing.
#[derive(Debug, Clone)]
pub struct FileUsage {
    path: PathBuf,
}

impl FileUsage {
    pub fn open(layout: &Layout) -> Self {
        Self {
            path: layout.usage_log(),
        }
    }
}

#[async_trait::async_trait]
impl super::usage::TeamUsage for FileUsage {
    async fn totals(&self) -> Result<super::usage::UsageTotals, super::PortError> {
        Ok(crate::sync::blocking(|| {
            super::usage::read_totals(&self.path)
        })?)
    }

    async fn buckets(
        &self,
        since: Option<troupe_wire::UtcTime>,
    ) -> Result<UsageBuckets, super::PortError> {
        Ok(crate::sync::blocking(|| read_buckets(&self.path, since))?)
    }

    async fn records_after(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, super::usage::UsageRecord)>, super::PortError> {
        let mut rows = Vec::new();
        crate::sync::blocking(|| {
            super::usage::for_each_record(&self.path, |line, record| {
                let line = i64::try_from(line).unwrap_or(i64::MAX);
                if line > after && rows.len() < limit {
                    rows.push((line, record));
                }
                Ok(())
            })
        })?;
        Ok(rows)
    }

    /// The log from the byte where the cursor stopped: each line is read once.
    async fn read_new(
        &self,
        cursor: &mut super::usage::UsageCursor,
        each: &mut (dyn for<'r> FnMut(&'r super::usage::UsageRecord, troupe_wire::UtcTime) + Send),
    ) -> Result<super::usage::NewUsage, super::PortError> {
        let whole = crate::sync::blocking(|| {
            super::usage::for_each_record_after(
                &self.path,
                &mut cursor.offset,
                &mut cursor.file,
                each,
            )
        })?;
        if whole {
            return Ok(super::usage::NewUsage::Read);
        }
        cursor.offset = 0;
        Ok(super::usage::NewUsage::Restarted)
    }
}

/// What [`compact`] did (with `dry_run`: would do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Compacted {
    /// Lines of the log before.
    pub lines_before: u64,
    /// Lines fewer after (old lines merged into per-day totals).
    pub lines_removed: u64,
    /// Bytes fewer after.
    pub bytes_removed: u64,
    /// Per-day total lines written (each standing for one or more old lines).
    pub totals_written: u64,
}

/// What a compacted line sums: one per UTC day, run, agent, model, purpose and whether the
/// counts were estimated — every key a reader groups or filters by (`read_totals`: agent, run;
/// `read_buckets`: agent, model, day), so every sum they print stays what it was.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    day: String,
    run_id: String,
    agent: String,
    model: String,
    purpose: String,
    estimated: bool,
}

/// One group's sums so far, and where its last line was.
struct Group {
    line: super::usage::UsageLine,
    last_seen: usize,
}

/// Compacts the usage log at `path`: the lines made before `before` are replaced by per-day
/// totals, one line per [`GroupKey`], their counts summed and `"calls"` saying how many
/// responses each stands for. Every total and bucket `troupe usage` and `troupe status` print
/// is the same before and after (and for any `since` on a day boundary: a total keeps the `at`
/// of its group's last line, on the same day).
///
/// The new log holds the totals first, in the order of their groups' last lines, then the kept
/// lines unchanged, in their order. The log's last line is always kept as it is, even when it is
/// old, so the run of the last line (`latest_run`) stays the same.
///
/// Done under the lock every appender takes to open the log ([`super::journal::replace_lock`]), from
/// the read to an atomic replace ([`durable::StagedFile`]): an append waits for it and lands in
/// the new log, and a kill midway leaves the old log or the new one. Nothing is written with
/// `dry_run`, nor when no line would go. A missing log is nothing to do; a torn tail is left out
/// (it was never a record).
pub fn compact(path: &Path, before: UtcTime, dry_run: bool) -> Result<Compacted, IoError> {
    use std::collections::BTreeMap;
    if !path.exists() {
        return Ok(Compacted::default());
    }
    let _replacing = super::lock::lock_exclusive(&super::journal::replace_lock(path))?;
    let mut lines = 0usize;
    // First pass: count the lines, and find the last one (kept whatever its age).
    super::journal::for_each_line(path, |number, bytes| {
        if !bytes.trim_ascii().is_empty() {
            lines = number;
        }
        Ok(())
    })?;
    let mut groups: BTreeMap<GroupKey, Group> = BTreeMap::new();
    let mut old_bytes: u64 = 0;
    let mut kept_lines: u64 = 0;
    let mut total_lines: u64 = 0;
    super::journal::for_each_line(path, |number, bytes| {
        old_bytes += bytes.len() as u64 + 1;
        let Some((line, at)) = parse_line(path, number, bytes)? else {
            return Ok(());
        };
        total_lines += 1;
        if number == lines || at >= before {
            kept_lines += 1;
            return Ok(());
        }
        let key = GroupKey {
            day: line.at.get(..10).unwrap_or_default().to_owned(),
            run_id: line.run_id.clone(),
            agent: line.agent.clone(),
            model: line.model.clone(),
            purpose: line.purpose.clone(),
            estimated: line.estimated,
        };
        match groups.get_mut(&key) {
            Some(group) => {
                add_line(&mut group.line, line);
                group.last_seen = number;
            }
            None => {
                groups.insert(
                    key,
                    Group {
                        line,
                        last_seen: number,
                    },
                );
            }
        }
        Ok(())
    })?;
    let written = groups.len() as u64;
    let old_lines = total_lines - kept_lines;
    let mut outcome = Compacted {
        lines_before: total_lines,
        lines_removed: old_lines - written,
        bytes_removed: 0,
        totals_written: written,
    };
    if outcome.lines_removed == 0 {
        return Ok(outcome);
    }
    let mut totals: Vec<Group> = groups.into_values().collect();
    totals.sort_by_key(|g| g.last_seen);
    let mut text = Vec::new();
    for group in &totals {
        serde_json::to_writer(&mut text, &group.line).map_err(|e| {
            IoError::new("encode a usage total for", path, std::io::Error::other(e))
        })?;
        text.push(b'\n');
    }
    let mut new_bytes = text.len() as u64;
    let mut staged = (!dry_run)
        .then(|| super::durable::StagedFile::create(path))
        .transpose()?;
    if let Some(staged) = staged.as_mut() {
        staged.write_all(&text)?;
    }
    super::journal::for_each_line(path, |number, bytes| {
        let Some((_, at)) = parse_line(path, number, bytes)? else {
            return Ok(());
        };
        if number == lines || at >= before {
            new_bytes += bytes.len() as u64 + 1;
            if let Some(staged) = staged.as_mut() {
                staged.write_all(bytes)?;
                staged.write_all(b"\n")?;
            }
        }
        Ok(())
    })?;
    outcome.bytes_removed = old_bytes.saturating_sub(new_bytes);
    if let Some(mut staged) = staged {
        staged.place(path)?;
    }
    Ok(outcome)
}

/// A line of the log and its time, or `None` for a blank one.
fn parse_line(
    path: &Path,
    number: usize,
    bytes: &[u8],
) -> Result<Option<(super::usage::UsageLine, UtcTime)>, IoError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| corrupt(path, format!("line {number}: it is not UTF-8")))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let line = super::usage::UsageLine::parse(text)
        .map_err(|e| corrupt(path, format!("line {number}: {e}")))?;
    let at = UtcTime::parse(&line.at).map_err(|e| corrupt(path, format!("line {number}: {e}")))?;
    Ok(Some((line, at)))
}

/// Adds `line`'s counts to `into`, which takes its `at` (the later line's).
fn add_line(into: &mut super::usage::UsageLine, line: super::usage::UsageLine) {
    let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
    add(&mut into.prompt_tokens, line.prompt_tokens);
    add(&mut into.completion_tokens, line.completion_tokens);
    add(&mut into.total_tokens, line.total_tokens);
    add(&mut into.cache_read_tokens, line.cache_read_tokens);
    add(&mut into.cache_write_tokens, line.cache_write_tokens);
    add(&mut into.calls, line.calls);
    into.at = line.at;
}

#[cfg(test)]
#[path = "usage_compact_tests.rs"]
mod tests;
