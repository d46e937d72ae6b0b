//! [`PgState`]: the PostgreSQL adapter of [`Prune`] — what `troupe gc --store` removes of a
//! shared team's tables, by the same rules as a workspace's files ([`decide`]).
//!
//! **Decisions.** Where a kind's candidates are few (resolved requests, set-aside
//! conversations, artifacts, jobs, recordings) they are read whole and [`decide`] itself
//! chooses. Where a table can be huge (done and quarantined messages, events) the same rule is
//! one SQL predicate, run a batch at a time (`retention_bulk.rs`, which says why it is the same);
//! jobs and recordings are in `retention_runs.rs`.
//! Usage is never removed: old rows are compacted into per-day totals (`usage_compact.rs`).
//!
//! **Never removed:** a pending request (even expired: it waits for its answer or a person);
//! the latest plan of each sender (the plan gate reads it); an agent's current conversation
//! (generation 0); an artifact a current conversation names; a running job; the recording and
//! the events of a live process (one whose `troupe_workers` heartbeat is recent).
//!
//! **Beside a running team.** Every delete is a bounded batch (at most [`BATCH`] rows) in its
//! own short transaction, so no writer waits long; where a writer could race, the batch takes
//! the writer's lock (the protocol store's advisory lock for requests, a transcript's set-aside
//! lock for conversations) or re-checks in the statement what made the row removable (an
//! artifact still unnamed, a job still finished). A gc killed midway leaves whole batches
//! done; the next one finds the rest still removable and finishes. With `dry_run` only reads
//! run.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio_postgres::types::ToSql;
use troupe_wire::UtcTime;

use super::{db_error, PgStore};
use crate::store::retention::{decide, needed, Candidate, Kind, Prune, Report, Sweep};
use crate::store::{BackendError, PortError};

/// The most rows one statement of gc deletes.
pub(super) const BATCH: usize = 1_000;

/// A worker (or lead) whose heartbeat is older than this is taken as gone.
const LIVE_WINDOW: Duration = Duration::from_secs(60);

/// Why the latest plan of a sender is kept whatever its age: the plan gate decides on it.
pub const LATEST_PLAN: &str = "the latest plan of its sender";

/// A shared team's state in PostgreSQL, pruned kind by kind.
#[derive(Clone)]
pub struct PgState {
    pub(super) store: PgStore,
}

/// The processes of the team alive now (their heartbeat is recent): their runs are live.
#[derive(Debug, Default)]
pub(super) struct Live {
    /// (host, pid) of each.
    pub processes: BTreeSet<(String, i32)>,
    /// Hosts with a live lead (recordings name their host only).
    pub lead_hosts: BTreeSet<String>,
}

impl Live {
    pub(super) fn hosts(&self) -> Vec<String> {
        self.processes.iter().map(|(h, _)| h.clone()).collect()
    }

    pub(super) fn pids(&self) -> Vec<i32> {
        self.processes.iter().map(|(_, p)| *p).collect()
    }
}

impl PgState {
    pub fn new(store: PgStore) -> Self {
        Self { store }
    }

    /// Runs a read (or a single statement safe to repeat), retried after a broken connection.
    pub(super) async fn rows(
        &self,
        what: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, BackendError> {
        let store = &self.store;
        super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                client
                    .query(sql, params)
                    .await
                    .map_err(|e| db_error(what, e))
            })
        })
        .await
    }

    async fn live(&self) -> Result<Live, BackendError> {
        let window = LIVE_WINDOW.as_secs_f64();
        let rows = self
            .rows(
                "read the team's live processes",
                "SELECT host, pid, role FROM troupe_workers
                  WHERE team = $1 AND heartbeat_at >= clock_timestamp() - make_interval(secs => $2)",
                &[&self.store.team(), &window],
            )
            .await?;
        let mut live = Live::default();
        for row in rows {
            let (host, pid, role): (String, i32, String) = (row.get(0), row.get(1), row.get(2));
            if role == "lead" {
                live.lead_hosts.insert(host.clone());
            }
            live.processes.insert((host, pid));
        }
        Ok(live)
    }
}

#[async_trait::async_trait]
impl Prune for PgState {
    async fn prune(&self, sweep: &Sweep, report: &mut Report) -> Result<(), PortError> {
        let live = self.live().await?;
        self.kept_messages(Kind::Messages, sweep, report).await?;
        self.kept_messages(Kind::Quarantine, sweep, report).await?;
        self.requests(sweep, report).await?;
        self.transcripts(sweep, report).await?;
        self.artifacts(sweep, report).await?;
        self.events(sweep, report, &live).await?;
        self.jobs(sweep, report).await?;
        self.recordings(sweep, report, &live).await?;
        super::tasks::prune(&self.store, sweep, report, BATCH).await?;
        self.audit(sweep, report).await?;
        self.usage(sweep, report).await?;
        if !sweep.dry_run {
            let vacuumed = self.vacuum().await?;
            if !vacuumed.is_empty() {
                tracing::info!(tables = ?vacuumed, "retention: tables vacuumed after gc");
            }
        }
        Ok(())
    }
}

/// A count as the `bigint` a row holds (saturating).
pub(super) fn bytes_of(row: &tokio_postgres::Row, at: usize) -> u64 {
    u64::try_from(row.get::<_, i64>(at)).unwrap_or(0)
}

/// A time the database keeps as milliseconds, as troupe's time (one out of troupe's range:
/// `now`, so it is kept as new rather than removed on a guess).
pub(super) fn time_of_ms(ms: i64, now: UtcTime) -> UtcTime {
    UtcTime::from_unix_millis(ms).unwrap_or(now)
}

/// Requests, conversations, artifacts: few rows each, decided by [`decide`] itself (jobs and
/// recordings: `retention_runs.rs`).
impl PgState {
    async fn requests(&self, sweep: &Sweep, report: &mut Report) -> Result<(), BackendError> {
        let kind = Kind::Requests;
        let team = self.store.team();
        let rows = self
            .rows(
                "read the team's requests",
                "SELECT r.id, r.body, r.pending, r.sender, r.kind,
                        (octet_length(r.body) + coalesce(octet_length(a.body), 0))::bigint,
                        row_number() OVER (PARTITION BY r.sender, r.kind
                                           ORDER BY r.created_ms DESC, r.seq DESC)
                   FROM troupe_requests r
                   LEFT JOIN troupe_answers a ON a.team = r.team AND a.request_id = r.id
                  WHERE r.team = $1",
                &[&team],
            )
            .await?;
        let mut candidates = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: uuid::Uuid = row.get(0);
            let body: &str = row.get(1);
            let request = super::protocol::decode(body).map_err(|e| {
                BackendError::new("store_corrupt", format!("request {id} of the team: {e}"))
            })?;
            let latest_plan =
                row.get::<_, String>(4) == "plan_approval" && row.get::<_, i64>(6) == 1;
            let needed = if row.get::<_, bool>(2) {
                Some(needed::PENDING_REQUEST)
            } else if latest_plan {
                Some(LATEST_PLAN)
            } else {
                None
            };
            let at = request
                .resolution()
                .map(|r| r.resolved_at_utc)
                .unwrap_or_else(|| request.created_at_utc());
            candidates.push(Candidate {
                item: id,
                at,
                bytes: bytes_of(row, 5),
                needed,
            });
        }
        let doomed = decide(kind, sweep, candidates, report);
        for chunk in doomed.chunks(BATCH) {
            let ids: Vec<uuid::Uuid> = chunk.iter().map(|(id, _)| *id).collect();
            let removed = if sweep.dry_run {
                ids.clone()
            } else {
                self.delete_requests(&ids).await?
            };
            for (id, bytes) in chunk {
                if removed.contains(id) {
                    report.removed(kind, *bytes);
                }
            }
        }
        Ok(())
    }

    /// Deletes the resolved requests among `ids` and their answers, in one transaction holding
    /// the protocol store's lock (the lock its every decision takes); the ids removed.
    async fn delete_requests(&self, ids: &[uuid::Uuid]) -> Result<Vec<uuid::Uuid>, BackendError> {
        let store = &self.store;
        store
            .bounded(async {
                let mut client = store.client().await?;
                let tx = super::locked(&mut client, store.team(), super::Lock::Protocol).await?;
                let rows = tx
                    .query(
                        "DELETE FROM troupe_requests
                          WHERE team = $1 AND id = ANY($2) AND NOT pending RETURNING id",
                        &[&store.team(), &ids],
                    )
                    .await
                    .map_err(|e| db_error("remove resolved requests", e))?;
                let removed: Vec<uuid::Uuid> = rows.iter().map(|r| r.get(0)).collect();
                tx.execute(
                    "DELETE FROM troupe_answers WHERE team = $1 AND request_id = ANY($2)",
                    &[&store.team(), &removed],
                )
                .await
                .map_err(|e| db_error("remove the answers of resolved requests", e))?;
                tx.commit()
                    .await
                    .map_err(|e| db_error("commit the removal of requests", e))?;
                Ok(removed)
            })
            .await
    }

    async fn transcripts(&self, sweep: &Sweep, report: &mut Report) -> Result<(), BackendError> {
        let kind = Kind::Transcripts;
        if !sweep.dry_run {
            // Each current conversation's history before its last compaction goes aside first,
            // to be aged out below like any earlier conversation.
            let agents = self
                .rows(
                    "list the team's conversations",
                    "SELECT DISTINCT agent FROM troupe_transcripts
                      WHERE team = $1 AND generation = 0",
                    &[&self.store.team()],
                )
                .await?;
            let above =
                i64::try_from(crate::store::retention::files::SET_ASIDE_ABOVE).unwrap_or(i64::MAX);
            for row in agents {
                let agent: String = row.get(0);
                super::PgTranscriptLog::new(self.store.clone(), &agent)
                    .set_aside_compacted(above, BATCH)
                    .await?;
            }
        }
        let rows = self
            .rows(
                "read the team's conversations",
                "SELECT agent, generation,
                        (extract(epoch FROM max(at)) * 1000)::bigint,
                        coalesce(sum(octet_length(line)), 0)::bigint, max(seq)
                   FROM troupe_transcripts WHERE team = $1
                  GROUP BY agent, generation",
                &[&self.store.team()],
            )
            .await?;
        let candidates = rows
            .iter()
            .map(|row| {
                let generation: i32 = row.get(1);
                Candidate {
                    item: (row.get::<_, String>(0), generation, row.get::<_, i64>(4)),
                    at: time_of_ms(row.get(2), sweep.now),
                    bytes: bytes_of(row, 3),
                    needed: (generation == 0).then_some(needed::CURRENT),
                }
            })
            .collect();
        for ((agent, generation, last_seq), bytes) in decide(kind, sweep, candidates, report) {
            if !sweep.dry_run {
                self.delete_generation(&agent, generation, last_seq).await?;
            }
            report.removed(kind, bytes);
        }
        Ok(())
    }

    /// Deletes a set-aside conversation, [`BATCH`] lines a transaction, each holding the lock a
    /// set-aside takes: lines up to `last_seq` only, so a conversation set aside later under a
    /// reused generation number (its lines are newer) is never touched.
    async fn delete_generation(
        &self,
        agent: &str,
        generation: i32,
        last_seq: i64,
    ) -> Result<(), BackendError> {
        let store = &self.store;
        let limit = BATCH as i64;
        loop {
            let deleted = store
                .bounded(async {
                    let mut client = store.client().await?;
                    let tx =
                        super::transcript::locked_conversation(&mut client, store.team(), agent)
                            .await?;
                    let n = tx
                        .execute(
                            "DELETE FROM troupe_transcripts
                              WHERE team = $1 AND agent = $2 AND generation = $3
                                AND seq IN (SELECT seq FROM troupe_transcripts
                                             WHERE team = $1 AND agent = $2 AND generation = $3
                                               AND seq <= $4 AND generation > 0
                                             ORDER BY seq LIMIT $5)",
                            &[&store.team(), &agent, &generation, &last_seq, &limit],
                        )
                        .await
                        .map_err(|e| db_error("remove a set-aside conversation", e))?;
                    tx.commit()
                        .await
                        .map_err(|e| db_error("commit the removal of a conversation", e))?;
                    Ok(n)
                })
                .await?;
            if deleted < BATCH as u64 {
                return Ok(());
            }
        }
    }

    async fn artifacts(&self, sweep: &Sweep, report: &mut Report) -> Result<(), BackendError> {
        let kind = Kind::Artifacts;
        let rows = self
            .rows(
                "read the team's artifacts",
                &format!(
                    "SELECT a.agent, a.name, (extract(epoch FROM a.at) * 1000)::bigint, a.bytes,
                            {NAMED}
                       FROM troupe_artifacts a WHERE a.team = $1"
                ),
                &[&self.store.team()],
            )
            .await?;
        let candidates = rows
            .iter()
            .map(|row| Candidate {
                item: (row.get::<_, String>(0), row.get::<_, String>(1)),
                at: time_of_ms(row.get(2), sweep.now),
                bytes: bytes_of(row, 3),
                needed: row.get::<_, bool>(4).then_some(needed::CONVERSATION),
            })
            .collect();
        let doomed = decide(kind, sweep, candidates, report);
        for chunk in doomed.chunks(BATCH) {
            if sweep.dry_run {
                chunk
                    .iter()
                    .for_each(|(_, bytes)| report.removed(kind, *bytes));
                continue;
            }
            let agents: Vec<&str> = chunk.iter().map(|((a, _), _)| a.as_str()).collect();
            let names: Vec<&str> = chunk.iter().map(|((_, n), _)| n.as_str()).collect();
            // The reference is looked for again in the statement: a result naming the
            // artifact may have entered a conversation since it was read.
            let gone = self
                .rows(
                    "remove unnamed artifacts",
                    &format!(
                        "DELETE FROM troupe_artifacts a
                          WHERE a.team = $1
                            AND (a.agent, a.name) IN (SELECT * FROM unnest($2::text[], $3::text[]))
                            AND NOT {NAMED}
                         RETURNING a.agent, a.name"
                    ),
                    &[&self.store.team(), &agents, &names],
                )
                .await?;
            let gone: BTreeSet<(String, String)> =
                gone.iter().map(|r| (r.get(0), r.get(1))).collect();
            for (key, bytes) in chunk {
                if gone.contains(key) {
                    report.removed(kind, *bytes);
                }
            }
        }
        Ok(())
    }
}

/// Whether a current conversation (any agent's: a result may be passed on) names artifact `a`.
const NAMED: &str = "EXISTS (SELECT 1 FROM troupe_transcripts t
                              WHERE t.team = a.team AND t.generation = 0
                                AND strpos(t.line, a.name) > 0)";
