//! Approvals as requests (SPEC §13) through the real binaries: a run whose call waits for a
//! person is answered by `troupe approve` / `troupe deny` from other processes — one answer wins,
//! every other is refused naming it; a prompt on a real pseudo-terminal gives way when another
//! process answers first; and a teammate in a `troupe worker` process is answered from the
//! lead's host through the team's database.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use serde_json::{json, Value};
use troupe::store::postgres::testing::TestDb;

use super::shared_team::WorkerProcess;
use super::support::{command, troupe_in, wait_for_event, Ran};
use super::terminal::on_typed_terminal;

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

/// The lead writes NOTES.md, then says what it was told.
fn writing_script(ws: &Path) -> PathBuf {
    let script = json!({"agents": {"lead": [
        {"tool_calls": [{"name": "write_file",
                         "arguments": {"path": "NOTES.md", "content": "hello\n"}}]},
        {"text": "All done."}
    ]}});
    let path = ws.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    path
}

/// `troupe run` on `ws` asking a person (`--approval ask`), with no terminal: the workspace's
/// `[approvals] no_terminal = "wait"` makes its ask wait for an answer from elsewhere.
fn waiting_run(ws: &Path) -> Child {
    std::fs::write(
        ws.join("troupe.toml"),
        "[approvals]\nno_terminal = \"wait\"\n",
    )
    .unwrap();
    // The event stream's folder, for the test to watch from the start.
    std::fs::create_dir(ws.join(".troupe")).unwrap();
    let script = writing_script(ws);
    command(ws)
        .args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .args(["--model-script", script.to_str().unwrap()])
        .args(["--approval", "ask", "--sandbox", "off", "--no-memory"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The id of the permission request the run registered (waiting on the event stream).
fn requested(ws: &Path) -> String {
    let event = wait_for_event(ws, "a permission request", |e| {
        e.kind == "permission_requested"
    });
    event.fields["request_id"].as_str().unwrap().to_owned()
}

fn audit_of(ws: &Path, tool: &str) -> Value {
    std::fs::read_to_string(ws.join(".troupe/audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["tool"] == tool)
        .unwrap_or_else(|| panic!("no audit line for {tool}"))
}

fn finished(child: Child) -> Ran {
    super::plans::wait(child)
}

#[test]
fn a_second_terminal_approves_a_waiting_call_and_a_later_answer_is_refused() {
    let (_dir, ws) = workspace();
    let run = waiting_run(&ws);
    let id = requested(&ws);
    // Listed beside the other kinds, and counted by status, while it waits.
    let listed = troupe_in(&ws, &["requests", "--status", "pending", "--json"]);
    assert_eq!(listed.code, 0, "{listed:#?}");
    let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
    let requests = listed["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 1, "{listed}");
    assert_eq!(requests[0]["kind"], "permission");
    assert_eq!(requests[0]["sender"], "lead");
    assert_eq!(requests[0]["target"], "user");
    let status = troupe_in(&ws, &["status"]);
    assert!(
        status
            .stdout
            .contains("1 call waiting for approval: troupe approve ID or troupe deny ID"),
        "{status:#?}"
    );
    assert!(
        status.stdout.contains("write_file: NOTES.md"),
        "{status:#?}"
    );

    let approved = troupe_in(&ws, &["approve", &id[..8]]);
    assert_eq!(approved.code, 0, "{approved:#?}");
    assert!(
        approved.stdout.starts_with(&format!(
            "approved permission request {id} of lead (write_file: NOTES.md)"
        )),
        "{approved:#?}"
    );
    let late = troupe_in(&ws, &["deny", &id, "--reason", "changed my mind"]);
    assert_eq!(late.code, 1, "{late:#?}");
    assert!(
        late.stderr.contains("already answered (approved)"),
        "{late:#?}"
    );
    assert!(late.stderr.contains("[protocol_state_error]"), "{late:#?}");

    let out = finished(run);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "All done.\n");
    assert_eq!(
        std::fs::read_to_string(ws.join("NOTES.md")).unwrap(),
        "hello\n"
    );
    let line = audit_of(&ws, "write_file");
    assert_eq!(line["decision"], "allow");
    assert_eq!(line["rule"], "default+approval:cli");
    assert!(
        line["reason"]
            .as_str()
            .unwrap()
            .starts_with("approved with cli (pid "),
        "{line}"
    );
}

#[test]
fn two_processes_answering_at_once_exactly_one_wins() {
    let (_dir, ws) = workspace();
    let run = waiting_run(&ws);
    let id = requested(&ws);
    let spawn = |args: &[&str]| {
        command(&ws)
            .args(args)
            .args(["--workspace", ws.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let answerers: Vec<Child> = (0..6)
        .map(|i| {
            if i % 2 == 0 {
                spawn(&["approve", &id])
            } else {
                spawn(&["deny", &id, "--reason", "no"])
            }
        })
        .collect();
    let results: Vec<Ran> = answerers
        .into_iter()
        .map(|c| super::support::ran(c.wait_with_output().unwrap()))
        .collect();
    let won: Vec<&Ran> = results.iter().filter(|r| r.code == 0).collect();
    assert_eq!(won.len(), 1, "{results:#?}");
    for lost in results.iter().filter(|r| r.code != 0) {
        assert!(lost.stderr.contains("already answered"), "{lost:#?}");
    }
    let approved = won[0].stdout.starts_with("approved");
    let out = finished(run);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(ws.join("NOTES.md").exists(), approved);
    let line = audit_of(&ws, "write_file");
    assert_eq!(line["decision"], if approved { "allow" } else { "deny" });
    assert_eq!(line["rule"], "default+approval:cli");
}

#[test]
fn the_prompt_on_the_terminal_gives_way_to_an_answer_from_another_terminal() {
    let (_dir, ws) = workspace();
    let script = writing_script(&ws);
    let mut c = command(&ws);
    c.args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .args(["--model-script", script.to_str().unwrap()])
        .args(["--sandbox", "off", "--no-memory"]);
    let (mut child, mut typed, text) = on_typed_terminal(c);
    let shown = text.wait_until("the prompt", |t, _| t.contains("/N] "));
    assert!(shown.contains("would change:"), "{shown}");
    assert!(shown.contains("+hello"), "{shown}");
    let id = requested(&ws);
    let denied = troupe_in(&ws, &["deny", &id, "--reason", "use docs/NOTES.md instead"]);
    assert_eq!(denied.code, 0, "{denied:#?}");
    let said = text.wait_until("the prompt withdrawn", |t, _| {
        t.contains("was answered elsewhere (cli): denied")
    });
    assert!(said.contains(&id), "{said}");
    // A line typed now is not taken for the withdrawn prompt.
    typed.write_all(b"y\n").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(!ws.join("NOTES.md").exists());
    let line = audit_of(&ws, "write_file");
    assert_eq!(line["decision"], "deny");
    assert_eq!(line["rule"], "default+approval:cli");
    assert!(
        line["reason"]
            .as_str()
            .unwrap()
            .ends_with(": use docs/NOTES.md instead"),
        "{line}"
    );
}

#[test]
fn approve_refuses_unknown_ambiguous_and_non_permission_ids_clearly() {
    let (_dir, ws) = workspace();
    let unknown = troupe_in(&ws, &["approve", "0123456789abcdef"]);
    assert_ne!(unknown.code, 0, "{unknown:#?}");
    assert!(unknown.stderr.starts_with("troupe: "), "{unknown:#?}");
    let short = troupe_in(&ws, &["deny", "01"]);
    assert_eq!(short.code, 2, "{short:#?}");
    let both = troupe_in(&ws, &["approve", "x", "--always", "--save"]);
    assert_eq!(both.code, 2, "{both:#?}");
}

#[test]
fn a_teammate_in_a_worker_process_is_answered_from_the_lead_s_host() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let (lead_dir, worker_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let lead_ws = std::fs::canonicalize(lead_dir.path()).unwrap();
    let worker_ws = std::fs::canonicalize(worker_dir.path()).unwrap();
    let tool = |name: &str, arguments: Value| json!({"tool_calls": [{"name": name, "arguments": arguments}]});
    let text = |t: &str| json!({"text": t});
    let script = json!({"agents": {
        "lead": [
            tool("spawn_teammate", json!({
                "name": "writer", "role": "writer", "prompt": "Write out.txt."})),
            text("done"), text("done"), text("done"), text("done")
        ],
        "writer": [
            tool("write_file", json!({"path": "out.txt", "content": "approved"})),
            text("wrote out.txt")
        ]
    }});
    for ws in [&lead_ws, &worker_ws] {
        std::fs::write(ws.join("script.json"), script.to_string()).unwrap();
    }
    let mut c = command(&worker_ws);
    c.args([
        "worker",
        "--workspace",
        worker_ws.to_str().unwrap(),
        "--store",
        &url,
    ])
    .args(["--approval", "ask", "--sandbox", "off", "--no-memory"])
    .args([
        "--model-script",
        worker_ws.join("script.json").to_str().unwrap(),
    ])
    .stdin(Stdio::null());
    let worker = WorkerProcess::from_command(c);
    let mut lead = command(&lead_ws);
    lead.args([
        "run",
        "--workspace",
        lead_ws.to_str().unwrap(),
        "--prompt",
        "go",
    ])
    .args(["--approval", "auto", "--sandbox", "off", "--no-memory"])
    .args([
        "--model-script",
        lead_ws.join("script.json").to_str().unwrap(),
    ])
    .args(["--store", &url, "--no-local-workers"])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let child = lead.spawn().unwrap();
    // The writer's ask, registered in the worker's process, which has no terminal: it waits.
    let line = worker.wait_for("waits for approval");
    let id = line
        .split(|c: char| c.is_whitespace() || c == ';' || c == '(' || c == ')')
        // The run's lines show the short id a person types (the id's last 8 hex digits).
        .find(|t| super::support::is_short_request_id(t))
        .unwrap_or_else(|| panic!("no request id in {line:?}"))
        .to_owned();
    // From the lead's host, through the database.
    let listed = troupe_in(
        &lead_ws,
        &["requests", "--status", "pending", "--json", "--store", &url],
    );
    assert!(listed.stdout.contains(&id), "{listed:#?}");
    let approved = troupe_in(&lead_ws, &["approve", &id, "--store", &url]);
    assert_eq!(approved.code, 0, "{approved:#?}\nworker: {}", worker.log());
    let out = finished(child);
    assert_eq!(out.code, 0, "{out:#?}\nworker: {}", worker.log());
    assert_eq!(
        std::fs::read_to_string(worker_ws.join("out.txt")).unwrap(),
        "approved"
    );
    let line = audit_of(&worker_ws, "write_file");
    assert_eq!(line["decision"], "allow");
    assert_eq!(line["rule"], "default+approval:cli");
    assert_eq!(worker.stop(), 0);
}
