//! Context management (SPEC §9): the tool-result budget, micro-compaction, the context window,
//! the summary and the compaction plan — each rule with a test that fails when it is broken,
//! and a property test over random histories for the rule nothing may break: a tool call is
//! never separated from its result.

mod budget;
mod micro;
mod plan;
mod property;
mod summary;
mod window;

use troupe::agent::context::Origin;
use troupe::model::{AssistantMessage, ChatMessage, ToolCall};

/// A tool exchange: an assistant message calling `calls` tools (ids `<tag>_<n>`) and their
/// results, each `result_bytes` long.
pub fn exchange(tag: &str, calls: usize, result_bytes: usize) -> Vec<ChatMessage> {
    let ids: Vec<String> = (0..calls).map(|n| format!("{tag}_{n}")).collect();
    let mut messages = vec![ChatMessage::Assistant(AssistantMessage::tool_calls(
        ids.iter()
            .map(|id| ToolCall::new(id, "read_file", r#"{"path":"a.txt"}"#))
            .collect(),
    ))];
    for id in &ids {
        messages.push(ChatMessage::tool_result(id, "r".repeat(result_bytes)));
    }
    messages
}

/// A history under construction with the origins parallel to its messages.
#[derive(Debug, Clone, Default)]
pub struct Built {
    pub messages: Vec<ChatMessage>,
    pub origins: Vec<Origin>,
}

impl Built {
    pub fn new() -> Self {
        Self {
            messages: vec![ChatMessage::system("You are lead.")],
            origins: vec![Origin::Runtime],
        }
    }

    pub fn person(mut self, text: &str) -> Self {
        self.messages.push(ChatMessage::user(text));
        self.origins.push(Origin::Person);
        self
    }

    pub fn input(mut self, text: &str) -> Self {
        self.messages.push(ChatMessage::user(text));
        self.origins.push(Origin::Input);
        self
    }

    pub fn say(mut self, text: &str) -> Self {
        self.messages
            .push(ChatMessage::Assistant(AssistantMessage::text(text)));
        self.origins.push(Origin::Runtime);
        self
    }

    pub fn exchange(mut self, tag: &str, calls: usize, result_bytes: usize) -> Self {
        for message in exchange(tag, calls, result_bytes) {
            self.messages.push(message);
            self.origins.push(Origin::Runtime);
        }
        self
    }
}

/// Panics unless every tool call in `messages` is answered by exactly one result right after its
/// assistant message, and every result answers a call of the assistant message before it.
pub fn assert_well_formed(messages: &[ChatMessage]) {
    let mut index = 0;
    while index < messages.len() {
        match &messages[index] {
            ChatMessage::Assistant(answer) if !answer.tool_calls.is_empty() => {
                let mut expected: Vec<&str> =
                    answer.tool_calls.iter().map(|c| c.id.as_str()).collect();
                let mut answered: Vec<&str> = Vec::new();
                for message in &messages[index + 1..] {
                    match message {
                        ChatMessage::Tool { tool_call_id, .. } => answered.push(tool_call_id),
                        _ => break,
                    }
                }
                expected.sort_unstable();
                answered.sort_unstable();
                assert_eq!(
                    answered, expected,
                    "the calls at {index} are not answered exactly once right after it"
                );
                index += 1 + answered.len();
            }
            ChatMessage::Tool { tool_call_id, .. } => {
                panic!("result {tool_call_id} at {index} answers no call right before it")
            }
            _ => index += 1,
        }
    }
}
