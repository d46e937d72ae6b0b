//! What the team reports while it works: the demo prints it as a timeline, `troupe run` shows it
//! on stderr, tests record it.

use std::sync::Mutex;

use troupe_wire::{AgentName, MailboxMessage, ProtocolRequest, TeammateStatus};

#[derive(Debug, Clone, PartialEq)]
pub enum TeamUpdate {
    Spawned {
        name: AgentName,
        role: String,
    },
    Status {
        name: AgentName,
        status: TeammateStatus,
        detail: Option<String>,
    },
    /// A message was written durably into its recipient's mailbox.
    Sent(MailboxMessage),
    /// A protocol request changed state (a response was consumed).
    Resolved(ProtocolRequest),
    /// A message was moved to quarantine.
    Quarantined {
        agent: AgentName,
        message: String,
        reason: String,
    },
    /// A request expired without an answer and its sender was told.
    Expired(ProtocolRequest),
    /// `merge_teammate` merged a teammate's branch into the lead's checkout.
    Merged {
        name: AgentName,
        branch: String,
        /// The lead's `HEAD` after the merge.
        commit: String,
        fast_forward: bool,
    },
    /// `merge_teammate` found conflicts and aborted the merge; nothing changed.
    MergeConflict {
        name: AgentName,
        branch: String,
        files: Vec<String>,
    },
}

pub trait TeamObserver: Send + Sync {
    fn update(&self, update: &TeamUpdate);
}

/// Reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTeamObserver;

impl TeamObserver for NoTeamObserver {
    fn update(&self, _update: &TeamUpdate) {}
}

/// Keeps every update, for tests.
#[derive(Debug, Default)]
pub struct RecordingObserver {
    updates: Mutex<Vec<TeamUpdate>>,
}

impl RecordingObserver {
    pub fn updates(&self) -> Vec<TeamUpdate> {
        crate::sync::lock(&self.updates).clone()
    }
}

impl TeamObserver for RecordingObserver {
    fn update(&self, update: &TeamUpdate) {
        crate::sync::lock(&self.updates).push(update.clone());
    }
}
