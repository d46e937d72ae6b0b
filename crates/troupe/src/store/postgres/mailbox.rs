//! `PgMailboxStore`: the mailbox port on two tables: `troupe_messages`, the queue of messages
//! that can still be claimed (`ready`, `processing`), and `troupe_messages_kept`, where a
//! message moves — in the statement that acks or quarantines it — to stay (`done`,
//! `quarantine`). One row per message; its `state` is the folder it is in.
//!
//! **Claims are leases.** A claim takes the oldest claimable message (ready, or processing with
//! an expired lease) by creation time then id, `FOR UPDATE SKIP LOCKED` so concurrent claimers
//! never wait on each other, and stamps it with this store's holder id, a new **fencing token**
//! from a sequence (so tokens only grow) and `lease_until = now + lease`. A background task
//! extends the leases this store holds every third of the lease. A holder that dies or pauses
//! past its lease loses the message to the next claimer.
//!
//! **Acks, releases and quarantines are fenced.** The store remembers the token of every claim
//! it made and the statement moves the row only if the row still carries that token. A
//! process that paused past its lease and resumes finds a newer token on the row and gets
//! `LeaseLost` — it cannot complete what another worker now holds. A token is the authority,
//! not the clock: an expired lease whose message nobody took yet can still be acked by its
//! holder (no one else can be working on it).
//!
//! **Claims ahead.** A consumer that keeps finding messages (a backlog being drained) has its
//! next claims made in one statement, a batch at a time, handed out one per `claim` — see
//! `next_row` for why a row claimed ahead is never handed out once its lease may have run out.
//! Meanwhile those rows show as `processing`, claimed by this holder.
//!
//! **Wakes.** `send` commits the row alone, then asks the store's notifier to wake the recipient
//! (`notify.rs`: wakes go out in rounds after their rows commit, so durable sends from many
//! connections share WAL flushes; a wake is never seen before its row). It returns without
//! waiting for that round; the store waits for its sends' wakes when it is dropped (at most
//! `notify::FLUSH_WAIT`), so a command that sends and exits still wakes its recipient. Releases,
//! requeues and recovery, which are rare, still `pg_notify` in their own statement.
//!
//! `recover` (run start) releases only processing messages whose lease expired: with workers
//! in other processes, a live lease is somebody's work in progress. Database time
//! (`clock_timestamp()`) decides leases, so hosts need not agree on their clocks; the injected
//! clock stamps quarantine records, as in the file store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use troupe_wire::{AgentName, MailboxMessage, MessageId, UtcTime};
use uuid::Uuid;

use super::notify::FLUSH_WAIT;
use super::{db_error, PgStore};
use crate::clock::Clock;
use crate::store::mailbox::{
    AckOutcome, MailboxCounts, MailboxEntry, MailboxError, MailboxState, MailboxStore,
    QuarantineRecord, RecoveryReport, MAX_MESSAGE_BYTES,
};
use crate::store::BackendError;
use crate::sync::lock;

/// How long a claim holds a message unless extended.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(15);

/// The mailboxes of one team in PostgreSQL.
pub struct PgMailboxStore {
    store: PgStore,
    clock: Arc<dyn Clock>,
    /// Who claims: written into `claimed_by`.
    holder: String,
    lease: Duration,
    /// The fencing token (and the row's `created_ms`) of each claim this store made and has not
    /// finished.
    claims: Arc<Mutex<HashMap<(AgentName, MessageId), HeldClaim>>>,
    /// Messages this store moved out of the queue or back into it since it last vacuumed it.
    churn: Arc<AtomicU64>,
    /// Per agent: claims made ahead of the caller while it drains a backlog.
    ahead: Mutex<HashMap<AgentName, Ahead>>,
    /// The notifier's round that carries the latest wake this store's sends asked for (0:
    /// none): what it waits for when it goes.
    wakes_asked: AtomicU64,
    stop: CancellationToken,
}

/// How many messages one claim takes while a backlog is drained, and after how many claims in
/// a row that found a message the store starts to: one round trip then serves a batch.
const BATCH: i64 = 16;
const BATCH_AFTER: u32 = 4;

/// Claims made ahead for one agent: the streak of claims that found a message, and claimed
/// rows not handed out yet (oldest first).
#[derive(Default)]
struct Ahead {
    streak: u32,
    rows: std::collections::VecDeque<AheadRow>,
}

/// A claim this store holds: its fencing token, and the row's `created_ms`, which every
/// statement on the row names beside its id — with the whole key of either index given, the
/// planner looks the row up in one probe even on a queue table it has no statistics for yet
/// (it otherwise may walk the agent's whole queue for it: `BENCHMARKS.md`, 2026-12-03).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HeldClaim {
    pub fence: i64,
    pub created_ms: i64,
}

struct AheadRow {
    /// When its claim was sent, by the monotonic clock and by the injected one: the row is
    /// fresh while both say less than half the lease has passed.
    sent: (Instant, UtcTime),
    id: Uuid,
    body: String,
    fence: i64,
    created_ms: i64,
}

/// How many finished claims make the queue worth vacuuming, and how often that is looked at.
const VACUUM_AFTER: u64 = 256;
const VACUUM_LOOK: Duration = Duration::from_millis(250);

impl Drop for PgMailboxStore {
    fn drop(&mut self) {
        self.stop.cancel();
        self.release_ahead();
        self.store
            .wait_for_wakes(self.wakes_asked.load(Ordering::Acquire), FLUSH_WAIT);
    }
}

/// How long a store that goes away waits to give back the rows it claimed ahead.
const RELEASE_AHEAD_WAIT: Duration = Duration::from_secs(2);

struct Row {
    state: MailboxState,
    body: String,
    fence: Option<i64>,
}

impl PgMailboxStore {
    /// A mailbox store claiming as `holder`, with leases of `lease`, extended in the
    /// background while this value lives.
    pub fn new(store: PgStore, clock: Arc<dyn Clock>, holder: &str, lease: Duration) -> Self {
        let mailbox = Self {
            store,
            clock,
            holder: holder.to_owned(),
            lease,
            claims: Arc::new(Mutex::new(HashMap::new())),
            churn: Arc::new(AtomicU64::new(0)),
            ahead: Mutex::new(HashMap::new()),
            wakes_asked: AtomicU64::new(0),
            stop: CancellationToken::new(),
        };
        mailbox.start_heartbeat();
        mailbox.start_vacuum();
        mailbox
    }

    /// Keeps the queue's claim index free of dead entries. Every finished claim leaves one
    /// behind (its row moved to `troupe_messages_kept`), at the front of the index where every
    /// claim starts scanning, and concurrent claims keep the B-tree from marking them dead on
    /// its own: a backlog drained by several workers slowed to a few hundred claims a second
    /// (measured; `troupe-bench pg`). So once this store has finished [`VACUUM_AFTER`] claims
    /// it runs `VACUUM (SKIP_LOCKED)` on the queue — cheap, the queue is as small as the
    /// backlog — skipping it when another process is vacuuming already. Autovacuum does the
    /// same for `troupe_messages_kept`, which only grows.
    fn start_vacuum(&self) {
        let store = self.store.clone();
        let churn = self.churn.clone();
        let stop = self.stop.clone();
        self.store.handle().spawn(async move {
            let mut warned = false;
            loop {
                tokio::select! {
                    () = tokio::time::sleep(VACUUM_LOOK) => {}
                    () = stop.cancelled() => return,
                }
                if churn.load(Ordering::Relaxed) < VACUUM_AFTER {
                    continue;
                }
                churn.store(0, Ordering::Relaxed);
                let result = match store.client().await {
                    Ok(client) => client
                        .batch_execute("VACUUM (SKIP_LOCKED) troupe_messages")
                        .await
                        .map_err(|e| db_error("vacuum the message queue", e)),
                    Err(e) => Err(e),
                };
                if let Err(e) = result {
                    if !warned {
                        tracing::warn!("{e} (claims slow down as the queue churns)");
                        warned = true;
                    }
                }
            }
        });
    }

    /// Gives back, fenced, the rows claimed ahead and not handed out (a store going away: the
    /// process ends, a worker stops), so the next holder need not wait for their leases; best
    /// effort and bounded: a row not given back is claimable once its lease runs out.
    fn release_ahead(&self) {
        let fences: Vec<i64> = lock(&self.ahead)
            .drain()
            .flat_map(|(_, ahead)| ahead.rows.into_iter().map(|row| row.fence))
            .collect();
        if fences.is_empty() {
            return;
        }
        let store = self.store.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let release = async move {
            let work = async {
                let client = store.client().await?;
                client
                    .execute(
                        "WITH released AS (
                             UPDATE troupe_messages
                                SET state = 'ready', claimed_by = NULL, lease_until = NULL
                              WHERE team = $1 AND state = 'processing' AND fence = ANY($2)
                          RETURNING agent)
                         SELECT pg_notify($3, agent) FROM (SELECT DISTINCT agent FROM released) a",
                        &[&store.team(), &fences, &store.channel()],
                    )
                    .await
                    .map_err(|e| db_error("give back messages claimed ahead", e))
            };
            tokio::time::timeout(RELEASE_AHEAD_WAIT, work)
                .await
                .map_err(|_| BackendError::new("store_timeout", "gave up giving back claims"))?
        };
        // A drop cannot await: the release runs on the store's runtime, and the drop waits for
        // it (bounded by `RELEASE_AHEAD_WAIT`).
        let bounded = self.store.clone();
        self.store.handle().spawn(async move {
            let _ = tx.send(bounded.bounded(release).await);
        });
        let released = rx.recv().unwrap_or_else(|_| {
            Err(BackendError::new(
                "store_unavailable",
                "the database runtime stopped",
            ))
        });
        if let Err(e) = released {
            tracing::info!("{e}: their leases run out instead");
        }
    }

    /// Who this store claims as.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    fn start_heartbeat(&self) {
        if self.lease.is_zero() {
            return;
        }
        let store = self.store.clone();
        let holder = self.holder.clone();
        let lease = self.lease;
        let stop = self.stop.clone();
        let claims = self.claims.clone();
        self.store.handle().spawn(async move {
            let every = lease / 3;
            loop {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = stop.cancelled() => return,
                }
                let fences: Vec<i64> = lock(&claims).values().map(|h| h.fence).collect();
                if fences.is_empty() {
                    continue;
                }
                if let Err(e) = extend(&store, &holder, lease, &fences).await {
                    tracing::warn!("could not extend message leases: {e}");
                }
            }
        });
    }

    pub(super) fn fence_of(&self, agent: &AgentName, id: MessageId) -> Option<i64> {
        self.claim_of(agent, id).map(|held| held.fence)
    }

    pub(super) fn claim_of(&self, agent: &AgentName, id: MessageId) -> Option<HeldClaim> {
        lock(&self.claims).get(&(agent.clone(), id)).copied()
    }

    pub(super) fn forget(&self, agent: &AgentName, id: MessageId) {
        lock(&self.claims).remove(&(agent.clone(), id));
        self.churn.fetch_add(1, Ordering::Relaxed);
    }

    async fn row(&self, agent: &AgentName, id: MessageId) -> Result<Option<Row>, MailboxError> {
        let store = &self.store;
        let agent = agent.as_str().to_owned();
        let id = id.as_uuid();
        Ok(self
            .store
            .bounded(async move {
                let client = store.client().await?;
                let row = client
                    .query_opt(
                        &client
                            .prepare_cached(
                                "SELECT state, body, fence FROM troupe_messages
                      WHERE team = $1 AND agent = $2 AND id = $3
                     UNION ALL
                     SELECT state, body, NULL FROM troupe_messages_kept
                      WHERE team = $1 AND agent = $2 AND id = $3",
                            )
                            .await
                            .map_err(|e| db_error("prepare a statement", e))?,
                        &[&store.team(), &agent, &id],
                    )
                    .await
                    .map_err(|e| db_error("read a message", e))?;
                row.map(|r| {
                    Ok(Row {
                        state: state_of(r.get(0))?,
                        body: r.get(1),
                        fence: r.get(2),
                    })
                })
                .transpose()
            })
            .await?)
    }

    /// Why a fenced move found nothing to move: the row is someone else's now, or not there.
    async fn refusal(&self, agent: &AgentName, id: MessageId, held: Option<i64>) -> MailboxError {
        match self.row(agent, id).await {
            Ok(Some(row)) if row.state == MailboxState::Processing && row.fence != held => {
                MailboxError::LeaseLost {
                    agent: agent.clone(),
                    id,
                }
            }
            Ok(_) => MailboxError::NotProcessing {
                agent: agent.clone(),
                id,
            },
            Err(e) => e,
        }
    }

    /// Moves a processing row this store holds to `to` (clearing the claim); whether it moved.
    async fn fenced_move(
        &self,
        agent: &AgentName,
        id: MessageId,
        held: HeldClaim,
        to: MailboxState,
        reason: Option<(String, i64)>,
    ) -> Result<bool, MailboxError> {
        let HeldClaim { fence, created_ms } = held;
        let store = &self.store;
        let agent_s = agent.as_str().to_owned();
        let uuid = id.as_uuid();
        let to = to.as_str();
        Ok(self
            .store
            .bounded(async move {
                let client = store.client().await?;
                let (reason, at) = match reason {
                    Some((reason, at)) => (Some(reason), Some(at)),
                    None => (None, None),
                };
                let notify = store.channel();
                let moved = if to == "ready" {
                    client
                        .query(
                            &client
                                .prepare_cached(
                                    "WITH moved AS (
                             UPDATE troupe_messages
                                SET state = 'ready', claimed_by = NULL, lease_until = NULL
                              WHERE team = $1 AND agent = $2 AND created_ms = $6 AND id = $3
                                AND state = 'processing' AND fence = $4
                          RETURNING agent)
                         SELECT pg_notify($5, agent)::text FROM moved",
                                )
                                .await
                                .map_err(|e| db_error("prepare a statement", e))?,
                            &[&store.team(), &agent_s, &uuid, &fence, &notify, &created_ms],
                        )
                        .await
                } else {
                    let from = (to == "quarantine").then_some("processing");
                    client
                        .query(
                            &client
                                .prepare_cached(FINISH)
                                .await
                                .map_err(|e| db_error("prepare a statement", e))?,
                            &[
                                &store.team(),
                                &agent_s,
                                &uuid,
                                &fence,
                                &to,
                                &from,
                                &at,
                                &reason,
                                &created_ms,
                            ],
                        )
                        .await
                }
                .map_err(|e| db_error("move a claimed message", e))?;
                Ok(!moved.is_empty())
            })
            .await?)
    }
}

/// Moves a processing row held by `fence` (its `created_ms` `$9`, see [`HeldClaim`]) to
/// `troupe_messages_kept` as `$5` (`done` or `quarantine`, with `quarantined_from`,
/// `quarantined_ms`, `reason`); a row when it moved.
pub(super) const FINISH: &str = "WITH moved AS (
     DELETE FROM troupe_messages
      WHERE team = $1 AND agent = $2 AND created_ms = $9 AND id = $3
        AND state = 'processing' AND fence = $4
  RETURNING team, agent, id, created_ms, body)
 INSERT INTO troupe_messages_kept
        (team, agent, id, created_ms, state, body, quarantined_from, quarantined_ms, reason)
 SELECT team, agent, id, created_ms, $5, body, $6, $7, $8 FROM moved
 RETURNING 1";

/// Extends the leases of the claims this store made and still knows (by their fencing
/// tokens); the rows another holder took are no longer its, and a claim whose answer was lost
/// (a connection dropped mid-statement) is not kept alive: its lease runs out.
async fn extend(
    store: &PgStore,
    holder: &str,
    lease: Duration,
    fences: &[i64],
) -> Result<u64, BackendError> {
    let client = store.client().await?;
    client
        .execute(
            &client
                .prepare_cached(
                    "UPDATE troupe_messages
                SET lease_until = clock_timestamp() + make_interval(secs => $3)
              WHERE team = $1 AND claimed_by = $2 AND state = 'processing'
                AND fence = ANY($4)",
                )
                .await
                .map_err(|e| db_error("prepare a statement", e))?,
            &[&store.team(), &holder, &lease.as_secs_f64(), &fences],
        )
        .await
        .map_err(|e| db_error("extend message leases", e))
}

fn state_of(raw: &str) -> Result<MailboxState, BackendError> {
    MailboxState::parse(raw).ok_or_else(|| {
        BackendError::new(
            "store_corrupt",
            format!("a message row has the unknown state {raw:?}"),
        )
    })
}

/// A row's body as a message of `agent`, or why it is not one.
fn parse_body(agent: &AgentName, body: &str) -> Result<MailboxMessage, String> {
    let message = MailboxMessage::from_json_bytes(body.as_bytes()).map_err(|e| e.to_string())?;
    if message.recipient() != agent {
        return Err(format!(
            "its recipient is {}, not {agent}",
            message.recipient()
        ));
    }
    Ok(message)
}

fn file_name(id: Uuid) -> String {
    format!("{id}.json")
}

/// One attempt of each port operation; the port retries those safe to repeat.
impl PgMailboxStore {
    async fn send_once(&self, message: &MailboxMessage) -> Result<(), MailboxError> {
        let bytes = message.to_json_bytes();
        if bytes.len() as u64 > MAX_MESSAGE_BYTES {
            return Err(MailboxError::TooLarge {
                id: message.id(),
                bytes: bytes.len() as u64,
                max: MAX_MESSAGE_BYTES,
            });
        }
        let body = String::from_utf8_lossy(&bytes).into_owned();
        let store = &self.store;
        let agent = message.recipient().as_str().to_owned();
        let id = message.id().as_uuid();
        let created = message.created_at_utc().unix_millis();
        let inserted = self
            .store
            .bounded(async move {
                let client = store.client().await?;
                let rows = client
                    .query(
                        &client
                            .prepare_cached(
                                "INSERT INTO troupe_messages (team, agent, id, created_ms, state, body)
                         SELECT $1, $2, $3, $4, 'ready', $5
                          WHERE NOT EXISTS (
                                SELECT 1 FROM troupe_messages_kept
                                 WHERE team = $1 AND agent = $2 AND id = $3)
                         ON CONFLICT DO NOTHING
                         RETURNING agent",
                            )
                            .await
                            .map_err(|e| db_error("prepare a statement", e))?,
                        &[&store.team(), &agent, &id, &created, &body],
                    )
                    .await
                    .map_err(|e| db_error("send a message", e))?;
                Ok(!rows.is_empty())
            })
            .await?;
        if inserted {
            return Ok(());
        }
        let state = self
            .row(message.recipient(), message.id())
            .await?
            .map_or(MailboxState::Ready, |r| r.state);
        Err(MailboxError::Duplicate {
            agent: message.recipient().clone(),
            id: message.id(),
            state,
        })
    }

    /// The next claimed row for `agent`: one claimed ahead whose lease is surely still live, or
    /// a new claim — of a batch, when the caller has been draining a backlog.
    ///
    /// **Claims ahead.** A consumer that keeps finding messages has its next claims made in
    /// one statement ([`BATCH`] rows, oldest first). A row claimed ahead is not extended by the
    /// heartbeat until it is handed out, and it is handed out only within half the lease after
    /// its claim was sent (the database's lease started later), so a row handed out always has
    /// half its lease left and the heartbeat (every third) keeps it; a row left longer (the
    /// caller stopped claiming) is dropped here and its lease runs out in the database, so
    /// another holder gets it — never this one, twice. With a zero lease nothing is claimed
    /// ahead.
    async fn next_row(
        &self,
        agent: &AgentName,
    ) -> Result<Option<(Uuid, String, HeldClaim)>, MailboxError> {
        let fresh = self.lease / 2;
        {
            let now = self.clock.now();
            let mut ahead = lock(&self.ahead);
            let entry = ahead.entry(agent.clone()).or_default();
            while let Some(row) = entry.rows.pop_front() {
                let (sent, sent_at) = row.sent;
                let by_clock = now.unix_millis().saturating_sub(sent_at.unix_millis());
                if sent.elapsed() < fresh && by_clock >= 0 && (by_clock as u128) < fresh.as_millis()
                {
                    entry.streak = entry.streak.saturating_add(1);
                    let held = HeldClaim {
                        fence: row.fence,
                        created_ms: row.created_ms,
                    };
                    return Ok(Some((row.id, row.body, held)));
                }
            }
        }
        let batch = {
            let ahead = lock(&self.ahead);
            let streak = ahead.get(agent).map_or(0, |a| a.streak);
            if streak >= BATCH_AFTER && !fresh.is_zero() {
                BATCH
            } else {
                1
            }
        };
        let store = &self.store;
        let agent_s = agent.as_str().to_owned();
        let holder = self.holder.clone();
        let lease = self.lease.as_secs_f64();
        let sent = (Instant::now(), self.clock.now());
        let mut claimed = self
            .store
            .bounded(async move {
                let client = store.claim_client().await?;
                let rows = client
                    .query(
                        &client
                            .prepare_cached(
                                // `troupe_claim` (migration 11): each claimed row updated by
                                // its whole key, whatever the table's statistics.
                                "SELECT created_ms, id, body, fence
                               FROM troupe_claim($1, $2, $3, $4, $5)",
                            )
                            .await
                            .map_err(|e| db_error("prepare a statement", e))?,
                        &[&store.team(), &agent_s, &holder, &lease, &batch],
                    )
                    .await
                    .map_err(|e| db_error("claim a message", e))?;
                Ok(rows
                    .iter()
                    .map(|r| {
                        (
                            r.get::<_, i64>(0),
                            r.get::<_, Uuid>(1),
                            r.get::<_, String>(2),
                            r.get::<_, i64>(3),
                        )
                    })
                    .collect::<Vec<_>>())
            })
            .await?;
        // RETURNING has no order: the oldest first, as the claim chose them.
        claimed.sort_by_key(|(created, id, _, _)| (*created, *id));
        let mut ahead = lock(&self.ahead);
        let entry = ahead.entry(agent.clone()).or_default();
        let mut rows = claimed.into_iter();
        let Some((created_ms, uuid, body, fence)) = rows.next() else {
            entry.streak = 0;
            return Ok(None);
        };
        entry.streak = entry.streak.saturating_add(1);
        entry
            .rows
            .extend(rows.map(|(created_ms, id, body, fence)| AheadRow {
                sent,
                id,
                body,
                fence,
                created_ms,
            }));
        Ok(Some((uuid, body, HeldClaim { fence, created_ms })))
    }

    async fn claim_once(&self, agent: &AgentName) -> Result<Option<MailboxMessage>, MailboxError> {
        loop {
            let Some((uuid, body, held)) = self.next_row(agent).await? else {
                return Ok(None);
            };
            let fence = held.fence;
            match parse_body(agent, &body) {
                Ok(message) => {
                    lock(&self.claims).insert((agent.clone(), message.id()), held);
                    return Ok(Some(message));
                }
                Err(why) => {
                    // A row troupe did not write (or an older troupe did): never returned,
                    // never blocking the next claim.
                    let store = &self.store;
                    let agent_s = agent.as_str().to_owned();
                    let at = self.clock.now().unix_millis();
                    let reason = format!("invalid message: {why}");
                    self.store
                        .bounded(async move {
                            let client = store.client().await?;
                            client
                                .execute(
                                    &client
                                        .prepare_cached(
                                            "WITH moved AS (
                                     DELETE FROM troupe_messages
                                      WHERE team = $1 AND agent = $2 AND id = $3 AND fence = $4
                                  RETURNING team, agent, id, created_ms, body)
                                 INSERT INTO troupe_messages_kept
                                        (team, agent, id, created_ms, state, body,
                                         quarantined_from, quarantined_ms, reason)
                                 SELECT team, agent, id, created_ms, 'quarantine', body,
                                        'ready', $5, $6 FROM moved",
                                        )
                                        .await
                                        .map_err(|e| db_error("prepare a statement", e))?,
                                    &[&store.team(), &agent_s, &uuid, &fence, &at, &reason],
                                )
                                .await
                                .map_err(|e| db_error("quarantine an invalid message", e))?;
                            Ok(())
                        })
                        .await?;
                    tracing::warn!(agent = %agent, id = %uuid, "quarantined an invalid message row");
                }
            }
        }
    }

    async fn ack_once(
        &self,
        agent: &AgentName,
        message: &MailboxMessage,
    ) -> Result<AckOutcome, MailboxError> {
        let id = message.id();
        if let Some(held) = self.claim_of(agent, id) {
            if self
                .fenced_move(agent, id, held, MailboxState::Done, None)
                .await?
            {
                self.forget(agent, id);
                return Ok(AckOutcome::Acked);
            }
        }
        let held = self.fence_of(agent, id);
        match self.row(agent, id).await? {
            Some(row) if row.state == MailboxState::Done => {
                self.forget(agent, id);
                if row.body.as_bytes() == message.to_json_bytes().as_slice() {
                    Ok(AckOutcome::AlreadyDone)
                } else {
                    Err(MailboxError::AckConflict {
                        agent: agent.clone(),
                        id,
                    })
                }
            }
            Some(row) if row.state == MailboxState::Processing && row.fence != held => {
                self.forget(agent, id);
                Err(MailboxError::LeaseLost {
                    agent: agent.clone(),
                    id,
                })
            }
            _ => Err(MailboxError::NotProcessing {
                agent: agent.clone(),
                id,
            }),
        }
    }

    async fn release_once(&self, agent: &AgentName, id: MessageId) -> Result<(), MailboxError> {
        let held = self.fence_of(agent, id);
        if let Some(claim) = self.claim_of(agent, id) {
            if self
                .fenced_move(agent, id, claim, MailboxState::Ready, None)
                .await?
            {
                self.forget(agent, id);
                return Ok(());
            }
        }
        let refusal = self.refusal(agent, id, held).await;
        if matches!(refusal, MailboxError::LeaseLost { .. }) {
            self.forget(agent, id);
        }
        Err(refusal)
    }

    async fn quarantine_once(
        &self,
        agent: &AgentName,
        id: MessageId,
        reason: &str,
    ) -> Result<QuarantineRecord, MailboxError> {
        let at = self.clock.now();
        let record = |from| QuarantineRecord {
            file_name: file_name(id.as_uuid()),
            from,
            reason: reason.to_owned(),
            at,
        };
        let held = self.fence_of(agent, id);
        if let Some(claim) = self.claim_of(agent, id) {
            if self
                .fenced_move(
                    agent,
                    id,
                    claim,
                    MailboxState::Quarantine,
                    Some((reason.to_owned(), at.unix_millis())),
                )
                .await?
            {
                self.forget(agent, id);
                return Ok(record(MailboxState::Processing));
            }
        }
        // A ready message (nobody holds it) may be quarantined by anyone.
        let store = &self.store;
        let agent_s = agent.as_str().to_owned();
        let uuid = id.as_uuid();
        let why = reason.to_owned();
        let at_ms = at.unix_millis();
        let moved = self
            .store
            .bounded(async move {
                let client = store.client().await?;
                let n = client
                    .execute(
                        &client
                            .prepare_cached(
                                "WITH moved AS (
                         DELETE FROM troupe_messages
                          WHERE team = $1 AND agent = $2 AND id = $3 AND state = 'ready'
                      RETURNING team, agent, id, created_ms, body)
                     INSERT INTO troupe_messages_kept
                            (team, agent, id, created_ms, state, body,
                             quarantined_from, quarantined_ms, reason)
                     SELECT team, agent, id, created_ms, 'quarantine', body, 'ready', $4, $5
                       FROM moved",
                            )
                            .await
                            .map_err(|e| db_error("prepare a statement", e))?,
                        &[&store.team(), &agent_s, &uuid, &at_ms, &why],
                    )
                    .await
                    .map_err(|e| db_error("quarantine a message", e))?;
                Ok(n > 0)
            })
            .await?;
        if moved {
            return Ok(record(MailboxState::Ready));
        }
        let refusal = self.refusal(agent, id, held).await;
        if matches!(refusal, MailboxError::LeaseLost { .. }) {
            self.forget(agent, id);
        }
        Err(refusal)
    }

    async fn recover_once(&self, agent: &AgentName) -> Result<RecoveryReport, MailboxError> {
        let store = &self.store;
        let agent_s = agent.as_str().to_owned();
        let released = self
            .store
            .bounded(async move {
                let client = store.client().await?;
                let rows = client
                    .query(
                        &client
                            .prepare_cached(
                                "WITH released AS (
                         UPDATE troupe_messages
                            SET state = 'ready', claimed_by = NULL, lease_until = NULL
                          WHERE team = $1 AND agent = $2 AND state = 'processing'
                            AND lease_until < clock_timestamp()
                      RETURNING id, created_ms)
                     SELECT id, pg_notify($3, $2)::text FROM released ORDER BY created_ms, id",
                            )
                            .await
                            .map_err(|e| db_error("prepare a statement", e))?,
                        &[&store.team(), &agent_s, &store.channel()],
                    )
                    .await
                    .map_err(|e| db_error("recover messages", e))?;
                Ok(rows.iter().map(|r| r.get::<_, Uuid>(0)).collect::<Vec<_>>())
            })
            .await?;
        let mut report = RecoveryReport::default();
        for uuid in released {
            if let Ok(id) = MessageId::from_uuid(uuid) {
                report.released.push(id);
            }
        }
        Ok(report)
    }

    async fn list_once(
        &self,
        agent: &AgentName,
        state: MailboxState,
    ) -> Result<Vec<MailboxEntry>, MailboxError> {
        let store = &self.store;
        let agent_s = agent.as_str().to_owned();
        let state_s = state.as_str();
        let sql = match state {
            MailboxState::Ready | MailboxState::Processing => {
                "SELECT id, body, NULL::text FROM troupe_messages
                  WHERE team = $1 AND agent = $2 AND state = $3
                  ORDER BY created_ms, id"
            }
            MailboxState::Done | MailboxState::Quarantine => {
                "SELECT id, body, reason FROM troupe_messages_kept
                  WHERE team = $1 AND agent = $2 AND state = $3
                  ORDER BY created_ms, id"
            }
        };
        let rows = self
            .store
            .bounded(async move {
                let client = store.client().await?;
                let rows = client
                    .query(
                        &client
                            .prepare_cached(sql)
                            .await
                            .map_err(|e| db_error("prepare a statement", e))?,
                        &[&store.team(), &agent_s, &state_s],
                    )
                    .await
                    .map_err(|e| db_error("list messages", e))?;
                Ok(rows
                    .iter()
                    .map(|r| {
                        (
                            r.get::<_, Uuid>(0),
                            r.get::<_, String>(1),
                            r.get::<_, Option<String>>(2),
                        )
                    })
                    .collect::<Vec<_>>())
            })
            .await?;
        let mut entries = Vec::with_capacity(rows.len());
        for (uuid, body, reason) in rows {
            match parse_body(agent, &body) {
                Ok(message) => entries.push(MailboxEntry::Message(message)),
                Err(_) if state == MailboxState::Quarantine => {
                    entries.push(MailboxEntry::Invalid {
                        file_name: file_name(uuid),
                        reason,
                    })
                }
                Err(why) => {
                    return Err(MailboxError::Backend(BackendError::new(
                        "store_corrupt",
                        format!("message {uuid} in {agent}'s {state} is unreadable: {why}"),
                    )))
                }
            }
        }
        Ok(entries)
    }

    async fn counts_once(&self, agent: &AgentName) -> Result<MailboxCounts, MailboxError> {
        let store = &self.store;
        let agent_s = agent.as_str().to_owned();
        let rows = self
            .store
            .bounded(async move {
                let client = store.client().await?;
                let rows = client
                    .query(
                        &client
                            .prepare_cached(
                                "SELECT state, count(*) FROM troupe_messages
                      WHERE team = $1 AND agent = $2 GROUP BY state
                     UNION ALL
                     SELECT state, count(*) FROM troupe_messages_kept
                      WHERE team = $1 AND agent = $2 GROUP BY state",
                            )
                            .await
                            .map_err(|e| db_error("prepare a statement", e))?,
                        &[&store.team(), &agent_s],
                    )
                    .await
                    .map_err(|e| db_error("count messages", e))?;
                Ok(rows
                    .iter()
                    .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
                    .collect::<Vec<_>>())
            })
            .await?;
        let mut counts = MailboxCounts::default();
        for (state, n) in rows {
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            match state_of(&state)? {
                MailboxState::Ready => counts.ready = n,
                MailboxState::Processing => counts.processing = n,
                MailboxState::Done => counts.done = n,
                MailboxState::Quarantine => counts.quarantine = n,
            }
        }
        Ok(counts)
    }

    async fn agents_once(&self) -> Result<Vec<AgentName>, MailboxError> {
        let store = &self.store;
        let names = self
            .store
            .bounded(async move {
                let client = store.client().await?;
                let rows = client
                    .query(
                        &client
                            .prepare_cached(
                                "SELECT agent FROM troupe_messages WHERE team = $1
                     UNION
                     SELECT agent FROM troupe_messages_kept WHERE team = $1
                     ORDER BY agent",
                            )
                            .await
                            .map_err(|e| db_error("prepare a statement", e))?,
                        &[&store.team()],
                    )
                    .await
                    .map_err(|e| db_error("list mailboxes", e))?;
                Ok(rows
                    .iter()
                    .map(|r| r.get::<_, String>(0))
                    .collect::<Vec<_>>())
            })
            .await?;
        Ok(names
            .iter()
            .filter_map(|n| AgentName::parse(n).ok())
            .collect())
    }
}

#[async_trait::async_trait]
impl MailboxStore for PgMailboxStore {
    async fn send(&self, message: &MailboxMessage) -> Result<(), MailboxError> {
        let mut attempt = 0;
        let sent = super::retrying(move || {
            attempt += 1;
            let attempt = attempt;
            async move {
                match self.send_once(message).await {
                    // The first attempt may have committed before its connection broke: the
                    // same message already there is this send's own.
                    Err(MailboxError::Duplicate { .. }) if attempt > 1 => {
                        match self.row(message.recipient(), message.id()).await? {
                            Some(row)
                                if row.body.as_bytes() == message.to_json_bytes().as_slice() =>
                            {
                                Ok(())
                            }
                            _ => self.send_once(message).await,
                        }
                    }
                    other => other,
                }
            }
        })
        .await;
        if sent.is_ok() {
            // Committed: now its wake, which the notifier sends in its next round (after the
            // row, never before; see `notify.rs`).
            let round = self.store.wake(message.recipient().as_str());
            self.wakes_asked.fetch_max(round, Ordering::AcqRel);
        }
        sent
    }

    async fn claim(&self, agent: &AgentName) -> Result<Option<MailboxMessage>, MailboxError> {
        super::retrying(move || self.claim_once(agent)).await
    }

    async fn ack(
        &self,
        agent: &AgentName,
        message: &MailboxMessage,
    ) -> Result<AckOutcome, MailboxError> {
        super::retrying(move || self.ack_once(agent, message)).await
    }

    async fn release(&self, agent: &AgentName, id: MessageId) -> Result<(), MailboxError> {
        self.release_once(agent, id).await
    }

    async fn quarantine(
        &self,
        agent: &AgentName,
        id: MessageId,
        reason: &str,
    ) -> Result<QuarantineRecord, MailboxError> {
        self.quarantine_once(agent, id, reason).await
    }

    async fn recover(&self, agent: &AgentName) -> Result<RecoveryReport, MailboxError> {
        super::retrying(move || self.recover_once(agent)).await
    }

    async fn list(
        &self,
        agent: &AgentName,
        state: MailboxState,
    ) -> Result<Vec<MailboxEntry>, MailboxError> {
        super::retrying(move || self.list_once(agent, state)).await
    }

    async fn counts(&self, agent: &AgentName) -> Result<MailboxCounts, MailboxError> {
        super::retrying(move || self.counts_once(agent)).await
    }

    async fn agents(&self) -> Result<Vec<AgentName>, MailboxError> {
        super::retrying(move || self.agents_once()).await
    }
}

#[cfg(test)]
mod tests {
    use super::FINISH;
    use crate::store::postgres::testing::TestDb;

    /// The shared blocks a statement's plan touched, from `EXPLAIN (ANALYZE, BUFFERS, FORMAT
    /// JSON)` run in a transaction that is rolled back.
    fn blocks(db: &TestDb, prepare: &str, execute: &str) -> u64 {
        let plan = db
            .query_text(&format!(
                "{prepare} BEGIN; EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {execute}"
            ))
            .unwrap()
            .unwrap();
        let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
        let top = &plan[0]["Plan"];
        top["Shared Hit Blocks"].as_u64().unwrap() + top["Shared Read Blocks"].as_u64().unwrap()
    }

    /// A new team's queue has no statistics until autovacuum first analyses it, and a backlog
    /// can grow to thousands of rows before that. The claim and the ack must still find their
    /// rows in a few pages: once, a plan chosen without statistics walked the agent's whole
    /// queue for each (3× slower at 10,000 messages; `BENCHMARKS.md`, 2026-12-03).
    #[test]
    fn claims_and_acks_touch_a_few_pages_of_a_long_unanalysed_queue() {
        let Some(db) = TestDb::create() else { return };
        drop(db.store("t")); // the schema, migrated
        db.execute(
            "INSERT INTO troupe_messages
                    (team, agent, id, created_ms, state, body, claimed_by, fence, lease_until)
             SELECT 't', 'busy', gen_random_uuid(), g, 'processing', repeat('x', 300), 'h', g,
                    now() + interval '1 hour'
               FROM generate_series(1, 20000) g;
             INSERT INTO troupe_messages (team, agent, id, created_ms, state, body)
             SELECT 't', 'idle', gen_random_uuid(), g, 'ready', repeat('x', 300)
               FROM generate_series(1, 20000) g",
        )
        .unwrap();
        let last = db
            .query_text(
                "SELECT id::text || ' ' || created_ms FROM troupe_messages
                  WHERE team = 't' AND agent = 'busy' AND fence = 20000",
            )
            .unwrap()
            .unwrap();
        let (id, created) = last.split_once(' ').unwrap();
        let ack = blocks(
            &db,
            &format!(
                "PREPARE finish(text, text, uuid, bigint, text, text, bigint, text, bigint) \
                 AS {FINISH};"
            ),
            &format!(
                "EXECUTE finish('t', 'busy', '{id}', 20000, 'done', NULL, NULL, NULL, {created})"
            ),
        );
        // 68 blocks found by the whole key; 188 when the agent's queue was walked.
        assert!(ack < 120, "the ack touched {ack} blocks");

        let claim = blocks(
            &db,
            // A first claim in the session compiles the function (catalog reads): warmed.
            "DO $$ BEGIN PERFORM troupe_claim('t', 'idle', 'h', 30, 16); END $$;",
            "SELECT * FROM troupe_claim('t', 'idle', 'h', 30, 16)",
        );
        // 16 rows claimed in about 200 blocks; 2,000 and more when the agent's queue was read.
        assert!(claim < 600, "the claim touched {claim} blocks");
    }
}
