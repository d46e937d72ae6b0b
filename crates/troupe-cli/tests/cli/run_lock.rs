//! `troupe status` says a run is active when, and only when, the kernel's lock on
//! `.troupe/run.lock` is held — not because the file's text names a live process. Real
//! processes: a `troupe run` holding the lock, then killed with SIGKILL.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Stdio;

use serde_json::{json, Value};

use super::special_files::{mkfifo, troupe_within};
use super::support::command;

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

fn run_view(ws: &std::path::Path) -> Value {
    let ran = troupe_within(ws, &["status", "--json"]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    let status: Value = serde_json::from_str(&ran.stdout).unwrap();
    status["run"].clone()
}

#[test]
fn a_run_lock_naming_a_live_process_but_held_by_no_one_is_not_an_active_run() {
    let (_dir, ws) = workspace();
    std::fs::create_dir_all(ws.join(".troupe")).unwrap();
    // This test's own process is alive; the text is all that says it runs troupe.
    let text = format!("pid {} since 2026-07-30T08:00:00.000Z", std::process::id());
    std::fs::write(ws.join(".troupe/run.lock"), &text).unwrap();
    assert_eq!(run_view(&ws), json!({"active": false, "holder": null}));
    assert_eq!(
        std::fs::read_to_string(ws.join(".troupe/run.lock")).unwrap(),
        text,
        "inspection never writes"
    );
}

#[test]
fn a_run_holding_the_lock_is_active_and_its_file_is_stale_once_it_is_killed() {
    let (_dir, ws) = workspace();
    mkfifo(&ws.join("started.fifo"));
    mkfifo(&ws.join("release.fifo"));
    let script = ws.join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [
            {"tool_calls": [{"name": "shell", "arguments": {
                "command": "echo started > started.fifo; cat release.fifo"}}]},
            {"text": "done"}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut run = command(&ws)
        .args(["run", "--approval", "auto", "--prompt", "go", "--workspace"])
        .arg(&ws)
        .arg("--model-script")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The run holds its lock from before the lead's first model call until it closes, so it
    // holds it while its shell call waits here.
    assert_eq!(
        std::fs::read_to_string(ws.join("started.fifo")).unwrap(),
        "started\n"
    );
    let view = run_view(&ws);
    assert_eq!(view["active"], true, "{view}");
    let holder = view["holder"].as_str().unwrap();
    assert!(
        holder.starts_with(&format!("pid {} since ", run.id())),
        "{holder}"
    );

    run.kill().unwrap(); // SIGKILL: the file keeps the dead run's words
    run.wait().unwrap();
    assert_eq!(run_view(&ws), json!({"active": false, "holder": null}));
    let left = std::fs::read_to_string(ws.join(".troupe/run.lock")).unwrap();
    assert!(left.starts_with(&format!("pid {} ", run.id())), "{left}");

    // Let the orphaned shell command end.
    if let Ok(mut release) = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(ws.join("release.fifo"))
    {
        let _ = release.write_all(b"");
    }
}
