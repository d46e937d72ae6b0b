//! `POST /api/send`: a person's message to an agent, the same as `troupe send AGENT TEXT`.
//!
//! Waiting for the library function `troupe::bootstrap::send_from_user(workspace, &AgentName,
//! text) -> Result<MessageId, BootstrapError>` (being written for `troupe send`): until it is
//! wired here, sending answers 501 `not_implemented`, so there is never a second path.

use std::path::Path;

use hyper::StatusCode;
use troupe::wire::{AgentName, MessageId};

/// Why a message was not sent: the HTTP status, the stable code and the cause.
pub struct SendError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

pub fn send_from_user(
    _workspace: &Path,
    _agent: &AgentName,
    _text: &str,
) -> Result<MessageId, SendError> {
    Err(SendError {
        status: StatusCode::NOT_IMPLEMENTED,
        code: "not_implemented",
        message: "sending from the web view is not wired yet (it will call the same function as `troupe send`)".to_owned(),
    })
}
