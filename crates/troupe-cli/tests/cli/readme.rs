//! The README's examples, taken from the README itself and run as written: the scripted model,
//! the settings file, the MCP servers' settings, an agent definition and a memory record. An example that stops working fails here, not in a newcomer's hands.

use serde_json::{json, Value};

use super::support::{command, ran, Ran};

fn readme() -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap()
}

/// The first block fenced with ```` ```lang ```` after the heading `after`.
fn block(readme: &str, after: &str, lang: &str) -> String {
    let section = &readme[readme.find(after).unwrap_or_else(|| panic!("{after}"))..];
    let fence = format!("```{lang}\n");
    let start = section
        .find(&fence)
        .unwrap_or_else(|| panic!("{fence} after {after}"))
        + fence.len();
    section[start..start + section[start..].find("```").unwrap()].to_owned()
}

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

fn troupe(ws: &std::path::Path, args: &[&str]) -> Ran {
    ran(command(ws)
        .args(args)
        .args(["--workspace", ws.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap())
}

/// `troupe run --prompt go` in `ws` on the scripted model in `script`, approvals automatic.
fn run_script(ws: &std::path::Path, script: &std::path::Path) -> Ran {
    troupe(
        ws,
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
    )
}

/// The scripted-model example runs to the lead's last answer.
#[test]
fn the_script_example_runs_as_written() {
    let (_dir, ws) = workspace();
    let script = ws.join("example.json");
    std::fs::write(&script, block(&readme(), "### Scripted models", "json")).unwrap();
    let out = run_script(&ws, &script);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "The writer reported back; done.\n", "{out:#?}");
    // The writer's usage entry reached usage.jsonl.
    let usage = std::fs::read_to_string(ws.join(".troupe/usage.jsonl")).unwrap();
    assert!(
        usage.contains("\"agent\":\"writer\"") && usage.contains("\"total_tokens\":15"),
        "{usage}"
    );
}

#[test]
fn the_settings_examples_load_as_written() {
    let text = readme();
    for (heading, expect) in [
        ("## Settings: `troupe.toml`", "shell(cargo test:*)"),
        ("### MCP servers", "github"),
    ] {
        let (_dir, ws) = workspace();
        std::fs::write(ws.join("troupe.toml"), block(&text, heading, "toml")).unwrap();
        let out = troupe(&ws, &["config", "--json"]);
        assert_eq!(out.code, 0, "{heading}: {out:#?}");
        assert!(out.stdout.contains(expect), "{heading}: {out:#?}");
        // A cloned workspace's example waits for trust.
        let config: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(config["trust"]["applies"], false, "{heading}");
        assert!(!ws.join(".troupe").exists());
    }
}

#[test]
fn the_agent_definition_example_is_spawned_as_written() {
    let text = readme();
    let (_dir, ws) = workspace();
    std::fs::create_dir(ws.join("agents")).unwrap();
    std::fs::write(
        ws.join("agents/reviewer.md"),
        block(&text, "### Agent definitions", "markdown"),
    )
    .unwrap();
    let script = ws.join("script.json");
    std::fs::write(
        &script,
        json!({"agents": {
            "lead": [
                {"tool_calls": [{"name": "spawn_teammate", "arguments": {
                    "name": "rev1", "agent": "reviewer", "role": "review", "prompt": "Review."}}]},
                {"text": "spawned"},
                {"text": "The reviewer reported."}
            ],
            "rev1": [{"text": "Nothing to review."}]
        }})
        .to_string(),
    )
    .unwrap();
    let out = run_script(&ws, &script);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        !out.stderr.contains("agents/reviewer.md"),
        "no warning: {out:#?}"
    );
    let team: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.join(".troupe/team.json")).unwrap())
            .unwrap();
    assert_eq!(team["teammates"][0]["definition"], "reviewer", "{team}");
}

#[test]
fn the_memory_record_example_is_listed_as_written() {
    let text = readme();
    let (_dir, ws) = workspace();
    std::fs::create_dir_all(ws.join(".troupe/memory")).unwrap();
    std::fs::write(
        ws.join(".troupe/memory/prefers-tabs.md"),
        block(&text, "Durable records in `.troupe/memory/", ""),
    )
    .unwrap();
    let out = troupe(&ws, &["memory", "list", "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let listed: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(listed["records"][0]["name"], "prefers-tabs", "{listed}");
    assert_eq!(listed["problems"], json!([]), "{listed}");
}
