//! The protocol store (SPEC §5): durable, locked registry of shutdown and plan-approval requests.
//!
//! Requests are registered *before* their message is sent; a response changes a request exactly
//! once, and only when it matches in every respect (id, kind pairing, parties, pending, window).
//!
//! # On disk
//!
//! ```text
//! .troupe/protocol/
//!   state.json       {"version":1,"requests":[…]}: every pending request, each sender's latest
//!                    plan (resolved or not) and resolved requests not archived yet, in creation
//!                    order. Replaced atomically on every write.
//!   archive.jsonl    append-only: one resolved request (the same JSON as in state.json) per
//!                    line. Resolved requests move here in batches so that state.json stays small.
//!                    A complete line never changes once written (only a torn tail is ever cut).
//!   .protocol.lock   the cross-process lock every operation holds (reads included).
//!   answers/<request-id>.json
//!                    the one answer sent to a request: the full response message, created
//!                    no-clobber before that message is delivered. Never changed.
//! ```
//!
//! The two files together hold every request ever created. A request may be in both only after
//! a crash between a compaction's archive append and its state replace: the copies must then be
//! identical (else the store is corrupt), `state.json`'s copy wins, and the next compaction drops
//! it from `state.json` without appending it again. A last archive line without its `\n` is the
//! trace of an interrupted append; it is ignored, and cut off by the next writer (its requests are
//! still in `state.json`). Every other violation — of the SPEC §5 invariants in `state.json`, a
//! bad or pending archive line, an id archived twice — is reported as `Corrupt`, never repaired.
//!
//! **Compaction.** When a write finds more than [`COMPACT_ABOVE`] archivable requests in
//! `state.json` as it is on disk (resolved, not their sender's latest plan, not tied in creation
//! time with an earlier request that stays), it appends them to the archive and fsyncs it, then
//! writes `state.json` without them in the same atomic replace as the write's own change. The
//! request the write itself resolves is archived by a later compaction, so the archive never
//! holds a state that `state.json` does not. `list`, `get` and replays read both files; the
//! creation order is rebuilt by merging on creation time, archive lines first on ties (exact by
//! the tie rule; see the `compaction` module). `create` refuses a clock earlier than the latest
//! creation over both files.
//!
//! **Memory.** The store holds `state.json`'s requests (few: pending ones, latest plans and fewer
//! than a compaction batch of resolved ones) and, for the archive, only an index: per archived
//! request its id, creation time and the offset and length of its line. Because archive lines
//! are immutable once written, an offset stays valid; an archived request is read back from its
//! line when needed (`get`, a replay), checked strictly, and `list` streams the whole file.
//!
//! **Order of the checks** for a response: see the `rules` module (not found → kind/parties
//! mismatch → resolved: replay or duplicate → clock backwards → expired).
//!
//! **Answers are single** (SPEC §6). [`ProtocolStore::answer`] is the one way an answer is sent
//! (the lead's `review_plan`, `troupe review`, a teammate's shutdown response). Under both locks
//! it refuses if an answer is recorded or the request is resolved, else creates
//! `answers/<request-id>.json` (no-clobber) holding the response message and then — still under
//! the locks — delivers that message. The record is what makes the check and the send one step
//! across processes without scanning mailboxes; the `answers` module says why, and how a crash
//! between the record and the delivery is finished: by the next answer attempt (which delivers
//! the recorded message before refusing) or at the next run's start
//! ([`ProtocolStore::deliver_recorded_answers`]). Only a writer that is gone has its answer
//! finished by someone else: here the writer holds `.protocol.lock` until its delivery returned
//! (the kernel releases it if the writer dies), so a finisher, which needs that lock, never
//! races a writer still delivering. The PostgreSQL store keeps the same rule with a
//! per-request delivery lock (`store/postgres/delivery_lock.rs`).
//!
//! # Layout
//!
//! - `json`: [`JsonProtocolStore`], the port's implementation: locking, refresh, writes.
//! - `rules`: the matching rules as pure functions, and the order of the checks.
//! - `state`: reading and validating `state.json`, with a cache of the last good read.
//! - `archive`: the archive file and its in-memory index (ids, creation times, line offsets).
//! - `answers`: the answer records, `answers/<request-id>.json`.
//! - `compaction`: which requests move to the archive, and how the two files merge back.
//! - `files`: the write seam ([`ProtocolFiles`]) that tests use to make writes fail.
//! - `retention`: `troupe gc` of the archive and the answers of requests past their retention.

mod answers;
mod archive;
mod compaction;
mod files;
mod json;
mod lazy;
pub mod retention;
pub(crate) mod rules;
mod state;

pub use compaction::COMPACT_ABOVE;
pub use files::{DurableFiles, ProtocolFiles};
pub use json::JsonProtocolStore;
pub use lazy::LazyJsonProtocolStore;

use std::time::Duration;

use troupe_wire::{
    AgentName, Content, MessageId, ProtocolMessage, ProtocolRequest, RequestId, RequestKind,
    UtcTime, WireError,
};

use super::IoError;
use crate::error::ErrorCode;

/// The default response window, `[created_at_utc, created_at_utc + 5 min)`.
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);

/// What `create` needs; id and times come from the store's injected id generator and clock.
#[derive(Debug, Clone)]
pub struct NewRequest {
    pub kind: RequestKind,
    pub sender: AgentName,
    pub target: AgentName,
    pub content: Content,
    pub ttl: Duration,
}

/// The result of consuming a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumed {
    /// The request after the transition.
    pub request: ProtocolRequest,
    /// True when this exact response message had already been consumed (a retried ack): the
    /// stored result is returned and nothing changed.
    pub replayed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("protocol request {0} not found")]
    NotFound(RequestId),
    /// Kind, sender or recipient of a message do not pair with the request.
    #[error("message does not match request {id}: {why}")]
    Mismatch { id: RequestId, why: String },
    /// The response window `[created, expires)` has closed.
    #[error("protocol request {id} expired at {expires_at}")]
    Expired { id: RequestId, expires_at: UtcTime },
    /// The request is not pending (already resolved by another message), or similar.
    #[error("protocol request {id} is {status}: {why}")]
    State {
        id: RequestId,
        status: String,
        why: String,
    },
    /// An answer to the request was sent already (recorded, or consumed): a request takes one.
    #[error(
        "protocol request {id} was already answered ({}) by {by} in message {message_id}; a request takes one answer",
        if *approved { "approved" } else { "rejected" }
    )]
    Answered {
        id: RequestId,
        approved: bool,
        by: AgentName,
        message_id: MessageId,
    },
    /// An answer was recorded (it is *the* answer now) but its message could not be written
    /// into the recipient's mailbox. It is delivered by the next answer attempt or run start.
    #[error("the answer to protocol request {id} is recorded but could not be delivered ({cause}); the next answer attempt or the next run's start delivers it")]
    Undelivered { id: RequestId, cause: String },
    /// The injected clock is earlier than the latest request's creation.
    #[error("clock moved backwards: now {now} is before the latest request's creation {latest}")]
    ClockBackwards { now: UtcTime, latest: UtcTime },
    /// A new request was refused by the wire invariants (sender = target, blank content, …).
    #[error("invalid request: {0}")]
    Invalid(#[from] WireError),
    /// `state.json` or the archive breaks an invariant; nothing is repaired silently.
    #[error("protocol state at {path} is corrupt: {why}")]
    Corrupt { path: String, why: String },
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Backend(#[from] super::BackendError),
}

impl ErrorCode for ProtocolError {
    fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "protocol_not_found",
            Self::Mismatch { .. } => "protocol_mismatch",
            Self::Expired { .. } => "protocol_expired",
            Self::State { .. } | Self::Answered { .. } => "protocol_state_error",
            Self::Undelivered { .. } => "protocol_delivery_error",
            Self::ClockBackwards { .. } => "protocol_clock_error",
            Self::Invalid(_) => "invalid_arguments",
            Self::Corrupt { .. } => "protocol_state_corrupt",
            Self::Io(e) => e.code(),
            Self::Backend(e) => e.code(),
        }
    }
}

/// How an answer's message reached its recipient's mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Written now.
    Sent,
    /// A message with its id is in the mailbox already (an earlier attempt wrote it).
    AlreadyThere,
}

/// Writes an answer's message into its recipient's mailbox (only that: it runs under the
/// store's locks, so it must not call back into the store). The error is the cause, in words.
///
/// Asynchronous, like the mailbox it writes to. A plain closure
/// `Fn(&ProtocolMessage) -> Result<Delivery, String>` is one too.
#[async_trait::async_trait]
pub trait DeliverAnswer: Send + Sync {
    async fn deliver(&self, answer: &ProtocolMessage) -> Result<Delivery, String>;
}

#[async_trait::async_trait]
impl<F> DeliverAnswer for F
where
    F: Fn(&ProtocolMessage) -> Result<Delivery, String> + Send + Sync,
{
    async fn deliver(&self, answer: &ProtocolMessage) -> Result<Delivery, String> {
        self(answer)
    }
}

/// How the store is handed the delivery of an answer.
pub type Deliver<'a> = &'a (dyn DeliverAnswer + 'a);

/// The protocol store port.
#[async_trait::async_trait]
pub trait ProtocolStore: Send + Sync {
    /// Registers a pending request. Fails with `ClockBackwards` if the clock is earlier than
    /// the latest existing request's creation time.
    async fn create(&self, new: NewRequest) -> Result<ProtocolRequest, ProtocolError>;

    async fn get(&self, id: RequestId) -> Result<Option<ProtocolRequest>, ProtocolError>;

    /// Every request ever registered (pending and resolved), in creation order.
    async fn list(&self) -> Result<Vec<ProtocolRequest>, ProtocolError>;

    /// Requests whose stored status is pending (expired ones included), in creation order.
    async fn pending(&self) -> Result<Vec<ProtocolRequest>, ProtocolError>;

    /// The last plan_approval request `sender` created, by creation order.
    async fn latest_plan_of(
        &self,
        sender: &AgentName,
    ) -> Result<Option<ProtocolRequest>, ProtocolError>;

    /// Checks that a `*_request` message matches a registered pending, unexpired request
    /// (same id, kind, sender, target). Read-only.
    async fn validate_request(
        &self,
        message: &ProtocolMessage,
    ) -> Result<ProtocolRequest, ProtocolError>;

    /// Checks that a `*_response` message would be consumed (or is a replay of the message that
    /// was). Read-only.
    async fn validate_response(&self, message: &ProtocolMessage)
        -> Result<Consumed, ProtocolError>;

    /// Applies a response exactly once (see SPEC §5 for every condition).
    async fn consume_response(&self, message: &ProtocolMessage) -> Result<Consumed, ProtocolError>;

    /// Sends `response` as the one answer to its request (SPEC §6, "Answers are single"), under
    /// the store's locks: refuses (`Answered`) when an answer was recorded or the request is
    /// resolved, and — like `consume_response` — a response that does not pair with the
    /// request, or comes too late; else records it in `answers/` and calls `deliver` before
    /// the locks are released. A refusal writes nothing of its own; it only finishes the
    /// delivery of the recorded answer if its writer is gone (crashed or failed between record
    /// and delivery) — never while the writer is still delivering it. Sending the recorded
    /// message itself again is allowed (`deliver` is called; nothing else changes).
    async fn answer(
        &self,
        response: &ProtocolMessage,
        deliver: Deliver<'_>,
    ) -> Result<Delivery, ProtocolError>;

    /// Calls `deliver` (under the locks) for the recorded answer of every request that is still
    /// pending and whose writer is gone, in creation order, and returns the answers it wrote
    /// now: those a crash between record and delivery had left undelivered. A run calls it at start. Stops at the first
    /// delivery that fails (`Undelivered`).
    async fn deliver_recorded_answers(
        &self,
        deliver: Deliver<'_>,
    ) -> Result<Vec<ProtocolMessage>, ProtocolError>;

    /// The one answer recorded for request `id` (sent by [`Self::answer`]), whether or not it
    /// was consumed yet; `None` while nobody has answered. `NotFound` for an unknown id. A
    /// permission ask waits on this: the answer may come from any process.
    async fn recorded_answer(
        &self,
        id: RequestId,
    ) -> Result<Option<ProtocolMessage>, ProtocolError>;
}

/// Identifies the response message that resolved a request (for idempotent replays).
pub fn resolved_by(request: &ProtocolRequest) -> Option<MessageId> {
    request.resolution().map(|r| r.message_id)
}
