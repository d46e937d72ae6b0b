//! `troupe send AGENT TEXT` and the web view's send box: a person writes a message into an
//! agent's mailbox, from outside the run (SPEC §10).
//!
//! The sender is `user`, a name no agent can take. The message is an ordinary `message`, written
//! durably into the recipient's `ready/` like any other; the running team's mailbox watch sees it
//! arrive and wakes the recipient. The lead receives it as an event of kind `user_message`; a
//! teammate as a message from `user`. The recipient must be the lead or a teammate in `team.json`
//! that has not failed or shut down: a message for anyone else would wait forever.
//!
//! [`send_to_team`] works on the team's roster and mailboxes, which bootstrap's `send_as_user`
//! gives it from its one bundle of stores: a workspace's files, or a team shared through
//! PostgreSQL — written to the same way, in its database: the recipient is checked against the
//! team's roster there, the message is inserted with its wakeup (`NOTIFY`), and whichever
//! process holds the recipient sees it.

use troupe_wire::{
    AgentName, Content, MailboxMessage, MessageId, OrdinaryKind, OrdinaryMessage, TeammateRecord,
    TeammateStatus,
};

use crate::clock::Clock;
use crate::error::ErrorCode;
use crate::ids::IdGenerator;
use crate::inspect::{file_roster_error, InspectError};
use crate::store::mailbox::{MailboxError, MailboxStore};
use crate::store::roster::{RosterReadError, RosterReader};
use crate::store::BackendError;

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("no agent named {agent} in this workspace (the lead is `lead`; teammates are listed by `troupe status`)")]
    UnknownAgent { agent: String },
    #[error("{agent} is {status} and takes no more messages; spawn it again from the lead to give it new work")]
    Unavailable { agent: String, status: &'static str },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Inspect(#[from] InspectError),
    #[error(transparent)]
    Mailbox(#[from] MailboxError),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

impl ErrorCode for SendError {
    fn code(&self) -> &'static str {
        match self {
            Self::UnknownAgent { .. } => "unknown_agent",
            Self::Unavailable { .. } => "agent_unavailable",
            Self::Invalid(_) => "invalid_arguments",
            Self::Inspect(e) => e.code(),
            Self::Mailbox(e) => e.code(),
            Self::Backend(e) => e.code(),
        }
    }
}

/// Sends `text` from `user` to `to` in the team whose roster and mailboxes these are (a
/// workspace's files or a shared team's database), on `clock` and `ids`.
pub async fn send_to_team(
    roster: &dyn RosterReader,
    mailbox: &dyn MailboxStore,
    clock: &dyn Clock,
    ids: &dyn IdGenerator,
    to: &AgentName,
    text: &str,
) -> Result<MessageId, SendError> {
    check_recipient(roster, to).await?;
    let message = user_message(to, text, clock.now(), ids)?;
    let id = message.id;
    mailbox.send(&MailboxMessage::Ordinary(message)).await?;
    Ok(id)
}

fn user_message(
    to: &AgentName,
    text: &str,
    now: troupe_wire::UtcTime,
    ids: &dyn IdGenerator,
) -> Result<OrdinaryMessage, SendError> {
    let content = Content::parse(text).map_err(|e| SendError::Invalid(e.to_string()))?;
    Ok(OrdinaryMessage {
        id: ids.message_id(),
        sender: AgentName::user(),
        recipient: to.clone(),
        kind: OrdinaryKind::Message,
        content,
        created_at_utc: now,
    })
}

/// The lead, or a teammate of the roster that is running or idle.
async fn check_recipient(roster: &dyn RosterReader, to: &AgentName) -> Result<(), SendError> {
    if to.is_reserved() || to.is_lead() {
        // Refused, or always there: no roster to read.
        return check_in(&[], to);
    }
    let teammates = roster.teammates().await.map_err(|e| match e {
        RosterReadError::File(e) => SendError::Inspect(file_roster_error(e)),
        RosterReadError::Backend(e) => SendError::Backend(e),
    })?;
    check_in(&teammates, to)
}

/// The lead, or one of `teammates` that is running or idle.
fn check_in(teammates: &[TeammateRecord], to: &AgentName) -> Result<(), SendError> {
    if to.is_reserved() {
        return Err(SendError::UnknownAgent {
            agent: to.to_string(),
        });
    }
    if to.is_lead() {
        return Ok(());
    }
    let record =
        teammates
            .iter()
            .find(|t| &t.name == to)
            .ok_or_else(|| SendError::UnknownAgent {
                agent: to.to_string(),
            })?;
    match record.status {
        TeammateStatus::Running | TeammateStatus::Idle => Ok(()),
        status @ (TeammateStatus::Failed | TeammateStatus::Shutdown) => {
            Err(SendError::Unavailable {
                agent: to.to_string(),
                status: status.as_str(),
            })
        }
    }
}
