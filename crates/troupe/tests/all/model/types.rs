//! The conversation types as persisted history: their JSON shape is a contract with files on disk.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::model::{AssistantMessage, ChatMessage, FinishReason, ModelResponse, ToolCall, Usage};

#[test]
fn chat_messages_serialise_tagged_by_role_and_round_trip() {
    let history = vec![
        ChatMessage::system("You are lead."),
        ChatMessage::user("Write a file."),
        ChatMessage::from(AssistantMessage {
            content: None,
            tool_calls: vec![ToolCall::new("call_1", "write_file", "{\"path\":\"a\"}")],
            ..AssistantMessage::default()
        }),
        ChatMessage::tool_result("call_1", "ok"),
        ChatMessage::from(AssistantMessage::text("Done.")),
    ];
    let value = serde_json::to_value(&history).unwrap();
    assert_eq!(
        value,
        json!([
            {"role": "system", "content": "You are lead."},
            {"role": "user", "content": "Write a file."},
            {"role": "assistant", "tool_calls": [
                {"id": "call_1", "name": "write_file", "arguments": "{\"path\":\"a\"}"}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
            {"role": "assistant", "content": "Done."}
        ])
    );
    let back: Vec<ChatMessage> = serde_json::from_value(value).unwrap();
    assert_eq!(back, history);
}

#[test]
fn finish_reasons_are_plain_strings_and_unknown_ones_are_kept() {
    for (reason, text) in [
        (FinishReason::Stop, "stop"),
        (FinishReason::ToolCalls, "tool_calls"),
        (FinishReason::Length, "length"),
        (FinishReason::ContentFilter, "content_filter"),
        (FinishReason::Other("eos".to_owned()), "eos"),
    ] {
        assert_eq!(serde_json::to_value(&reason).unwrap(), json!(text));
        assert_eq!(
            serde_json::from_value::<FinishReason>(json!(text)).unwrap(),
            reason
        );
    }
}

#[test]
fn model_response_round_trips() {
    let response = ModelResponse {
        usage: Some(Usage {
            prompt_tokens: 1,
            completion_tokens: 2,
            total_tokens: 3,
            ..Usage::default()
        }),
        ..ModelResponse::tool_calls(vec![ToolCall::new("c", "glob", "{}")], "m")
    };
    let text = serde_json::to_string(&response).unwrap();
    assert_eq!(
        serde_json::from_str::<ModelResponse>(&text).unwrap(),
        response
    );
}

#[test]
fn usage_cache_counts_are_optional_on_disk() {
    // An older transcript, without the cache counts, still reads.
    let old: Usage =
        serde_json::from_str(r#"{"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}"#)
            .unwrap();
    assert_eq!((old.cache_read_tokens, old.cache_write_tokens), (0, 0));
    // Zero counts are not written; others are.
    assert_eq!(
        serde_json::to_value(old).unwrap(),
        serde_json::json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})
    );
    let cached = Usage {
        cache_read_tokens: 7,
        cache_write_tokens: 1,
        ..old
    };
    let text = serde_json::to_string(&cached).unwrap();
    assert!(text.contains(r#""cache_read_tokens":7"#), "{text}");
    assert_eq!(serde_json::from_str::<Usage>(&text).unwrap(), cached);
}
