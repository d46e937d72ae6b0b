//! What the scripted team models of the benches (`soak`, `teamrun`, `realwork`) share: the
//! answer to the runtime's own calls and reading the tail of a conversation.

use serde_json::json;
use troupe::model::{ChatMessage, Purpose, ToolCall};

/// The answer to one of the runtime's own calls: a valid summary saying `goal` for compaction,
/// no memory for the memory queries.
pub fn side_answer(purpose: Purpose, goal: &str) -> String {
    match purpose {
        Purpose::Summary => json!({
            "current_goal": goal,
            "key_findings": ["the earlier turns went as scripted"],
            "files_read_or_changed": [],
            "remaining_work": [],
            "user_constraints": [],
        })
        .to_string(),
        _ => "[]".to_owned(),
    }
}

/// The tool calls of the last assistant message (`None`: the model has not spoken yet).
pub fn last_calls(messages: &[ChatMessage]) -> Option<&[ToolCall]> {
    messages.iter().rev().find_map(|m| match m {
        ChatMessage::Assistant(a) => Some(a.tool_calls.as_slice()),
        _ => None,
    })
}

/// The user messages since the model last spoke, oldest first.
pub fn trailing_user(messages: &[ChatMessage]) -> Vec<&str> {
    let mut texts: Vec<&str> = messages
        .iter()
        .rev()
        .map_while(|m| match m {
            ChatMessage::User { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    texts.reverse();
    texts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_of_a_conversation_is_read_oldest_first() {
        let messages = [
            ChatMessage::user("a"),
            ChatMessage::Assistant(troupe::model::AssistantMessage::text("x")),
            ChatMessage::user("b"),
            ChatMessage::user("c"),
        ];
        assert_eq!(trailing_user(&messages), ["b", "c"]);
        assert_eq!(last_calls(&messages).map(<[ToolCall]>::len), Some(0));
        assert_eq!(last_calls(&messages[..1]), None);
        let summary: serde_json::Value =
            serde_json::from_str(&side_answer(Purpose::Summary, "g")).unwrap();
        assert_eq!(summary["current_goal"], "g");
        assert_eq!(side_answer(Purpose::MemorySelect, "g"), "[]");
    }
}
