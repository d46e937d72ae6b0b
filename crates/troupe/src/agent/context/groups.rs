//! The history cut into the units compaction never splits.
//!
//! Chat Completions servers refuse a tool result whose call is not in the assistant message
//! right before it, and a call left without its result. So every cut compaction makes — what is
//! summarised, what is kept, what is compacted — falls between groups: a tool exchange (an
//! assistant message with tool calls and the results answering them) is one group, and every
//! other message is a group of its own.

use std::collections::HashSet;
use std::ops::Range;

use crate::model::ChatMessage;

/// A run of consecutive messages that compaction treats as one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Where the group is in the history.
    pub range: Range<usize>,
    /// An assistant message with at least one tool call, and the results answering it.
    pub tool_exchange: bool,
}

/// The groups of `messages`, consecutive and covering every message after a leading system
/// message (which is never part of a group: it is rebuilt, not compacted).
///
/// A tool exchange takes the tool results right after its assistant message that answer one of
/// its calls; a result answering no call of the message before it (a damaged history) is a
/// group of its own, so a cut can still fall on each side of it.
pub fn groups(messages: &[ChatMessage]) -> Vec<Group> {
    let start = usize::from(matches!(messages.first(), Some(ChatMessage::System { .. })));
    let mut found = Vec::new();
    let mut index = start;
    while index < messages.len() {
        let begin = index;
        index += 1;
        let calls: HashSet<&str> = match &messages[begin] {
            ChatMessage::Assistant(answer) => {
                answer.tool_calls.iter().map(|c| c.id.as_str()).collect()
            }
            _ => HashSet::new(),
        };
        let tool_exchange = !calls.is_empty();
        if tool_exchange {
            while let Some(ChatMessage::Tool { tool_call_id, .. }) = messages.get(index) {
                if !calls.contains(tool_call_id.as_str()) {
                    break;
                }
                index += 1;
            }
        }
        found.push(Group {
            range: begin..index,
            tool_exchange,
        });
    }
    found
}
