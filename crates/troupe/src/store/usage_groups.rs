//! `.troupe/usage.jsonl` summed per agent, model and day ([`UsageBuckets`]), read a line at a
//! time: what `troupe usage` reports on (a distributed team's sums come from PostgreSQL instead,
//! [`super::usage::TeamUsage::buckets`]).

use std::path::Path;

use troupe_wire::UtcTime;

use super::usage::{corrupt, for_each_record, BucketKey, UsageBuckets};
use super::IoError;

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
