//! Settings rules and the run's start notice, through the binary with no terminal:
//!
//! - a trusted workspace's `allow` rules decide under `--approval deny` and `ask` without a
//!   terminal (SPEC §7: how CI allows one command and nothing else); an untrusted one's never
//!   apply (the run is refused before anything exists);
//! - a rule naming no known tool is exit 2 naming the file, line and nearest tool name, for
//!   `troupe run` and `troupe config`; a configured MCP server's tools may be named;
//! - the notice of `--approval ask` without a terminal says what `[approvals] no_terminal`
//!   makes of an ask: denied at once, or waiting for `troupe approve`/`deny` or the page.
//!
//! Every test has its own config folder (trust records) and home.

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{json, Value};

use super::support::{command, ran, Ran};

struct Place {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    xdg: PathBuf,
    home: PathBuf,
}

fn place(settings: &str) -> Place {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let [ws, xdg, home] = ["ws", "xdg", "home"].map(|d| root.join(d));
    for d in [&ws, &xdg, &home] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(ws.join("troupe.toml"), settings).unwrap();
    Place {
        _dir: dir,
        root,
        ws,
        xdg,
        home,
    }
}

impl Place {
    /// `troupe ARGS --workspace WS`, stdin not a terminal, this place's config folder and home.
    fn troupe(&self, args: &[&str]) -> Ran {
        let mut c = command(&self.ws);
        c.args(args)
            .args(["--workspace", self.ws.to_str().unwrap()])
            .env("XDG_CONFIG_HOME", &self.xdg)
            .env("HOME", &self.home)
            .stdin(Stdio::null());
        ran(c.output().unwrap())
    }

    /// `troupe run` on a scripted model kept outside the workspace.
    fn run(&self, script: &Value, extra: &[&str]) -> Ran {
        let path = self.root.join("script.json");
        std::fs::write(&path, script.to_string()).unwrap();
        let mut args = vec!["run", "--prompt", "hello", "--no-memory"];
        args.extend(["--model-script", path.to_str().unwrap()]);
        args.extend(extra);
        self.troupe(&args)
    }

    /// The audit's (decision, rule) of every `write_file` call, in call order.
    fn writes(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(self.ws.join(".troupe/audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|a| a["tool"] == "write_file")
            .map(|a| {
                (
                    a["decision"].as_str().unwrap_or_default().to_owned(),
                    a["rule"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }
}

const ALLOW_OK: &str = "[permissions]\nallow = [\"write_file(ok/**)\"]\n";

fn writes_ok_and_no() -> Value {
    let write = |path: &str| json!({"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": "x"}}]});
    json!({"responses": [write("ok/a.txt"), write("no.txt"), {"text": "finished"}]})
}

#[test]
fn a_trusted_workspaces_allow_rule_decides_under_approval_deny_and_ask_without_a_terminal() {
    let p = place(ALLOW_OK);
    let out = p.run(
        &writes_ok_and_no(),
        &["--approval", "deny", "--trust-workspace"],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        std::fs::read_to_string(p.ws.join("ok/a.txt")).unwrap(),
        "x",
        "{out:#?}"
    );
    assert!(!p.ws.join("no.txt").exists(), "{out:#?}");
    assert!(!out.stderr.contains("left out"), "{out:#?}");
    let writes = p.writes();
    assert_eq!(writes.len(), 2, "{writes:#?}");
    assert_eq!(writes[0].0, "allow", "{writes:#?}");
    assert!(writes[0].1.contains("allow[0]"), "{writes:#?}");
    assert_eq!(
        (writes[1].0.as_str(), writes[1].1.as_str()),
        ("deny", "default+approval:deny"),
        "{writes:#?}"
    );

    // Trusted by the person's record, `--approval ask` with no terminal: the same.
    std::fs::remove_dir_all(p.ws.join("ok")).unwrap();
    let out = p.troupe(&["trust", "--yes"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let out = p.run(&writes_ok_and_no(), &["--approval", "ask"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(p.ws.join("ok/a.txt").exists(), "{out:#?}");
    assert!(!p.ws.join("no.txt").exists(), "{out:#?}");
}

#[test]
fn an_untrusted_workspaces_allow_rule_never_applies() {
    let p = place(ALLOW_OK);
    for approval in ["deny", "ask"] {
        let out = p.run(&writes_ok_and_no(), &["--approval", approval]);
        assert_eq!(out.code, 2, "{out:#?}");
        assert!(out.stderr.contains("[workspace_untrusted]"), "{out:#?}");
        assert!(!p.ws.join("ok/a.txt").exists(), "{out:#?}");
        assert!(!p.ws.join("no.txt").exists(), "{out:#?}");
        assert!(!p.ws.join(".troupe").exists(), "{out:#?}");
    }
}

#[test]
fn a_rule_naming_no_known_tool_is_refused_with_its_line_and_the_nearest_name() {
    let p = place("# rules\n[permissions]\nask = [\"shell\"]\ndeny = [\n  \"wirte_file\",\n]\n");
    for out in [
        p.run(&json!({"responses": [{"text": "hi"}]}), &[]),
        p.troupe(&["config"]),
    ] {
        assert_eq!(out.code, 2, "{out:#?}");
        assert!(out.stdout.is_empty(), "{out:#?}");
        assert!(out.stderr.contains("troupe.toml:5:"), "{out:#?}");
        assert!(out.stderr.contains("\"wirte_file\""), "{out:#?}");
        assert!(out.stderr.contains("did you mean write_file?"), "{out:#?}");
        assert!(out.stderr.contains("[settings_invalid]"), "{out:#?}");
        assert!(!p.ws.join(".troupe").exists(), "nothing ran: {out:#?}");
    }

    // Spelled right, it runs.
    let p = place("[permissions]\ndeny = [\"write_file\", \"edit_file(src/**)\", \"review_permission\", \"submit_plan\"]\n");
    let out = p.run(&json!({"responses": [{"text": "hi"}]}), &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "hi\n", "{out:#?}");
}

#[test]
fn a_rule_may_name_a_configured_mcp_servers_tools_only() {
    let server = "[[mcp_servers]]\nname = \"my-time\"\ncommand = \"time-server\"\n";
    let p = place(&format!(
        "[permissions]\ndeny = [\"mcp__my_time__get_current_time\"]\n\n{server}"
    ));
    let out = p.troupe(&["config"]);
    assert_eq!(out.code, 0, "{out:#?}");

    let p = place(&format!(
        "[permissions]\nask = [\"shell\", \"mcp__my_tme__get_current_time\"]\n\n{server}"
    ));
    let out = p.troupe(&["config"]);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("troupe.toml:2:"), "{out:#?}");
    assert!(out.stderr.contains("mcp__my_time__<tool>"), "{out:#?}");

    let p = place("[permissions]\nallow = [\"mcp__time__now\"]\n");
    let out = p.troupe(&["config"]);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("no [[mcp_servers]]"), "{out:#?}");
}

#[test]
fn the_no_terminal_notice_says_what_no_terminal_makes_of_an_ask() {
    let answer = json!({"responses": [{"text": "done"}]});
    let notice = |out: &Ran| -> String {
        assert_eq!(out.code, 0, "{out:#?}");
        out.stderr
            .lines()
            .find(|l| l.contains("no terminal to ask for approval"))
            .unwrap_or_else(|| panic!("no notice: {out:#?}"))
            .to_owned()
    };

    let p = place("[approvals]\nno_terminal = \"deny\"\n");
    let said = notice(&p.run(&answer, &[]));
    assert!(said.contains("will be denied"), "{said}");

    let p = place("[approvals]\nno_terminal = \"wait\"\nttl = \"5m\"\n");
    let said = notice(&p.run(&answer, &[]));
    assert!(!said.contains("denied"), "{said}");
    for needed in [
        "wait",
        "5m",
        "troupe approve ID",
        "troupe deny ID",
        "troupe serve",
    ] {
        assert!(said.contains(needed), "{needed:?} in {said}");
    }
}
