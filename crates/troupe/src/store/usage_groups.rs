//! A usage log summed per agent, model and day: the finest grouping `troupe usage` reports
//! (its groups and each one's cost are made from these), read from `.troupe/usage.jsonl` a line
//! at a time or — for a shared team — summed by PostgreSQL ([`super::usage::TeamUsage`]).
//!
//! The model is part of every bucket because a price is per model: a group's cost is the sum of
//! its buckets' costs, never a price applied to a group that mixes models.

use std::collections::BTreeMap;
use std::path::Path;

use troupe_wire::UtcTime;

use super::usage::{corrupt, for_each_record, TokenCounts};
use super::IoError;

/// Where a record's tokens are added up: who, on which model, which UTC day.
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
