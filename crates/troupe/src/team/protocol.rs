//! The protocol runtime (SPEC §6): requests are registered in the protocol store *before* their
//! message is sent; responses go back to the original sender.

use std::sync::Arc;
use std::time::Duration;

use troupe_wire::{
    AgentName, Content, MailboxMessage, ProtocolMessage, ProtocolRequest, RequestId, RequestKind,
    RequestStatus,
};

use super::error::TeamError;
use super::postman::Postman;
use crate::store::protocol::{NewRequest, ProtocolError, ProtocolStore};

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

    pub fn postman(&self) -> &Arc<Postman> {
        &self.postman
    }

    /// Registers a request, then sends its message. If sending fails the request stays pending
    /// and the error says so (`protocol_delivery_error`); nothing is retried behind the caller.
    pub fn open(
        &self,
        kind: RequestKind,
        sender: &AgentName,
        target: &AgentName,
        content: &str,
    ) -> Result<ProtocolRequest, TeamError> {
        let request = self.store.create(NewRequest {
            kind,
            sender: sender.clone(),
            target: target.clone(),
            content: Content::parse(content)?,
            ttl: self.ttl,
        })?;
        let envelope = self.postman.envelope(sender, target, content)?;
        let message =
            ProtocolMessage::request(envelope, kind.request_message_kind(), request.id())?;
        self.postman
            .send(&MailboxMessage::Protocol(message))
            .map_err(|e| TeamError::Delivery {
                request_id: request.id(),
                cause: e.to_string(),
            })?;
        Ok(request)
    }

    /// Sends the response to `request` from its target back to its sender.
    pub fn respond(
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
        self.postman
            .send(&MailboxMessage::Protocol(message.clone()))
            .map_err(|e| TeamError::Delivery {
                request_id: request.id(),
                cause: e.to_string(),
            })?;
        Ok(message)
    }

    /// `review_plan` / `troupe review`: answers a pending plan request addressed to `reviewer`.
    pub fn review_plan(
        &self,
        reviewer: &AgentName,
        request_id: RequestId,
        approve: bool,
        feedback: Option<&str>,
    ) -> Result<ProtocolMessage, TeamError> {
        let request = self
            .store
            .get(request_id)?
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
        match request.status_at(self.postman.clock().now()) {
            RequestStatus::Pending => {}
            RequestStatus::Expired => {
                return Err(ProtocolError::Expired {
                    id: request_id,
                    expires_at: request.expires_at_utc(),
                }
                .into())
            }
            status => {
                return Err(ProtocolError::State {
                    id: request_id,
                    status: status.to_string(),
                    why: "only a pending plan can be reviewed".into(),
                }
                .into())
            }
        }
        let content = match feedback.map(str::trim).filter(|f| !f.is_empty()) {
            Some(f) => f.to_owned(),
            None if approve => "Approved".to_owned(),
            None => "Rejected".to_owned(),
        };
        self.respond(&request, approve, &content)
    }
}
