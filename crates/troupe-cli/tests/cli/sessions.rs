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
