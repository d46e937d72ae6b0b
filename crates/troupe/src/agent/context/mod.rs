//! Keeping an agent's conversation inside the model's context window, forever (SPEC §9).
//!
//! A conversation outlives runs, so without these pieces every workspace ends with a request
//! the server refuses as too long. Everything here is a pure function of the history (plus one
//! small store for artifacts), so the runner decides *when* and these decide *what*:
//!
//! - [`groups`]: the history cut into units that are never split — a tool exchange (an
//!   assistant message with calls and the results answering them) or one other message.
//! - [`budget`]: the tool-result budget. A result over 30,000 bytes, or one that would push a
//!   model response's batch of results past 200,000 bytes, is kept whole as an artifact and
//!   replaced by a head-and-tail preview naming it.
//! - [`micro`]: micro-compaction of what is *sent*, under pressure only: past half the budget,
//!   the oldest large results (not those of the last exchange, nor of the two before it while
//!   they fit in the target) are cleared in one batch down
//!   to a quarter of it, and stay cleared — the history holds how many, the transcript records
//!   it, the originals stay. Plus [`sent_bytes`], the size estimate every budget uses.
//! - [`prefix`]: a request as a provider's prompt cache sees it, and the prefix two requests
//!   share (what `cache_prefix_share` measures).
//! - [`window`]: the model's context window (a built-in table, an override, a default) and the
//!   request size at which summary compaction runs.
//! - [`summary`]: the summary JSON object, its strict parse, the tool-less request asking for
//!   it and the user message it becomes.
//! - [`plan`]: where to cut (always between groups), what is kept verbatim — the latest person
//!   request, earlier person words up to 8 KB — and the compacted history, or the fallback that
//!   drops the oldest part when the summary failed.
//!
//! The functions that look at who wrote a message take `messages: &[ChatMessage]` with a
//! parallel `origins: &[Origin]` of the same length (a missing origin counts as
//! [`Origin::Runtime`]).

pub mod budget;
pub mod groups;
pub mod micro;
pub mod plan;
pub mod prefix;
pub mod summary;
pub mod window;

pub use budget::{
    preview, ResultBudget, PERSIST_THRESHOLD_BYTES, PREVIEW_HEAD_BYTES, PREVIEW_TAIL_BYTES,
    TURN_BUDGET_BYTES,
};
pub use groups::{groups, Group};
pub use micro::{
    next_batch, sent_bytes, sent_messages, MicroPolicy, CLEARED_TOOL_RESULT, KEEP_PERCENT,
    KEEP_RECENT_EXCHANGES, MIN_BATCH_PERCENT, MIN_CLEARABLE_RESULT_BYTES, TARGET_PERCENT,
    TRIGGER_PERCENT,
};
pub use plan::{
    carried_person_words, compacted, drop_oldest, plan, Keep, Plan, PERSON_WORDS_BYTES,
    REACTIVE_KEEP_GROUPS,
};
pub use prefix::{cache_bytes, shared_prefix};
pub use summary::{
    parse_summary, render_summary, summary_request, summary_request_within, Summary, SummaryError,
    SUMMARY_HEADER,
};
pub use window::{
    context_window_tokens, ContextBudget, BYTES_PER_TOKEN, DEFAULT_CONTEXT_WINDOW_TOKENS,
};

pub use super::transcript::Origin;

/// The origin of message `index`, [`Origin::Runtime`] when the parallel slice is too short.
pub(crate) fn origin_at(origins: &[Origin], index: usize) -> Origin {
    origins.get(index).copied().unwrap_or(Origin::Runtime)
}
