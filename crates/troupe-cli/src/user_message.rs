//! A person's message to an agent (sender `user`): the one path of `troupe send` and the
//! terminal view (`troupe watch`). In a module of its own so that neither imports the other for
//! it.

use std::path::Path;

use troupe::bootstrap::StoreChoice;
use troupe::error::ErrorCode;
use troupe::send::SendError;
use troupe::wire::{AgentName, MessageId};

use crate::error::CliError;

/// Sends `text` from `user` to `to` in the team `store` names; a malformed text is a usage
/// error.
pub async fn send_as_user(
    workspace: &Path,
    store: &StoreChoice,
    to: &AgentName,
    text: &str,
) -> Result<MessageId, CliError> {
    troupe::bootstrap::send_as_user(workspace, store, to, text)
        .await
        .map_err(|e| match e {
            SendError::Invalid(_) => CliError::usage(e.to_string()).with_code(e.code()),
            e => CliError::coded(&e),
        })
}
