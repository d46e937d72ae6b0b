//! MCP servers through the real binary: `troupe mcp list --json` with the project's fixture
//! server, and a teammate using an MCP tool under the plan gate.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::plans::{plan_request_id, wait};
use super::support::{command, troupe_in};

fn fixture_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../troupe/tests/fixtures/mcp_fixture.py")
}

/// A workspace whose `troupe.toml` configures the fixture server as `fixture`, and a broken
/// server `broken`.
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(
        ws.join("troupe.toml"),
        format!(
            "[[mcp_servers]]\nname = \"fixture\"\ncommand = \"python3\"\nargs = [{:?}, \"ok\"]\n\
             startup_timeout = 20\n\n\
             [[mcp_servers]]\nname = \"broken\"\ncommand = \"/nonexistent/server\"\n",
            fixture_script().display().to_string()
        ),
    )
    .unwrap();
    (dir, ws)
}

#[test]
fn mcp_list_shows_servers_states_and_tools_and_creates_nothing() {
    let (_dir, ws) = workspace();
    let out = troupe_in(&ws, &["mcp", "list", "--json", "--trust-workspace"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let listed: Value = serde_json::from_str(&out.stdout).unwrap();
    let servers = listed["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[0]["name"], "fixture");
    assert_eq!(servers[0]["transport"], "stdio");
    assert_eq!(servers[0]["state"], "up");
    assert_eq!(
        servers[0]["tools"][0],
        json!({"name": "mcp__fixture__echo", "server_name": "echo",
               "description": "Echoes its text."})
    );
    // Listed as the server offers them, `odd` (which troupe does not offer agents) included.
    assert_eq!(servers[0]["tools"].as_array().unwrap().len(), 8);
    assert_eq!(servers[1]["name"], "broken");
    assert_eq!(servers[1]["state"], "failed");
    assert!(
        servers[1]["reason"]
            .as_str()
            .unwrap()
            .ends_with("could not start: program \"/nonexistent/server\" not found"),
        "{listed}"
    );
    assert!(!ws.join(".troupe").exists(), "mcp list creates no state");
    let text = troupe_in(&ws, &["mcp", "list", "--trust-workspace"]);
    assert_eq!(text.code, 0, "{text:#?}");
    assert!(
        text.stdout.contains("fixture (stdio): up"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("  mcp__fixture__echo  Echoes its text."),
        "{}",
        text.stdout
    );
}

/// `(tool, decision, rule)` of every audit line of `agent`.
fn audit_of(ws: &Path, agent: &str) -> Vec<(String, String, String)> {
    std::fs::read_to_string(ws.join(".troupe/audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["agent"] == agent)
        .map(|l| {
            let s = |key: &str| l[key].as_str().unwrap().to_owned();
            (s("tool"), s("decision"), s("rule"))
        })
        .collect()
}

fn tool(name: &str, arguments: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": arguments}]})
}

#[test]
fn a_teammate_uses_an_mcp_tool_under_the_plan_gate() {
    let (_dir, ws) = workspace();
    std::fs::create_dir(ws.join("agents")).unwrap();
    std::fs::write(
        ws.join("agents/fixer.md"),
        "---\nname: fixer\ndescription: uses the fixture\ntools: [read_file, mcp__fixture__echo]\n---\nUse echo.\n",
    )
    .unwrap();
    let echo = tool("mcp__fixture__echo", json!({"text": "from fixer"}));
    let noted: Vec<Value> = (0..8).map(|_| json!({"text": "noted"})).collect();
    let mut lead = vec![tool(
        "spawn_teammate",
        json!({"name": "fixer", "role": "fixer", "agent": "fixer",
               "plan_required": true, "prompt": "Echo something."}),
    )];
    lead.extend(noted);
    let script = json!({
        "responses": [],
        "agents": {
            "lead": lead,
            "fixer": [
                echo,
                tool("submit_plan", json!({"plan": "Echo once."})),
                {"text": "plan submitted"},
                echo,
                {"text": "echoed"},
            ],
        },
    });
    let script_path = ws.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let mut child = command(&ws)
        .args([
            "run",
            "--prompt",
            "Have fixer echo.",
            "--trust-workspace",
            "--model-script",
            script_path.to_str().unwrap(),
            "--approval",
            "auto",
            "--workspace",
            ws.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let request_id = plan_request_id(&mut child);
    let reviewed = troupe_in(&ws, &["review", &request_id, "--approve"]);
    assert_eq!(reviewed.code, 0, "{reviewed:#?}");
    let out = wait(child);
    assert!(matches!(out.code, 0 | 3), "{out:#?}");
    let fixer = audit_of(&ws, "fixer");
    let expected = [
        ("mcp__fixture__echo", "deny", "plan_gate"),
        ("submit_plan", "allow", "default"),
        ("mcp__fixture__echo", "allow", "default+approval:auto"),
    ]
    .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()));
    assert_eq!(fixer, expected);
    // The teammate saw the denial, then the echo.
    let transcript =
        std::fs::read_to_string(ws.join(".troupe/transcripts/fixer.jsonl")).unwrap_or_default();
    if !transcript.is_empty() {
        assert!(transcript.contains("permission_denied"), "{transcript}");
        assert!(transcript.contains("echo: from fixer"), "{transcript}");
    }
}

#[test]
fn a_server_that_does_not_start_is_reported_once_and_the_run_goes_on() {
    let (_dir, ws) = workspace();
    std::fs::write(
        ws.join("troupe.toml"),
        format!(
            "[[mcp_servers]]\nname = \"slow\"\ncommand = \"python3\"\nargs = [{:?}, \"slow\"]\n\
             startup_timeout = 1\n",
            fixture_script().display().to_string()
        ),
    )
    .unwrap();
    std::fs::write(
        ws.join("script.json"),
        json!({"responses": [{"text": "done"}]}).to_string(),
    )
    .unwrap();
    let out = troupe_in(
        &ws,
        &[
            "run",
            "--prompt",
            "hi",
            "--model-script",
            "script.json",
            "--trust-workspace",
        ],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "done\n");
    assert_eq!(
        out.stderr
            .matches("MCP server slow is unavailable, its tools are withdrawn")
            .count(),
        1,
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("startup timeout of 1s"),
        "{}",
        out.stderr
    );
}

#[test]
fn troupe_config_lists_the_servers_without_starting_them_or_showing_env_values() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(
        ws.join("troupe.toml"),
        "[[mcp_servers]]\nname = \"gh\"\ncommand = \"/nonexistent/gh-server\"\nargs = [\"stdio\"]\n\
         env = { GITHUB_TOKEN = \"${GITHUB_TOKEN}\", MODE = \"quiet-value\" }\n\n\
         [[mcp_servers]]\nname = \"docs\"\nurl = \"http://127.0.0.1:9/mcp\"\n",
    )
    .unwrap();
    let out = troupe_in(&ws, &["config", "--json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let config: Value = serde_json::from_str(&out.stdout).unwrap();
    let servers = config["mcp_servers"].as_array().unwrap();
    assert_eq!(servers.len(), 2, "{config}");
    assert_eq!(servers[0]["name"], "gh");
    assert_eq!(servers[0]["transport"]["kind"], "stdio");
    assert_eq!(
        servers[0]["transport"]["env"],
        json!(["GITHUB_TOKEN", "MODE"])
    );
    assert_eq!(
        servers[1]["transport"],
        json!({"kind": "http", "url": "http://127.0.0.1:9/mcp"})
    );
    assert!(!out.stdout.contains("quiet-value"), "{}", out.stdout);
    let text = troupe_in(&ws, &["config"]);
    assert!(text.stdout.contains("[[mcp_servers]]"), "{}", text.stdout);
    assert!(
        text.stdout.contains("/nonexistent/gh-server stdio"),
        "{}",
        text.stdout
    );
    assert!(!ws.join(".troupe").exists());
}
