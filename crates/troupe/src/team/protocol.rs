//! The protocol runtime (SPEC §6): requests are registered in the protocol store *before* their
//! message is sent; responses go back to the original sender.
//!
//! **Answers are single.** Every answer — the lead's `review_plan`, `troupe review`, a teammate's
//! shutdown response — goes through [`ProtocolRuntime::respond`], which hands the message to
//! [`ProtocolStore::answer`]: the store records it and writes it into the mailbox in one locked
//! step, or refuses a second answer before anything is written. Observers and wakers run after
//! that step, outside the store's locks.

use std::sync::Arc;
use std::time::Duration;

use troupe_wire::{
    AgentName, Content, MailboxMessage, ProtocolMessage, ProtocolRequest, RequestId, RequestKind,
    TeamRoster, TeammateRecord, TeammateStatus,
};

use super::error::TeamError;
use super::observer::{TeamObserver, TeamUpdate};
use super::postman::Postman;
use crate::store::mailbox::{MailboxError, MailboxStore};
use crate::store::protocol::{DeliverAnswer, Delivery, NewRequest, ProtocolError, ProtocolStore};

/// Where `review_plan` learns whether a plan's sender can still take an answer (SPEC §6: a plan
/// whose sender is shut down or failed cannot be answered — nobody would read the answer). The
/// running team answers from its roster; `troupe review` from `team.json`.
pub trait TeammateStatuses: Sync {
    /// The teammate's roster record; `None` when there is no such teammate.
    fn record_of(&self, name: &AgentName) -> Option<TeammateRecord>;
}

impl TeammateStatuses for TeamRoster {
    fn record_of(&self, name: &AgentName) -> Option<TeammateRecord> {
        self.teammates.iter().find(|r| &r.name == name).cloned()
    }
}

/// How a protocol message checked against the store fares — the one triage of every protocol
/// message a worker or the driver takes (requests and responses alike).
pub(crate) enum Triage<T> {
    /// Valid: go on with it.
    Ok(T),
    /// The message itself is wrong (unknown id, wrong kind or parties, expired, answered): it is
    /// quarantined with this error as the reason and the consumer goes on.
    Quarantine(ProtocolError),
    /// The store could not answer (I/O): the message goes back to `ready/` and the failure is
    /// the consumer's.
    Storage(ProtocolError),
}

/// Sorts the store's verdict on a protocol message into [`Triage`].
pub(crate) fn classify<T>(verdict: Result<T, ProtocolError>) -> Triage<T> {
    match verdict {
        Ok(value) => Triage::Ok(value),
        Err(e) if TeamError::is_invalid_message(&e) => Triage::Quarantine(e),
        Err(e) => Triage::Storage(e),
    }
}

/// Moves a claimed `message` of `agent` to quarantine with `reason` and tells the observer: the
/// one way the team quarantines (workers, the driver, a respawn's leftovers).
pub(crate) async fn quarantine_and_report(
    mailbox: &dyn MailboxStore,
    observer: &dyn TeamObserver,
    agent: &AgentName,
    message: &MailboxMessage,
    reason: &str,
) -> Result<(), MailboxError> {
    mailbox.quarantine(agent, message.id(), reason).await?;
    observer.update(&TeamUpdate::Quarantined {
        agent: agent.clone(),
        message: message.id().to_string(),
        reason: reason.to_owned(),
    });
    Ok(())
}

/// Writes an answer into its recipient's mailbox; a message already there (same id) is a
/// delivery an earlier attempt made.
struct DeliverTo<'a>(&'a dyn MailboxStore);

#[async_trait::async_trait]
impl DeliverAnswer for DeliverTo<'_> {
    async fn deliver(&self, answer: &ProtocolMessage) -> Result<Delivery, String> {
        match self.0.send(&MailboxMessage::Protocol(answer.clone())).await {
            Ok(()) => Ok(Delivery::Sent),
            Err(MailboxError::Duplicate { .. }) => Ok(Delivery::AlreadyThere),
            Err(e) => Err(e.to_string()),
        }
    }
}

pub struct ProtocolRuntime {
    store: Arc<dyn ProtocolStore>,
    postman: Arc<Postman>,
    /// The response window of new requests.
    ttl: Duration,
}

impl ProtocolRuntime {
    pub fn new(store: Arc<dyn ProtocolStore>, postman: Arc<Postman>, ttl: Duration) -> Self {
        Self {
            store,
            postman,
            ttl,
        }
    }

    pub fn store(&self) -> &Arc<dyn ProtocolStore> {
        &self.store
    }

    /// Registers a request, then sends its message. If sending fails the request stays pending
    /// and the error says so (`protocol_delivery_error`); nothing is retried behind the caller.
    pub async fn open(
        &self,
        kind: RequestKind,
        sender: &AgentName,
        target: &AgentName,
        content: &str,
    ) -> Result<ProtocolRequest, TeamError> {
        self.open_with_ttl(kind, sender, target, content, self.ttl)
            .await
    }

    /// [`Self::open`] with its own response window (a permission request's `[approvals] ttl`).
    pub async fn open_with_ttl(
        &self,
        kind: RequestKind,
        sender: &AgentName,
        target: &AgentName,
        content: &str,
        ttl: Duration,
    ) -> Result<ProtocolRequest, TeamError> {
        let request = self
            .store
            .create(NewRequest {
                kind,
                sender: sender.clone(),
                target: target.clone(),
                content: Content::parse(content)?,
                ttl,
            })
            .await?;
        let envelope = self.postman.envelope(sender, target, content)?;
        let message =
            ProtocolMessage::request(envelope, kind.request_message_kind(), request.id())?;
        self.postman
            .send(&MailboxMessage::Protocol(message))
            .await
            .map_err(|e| TeamError::Delivery {
                request_id: request.id(),
                cause: e.to_string(),
            })?;
        Ok(request)
    }

    /// Sends the response to `request` from its target back to its sender — the one answer to
    /// it: refused (`protocol_state_error`, nothing written) when an answer was sent already.
    pub async fn respond(
        &self,
        request: &ProtocolRequest,
        approved: bool,
        content: &str,
    ) -> Result<ProtocolMessage, TeamError> {
        let envelope = self
            .postman
            .envelope(request.target(), request.sender(), content)?;
        let message = ProtocolMessage::response(
            envelope,
            request.kind().response_message_kind(),
            request.id(),
            approved,
        )?;
        let deliver = DeliverTo(self.postman.mailbox().as_ref());
        match self.store.answer(&message, &deliver).await {
            Ok(Delivery::Sent) => {
                self.postman
                    .announce(&MailboxMessage::Protocol(message.clone()));
                Ok(message)
            }
            Ok(Delivery::AlreadyThere) => {
                self.postman.wake(message.recipient());
                Ok(message)
            }
            Err(refused) => {
                if matches!(refused, ProtocolError::Answered { .. }) {
                    // The refusal may have finished delivering the first answer.
                    self.postman.wake(message.recipient());
                }
                Err(refused.into())
            }
        }
    }

    /// At start: delivers the recorded answers of pending requests whose message is missing (a
    /// process died between recording an answer and delivering it). Returns how many.
    pub async fn deliver_recorded_answers(&self) -> Result<usize, TeamError> {
        let deliver = DeliverTo(self.postman.mailbox().as_ref());
        let delivered = self.store.deliver_recorded_answers(&deliver).await?;
        for answer in &delivered {
            tracing::warn!(
                request = %answer.request_id(),
                message_id = %answer.id(),
                "delivered an answer whose delivery an earlier process did not finish"
            );
            self.postman
                .announce(&MailboxMessage::Protocol(answer.clone()));
        }
        Ok(delivered.len())
    }

    /// `review_plan` / `troupe review`: answers a pending plan request addressed to `reviewer`,
    /// unless its sender is shut down or failed (per `statuses`) or it was answered already.
    pub async fn review_plan(
        &self,
        reviewer: &AgentName,
        request_id: RequestId,
        approve: bool,
        feedback: Option<&str>,
        statuses: &dyn TeammateStatuses,
    ) -> Result<ProtocolMessage, TeamError> {
        let request = self
            .store
            .get(request_id)
            .await?
            .ok_or(ProtocolError::NotFound(request_id))?;
        if request.kind() != RequestKind::PlanApproval {
            return Err(ProtocolError::Mismatch {
                id: request_id,
                why: format!(
                    "it is a {} request, not a plan_approval request",
                    request.kind().as_str()
                ),
            }
            .into());
        }
        if request.target() != reviewer {
            return Err(ProtocolError::Mismatch {
                id: request_id,
                why: format!("it is addressed to {}, not to {reviewer}", request.target()),
            }
            .into());
        }
        // An answered plan is refused as such by the store, whatever its sender's status.
        if request.is_pending() {
            check_answerable(&request, statuses, self.store.as_ref()).await?;
        }
        let content = match feedback.map(str::trim).filter(|f| !f.is_empty()) {
            Some(f) => f.to_owned(),
            None if approve => "Approved".to_owned(),
            None => "Rejected".to_owned(),
        };
        // Pending, open, unanswered: the store decides under its locks, atomically with the send.
        self.respond(&request, approve, &content).await
    }
}

/// A plan's sender must be able to read the answer: on the roster, not shut down, not failed —
/// and the plan must be this teammate's, not one an earlier teammate of the same name left
/// pending before the name was spawned again (its `earlier_plan` and anything created before it).
async fn check_answerable(
    request: &ProtocolRequest,
    statuses: &dyn TeammateStatuses,
    store: &dyn ProtocolStore,
) -> Result<(), TeamError> {
    let sender = request.sender();
    let refused = |status: &'static str, why: &str| TeamError::TeammateState {
        name: sender.clone(),
        status,
        why: format!("{why}, so its plan cannot be answered"),
    };
    let record = statuses
        .record_of(sender)
        .ok_or_else(|| TeamError::TeammateNotFound(sender.clone()))?;
    match record.status {
        TeammateStatus::Shutdown => return Err(refused("shutdown", "it takes no more messages")),
        TeammateStatus::Failed => {
            return Err(refused(
                "failed",
                "it takes no more messages until the next run",
            ))
        }
        TeammateStatus::Running | TeammateStatus::Idle => {}
    }
    if let Some(earlier) = record.earlier_plan {
        // Creation order is the store's order (SPEC §5), never timestamps.
        let predecessors = earlier == request.id() || {
            let all = store.list().await?;
            let position = |id| all.iter().position(|r| r.id() == id);
            matches!((position(request.id()), position(earlier)), (Some(r), Some(e)) if r <= e)
        };
        if predecessors {
            return Err(refused(
                record.status.as_str(),
                &format!(
                    "plan {} was submitted by an earlier teammate named {sender}, which has stopped",
                    request.id()
                ),
            ));
        }
    }
    Ok(())
}
