//! What the team has cost: one fold of its usage records — the workspace's
//! `.troupe/usage.jsonl`, or a shared team's table — followed as they are appended, giving both
//! the per-agent costs of `/api/state` and its `cost_series`, the page's cost-over-time chart.
//!
//! The records are read once each: the fold remembers where it stopped (a byte offset in the
//! log, or the last row id of the table) and reads only what came after, at every `/api/state`.
//! Row ids are handed out when a row is inserted, not when it commits: a process may commit a
//! row with a smaller id after a larger one was read. So the table is read again from
//! [`LATE_ROWS`] ids below the last one, skipping the ids already folded: a row late by fewer
//! than that many later inserts is still counted, once.
//! So a long run costs one read of its usage, not one per refresh, and the series stays
//! [`MAX_POINTS`] points long however many calls were made ([`CostSeries`]). Per-agent costs
//! and the series come from the same sums, so the chart's last total is the sum of the agents'
//! costs.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use troupe::layout::Layout;
use troupe::prices::series::CostSeries;
use troupe::prices::PriceTable;
use troupe::store::usage::{for_each_record_after, TeamUsage};
use troupe::wire::UtcTime;

use super::history::ReadError;

/// The most points of the chart.
pub const MAX_POINTS: usize = 120;

/// How many rows of a shared team's table one read takes.
const ROWS: usize = 5_000;

/// How far below the last id folded a shared team's table is read again (see the module).
pub const LATE_ROWS: i64 = 1_024;

/// Where the records come from, and where the reader stopped.
enum Source {
    /// The workspace's log, and the byte offset after the last line folded.
    File { path: PathBuf, offset: u64 },
    /// A shared team's table, and the id of the last row folded.
    Shared {
        usage: Arc<dyn TeamUsage>,
        after: i64,
        /// The ids folded above `after - LATE_ROWS`.
        recent: std::collections::BTreeSet<i64>,
    },
}

pub struct CostFold {
    source: Source,
    /// The prices the fold started with, to start again after the log was replaced.
    prices: PriceTable,
    series: CostSeries,
}

impl CostFold {
    /// A fold of the workspace's usage log (nothing read yet).
    pub fn file(layout: &Layout, prices: PriceTable) -> Self {
        Self::new(
            Source::File {
                path: layout.usage_log(),
                offset: 0,
            },
            prices,
        )
    }

    /// A fold of a shared team's usage (nothing read yet).
    pub fn shared(usage: Arc<dyn TeamUsage>, prices: PriceTable) -> Self {
        Self::new(
            Source::Shared {
                usage,
                after: 0,
                recent: std::collections::BTreeSet::new(),
            },
            prices,
        )
    }

    fn new(source: Source, prices: PriceTable) -> Self {
        Self {
            source,
            series: CostSeries::new(prices.clone(), MAX_POINTS),
            prices,
        }
    }

    /// Folds the records appended since the last call.
    pub async fn refresh(&mut self) -> Result<(), ReadError> {
        let series = &mut self.series;
        match &mut self.source {
            Source::File { path, offset } => {
                let read = |e: troupe::store::IoError| ReadError {
                    code: "storage_error",
                    message: e.to_string(),
                };
                let whole =
                    for_each_record_after(path, offset, |r, at| series.add(r, at)).map_err(read)?;
                if !whole {
                    // The log was replaced by a shorter one: its records are not those folded.
                    *offset = 0;
                    *series = CostSeries::new(self.prices.clone(), MAX_POINTS);
                    for_each_record_after(path, offset, |r, at| series.add(r, at)).map_err(read)?;
                }
            }
            Source::Shared {
                usage,
                after,
                recent,
            } => {
                let mut from = after.saturating_sub(LATE_ROWS);
                loop {
                    let rows = usage
                        .records_after(from, ROWS)
                        .await
                        .map_err(|e| ReadError {
                            code: troupe::error::ErrorCode::code(&e),
                            message: e.to_string(),
                        })?;
                    let full = rows.len() == ROWS;
                    for (id, record) in rows {
                        from = id;
                        if !recent.insert(id) {
                            continue;
                        }
                        let at = UtcTime::parse(&record.at).map_err(|e| ReadError {
                            code: "storage_error",
                            message: format!("usage row {id} of the team: {e}"),
                        })?;
                        series.add(&record, at);
                        *after = (*after).max(id);
                    }
                    if !full {
                        break;
                    }
                }
                let low = after.saturating_sub(LATE_ROWS);
                *recent = recent.split_off(&low);
            }
        }
        Ok(())
    }

    pub fn series(&self) -> &CostSeries {
        &self.series
    }

    /// The series as `/api/state` shows it (`cost_series`).
    pub fn json(&self) -> Value {
        let series = &self.series;
        json!({
            "points": series.points(),
            "total_usd": series.total(),
            "unpriced_models": series.unpriced_models().collect::<Vec<_>>(),
            "slot_ms": series.slot_ms(),
            "max_points": MAX_POINTS,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use troupe::store::usage::{UsageBuckets, UsageRecord, UsageTotals};

    use super::*;

    /// A team table whose rows become visible out of id order, as commits can.
    #[derive(Default)]
    struct Table(Mutex<Vec<(i64, UsageRecord)>>);

    #[async_trait::async_trait]
    impl TeamUsage for Table {
        async fn totals(&self) -> Result<UsageTotals, troupe::store::PortError> {
            Ok(UsageTotals::default())
        }
        async fn buckets(
            &self,
            _since: Option<UtcTime>,
        ) -> Result<UsageBuckets, troupe::store::PortError> {
            Ok(UsageBuckets::default())
        }
        async fn records_after(
            &self,
            after: i64,
            limit: usize,
        ) -> Result<Vec<(i64, UsageRecord)>, troupe::store::PortError> {
            let mut rows: Vec<_> = self
                .0
                .lock()
                .unwrap()
                .iter()
                .filter(|(id, _)| *id > after)
                .cloned()
                .collect();
            rows.sort_by_key(|(id, _)| *id);
            rows.truncate(limit);
            Ok(rows)
        }
    }

    fn record(second: u32) -> UsageRecord {
        UsageRecord {
            at: format!("2026-12-01T10:00:{second:02}.000Z"),
            run_id: "r".into(),
            agent: "lead".into(),
            model: "gpt-4o".into(),
            purpose: "turn".into(),
            prompt_tokens: 1_000_000,
            completion_tokens: 0,
            total_tokens: 1_000_000,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            estimated: false,
        }
    }

    #[tokio::test]
    async fn a_row_committed_after_a_larger_id_was_read_is_counted_once() {
        let table = Arc::new(Table::default());
        let mut fold = CostFold::shared(table.clone(), PriceTable::built_in());
        table.0.lock().unwrap().push((2, record(2)));
        fold.refresh().await.unwrap();
        let one = fold.series().total().unwrap();
        // Row 1 was inserted first but commits now; row 3 arrives normally.
        table.0.lock().unwrap().push((1, record(1)));
        table.0.lock().unwrap().push((3, record(3)));
        fold.refresh().await.unwrap();
        fold.refresh().await.unwrap();
        let three = fold.series().total().unwrap();
        assert_eq!(three.micro_usd(), 3 * one.micro_usd(), "each row once");
    }
}
