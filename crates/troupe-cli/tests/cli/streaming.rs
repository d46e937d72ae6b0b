//! `troupe run` against a streaming Chat Completions server on 127.0.0.1 (the hand-rolled chunked
//! server of the library's tests): the lead's tool call arrives as deltas split across chunks,
//! the tool runs, and the streamed answer is printed.

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::sse_server::{sse, Recorded, Reply, SseServer, DONE};
use super::team_flow::run;

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "model": "gpt-stream",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// Splits `text` into pieces of `size` bytes (boundaries fall anywhere, even mid-character).
fn pieces(text: &str, size: usize) -> Vec<Vec<u8>> {
    text.as_bytes().chunks(size).map(<[u8]>::to_vec).collect()
}

/// The lead writes `out.txt` with a streamed tool call, then answers with what the tool said.
fn lead(request: &Recorded) -> Reply {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    if request.body.get("tools").is_none() {
        // One of the runtime's own tool-less calls (memory): nothing to add.
        return Reply::events(&[sse(&[chunk(json!({"content": "[]"}), Some("stop"))]) + DONE]);
    }
    if last["role"] == "tool" {
        let body = sse(&[
            chunk(json!({"role": "assistant", "content": "Wrote it: "}), None),
            chunk(json!({"content": "streamed ✓"}), None),
            chunk(json!({}), Some("stop")),
        ]) + DONE;
        return Reply::events(&pieces(&body, 7));
    }
    let body = sse(&[
        chunk(
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_w",
                "type": "function", "function": {"name": "write_file", "arguments": ""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\": \"out"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": ".txt\", \"content\": \"streamed ✓\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
    ]) + DONE;
    Reply::events(&pieces(&body, 11))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_tool_call_runs_and_the_streamed_answer_is_printed() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let server = SseServer::start().await;
    server.respond_with(lead);

    let out = run(
        &ws,
        &["--prompt", "Write out.txt", "--approval", "auto"],
        &[
            ("OPENAI_API_KEY", "sk-cli-stream-0123456789"),
            ("OPENAI_MODEL", "gpt-stream"),
            ("OPENAI_BASE_URL", &server.base_url),
        ],
    )
    .await;

    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "Wrote it: streamed ✓\n");
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "streamed ✓"
    );
    let turns: Vec<Recorded> = server
        .requests()
        .into_iter()
        .filter(|r| r.body.get("tools").is_some())
        .collect();
    assert_eq!(turns.len(), 2, "{turns:#?}");
    for turn in &turns {
        assert_eq!(turn.body["stream"], json!(true));
        assert_eq!(turn.body["stream_options"], json!({"include_usage": true}));
    }
    let history = turns[1].body["messages"].as_array().unwrap();
    let call = &history[history.len() - 2];
    assert_eq!(call["role"], "assistant");
    assert_eq!(
        call["tool_calls"][0]["function"],
        json!({"name": "write_file", "arguments": "{\"path\": \"out.txt\", \"content\": \"streamed ✓\"}"})
    );
    assert_eq!(history[history.len() - 1]["tool_call_id"], "call_w");
}

// ---- the whole team flow against the streaming server ---------------------------------------

/// The troupe conversation a Chat Completions body carries (what the agent sent).
fn conversation(body: &Value) -> troupe::model::ModelRequest {
    use troupe::model::{AssistantMessage, ChatMessage, ToolCall};
    let text = |m: &Value, key: &str| m[key].as_str().unwrap_or_default().to_owned();
    let messages = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m["role"].as_str().unwrap() {
            "system" => ChatMessage::system(text(m, "content")),
            "user" => ChatMessage::user(text(m, "content")),
            "tool" => ChatMessage::tool_result(text(m, "tool_call_id"), text(m, "content")),
            "assistant" => ChatMessage::from(AssistantMessage {
                content: m["content"].as_str().map(str::to_owned),
                tool_calls: m["tool_calls"]
                    .as_array()
                    .map(|calls| {
                        calls
                            .iter()
                            .map(|c| {
                                ToolCall::new(
                                    text(c, "id"),
                                    text(&c["function"], "name"),
                                    text(&c["function"], "arguments"),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                ..AssistantMessage::default()
            }),
            other => panic!("unexpected role {other}"),
        })
        .collect();
    troupe::model::ModelRequest {
        messages,
        tools: Vec::new(),
        ..Default::default()
    }
}

/// A troupe answer as the chunks a streaming server sends: text in two deltas, each tool call's
/// id and name first and its arguments in three pieces, then the finish, usage and `[DONE]`.
fn streamed(response: &troupe::model::ModelResponse) -> String {
    let mut chunks = vec![chunk(json!({"role": "assistant"}), None)];
    if let Some(text) = &response.message.content {
        let middle = text
            .char_indices()
            .nth(text.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        chunks.push(chunk(json!({"content": &text[..middle]}), None));
        chunks.push(chunk(json!({"content": &text[middle..]}), None));
    }
    for (index, call) in response.message.tool_calls.iter().enumerate() {
        chunks.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                   "function": {"name": call.name, "arguments": ""}}]}),
            None,
        ));
        let args: Vec<char> = call.arguments.chars().collect();
        for piece in args.chunks(args.len().div_ceil(3).max(1)) {
            let piece: String = piece.iter().collect();
            chunks.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    chunks.push(chunk(json!({}), Some(response.finish_reason.as_str())));
    chunks.push(json!({"choices": [], "usage":
        {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}));
    sse(&chunks) + DONE
}

/// Each agent answered by the demo's scripted scenario (lead spawns `writer` with
/// plan_required; the writer plans, is denied a write while its plan is pending, is approved,
/// writes, reports, and is shut down), streamed in 9-byte pieces.
pub fn team(request: &Recorded) -> Reply {
    if request.body.get("tools").is_none() {
        return Reply::events(&[sse(&[chunk(json!({"content": "[]"}), Some("stop"))]) + DONE]);
    }
    let system = request.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    let response = super::team_flow::answer(system, &conversation(&request.body));
    Reply::events(&pieces(&streamed(&response), 9))
}

/// `troupe run` of the demo's team flow in `ws` against `server` (answering with [`team`]).
async fn run_team_flow(ws: &std::path::Path, server: &SseServer) -> super::support::Ran {
    run(
        ws,
        &[
            "--prompt",
            troupe::demo::PROMPT,
            "--approval",
            "auto",
            "--sandbox",
            "off",
            "--no-memory",
            "--max-turns",
            "10",
        ],
        &[
            ("OPENAI_API_KEY", "sk-cli-team-0123456789"),
            ("OPENAI_MODEL", "gpt-stream"),
            ("OPENAI_BASE_URL", &server.base_url),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_team_flow_runs_against_the_streaming_server() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let server = SseServer::start().await;
    server.respond_with(team);

    let out = run_team_flow(&ws, &server).await;

    super::team_flow::assert_done(&ws, &out);
    // Every turn was asked as a stream.
    assert!(server
        .requests()
        .iter()
        .all(|r| r.body["stream"] == json!(true)));
}

/// Issue 46: the lead's prompt cache survives team changes. Across the team flow — the spawn of
/// the writer, its status changes, its plan request pending and then answered — every request
/// of the lead (and of the writer) is its previous request with messages appended: the same
/// tools, the same system message, the same messages before. What changed in the team reaches
/// the lead as a note in the appended part, never between a tool call's result and the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_of_an_agent_is_its_previous_one_with_messages_appended() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let server = SseServer::start().await;
    server.respond_with(team);

    let out = run_team_flow(&ws, &server).await;
    super::team_flow::assert_done(&ws, &out);

    let turns: Vec<Value> = server
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|body| body.get("tools").is_some())
        .collect();
    let of = |who: &str| -> Vec<&Value> {
        turns
            .iter()
            .filter(|b| {
                b["messages"][0]["content"]
                    .as_str()
                    .is_some_and(|s| s.starts_with(&format!("You are {who}")))
            })
            .collect()
    };
    let (lead, writer) = (of("lead"), of("writer"));
    assert!(lead.len() >= 4, "{}", lead.len());
    assert!(writer.len() >= 3, "{}", writer.len());
    for requests in [&lead, &writer] {
        for pair in requests.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            assert_eq!(before["tools"], after["tools"]);
            let (old, new) = (
                before["messages"].as_array().unwrap(),
                after["messages"].as_array().unwrap(),
            );
            assert!(new.len() > old.len());
            assert_eq!(
                old[..],
                new[..old.len()],
                "a request rewrote what was sent before"
            );
        }
    }
    // The lead's system message never changed, though the writer joined, worked, asked and
    // stopped; it learned those through notes.
    let system = &lead[0]["messages"][0]["content"];
    assert!(system.as_str().unwrap().contains("## Team\n(no teammates)"));
    let last = lead.last().unwrap()["messages"].as_array().unwrap();
    let notes: Vec<&str> = last
        .iter()
        .filter_map(|m| m["content"].as_str())
        .filter(|c| c.starts_with("<prompt-update>"))
        .collect();
    assert!(!notes.is_empty(), "no note in {last:#?}");
    assert!(notes.iter().any(|n| n.contains("- writer (")), "{notes:#?}");
    assert!(
        notes
            .iter()
            .any(|n| n.contains("plan_approval") && n.contains("pending until")),
        "{notes:#?}"
    );
    for (i, message) in last.iter().enumerate() {
        let is_note = message["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("<prompt-update>"));
        if is_note {
            assert_eq!(message["role"], "user");
            assert_ne!(last[i - 1]["role"], "tool", "a note after a tool result");
            assert_ne!(last[i - 1]["role"], "system", "a note before any input");
        }
    }
}
