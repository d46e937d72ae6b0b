//! State files a crash or a hostile hand left behind, through the real binary: a transcript torn
//! by a crash keeps working run after run, and duplicate JSON keys make a state file corrupt.

use std::io::Write;
use std::path::Path;

use troupe::layout::Layout;
use troupe::wire::AgentName;

use super::special_files::troupe_within;
use super::support::{assert_fails, demo_workspace, failure_text};

/// `troupe run` answering `answer` once, from a scripted model.
fn run_once(ws: &Path, answer: &str) -> super::support::Ran {
    let script = ws.join(format!("{answer}.json"));
    std::fs::write(
        &script,
        serde_json::json!({"responses": [{"text": answer}]}).to_string(),
    )
    .unwrap();
    troupe_within(
        ws,
        &[
            "run",
            "--approval",
            "auto",
            "--prompt",
            answer,
            "--model-script",
            script.to_str().unwrap(),
        ],
    )
}

#[test]
fn a_transcript_torn_by_a_crash_keeps_working_in_every_later_run() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let first = run_once(&ws, "one");
    assert_eq!(
        (first.code, first.stdout.as_str()),
        (0, "one\n"),
        "{first:#?}"
    );
    // A crash in the middle of an append: half a line, no newline.
    let transcript = Layout::new(&ws).transcript(&AgentName::lead());
    std::fs::OpenOptions::new()
        .append(true)
        .open(&transcript)
        .unwrap()
        .write_all(b"{\"key\":null,\"message\":{\"role\":\"assistant\",\"cont")
        .unwrap();
    for answer in ["two", "three"] {
        let ran = run_once(&ws, answer);
        assert_eq!(ran.code, 0, "{ran:#?}");
        assert_eq!(ran.stdout, format!("{answer}\n"));
    }
    let text = std::fs::read_to_string(&transcript).unwrap();
    assert!(text.ends_with('\n'));
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    }
    assert!(
        !text.contains("\"cont{"),
        "a record was glued onto the torn tail"
    );
}

/// Inserts `"key":value,` as the first entry of the first object in the file that starts at or
/// after `after` (a lenient parser keeps the original, later value).
fn duplicate_key(path: &Path, after: &str, key: &str, value: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let from = text.find(after).unwrap();
    let open = from + text[from..].find('{').unwrap();
    let changed = format!("{}\"{key}\":{value},{}", &text[..=open], &text[open + 1..]);
    std::fs::write(path, changed).unwrap();
}

#[test]
fn status_reports_a_state_json_with_a_duplicate_key_as_corrupt() {
    let (_dir, ws) = demo_workspace();
    let state = Layout::new(&ws).protocol_state();
    let before = std::fs::read_to_string(&state).unwrap();
    // The first request's status, repeated with the same value.
    let status = if before.contains("\"status\": \"approved\"") {
        "\"approved\""
    } else {
        "\"pending\""
    };
    duplicate_key(&state, "\"requests\"", "status", status);
    for args in [&["status"][..], &["status", "--json"], &["requests"]] {
        let ran = troupe_within(&ws, args);
        let text = failure_text(&ran, 1);
        assert!(text.contains("duplicate key \"status\""), "{text}");
        assert!(text.contains("[protocol_state_corrupt]"), "{text}");
    }
}

#[test]
fn status_reports_a_team_json_with_a_duplicate_key_or_teammate_as_corrupt() {
    let (_dir, ws) = demo_workspace();
    let team = Layout::new(&ws).team_file();
    let original = std::fs::read_to_string(&team).unwrap();
    duplicate_key(&team, "\"teammates\"", "role", "\"admin\"");
    let ran = troupe_within(&ws, &["status"]);
    assert_fails(&ran, 1, "duplicate key \"role\"");
    assert!(ran.stderr.contains("[team_state_corrupt]"), "{ran:#?}");

    // The same teammate listed twice.
    let mut roster: serde_json::Value = serde_json::from_str(&original).unwrap();
    let mates = roster["teammates"].as_array_mut().unwrap();
    mates.push(mates[0].clone());
    std::fs::write(&team, roster.to_string()).unwrap();
    let ran = troupe_within(&ws, &["status", "--json"]);
    let text = failure_text(&ran, 1);
    assert!(text.contains("teammate writer appears twice"), "{text}");
    assert!(text.contains("[team_state_corrupt]"), "{text}");
}
