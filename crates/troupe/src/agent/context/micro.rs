//! Micro-compaction: old tool results cleared from what is sent, under pressure only (SPEC §9,
//! issue 23 point 1).
//!
//! An agent rarely needs the full output of a tool it ran long ago, but it does need the facts
//! it just learned (the id `create_task` returned four exchanges back), and every change to an
//! early byte of a request makes the provider's prompt cache miss everything after it. So:
//!
//! - **Nothing is cleared while the request is under the trigger**, [`TRIGGER_PERCENT`] of the
//!   budget: a small conversation is sent whole.
//! - **Past it, one batch**: the oldest clearable results are cleared, oldest first, until the
//!   request is under the target, [`TARGET_PERCENT`] of the budget — well below the trigger,
//!   so the next batch is many requests away. A batch that would free less than
//!   [`MIN_BATCH_PERCENT`] of the budget is not made (breaking the cache for a few bytes is not
//!   worth it; past the budget, summary compaction takes over).
//! - A result under [`MIN_CLEARABLE_RESULT_BYTES`] is never cleared (its placeholder would
//!   save nothing), and the results of the last tool exchange stay whole, with those of the
//!   exchanges before it — up to [`KEEP_RECENT_EXCHANGES`] in all — while the kept exchanges
//!   together fit in [`KEEP_PERCENT`] of the budget. A cleared result becomes [`CLEARED_TOOL_RESULT`]; its call
//!   stays.
//!
//! **The sticky state is one number**, the history's `cleared_results`: the first that many
//! clearable results of the history (counted in order, originals only) are sent cleared. Since
//! batches clear oldest first, the cleared results are always such a prefix, so this count says
//! everything. The history keeps the originals; the count is recorded in the transcript (a
//! `micro_compaction` line) so a later run sends the same bytes; a summary compaction, which
//! replaces the history, resets it to 0. Between two batches the count does not change, and
//! [`sent_messages`] of a history with messages appended is the previous request plus those
//! messages: the prompt cache keeps hitting.

use serde::Serialize;

use super::groups::groups;
use super::window::ContextBudget;
use crate::model::{ChatMessage, ToolSpec};

/// The request size, in percent of the budget, past which a batch of results is cleared.
pub const TRIGGER_PERCENT: usize = 50;
/// The request size, in percent of the budget, a batch clears down to (when it can).
pub const TARGET_PERCENT: usize = 25;
/// The least a batch must free, in percent of the budget, to be made at all.
pub const MIN_BATCH_PERCENT: usize = 10;
/// The most the kept recent exchanges may take together, in percent of the budget (the last
/// exchange is kept whatever its size). Equal to the target, so a batch can reach it.
pub const KEEP_PERCENT: usize = 25;
/// A result shorter than this (in bytes) is never cleared.
pub const MIN_CLEARABLE_RESULT_BYTES: usize = 1_024;
/// The most tool exchanges, most recent first, whose results are never cleared: the last one
/// always, the others while the kept ones together fit in [`KEEP_PERCENT`] of the budget.
pub const KEEP_RECENT_EXCHANGES: usize = 3;
/// What replaces a cleared tool result in what is sent.
pub const CLEARED_TOOL_RESULT: &str =
    "[Older tool result cleared to save context. Re-run the tool if you need it again.]";

/// The sizes micro-compaction works with, for one budget (the constants above, in bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MicroPolicy {
    /// A request larger than this triggers a batch.
    pub trigger_bytes: usize,
    /// A batch clears until the request is no larger than this.
    pub target_bytes: usize,
    /// A batch freeing fewer bytes than this is not made.
    pub min_batch_bytes: usize,
    /// The recent exchanges kept whole take at most this many bytes together (the last one
    /// is kept whatever its size).
    pub keep_bytes: usize,
}

impl MicroPolicy {
    pub fn for_budget(budget: &ContextBudget) -> Self {
        let percent = |p: usize| budget.budget_bytes / 100 * p;
        Self {
            trigger_bytes: percent(TRIGGER_PERCENT),
            target_bytes: percent(TARGET_PERCENT),
            min_batch_bytes: percent(MIN_BATCH_PERCENT),
            keep_bytes: percent(KEEP_PERCENT),
        }
    }
}

/// Whether a message is a tool result that may be cleared (counted by `cleared_results`).
fn clearable(message: &ChatMessage) -> bool {
    matches!(message, ChatMessage::Tool { content, .. }
        if content.len() >= MIN_CLEARABLE_RESULT_BYTES)
}

/// What is sent for `messages`: the first `cleared` clearable results replaced by
/// [`CLEARED_TOOL_RESULT`], every other message unchanged.
pub fn sent_messages(messages: &[ChatMessage], cleared: usize) -> Vec<ChatMessage> {
    let mut left = cleared;
    messages
        .iter()
        .map(|message| match message {
            ChatMessage::Tool { tool_call_id, .. } if left > 0 && clearable(message) => {
                left -= 1;
                ChatMessage::tool_result(tool_call_id, CLEARED_TOOL_RESULT)
            }
            other => other.clone(),
        })
        .collect()
}

/// The new count of cleared results when the request for `messages` (with `cleared` results
/// cleared already) passes the trigger and a batch is worth making; `None` otherwise.
///
/// The batch continues the cleared prefix: the next clearable results in order, none in the
/// recent exchanges kept whole (see `protected_from`), until the request fits the target.
pub fn next_batch(
    messages: &[ChatMessage],
    tools: &[ToolSpec],
    cleared: usize,
    policy: &MicroPolicy,
) -> Option<usize> {
    let size = sent_bytes(&sent_messages(messages, cleared), tools);
    if size <= policy.trigger_bytes {
        return None;
    }
    let placeholder = json_len(CLEARED_TOOL_RESULT);
    let mut freed = 0usize;
    let mut count = cleared;
    let candidates = messages[..protected_from(messages, policy.keep_bytes)]
        .iter()
        .filter(|m| clearable(m))
        .skip(cleared);
    for message in candidates {
        if size - freed <= policy.target_bytes {
            break;
        }
        if let ChatMessage::Tool { content, .. } = message {
            freed += json_len(content.as_str()).saturating_sub(placeholder);
            count += 1;
        }
    }
    (freed >= policy.min_batch_bytes && count > cleared).then_some(count)
}

/// Where the results that are never cleared start (the history's length when there are no tool
/// exchanges): the last tool exchange always, and the ones before it, up to
/// [`KEEP_RECENT_EXCHANGES`] in all, while together they fit in `keep_bytes`.
///
/// Why the bound (a quarter of the budget, the target): kept results that alone pass the target
/// leave every batch short of it, so
/// the request is back over the trigger a turn or two later and each new batch breaks the
/// prompt cache again (in a 32K window three 30 KB results are the whole budget). Keeping them
/// within the target lets a batch reach it, so batches — and cache misses — stay rare.
fn protected_from(messages: &[ChatMessage], keep_bytes: usize) -> usize {
    let mut from = messages.len();
    let mut kept_bytes = 0usize;
    let exchanges = groups(messages)
        .into_iter()
        .rev()
        .filter(|g| g.tool_exchange);
    for (kept, group) in exchanges.take(KEEP_RECENT_EXCHANGES).enumerate() {
        kept_bytes += json_len(&messages[group.range.clone()]);
        if kept > 0 && kept_bytes > keep_bytes {
            break;
        }
        from = group.range.start;
    }
    from.min(messages.len())
}

/// The estimated size in bytes of a request made of `messages` and `tools`: the length of
/// their JSON serialisation. The wire shape differs a little (roles, `type: function`
/// wrappers), but every budget and benchmark measures with this one function, so they agree.
pub fn sent_bytes(messages: &[ChatMessage], tools: &[ToolSpec]) -> usize {
    json_len(messages) + json_len(tools)
}

/// The length of `value` serialised as JSON, counted without building the text.
pub(crate) fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = ByteCounter(0);
    // Serialising troupe's own message types cannot fail, and the counter never does.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// An `io::Write` that only counts.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
