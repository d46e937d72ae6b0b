//! The approval prompt's four answers through the real binary on a pseudo-terminal: `a` allows
//! the same tool and pattern for the rest of the run (the second call is not asked, and the
//! audit names the session allow), `s` saves the entry into `troupe.toml` keeping its comments,
//! `n` takes a reason that reaches the model's denial. And the sandbox's rerun: a command it
//! refused is offered to the person (`y/N` only) and rerun unconfined only on a yes.

use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

use super::support::command;
use super::terminal::on_typed_terminal;

const PROMPT_END: &str = "/N] ";

const SETTINGS: &str = "# project settings, kept as written\n[permissions]\n# filled by the prompt\nallow = [\"read_file\"]  # reads are fine\ndeny = [\"shell(rm -rf:*)\"]\n";

fn audit_lines(ws: &Path) -> Vec<Value> {
    std::fs::read_to_string(ws.join(".troupe/audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn always_save_and_no_with_a_reason_at_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(ws.join("troupe.toml"), SETTINGS).unwrap();
    let shell = |command: &str| json!({"tool_calls": [{"name": "shell", "arguments": {"command": command}}]});
    let script = json!({"agents": {"lead": [
        shell("echo hi there"),
        shell("echo hi again"),
        shell("ls -la"),
        shell("touch x"),
        {"text": "All done."}
    ]}});
    let path = ws.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let mut c = command(&ws);
    c.args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .arg("--trust-workspace")
        .args(["--model-script", path.to_str().unwrap()]);
    let (mut child, mut typed, text) = on_typed_terminal(c);
    let prompts = |n: usize| {
        text.wait_until(&format!("prompt {n}"), move |t, _| {
            t.matches(PROMPT_END).count() == n
        })
    };

    let shown = prompts(1);
    assert!(shown.contains(r#"{"command":"echo hi there"}"#), "{shown}");
    assert!(
        shown.contains("[y]es once / [a]lways allow shell(echo hi:*) this run / [s]ave shell(echo hi:*) to troupe.toml / [N]o"),
        "{shown}"
    );
    typed.write_all(b"a\n").unwrap();

    // `echo hi again` runs without a prompt: the next one is for `ls -la`.
    let shown = prompts(2);
    let second = &shown[shown.rfind("wants to run").unwrap()..];
    assert!(second.contains(r#"{"command":"ls -la"}"#), "{shown}");
    assert!(!shown.contains(r#"{"command":"echo hi again"}"#), "{shown}");
    typed.write_all(b"s\n").unwrap();
    text.wait_for("saved allow shell(ls -la:*) to ");

    let shown = prompts(3);
    let third = &shown[shown.rfind("wants to run").unwrap()..];
    assert!(third.contains(r#"{"command":"touch x"}"#), "{shown}");
    typed.write_all(b"n\n").unwrap();
    text.wait_for("Reason for the agent (optional, Enter to skip): ");
    typed.write_all(b"not today\n").unwrap();

    let all = text.wait_closed();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{all}");
    assert_eq!(all.matches(PROMPT_END).count(), 3, "{all}");

    // Saved: appended to the list, everything else byte for byte.
    assert_eq!(
        std::fs::read_to_string(ws.join("troupe.toml")).unwrap(),
        SETTINGS.replace(
            "allow = [\"read_file\"]",
            "allow = [\"read_file\", \"shell(ls -la:*)\"]"
        )
    );
    assert!(!ws.join("x").exists(), "the refused command did not run");

    let audit = audit_lines(&ws);
    let decisions: Vec<(&str, &str, &str)> = audit
        .iter()
        .filter(|r| r["tool"] == "shell")
        .map(|r| {
            (
                r["decision"].as_str().unwrap(),
                r["rule"].as_str().unwrap(),
                r["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(decisions.len(), 4, "{audit:#?}");
    assert_eq!(decisions[0].0, "allow");
    assert_eq!(decisions[0].1, "default+approval:terminal");
    assert_eq!(
        (decisions[1].0, decisions[1].1),
        ("allow", "session allow \"shell(echo hi:*)\"")
    );
    assert_eq!(
        (decisions[2].0, decisions[2].1),
        ("allow", "default+approval:terminal")
    );
    assert!(decisions[2].2.contains("saved to"), "{decisions:?}");
    assert_eq!(
        (decisions[3].0, decisions[3].2),
        ("deny", "refused at the terminal: not today")
    );

    // The model was told why.
    let events = std::fs::read_to_string(ws.join(".troupe/events.jsonl")).unwrap();
    assert!(
        events.contains("refused at the terminal: not today"),
        "{events}"
    );
}

#[test]
fn a_command_the_sandbox_refused_is_rerun_unconfined_only_when_the_person_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, tmp) = (root.join("ws"), root.join("tmp"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let shell = |command: &str| json!({"tool_calls": [{"name": "shell", "arguments": {"command": command}}]});
    let script = json!({"agents": {"lead": [
        shell("echo out > ../rerun_yes"),
        shell("echo out > ../rerun_no"),
        {"text": "All done."}
    ]}});
    let path = root.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let mut c = command(&ws);
    c.args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .arg("--trust-workspace")
        .args(["--model-script", path.to_str().unwrap()])
        .env("TMPDIR", &tmp)
        .env_remove("TROUPE_SANDBOX");
    let (mut child, mut typed, text) = on_typed_terminal(c);
    let prompts = |n: usize| {
        text.wait_until(&format!("prompt {n}"), move |t, _| {
            t.matches(PROMPT_END).count() == n
        })
    };
    // The call itself is asked first, then — once the sandbox refused it — the rerun.
    prompts(1);
    typed.write_all(b"y\n").unwrap();
    let shown = prompts(2);
    let rerun = &shown[shown.rfind("wants to run").unwrap()..];
    assert!(
        rerun.contains("rerun this command outside the sandbox? It was refused: sandbox: write outside the workspace denied"),
        "{shown}"
    );
    assert!(rerun.contains("Allow? [y/N]"), "{shown}");
    typed.write_all(b"y\n").unwrap();
    prompts(3);
    typed.write_all(b"y\n").unwrap();
    prompts(4);
    typed.write_all(b"n\n").unwrap();
    text.wait_for("Reason for the agent (optional, Enter to skip): ");
    typed.write_all(b"\n").unwrap();
    let all = text.wait_closed();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{all}");
    assert!(
        root.join("rerun_yes").exists(),
        "the approved rerun ran unconfined"
    );
    assert!(
        !root.join("rerun_no").exists(),
        "the refused rerun did not run"
    );

    let decisions: Vec<(String, String, String)> = audit_lines(&ws)
        .iter()
        .filter(|r| r["tool"] == "shell")
        .map(|r| {
            (
                r["decision"].as_str().unwrap().to_owned(),
                r["rule"].as_str().unwrap().to_owned(),
                r["sandbox"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("allow", "default+approval:terminal", "workspace-write"),
        ("allow", "sandbox-rerun+approval:terminal", "off"),
        ("allow", "default+approval:terminal", "workspace-write"),
        ("deny", "sandbox-rerun+approval:terminal", "off"),
    ]
    .map(|(d, r, s)| (d.to_owned(), r.to_owned(), s.to_owned()));
    assert_eq!(decisions, expected);
}
