//! `troupe send AGENT TEXT` and the web view's send box: a person writes a message into an
//! agent's mailbox, from outside the run (SPEC §10).
//!
//! The sender is `user`, a name no agent can take. The message is an ordinary `message`, written
//! durably into the recipient's `ready/` like any other; the running team's mailbox watch sees it
//! arrive and wakes the recipient. The lead receives it as an event of kind `user_message`; a
//! teammate as a message from `user`. The recipient must be the lead or a teammate in `team.json`
//! that has not failed or shut down: a message for anyone else would wait forever.
//!
//! A team shared through PostgreSQL ([`send_to_team`], which bootstrap's
//! `send_to_distributed_team` gives the team's roster and mailboxes) is written to the same way, in
//! its database: the recipient is checked against the team's roster there, the message is
//! inserted with its wakeup (`NOTIFY`), and whichever process holds the recipient sees it.

use std::path::Path;
use std::sync::Arc;

use troupe_wire::{
    AgentName, Content, MailboxMessage, MessageId, OrdinaryKind, OrdinaryMessage, TeammateRecord,
    TeammateStatus,
};

use crate::clock::{Clock, SystemClock};
use crate::error::ErrorCode;
use crate::ids::{IdGenerator, RandomIds};
use crate::inspect::{read_roster, InspectError};
use crate::layout::Layout;
use crate::store::mailbox::{FileMailboxStore, MailboxError, MailboxStore};
use crate::store::roster::LeasedRoster;
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

/// Sends `text` from `user` to `to` in `workspace`, on the system clock and random ids.
pub async fn send_from_user(
    workspace: &Path,
    to: &AgentName,
    text: &str,
) -> Result<MessageId, SendError> {
    send_with(
        &Layout::new(workspace),
        to,
        text,
        Arc::new(SystemClock),
        &RandomIds,
    )
    .await
}

/// [`send_from_user`] with an injected clock and ids.
pub async fn send_with(
    layout: &Layout,
    to: &AgentName,
    text: &str,
    clock: Arc<dyn Clock>,
    ids: &dyn IdGenerator,
) -> Result<MessageId, SendError> {
    check_recipient(layout, to)?;
    let message = user_message(to, text, clock.now(), ids)?;
    let id = message.id;
    FileMailboxStore::new(layout, clock)
        .send(&MailboxMessage::Ordinary(message))
        .await?;
    Ok(id)
}

/// Sends `text` from `user` to `to` in a distributed team, whose roster and mailboxes these are,
/// on `clock` and random ids.
pub async fn send_to_team(
    roster: &dyn LeasedRoster,
    mailbox: &dyn MailboxStore,
    clock: &dyn Clock,
    to: &AgentName,
    text: &str,
) -> Result<MessageId, SendError> {
    check_in(&roster.all().await?, to)?;
    let message = user_message(to, text, clock.now(), &RandomIds)?;
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

/// The lead, or a teammate of `team.json` that is running or idle.
fn check_recipient(layout: &Layout, to: &AgentName) -> Result<(), SendError> {
    if to.is_reserved() || to.is_lead() {
        // Refused, or always there: no roster to read.
        return check_in(&[], to);
    }
    check_in(&read_roster(&layout.team_file())?.teammates, to)
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
