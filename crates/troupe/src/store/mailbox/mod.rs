//! The mailbox store (SPEC §3): one folder per agent, one JSON file per message, moved between
//! `ready → processing → done`, `processing → ready` (release) and `ready|processing → quarantine`.
//!
//! Delivery is at least once; consumers are idempotent by message id. Nothing is ever lost: every
//! message that was sent ends in exactly one of the four folders.
//!
//! # Layout
//!
//! - [`FileMailboxStore`] (`file.rs`): the port on real folders — send, claim, ack, release,
//!   quarantine, recover, listings.
//! - `index.rs`: the per-agent in-memory index of ready messages that makes claim cheap.
//! - `entry.rs`: reading one mailbox file safely (no symlinks followed, bounded size, strict parse).
//! - `quarantine.rs`: moving a file into `quarantine/` without overwriting, and the
//!   `quarantine.jsonl` journal of reasons.
//! - `store/moves.rs` (shared with `durable`): the no-replace rename every transition uses.

mod entry;
mod file;
mod index;
mod quarantine;

pub use file::FileMailboxStore;

use std::fmt;

use troupe_wire::{AgentName, MailboxMessage, MessageId, UtcTime};

use super::IoError;
use crate::error::ErrorCode;

/// The largest mailbox file troupe reads. Larger files are quarantined without being read whole,
/// and `send` refuses a message whose bytes would exceed it.
pub const MAX_MESSAGE_BYTES: u64 = 1024 * 1024;

/// The four folders of a mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MailboxState {
    Ready,
    Processing,
    Done,
    Quarantine,
}

impl MailboxState {
    pub const ALL: [MailboxState; 4] =
        [Self::Ready, Self::Processing, Self::Done, Self::Quarantine];

    /// The folder name, which is also the name the CLI accepts.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Processing => "processing",
            Self::Done => "done",
            Self::Quarantine => "quarantine",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == raw)
    }
}

impl fmt::Display for MailboxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `ack` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckOutcome {
    /// The message moved processing → done.
    Acked,
    /// It was already in `done/` with identical content (a retried ack).
    AlreadyDone,
}

/// Why a file was quarantined, as recorded beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantineRecord {
    /// The file's name inside `quarantine/` (may differ from its original name on collision).
    pub file_name: String,
    /// The folder it was moved from.
    pub from: MailboxState,
    pub reason: String,
    pub at: UtcTime,
}

/// One entry of a listing: a valid message, or (in `quarantine/` only) a file that is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailboxEntry {
    Message(MailboxMessage),
    /// A quarantined file that does not parse, with the recorded reason when there is one.
    Invalid {
        file_name: String,
        reason: Option<String>,
    },
}

/// Message counts per folder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MailboxCounts {
    pub ready: usize,
    pub processing: usize,
    pub done: usize,
    pub quarantine: usize,
}

impl MailboxCounts {
    pub fn get(&self, state: MailboxState) -> usize {
        match state {
            MailboxState::Ready => self.ready,
            MailboxState::Processing => self.processing,
            MailboxState::Done => self.done,
            MailboxState::Quarantine => self.quarantine,
        }
    }
}

/// What `recover` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Messages moved processing → ready.
    pub released: Vec<MessageId>,
    /// Invalid files found in `processing/` and moved to quarantine.
    pub quarantined: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum MailboxError {
    /// `send` of an id that already exists in any folder of the recipient's mailbox.
    #[error("message {id} already exists in {agent}'s mailbox ({state})")]
    Duplicate {
        agent: AgentName,
        id: MessageId,
        state: MailboxState,
    },
    /// `ack`/`release`/`quarantine` of a message that is not in `processing/` (nor, for ack, done).
    #[error("message {id} is not in {agent}'s processing folder")]
    NotProcessing { agent: AgentName, id: MessageId },
    /// `ack` of a message whose `done/` copy has different content.
    #[error("message {id} is already done in {agent}'s mailbox with different content")]
    AckConflict { agent: AgentName, id: MessageId },
    /// `send` of a message whose file would be larger than [`MAX_MESSAGE_BYTES`].
    #[error("message {id} is {bytes} bytes, more than the {max} bytes a mailbox file may hold")]
    TooLarge { id: MessageId, bytes: u64, max: u64 },
    /// A mailbox folder is a symlink or not a folder.
    #[error("mailbox of {agent} is unusable: {why}")]
    InvalidMailbox { agent: AgentName, why: String },
    /// An `ack`/`release`/`quarantine` by a holder whose lease another holder took over (its
    /// fencing token is older): refused, so a paused worker cannot complete another's claim.
    #[error("message {id} in {agent}'s mailbox is now claimed by another worker (this claim's lease expired)")]
    LeaseLost { agent: AgentName, id: MessageId },
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Backend(#[from] super::BackendError),
}

impl ErrorCode for MailboxError {
    fn code(&self) -> &'static str {
        match self {
            Self::Duplicate { .. } => "mailbox_duplicate",
            Self::NotProcessing { .. } => "mailbox_not_processing",
            Self::AckConflict { .. } => "mailbox_ack_conflict",
            Self::TooLarge { .. } => "mailbox_message_too_large",
            Self::InvalidMailbox { .. } => "mailbox_invalid",
            Self::LeaseLost { .. } => "mailbox_lease_lost",
            Self::Io(e) => e.code(),
            Self::Backend(e) => e.code(),
        }
    }
}

/// The mailbox port. Implementations are safe to share between threads, and several instances
/// (in one process or many) may work on the same folders at once.
#[async_trait::async_trait]
pub trait MailboxStore: Send + Sync {
    /// Durably writes `message` into its recipient's `ready/`. Refuses a duplicate id.
    async fn send(&self, message: &MailboxMessage) -> Result<(), MailboxError>;

    /// Moves the oldest ready message of `agent` (by `created_at_utc`, then id) to `processing/`
    /// and returns it. Invalid files met on the way are quarantined, never returned, never
    /// blocking. `None` when nothing is ready.
    async fn claim(&self, agent: &AgentName) -> Result<Option<MailboxMessage>, MailboxError>;

    /// Moves a claimed message processing → done. Idempotent (see [`AckOutcome`]).
    async fn ack(
        &self,
        agent: &AgentName,
        message: &MailboxMessage,
    ) -> Result<AckOutcome, MailboxError>;

    /// Moves a claimed message processing → ready.
    async fn release(&self, agent: &AgentName, id: MessageId) -> Result<(), MailboxError>;

    /// Moves a message from processing (or ready) to quarantine, recording `reason`.
    async fn quarantine(
        &self,
        agent: &AgentName,
        id: MessageId,
        reason: &str,
    ) -> Result<QuarantineRecord, MailboxError>;

    /// Moves everything in `processing/` back to `ready/`. Call only when no live process is
    /// working on the mailbox (the run lock guarantees it).
    async fn recover(&self, agent: &AgentName) -> Result<RecoveryReport, MailboxError>;

    /// The messages in one folder, oldest first; quarantine also lists unparseable files.
    async fn list(
        &self,
        agent: &AgentName,
        state: MailboxState,
    ) -> Result<Vec<MailboxEntry>, MailboxError>;

    /// File counts per folder.
    async fn counts(&self, agent: &AgentName) -> Result<MailboxCounts, MailboxError>;

    /// The agents that have a mailbox folder, sorted.
    async fn agents(&self) -> Result<Vec<AgentName>, MailboxError>;
}
