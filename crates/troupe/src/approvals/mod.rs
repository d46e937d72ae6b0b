//! Approvals as requests (SPEC §13): a tool call the policy sends to `ask` becomes a durable
//! `permission` request — the third kind of protocol request, with the guarantees of the other
//! two (registered before anyone is asked, a response window, exactly one answer across
//! processes, consumed once) — answered by whoever comes first: the run's terminal, `troupe
//! approve` / `troupe deny` in any terminal, the web page, another host of a shared team,
//! or the lead's `review_permission` when `[approvals] route = "lead"`.
//!
//! # Layout
//!
//! - `ask`: what a request and its answer carry ([`PermissionAsk`], [`PermissionReply`]).
//! - `desk`: [`ApprovalDesk`], the one place requests are opened, answered and read.
//! - `requested`: [`RequestedApproval`], the provider whose call waits for the answer.
//! - `review_tool`: the lead's `review_permission` tool.
//!
//! **Architecture Invariant:** an answer never loosens a rule: a request exists only for a call
//! the rules (plan gate first) sent to `ask`; a deny stays a deny whatever anyone answers.

pub mod ask;
pub mod desk;
pub mod requested;
pub mod review_tool;

pub use ask::{Choice, PermissionAsk, PermissionReply};
pub use desk::{read_answer, Answered, ApprovalDesk};
pub use requested::{Binding, OnRegistered, RequestedApproval};
