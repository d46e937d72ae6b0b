//! The one place permission requests are opened, answered and read (SPEC §13), whoever does it:
//! the waiting call itself (the terminal's answer, an interrupt, "no terminal"), `troupe approve`
//! and `troupe deny`, the page, the lead's `review_permission`.
//!
//! An answer goes through [`ProtocolRuntime::respond`], hence through the protocol store's
//! single-answer step: of two answers, from any processes, exactly one is recorded; the other is
//! refused naming the first (`protocol_state_error`). The recorded answer is then delivered into
//! the asking agent's mailbox like any response, so a process that dies while its call waits
//! finds it there at its next start, and nothing is lost.

use std::sync::Arc;

use troupe_wire::{AgentName, ProtocolMessage, ProtocolRequest, RequestId, RequestKind};

use super::ask::{Choice, PermissionAsk, PermissionReply};
use crate::store::protocol::{ProtocolError, ProtocolStore};
use crate::team::{ProtocolRuntime, TeamError};

/// What an answered request says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    pub approved: bool,
    pub reply: PermissionReply,
    /// The response message, as recorded.
    pub message: ProtocolMessage,
}

/// Opens, answers and reads permission requests on one protocol runtime.
#[derive(Clone)]
pub struct ApprovalDesk {
    protocol: Arc<ProtocolRuntime>,
}

impl ApprovalDesk {
    pub fn new(protocol: Arc<ProtocolRuntime>) -> Self {
        Self { protocol }
    }

    pub fn store(&self) -> &Arc<dyn ProtocolStore> {
        self.protocol.store()
    }

    /// Registers `agent`'s ask for `target` (`user`, or the lead when asks are routed to it). A
    /// request for the lead is also sent to its mailbox, where the lead sees it as an event; a
    /// person's request is only registered (people read the store: `troupe requests`, the page).
    pub async fn open(
        &self,
        agent: &AgentName,
        target: &AgentName,
        ask: &PermissionAsk,
        ttl: std::time::Duration,
    ) -> Result<ProtocolRequest, TeamError> {
        let content = ask.to_content();
        if target.is_lead() {
            return self
                .protocol
                .open_with_ttl(RequestKind::Permission, agent, target, &content, ttl)
                .await;
        }
        let request = self
            .protocol
            .store()
            .create(crate::store::protocol::NewRequest {
                kind: RequestKind::Permission,
                sender: agent.clone(),
                target: target.clone(),
                content: troupe_wire::Content::parse(content)?,
                ttl,
            })
            .await?;
        Ok(request)
    }

    /// The permission request `id`, refusing another kind.
    pub async fn request(&self, id: RequestId) -> Result<ProtocolRequest, TeamError> {
        let request = self
            .protocol
            .store()
            .get(id)
            .await?
            .ok_or(ProtocolError::NotFound(id))?;
        if request.kind() != RequestKind::Permission {
            return Err(ProtocolError::Mismatch {
                id,
                why: format!(
                    "it is a {} request, not a permission request",
                    request.kind().as_str()
                ),
            }
            .into());
        }
        Ok(request)
    }

    /// Sends `reply` as the one answer to `request`, from its target. Refused (nothing
    /// written) when an answer was sent already, or the window closed.
    pub async fn answer(
        &self,
        request: &ProtocolRequest,
        reply: &PermissionReply,
    ) -> Result<ProtocolMessage, TeamError> {
        if request.kind() != RequestKind::Permission {
            return Err(ProtocolError::Mismatch {
                id: request.id(),
                why: format!(
                    "it is a {} request, not a permission request",
                    request.kind().as_str()
                ),
            }
            .into());
        }
        self.protocol
            .respond(request, reply.choice.approves(), &reply.to_content())
            .await
    }

    /// The answer recorded for `request`, if any, read back strictly.
    pub async fn answered(&self, request: &ProtocolRequest) -> Result<Option<Answered>, TeamError> {
        let Some(message) = self.protocol.store().recorded_answer(request.id()).await? else {
            return Ok(None);
        };
        Ok(Some(read_answer(message)))
    }
}

/// An answer message, read: its content is a [`PermissionReply`]; a response written by hand
/// (any text) still counts by its `approved` flag, with the text as its reason.
pub fn read_answer(message: ProtocolMessage) -> Answered {
    let approved = message.approved().unwrap_or(false);
    let reply = PermissionReply::from_content(message.content().as_str()).unwrap_or_else(|_| {
        PermissionReply::new(
            if approved { Choice::Once } else { Choice::No },
            message.content().as_str(),
            message.sender().as_str(),
        )
    });
    // The flag decides; a reply that says otherwise cannot approve what the flag refused.
    let reply = match (approved, reply.choice.approves()) {
        (true, true) | (false, false) => reply,
        (false, true) => PermissionReply::new(Choice::No, reply.reason, reply.by),
        (true, false) => PermissionReply::new(Choice::Once, reply.reason, reply.by),
    };
    Answered {
        approved,
        reply,
        message,
    }
}
