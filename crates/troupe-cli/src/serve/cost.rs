//! What the team has cost: one fold of its usage records — the workspace's
//! `.troupe/usage.jsonl`, or a shared team's table — followed as they are appended, giving both
//! the per-agent costs of `/api/state` and its `cost_series`, the page's cost-over-time chart.
//!
//! The records are read once each: the fold remembers where it stopped (a byte offset in the
//! log, or the last row id of the table) and reads only what came after, at every `/api/state`.
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

/// Where the records come from, and where the reader stopped.
enum Source {
    /// The workspace's log, and the byte offset after the last line folded.
    File { path: PathBuf, offset: u64 },
    /// A shared team's table, and the id of the last row folded.
    Shared {
        usage: Arc<dyn TeamUsage>,
        after: i64,
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
        Self::new(Source::Shared { usage, after: 0 }, prices)
    }

    fn new(source: Source, prices: PriceTable) -> Self {
        Self {
            source,
            series: CostSeries::new(prices.clone(), MAX_POINTS),
            prices,
        }
    }

    /// Folds the records appended since the last call.
    pub fn refresh(&mut self) -> Result<(), ReadError> {
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
            Source::Shared { usage, after } => loop {
                let rows = usage.records_after(*after, ROWS).map_err(|e| ReadError {
                    code: troupe::error::ErrorCode::code(&e),
                    message: e.to_string(),
                })?;
                let full = rows.len() == ROWS;
                for (id, record) in rows {
                    let at = UtcTime::parse(&record.at).map_err(|e| ReadError {
                        code: "storage_error",
                        message: format!("usage row {id} of the team: {e}"),
                    })?;
                    series.add(&record, at);
                    *after = id;
                }
                if !full {
                    break;
                }
            },
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
