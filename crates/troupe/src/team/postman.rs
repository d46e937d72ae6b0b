//! Delivery: builds messages with the runtime's clock and ids, writes them into the one shared
//! mailbox store, and wakes the recipient.
//!
//! **Architecture Invariant:** the teammate runtime and the protocol runtime send through the same
//! `Postman`, hence the same `MailboxStore`: `TeamRuntime::new` builds both on one postman, whose
//! waker points back at it. A postman built alone (`troupe review`, tests) wakes nobody.

use std::sync::Arc;

use troupe_wire::message::Envelope;
use troupe_wire::{AgentName, Content, MailboxMessage, OrdinaryKind, OrdinaryMessage};

use super::error::TeamError;
use super::observer::{TeamObserver, TeamUpdate};
use crate::clock::Clock;
use crate::ids::IdGenerator;
use crate::store::mailbox::{MailboxError, MailboxStore};

/// Told when a mailbox has something new, so its owner can start working.
pub trait Waker: Send + Sync {
    fn wake(&self, agent: &AgentName);
}

pub struct Postman {
    mailbox: Arc<dyn MailboxStore>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    observer: Arc<dyn TeamObserver>,
    /// Given by the team runtime at construction (its waker holds the runtime weakly: the
    /// runtime owns the postman); `None` for a postman outside a running team.
    waker: Option<Arc<dyn Waker>>,
}

impl Postman {
    pub fn new(
        mailbox: Arc<dyn MailboxStore>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        observer: Arc<dyn TeamObserver>,
    ) -> Self {
        Self {
            mailbox,
            clock,
            ids,
            observer,
            waker: None,
        }
    }

    /// The same postman, waking `waker`'s agents when their mailbox gets something.
    pub fn with_waker(mut self, waker: Arc<dyn Waker>) -> Self {
        self.waker = Some(waker);
        self
    }

    pub fn observer(&self) -> &Arc<dyn TeamObserver> {
        &self.observer
    }

    pub fn mailbox(&self) -> &Arc<dyn MailboxStore> {
        &self.mailbox
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn ids(&self) -> &Arc<dyn IdGenerator> {
        &self.ids
    }

    /// A fresh envelope: new id, now, non-blank content.
    pub fn envelope(
        &self,
        from: &AgentName,
        to: &AgentName,
        content: &str,
    ) -> Result<Envelope, TeamError> {
        Ok(Envelope {
            id: self.ids.message_id(),
            sender: from.clone(),
            recipient: to.clone(),
            content: Content::parse(content)?,
            created_at_utc: self.clock.now(),
        })
    }

    /// Builds, sends and wakes: an ordinary message.
    pub async fn send_ordinary(
        &self,
        from: &AgentName,
        to: &AgentName,
        kind: OrdinaryKind,
        content: &str,
    ) -> Result<MailboxMessage, TeamError> {
        let e = self.envelope(from, to, content)?;
        let message = MailboxMessage::Ordinary(OrdinaryMessage {
            id: e.id,
            sender: e.sender,
            recipient: e.recipient,
            kind,
            content: e.content,
            created_at_utc: e.created_at_utc,
        });
        self.send(&message).await?;
        Ok(message)
    }

    /// Sends a built message durably, then wakes its recipient.
    pub async fn send(&self, message: &MailboxMessage) -> Result<(), MailboxError> {
        self.mailbox.send(message).await?;
        self.announce(message);
        Ok(())
    }

    /// Reports a message that is in its recipient's mailbox now and wakes the recipient. For
    /// messages written with `mailbox().send` directly (answers, written under the protocol
    /// store's locks, where observers and wakers must not run).
    pub fn announce(&self, message: &MailboxMessage) {
        self.observer.update(&TeamUpdate::Sent(message.clone()));
        self.wake(message.recipient());
    }

    pub fn wake(&self, agent: &AgentName) {
        if let Some(waker) = &self.waker {
            waker.wake(agent);
        }
    }
}
