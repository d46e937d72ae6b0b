//! `troupe run --require-plans` (SPEC §6) through the real binary with a scripted model: every
//! teammate of the run is gated from its first call — its write is denied before any plan and
//! never runs — and allowed once a person approves its plan with `troupe review`.
//!
//! `--model-script` shares one script between all agents, so the scripts here are built so that
//! only one agent can be calling the model at each step (`--max-turns 1`: one model call per
//! turn), or so that whichever agent takes an entry, the entry means the same thing.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::support::{command, ran, troupe_in, Ran};

const WAIT: Duration = Duration::from_secs(30);

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

fn write_script(ws: &Path, file: &str, responses: Value) -> String {
    let path = ws.join(file);
    std::fs::write(&path, json!({ "responses": responses }).to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

fn tool(name: &str, arguments: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": arguments}]})
}

fn run_args<'a>(script: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--prompt",
        "Get out.txt written by a teammate.",
        "--model-script",
        script,
        "--max-turns",
        "1",
        "--approval",
        "auto",
    ];
    args.extend_from_slice(extra);
    args
}

/// `(tool, decision, rule, reason)` of every audit line of `agent`.
fn audit_of(ws: &Path, agent: &str) -> Vec<(String, String, String, String)> {
    std::fs::read_to_string(ws.join(".troupe/audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["agent"] == agent)
        .map(|l| {
            let s = |key: &str| l[key].as_str().unwrap().to_owned();
            (s("tool"), s("decision"), s("rule"), s("reason"))
        })
        .collect()
}

/// Lead: spawn `writer` (no plan_required); writer: write at once; lead: answer its result.
fn spawn_and_write_script(ws: &Path) -> String {
    write_script(
        ws,
        "spawn.json",
        json!([
            tool("spawn_teammate", json!({"name": "writer", "role": "writer",
                                          "prompt": "Write out.txt."})),
            tool("write_file", json!({"path": "out.txt", "content": "early"})),
            {"text": "done"},
        ]),
    )
}

#[test]
fn without_the_flag_a_teammate_that_never_plans_is_not_gated() {
    let (_dir, ws) = workspace();
    let script = spawn_and_write_script(&ws);
    let out = troupe_in(&ws, &run_args(&script, &[]));
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "early"
    );
}

#[test]
fn require_plans_gates_a_teammate_from_its_first_call_until_its_plan_is_approved() {
    let (_dir, ws) = workspace();

    // Run 1: the writer's first call is a write, before any plan: denied, never run.
    let script = spawn_and_write_script(&ws);
    let out = troupe_in(&ws, &run_args(&script, &["--require-plans"]));
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "done\n");
    assert!(!ws.join("out.txt").exists(), "the denied write never ran");
    let denied = audit_of(&ws, "writer");
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(
        (
            denied[0].0.as_str(),
            denied[0].1.as_str(),
            denied[0].2.as_str()
        ),
        ("write_file", "deny", "plan_gate")
    );
    assert!(
        denied[0].3.starts_with(
            "no plan approved yet; submit_plan first (this run requires a plan of every \
             teammate (--require-plans)"
        ),
        "{denied:?}"
    );
    // The run's rule is not recorded as the teammate's own.
    let status: Value =
        serde_json::from_str(&troupe_in(&ws, &["status", "--json"]).stdout).unwrap();
    assert_eq!(status["teammates"][0]["plan_required"], false);

    // Run 2: the lead asks for a plan; the writer submits one; a person approves it with
    // `troupe review`; the writer writes. After the plan is submitted, every entry left is the
    // same write, whichever agent takes it (the lead's own write is not gated either).
    let write = tool(
        "write_file",
        json!({"path": "out.txt", "content": "approved"}),
    );
    let script = write_script(
        &ws,
        "plan.json",
        json!([
            tool(
                "send_message",
                json!({"to": "writer", "content": "Submit a plan first."})
            ),
            tool("submit_plan", json!({"plan": "Write out.txt."})),
            write,
            write,
            write,
            write,
            write,
            write,
            write,
            write,
        ]),
    );
    let mut child = command(&ws)
        .args(run_args(&script, &["--require-plans"]))
        .args(["--workspace", ws.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let request_id = plan_request_id(&mut child);
    let reviewed = troupe_in(&ws, &["review", &request_id, "--approve"]);
    assert_eq!(reviewed.code, 0, "{reviewed:#?}");
    let out = wait(child);
    // The lead's last turn is a tool call cut by --max-turns 1: no final answer text.
    assert!(matches!(out.code, 0 | 3), "{out:#?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "approved"
    );
    // After run 1's denial: the plan, then the write, allowed under the normal policy.
    let writer: Vec<(String, String, String)> = audit_of(&ws, "writer")
        .into_iter()
        .skip(1)
        .map(|(tool, decision, rule, _)| (tool, decision, rule))
        .collect();
    let expected = [
        ("submit_plan", "allow", "default"),
        ("write_file", "allow", "default+approval:auto"),
    ]
    .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()));
    assert_eq!(writer, expected);
}

/// Reads the run's stderr until it reports the writer's plan request; returns its id. The rest
/// of stderr keeps being drained in the background so the run never blocks on a full pipe.
pub(super) fn plan_request_id(child: &mut Child) -> String {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = match rx.recv_timeout(left) {
            Ok(line) => line,
            Err(e) => {
                let _ = child.kill();
                panic!("no plan request reported on stderr: {e}");
            }
        };
        if line.contains("plan_approval request") {
            if let Some(id) = line
                .split_whitespace()
                .map(|t| t.trim_matches(|c| c == '(' || c == ')'))
                // The run's lines show the short id a person types (the id's last 8 hex digits).
                .find(|t| super::support::is_short_request_id(t))
            {
                return id.to_owned();
            }
        }
    }
}

/// Waits for the run to end (killing it after [`WAIT`]).
pub(super) fn wait(mut child: Child) -> Ran {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut stdout = String::new();
        if let Some(mut out) = child.stdout.take() {
            let _ = std::io::Read::read_to_string(&mut out, &mut stdout);
        }
        let _ = tx.send(child.wait_with_output().map(|o| (o, stdout)));
    });
    match rx.recv_timeout(WAIT) {
        Ok(Ok((output, stdout))) => {
            let mut ran = ran(output);
            ran.stdout = stdout;
            ran
        }
        Ok(Err(e)) => panic!("waiting for troupe run: {e}"),
        Err(_) => {
            // SAFETY: kill(2) on the pid of the child this test started.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("troupe run did not end");
        }
    }
}
