//! `POST /api/send`: a person's message to an agent through the one function `troupe send`
//! calls (`troupe::bootstrap::send_as_user`), its errors as HTTP answers with their stable
//! codes.

use std::path::Path;

use hyper::StatusCode;
use troupe::bootstrap::StoreChoice;
use troupe::error::ErrorCode;
use troupe::send::SendError as LibError;
use troupe::wire::{AgentName, MessageId};

/// Why a message was not sent: the HTTP status, the stable code and the cause.
pub struct SendError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

/// No such agent 404; a failed or shut-down one 409; bad text 400; storage 500.
pub async fn send_from_user(
    workspace: &Path,
    team: &StoreChoice,
    agent: &AgentName,
    text: &str,
) -> Result<MessageId, SendError> {
    troupe::bootstrap::send_as_user(workspace, team, agent, text)
        .await
        .map_err(|e| SendError {
            status: match &e {
                LibError::UnknownAgent { .. } => StatusCode::NOT_FOUND,
                LibError::Unavailable { .. } => StatusCode::CONFLICT,
                LibError::Invalid(_) => StatusCode::BAD_REQUEST,
                LibError::Inspect(_) | LibError::Mailbox(_) | LibError::Backend(_) => {
                    StatusCode::INTERNAL_SERVER_ERROR
                }
            },
            code: e.code(),
            message: e.to_string(),
        })
}
