//! The Anthropic Messages wire format, tested directly (no transport): the exact request bodies
//! it builds, the responses and event streams it reads, and how it classifies error responses.

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::model::anthropic::error::{stream_error_kind, STREAM_ERROR_PREFIX};
use troupe::model::anthropic::{AnthropicWire, DEFAULT_BASE_URL};
use troupe::model::config::{ApiKey, ModelConfig, Provider};
use troupe::model::types::Reasoning;
use troupe::model::wire_format::{ErrorKind, WireFormat};
use troupe::model::{
    AssistantMessage, ChatMessage, FinishReason, ModelRequest, ModelResponse, ToolCall, ToolSpec,
    Usage,
};

const KEY: &str = "sk-ant-test-0123456789";

fn wire() -> AnthropicWire {
    AnthropicWire::new(DEFAULT_BASE_URL, ApiKey::new(KEY))
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: format!("the {name} tool"),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }
}

fn body(wire: &AnthropicWire, request: &ModelRequest) -> Value {
    wire.request("claude-test", request, false).body
}

const CACHE: &str = "cache_control";

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

// ---------------------------------------------------------------- requests

#[test]
fn the_request_goes_to_v1_messages_with_the_key_version_and_content_type() {
    for base in [
        "https://api.anthropic.com",
        "https://api.anthropic.com/",
        "https://api.anthropic.com/v1",
        "https://api.anthropic.com/v1/",
    ] {
        let wire = AnthropicWire::new(base, ApiKey::new(KEY));
        let request = wire.request("claude-test", &ModelRequest::default(), false);
        assert_eq!(
            request.url, "https://api.anthropic.com/v1/messages",
            "{base}"
        );
        assert_eq!(
            request.headers,
            vec![
                ("x-api-key", KEY.to_owned()),
                ("anthropic-version", "2023-06-01".to_owned()),
                ("content-type", "application/json".to_owned()),
            ]
        );
        // The key never shows in Debug output.
        assert!(!format!("{request:?} {wire:?}").contains(KEY));
    }
    assert_eq!(wire().name(), "anthropic");
}

#[test]
fn a_plain_conversation_has_system_blocks_and_alternating_turns() {
    let request = ModelRequest::turn(
        vec![
            ChatMessage::system("You are the lead."),
            ChatMessage::system("Be brief."),
            ChatMessage::user("hello"),
        ],
        Vec::new(),
    );
    assert_eq!(
        body(&wire(), &request),
        json!({
            "model": "claude-test",
            "max_tokens": 8192,
            "system": [
                {"type": "text", "text": "You are the lead."},
                {"type": "text", "text": "Be brief.", CACHE: ephemeral()},
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hello", CACHE: ephemeral()}]},
            ],
        })
    );
    // `stream` only when asked for.
    let streamed = wire().request("claude-test", &request, true).body;
    assert_eq!(streamed["stream"], json!(true));
    assert_eq!(body(&wire(), &request).get("stream"), None);
}

#[test]
fn tool_calls_and_results_become_tool_use_and_tool_result_blocks_in_merged_turns() {
    let request = ModelRequest::turn(
        vec![
            ChatMessage::system("sys"),
            ChatMessage::user("read two files"),
            ChatMessage::Assistant(AssistantMessage {
                content: Some("Reading.".to_owned()),
                tool_calls: vec![
                    ToolCall::new("toolu_1", "read_file", r#"{"path":"a.txt"}"#),
                    ToolCall::new("toolu_2", "read_file", r#"{"path":"b.txt"}"#),
                ],
                ..AssistantMessage::default()
            }),
            ChatMessage::tool_result("toolu_1", "alpha"),
            ChatMessage::tool_result("toolu_2", "beta"),
            // A mailbox notice right after the results: the same user turn, after them.
            ChatMessage::user("note from writer"),
        ],
        vec![tool("read_file"), tool("write_file")],
    );
    assert_eq!(
        body(&wire(), &request),
        json!({
            "model": "claude-test",
            "max_tokens": 8192,
            "system": [{"type": "text", "text": "sys", CACHE: ephemeral()}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "read two files", CACHE: ephemeral()},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.txt"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "b.txt"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "alpha"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "beta"},
                    {"type": "text", "text": "note from writer", CACHE: ephemeral()},
                ]},
            ],
            "tools": [
                {"name": "read_file", "description": "the read_file tool",
                 "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
                {"name": "write_file", "description": "the write_file tool",
                 "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
                 CACHE: ephemeral()},
            ],
        })
    );
}

#[test]
fn tool_results_come_before_text_in_a_merged_user_turn_and_roles_alternate() {
    let request = ModelRequest::turn(
        vec![
            ChatMessage::user("first"),
            ChatMessage::user("second"),
            ChatMessage::Assistant(AssistantMessage::tool_calls(vec![ToolCall::new(
                "t1", "shell", "{}",
            )])),
            ChatMessage::user("a notice that arrived first"),
            ChatMessage::tool_result("t1", "ok"),
        ],
        Vec::new(),
    );
    let messages = body(&wire(), &request)["messages"].clone();
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(messages[0]["content"][0]["text"], "first");
    assert_eq!(messages[0]["content"][1]["text"], "second");
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    assert_eq!(
        messages[2]["content"][1]["text"],
        "a notice that arrived first"
    );
}

#[test]
fn invalid_or_non_object_arguments_are_sent_wrapped_and_empty_ones_as_an_empty_object() {
    for (arguments, input) in [
        (r#"{"path": "x"}"#, json!({"path": "x"})),
        ("", json!({})),
        ("   ", json!({})),
        (
            r#"{"path": "x"#,
            json!({"_invalid_arguments": r#"{"path": "x"#}),
        ),
        ("[1, 2]", json!({"_invalid_arguments": "[1, 2]"})),
        ("null", json!({"_invalid_arguments": "null"})),
        ("not json", json!({"_invalid_arguments": "not json"})),
    ] {
        let request = ModelRequest::turn(
            vec![
                ChatMessage::user("go"),
                ChatMessage::Assistant(AssistantMessage::tool_calls(vec![ToolCall::new(
                    "t", "shell", arguments,
                )])),
            ],
            Vec::new(),
        );
        let body = body(&wire(), &request);
        assert_eq!(
            body["messages"][1]["content"][0]["input"], input,
            "{arguments:?}"
        );
    }
}

#[test]
fn empty_messages_become_a_placeholder_text_never_an_empty_block() {
    let request = ModelRequest::turn(
        vec![
            ChatMessage::system("   "),
            ChatMessage::user(""),
            ChatMessage::Assistant(AssistantMessage::default()),
            ChatMessage::user("next"),
        ],
        Vec::new(),
    );
    let body = body(&wire(), &request);
    assert_eq!(
        body.get("system"),
        None,
        "a blank system message is left out"
    );
    assert_eq!(body["messages"][0]["content"][0]["text"], "(empty)");
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "text", "text": "(empty)"}])
    );
}

/// The four breakpoints: last tool, last system block, last block of the second-to-last user
/// turn, last block of the last user turn — and nowhere else.
#[test]
fn cache_breakpoints_sit_on_the_stable_prefix_and_are_at_most_four() {
    let request = ModelRequest::turn(
        vec![
            ChatMessage::system("a"),
            ChatMessage::system("b"),
            ChatMessage::user("u1"),
            ChatMessage::Assistant(AssistantMessage::text("a1")),
            ChatMessage::user("u2"),
            ChatMessage::Assistant(AssistantMessage::tool_calls(vec![ToolCall::new(
                "t1", "shell", "{}",
            )])),
            ChatMessage::tool_result("t1", "r1"),
            ChatMessage::user("u3 notice"),
            ChatMessage::Assistant(AssistantMessage::text("a3")),
            ChatMessage::user("u4"),
        ],
        vec![tool("one"), tool("two"), tool("three")],
    );
    let body = body(&wire(), &request);
    let mut marked = Vec::new();
    let mut visit = |place: String, block: &Value| {
        if block.get(CACHE).is_some() {
            assert_eq!(block[CACHE], ephemeral());
            marked.push(place);
        }
    };
    for (i, tool) in body["tools"].as_array().unwrap().iter().enumerate() {
        visit(format!("tools[{i}]"), tool);
    }
    for (i, block) in body["system"].as_array().unwrap().iter().enumerate() {
        visit(format!("system[{i}]"), block);
    }
    for (m, message) in body["messages"].as_array().unwrap().iter().enumerate() {
        for (b, block) in message["content"].as_array().unwrap().iter().enumerate() {
            visit(format!("messages[{m}][{b}]"), block);
        }
    }
    // Turns: 0 user u1, 1 assistant, 2 user u2, 3 assistant, 4 user [r1, u3], 5 assistant,
    // 6 user u4. The second-to-last user turn is #4; its last block is the notice.
    assert_eq!(
        marked,
        ["tools[2]", "system[1]", "messages[4][1]", "messages[6][0]"]
    );
    assert_eq!(body["messages"][4]["content"][1]["text"], "u3 notice");
}

#[test]
fn without_tools_or_system_only_the_user_turns_are_marked() {
    let request = ModelRequest::turn(
        vec![
            ChatMessage::user("u1"),
            ChatMessage::Assistant(AssistantMessage::tool_calls(vec![ToolCall::new(
                "t1", "shell", "{}",
            )])),
            ChatMessage::tool_result("t1", "r1"),
        ],
        Vec::new(),
    );
    let body = body(&wire(), &request);
    assert_eq!(body["messages"][0]["content"][0][CACHE], ephemeral());
    // A tool_result block takes the mark too.
    assert_eq!(body["messages"][2]["content"][0][CACHE], ephemeral());
    assert_eq!(body["messages"][1]["content"][0].get(CACHE), None);
    assert_eq!(body.to_string().matches(CACHE).count(), 2);
}

#[test]
fn thinking_is_requested_and_its_blocks_are_sent_back_first_and_unchanged() {
    let wire = wire().with_max_tokens(16_000).with_thinking(4_000);
    let request = ModelRequest::turn(
        vec![
            ChatMessage::user("plan"),
            ChatMessage::Assistant(AssistantMessage {
                content: Some("Let me look.".to_owned()),
                tool_calls: vec![ToolCall::new("toolu_1", "list_dir", r#"{"path":"."}"#)],
                reasoning: vec![
                    Reasoning::Text {
                        text: "I should list the files.".to_owned(),
                        signature: Some("sig-AAA==".to_owned()),
                    },
                    Reasoning::Redacted {
                        data: "EncRypted==".to_owned(),
                    },
                    // From another provider: Anthropic would refuse it unsigned.
                    Reasoning::Text {
                        text: "deepseek reasoning".to_owned(),
                        signature: None,
                    },
                ],
            }),
            ChatMessage::tool_result("toolu_1", "a.txt"),
        ],
        Vec::new(),
    );
    let body = body(&wire, &request);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 4000})
    );
    assert_eq!(body["max_tokens"], json!(16000));
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should list the files.", "signature": "sig-AAA=="},
            {"type": "redacted_thinking", "data": "EncRypted=="},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "list_dir", "input": {"path": "."}},
        ]})
    );
}

#[test]
fn max_tokens_stays_above_the_thinking_budget_and_the_budget_above_anthropics_minimum() {
    let wire = wire().with_max_tokens(2_000).with_thinking(10_000);
    let body = body(&wire, &ModelRequest::default());
    assert_eq!(body["max_tokens"], json!(10_000 + 8192));
    assert_eq!(body["thinking"]["budget_tokens"], json!(10_000));
    let small = body_of(&self::wire().with_thinking(10));
    assert_eq!(small["thinking"]["budget_tokens"], json!(1024));
    assert_eq!(small["max_tokens"], json!(8192));
    assert_eq!(body_of(&self::wire()).get("thinking"), None);
}

fn body_of(wire: &AnthropicWire) -> Value {
    body(wire, &ModelRequest::default())
}

#[test]
fn the_format_is_built_from_a_model_config() {
    let config = ModelConfig {
        provider: Provider::Anthropic,
        base_url: "http://127.0.0.1:9/".to_owned(),
        max_tokens: Some(1000),
        thinking_budget: Some(2048),
        ..ModelConfig::new(KEY, "claude-test")
    };
    let wire = AnthropicWire::from_config(&config);
    let request = wire.request("claude-test", &ModelRequest::default(), false);
    assert_eq!(request.url, "http://127.0.0.1:9/v1/messages");
    assert_eq!(request.headers[0], ("x-api-key", KEY.to_owned()));
    assert_eq!(request.body["max_tokens"], json!(2048 + 8192));
    assert_eq!(request.body["thinking"]["budget_tokens"], json!(2048));
}

// ---------------------------------------------------------------- responses

fn message(content: Value, stop_reason: &str) -> String {
    json!({
        "id": "msg_01", "type": "message", "role": "assistant",
        "model": "claude-test-20260101", "content": content,
        "stop_reason": stop_reason, "stop_sequence": null,
        "usage": {"input_tokens": 20, "output_tokens": 7}
    })
    .to_string()
}

#[test]
fn a_text_answer_is_read_with_its_model_and_usage() {
    let response = wire()
        .parse_response(
            "claude-test",
            &message(
                json!([{"type": "text", "text": "Hello "}, {"type": "text", "text": "there."}]),
                "end_turn",
            ),
        )
        .unwrap();
    assert_eq!(
        response,
        ModelResponse {
            message: AssistantMessage::text("Hello there."),
            finish_reason: FinishReason::Stop,
            usage: Some(Usage {
                prompt_tokens: 20,
                completion_tokens: 7,
                total_tokens: 27,
                ..Usage::default()
            }),
            model: "claude-test-20260101".to_owned(),
        }
    );
}

#[test]
fn tool_use_thinking_and_redacted_thinking_blocks_are_read() {
    let response = wire()
        .parse_response(
            "claude-test",
            &message(
                json!([
                    {"type": "thinking", "thinking": "Need the list.", "signature": "sig=="},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Listing."},
                    {"type": "tool_use", "id": "toolu_9", "name": "list_dir", "input": {"path": "src"}},
                    {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {}},
                ]),
                "tool_use",
            ),
        )
        .unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.message,
        AssistantMessage {
            content: Some("Listing.".to_owned()),
            tool_calls: vec![ToolCall::new("toolu_9", "list_dir", r#"{"path":"src"}"#)],
            reasoning: vec![
                Reasoning::Text {
                    text: "Need the list.".to_owned(),
                    signature: Some("sig==".to_owned()),
                },
                Reasoning::Redacted {
                    data: "opaque".to_owned()
                },
            ],
        }
    );
}

#[test]
fn stop_reasons_map_to_finish_reasons_and_max_tokens_is_length() {
    for (stop, expected) in [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("tool_use", FinishReason::ToolCalls),
        ("max_tokens", FinishReason::Length),
        ("pause_turn", FinishReason::Other("pause_turn".to_owned())),
        ("refusal", FinishReason::Other("refusal".to_owned())),
    ] {
        let response = wire()
            .parse_response("m", &message(json!([{"type": "text", "text": "x"}]), stop))
            .unwrap();
        assert_eq!(response.finish_reason, expected, "{stop}");
    }
}

#[test]
fn usage_counts_every_input_token_and_keeps_the_cache_counts() {
    let body = json!({
        "type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "cache_creation_input_tokens": 300,
                  "cache_read_input_tokens": 5000, "output_tokens": 40}
    })
    .to_string();
    let response = wire().parse_response("claude-asked", &body).unwrap();
    assert_eq!(
        response.usage,
        Some(Usage {
            prompt_tokens: 5310,
            completion_tokens: 40,
            total_tokens: 5350,
            cache_read_tokens: 5000,
            cache_write_tokens: 300,
            estimated: false,
        })
    );
    assert_eq!(response.model, "claude-asked", "no model in the body");
}

#[test]
fn unusable_bodies_are_errors_that_say_why() {
    for (body, says) in [
        ("not json", "not JSON"),
        ("{}", "no `content`"),
        (r#"{"content": [{"text": "x"}]}"#, "no `type`"),
        (
            r#"{"content": [{"type": "tool_use", "name": "x", "input": {}}]}"#,
            "no `id`",
        ),
        (
            r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
            "overloaded_error: Overloaded",
        ),
    ] {
        let error = wire().parse_response("m", body).unwrap_err();
        assert!(error.contains(says), "{body}: {error}");
    }
}

// ---------------------------------------------------------------- streams

/// Feeds `events` (name, data) to a fresh assembler; the index of the event that said the
/// stream is complete, if any.
fn feed(
    events: &[(&str, Value)],
) -> (
    Box<dyn troupe::model::wire_format::StreamAssembler>,
    Option<usize>,
) {
    let mut assembler = wire().stream_assembler("claude-test");
    let mut done = None;
    for (i, (name, data)) in events.iter().enumerate() {
        if assembler.push(Some(name), &data.to_string()).unwrap() {
            done = Some(i);
        }
    }
    (assembler, done)
}

fn recorded_stream() -> Vec<(&'static str, Value)> {
    vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test-20260101",
            "content": [], "stop_reason": null,
            "usage": {"input_tokens": 12, "cache_read_input_tokens": 900,
                      "cache_creation_input_tokens": 100, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Let me "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "think."}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "signature_delta", "signature": "EqQBCgIYAh"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "signature_delta", "signature": "Ik=="}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "text_delta", "text": "I'll write "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "text_delta", "text": "it."}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}}),
        ),
        // The JSON text split in awkward places: mid-key, mid-escape, mid-number.
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "{\"pa"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "th\": \"a\\"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "\"b.txt\", \"n\": 1"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": "2}"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 2}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 3,
            "content_block": {"type": "tool_use", "id": "toolu_2", "name": "list_dir", "input": {}}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 3}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"output_tokens": 87}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

#[test]
fn a_recorded_stream_is_assembled_with_thinking_text_and_split_tool_input() {
    let events = recorded_stream();
    let (assembler, done) = feed(&events);
    assert_eq!(
        done,
        Some(events.len() - 1),
        "complete only at message_stop"
    );
    let response = assembler.finish().unwrap();
    assert_eq!(
        response,
        ModelResponse {
            message: AssistantMessage {
                content: Some("I'll write it.".to_owned()),
                tool_calls: vec![
                    ToolCall::new("toolu_1", "write_file", r#"{"path": "a\"b.txt", "n": 12}"#),
                    ToolCall::new("toolu_2", "list_dir", "{}"),
                ],
                reasoning: vec![Reasoning::Text {
                    text: "Let me think.".to_owned(),
                    signature: Some("EqQBCgIYAhIk==".to_owned()),
                }],
            },
            finish_reason: FinishReason::ToolCalls,
            usage: Some(Usage {
                prompt_tokens: 1012,
                completion_tokens: 87,
                total_tokens: 1099,
                cache_read_tokens: 900,
                cache_write_tokens: 100,
                estimated: false,
            }),
            model: "claude-test-20260101".to_owned(),
        }
    );
}

#[test]
fn the_event_type_is_read_from_the_data_when_the_event_field_is_missing() {
    let mut assembler = wire().stream_assembler("claude-test");
    for (_, data) in recorded_stream() {
        assembler.push(None, &data.to_string()).unwrap();
    }
    assert_eq!(assembler.finish().unwrap().message.tool_calls.len(), 2);
}

#[test]
fn a_stream_cut_by_max_tokens_is_length_with_its_partial_arguments_kept_raw() {
    let events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 5}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{\"content\": \"very lo"}}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"},
            "usage": {"output_tokens": 100}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let response = feed(&events).0.finish().unwrap();
    assert_eq!(response.finish_reason, FinishReason::Length);
    assert_eq!(
        response.message.tool_calls[0].arguments,
        "{\"content\": \"very lo"
    );
}

#[test]
fn a_stream_without_message_stop_is_an_error_at_finish() {
    let mut events = recorded_stream();
    events.pop();
    let (assembler, done) = feed(&events);
    assert_eq!(done, None);
    let error = assembler.finish().unwrap_err();
    assert!(error.contains("before `message_stop`"), "{error}");
}

#[test]
fn an_error_event_is_an_error_an_overload_recognisable_as_such() {
    let mut assembler = wire().stream_assembler("claude-test");
    assembler
        .push(Some("message_start"), &recorded_stream()[0].1.to_string())
        .unwrap();
    let error = assembler
        .push(
            Some("error"),
            r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
        )
        .unwrap_err();
    assert_eq!(
        error,
        format!("{STREAM_ERROR_PREFIX}overloaded_error: Overloaded")
    );
    assert_eq!(stream_error_kind(&error), Some(ErrorKind::Overloaded));
    for (error_type, message, kind) in [
        ("rate_limit_error", "slow down", ErrorKind::RateLimited),
        ("api_error", "internal", ErrorKind::Server),
        (
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
            ErrorKind::ContextTooLong,
        ),
        ("invalid_request_error", "messages: bad", ErrorKind::Refused),
        ("authentication_error", "invalid x-api-key", ErrorKind::Auth),
    ] {
        let text = format!("{STREAM_ERROR_PREFIX}{error_type}: {message}");
        assert_eq!(stream_error_kind(&text), Some(kind), "{text}");
    }
    assert_eq!(
        stream_error_kind("the stream ended before `message_stop`"),
        None
    );
}

#[test]
fn malformed_streams_are_errors_not_panics() {
    let start = |index: u64, kind: &str| {
        json!({"type": "content_block_start", "index": index,
               "content_block": {"type": kind, "id": "t", "name": "n", "text": ""}})
    };
    let delta = |index: u64, delta: Value| json!({"type": "content_block_delta", "index": index, "delta": delta});
    let cases: Vec<(Vec<(&str, Value)>, &str)> = vec![
        (
            vec![(
                "content_block_delta",
                delta(0, json!({"type": "text_delta", "text": "x"})),
            )],
            "never started",
        ),
        (
            vec![
                ("content_block_start", start(0, "text")),
                ("content_block_start", start(0, "text")),
            ],
            "started twice",
        ),
        (
            vec![
                ("content_block_start", start(0, "text")),
                (
                    "content_block_delta",
                    delta(0, json!({"type": "input_json_delta", "partial_json": "{"})),
                ),
            ],
            "does not fit",
        ),
        (
            vec![
                ("content_block_start", start(0, "text")),
                (
                    "content_block_delta",
                    delta(0, json!({"type": "text_delta"})),
                ),
            ],
            "no `text`",
        ),
        (
            vec![(
                "content_block_start",
                json!({"type": "content_block_start",
               "content_block": {"type": "text"}}),
            )],
            "no `index`",
        ),
        (
            vec![(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "name": "x"}}),
            )],
            "no `id`",
        ),
        (
            vec![(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 4}),
            )],
            "never started",
        ),
        (
            vec![("message_stop", json!({})), ("ping", json!({}))],
            "after `message_stop`",
        ),
    ];
    for (events, says) in cases {
        let mut assembler = wire().stream_assembler("m");
        let mut error = None;
        for (name, data) in &events {
            if let Err(e) = assembler.push(Some(name), &data.to_string()) {
                error = Some(e);
                break;
            }
        }
        let error = error.unwrap_or_else(|| panic!("no error for {events:?}"));
        assert!(error.contains(says), "{says}: {error}");
    }
    let mut assembler = wire().stream_assembler("m");
    let error = assembler
        .push(Some("message_start"), "{not json")
        .unwrap_err();
    assert!(error.contains("not JSON"), "{error}");
}

#[test]
fn blocks_of_unknown_types_and_unknown_events_are_skipped() {
    let events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "server_tool_use", "id": "s", "name": "web_search"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "text", "text": "done"}}),
        ),
        ("something_new", json!({"type": "something_new"})),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let response = feed(&events).0.finish().unwrap();
    assert_eq!(response.message, AssistantMessage::text("done"));
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(response.model, "claude-test");
    assert_eq!(response.usage, None);
}

// ---------------------------------------------------------------- errors

fn error_body(error_type: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": error_type, "message": message}}).to_string()
}

#[test]
fn error_responses_are_classified_with_the_servers_message() {
    let table = [
        (401, error_body("authentication_error", "invalid x-api-key"), ErrorKind::Auth),
        (403, error_body("permission_error", "no access"), ErrorKind::Auth),
        (404, error_body("not_found_error", "model: claude-nope"), ErrorKind::NotFound),
        (429, error_body("rate_limit_error", "Number of request tokens has exceeded"), ErrorKind::RateLimited),
        (529, error_body("overloaded_error", "Overloaded"), ErrorKind::Overloaded),
        (500, error_body("overloaded_error", "Overloaded"), ErrorKind::Overloaded),
        (529, "<html>busy</html>".to_owned(), ErrorKind::Overloaded),
        (500, error_body("api_error", "Internal server error"), ErrorKind::Server),
        (503, "Service Unavailable".to_owned(), ErrorKind::Server),
        (400, error_body("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"), ErrorKind::ContextTooLong),
        (400, error_body("invalid_request_error",
            "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, decrease input length or `max_tokens` and try again"),
            ErrorKind::ContextTooLong),
        (400, error_body("invalid_request_error", "messages.1.content.0: unexpected `tool_use_id`"), ErrorKind::Refused),
        (413, error_body("request_too_large", "Request exceeds the maximum allowed number of bytes."), ErrorKind::Refused),
        (422, "{}".to_owned(), ErrorKind::Refused),
    ];
    for (status, body, kind) in table {
        let (got, message) = wire().classify_error(status, &body);
        assert_eq!(got, kind, "{status} {body}");
        if let Ok(value) = serde_json::from_str::<Value>(&body) {
            assert_eq!(
                message.as_deref(),
                value["error"]["message"].as_str(),
                "{body}"
            );
        }
    }
    assert_eq!(
        wire()
            .classify_error(503, "Service\n   Unavailable")
            .1
            .as_deref(),
        Some("Service Unavailable")
    );
    assert_eq!(wire().classify_error(500, "").1, None);
}

#[test]
fn tool_ids_from_other_providers_are_made_acceptable_the_same_way_on_both_sides() {
    let request = ModelRequest::turn(
        vec![
            ChatMessage::user("go"),
            ChatMessage::Assistant(AssistantMessage::tool_calls(vec![ToolCall::new(
                "functions.shell:0",
                "shell",
                "{}",
            )])),
            ChatMessage::tool_result("functions.shell:0", "ok"),
        ],
        Vec::new(),
    );
    let body = body(&wire(), &request);
    assert_eq!(body["messages"][1]["content"][0]["id"], "functions_shell_0");
    assert_eq!(
        body["messages"][2]["content"][0]["tool_use_id"],
        "functions_shell_0"
    );
    // Acceptable ids are sent as they are.
    assert_eq!(
        troupe::model::anthropic::request::tool_use_id("toolu_01A-b"),
        "toolu_01A-b"
    );
}

#[test]
fn a_stream_past_the_size_limit_is_refused() {
    use troupe::model::anthropic::stream::MAX_STREAM_BYTES;
    let mut assembler = wire().stream_assembler("m");
    assembler
        .push(
            Some("content_block_start"),
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        )
        .unwrap();
    let piece = "x".repeat(1024 * 1024);
    let data = json!({"type": "content_block_delta", "index": 0,
                      "delta": {"type": "text_delta", "text": piece}})
    .to_string();
    let mut error = None;
    for _ in 0..(MAX_STREAM_BYTES / data.len() + 2) {
        if let Err(e) = assembler.push(Some("content_block_delta"), &data) {
            error = Some(e);
            break;
        }
    }
    let error = error.expect("the limit was never reached");
    assert!(error.contains("passed 64 MiB"), "{error}");
}

mod over_http {
    //! The Anthropic format driven by the shared transport against a server on 127.0.0.1:
    //! an overload reported inside a stream is retried like a 529, and stays
    //! `model_overloaded` when it does not pass.

    use std::time::Duration;

    use serde_json::{json, Value};
    use troupe::error::ErrorCode;
    use troupe::model::config::{ModelConfig, Provider};
    use troupe::model::{ChatMessage, HttpModelClient, ModelClient, ModelRequest, RetryPolicy};

    use super::super::sse_server::{Reply, SseServer};

    fn event(value: Value) -> String {
        format!(
            "event: {}\ndata: {value}\n\n",
            value["type"].as_str().unwrap()
        )
    }

    fn start() -> String {
        event(
            json!({"type": "message_start", "message": {"id": "m", "type": "message",
            "role": "assistant", "model": "claude-test", "content": [],
            "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        )
    }

    fn overloaded() -> Reply {
        Reply::events(&[
            start(),
            event(
                json!({"type": "error", "error": {"type": "overloaded_error",
                                                      "message": "Overloaded"}}),
            ),
        ])
    }

    fn answer(text: &str) -> Reply {
        Reply::events(&[
            start(),
            event(json!({"type": "content_block_start", "index": 0,
                         "content_block": {"type": "text", "text": ""}})),
            event(json!({"type": "content_block_delta", "index": 0,
                         "delta": {"type": "text_delta", "text": text}})),
            event(json!({"type": "content_block_stop", "index": 0})),
            event(
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                         "usage": {"output_tokens": 3}}),
            ),
            event(json!({"type": "message_stop"})),
        ])
    }

    fn client(server: &SseServer) -> HttpModelClient {
        let config = ModelConfig {
            provider: Provider::Anthropic,
            base_url: server.base_url.trim_end_matches("/v1").to_owned(),
            timeout: Duration::from_secs(10),
            retry: RetryPolicy::fixed(2, Duration::from_millis(1)),
            ..ModelConfig::new("sk-ant-test-0123456789", "claude-test")
        };
        HttpModelClient::new(&config).unwrap()
    }

    fn hello() -> ModelRequest {
        ModelRequest {
            messages: vec![ChatMessage::system("s"), ChatMessage::user("hi")],
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn an_overload_inside_the_stream_is_retried() {
        let server = SseServer::start().await;
        server.push(overloaded());
        server.push(answer("fine now"));
        let response = client(&server).complete(&hello()).await.unwrap();
        assert_eq!(response.message.content.as_deref(), Some("fine now"));
        assert_eq!(server.requests().len(), 2);
        assert_eq!(server.requests()[0].target, "/v1/messages");
    }

    #[tokio::test]
    async fn an_overload_that_does_not_pass_is_model_overloaded() {
        let server = SseServer::start().await;
        server.always(overloaded());
        let error = client(&server).complete(&hello()).await.unwrap_err();
        assert_eq!(error.code(), "model_overloaded", "{error}");
        assert_eq!(server.requests().len(), 2);
        // A 529 status is the same failure.
        let server = SseServer::start().await;
        server.always(Reply::json(
            529,
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ));
        let error = client(&server).complete(&hello()).await.unwrap_err();
        assert_eq!(error.code(), "model_overloaded", "{error}");
    }
}
