//! Micro-compaction: old tool results left out of what is sent (SPEC §9, issue 10 item 2).
//!
//! An agent rarely needs the full output of a tool it ran ten exchanges ago, and re-running it
//! is cheap. So in every request the results of tool exchanges older than the last
//! [`KEEP_RECENT_EXCHANGES`] become [`COMPACTED_TOOL_RESULT`]; the calls stay (the model sees
//! what it did) and the transcript keeps the originals (only what is sent changes).
//!
//! **Prefix stability.** Providers cache request prefixes, so a request should differ from the
//! previous one only at its end. [`micro_compact`] is a pure function of the history that is
//! monotone under appending: an exchange compacted in one request stays compacted in every
//! later request of the same history with messages appended, and each new tool exchange
//! compacts exactly one more (the one that falls out of the last 3). Between two new exchanges
//! requests share their whole prefix; when one is added, the prefix is kept up to the exchange
//! that was just compacted.

use serde::Serialize;

use super::groups::groups;
use crate::model::{ChatMessage, ToolSpec};

/// The tool exchanges whose results are sent whole.
pub const KEEP_RECENT_EXCHANGES: usize = 3;
/// What replaces an older tool result in what is sent.
pub const COMPACTED_TOOL_RESULT: &str = "[Earlier tool result compacted. Re-run if needed.]";

/// `messages` with the results of every tool exchange older than the last
/// [`KEEP_RECENT_EXCHANGES`] replaced by [`COMPACTED_TOOL_RESULT`]; every other message is
/// returned unchanged.
pub fn micro_compact(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let exchanges: Vec<_> = groups(messages)
        .into_iter()
        .filter(|group| group.tool_exchange)
        .collect();
    let older = exchanges.len().saturating_sub(KEEP_RECENT_EXCHANGES);
    let mut sent = messages.to_vec();
    for group in &exchanges[..older] {
        for message in &mut sent[group.range.clone()] {
            if let ChatMessage::Tool { content, .. } = message {
                if content != COMPACTED_TOOL_RESULT {
                    *content = COMPACTED_TOOL_RESULT.to_owned();
                }
            }
        }
    }
    sent
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
