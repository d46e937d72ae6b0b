//! The scripted model: queue, exhaustion, recorded requests, `from_fn`, JSON scripts.

use std::io::Write;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::error::ErrorCode;
use troupe::model::{
    AssistantMessage, ChatMessage, FinishReason, ModelClient, ModelRequest, ModelResponse,
    ScriptExhausted, ScriptedModel, ToolCall, Usage,
};

fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        messages: vec![ChatMessage::user(text)],
        ..Default::default()
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
        .error(ScriptExhausted::Shared { served: 99 }.into())
        .text("recovered");

    let scripted_error = model.complete(&ask("a")).await.unwrap_err();
    assert_eq!(
        scripted_error.implementation_error::<ScriptExhausted>(),
        Some(&ScriptExhausted::Shared { served: 99 })
    );
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
                ..AssistantMessage::default()
            },
            finish_reason: FinishReason::ToolCalls,
            usage: Some(Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
                ..Usage::default()
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

/// Answers `n` requests from one agent's view of the model, returning the texts.
fn drain(model: &std::sync::Arc<ScriptedModel>, agent: &str, n: usize) -> Vec<String> {
    let view = ScriptedModel::for_agent(model, &troupe::wire::AgentName::parse(agent).unwrap());
    (0..n)
        .map(|i| {
            let response = block(view.complete(&ask(&format!("{agent} {i}")))).unwrap();
            response.message.content.unwrap()
        })
        .collect()
}

#[test]
fn agents_with_their_own_queues_get_their_own_answers_even_when_called_concurrently() {
    const EACH: usize = 200;
    let entries = |agent: &str| -> Vec<serde_json::Value> {
        (0..EACH)
            .map(|i| json!({"text": format!("{agent} answer {i}")}))
            .collect()
    };
    let script = json!({
        "responses": [{"text": "shared 0"}, {"text": "shared 1"}],
        "agents": {"alice": entries("alice"), "bob": entries("bob")},
    });
    let model = std::sync::Arc::new(ScriptedModel::from_json_str(&script.to_string()).unwrap());
    // Two agents asking at the same time, from two threads, each as fast as it can.
    let start = std::sync::Arc::new(std::sync::Barrier::new(2));
    let threads: Vec<_> = ["alice", "bob"]
        .into_iter()
        .map(|agent| {
            let model = model.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                drain(&model, agent, EACH)
            })
        })
        .collect();
    let answers: Vec<Vec<String>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for (agent, got) in ["alice", "bob"].iter().zip(&answers) {
        let expected: Vec<String> = (0..EACH).map(|i| format!("{agent} answer {i}")).collect();
        assert_eq!(got, &expected, "{agent}");
    }
    // An agent without a queue of its own (the lead) is answered from `responses`.
    assert_eq!(drain(&model, "lead", 2), ["shared 0", "shared 1"]);
    // An agent's own queue running out is an error naming it; it never falls back to `responses`.
    let alice = ScriptedModel::for_agent(&model, &troupe::wire::AgentName::parse("alice").unwrap());
    let exhausted = block(alice.complete(&ask("one more"))).unwrap_err();
    assert_eq!(exhausted.code(), "model_script_exhausted");
    assert!(exhausted.to_string().contains("alice"), "{exhausted}");
}

/// Runs a future to completion on a throwaway runtime (the tests above use plain threads).
fn block<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

#[test]
fn a_script_with_only_agent_queues_leaves_other_agents_without_answers() {
    let script = r#"{"agents": {"writer": [{"text": "mine"}]}}"#;
    let model = std::sync::Arc::new(ScriptedModel::from_json_str(script).unwrap());
    assert_eq!(drain(&model, "writer", 1), ["mine"]);
    let lead = ScriptedModel::for_agent(&model, &troupe::wire::AgentName::lead());
    assert_eq!(
        block(lead.complete(&ask("hi"))).unwrap_err().code(),
        "model_script_exhausted"
    );
}

#[test]
fn invalid_agent_queues_are_refused() {
    for (script, expected) in [
        ("{}", "`responses`, `agents` or both"),
        (r#"{"agents": {"Bad Name": [{"text": "x"}]}}"#, "Bad Name"),
        (r#"{"agents": {"../x": [{"text": "x"}]}}"#, "../x"),
        (
            r#"{"agents": {"writer": [{"text": "ok"}, {}]}}"#,
            "response #1 of agent writer",
        ),
        (r#"{"agents": {"writer": [{"txt": "typo"}]}}"#, "not valid"),
        (r#"{"agents": ["writer"]}"#, "not valid"),
        (r#"{"responses": [], "agent": {}}"#, "not valid"),
    ] {
        let error = ScriptedModel::from_json_str(script).unwrap_err();
        assert_eq!(error.code(), "model_script_invalid", "{script}");
        assert!(error.to_string().contains(expected), "{script}: {error}");
    }
}

#[test]
fn a_script_that_is_a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let err = ScriptedModel::from_json_file(&path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("script.json"), "{err}");
    assert!(err.contains("not a regular file"), "{err}");
}

#[tokio::test]
async fn runtime_calls_never_take_an_agents_turn_answers() {
    use troupe::model::Purpose;
    let model = ScriptedModel::from_json_str(
        r#"{"responses": [{"text": "turn answer"}],
            "side": {"summary": [{"text": "not json"}]}}"#,
    )
    .unwrap();
    let side = |purpose| ModelRequest::side(purpose, vec![ChatMessage::user("the goal")]);
    // The scripted summary first, then the built-in one (a valid object naming the goal).
    let scripted = model.complete(&side(Purpose::Summary)).await.unwrap();
    assert_eq!(scripted.message.content.as_deref(), Some("not json"));
    let built_in = model.complete(&side(Purpose::Summary)).await.unwrap();
    let summary: serde_json::Value =
        serde_json::from_str(built_in.message.content.as_deref().unwrap()).unwrap();
    assert_eq!(
        summary["current_goal"],
        "Continue the work of the conversation so far."
    );
    for purpose in [
        Purpose::MemoryExtract,
        Purpose::MemorySelect,
        Purpose::MemoryConsolidate,
    ] {
        let answer = model.complete(&side(purpose)).await.unwrap();
        assert_eq!(answer.message.content.as_deref(), Some("[]"));
    }
    // The turn queue is untouched, and the two kinds of call are recorded apart.
    assert_eq!(model.remaining(), 1);
    let turn = model.complete(&ask("go")).await.unwrap();
    assert_eq!(turn.message.content.as_deref(), Some("turn answer"));
    assert_eq!(model.requests().len(), 1);
    assert_eq!(model.side_requests().len(), 5);
}

#[test]
fn a_side_queue_for_turns_is_refused() {
    let err =
        ScriptedModel::from_json_str(r#"{"responses": [], "side": {"turn": []}}"#).unwrap_err();
    assert!(err.to_string().contains("side"), "{err}");
}
