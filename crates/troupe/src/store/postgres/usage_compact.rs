//! Usage compaction on `troupe_usage` (`troupe gc --store`, `Kind::Usage`): the rows made
//! before a cutoff become per-day totals, one per UTC day, run, agent, model, purpose and
//! `estimated` — every key the team's readers group or filter by — with `calls` saying how many
//! model responses each stands for. The team's totals and buckets (`usage.rs`) are sums over
//! those keys, so they read the same before and after, at every commit.
//!
//! A group is compacted into its **last row** (the largest id): that row is updated to the
//! group's sums and the others deleted, so the total keeps the place of the group's last
//! appearance, and the team's last row — whose run is `latest_run` — stays the last. A reader
//! following the rows by id (`read_new`) has either read that row already (and every row of the
//! group before it) or reads it with the sums. Each step is one transaction over at most
//! [`BATCH`] rows of one group, locked (`FOR UPDATE`): a kill leaves whole steps, and a row
//! inserted meanwhile is simply not part of it.

use troupe_wire::UtcTime;

use super::retention::{bytes_of, BATCH};
use super::{db_error, PgStore};
use crate::store::BackendError;

/// What a compaction did (with `dry_run`: would do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageCompacted {
    /// Rows fewer after, and about their bytes (`pg_column_size`).
    pub rows_removed: u64,
    pub bytes_removed: u64,
    /// Rows made at or after the cutoff (kept as they are): how many, their bytes.
    pub recent: (u64, u64),
    /// Per-day totals before the cutoff after compaction (or, dry, the groups): how many,
    /// their bytes.
    pub totals: (u64, u64),
}

/// One group of old rows: the key, and its row count and bytes.
struct Group {
    day: String,
    run_id: String,
    agent: String,
    model: String,
    purpose: String,
    estimated: bool,
    rows: u64,
    bytes: u64,
}

/// `at` is troupe's fixed-width UTC time, so comparing it as text is comparing the time (as
/// `usage.rs` does for `since`).
pub async fn compact(
    store: &PgStore,
    before: UtcTime,
    dry_run: bool,
) -> Result<UsageCompacted, BackendError> {
    let cut = before.to_string();
    let team = store.team();
    let rows = super::retrying(|| {
        store.bounded(async {
            let client = store.client().await?;
            client
                .query(
                    "SELECT substr(at, 1, 10), run_id, agent, model, purpose, estimated,
                            count(*), coalesce(sum(pg_column_size(u.*)), 0)::bigint
                       FROM troupe_usage u WHERE team = $1 AND at < $2
                      GROUP BY 1, 2, 3, 4, 5, 6",
                    &[&team, &cut],
                )
                .await
                .map_err(|e| db_error("read the team's usage groups", e))
        })
    })
    .await?;
    let groups: Vec<Group> = rows
        .iter()
        .map(|r| Group {
            day: r.get(0),
            run_id: r.get(1),
            agent: r.get(2),
            model: r.get(3),
            purpose: r.get(4),
            estimated: r.get(5),
            rows: bytes_of(r, 6),
            bytes: bytes_of(r, 7),
        })
        .collect();
    let mut done = UsageCompacted::default();
    for group in &groups {
        if dry_run || group.rows < 2 {
            let per_row = group.bytes / group.rows.max(1);
            done.rows_removed += group.rows - 1;
            done.bytes_removed += per_row * (group.rows - 1);
            done.totals.0 += 1;
            done.totals.1 += per_row;
            continue;
        }
        let (rows, bytes) = compact_group(store, group, &cut).await?;
        done.rows_removed += rows;
        done.bytes_removed = done.bytes_removed.saturating_add(bytes);
    }
    let counts = super::retrying(|| {
        store.bounded(async {
            let client = store.client().await?;
            client
                .query_one(
                    "SELECT count(*) FILTER (WHERE at >= $2),
                            coalesce(sum(pg_column_size(u.*)) FILTER (WHERE at >= $2), 0)::bigint,
                            count(*) FILTER (WHERE at < $2),
                            coalesce(sum(pg_column_size(u.*)) FILTER (WHERE at < $2), 0)::bigint
                       FROM troupe_usage u WHERE team = $1",
                    &[&team, &cut],
                )
                .await
                .map_err(|e| db_error("count the team's usage", e))
        })
    })
    .await?;
    done.recent = (bytes_of(&counts, 0), bytes_of(&counts, 1));
    if !dry_run {
        done.totals = (bytes_of(&counts, 2), bytes_of(&counts, 3));
    }
    Ok(done)
}

/// Compacts one group, [`BATCH`] rows a transaction, until one row is left; the rows and bytes
/// removed.
async fn compact_group(
    store: &PgStore,
    group: &Group,
    cut: &str,
) -> Result<(u64, u64), BackendError> {
    let team = store.team();
    let start = format!("{}T00:00:00.000Z", group.day);
    let limit = BATCH as i64;
    let (mut rows, mut bytes) = (0u64, 0u64);
    loop {
        let step = store
            .bounded(async {
                let mut client = store.client().await?;
                let tx = client
                    .transaction()
                    .await
                    .map_err(|e| db_error("begin", e))?;
                let ids: Vec<i64> = tx
                    .query(
                        "SELECT id FROM troupe_usage
                          WHERE team = $1 AND at >= $2 AND at < $3 AND substr(at, 1, 10) = $4
                            AND run_id = $5 AND agent = $6 AND model = $7 AND purpose = $8
                            AND estimated = $9
                          ORDER BY id LIMIT $10 FOR UPDATE",
                        &[
                            &team,
                            &start,
                            &cut,
                            &group.day,
                            &group.run_id,
                            &group.agent,
                            &group.model,
                            &group.purpose,
                            &group.estimated,
                            &limit,
                        ],
                    )
                    .await
                    .map_err(|e| db_error("lock a usage group", e))?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                let Some((&last, others)) = ids.split_last() else {
                    return Ok((0, 0, 0));
                };
                if others.is_empty() {
                    return Ok((1, 0, 0));
                }
                tx.execute(
                    "UPDATE troupe_usage SET
                        (prompt_tokens, completion_tokens, total_tokens, cache_read_tokens,
                         cache_write_tokens, calls) =
                        (SELECT sum(prompt_tokens), sum(completion_tokens), sum(total_tokens),
                                sum(cache_read_tokens), sum(cache_write_tokens), sum(calls)
                           FROM troupe_usage WHERE team = $1 AND id = ANY($2))
                      WHERE team = $1 AND id = $3",
                    &[&team, &ids, &last],
                )
                .await
                .map_err(|e| db_error("sum a usage group", e))?;
                let removed = tx
                    .query(
                        "DELETE FROM troupe_usage WHERE team = $1 AND id = ANY($2)
                         RETURNING pg_column_size(troupe_usage.*)::bigint",
                        &[&team, &others],
                    )
                    .await
                    .map_err(|e| db_error("remove compacted usage rows", e))?;
                tx.commit()
                    .await
                    .map_err(|e| db_error("commit a usage compaction", e))?;
                let bytes: u64 = removed.iter().map(|r| bytes_of(r, 0)).sum();
                Ok((ids.len(), removed.len() as u64, bytes))
            })
            .await?;
        let (read, removed, removed_bytes) = step;
        rows += removed;
        bytes = bytes.saturating_add(removed_bytes);
        if read < BATCH {
            return Ok((rows, bytes));
        }
    }
}
