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

/// The README's scripted-model example, taken from the README itself, runs to the lead's last
/// answer (an example that stops working fails here).
#[test]
fn the_readmes_script_example_runs_as_written() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let section = &readme[readme.find("### Scripted models").unwrap()..];
    let start = section.find("```json\n").unwrap() + "```json\n".len();
    let example = &section[start..start + section[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let script = ws.join("example.json");
    std::fs::write(&script, example).unwrap();
    let out = super::support::troupe_in(
        &ws,
        &[
            "run",
            "--prompt",
            "go",
            "--approval",
            "auto",
            "--no-memory",
            "--model-script",
            script.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "The writer reported back; done.\n", "{out:#?}");
    // The writer's usage entry reached usage.jsonl.
    let usage = std::fs::read_to_string(ws.join(".troupe/usage.jsonl")).unwrap();
    assert!(
        usage.contains("\"agent\":\"writer\"") && usage.contains("\"total_tokens\":15"),
        "{usage}"
    );
}
