//! `session/load`: the lead's conversation sent again as the updates it was — the person's
//! and the team's messages as `user_message_chunk`, the lead's text as `agent_message_chunk`,
//! its tool calls as `tool_call` and their results as `tool_call_update` — before the load's
//! response, so the editor shows the thread as it was. Read through the team's view (either
//! backend); a compacted conversation replays from its summary on.

use serde_json::{json, Value};
use troupe::bootstrap::TeamView;
use troupe::model::ChatMessage;
use troupe::wire::AgentName;

use super::updates::{call_ended, call_started, Updates};
use crate::commands::session::core::Core;
use crate::error::CliError;

/// Sends the conversation of `core`'s workspace's lead as updates.
pub async fn replay(core: &Core, updates: &Updates) -> Result<(), CliError> {
    let view = TeamView::open(core.workspace(), core.store())
        .await
        .map_err(|e| CliError::coded(&e))?;
    let loaded = view
        .conversation(&AgentName::lead())
        .await
        .map_err(|e| CliError::coded(&e))?;
    for update in updates_of(&loaded.messages) {
        updates.send(update);
    }
    Ok(())
}

/// The updates one conversation replays as.
fn updates_of(messages: &[ChatMessage]) -> Vec<Value> {
    let mut updates = Vec::new();
    for message in messages {
        match message {
            ChatMessage::System { .. } => {}
            ChatMessage::User { content } => updates.push(json!({
                "sessionUpdate": "user_message_chunk",
                "content": {"type": "text", "text": content},
            })),
            ChatMessage::Assistant(assistant) => {
                if let Some(text) = assistant.content.as_deref().filter(|t| !t.is_empty()) {
                    updates.push(json!({
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": text},
                    }));
                }
                for call in &assistant.tool_calls {
                    updates.push(call_started("lead", call));
                }
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => updates.push(call_ended(
                &format!("lead:{tool_call_id}"),
                content,
                content.starts_with("Error ["),
            )),
        }
    }
    updates
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use troupe::model::{AssistantMessage, ToolCall};

    use super::*;

    #[test]
    fn a_conversation_replays_as_the_updates_it_was() {
        let messages = vec![
            ChatMessage::system("you are the lead"),
            ChatMessage::user("write a.txt"),
            ChatMessage::Assistant(AssistantMessage {
                content: Some("on it".into()),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "write_file".into(),
                    arguments: r#"{"path":"a.txt","content":"x"}"#.into(),
                }],
                ..AssistantMessage::default()
            }),
            ChatMessage::tool_result("c1", "wrote 1 byte"),
        ];
        let kinds: Vec<String> = updates_of(&messages)
            .iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            kinds,
            [
                "user_message_chunk",
                "agent_message_chunk",
                "tool_call",
                "tool_call_update"
            ]
        );
        let updates = updates_of(&messages);
        assert_eq!(updates[2]["toolCallId"], "lead:c1");
        assert_eq!(updates[3]["toolCallId"], "lead:c1");
        assert_eq!(updates[3]["status"], "completed");
    }
}
