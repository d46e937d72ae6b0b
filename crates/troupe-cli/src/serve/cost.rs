//! What the team has cost: one fold of its usage records — the workspace's
//! `.troupe/usage.jsonl`, or a shared team's table — followed as they are appended, giving both
//! the per-agent costs of `/api/state` and its `cost_series`, the page's cost-over-time chart.
//!
//! The records are read once each: the fold's cursor remembers where it stopped (a byte offset
//! in the log, or the last row ids of the table: `TeamUsage::read_new`, which also counts a row
//! committed late once) and the fold reads only what came after, at every `/api/state`.
//! So a long run costs one read of its usage, not one per refresh, and the series stays
//! [`MAX_POINTS`] points long however many calls were made ([`CostSeries`]). Per-agent costs
//! and the series come from the same sums, so the chart's last total is the sum of the agents'
//! costs.

use std::sync::Arc;

use serde_json::{json, Value};
use troupe::prices::series::CostSeries;
use troupe::prices::PriceTable;
use troupe::store::usage::{NewUsage, TeamUsage, UsageCursor};

use super::history::ReadError;

/// The most points of the chart.
pub const MAX_POINTS: usize = 120;

pub struct CostFold {
    usage: Arc<dyn TeamUsage>,
    /// Where the fold stopped reading.
    cursor: UsageCursor,
    /// The prices the fold started with, to start again after the log was replaced.
    prices: PriceTable,
    series: CostSeries,
}

impl CostFold {
    /// A fold of the team's usage (nothing read yet).
    pub fn new(usage: Arc<dyn TeamUsage>, prices: PriceTable) -> Self {
        Self {
            usage,
            cursor: UsageCursor::default(),
            series: CostSeries::new(prices.clone(), MAX_POINTS),
            prices,
        }
    }

    /// Folds the records made since the last call.
    pub async fn refresh(&mut self) -> Result<(), ReadError> {
        let read = |e: troupe::store::PortError| ReadError {
            code: troupe::error::ErrorCode::code(&e),
            message: e.to_string(),
        };
        let series = &mut self.series;
        let outcome = self
            .usage
            .read_new(&mut self.cursor, &mut |r, at| series.add(r, at))
            .await
            .map_err(read)?;
        if outcome == NewUsage::Restarted {
            // The log was replaced by a shorter one: its records are not those folded.
            self.series = CostSeries::new(self.prices.clone(), MAX_POINTS);
            let series = &mut self.series;
            self.usage
                .read_new(&mut self.cursor, &mut |r, at| series.add(r, at))
                .await
                .map_err(read)?;
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
    use troupe::wire::UtcTime;

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
        let mut fold = CostFold::new(table.clone(), PriceTable::built_in());
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
