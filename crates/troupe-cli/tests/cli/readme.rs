//! The README's and docs' main examples, taken from where they are written and run with closer
//! checks than `readme_blocks` gives every example: the scripted model, the settings file, the
//! MCP servers' settings, an agent definition and a memory record. An example that stops
//! working fails here, not in a newcomer's hands.

use serde_json::Value;

use super::readme_blocks::{
    example_after, list_memory_record, load_settings, run_script, script_example,
    spawn_from_definition, workspace,
};

/// The scripted-model example runs to the lead's last answer.
#[test]
fn the_script_example_runs_as_written() {
    let (_dir, ws) = workspace();
    let script = ws.join("example.json");
    std::fs::write(&script, script_example()).unwrap();
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
    for (file, heading, expect) in [
        (
            "docs/settings.md",
            "## `troupe.toml` and the user `config.toml`",
            "shell(cargo test:*)",
        ),
        ("docs/settings.md", "## MCP servers", "github"),
        (
            "README.md",
            "## One example of each feature",
            "cargo fmt --check",
        ),
    ] {
        let config = load_settings(&example_after(file, heading));
        assert!(config.to_string().contains(expect), "{heading}: {config}");
        // A cloned workspace's example waits for trust.
        assert_eq!(config["trust"]["applies"], false, "{heading}");
    }
}

#[test]
fn the_agent_definition_example_is_spawned_as_written() {
    spawn_from_definition(&example_after("docs/settings.md", "## Agent definitions"));
}

#[test]
fn the_memory_record_example_is_listed_as_written() {
    let listed: Value =
        list_memory_record(&example_after("docs/long-lived-agents.md", "## Memory"));
    assert_eq!(listed["records"][0]["name"], "prefers-tabs", "{listed}");
}
