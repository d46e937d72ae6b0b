//! `PgTaskBoard`: the task board port on `troupe_tasks`.
//!
//! Every change (create, claim, complete) is **one transaction** holding the team's task-board
//! advisory lock: the rows are read and checked exactly as the file board checks its files
//! (each task's invariants, then the graph), the same pure rule decides
//! (`store::tasks::rules`), the one row that changed is written, and the commit releases the
//! lock. So of two workers on two hosts claiming one task, the second reads the first one's
//! claim and is refused `task_claimed`; the claim and the board's state are one write, never two.
//! Reads take no lock: a change writes one row, so a reader sees whole tasks.
//!
//! A row that does not parse, breaks a task's invariants or is stored under another id is
//! `task_store_corrupt` naming the row, never skipped (a skipped blocker would silently unblock
//! its dependants).

use std::sync::Arc;

use troupe_wire::{strict, AgentName};
use uuid::Uuid;

use super::{db_error, locked, Lock, PgStore};
use crate::clock::Clock;
use crate::error::ErrorCode;
use crate::ids::IdGenerator;
use crate::store::retention::{Kind, Report, Sweep};
use crate::store::tasks::file::sorted;
use crate::store::tasks::retention::finished_to_remove;
use crate::store::tasks::rules::{self, Tasks};
use crate::store::tasks::{ClaimToken, NewTask, Task, TaskBoard, TaskError, TaskId, DEFAULT_LEASE};
use crate::store::BackendError;

/// The task board of one team in PostgreSQL.
pub struct PgTaskBoard {
    store: PgStore,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    /// How long a claim lasts unless renewed.
    lease: std::time::Duration,
}

/// How a change writes the task its rule returned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Write {
    Insert,
    Update,
    /// An update that may give someone work (a task completed, released or returned): the
    /// team's processes are told in the same transaction (`NOTIFY <channel>, 'troupe:board'`),
    /// so idle teammates on other hosts look at the board — no polling.
    UpdateAndWake,
}

/// The payload of a board wake on the team's channel: not an agent name, so a receiver that
/// knows no board wakes ignores it.
pub const BOARD_WAKE: &str = "troupe:board";

fn row_name(team: &str, id: &Uuid) -> String {
    format!("troupe_tasks row (team {team:?}, id {id})")
}

/// Decodes and checks one row.
fn decode(team: &str, id: &Uuid, body: &str) -> Result<Task, TaskError> {
    let corrupt = |reason: String| TaskError::Corrupt {
        path: row_name(team, id),
        reason,
    };
    let task: Task = strict::from_json_str(body, "").map_err(|e| corrupt(e.to_string()))?;
    if task.id.to_string() != id.hyphenated().to_string() {
        return Err(corrupt(format!("it holds task {}", task.id)));
    }
    task.check().map_err(corrupt)?;
    Ok(task)
}

fn decode_all(team: &str, rows: &[(Uuid, String)]) -> Result<Tasks, TaskError> {
    let mut tasks = Tasks::new();
    for (id, body) in rows {
        let task = decode(team, id, body)?;
        tasks.insert(task.id, task);
    }
    rules::check_graph(&tasks).map_err(|reason| TaskError::Corrupt {
        path: format!("troupe_tasks (team {team:?})"),
        reason,
    })?;
    Ok(tasks)
}

fn encode(task: &Task) -> Result<String, TaskError> {
    serde_json::to_string(task)
        .map_err(|e| TaskError::Invalid(format!("cannot encode task {}: {e}", task.id)))
}

fn uuid_of(id: &TaskId) -> Result<Uuid, TaskError> {
    Uuid::parse_str(&id.to_string()).map_err(|e| TaskError::Invalid(e.to_string()))
}

const ALL: &str = "SELECT id, body FROM troupe_tasks WHERE team = $1";

fn rows_of(rows: Vec<tokio_postgres::Row>) -> Vec<(Uuid, String)> {
    rows.iter()
        .map(|r| (r.get::<_, Uuid>(0), r.get::<_, String>(1)))
        .collect()
}

impl PgTaskBoard {
    pub fn new(store: PgStore, clock: Arc<dyn Clock>, ids: Arc<dyn IdGenerator>) -> Self {
        Self {
            store,
            clock,
            ids,
            lease: DEFAULT_LEASE,
        }
    }

    /// Claims last `lease` unless renewed.
    pub fn with_lease(mut self, lease: std::time::Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Runs one change in one locked transaction: `change` gets every task and returns the
    /// task to write. A connection lost before the commit left nothing written, so the change
    /// is decided again from the rows as they are then; a connection lost during the commit
    /// leaves its outcome unknown and is reported, never repeated (a repeated claim would be
    /// refused as the claimer's own).
    async fn change(
        &self,
        change: impl Fn(&Tasks) -> Result<Task, TaskError> + Send + Sync,
        write: Write,
    ) -> Result<Task, TaskError> {
        let (store, change) = (&self.store, &change);
        super::retrying(|| async move {
            store
                .bounded(async { Ok(change_once(store, change, write).await) })
                .await
                .map_err(TaskError::Backend)?
        })
        .await
    }

    async fn load(&self) -> Result<Tasks, TaskError> {
        let store = &self.store;
        let rows = super::retrying(|| async move {
            store
                .bounded(async {
                    let client = store.client().await?;
                    client
                        .query(ALL, &[&store.team()])
                        .await
                        .map(rows_of)
                        .map_err(|e| db_error("read the task board", e))
                })
                .await
        })
        .await?;
        decode_all(self.store.team(), &rows)
    }
}

async fn change_once(
    store: &PgStore,
    change: &(dyn Fn(&Tasks) -> Result<Task, TaskError> + Send + Sync),
    write: Write,
) -> Result<Task, TaskError> {
    let mut client = store.client().await?;
    let tx = locked(&mut client, store.team(), Lock::Tasks).await?;
    let rows = tx
        .query(ALL, &[&store.team()])
        .await
        .map_err(|e| db_error("read the task board", e))?;
    let tasks = decode_all(store.team(), &rows_of(rows))?;
    let task = change(&tasks)?;
    let id = uuid_of(&task.id)?;
    let body = encode(&task)?;
    let status = task.status.as_str();
    let owner = task.owner.as_ref().map(|o| o.as_str().to_owned());
    let sql = match write {
        Write::Insert => {
            "INSERT INTO troupe_tasks (team, id, status, owner, body)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING"
        }
        Write::Update | Write::UpdateAndWake => {
            "UPDATE troupe_tasks SET status = $3, owner = $4, body = $5
              WHERE team = $1 AND id = $2"
        }
    };
    let written = tx
        .execute(sql, &[&store.team(), &id, &status, &owner, &body])
        .await
        .map_err(|e| db_error("write a task", e))?;
    if written != 1 {
        // Under the lock the rule saw every row: an insert that finds its id taken, or an
        // update whose row is gone, means a row changed outside troupe. Nothing is written.
        return Err(match write {
            Write::Insert => TaskError::IdTaken(task.id),
            Write::Update | Write::UpdateAndWake => TaskError::NotFound(task.id),
        });
    }
    if matches!(write, Write::Insert | Write::UpdateAndWake) {
        tx.execute("SELECT pg_notify($1, $2)", &[&store.channel(), &BOARD_WAKE])
            .await
            .map_err(|e| db_error("announce a task change", e))?;
    }
    tx.commit().await.map_err(|e| {
        let mut error = db_error("commit a task change (its outcome is unknown)", e);
        error.connection_lost = false;
        error
    })?;
    Ok(task)
}

#[async_trait::async_trait]
impl TaskBoard for PgTaskBoard {
    async fn create(&self, new: NewTask) -> Result<Task, TaskError> {
        let id = TaskId::from_uuid(self.ids.next_uuid())?;
        let now = self.clock.now();
        self.change(
            |tasks| rules::create(tasks, id, new.clone(), now),
            Write::Insert,
        )
        .await
    }

    async fn get(&self, id: &TaskId) -> Result<Task, TaskError> {
        let uuid = uuid_of(id)?;
        let store = &self.store;
        let uuid_ref = &uuid;
        let body = super::retrying(|| async move {
            store
                .bounded(async {
                    let client = store.client().await?;
                    client
                        .query_opt(
                            "SELECT body FROM troupe_tasks WHERE team = $1 AND id = $2",
                            &[&store.team(), uuid_ref],
                        )
                        .await
                        .map(|row| row.map(|r| r.get::<_, String>(0)))
                        .map_err(|e| db_error("read a task", e))
                })
                .await
        })
        .await?;
        match body {
            Some(body) => decode(self.store.team(), &uuid, &body),
            None => Err(TaskError::NotFound(*id)),
        }
    }

    async fn list(&self) -> Result<Vec<Task>, TaskError> {
        Ok(sorted(self.load().await?.into_values()))
    }

    async fn claim(&self, id: &TaskId, agent: &AgentName) -> Result<Task, TaskError> {
        let token = ClaimToken::from_uuid(self.ids.next_uuid())?;
        let now = self.clock.now();
        self.change(
            |tasks| rules::claim(tasks, id, agent, now, token, self.lease),
            Write::Update,
        )
        .await
    }

    async fn renew(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
    ) -> Result<Task, TaskError> {
        let now = self.clock.now();
        self.change(
            |tasks| rules::renew(tasks, id, agent, token, now, self.lease),
            Write::Update,
        )
        .await
    }

    async fn complete(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
    ) -> Result<Task, TaskError> {
        let now = self.clock.now();
        self.change(
            |tasks| rules::complete(tasks, id, agent, token, now),
            Write::UpdateAndWake,
        )
        .await
    }

    async fn expire(&self, id: &TaskId) -> Result<Task, TaskError> {
        let now = self.clock.now();
        self.change(|tasks| rules::expire(tasks, id, now), Write::UpdateAndWake)
            .await
    }

    async fn release(
        &self,
        id: &TaskId,
        agent: &AgentName,
        token: &ClaimToken,
        reason: &str,
    ) -> Result<Task, TaskError> {
        let now = self.clock.now();
        self.change(
            |tasks| rules::release(tasks, id, agent, token, now, reason),
            Write::UpdateAndWake,
        )
        .await
    }
}

/// Removes the finished tasks `sweep` lets go ([`crate::store::tasks::retention`]) from the
/// team's board, at most `batch` rows per transaction. Each batch holds
/// the board's lock, reads the board and decides again, so no change can name a task as a
/// blocker while it goes and what stays still loads; a gc killed between batches leaves the
/// rest for the next. With `sweep.dry_run` only reads run.
pub(super) async fn prune(
    store: &PgStore,
    sweep: &Sweep,
    report: &mut Report,
    batch: usize,
) -> Result<(), BackendError> {
    let size = |task: &Task| encode(task).map_or(0, |body| body.len() as u64);
    let mut removed: Vec<u64> = Vec::new();
    loop {
        let mut decided = Report::new(sweep.dry_run);
        let mut client = store.client().await?;
        let gone = if sweep.dry_run {
            let rows = client
                .query(ALL, &[&store.team()])
                .await
                .map_err(|e| db_error("read the task board", e))?;
            let tasks = decode_all(store.team(), &rows_of(rows)).map_err(backend)?;
            finished_to_remove(&tasks, size, sweep, &mut decided)
        } else {
            let tx = locked(&mut client, store.team(), Lock::Tasks).await?;
            let rows = tx
                .query(ALL, &[&store.team()])
                .await
                .map_err(|e| db_error("read the task board", e))?;
            let tasks = decode_all(store.team(), &rows_of(rows)).map_err(backend)?;
            let gone = finished_to_remove(&tasks, size, sweep, &mut decided);
            let ids = gone[..gone.len().min(batch)]
                .iter()
                .map(|(id, _)| uuid_of(id))
                .collect::<Result<Vec<Uuid>, _>>()
                .map_err(backend)?;
            tx.execute(
                "DELETE FROM troupe_tasks WHERE team = $1 AND id = ANY($2)",
                &[&store.team(), &ids],
            )
            .await
            .map_err(|e| db_error("remove finished tasks", e))?;
            tx.commit()
                .await
                .map_err(|e| db_error("commit the removal of finished tasks", e))?;
            gone
        };
        let last = sweep.dry_run || gone.len() <= batch;
        let done = if sweep.dry_run {
            gone.len()
        } else {
            gone.len().min(batch)
        };
        removed.extend(gone[..done].iter().map(|(_, bytes)| *bytes));
        if last {
            // What stays, and why, as the last decision saw it.
            report.merge(decided);
            break;
        }
    }
    for bytes in removed {
        report.removed(Kind::Tasks, bytes);
    }
    Ok(())
}

/// A board gc cannot read is left whole; the error says why.
fn backend(error: TaskError) -> BackendError {
    match error {
        TaskError::Backend(e) => e,
        other => BackendError::new(other.code(), other.to_string()),
    }
}
