//! The mailbox and protocol ports, reporting each transition to the event stream: a decorator
//! around any implementation, so every path that moves a message or a request — the lead, the
//! workers, the postman, recovery — is seen, without each of them remembering to say so.
//!
//! Only what succeeded is reported, after it happened. A claimed message whose sender is `user`
//! (a person, through `troupe send` or the web view) is also reported as `user_message`.

use std::sync::Arc;

use serde_json::json;
use troupe_wire::{AgentName, MailboxMessage, MessageId, ProtocolMessage, ProtocolRequest};

use super::kinds::{self, compact, preview};
use super::EventSink;
use crate::store::mailbox::{
    AckOutcome, MailboxCounts, MailboxEntry, MailboxError, MailboxState, MailboxStore,
    QuarantineRecord, RecoveryReport,
};
use crate::store::protocol::{
    Consumed, Deliver, Delivery, NewRequest, ProtocolError, ProtocolStore,
};
use crate::store::response_ack::{ResponseAck, ResponseAckError};

/// A mailbox that reports sends, claims, acks, releases and quarantines.
pub struct ObservedMailbox {
    inner: Arc<dyn MailboxStore>,
    events: Arc<dyn EventSink>,
}

impl ObservedMailbox {
    pub fn new(inner: Arc<dyn MailboxStore>, events: Arc<dyn EventSink>) -> Self {
        Self { inner, events }
    }
}

/// The fields of `message_sent`.
fn sent_fields(message: &MailboxMessage) -> serde_json::Map<String, serde_json::Value> {
    match message {
        MailboxMessage::Ordinary(m) => compact(json!({
            "message_id": m.id,
            "from": m.sender,
            "to": m.recipient,
            "message_kind": m.kind.as_str(),
            "preview": preview(m.content.as_str()),
        })),
        MailboxMessage::Protocol(p) => compact(json!({
            "message_id": p.id(),
            "from": p.sender(),
            "to": p.recipient(),
            "message_kind": p.kind().as_str(),
            "request_id": p.request_id(),
            "approved": p.approved(),
            "preview": preview(p.content().as_str()),
        })),
    }
}

#[async_trait::async_trait]
impl MailboxStore for ObservedMailbox {
    async fn send(&self, message: &MailboxMessage) -> Result<(), MailboxError> {
        self.inner.send(message).await?;
        self.events.emit(
            message.sender().as_str(),
            kinds::MESSAGE_SENT,
            sent_fields(message),
        );
        Ok(())
    }

    async fn claim(&self, agent: &AgentName) -> Result<Option<MailboxMessage>, MailboxError> {
        let claimed = self.inner.claim(agent).await?;
        if let Some(message) = &claimed {
            self.events.emit(
                agent.as_str(),
                kinds::MESSAGE_CLAIMED,
                kinds::fields(json!({"message_id": message.id(), "from": message.sender()})),
            );
            if let MailboxMessage::Ordinary(m) = message {
                if m.sender.is_user() {
                    self.events.emit(
                        agent.as_str(),
                        kinds::USER_MESSAGE,
                        kinds::fields(json!({"message_id": m.id, "text": m.content.as_str()})),
                    );
                }
            }
        }
        Ok(claimed)
    }

    async fn ack(
        &self,
        agent: &AgentName,
        message: &MailboxMessage,
    ) -> Result<AckOutcome, MailboxError> {
        let outcome = self.inner.ack(agent, message).await?;
        if outcome == AckOutcome::Acked {
            self.events.emit(
                agent.as_str(),
                kinds::MESSAGE_ACKED,
                kinds::fields(json!({"message_id": message.id()})),
            );
        }
        Ok(outcome)
    }

    async fn release(&self, agent: &AgentName, id: MessageId) -> Result<(), MailboxError> {
        self.inner.release(agent, id).await?;
        self.events.emit(
            agent.as_str(),
            kinds::MESSAGE_RELEASED,
            kinds::fields(json!({"message_id": id})),
        );
        Ok(())
    }

    async fn quarantine(
        &self,
        agent: &AgentName,
        id: MessageId,
        reason: &str,
    ) -> Result<QuarantineRecord, MailboxError> {
        let record = self.inner.quarantine(agent, id, reason).await?;
        self.events.emit(
            agent.as_str(),
            kinds::MESSAGE_QUARANTINED,
            kinds::fields(json!({"message_id": id, "reason": reason})),
        );
        Ok(record)
    }

    async fn recover(&self, agent: &AgentName) -> Result<RecoveryReport, MailboxError> {
        self.inner.recover(agent).await
    }

    async fn list(
        &self,
        agent: &AgentName,
        state: MailboxState,
    ) -> Result<Vec<MailboxEntry>, MailboxError> {
        self.inner.list(agent, state).await
    }

    async fn counts(&self, agent: &AgentName) -> Result<MailboxCounts, MailboxError> {
        self.inner.counts(agent).await
    }

    async fn agents(&self) -> Result<Vec<AgentName>, MailboxError> {
        self.inner.agents().await
    }
}

/// A protocol store that reports requests created, answered and consumed.
pub struct ObservedProtocol {
    inner: Arc<dyn ProtocolStore>,
    events: Arc<dyn EventSink>,
}

impl ObservedProtocol {
    pub fn new(inner: Arc<dyn ProtocolStore>, events: Arc<dyn EventSink>) -> Self {
        Self { inner, events }
    }
}

/// Whether a request's `request_*` events are written: a permission request has its own
/// (`permission_requested`, `permission_answered`, `permission_expired`, written by the call
/// that waits on it), so the stream says each step once.
pub fn has_request_events(kind: troupe_wire::RequestKind) -> bool {
    kind != troupe_wire::RequestKind::Permission
}

/// The fields every request event has.
pub fn request_fields(request: &ProtocolRequest) -> serde_json::Map<String, serde_json::Value> {
    kinds::fields(json!({
        "request_id": request.id(),
        "protocol": request.kind().as_str(),
        "from": request.sender(),
        "to": request.target(),
        "expires_at": request.expires_at_utc(),
    }))
}

#[async_trait::async_trait]
impl ProtocolStore for ObservedProtocol {
    async fn create(&self, new: NewRequest) -> Result<ProtocolRequest, ProtocolError> {
        let request = self.inner.create(new).await?;
        if has_request_events(request.kind()) {
            self.events.emit(
                request.sender().as_str(),
                kinds::REQUEST_CREATED,
                request_fields(&request),
            );
        }
        Ok(request)
    }

    async fn get(
        &self,
        id: troupe_wire::RequestId,
    ) -> Result<Option<ProtocolRequest>, ProtocolError> {
        self.inner.get(id).await
    }

    async fn list(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        self.inner.list().await
    }

    async fn pending(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        self.inner.pending().await
    }

    async fn latest_plan_of(
        &self,
        sender: &AgentName,
    ) -> Result<Option<ProtocolRequest>, ProtocolError> {
        self.inner.latest_plan_of(sender).await
    }

    async fn validate_request(
        &self,
        message: &ProtocolMessage,
    ) -> Result<ProtocolRequest, ProtocolError> {
        self.inner.validate_request(message).await
    }

    async fn validate_response(
        &self,
        message: &ProtocolMessage,
    ) -> Result<Consumed, ProtocolError> {
        self.inner.validate_response(message).await
    }

    async fn consume_response(&self, message: &ProtocolMessage) -> Result<Consumed, ProtocolError> {
        let consumed = self.inner.consume_response(message).await?;
        report_consumed(self.events.as_ref(), message, &consumed);
        Ok(consumed)
    }

    async fn answer(
        &self,
        response: &ProtocolMessage,
        deliver: Deliver<'_>,
    ) -> Result<Delivery, ProtocolError> {
        let delivery = self.inner.answer(response, deliver).await?;
        if !has_request_events(response.kind().request_kind()) {
            return Ok(delivery);
        }
        self.events.emit(
            response.sender().as_str(),
            kinds::REQUEST_ANSWERED,
            compact(json!({
                "request_id": response.request_id(),
                "protocol": response.kind().request_kind().as_str(),
                "approved": response.approved(),
                "to": response.recipient(),
                "preview": preview(response.content().as_str()),
            })),
        );
        Ok(delivery)
    }

    async fn deliver_recorded_answers(
        &self,
        deliver: Deliver<'_>,
    ) -> Result<Vec<ProtocolMessage>, ProtocolError> {
        self.inner.deliver_recorded_answers(deliver).await
    }

    async fn recorded_answer(
        &self,
        id: troupe_wire::RequestId,
    ) -> Result<Option<ProtocolMessage>, ProtocolError> {
        self.inner.recorded_answer(id).await
    }
}

/// `request_consumed`, unless the consume was a replay.
fn report_consumed(events: &dyn EventSink, message: &ProtocolMessage, consumed: &Consumed) {
    if consumed.replayed || !has_request_events(consumed.request.kind()) {
        return;
    }
    let mut fields = request_fields(&consumed.request);
    fields.insert("message_id".into(), json!(message.id()));
    fields.insert("approved".into(), json!(message.approved()));
    fields.insert(
        "status".into(),
        json!(consumed.request.stored_status().to_string()),
    );
    events.emit(
        message.recipient().as_str(),
        kinds::REQUEST_CONSUMED,
        fields,
    );
}

/// A [`ResponseAck`] that reports the consume and the ack (for one that does both in one
/// transaction, past the observed stores).
pub struct ObservedResponseAck {
    inner: Arc<dyn ResponseAck>,
    events: Arc<dyn EventSink>,
}

impl ObservedResponseAck {
    pub fn new(inner: Arc<dyn ResponseAck>, events: Arc<dyn EventSink>) -> Self {
        Self { inner, events }
    }
}

#[async_trait::async_trait]
impl ResponseAck for ObservedResponseAck {
    async fn consume_and_ack(
        &self,
        agent: &AgentName,
        message: &MailboxMessage,
        response: &ProtocolMessage,
    ) -> Result<(Consumed, AckOutcome), ResponseAckError> {
        let (consumed, acked) = self.inner.consume_and_ack(agent, message, response).await?;
        report_consumed(self.events.as_ref(), response, &consumed);
        if acked == AckOutcome::Acked {
            self.events.emit(
                agent.as_str(),
                kinds::MESSAGE_ACKED,
                kinds::fields(json!({"message_id": message.id()})),
            );
        }
        Ok((consumed, acked))
    }
}
