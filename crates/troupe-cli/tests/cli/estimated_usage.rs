//! A Chat Completions server that reports no token usage (llama-cpp-python's, for one), on
//! 127.0.0.1, streaming: troupe estimates each call's tokens (about 4 bytes a token), marks them
//! `estimated` in `.troupe/usage.jsonl`, the events and `troupe usage`/`troupe status`, and
//! counts them toward `--max-tokens` and `--max-cost`; an empty final answer is said on stderr.

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::sse_server::{sse, Recorded, Reply, SseServer, DONE};
use super::support::{json as json_of, troupe_in};
use super::team_flow::run;

/// The chunks name `gpt-4.1`, a model of troupe's price table, so that estimates have a cost.
fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "model": "gpt-4.1",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// A streamed answer of `text` (finish reason `stop`), with no usage chunk.
fn text_reply(text: &str) -> Reply {
    Reply::events(&[sse(&[
        chunk(json!({"role": "assistant", "content": text}), None),
        chunk(json!({}), Some("stop")),
    ]) + DONE])
}

/// A lead that calls `glob` once, then answers `done`; the runtime's own tool-less calls
/// (memory) get `[]`. No reply carries usage.
fn glob_then_done(request: &Recorded) -> Reply {
    if request.body.get("tools").is_none() {
        return text_reply("[]");
    }
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if messages.last().is_some_and(|last| last["role"] == "tool") {
        return text_reply("done");
    }
    Reply::events(&[sse(&[
        chunk(
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_g",
                "type": "function",
                "function": {"name": "glob", "arguments": "{\"pattern\": \"*.txt\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
    ]) + DONE])
}

fn env(server: &SseServer) -> [(&str, &str); 3] {
    [
        ("OPENAI_API_KEY", "sk-cli-silent-0123456789"),
        ("OPENAI_MODEL", "gpt-4.1"),
        ("OPENAI_BASE_URL", &server.base_url),
    ]
}

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

fn usage_lines(ws: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(ws.join(".troupe/usage.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimated_tokens_spend_the_token_budget() {
    let (_dir, ws) = workspace();
    let server = SseServer::start().await;
    server.respond_with(glob_then_done);

    let out = run(
        &ws,
        &["--prompt", "List the text files", "--max-tokens", "20"],
        &env(&server),
    )
    .await;

    // The first call alone (the system prompt, the tools) is estimated at far more than 20
    // tokens: the budget stops the run before the second call, without the answer.
    assert_eq!(out.code, 3, "{out:#?}");
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("[token_budget]"), "{out:#?}");
    assert!(
        out.stderr.contains("tokens (some estimated): lead "),
        "{out:#?}"
    );
    let turns = server
        .requests()
        .iter()
        .filter(|request| request.body.get("tools").is_some())
        .count();
    assert_eq!(turns, 1);
    let lines = usage_lines(&ws);
    assert!(!lines.is_empty());
    assert!(
        lines.iter().all(|line| line["estimated"] == json!(true)),
        "{lines:#?}"
    );
    assert!(
        lines[0]["total_tokens"].as_u64().unwrap() > 20,
        "{lines:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimated_tokens_spend_the_cost_budget() {
    let (_dir, ws) = workspace();
    let server = SseServer::start().await;
    server.respond_with(glob_then_done);

    // A thousandth of a cent: the first call's estimated prompt alone (thousands of tokens at
    // gpt-4.1's list price) costs more.
    let out = run(
        &ws,
        &["--prompt", "List the text files", "--max-cost", "0.00001"],
        &env(&server),
    )
    .await;

    assert_eq!(out.code, 3, "{out:#?}");
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr
            .lines()
            .last()
            .unwrap()
            .ends_with("[cost_budget]"),
        "{out:#?}"
    );
    let turns = server
        .requests()
        .iter()
        .filter(|request| request.body.get("tools").is_some())
        .count();
    assert_eq!(turns, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimated_usage_is_marked_in_the_log_the_events_and_the_reports() {
    let (_dir, ws) = workspace();
    let server = SseServer::start().await;
    server.respond_with(|request| {
        if request.body.get("tools").is_none() {
            text_reply("[]")
        } else {
            text_reply("hello there")
        }
    });

    let out = run(&ws, &["--prompt", "Say hello"], &env(&server)).await;
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "hello there\n");

    let lines = usage_lines(&ws);
    let turn = lines
        .iter()
        .find(|line| line["purpose"] == "turn")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(turn["estimated"], json!(true));
    // "hello there" is 11 bytes: 3 tokens at 4 bytes a token, rounded up.
    assert_eq!(turn["completion_tokens"], json!(3));
    let prompt = turn["prompt_tokens"].as_u64().unwrap();
    assert!(prompt > 100, "{turn}");
    assert_eq!(turn["total_tokens"], json!(prompt + 3));

    let events = std::fs::read_to_string(ws.join(".troupe/events.jsonl")).unwrap();
    let finished: Vec<Value> = events
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["kind"] == "model_call_finished")
        .collect();
    assert!(!finished.is_empty());
    assert!(
        finished
            .iter()
            .all(|event| event["estimated"] == json!(true)),
        "{finished:#?}"
    );

    let text = troupe_in(&ws, &["usage"]);
    assert_eq!(text.code, 0, "{text:#?}");
    let lead = text
        .stdout
        .lines()
        .find(|line| line.trim_start().starts_with("lead "))
        .unwrap_or_else(|| panic!("{text:#?}"));
    assert!(lead.ends_with("  estimated"), "{lead}");
    assert!(
        text.stdout
            .contains("estimated: the server reported no usage for some calls"),
        "{text:#?}"
    );
    let report = json_of(&troupe_in(&ws, &["usage", "--json"]));
    assert_eq!(
        report["total"]["estimated_tokens"],
        report["total"]["total_tokens"]
    );

    let status = troupe_in(&ws, &["status"]);
    assert!(status.stdout.contains(" estimated)"), "{status:#?}");
}

#[test]
fn a_log_of_counted_and_estimated_lines_is_read_and_only_the_estimated_are_marked() {
    let (_dir, ws) = workspace();
    std::fs::create_dir_all(ws.join(".troupe")).unwrap();
    // An older line (no `estimated` field) and an estimated one.
    std::fs::write(
        ws.join(".troupe/usage.jsonl"),
        "{\"at\":\"2026-07-30T08:00:00.000Z\",\"run_id\":\"r1\",\"agent\":\"lead\",\
         \"model\":\"gpt-4o\",\"purpose\":\"turn\",\"prompt_tokens\":100,\
         \"completion_tokens\":10,\"total_tokens\":110}\n\
         {\"at\":\"2026-07-30T08:01:00.000Z\",\"run_id\":\"r2\",\"agent\":\"writer\",\
         \"model\":\"gpt-4o\",\"purpose\":\"turn\",\"prompt_tokens\":40,\
         \"completion_tokens\":2,\"total_tokens\":42,\"estimated\":true}\n",
    )
    .unwrap();

    let report = json_of(&troupe_in(&ws, &["usage", "--json"]));
    let groups = report["groups"].as_array().unwrap();
    assert_eq!(groups[0]["key"], "lead");
    assert_eq!(groups[0].get("estimated_tokens"), None);
    assert_eq!(groups[1]["key"], "writer");
    assert_eq!(groups[1]["estimated_tokens"], json!(42));
    assert_eq!(report["total"]["estimated_tokens"], json!(42));
    assert_eq!(report["total"]["total_tokens"], json!(152));

    let text = troupe_in(&ws, &["usage"]).stdout;
    let line = |who: &str| {
        text.lines()
            .find(|line| line.trim_start().starts_with(who))
            .unwrap_or_else(|| panic!("{text}"))
            .to_owned()
    };
    assert!(!line("lead ").contains("estimated"), "{text}");
    assert!(line("writer ").ends_with("  estimated"), "{text}");
    assert!(line("total ").ends_with("  partly estimated"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_answer_is_said_on_stderr() {
    let (_dir, ws) = workspace();
    let server = SseServer::start().await;
    server.respond_with(|request| {
        if request.body.get("tools").is_none() {
            text_reply("[]")
        } else {
            text_reply("")
        }
    });

    let out = run(&ws, &["--prompt", "Say something"], &env(&server)).await;

    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "\n");
    assert_eq!(
        out.stderr
            .lines()
            .filter(|line| *line == "the model's answer was empty: it stopped without any text")
            .count(),
        1,
        "{out:#?}"
    );
}
