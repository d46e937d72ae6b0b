//! A person's message to an agent (sender `user`): the one path of `troupe send` and the
//! terminal view (`troupe watch`). In a module of its own so that neither imports the other for
//! it.

use std::path::Path;

use troupe::bootstrap::send_to_distributed_team;
use troupe::bootstrap::StoreChoice;
use troupe::error::ErrorCode;
use troupe::send::{send_from_user, SendError};
use troupe::wire::{AgentName, MessageId};

use crate::error::CliError;

/// Sends `text` from `user` to `to` in the team `store` names; a malformed text is a usage
/// error.
pub fn send_as_user(
    workspace: &Path,
    store: &StoreChoice,
    to: &AgentName,
    text: &str,
) -> Result<MessageId, CliError> {
    let sent = match store {
        StoreChoice::Files => send_from_user(workspace, to, text),
        StoreChoice::Postgres(options) => {
            send_to_distributed_team(&options.url, &options.team, to, text)
        }
    };
    sent.map_err(|e| match e {
        SendError::Invalid(_) => CliError::usage(e.to_string()).with_code(e.code()),
        e => CliError::coded(&e),
    })
}
