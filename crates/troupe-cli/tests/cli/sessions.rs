//! Long-lived agents through the binary (SPEC §9): `--new-session` keeps the old conversation
//! aside, `--max-tokens` stops a run gracefully with exit 3, `--context-window` is validated.

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::support::{command, ran, Ran};

/// Runs `troupe run --prompt PROMPT` on `ws` with a model script and `args`.
pub fn run_scripted(ws: &std::path::Path, prompt: &str, script: &Value, args: &[&str]) -> Ran {
    let path = ws.join(format!("script-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&path, script.to_string()).unwrap();
    let out = command(ws)
        .args([
            "run",
            "--workspace",
            ws.to_str().unwrap(),
            "--prompt",
            prompt,
        ])
        .args([
            "--model-script",
            path.to_str().unwrap(),
            "--approval",
            "auto",
        ])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    ran(out)
}

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

fn transcript_text(ws: &std::path::Path, name: &str) -> String {
    std::fs::read_to_string(ws.join(".troupe/transcripts").join(name)).unwrap()
}

#[test]
fn a_new_session_keeps_the_old_conversation_aside() {
    let (_dir, ws) = workspace();
    let answer = json!({"responses": [{"text": "first answer"}]});
    let first = run_scripted(&ws, "remember the word apple", &answer, &[]);
    assert_eq!(first.code, 0, "{first:#?}");
    let again = json!({"responses": [{"text": "second answer"}]});
    let second = run_scripted(&ws, "what was the word?", &again, &["--new-session"]);
    assert_eq!(second.code, 0, "{second:#?}");
    assert!(
        second.stderr.contains("lead.1.jsonl"),
        "the run says where the old conversation went: {second:#?}"
    );
    assert!(transcript_text(&ws, "lead.1.jsonl").contains("remember the word apple"));
    let fresh = transcript_text(&ws, "lead.jsonl");
    assert!(!fresh.contains("apple"), "{fresh}");
    assert!(fresh.contains("what was the word?"));
    // A third new session numbers on.
    let third = run_scripted(&ws, "again", &again, &["--new-session"]);
    assert_eq!(third.code, 0, "{third:#?}");
    assert!(transcript_text(&ws, "lead.2.jsonl").contains("what was the word?"));
}

#[test]
fn a_spent_token_budget_stops_the_run_with_exit_3() {
    let (_dir, ws) = workspace();
    let usage = json!({"prompt_tokens": 60, "completion_tokens": 10, "total_tokens": 70});
    let glob =
        json!({"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}], "usage": usage});
    let script =
        json!({"responses": [glob, glob, glob, {"text": "never reached", "usage": usage}]});
    let out = run_scripted(&ws, "go", &script, &["--max-tokens", "100"]);
    assert_eq!(out.code, 3, "{out:#?}");
    assert_eq!(out.stdout, "");
    let last = out.stderr.lines().last().unwrap();
    assert!(
        last.contains("past its budget of 100") && last.ends_with("[token_budget]"),
        "{last}"
    );
    // Two calls: 70 tokens after the first is under 100, 140 after the second is not.
    let lines = transcript_text(&ws, "lead.jsonl");
    assert_eq!(lines.matches("\"tool_calls\"").count(), 2, "{lines}");
}

#[test]
fn bad_budgets_and_windows_are_usage_errors_before_any_state() {
    let (_dir, ws) = workspace();
    let script = json!({"responses": [{"text": "x"}]});
    for args in [
        &["--max-tokens", "0"][..],
        &["--context-window", "10"][..],
        &["--context-window", "lots"][..],
    ] {
        let out = run_scripted(&ws, "go", &script, args);
        assert_eq!(out.code, 2, "{args:?}: {out:#?}");
        assert!(!ws.join(".troupe").exists(), "{args:?}");
    }
    let out = command(&ws)
        .args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .env("TROUPE_CONTEXT_WINDOW", "tiny")
        .output()
        .unwrap();
    let out = ran(out);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("TROUPE_CONTEXT_WINDOW"), "{out:#?}");
}

/// One run's script: three reads of a 4 KB file, then an answer; the server's context window
/// is 30,000 bytes (the lead's eighteen tool schemas alone are about 12 KB of every request).
fn reading_run() -> Value {
    let read = json!({"tool_calls": [{"name": "read_file", "arguments": {"path": "blob.txt"}}]});
    json!({"max_request_bytes": 34_000,
           "responses": [read, read, read, {"text": "Read it."}]})
}

#[test]
fn twenty_runs_on_one_workspace_never_fail_on_context() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("blob.txt"), "0123456789\n".repeat(365)).unwrap();
    let script = reading_run();
    for n in 0..20 {
        // An 8,192-token window: requests are kept under 24,576 bytes.
        let out = run_scripted(
            &ws,
            &format!("run {n}: read blob.txt three times"),
            &script,
            &["--context-window", "8192"],
        );
        assert_eq!(out.code, 0, "run {n}: {out:#?}");
        assert_eq!(out.stdout, "Read it.\n", "run {n}");
    }
    let text = transcript_text(&ws, "lead.jsonl");
    // Both compactions along the way: batches of old results cleared past half the budget
    // (most runs), summaries past the budget (rare: the batches make room, and only what they
    // may not clear — prompts, answers, small results — piles up).
    let (summaries, batches) = (
        text.matches("\"compaction\"").count(),
        text.matches("\"micro_compaction\"").count(),
    );
    assert!(
        summaries >= 1 && batches >= 20,
        "{summaries} summaries, {batches} batches"
    );
    // Every run's prompt is in the file for people, the last one after the last boundary.
    assert!(text.contains("run 0: read") && text.contains("run 19: read"));
    let after = &text[text.rfind("\"compaction\"").unwrap()..];
    assert!(after.contains("run 19: read blob.txt three times"));
    // Each compaction is in the event stream, as many as boundaries in the transcript.
    let compactions = compaction_events(&ws);
    assert_eq!(compactions.len(), text.matches("\"compaction\"").count());
    assert!(compactions.iter().all(|e| e.agent == "lead"
        && e.str("trigger") == Some("budget")
        && e.u64("messages_after") < e.u64("messages_before")));
}

fn compaction_events(ws: &std::path::Path) -> Vec<troupe::wire::Event> {
    troupe::store::events::read::read_all(&ws.join(".troupe/events.jsonl"))
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "compaction")
        .collect()
}

#[test]
fn without_its_own_budget_the_run_still_recovers_from_prompt_too_long() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("blob.txt"), "0123456789\n".repeat(365)).unwrap();
    let script = reading_run();
    // A window far larger than the server's: troupe does not compact ahead, the server
    // refuses, troupe compacts and retries.
    for n in 0..8 {
        let out = run_scripted(
            &ws,
            &format!("run {n}"),
            &script,
            &["--context-window", "1000000"],
        );
        assert_eq!(out.code, 0, "run {n}: {out:#?}");
    }
    let text = transcript_text(&ws, "lead.jsonl");
    assert!(text.contains("\"compaction\""), "no compaction boundary");
    assert!(compaction_events(&ws)
        .iter()
        .any(|e| e.str("trigger") == Some("prompt_too_long")));
}

#[test]
fn compact_summarises_a_conversation_now_and_says_so() {
    let (_dir, ws) = workspace();
    std::fs::write(ws.join("blob.txt"), "small\n").unwrap();
    let read = json!({"tool_calls": [{"name": "read_file", "arguments": {"path": "blob.txt"}}]});
    let script = json!({"responses": [read, read, read, read, read, read, read, {"text": "ok"}]});
    let out = run_scripted(&ws, "read a lot", &script, &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    let model = ws.join("compact-script.json");
    std::fs::write(&model, json!({"responses": []}).to_string()).unwrap();
    let compact = |args: &[&str]| {
        let mut all = vec!["compact", "--workspace", ws.to_str().unwrap()];
        all.extend(["--model-script", model.to_str().unwrap()]);
        all.extend(args);
        ran(command(&ws).args(&all).output().unwrap())
    };
    let done = compact(&["--json"]);
    assert_eq!(done.code, 0, "{done:#?}");
    let report: Value = serde_json::from_str(&done.stdout).unwrap();
    assert_eq!(report["compacted"], true);
    assert_eq!(report["kind"], "summary");
    assert!(report["messages_after"].as_u64() < report["messages_before"].as_u64());
    assert!(transcript_text(&ws, "lead.jsonl").contains("\"compaction\""));
    // The event stream records it, trigger `manual`.
    let events = std::fs::read_to_string(ws.join(".troupe/events.jsonl")).unwrap();
    let compaction: Value = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "compaction" && e["trigger"] == "manual")
        .unwrap_or_else(|| panic!("no manual compaction event: {events}"));
    assert_eq!(compaction["agent"], "lead");
    assert_eq!(compaction["messages_after"], report["messages_after"]);
    // Nothing older left to compact the second time: every documented field, unchanged.
    let again = compact(&["--json"]);
    assert_eq!(again.code, 0, "{again:#?}");
    let unchanged: Value = serde_json::from_str(&again.stdout).unwrap();
    assert_eq!(
        super::support::keys(&unchanged),
        [
            "agent",
            "bytes_after",
            "bytes_before",
            "compacted",
            "kind",
            "messages_after",
            "messages_before"
        ]
    );
    assert_eq!(unchanged["compacted"], false);
    assert_eq!(unchanged["kind"], Value::Null);
    assert_eq!(unchanged["messages_before"], unchanged["messages_after"]);
    assert_eq!(unchanged["bytes_before"], unchanged["bytes_after"]);
    let again = compact(&[]);
    assert_eq!(again.code, 0, "{again:#?}");
    assert!(
        again.stdout.contains("nothing older to compact"),
        "{again:#?}"
    );
    // An agent without a conversation: one line, exit 1.
    let unknown = compact(&["--agent", "nobody"]);
    assert_eq!(unknown.code, 1, "{unknown:#?}");
    assert!(unknown.stderr.contains("[no_conversation]"), "{unknown:#?}");
    // While a run holds the workspace: refused.
    let lock = std::fs::File::options()
        .write(true)
        .open(ws.join(".troupe/run.lock"))
        .unwrap();
    lock.lock().unwrap();
    let busy = compact(&[]);
    assert_eq!(busy.code, 1, "{busy:#?}");
    assert!(busy.stderr.contains("workspace_busy"), "{busy:#?}");
}
