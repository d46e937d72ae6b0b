//! `troupe status` shows the token usage of `.troupe/usage.jsonl` (written here by hand), in
//! text and under `usage` in `--json`; it reads only, and a corrupt line is a one-line failure.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{assert_fails, json, keys, troupe_in};

fn line(run: &str, agent: &str, prompt: u64, completion: u64) -> String {
    format!(
        "{{\"at\":\"2026-07-30T08:00:00.000Z\",\"run_id\":\"{run}\",\"agent\":\"{agent}\",\
         \"model\":\"gpt-test\",\"purpose\":\"turn\",\"prompt_tokens\":{prompt},\
         \"completion_tokens\":{completion},\"total_tokens\":{}}}\n",
        prompt + completion
    )
}

fn workspace_with_usage(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".troupe")).unwrap();
    std::fs::write(dir.path().join(".troupe/usage.jsonl"), text).unwrap();
    dir
}

fn sample() -> String {
    [
        line("run-1", "lead", 1000, 40),
        line("run-1", "writer", 300, 20),
        line("run-2", "lead", 234, 16),
    ]
    .concat()
        // A torn tail of an interrupted append: ignored.
        + "{\"at\":\"2026-07-30T08:00:01.000Z\",\"run_"
}

#[test]
fn status_json_has_usage_totals_per_agent_and_runs() {
    let dir = workspace_with_usage(&sample());
    let before = std::fs::read(dir.path().join(".troupe/usage.jsonl")).unwrap();

    let status = json(&troupe_in(dir.path(), &["status", "--json"]));

    assert_eq!(
        status["usage"],
        json!({
            "total": {"prompt_tokens": 1534, "completion_tokens": 76, "total_tokens": 1610,
                      "cache_read_tokens": 0, "cache_write_tokens": 0},
            "agents": {
                "lead": {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290,
                         "cache_read_tokens": 0, "cache_write_tokens": 0},
                "writer": {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320,
                           "cache_read_tokens": 0, "cache_write_tokens": 0}
            },
            "runs": 2,
            "latest_run": {"run_id": "run-2", "prompt_tokens": 234, "completion_tokens": 16,
                           "total_tokens": 250, "cache_read_tokens": 0, "cache_write_tokens": 0}
        })
    );
    // The keys that were there before are all still there.
    assert_eq!(
        keys(&status),
        [
            "jobs",
            "mailboxes",
            "pending_requests",
            "run",
            "state_bytes",
            "tasks",
            "teammates",
            "usage",
            "workspace"
        ]
    );
    // Read only: the torn tail is left where it is.
    assert_eq!(
        std::fs::read(dir.path().join(".troupe/usage.jsonl")).unwrap(),
        before
    );
}

#[test]
fn status_text_shows_usage_per_agent_and_the_latest_run() {
    let dir = workspace_with_usage(&sample());

    let ran = troupe_in(dir.path(), &["status"]);

    assert_eq!(ran.code, 0, "{ran:#?}");
    let usage = &ran.stdout[ran.stdout.find("\nusage ").expect("a usage section") + 1..];
    assert_eq!(
        usage,
        "usage      1,610 tokens (1,534 in / 76 out) over 2 runs\n\
         \x20 agent                      prompt   completion        total       cached\n\
         \x20 lead                        1,234           56        1,290            0\n\
         \x20 writer                        300           20          320            0\n\
         \x20 latest run run-2: 250 tokens (234 in / 16 out)\n"
    );
}

#[test]
fn status_without_a_usage_log_shows_none_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();

    let status = json(&troupe_in(dir.path(), &["status", "--json"]));
    let text = troupe_in(dir.path(), &["status"]);

    assert_eq!(
        status["usage"],
        json!({
            "total": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
                      "cache_read_tokens": 0, "cache_write_tokens": 0},
            "agents": {},
            "runs": 0,
            "latest_run": null
        })
    );
    assert!(
        text.stdout.ends_with("\nusage      none recorded\n"),
        "{text:#?}"
    );
    assert!(!dir.path().join(".troupe").exists());
}

#[test]
fn a_corrupt_usage_line_fails_status_naming_the_line() {
    let dir = workspace_with_usage(&format!(
        "{}not json\n{}",
        line("run-1", "lead", 1, 1),
        line("run-1", "lead", 1, 1)
    ));

    let ran = troupe_in(dir.path(), &["status"]);

    assert_fails(&ran, 1, "usage.jsonl");
    assert!(ran.stderr.contains("line 2"), "{ran:#?}");
    assert!(ran.stderr.contains("[storage_error]"), "{ran:#?}");
}

/// Cache tokens a provider reported (a line without them reads as 0) are added up and shown.
#[test]
fn cache_tokens_are_added_up_and_shown() {
    let cached = "{\"at\":\"2026-07-30T08:00:00.000Z\",\"run_id\":\"run-1\",\"agent\":\"lead\",\
                  \"model\":\"m\",\"purpose\":\"turn\",\"prompt_tokens\":2000,\
                  \"completion_tokens\":10,\"total_tokens\":2010,\"cache_read_tokens\":1500,\
                  \"cache_write_tokens\":300}\n";
    let dir = workspace_with_usage(&format!("{}{cached}", line("run-1", "lead", 100, 5)));
    let status = json(&troupe_in(dir.path(), &["status", "--json"]));
    assert_eq!(status["usage"]["total"]["cache_read_tokens"], 1500);
    assert_eq!(status["usage"]["total"]["cache_write_tokens"], 300);
    assert_eq!(status["usage"]["agents"]["lead"]["prompt_tokens"], 2100);
    let text = troupe_in(dir.path(), &["status"]);
    assert!(
        text.stdout
            .contains("2,115 tokens (2,100 in / 15 out; 1,500 cached, 300 written to the cache)"),
        "{text:#?}"
    );
}

/// A model's cache use reaches usage.jsonl and the model call's event.
#[test]
fn a_runs_cache_tokens_reach_the_usage_log_and_the_event_stream() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let script = ws.join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [{"text": "done", "usage": {"prompt_tokens": 100,
            "completion_tokens": 5, "total_tokens": 105, "cache_read_tokens": 80,
            "cache_write_tokens": 20}}]})
        .to_string(),
    )
    .unwrap();
    let ran = troupe_in(
        &ws,
        &[
            "run",
            "--prompt",
            "hi",
            "--no-memory",
            "--model-script",
            script.to_str().unwrap(),
        ],
    );
    assert_eq!(ran.code, 0, "{ran:#?}");
    let usage = std::fs::read_to_string(ws.join(".troupe/usage.jsonl")).unwrap();
    assert!(
        usage.contains("\"cache_read_tokens\":80,\"cache_write_tokens\":20"),
        "{usage}"
    );
    let events = std::fs::read_to_string(ws.join(".troupe/events.jsonl")).unwrap();
    let call: serde_json::Value = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["kind"] == "model_call_finished")
        .unwrap();
    assert_eq!(call["tokens_cached"], 80, "{call}");
    assert_eq!(call["tokens_cache_write"], 20, "{call}");
}
