//! The other providers through the real binary: the whole team flow (plan, gate, approval,
//! shutdown) against a native Anthropic Messages server on 127.0.0.1 that streams its answers
//! as Anthropic does (named events, tool inputs as JSON pieces split anywhere), and a run against
//! Azure OpenAI's deployment endpoint.

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::sse_server::{sse, Recorded, Reply, SseServer, DONE};
use super::team_flow::run;

const ANTHROPIC_KEY: &str = "sk-ant-test-0123456789abcdef";

/// The text of a content value: a string, or text blocks.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The troupe conversation an Anthropic Messages body carries.
fn conversation(body: &Value) -> troupe::model::ModelRequest {
    use troupe::model::{AssistantMessage, ChatMessage, ToolCall};
    let mut messages = vec![ChatMessage::system(text_of(&body["system"]))];
    for message in body["messages"].as_array().unwrap() {
        let blocks = match &message["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(blocks) => blocks.clone(),
            other => panic!("content {other}"),
        };
        if message["role"] == "assistant" {
            let text: String = blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect();
            let calls = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| {
                    ToolCall::new(
                        b["id"].as_str().unwrap(),
                        b["name"].as_str().unwrap(),
                        b["input"].to_string(),
                    )
                })
                .collect();
            messages.push(ChatMessage::from(AssistantMessage {
                content: (!text.is_empty()).then_some(text),
                tool_calls: calls,
                ..AssistantMessage::default()
            }));
            continue;
        }
        for block in blocks {
            match block["type"].as_str().unwrap() {
                "tool_result" => messages.push(ChatMessage::tool_result(
                    block["tool_use_id"].as_str().unwrap(),
                    text_of(&block["content"]),
                )),
                "text" => messages.push(ChatMessage::user(block["text"].as_str().unwrap())),
                other => panic!("unexpected block {other}"),
            }
        }
    }
    troupe::model::ModelRequest {
        messages,
        ..Default::default()
    }
}

/// One named server-sent event, as Anthropic sends them.
fn event(value: Value) -> String {
    format!(
        "event: {}\ndata: {value}\n\n",
        value["type"].as_str().unwrap()
    )
}

/// A troupe answer as Anthropic's stream: text in two deltas, each tool call's input in three
/// JSON pieces, the stop reason and usage last.
fn streamed(response: &troupe::model::ModelResponse) -> String {
    let mut out = event(json!({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [], "stop_reason": null,
        "usage": {"input_tokens": 20, "output_tokens": 1,
                  "cache_read_input_tokens": 12, "cache_creation_input_tokens": 3}}}));
    let mut index = 0;
    if let Some(text) = &response.message.content {
        let middle = text
            .char_indices()
            .nth(text.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        out += &event(json!({"type": "content_block_start", "index": index,
                             "content_block": {"type": "text", "text": ""}}));
        for piece in [&text[..middle], &text[middle..]] {
            out += &event(json!({"type": "content_block_delta", "index": index,
                                 "delta": {"type": "text_delta", "text": piece}}));
        }
        out += &event(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    for call in &response.message.tool_calls {
        out += &event(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}));
        let args: Vec<char> = call.arguments.chars().collect();
        for piece in args.chunks(args.len().div_ceil(3).max(1)) {
            let piece: String = piece.iter().collect();
            out += &event(json!({"type": "content_block_delta", "index": index,
                                 "delta": {"type": "input_json_delta", "partial_json": piece}}));
        }
        out += &event(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    let stop = if response.message.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    out += &event(
        json!({"type": "message_delta", "delta": {"stop_reason": stop},
                         "usage": {"output_tokens": 7}}),
    );
    out += &event(json!({"type": "ping"}));
    out += &event(json!({"type": "message_stop"}));
    out
}

fn pieces(text: &str, size: usize) -> Vec<Vec<u8>> {
    text.as_bytes().chunks(size).map(<[u8]>::to_vec).collect()
}

/// Each agent answered by the demo's scenario, the lead spawning its writer with
/// plan_required, streamed in 13-byte pieces.
fn team(request: &Recorded) -> Reply {
    if request.body.get("tools").is_none() {
        let answer = troupe::model::ModelResponse::text("[]", "claude-test");
        return Reply::events(&[streamed(&answer)]);
    }
    let system = text_of(&request.body["system"]);
    let response = super::team_flow::answer(&system, &conversation(&request.body));
    Reply::events(&pieces(&streamed(&response), 13))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_team_flow_runs_against_anthropics_native_api() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let server = SseServer::start().await;
    server.respond_with(team);
    // Only ANTHROPIC_API_KEY is set: the provider is inferred.
    let out = run(
        &ws,
        &[
            "--prompt",
            troupe::demo::PROMPT,
            "--approval",
            "auto",
            "--no-memory",
            "--max-turns",
            "10",
        ],
        &[
            ("ANTHROPIC_API_KEY", ANTHROPIC_KEY),
            ("ANTHROPIC_MODEL", "claude-test"),
            ("ANTHROPIC_BASE_URL", &server.base_url),
        ],
    )
    .await;
    super::team_flow::assert_done(&ws, &out);

    // Every request in Anthropic's own shape, streamed, with the prompt cache marked.
    let requests = server.requests();
    assert!(requests.len() >= 6, "{}", requests.len());
    for request in &requests {
        assert_eq!(request.target, "/v1/messages");
        assert_eq!(request.header("x-api-key"), Some(ANTHROPIC_KEY));
        assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(request.header("authorization"), None);
        assert_eq!(request.body["stream"], json!(true));
        assert!(request.body["max_tokens"].as_u64().unwrap() > 0);
        assert!(request.body["system"].is_array());
        if request.body.get("tools").is_some() {
            let tools = request.body["tools"].as_array().unwrap();
            assert_eq!(
                tools.last().unwrap()["cache_control"],
                json!({"type": "ephemeral"})
            );
            assert!(tools.iter().all(|t| t.get("input_schema").is_some()));
        }
    }
    // The key reached no file of troupe's.
    for entry in walk(&ws.join(".troupe")) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(!text.contains(ANTHROPIC_KEY), "{}", entry.display());
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "model": "deploy",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reaches_azure_openai_through_its_deployment_url() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let server = SseServer::start().await;
    let endpoint = server.base_url.trim_end_matches("/v1").to_owned();
    server.always(Reply::events(&[sse(&[
        chunk(
            json!({"role": "assistant", "content": "hello from azure"}),
            None,
        ),
        chunk(json!({}), Some("stop")),
    ]) + DONE]));
    let out = run(
        &ws,
        &[
            "--prompt",
            "hi",
            "--approval",
            "auto",
            "--no-memory",
            "--provider",
            "azure",
        ],
        &[
            ("AZURE_OPENAI_API_KEY", "azure-key-0123456789"),
            ("AZURE_OPENAI_ENDPOINT", &endpoint),
            ("OPENAI_API_VERSION", "2024-10-21"),
            ("OPENAI_MODEL", "deploy"),
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "hello from azure\n");
    let request = &server.requests()[0];
    assert_eq!(
        request.target,
        "/openai/deployments/deploy/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(request.header("api-key"), Some("azure-key-0123456789"));
    assert_eq!(request.header("authorization"), None);
}
