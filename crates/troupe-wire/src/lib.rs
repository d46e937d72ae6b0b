//! troupe's on-disk and wire types.
//!
//! Everything troupe writes to disk or hands between agents is defined here, and nothing here
//! does I/O. Parsing is strict: exact key sets, canonical UUIDs, `Z` times with milliseconds,
//! non-blank content. A value of one of these types has passed every check of SPEC §2, §3.1
//! and §5, so code that holds one does not need to check again.
//!
//! # Layout
//!
//! - [`name`]: agent names (lowercase slugs) — [`AgentName`].
//! - [`id`]: canonical UUIDs for messages and requests — [`MessageId`], [`RequestId`].
//! - [`time`]: UTC instants with millisecond precision — [`UtcTime`].
//! - [`text`]: non-blank text — [`Content`].
//! - [`message`]: mailbox messages, ordinary and protocol — [`MailboxMessage`].
//! - [`request`]: protocol requests and their resolution — [`ProtocolRequest`].
//! - [`snapshot`]: the versioned `state.json` snapshot — [`ProtocolSnapshot`].
//! - [`team`]: the `team.json` roster — [`TeamRoster`].
//! - [`strict`]: the exact-key-set JSON object reader the parsers share.

pub mod event;
pub mod id;
pub mod message;
pub mod name;
pub mod request;
pub mod snapshot;
pub mod strict;
pub mod team;
pub mod text;
pub mod time;

pub use event::Event;
pub use id::{MessageId, RequestId, SHORT_REQUEST_ID_LEN};
pub use message::{
    MailboxMessage, OrdinaryKind, OrdinaryMessage, ProtocolMessage, ProtocolMessageKind,
};
pub use name::AgentName;
pub use request::{ProtocolRequest, RequestKind, RequestState, RequestStatus, Resolution};
pub use snapshot::ProtocolSnapshot;
pub use team::{Isolation, TeamRoster, TeammateRecord, TeammateStatus};
pub use text::Content;
pub use time::UtcTime;

/// Why a value was refused. The message names the field and the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WireError(pub String);

impl WireError {
    /// The stable error code of every wire-level refusal.
    pub const CODE: &'static str = "invalid_format";

    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}
