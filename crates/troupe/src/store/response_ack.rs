//! Finishing a protocol response: consuming it (the request's exactly-once state change) and
//! acking the mailbox message that carried it.
//!
//! [`ResponseAck`] is the port. [`InTurn`] does the two steps one after the other, over any
//! stores: a crash between them leaves the message claimed, the next run redelivers it, and its
//! consume is then a replay that changes nothing — exactly once, by idempotence. On PostgreSQL
//! (`store::postgres::PgResponseAck`) both happen in **one transaction**: the resolution and the
//! ack commit together or not at all, so a holder that lost the message's lease (paused past
//! it, another worker took the message over) cannot resolve the request either.

use std::sync::Arc;

use troupe_wire::{AgentName, MailboxMessage, ProtocolMessage};

use super::mailbox::{AckOutcome, MailboxError, MailboxStore};
use super::protocol::{Consumed, ProtocolError, ProtocolStore};
use crate::error::ErrorCode;

/// Which step refused or failed; nothing after it happened.
#[derive(Debug, thiserror::Error)]
pub enum ResponseAckError {
    /// The response was not consumed (a mismatch, an expired window, storage); the message is
    /// still claimed, not acked.
    #[error(transparent)]
    Consume(ProtocolError),
    /// The message was not acked. With [`InTurn`] the consume before it stands; in one
    /// transaction it was rolled back with the ack.
    #[error(transparent)]
    Ack(MailboxError),
}

impl ErrorCode for ResponseAckError {
    fn code(&self) -> &'static str {
        match self {
            Self::Consume(e) => e.code(),
            Self::Ack(e) => e.code(),
        }
    }
}

/// Consumes `response` and acks `message`, the mailbox message of `agent` that carries it;
/// the consume's result and how the ack went.
#[async_trait::async_trait]
pub trait ResponseAck: Send + Sync {
    async fn consume_and_ack(
        &self,
        agent: &AgentName,
        message: &MailboxMessage,
        response: &ProtocolMessage,
    ) -> Result<(Consumed, AckOutcome), ResponseAckError>;
}

/// The consume, then the ack, over any pair of stores.
pub struct InTurn {
    pub mailbox: Arc<dyn MailboxStore>,
    pub protocol: Arc<dyn ProtocolStore>,
}

#[async_trait::async_trait]
impl ResponseAck for InTurn {
    async fn consume_and_ack(
        &self,
        agent: &AgentName,
        message: &MailboxMessage,
        response: &ProtocolMessage,
    ) -> Result<(Consumed, AckOutcome), ResponseAckError> {
        let consumed = self
            .protocol
            .consume_response(response)
            .await
            .map_err(ResponseAckError::Consume)?;
        let acked = self
            .mailbox
            .ack(agent, message)
            .await
            .map_err(ResponseAckError::Ack)?;
        Ok((consumed, acked))
    }
}
