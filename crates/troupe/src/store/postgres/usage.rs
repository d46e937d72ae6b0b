//! A shared team's token usage (`troupe_usage`): [`PgUsage`] takes a copy of every record each
//! process appends to its own `.troupe/usage.jsonl` and adds up the team's totals for
//! `troupe status --store`, with the same meaning as the file's: overall, per agent, how many
//! runs, and the latest run (the run of the last record in the team's order); and its sums per
//! agent, model and day for `troupe usage --store`.
//!
//! The copy is one insert per model call, after the file's line (a [`TeamCopy`]: one that
//! fails is reported once by the log's `CopyTo`; the file keeps the record).

use std::collections::BTreeMap;

use troupe_wire::UtcTime;

use super::roster::hostname;
use super::{db_error, PgStore};
use crate::store::team_copy::TeamCopy;
use crate::store::usage::{
    BucketKey, RunTotals, TeamUsage, TokenCounts, UsageBuckets, UsageRecord, UsageTotals,
};
use crate::store::{BackendError, PortError};

pub struct PgUsage {
    store: PgStore,
    host: String,
    pid: i32,
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn counts_of(row: &tokio_postgres::Row, from: usize) -> TokenCounts {
    let get = |i: usize| u64::try_from(row.get::<_, i64>(from + i)).unwrap_or(0);
    TokenCounts {
        prompt_tokens: get(0),
        completion_tokens: get(1),
        total_tokens: get(2),
        cache_read_tokens: get(3),
        cache_write_tokens: get(4),
        estimated_tokens: get(5),
    }
}

/// How many columns [`SUMS`] selects (the fields of `TokenCounts`).
const SUMS_COUNT: usize = 6;

/// The sums of one group, as bigints (a sum of bigints is numeric in PostgreSQL).
const SUMS: &str = "coalesce(sum(prompt_tokens), 0)::bigint, \
                    coalesce(sum(completion_tokens), 0)::bigint, \
                    coalesce(sum(total_tokens), 0)::bigint, \
                    coalesce(sum(cache_read_tokens), 0)::bigint, \
                    coalesce(sum(cache_write_tokens), 0)::bigint, \
                    coalesce(sum(total_tokens) FILTER (WHERE estimated), 0)::bigint";

impl PgUsage {
    pub fn new(store: PgStore) -> Self {
        Self {
            store,
            host: hostname(),
            pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
        }
    }

    async fn insert(&self, record: &UsageRecord) -> Result<(), BackendError> {
        let store = &self.store;
        let (host, pid) = (&self.host, self.pid);
        store
            .bounded(async {
                let client = store.client().await?;
                client
                    .execute(
                        "INSERT INTO troupe_usage (team, at, run_id, agent, model, purpose,
                         prompt_tokens, completion_tokens, total_tokens, host, pid,
                         cache_read_tokens, cache_write_tokens, estimated)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                        &[
                            &store.team(),
                            &record.at,
                            &record.run_id,
                            &record.agent,
                            &record.model,
                            &record.purpose,
                            &count(record.prompt_tokens),
                            &count(record.completion_tokens),
                            &count(record.total_tokens),
                            host,
                            &pid,
                            &count(record.cache_read_tokens),
                            &count(record.cache_write_tokens),
                            &record.estimated,
                        ],
                    )
                    .await
                    .map_err(|e| db_error("copy a usage record", e))?;
                Ok(())
            })
            .await
    }

    /// The team's totals, from every process's records.
    pub async fn totals(&self) -> Result<UsageTotals, BackendError> {
        let store = &self.store;
        super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                let team = store.team();
                let read = |e| db_error("read the team's usage", e);
                let total = client
                    .query_one(
                        &format!(
                            "SELECT {SUMS}, count(DISTINCT run_id) FROM troupe_usage
                              WHERE team = $1"
                        ),
                        &[&team],
                    )
                    .await
                    .map_err(read)?;
                let agents = client
                    .query(
                        &format!(
                            "SELECT agent, {SUMS} FROM troupe_usage WHERE team = $1
                              GROUP BY agent"
                        ),
                        &[&team],
                    )
                    .await
                    .map_err(read)?;
                let latest = client
                    .query_opt(
                        &format!(
                            "SELECT run_id, {SUMS} FROM troupe_usage
                              WHERE team = $1 AND run_id = (
                                  SELECT run_id FROM troupe_usage WHERE team = $1
                                   ORDER BY id DESC LIMIT 1)
                              GROUP BY run_id"
                        ),
                        &[&team],
                    )
                    .await
                    .map_err(read)?;
                Ok(UsageTotals {
                    total: counts_of(&total, 0),
                    agents: agents
                        .iter()
                        .map(|r| (r.get::<_, String>(0), counts_of(r, 1)))
                        .collect::<BTreeMap<_, _>>(),
                    // After the sums (`SUMS_COUNT` columns), the count of runs.
                    runs: usize::try_from(total.get::<_, i64>(SUMS_COUNT)).unwrap_or(0),
                    latest_run: latest.map(|r| RunTotals {
                        run_id: r.get(0),
                        counts: counts_of(&r, 1),
                    }),
                })
            })
        })
        .await
    }
}

impl PgUsage {
    /// The team's records made at or after `since`, summed per agent, model and UTC day. `at`
    /// is troupe's fixed-width UTC time (`YYYY-MM-DDTHH:MM:SS.mmmZ`), so comparing and cutting
    /// it as text is comparing and cutting the time.
    pub async fn buckets(&self, since: Option<UtcTime>) -> Result<UsageBuckets, BackendError> {
        let store = &self.store;
        let since = &since.map(|at| at.to_string()).unwrap_or_default();
        super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                let rows = client
                    .query(
                        &format!(
                            "SELECT agent, model, substr(at, 1, 10) AS day, {SUMS}
                               FROM troupe_usage WHERE team = $1 AND at >= $2
                              GROUP BY agent, model, day"
                        ),
                        &[&store.team(), since],
                    )
                    .await
                    .map_err(|e| db_error("read the team's usage", e))?;
                let mut buckets = UsageBuckets::default();
                for row in &rows {
                    let key = BucketKey {
                        agent: row.get(0),
                        model: row.get(1),
                        day: row.get(2),
                    };
                    buckets.add(key, counts_of(row, 3));
                }
                Ok(buckets)
            })
        })
        .await
    }
}

impl PgUsage {
    /// Up to `limit` of the team's records with a row id above `after`, by id.
    pub async fn records_after(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, UsageRecord)>, BackendError> {
        let store = &self.store;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                let rows = client
                    .query(
                        "SELECT id, at, run_id, agent, model, purpose, prompt_tokens,
                                completion_tokens, total_tokens, cache_read_tokens,
                                cache_write_tokens,
                                CASE WHEN estimated THEN total_tokens ELSE 0 END, estimated
                           FROM troupe_usage WHERE team = $1 AND id > $2
                          ORDER BY id LIMIT $3",
                        &[&store.team(), &after, &limit],
                    )
                    .await
                    .map_err(|e| db_error("read the team's usage", e))?;
                Ok(rows
                    .iter()
                    .map(|row| {
                        let counts = counts_of(row, 6);
                        let record = UsageRecord {
                            at: row.get(1),
                            run_id: row.get(2),
                            agent: row.get(3),
                            model: row.get(4),
                            purpose: row.get(5),
                            prompt_tokens: counts.prompt_tokens,
                            completion_tokens: counts.completion_tokens,
                            total_tokens: counts.total_tokens,
                            cache_read_tokens: counts.cache_read_tokens,
                            cache_write_tokens: counts.cache_write_tokens,
                            estimated: row.get(12),
                        };
                        (row.get::<_, i64>(0), record)
                    })
                    .collect())
            })
        })
        .await
    }
}

#[async_trait::async_trait]
impl TeamCopy<UsageRecord> for PgUsage {
    async fn copy(&self, record: &UsageRecord) -> Result<(), BackendError> {
        self.insert(record).await
    }
}

#[async_trait::async_trait]
impl TeamUsage for PgUsage {
    async fn totals(&self) -> Result<UsageTotals, PortError> {
        Ok(PgUsage::totals(self).await?)
    }

    async fn buckets(&self, since: Option<UtcTime>) -> Result<UsageBuckets, PortError> {
        Ok(PgUsage::buckets(self, since).await?)
    }

    async fn records_after(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, UsageRecord)>, PortError> {
        Ok(PgUsage::records_after(self, after, limit).await?)
    }
}
