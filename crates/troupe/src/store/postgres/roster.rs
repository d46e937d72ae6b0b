//! The roster in PostgreSQL (`troupe_teammates`), the **teammate leases** that say which
//! worker process runs each teammate, the worker registry (`troupe_workers`) with heartbeats,
//! and the lead's lock.
//!
//! **One holder per teammate.** A worker leases a teammate before it runs any of its turns:
//! the row's `holder` is set only if it is free, already this holder's, or its lease expired;
//! a new holder gets a new fencing token. The holder's heartbeat extends every lease it has
//! (every third of the lease); a worker that dies or pauses loses its teammates when their
//! leases run out, and the next worker that looks takes them over and continues from the
//! durable transcript. Messages the old holder had claimed are fenced separately
//! (`mailbox.rs`).
//!
//! Every change to a record sends `NOTIFY <channel>, 'lead'` in its statement, so a lead in
//! another process sees teammates' statuses change without polling.
//!
//! **The lead's lock** is a session advisory lock on a connection of its own, held for the
//! run: a second lead of the same team is refused; the server drops the lock when the
//! connection goes (a killed process included).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use troupe_wire::{AgentName, TeammateRecord, TeammateStatus, UtcTime};

use super::{db_error, PgStore};
pub use crate::store::roster::{Holder, Lease};
use crate::store::roster::{LeasedRoster, RosterReadError, RosterReader, WorkerRow};
use crate::store::BackendError;

/// How long a worker holds a teammate unless its heartbeat extends it.
pub const TEAMMATE_LEASE: Duration = Duration::from_secs(10);

/// The roster of one team, and this process's leases in it.
pub struct PgRoster {
    store: PgStore,
    /// This process as a holder (also its `troupe_workers` id).
    holder: String,
    lease: Duration,
    /// The fencing token of each teammate lease this holder took.
    fences: std::sync::Mutex<std::collections::HashMap<String, i64>>,
    stop: CancellationToken,
}

impl Drop for PgRoster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn corrupt(why: impl Into<String>) -> BackendError {
    BackendError::new("store_corrupt", why)
}

fn decode(body: &str) -> Result<TeammateRecord, BackendError> {
    let value: serde_json::Value = troupe_wire::strict::from_json_str(body, "teammate")
        .map_err(|e| corrupt(format!("a teammate row does not parse: {e}")))?;
    serde_json::from_value(value).map_err(|e| corrupt(format!("a teammate row: {e}")))
}

fn encode(record: &TeammateRecord) -> Result<String, BackendError> {
    serde_json::to_string(record).map_err(|e| corrupt(format!("encode a teammate: {e}")))
}

/// The reads and the lease operations, repeated after a broken connection (a repeat changes
/// nothing a first attempt did: a lease this holder took is kept, with its token).
impl PgRoster {
    pub async fn all(&self) -> Result<Vec<TeammateRecord>, BackendError> {
        super::retrying(|| self.all_once()).await
    }

    pub async fn get(&self, name: &AgentName) -> Result<Option<TeammateRecord>, BackendError> {
        super::retrying(|| self.get_once(name)).await
    }

    pub async fn holders(&self) -> Result<Vec<Holder>, BackendError> {
        super::retrying(|| self.holders_once()).await
    }

    pub async fn holds(&self, name: &AgentName) -> Result<bool, BackendError> {
        super::retrying(|| self.holds_once(name)).await
    }

    pub async fn acquire(&self, name: &AgentName) -> Result<Lease, BackendError> {
        super::retrying(|| self.acquire_once(name)).await
    }
}

impl PgRoster {
    /// The roster as `holder`, with teammate leases of `lease`.
    pub fn new(store: PgStore, holder: &str, lease: Duration) -> Self {
        Self {
            store,
            holder: holder.to_owned(),
            lease,
            fences: std::sync::Mutex::new(std::collections::HashMap::new()),
            stop: CancellationToken::new(),
        }
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    async fn all_once(&self) -> Result<Vec<TeammateRecord>, BackendError> {
        let store = &self.store;
        let bodies = store
            .bounded(async {
                let client = store.client().await?;
                let rows = client
                    .query(
                        "SELECT body FROM troupe_teammates WHERE team = $1 ORDER BY name",
                        &[&store.team()],
                    )
                    .await
                    .map_err(|e| db_error("read the roster", e))?;
                Ok(rows
                    .iter()
                    .map(|r| r.get::<_, String>(0))
                    .collect::<Vec<_>>())
            })
            .await?;
        bodies.iter().map(|b| decode(b)).collect()
    }

    async fn get_once(&self, name: &AgentName) -> Result<Option<TeammateRecord>, BackendError> {
        let store = &self.store;
        let name = name.as_str();
        let body = store
            .bounded(async {
                let client = store.client().await?;
                let row = client
                    .query_opt(
                        "SELECT body FROM troupe_teammates WHERE team = $1 AND name = $2",
                        &[&store.team(), &name],
                    )
                    .await
                    .map_err(|e| db_error("read a teammate", e))?;
                Ok(row.map(|r| r.get::<_, String>(0)))
            })
            .await?;
        body.map(|b| decode(&b)).transpose()
    }

    /// Adds a new teammate; false if the name is taken.
    pub async fn add(&self, record: &TeammateRecord) -> Result<bool, BackendError> {
        let body = encode(record)?;
        let store = &self.store;
        let name = record.name.as_str();
        store
            .bounded(async {
                let client = store.client().await?;
                let rows = client
                    .query(
                        "WITH ins AS (
                         INSERT INTO troupe_teammates (team, name, body) VALUES ($1, $2, $3)
                         ON CONFLICT DO NOTHING RETURNING name)
                     SELECT pg_notify($4, 'lead')::text FROM ins",
                        &[&store.team(), &name, &body, &store.channel()],
                    )
                    .await
                    .map_err(|e| db_error("add a teammate", e))?;
                Ok(!rows.is_empty())
            })
            .await
    }

    /// Changes one record in a transaction: `change` sees the current record (if any) and
    /// returns the new one, or `None` to leave it. Returns the record before the change.
    async fn update(
        &self,
        name: &AgentName,
        change: impl FnOnce(&TeammateRecord) -> Option<TeammateRecord> + Send,
        free_lease: bool,
    ) -> Result<Option<TeammateRecord>, BackendError> {
        let store = &self.store;
        let name = name.as_str();
        store
            .bounded(async {
                let mut client = store.client().await?;
                let tx = client
                    .transaction()
                    .await
                    .map_err(|e| db_error("begin", e))?;
                let row = tx
                .query_opt(
                    "SELECT body FROM troupe_teammates WHERE team = $1 AND name = $2 FOR UPDATE",
                    &[&store.team(), &name],
                )
                .await
                .map_err(|e| db_error("read a teammate", e))?;
                let Some(row) = row else {
                    return Ok(None);
                };
                let before = decode(&row.get::<_, String>(0))?;
                if let Some(after) = change(&before) {
                    let body = encode(&after)?;
                    let sql = if free_lease {
                        "UPDATE troupe_teammates SET body = $3, holder = NULL, lease_until = NULL
                      WHERE team = $1 AND name = $2"
                    } else {
                        "UPDATE troupe_teammates SET body = $3 WHERE team = $1 AND name = $2"
                    };
                    tx.execute(sql, &[&store.team(), &name, &body])
                        .await
                        .map_err(|e| db_error("write a teammate", e))?;
                    tx.execute("SELECT pg_notify($1, 'lead')", &[&store.channel()])
                        .await
                        .map_err(|e| db_error("announce a teammate change", e))?;
                }
                tx.commit()
                    .await
                    .map_err(|e| db_error("commit a teammate change", e))?;
                Ok(Some(before))
            })
            .await
    }

    /// Replaces a teammate that is shut down or failed (a respawn); false if there is none or
    /// it is running or idle. The new teammate's lease starts free.
    pub async fn replace_stopped(&self, record: &TeammateRecord) -> Result<bool, BackendError> {
        let new = record.clone();
        let before = self
            .update(
                &record.name,
                move |old| {
                    matches!(
                        old.status,
                        TeammateStatus::Shutdown | TeammateStatus::Failed
                    )
                    .then_some(new)
                },
                true,
            )
            .await?;
        Ok(before.is_some_and(|old| {
            matches!(
                old.status,
                TeammateStatus::Shutdown | TeammateStatus::Failed
            )
        }))
    }

    /// Sets a status and its detail; returns the previous status.
    pub async fn set_status(
        &self,
        name: &AgentName,
        status: TeammateStatus,
        detail: Option<String>,
        now: UtcTime,
    ) -> Result<Option<TeammateStatus>, BackendError> {
        let before = self
            .update(
                name,
                move |old| {
                    if old.status == status && old.detail == detail {
                        return None;
                    }
                    let mut new = old.clone();
                    new.status = status;
                    new.detail = detail;
                    new.updated_at_utc = now;
                    Some(new)
                },
                false,
            )
            .await?;
        Ok(before.map(|r| r.status))
    }

    /// Takes (or keeps) the lease of `name` for this holder.
    async fn acquire_once(&self, name: &AgentName) -> Result<Lease, BackendError> {
        let store = &self.store;
        let name_s = name.as_str();
        let holder = &self.holder;
        let lease = self.lease.as_secs_f64();
        let fence = store.bounded(async {
            let client = store.client().await?;
            let row = client
                .query_opt(
                    "UPDATE troupe_teammates
                        SET fence = CASE WHEN holder = $3 THEN fence ELSE nextval('troupe_fence') END,
                            holder = $3,
                            lease_until = clock_timestamp() + make_interval(secs => $4)
                      WHERE team = $1 AND name = $2
                        AND (holder IS NULL OR holder = $3 OR lease_until < clock_timestamp())
                  RETURNING fence",
                    &[&store.team(), &name_s, &holder, &lease],
                )
                .await
                .map_err(|e| db_error("lease a teammate", e))?;
            Ok(row.map(|r| r.get::<_, i64>(0)))
        })
        .await?;
        let Some(fence) = fence else {
            return Ok(Lease::Taken);
        };
        let mut fences = crate::sync::lock(&self.fences);
        let before = fences.insert(name.as_str().to_owned(), fence);
        Ok(if before == Some(fence) {
            Lease::Kept
        } else {
            Lease::New
        })
    }

    /// Whether this holder still holds the lease of `name` it took (same fencing token; an
    /// expired lease nobody took over is still its own).
    async fn holds_once(&self, name: &AgentName) -> Result<bool, BackendError> {
        let Some(fence) = crate::sync::lock(&self.fences).get(name.as_str()).copied() else {
            return Ok(false);
        };
        let store = &self.store;
        let name = name.as_str();
        let holder = &self.holder;
        store
            .bounded(async {
                let client = store.client().await?;
                let row = client
                    .query_opt(
                        "SELECT 1 FROM troupe_teammates
                      WHERE team = $1 AND name = $2 AND holder = $3 AND fence = $4",
                        &[&store.team(), &name, &holder, &fence],
                    )
                    .await
                    .map_err(|e| db_error("check a teammate lease", e))?;
                Ok(row.is_some())
            })
            .await
    }

    /// Who holds each teammate.
    async fn holders_once(&self) -> Result<Vec<Holder>, BackendError> {
        let store = &self.store;
        store
            .bounded(async {
                let client = store.client().await?;
                let rows = client
                    .query(
                        "SELECT name, holder, coalesce(lease_until >= clock_timestamp(), false)
                       FROM troupe_teammates WHERE team = $1 ORDER BY name",
                        &[&store.team()],
                    )
                    .await
                    .map_err(|e| db_error("read teammate leases", e))?;
                Ok(rows
                    .iter()
                    .map(|r| Holder {
                        name: r.get(0),
                        holder: r.get(1),
                        live: r.get(2),
                    })
                    .collect())
            })
            .await
    }

    /// Records this process as a worker (`role`: `lead` or `worker`) and starts its heartbeat:
    /// every third of the lease, its teammate leases are extended and its heartbeat stamped.
    pub async fn register(&self, role: &str) -> Result<(), BackendError> {
        let store = &self.store;
        let holder = &self.holder;
        let host = hostname();
        let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        store.bounded(async {
            let client = store.client().await?;
            client
                .execute(
                    "INSERT INTO troupe_workers (team, id, host, pid, role) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (team, id) DO UPDATE SET heartbeat_at = now()",
                    &[&store.team(), &holder, &host, &pid, &role],
                )
                .await
                .map_err(|e| db_error("register a worker", e))?;
            Ok(())
        })
        .await?;
        let store = self.store.clone();
        let holder = self.holder.clone();
        let lease = self.lease;
        let stop = self.stop.clone();
        self.store.handle().spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(lease / 3) => {}
                    () = stop.cancelled() => return,
                }
                if let Err(e) = heartbeat(&store, &holder, lease).await {
                    tracing::warn!("worker heartbeat failed: {e}");
                }
            }
        });
        Ok(())
    }

    /// Frees this holder's leases and removes it from the workers (a clean exit).
    pub async fn deregister(&self) -> Result<(), BackendError> {
        self.stop.cancel();
        let store = &self.store;
        let holder = &self.holder;
        store
            .bounded(async {
                let client = store.client().await?;
                client
                    .execute(
                        "UPDATE troupe_teammates SET holder = NULL, lease_until = NULL
                      WHERE team = $1 AND holder = $2",
                        &[&store.team(), &holder],
                    )
                    .await
                    .map_err(|e| db_error("free teammate leases", e))?;
                client
                    .execute(
                        "DELETE FROM troupe_workers WHERE team = $1 AND id = $2",
                        &[&store.team(), &holder],
                    )
                    .await
                    .map_err(|e| db_error("deregister a worker", e))?;
                Ok(())
            })
            .await
    }

    /// The workers of the team with their last heartbeat and live teammates.
    pub async fn workers(&self) -> Result<Vec<WorkerRow>, BackendError> {
        workers(&self.store).await
    }
}

/// The workers of `store`'s team (what `troupe status --store` shows).
pub async fn workers(store: &PgStore) -> Result<Vec<WorkerRow>, BackendError> {
    store
        .bounded(async {
            let client = store.client().await?;
            let rows = client
                .query(
                    "SELECT w.id, w.host, w.pid, w.role,
                        (extract(epoch FROM clock_timestamp() - w.heartbeat_at) * 1000)::int8,
                        coalesce(array_agg(t.name ORDER BY t.name)
                                 FILTER (WHERE t.name IS NOT NULL), '{}')
                   FROM troupe_workers w
                   LEFT JOIN troupe_teammates t
                     ON t.team = w.team AND t.holder = w.id AND t.lease_until >= clock_timestamp()
                  WHERE w.team = $1
                  GROUP BY w.id, w.host, w.pid, w.role, w.heartbeat_at, w.started_at
                  ORDER BY w.started_at, w.id",
                    &[&store.team()],
                )
                .await
                .map_err(|e| db_error("read the workers", e))?;
            Ok(rows
                .iter()
                .map(|r| WorkerRow {
                    id: r.get(0),
                    host: r.get(1),
                    pid: r.get(2),
                    role: r.get(3),
                    heartbeat_age_ms: r.get(4),
                    teammates: r.get(5),
                })
                .collect())
        })
        .await
}

async fn heartbeat(store: &PgStore, holder: &str, lease: Duration) -> Result<(), BackendError> {
    let client = store.client().await?;
    client
        .execute(
            "UPDATE troupe_teammates
                SET lease_until = clock_timestamp() + make_interval(secs => $3)
              WHERE team = $1 AND holder = $2",
            &[&store.team(), &holder, &lease.as_secs_f64()],
        )
        .await
        .map_err(|e| db_error("extend teammate leases", e))?;
    client
        .execute(
            "UPDATE troupe_workers SET heartbeat_at = now() WHERE team = $1 AND id = $2",
            &[&store.team(), &holder],
        )
        .await
        .map_err(|e| db_error("stamp a heartbeat", e))?;
    Ok(())
}

/// This machine's name (for `troupe status`), or `unknown`.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The lead's lock of a team: held while this value lives.
pub struct LeadLock {
    /// Dropping the client closes the connection, which releases the lock.
    _client: Arc<tokio_postgres::Client>,
    _store: PgStore,
}

/// Takes the team's lead lock, or says it is held (`Ok(None)`). The lock's connection is opened
/// on the store's own runtime (like a pooled one), so it outlives the caller's runtime.
pub async fn lead_lock(store: &PgStore) -> Result<Option<LeadLock>, BackendError> {
    let team = store.team().to_owned();
    let shown = store.shown().to_owned();
    let own = store.clone();
    let opened = store.handle().spawn(async move {
        let client = own.dedicated().await.map_err(|e| {
            BackendError::new(
                "store_unavailable",
                format!(
                    "cannot reach PostgreSQL at {shown}: {}",
                    super::with_causes(&e)
                ),
            )
        })?;
        let got: bool = client
            .query_one(
                "SELECT pg_try_advisory_lock($2, hashtext(current_schema() || '/' || $1))",
                &[&team, &super::LEAD_LOCK_CLASS],
            )
            .await
            .map_err(|e| db_error("take the lead lock", e))?
            .get(0);
        Ok(got.then_some(client))
    });
    let client = store
        .bounded(async {
            match opened.await {
                Ok(result) => result,
                Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
                Err(_) => Err(BackendError::new(
                    "store_unavailable",
                    "the database runtime stopped",
                )),
            }
        })
        .await?;
    Ok(client.map(|client| LeadLock {
        _client: Arc::new(client),
        _store: store.clone(),
    }))
}

#[async_trait::async_trait]
impl RosterReader for PgRoster {
    async fn teammates(&self) -> Result<Vec<TeammateRecord>, RosterReadError> {
        Ok(PgRoster::all(self).await?)
    }

    async fn workers(&self) -> Result<Option<Vec<WorkerRow>>, BackendError> {
        Ok(Some(PgRoster::workers(self).await?))
    }
}

#[async_trait::async_trait]
impl LeasedRoster for PgRoster {
    fn holder(&self) -> &str {
        PgRoster::holder(self)
    }

    async fn all(&self) -> Result<Vec<TeammateRecord>, BackendError> {
        PgRoster::all(self).await
    }

    async fn get(&self, name: &AgentName) -> Result<Option<TeammateRecord>, BackendError> {
        PgRoster::get(self, name).await
    }

    async fn holders(&self) -> Result<Vec<Holder>, BackendError> {
        PgRoster::holders(self).await
    }

    async fn holds(&self, name: &AgentName) -> Result<bool, BackendError> {
        PgRoster::holds(self, name).await
    }

    async fn acquire(&self, name: &AgentName) -> Result<Lease, BackendError> {
        PgRoster::acquire(self, name).await
    }

    async fn add(&self, record: &TeammateRecord) -> Result<bool, BackendError> {
        PgRoster::add(self, record).await
    }

    async fn replace_stopped(&self, record: &TeammateRecord) -> Result<bool, BackendError> {
        PgRoster::replace_stopped(self, record).await
    }

    async fn set_status(
        &self,
        name: &AgentName,
        status: TeammateStatus,
        detail: Option<String>,
        now: UtcTime,
    ) -> Result<Option<TeammateStatus>, BackendError> {
        PgRoster::set_status(self, name, status, detail, now).await
    }

    async fn workers(&self) -> Result<Vec<WorkerRow>, BackendError> {
        PgRoster::workers(self).await
    }
}
