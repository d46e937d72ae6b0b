//! Errors of the team and protocol runtimes, with their stable codes (SPEC §4.1).

use troupe_wire::{AgentName, RequestId, WireError};

use crate::error::ErrorCode;
use crate::store::mailbox::MailboxError;
use crate::store::protocol::ProtocolError;
use crate::store::IoError;

#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    #[error("a teammate named {0} already exists and is running or idle; a name can be spawned again only once its teammate is shut down or failed")]
    TeammateExists(AgentName),
    #[error("no teammate named {0}")]
    TeammateNotFound(AgentName),
    /// The teammate is in a state that refuses the operation (shut down, failed, …).
    #[error("teammate {name} is {status}: {why}")]
    TeammateState {
        name: AgentName,
        status: &'static str,
        why: String,
    },
    #[error("invalid arguments: {0}")]
    Invalid(String),
    /// The request was registered (it stays pending) but its message could not be sent.
    #[error("request {request_id} is registered and pending, but its message could not be delivered: {cause}")]
    Delivery {
        request_id: RequestId,
        cause: String,
    },
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error(transparent)]
    Mailbox(#[from] MailboxError),
    #[error(transparent)]
    Io(#[from] IoError),
    /// A teammate's git worktree could not be made or used.
    #[error("its git worktree: {0}")]
    Worktree(#[from] crate::worktree::WorktreeError),
    #[error("the team runtime is closed")]
    Closed,
}

impl From<WireError> for TeamError {
    fn from(e: WireError) -> Self {
        Self::Invalid(e.to_string())
    }
}

impl ErrorCode for TeamError {
    fn code(&self) -> &'static str {
        match self {
            Self::TeammateExists(_) => "teammate_exists",
            Self::TeammateNotFound(_) => "teammate_not_found",
            Self::TeammateState { .. } => "teammate_state",
            Self::Invalid(_) => "invalid_arguments",
            Self::Delivery { .. } => "protocol_delivery_error",
            Self::Protocol(e) => e.code(),
            Self::Mailbox(e) => e.code(),
            Self::Io(e) => e.code(),
            Self::Worktree(e) => e.code(),
            Self::Closed => "team_closed",
        }
    }
}

impl TeamError {
    /// Whether a protocol failure says the *message* is invalid (wrong id, kind, parties,
    /// expired, duplicate) — such a message is quarantined — rather than that storage failed.
    pub fn is_invalid_message(error: &ProtocolError) -> bool {
        matches!(
            error,
            ProtocolError::NotFound(_)
                | ProtocolError::Mismatch { .. }
                | ProtocolError::Expired { .. }
                | ProtocolError::State { .. }
                | ProtocolError::Answered { .. }
        )
    }
}
