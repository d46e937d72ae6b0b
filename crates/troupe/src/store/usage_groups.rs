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
            super::usage::for_each_record_after(&self.path, &mut cursor.offset, each)
        })?;
        if whole {
            return Ok(super::usage::NewUsage::Read);
        }
        cursor.offset = 0;
        Ok(super::usage::NewUsage::Restarted)
    }
}
