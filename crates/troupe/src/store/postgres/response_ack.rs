//! `PgResponseAck`: consuming a protocol response and acking its message in **one
//! transaction** — the request's resolution and the message's fenced move to done commit
//! together or not at all.
//!
//! The transaction holds the team's protocol lock, decides with the same rules as
//! `PgProtocolStore::consume_response`, then moves the message only if this store still holds
//! its claim (its fencing token). A holder whose lease ran out — another worker claimed the
//! message since — finds nothing to move, and the rollback undoes the resolution too: the
//! request is resolved once, by whoever acks the message.
//!
//! A message this store holds no claim on (claimed by an earlier instance, or already acked —
//! a retry after a commit whose answer was lost) takes the ordinary path: the ack first, which
//! refuses a message held by someone else and reports one already done, and only then the
//! consume, which for a message acked by that transaction is a replay.

use std::sync::Arc;

use troupe_wire::{AgentName, MailboxMessage, ProtocolMessage};

use super::mailbox::{HeldClaim, FINISH};
use super::protocol::consume_in;
use super::{db_error, locked, Lock, PgMailboxStore, PgProtocolStore, PgStore};
use crate::store::mailbox::{AckOutcome, MailboxError, MailboxStore};
use crate::store::protocol::{Consumed, ProtocolStore};
use crate::store::response_ack::{ResponseAck, ResponseAckError};
use crate::store::BackendError;

pub struct PgResponseAck {
    store: PgStore,
    mailbox: Arc<PgMailboxStore>,
    protocol: Arc<PgProtocolStore>,
}

/// What the transaction decided.
enum Step {
    Done(Consumed),
    Refused(crate::store::protocol::ProtocolError),
    /// The claim is not this store's any more (or the row is gone): nothing was written.
    NotHeld,
}

impl PgResponseAck {
    /// Both stores must be over `store`'s database and team; `mailbox` is the instance that
    /// claimed the messages (it knows their fencing tokens).
    pub fn new(
        store: PgStore,
        mailbox: Arc<PgMailboxStore>,
        protocol: Arc<PgProtocolStore>,
    ) -> Self {
        Self {
            store,
            mailbox,
            protocol,
        }
    }

    async fn in_one_transaction(
        &self,
        agent: &AgentName,
        response: &ProtocolMessage,
        held: HeldClaim,
    ) -> Result<Step, BackendError> {
        let HeldClaim { fence, created_ms } = held;
        let store = &self.store;
        let now = self.protocol.now();
        let response = response.clone();
        let agent = agent.as_str().to_owned();
        let id = response.id().as_uuid();
        self.store
            .bounded(async move {
                let mut client = store.client().await?;
                let tx = locked(&mut client, store.team(), Lock::Protocol).await?;
                let consumed = match consume_in(&tx, store, &response, now).await? {
                    Ok(consumed) => consumed,
                    Err(refusal) => return Ok(Step::Refused(refusal)),
                };
                let moved = tx
                    .query(
                        FINISH,
                        &[
                            &store.team(),
                            &agent,
                            &id,
                            &fence,
                            &"done",
                            &None::<&str>,
                            &None::<i64>,
                            &None::<String>,
                            &created_ms,
                        ],
                    )
                    .await
                    .map_err(|e| db_error("ack a consumed response", e))?;
                if moved.is_empty() {
                    return Ok(Step::NotHeld);
                }
                tx.commit().await.map_err(|e| {
                    // The commit's outcome is unknown: a retry would take the ordinary path,
                    // which reports what happened; not repeated here.
                    let mut error = db_error("commit a consumed response and its ack", e);
                    error.connection_lost = false;
                    error
                })?;
                Ok(Step::Done(consumed))
            })
            .await
    }
}

#[async_trait::async_trait]
impl ResponseAck for PgResponseAck {
    async fn consume_and_ack(
        &self,
        agent: &AgentName,
        message: &MailboxMessage,
        response: &ProtocolMessage,
    ) -> Result<(Consumed, AckOutcome), ResponseAckError> {
        if let Some(held) = self.mailbox.claim_of(agent, message.id()) {
            let step = super::retrying(move || self.in_one_transaction(agent, response, held))
                .await
                .map_err(|e| ResponseAckError::Ack(MailboxError::Backend(e)))?;
            match step {
                Step::Done(consumed) => {
                    self.mailbox.forget(agent, message.id());
                    return Ok((consumed, AckOutcome::Acked));
                }
                Step::Refused(refusal) => return Err(ResponseAckError::Consume(refusal)),
                Step::NotHeld => {}
            }
        }
        // Not (or no longer) this store's claim: the ack decides, the consume follows it.
        let acked = self
            .mailbox
            .ack(agent, message)
            .await
            .map_err(ResponseAckError::Ack)?;
        let consumed = self
            .protocol
            .consume_response(response)
            .await
            .map_err(ResponseAckError::Consume)?;
        Ok((consumed, acked))
    }
}
