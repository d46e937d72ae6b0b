//! `PgProtocolStore`: the protocol store port on `troupe_requests` and `troupe_answers`.
//!
//! Every operation that decides something is **one transaction** holding the team's protocol
//! advisory lock (`pg_advisory_xact_lock`), the database's counterpart of the file store's
//! mutex + `.protocol.lock`: the rows are read, the same pure rules decide
//! (`store::protocol::rules`), the change is written, and the commit releases the lock. So two
//! processes answering or consuming at once are serialised, and exactly one wins.
//!
//! **Answers are single.** `answer` records the response in `troupe_answers` and commits, then
//! delivers it. Unlike the file store, the delivery runs after the commit, outside the protocol
//! lock: a delivery is a query of its own, and a lock held across it would hold a pooled
//! connection idle in a transaction for as long as the mailbox takes. So a later attempt can
//! find a record whose message is not in the mailbox *yet*. It refuses; whether it also
//! delivers that message is decided by the answer's **delivery lock** (`delivery_lock`), which
//! the writer takes before committing its record and holds until its delivery returned, on a
//! connection of its own: a finisher — a refused answerer, a run's start — delivers a recorded
//! answer only if it can take that lock, that is only if the writer finished or is gone (the
//! server drops a session's locks when its connection ends). A writer still delivering is left
//! alone: the refused answerer prints its refusal and nothing else. Mailbox sends are
//! idempotent by message id, so a finisher that comes after a finished writer delivers nothing.
//!
//! Requests are kept whole (their JSON in `body`) with the columns the queries need; there is
//! no archive: an index on creation order keeps `list`, `pending` and `latest_plan_of` cheap.

use std::sync::Arc;

use troupe_wire::{
    AgentName, MailboxMessage, ProtocolMessage, ProtocolRequest, RequestId, RequestKind, WireError,
};

use super::delivery_lock::DeliveryLock;
use super::{db_error, locked, Lock, PgStore};
use crate::clock::Clock;
use crate::ids::IdGenerator;
use crate::store::protocol::rules::{self, AnswerCheck, Decision};
use crate::store::protocol::{
    Consumed, Deliver, Delivery, NewRequest, ProtocolError, ProtocolStore,
};
use crate::store::BackendError;

/// The protocol store of one team in PostgreSQL.
pub struct PgProtocolStore {
    store: PgStore,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
}

fn corrupt(why: impl Into<String>) -> ProtocolError {
    ProtocolError::Backend(BackendError::new("store_corrupt", why))
}

fn encode(request: &ProtocolRequest) -> Result<String, ProtocolError> {
    serde_json::to_string(request)
        .map_err(|e| corrupt(format!("encode request {}: {e}", request.id())))
}

pub(super) fn decode(body: &str) -> Result<ProtocolRequest, ProtocolError> {
    let value: serde_json::Value = troupe_wire::strict::from_json_str(body, "protocol request")
        .map_err(|e| corrupt(format!("a request row does not parse: {e}")))?;
    ProtocolRequest::from_value(value).map_err(|e| corrupt(format!("a request row: {e}")))
}

fn decode_answer(request: &ProtocolRequest, body: &str) -> Result<ProtocolMessage, ProtocolError> {
    let message = match MailboxMessage::from_json_bytes(body.as_bytes()) {
        Ok(MailboxMessage::Protocol(message)) => message,
        Ok(MailboxMessage::Ordinary(_)) => {
            return Err(corrupt(format!(
                "the answer of request {} is an ordinary message",
                request.id()
            )))
        }
        Err(e) => {
            return Err(corrupt(format!(
                "the answer of request {}: {e}",
                request.id()
            )))
        }
    };
    rules::check_recorded(request, &message).map_err(|e| corrupt(e.to_string()))?;
    Ok(message)
}

/// A request row and its recorded answer, as text.
type Fetched = Option<(String, Option<String>)>;

/// What a locked transaction hands back to the caller's thread.
enum AnswerStep {
    /// Committed: deliver this message, holding its delivery lock when this attempt recorded it.
    Deliver(ProtocolMessage, Option<DeliveryLock>),
    /// Refused; finish the recorded answer's delivery if its writer is gone (best effort), then
    /// report.
    Refuse(ProtocolError, Option<ProtocolMessage>),
}

impl PgProtocolStore {
    pub fn new(store: PgStore, clock: Arc<dyn Clock>, ids: Arc<dyn IdGenerator>) -> Self {
        Self { store, clock, ids }
    }

    async fn rows(
        &self,
        sql: &'static str,
        sender: Option<String>,
    ) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        let store = &self.store;
        let bodies = self
            .store
            .bounded(async move {
                let client = store.client().await?;
                let rows = match &sender {
                    Some(sender) => client.query(sql, &[&store.team(), sender]).await,
                    None => client.query(sql, &[&store.team()]).await,
                }
                .map_err(|e| db_error("read protocol requests", e))?;
                Ok(rows
                    .iter()
                    .map(|r| r.get::<_, String>(0))
                    .collect::<Vec<_>>())
            })
            .await?;
        bodies.iter().map(|b| decode(b)).collect()
    }

    /// The request `id` and its answer record, without a lock (reads see committed rows).
    async fn fetch(&self, id: RequestId) -> Result<Fetched, ProtocolError> {
        let store = &self.store;
        Ok(self
            .store
            .bounded(async move {
                let client = store.client().await?;
                let row = client
                    .query_opt(
                        "SELECT r.body, a.body FROM troupe_requests r
                       LEFT JOIN troupe_answers a ON a.team = r.team AND a.request_id = r.id
                      WHERE r.team = $1 AND r.id = $2",
                        &[&store.team(), &id.as_uuid()],
                    )
                    .await
                    .map_err(|e| db_error("read a protocol request", e))?;
                Ok(row.map(|r| (r.get(0), r.get(1))))
            })
            .await?)
    }

    async fn request(&self, id: RequestId) -> Result<ProtocolRequest, ProtocolError> {
        match self.fetch(id).await? {
            Some((body, _)) => decode(&body),
            None => Err(ProtocolError::NotFound(id)),
        }
    }

    async fn deliver(
        deliver: Deliver<'_>,
        answer: &ProtocolMessage,
    ) -> Result<Delivery, ProtocolError> {
        deliver
            .deliver(answer)
            .await
            .map_err(|cause| ProtocolError::Undelivered {
                id: answer.request_id(),
                cause,
            })
    }

    /// Delivers `recorded` if its writer finished or is gone (its delivery lock is free), and
    /// says whether it was written now; `None` when the writer holds the lock, still delivering.
    async fn finish(
        &self,
        deliver: Deliver<'_>,
        recorded: &ProtocolMessage,
    ) -> Result<Option<Delivery>, ProtocolError> {
        let store = &self.store;
        let id = recorded.request_id();
        let Some(lock) = self
            .store
            .bounded(DeliveryLock::try_take(store, id))
            .await?
        else {
            return Ok(None);
        };
        let delivered = Self::deliver(deliver, recorded).await;
        lock.release().await;
        delivered.map(Some)
    }

    /// Before refusing a second answer: finishes the recorded one's delivery if its writer is
    /// gone (a process that died between record and delivery), and says so.
    async fn finish_recorded(&self, deliver: Deliver<'_>, recorded: &ProtocolMessage) {
        match self.finish(deliver, recorded).await {
            Ok(None | Some(Delivery::AlreadyThere)) => {}
            Ok(Some(Delivery::Sent)) => tracing::warn!(
                request = %recorded.request_id(),
                "delivered a recorded answer whose delivery had been interrupted"
            ),
            Err(cause) => tracing::warn!(
                request = %recorded.request_id(),
                cause = %cause,
                "a recorded answer is still undelivered"
            ),
        }
    }
}

/// One attempt of each port operation; the port retries those safe to repeat.
impl PgProtocolStore {
    async fn create_once(&self, new: NewRequest) -> Result<ProtocolRequest, ProtocolError> {
        let store = &self.store;
        let clock = self.clock.clone();
        let ids = self.ids.clone();
        let created = self
            .store
            .bounded(async move {
                let mut client = store.client().await?;
                let tx = locked(&mut client, store.team(), Lock::Protocol).await?;
                // Read under the lock: two processes creating at once get times in lock order.
                let now = clock.now();
                let latest: Option<i64> = tx
                    .query_one(
                        "SELECT max(created_ms) FROM troupe_requests WHERE team = $1",
                        &[&store.team()],
                    )
                    .await
                    .map_err(|e| db_error("read the latest request", e))?
                    .get(0);
                if let Some(latest) = latest {
                    if now.unix_millis() < latest {
                        let latest = troupe_wire::UtcTime::from_unix_millis(latest)
                            .map_err(|e| BackendError::new("store_corrupt", e.to_string()))?;
                        return Ok(Err(ProtocolError::ClockBackwards { now, latest }));
                    }
                }
                let id = ids.request_id();
                let request = match new_request(new, now, id) {
                    Ok(request) => request,
                    Err(e) => return Ok(Err(e)),
                };
                let body = match encode(&request) {
                    Ok(body) => body,
                    Err(e) => return Ok(Err(e)),
                };
                let inserted = tx
                .execute(
                    "INSERT INTO troupe_requests (team, id, created_ms, sender, kind, pending, body)
                     VALUES ($1, $2, $3, $4, $5, true, $6) ON CONFLICT DO NOTHING",
                    &[
                        &store.team(),
                        &id.as_uuid(),
                        &now.unix_millis(),
                        &request.sender().as_str(),
                        &request.kind().as_str(),
                        &body,
                    ],
                )
                .await
                .map_err(|e| db_error("register a protocol request", e))?;
                if inserted == 0 {
                    return Ok(Err(ProtocolError::State {
                        id,
                        status: "registered".to_owned(),
                        why: "the id generator returned an id that is already registered"
                            .to_owned(),
                    }));
                }
                tx.commit()
                    .await
                    .map_err(|e| db_error("commit a protocol request", e))?;
                Ok(Ok(request))
            })
            .await?;
        created
    }

    async fn get_once(&self, id: RequestId) -> Result<Option<ProtocolRequest>, ProtocolError> {
        self.fetch(id)
            .await?
            .map(|(body, _)| decode(&body))
            .transpose()
    }

    async fn list_once(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        self.rows(
            "SELECT body FROM troupe_requests WHERE team = $1 ORDER BY created_ms, seq",
            None,
        )
        .await
    }

    async fn pending_once(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        self.rows(
            "SELECT body FROM troupe_requests WHERE team = $1 AND pending \
             ORDER BY created_ms, seq",
            None,
        )
        .await
    }

    async fn latest_plan_of_once(
        &self,
        sender: &AgentName,
    ) -> Result<Option<ProtocolRequest>, ProtocolError> {
        Ok(self
            .rows(
                "SELECT body FROM troupe_requests
                  WHERE team = $1 AND sender = $2 AND kind = 'plan_approval'
                  ORDER BY created_ms DESC, seq DESC LIMIT 1",
                Some(sender.as_str().to_owned()),
            )
            .await?
            .pop()
            .filter(|r| r.kind() == RequestKind::PlanApproval))
    }

    async fn validate_request_once(
        &self,
        message: &ProtocolMessage,
    ) -> Result<ProtocolRequest, ProtocolError> {
        let request = self.request(message.request_id()).await?;
        rules::check_request_message(&request, message, self.clock.now())?;
        Ok(request)
    }

    async fn validate_response_once(
        &self,
        message: &ProtocolMessage,
    ) -> Result<Consumed, ProtocolError> {
        let request = self.request(message.request_id()).await?;
        rules::would_consume(request, message, self.clock.now())
    }

    async fn consume_response_once(
        &self,
        message: &ProtocolMessage,
    ) -> Result<Consumed, ProtocolError> {
        let store = &self.store;
        let now = self.clock.now();
        let message = message.clone();
        self.store
            .bounded(async move {
                let mut client = store.client().await?;
                let tx = locked(&mut client, store.team(), Lock::Protocol).await?;
                let consumed = consume_in(&tx, store, &message, now).await?;
                if matches!(&consumed, Ok(c) if !c.replayed) {
                    tx.commit()
                        .await
                        .map_err(|e| db_error("commit a resolution", e))?;
                }
                Ok(consumed)
            })
            .await?
    }

    /// The clock of this store (a transaction that consumes decides at its time).
    pub(super) fn now(&self) -> troupe_wire::UtcTime {
        self.clock.now()
    }

    async fn answer_once(
        &self,
        response: &ProtocolMessage,
        deliver: Deliver<'_>,
    ) -> Result<Delivery, ProtocolError> {
        let store = &self.store;
        let clock = self.clock.clone();
        let response_owned = response.clone();
        let step = self
            .store
            .bounded(async move {
                let response = response_owned;
                let mut client = store.client().await?;
                let tx = locked(&mut client, store.team(), Lock::Protocol).await?;
                let id = response.request_id();
                let row = tx
                    .query_opt(
                        "SELECT r.body, a.body FROM troupe_requests r
                       LEFT JOIN troupe_answers a ON a.team = r.team AND a.request_id = r.id
                      WHERE r.team = $1 AND r.id = $2",
                        &[&store.team(), &id.as_uuid()],
                    )
                    .await
                    .map_err(|e| db_error("read a protocol request", e))?;
                let Some(row) = row else {
                    return Ok(AnswerStep::Refuse(ProtocolError::NotFound(id), None));
                };
                let request = match decode(&row.get::<_, String>(0)) {
                    Ok(request) => request,
                    Err(e) => return Ok(AnswerStep::Refuse(e, None)),
                };
                let recorded = match row
                    .get::<_, Option<String>>(1)
                    .map(|body| decode_answer(&request, &body))
                    .transpose()
                {
                    Ok(recorded) => recorded,
                    Err(e) => return Ok(AnswerStep::Refuse(e, None)),
                };
                match rules::check_answer(&request, &response, recorded.as_ref(), clock.now()) {
                    Ok(AnswerCheck::New) => {
                        // Held from before the record is visible until the delivery returned.
                        let lock = DeliveryLock::take(store, id).await?;
                        let body = String::from_utf8_lossy(
                            &MailboxMessage::Protocol(response.clone()).to_json_bytes(),
                        )
                        .into_owned();
                        tx.execute(
                        "INSERT INTO troupe_answers (team, request_id, body) VALUES ($1, $2, $3)",
                        &[&store.team(), &id.as_uuid(), &body],
                    )
                    .await
                    .map_err(|e| db_error("record an answer", e))?;
                        tx.commit()
                            .await
                            .map_err(|e| db_error("commit an answer", e))?;
                        Ok(AnswerStep::Deliver(response, Some(lock)))
                    }
                    // The recorded message itself again: its own sender retrying, idempotent.
                    Ok(AnswerCheck::Again) => Ok(AnswerStep::Deliver(response, None)),
                    Err(refused) => {
                        let finish = match &refused {
                            ProtocolError::Answered { .. } => recorded,
                            _ => None,
                        };
                        Ok(AnswerStep::Refuse(refused, finish))
                    }
                }
            })
            .await?;
        match step {
            AnswerStep::Deliver(message, lock) => {
                let delivered = Self::deliver(deliver, &message).await;
                if let Some(lock) = lock {
                    lock.release().await;
                }
                delivered
            }
            AnswerStep::Refuse(refused, recorded) => {
                if let Some(recorded) = recorded {
                    self.finish_recorded(deliver, &recorded).await;
                }
                Err(refused)
            }
        }
    }

    async fn deliver_recorded_answers_once(
        &self,
        deliver: Deliver<'_>,
    ) -> Result<Vec<ProtocolMessage>, ProtocolError> {
        let store = &self.store;
        let rows = self
            .store
            .bounded(async move {
                let client = store.client().await?;
                let rows = client
                    .query(
                        "SELECT r.body, a.body FROM troupe_requests r
                       JOIN troupe_answers a ON a.team = r.team AND a.request_id = r.id
                      WHERE r.team = $1 AND r.pending
                      ORDER BY r.created_ms, r.seq",
                        &[&store.team()],
                    )
                    .await
                    .map_err(|e| db_error("read recorded answers", e))?;
                Ok(rows
                    .iter()
                    .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
                    .collect::<Vec<_>>())
            })
            .await?;
        let mut delivered = Vec::new();
        for (request, answer) in rows {
            let request = decode(&request)?;
            let answer = decode_answer(&request, &answer)?;
            // A writer still delivering its answer is left to finish it.
            if self.finish(deliver, &answer).await? == Some(Delivery::Sent) {
                delivered.push(answer);
            }
        }
        Ok(delivered)
    }
}

fn new_request(
    new: NewRequest,
    now: troupe_wire::UtcTime,
    id: RequestId,
) -> Result<ProtocolRequest, ProtocolError> {
    let expires = now
        .checked_add(new.ttl)
        .ok_or_else(|| WireError::new(format!("ttl {:?} puts the expiry out of range", new.ttl)))?;
    Ok(ProtocolRequest::new_pending(
        id,
        new.kind,
        new.sender,
        new.target,
        new.content,
        now,
        expires,
    )?)
}

#[async_trait::async_trait]
impl ProtocolStore for PgProtocolStore {
    /// Not repeated after a broken connection: a first attempt that committed would leave a
    /// second request registered.
    async fn create(&self, new: NewRequest) -> Result<ProtocolRequest, ProtocolError> {
        self.create_once(new).await
    }

    async fn get(&self, id: RequestId) -> Result<Option<ProtocolRequest>, ProtocolError> {
        super::retrying(move || self.get_once(id)).await
    }

    async fn list(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        super::retrying(move || self.list_once()).await
    }

    async fn pending(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        super::retrying(move || self.pending_once()).await
    }

    async fn latest_plan_of(
        &self,
        sender: &AgentName,
    ) -> Result<Option<ProtocolRequest>, ProtocolError> {
        super::retrying(move || self.latest_plan_of_once(sender)).await
    }

    async fn validate_request(
        &self,
        message: &ProtocolMessage,
    ) -> Result<ProtocolRequest, ProtocolError> {
        super::retrying(move || self.validate_request_once(message)).await
    }

    async fn validate_response(
        &self,
        message: &ProtocolMessage,
    ) -> Result<Consumed, ProtocolError> {
        super::retrying(move || self.validate_response_once(message)).await
    }

    /// Repeated after a broken connection: a first attempt that committed makes the repeat a
    /// replay of the same message (the stored result, nothing changed).
    async fn consume_response(&self, message: &ProtocolMessage) -> Result<Consumed, ProtocolError> {
        super::retrying(move || self.consume_response_once(message)).await
    }

    async fn answer(
        &self,
        response: &ProtocolMessage,
        deliver: Deliver<'_>,
    ) -> Result<Delivery, ProtocolError> {
        super::retrying(move || self.answer_once(response, deliver)).await
    }

    async fn deliver_recorded_answers(
        &self,
        deliver: Deliver<'_>,
    ) -> Result<Vec<ProtocolMessage>, ProtocolError> {
        super::retrying(move || self.deliver_recorded_answers_once(deliver)).await
    }

    async fn recorded_answer(
        &self,
        id: RequestId,
    ) -> Result<Option<ProtocolMessage>, ProtocolError> {
        let fetched = super::retrying(move || self.fetch(id)).await?;
        let Some((body, answer)) = fetched else {
            return Err(ProtocolError::NotFound(id));
        };
        let request = decode(&body)?;
        answer
            .map(|answer| decode_answer(&request, &answer))
            .transpose()
    }
}

/// Consumes `message` inside `tx`, which holds the protocol lock, without committing: the
/// outer error is the database's, the inner one the rules' refusal (nothing written). A replay
/// writes nothing either.
pub(super) async fn consume_in(
    tx: &deadpool_postgres::Transaction<'_>,
    store: &PgStore,
    message: &ProtocolMessage,
    now: troupe_wire::UtcTime,
) -> Result<Result<Consumed, ProtocolError>, BackendError> {
    let id = message.request_id();
    let row = tx
        .query_opt(
            "SELECT body FROM troupe_requests WHERE team = $1 AND id = $2",
            &[&store.team(), &id.as_uuid()],
        )
        .await
        .map_err(|e| db_error("read a protocol request", e))?;
    let Some(row) = row else {
        return Ok(Err(ProtocolError::NotFound(id)));
    };
    let request = match decode(&row.get::<_, String>(0)) {
        Ok(request) => request,
        Err(e) => return Ok(Err(e)),
    };
    let resolved = match rules::decide_response(&request, message, now) {
        Ok(Decision::Replay) => {
            return Ok(Ok(Consumed {
                request,
                replayed: true,
            }))
        }
        Ok(Decision::Apply(resolved)) => resolved,
        Err(e) => return Ok(Err(e)),
    };
    let body = match encode(&resolved) {
        Ok(body) => body,
        Err(e) => return Ok(Err(e)),
    };
    tx.execute(
        "UPDATE troupe_requests SET pending = false, body = $3
          WHERE team = $1 AND id = $2",
        &[&store.team(), &id.as_uuid(), &body],
    )
    .await
    .map_err(|e| db_error("resolve a protocol request", e))?;
    Ok(Ok(Consumed {
        request: resolved,
        replayed: false,
    }))
}
