//! `--model-script` with queues per agent: two teammates working at the same time each get
//! their own answers, whatever order their model calls interleave in.

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::support::{json as stdout_json, troupe_in};

fn write(path: &str, content: &str) -> Value {
    json!({"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]})
}

#[test]
fn two_teammates_with_their_own_queues_get_their_own_answers() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let spawn = |name: &str| {
        json!({"name": "spawn_teammate", "arguments": {
            "name": name, "role": "writer", "prompt": format!("Write {name}.txt.")}})
    };
    // The lead spawns both at once, so their workers run side by side. It may see their two
    // results in one event turn or in two: it has an answer for either.
    let script = json!({"agents": {
        "lead": [
            {"tool_calls": [spawn("alice"), spawn("bob")]},
            {"text": "Both are writing."},
            {"text": "Both reported."},
            {"text": "Both reported."}
        ],
        "alice": [write("alice.txt", "from alice"), {"text": "alice wrote alice.txt"}],
        "bob": [write("bob.txt", "from bob"), {"text": "bob wrote bob.txt"}]
    }});
    let script_path = ws.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let run = troupe_in(
        &ws,
        &[
            "run",
            "--prompt",
            "Have alice and bob each write a file.",
            "--approval",
            "auto",
            "--model-script",
            script_path.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.stdout, "Both reported.\n");
    assert_eq!(
        std::fs::read_to_string(ws.join("alice.txt")).unwrap(),
        "from alice"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("bob.txt")).unwrap(),
        "from bob"
    );
    let lead = stdout_json(&troupe_in(&ws, &["mailbox", "lead", "--json"]));
    let mut results: Vec<(String, String)> = lead["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["message"]["sender"].as_str().unwrap().to_owned(),
                m["message"]["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    results.sort();
    assert_eq!(
        results,
        [
            ("alice".to_owned(), "alice wrote alice.txt".to_owned()),
            ("bob".to_owned(), "bob wrote bob.txt".to_owned()),
        ]
    );
}

#[test]
fn a_script_naming_an_invalid_agent_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let script_path = ws.join("script.json");
    std::fs::write(&script_path, r#"{"agents": {"Writer": [{"text": "x"}]}}"#).unwrap();
    let run = troupe_in(
        &ws,
        &[
            "run",
            "--prompt",
            "hi",
            "--model-script",
            script_path.to_str().unwrap(),
        ],
    );
    super::support::assert_fails(&run, 2, "[model_script_invalid]");
    assert!(run.stderr.contains("Writer"), "{run:#?}");
    assert!(!ws.join(".troupe").exists());
}
