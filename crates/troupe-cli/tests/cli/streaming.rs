//! `troupe run` against a streaming Chat Completions server on 127.0.0.1 (the hand-rolled chunked
//! server of the library's tests): the lead's tool call arrives as deltas split across chunks,
//! the tool runs, and the streamed answer is printed.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::sse_server::{sse, Recorded, Reply, SseServer, DONE};
use super::support::{command, ran, Ran};

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

async fn run(ws: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut c = command(ws);
    c.args(["run", "--workspace", ws.to_str().unwrap()])
        .args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(std::process::Stdio::null());
    tokio::time::timeout(
        Duration::from_secs(120),
        tokio::task::spawn_blocking(move || ran(c.output().unwrap())),
    )
    .await
    .unwrap()
    .unwrap()
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
