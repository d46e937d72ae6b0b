//! The scripted model: queue, exhaustion, recorded requests, `from_fn`, JSON scripts.

use std::io::Write;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::error::ErrorCode;
use troupe::model::{
    AssistantMessage, ChatMessage, FinishReason, ModelClient, ModelError, ModelRequest,
    ModelResponse, ScriptedModel, ToolCall, Usage,
};

fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        messages: vec![ChatMessage::user(text)],
        tools: Vec::new(),
    }
}

#[tokio::test]
async fn queue_is_served_in_order_then_exhausted() {
    let model = ScriptedModel::new()
        .tool_call("write_file", json!({"path": "a.txt", "content": "hi"}))
        .tool_call_raw("shell", "{broken")
        .tool_calls([
            ("read_file", json!({"path": "a.txt"})),
            ("glob", json!({"pattern": "*"})),
        ])
        .text("All done.");
    assert_eq!(model.remaining(), 4);

    let first = model.complete(&ask("1")).await.unwrap();
    let second = model.complete(&ask("2")).await.unwrap();
    let third = model.complete(&ask("3")).await.unwrap();
    let fourth = model.complete(&ask("4")).await.unwrap();
    let exhausted = model.complete(&ask("5")).await.unwrap_err();

    assert_eq!(
        first,
        ModelResponse::tool_calls(
            vec![ToolCall::new(
                "call_1",
                "write_file",
                r#"{"path":"a.txt","content":"hi"}"#
            )],
            "scripted"
        )
    );
    assert_eq!(
        second.message.tool_calls,
        vec![ToolCall::new("call_2", "shell", "{broken")]
    );
    assert_eq!(
        third.message.tool_calls,
        vec![
            ToolCall::new("call_3", "read_file", r#"{"path":"a.txt"}"#),
            ToolCall::new("call_4", "glob", r#"{"pattern":"*"}"#),
        ]
    );
    assert_eq!(fourth, ModelResponse::text("All done.", "scripted"));
    assert_eq!(fourth.finish_reason, FinishReason::Stop);
    assert_eq!(exhausted.code(), "model_script_exhausted");
    assert_eq!(
        exhausted.to_string(),
        "the scripted model has no response left (it served 4)"
    );
    assert_eq!(model.remaining(), 0);
    // Every request is recorded, the failed one too.
    assert_eq!(
        model.requests(),
        ["1", "2", "3", "4", "5"].map(ask).to_vec()
    );
}

#[tokio::test]
async fn scripted_errors_are_returned_in_turn() {
    let model = ScriptedModel::new()
        .error(ModelError::ScriptExhausted { served: 99 })
        .text("recovered");

    assert!(matches!(
        model.complete(&ask("a")).await,
        Err(ModelError::ScriptExhausted { served: 99 })
    ));
    assert_eq!(
        model.complete(&ask("b")).await.unwrap().message,
        AssistantMessage::text("recovered")
    );
}

#[tokio::test]
async fn from_fn_answers_from_the_conversation_so_far() {
    let model = ScriptedModel::from_fn(|request: &ModelRequest| {
        let tool_results = request
            .messages
            .iter()
            .filter(|m| matches!(m, ChatMessage::Tool { .. }))
            .count();
        Ok(if tool_results == 0 {
            ModelResponse::tool_calls(vec![ToolCall::new("c1", "list_tasks", "{}")], "fn")
        } else {
            ModelResponse::text(format!("saw {tool_results} result(s)"), "fn")
        })
    });

    let first = model.complete(&ask("go")).await.unwrap();
    let mut request = ask("go");
    request.messages.push(first.message.clone().into());
    request.messages.push(ChatMessage::tool_result("c1", "[]"));
    let second = model.complete(&request).await.unwrap();

    assert_eq!(first.finish_reason, FinishReason::ToolCalls);
    assert_eq!(second.message, AssistantMessage::text("saw 1 result(s)"));
    assert_eq!(model.requests(), vec![ask("go"), request]);
}

#[tokio::test]
async fn queued_responses_come_before_the_function() {
    let mut calls = 0;
    let model = ScriptedModel::from_fn(move |_: &ModelRequest| {
        calls += 1;
        Ok(ModelResponse::text(format!("fn {calls}"), "fn"))
    })
    .text("queued");

    let answers: Vec<_> = [
        model.complete(&ask("a")).await.unwrap(),
        model.complete(&ask("b")).await.unwrap(),
        model.complete(&ask("c")).await.unwrap(),
    ]
    .into_iter()
    .map(|r| r.message.content.unwrap())
    .collect();

    assert_eq!(answers, vec!["queued", "fn 1", "fn 2"]);
}

#[tokio::test]
async fn json_script_file_is_loaded_with_every_entry_kind() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let script = json!({"responses": [
        {"text": "Hello."},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}]},
        {"text": "Two at once.", "tool_calls": [
            {"id": "call_a", "name": "read_file", "arguments": {"path": "a.txt"}},
            {"name": "shell", "arguments": "{not json"},
            {"name": "list_tasks"}],
         "finish_reason": "tool_calls",
         "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
        {"text": "cut off", "finish_reason": "length"},
        {"error": {"status": 500, "message": "overloaded"}},
        {"error": {"status": 401}}
    ]});
    file.write_all(script.to_string().as_bytes()).unwrap();
    let model = ScriptedModel::from_json_file(file.path()).unwrap();
    assert_eq!(model.remaining(), 6);

    let mut results = Vec::new();
    for n in 0..7 {
        results.push(model.complete(&ask(&n.to_string())).await);
    }
    let mut results = results.into_iter();

    assert_eq!(
        results.next().unwrap().unwrap(),
        ModelResponse::text("Hello.", "scripted")
    );
    assert_eq!(
        results.next().unwrap().unwrap(),
        ModelResponse::tool_calls(
            vec![ToolCall::new(
                "call_1",
                "write_file",
                r#"{"path":"a.txt","content":"hi"}"#
            )],
            "scripted"
        )
    );
    assert_eq!(
        results.next().unwrap().unwrap(),
        ModelResponse {
            message: AssistantMessage {
                content: Some("Two at once.".to_owned()),
                tool_calls: vec![
                    ToolCall::new("call_a", "read_file", r#"{"path":"a.txt"}"#),
                    ToolCall::new("call_2", "shell", "{not json"),
                    ToolCall::new("call_3", "list_tasks", "{}"),
                ],
            },
            finish_reason: FinishReason::ToolCalls,
            usage: Some(Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15
            }),
            model: "scripted".to_owned(),
        }
    );
    assert_eq!(
        results.next().unwrap().unwrap().finish_reason,
        FinishReason::Length
    );
    let server = results.next().unwrap().unwrap_err();
    assert_eq!(server.code(), "model_server_error");
    assert!(server.to_string().ends_with(": overloaded"), "{server}");
    assert_eq!(results.next().unwrap().unwrap_err().code(), "model_auth");
    assert_eq!(
        results.next().unwrap().unwrap_err().code(),
        "model_script_exhausted"
    );
}

#[test]
fn invalid_scripts_are_refused() {
    for (script, expected) in [
        ("not json", "not valid"),
        (r#"[{"text": "a bare array"}]"#, "not valid"),
        (r#"{"responses": [{"txt": "typo"}]}"#, "not valid"),
        (r#"{"responses": [{"text": "ok"}, {}]}"#, "response #1"),
        (
            r#"{"responses": [{"error": {"status": 500}, "text": "both"}]}"#,
            "response #0",
        ),
        (
            r#"{"responses": [{"tool_calls": [{"arguments": {}}]}]}"#,
            "not valid",
        ),
    ] {
        let error = ScriptedModel::from_json_str(script).unwrap_err();
        assert_eq!(error.code(), "model_script_invalid", "{script}");
        assert!(error.to_string().contains(expected), "{script}: {error}");
    }
    let missing = ScriptedModel::from_json_file(std::path::Path::new("/nonexistent/script.json"))
        .unwrap_err();
    assert_eq!(missing.code(), "model_script_invalid");
    assert!(
        missing.to_string().contains("/nonexistent/script.json"),
        "{missing}"
    );
}
