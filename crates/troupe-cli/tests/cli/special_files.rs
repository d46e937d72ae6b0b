//! A FIFO (or another special file) planted where troupe keeps its own state must not hang any
//! command: every reader opens without blocking and refuses what is not a regular file, with one
//! line naming the file. Each command runs under a watchdog, so a regression fails instead of
//! hanging the test run.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use super::support::{command, failure_text, ran, Ran};

/// Far longer than any of these commands takes; only a blocked command reaches it.
const WATCHDOG: Duration = Duration::from_secs(30);

const JOB_ID: &str = "00000000-0000-4000-8000-0000000000aa";
const TASK_ID: &str = "00000000-0000-4000-8000-0000000000bb";

pub fn mkfifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "{path:?}");
}

/// Runs `troupe ARGS --workspace WS` with stdin closed, killing it (and failing the test) if it
/// has not finished within [`WATCHDOG`].
pub fn troupe_within(ws: &Path, args: &[&str]) -> Ran {
    let child = command(ws)
        .args(args)
        .args(["--workspace", ws.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let (done, finished) = mpsc::channel::<std::io::Result<Output>>();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    match finished.recv_timeout(WATCHDOG) {
        Ok(output) => ran(output.unwrap()),
        Err(_) => {
            // SAFETY: kill on the pid of our own child, which has not been reaped yet.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = finished.recv();
            panic!(
                "troupe {args:?} was still running after {WATCHDOG:?}: blocked on a special file?"
            );
        }
    }
}

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(ws.join(".troupe/mailboxes/lead/ready")).unwrap();
    // A quarantined file, so that listing the quarantine reads the journal of reasons.
    let quarantine = ws.join(".troupe/mailboxes/lead/quarantine");
    std::fs::create_dir_all(&quarantine).unwrap();
    std::fs::write(quarantine.join("x.json"), b"not json").unwrap();
    (dir, ws)
}

/// `troupe run` with a one-answer scripted model and automatic approvals.
fn run_args(ws: &Path) -> Vec<String> {
    let script = ws.join("script.json");
    std::fs::write(&script, r#"{"responses": [{"text": "done"}]}"#).unwrap();
    [
        "run",
        "--approval",
        "auto",
        "--prompt",
        "go",
        "--model-script",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([script.to_str().unwrap().to_owned()])
    .collect()
}

fn assert_refused(ran: &Ran, fifo: &Path) {
    let text = failure_text(ran, 1);
    assert!(text.contains("not a regular file (a FIFO)"), "{text}");
    assert!(text.contains(fifo.to_str().unwrap()), "{fifo:?}: {text}");
}

#[test]
fn inspection_commands_refuse_a_fifo_in_place_of_a_state_file() {
    let cases: &[(&[&str], &str)] = &[
        (&["status"], "protocol/state.json"),
        (&["status", "--json"], "protocol/archive.jsonl"),
        (&["status"], "protocol/.protocol.lock"),
        (&["status"], "team.json"),
        (&["status"], "run.lock"),
        (&["status"], &format!("jobs/{JOB_ID}.json")),
        (&["status"], &format!("tasks/{TASK_ID}.json")),
        (&["requests"], "protocol/state.json"),
        (&["requests", "--json"], "protocol/archive.jsonl"),
        (&["cron"], "cron.json"),
        (&["tasks"], &format!("tasks/{TASK_ID}.json")),
        (&["jobs", "--json"], &format!("jobs/{JOB_ID}.json")),
        (
            &["mailbox", "lead", "--state", "quarantine"],
            "mailboxes/lead/quarantine.jsonl",
        ),
    ];
    for (args, relative) in cases {
        let (_dir, ws) = workspace();
        let fifo = ws.join(".troupe").join(relative);
        mkfifo(&fifo);
        let ran = troupe_within(&ws, args);
        assert_refused(&ran, &fifo);
    }
}

#[test]
fn run_refuses_a_fifo_in_place_of_a_state_file() {
    for relative in [
        "run.lock",
        "protocol/state.json",
        "protocol/archive.jsonl",
        "protocol/.protocol.lock",
        "team.json",
        "cron.json",
        "transcripts/lead.jsonl",
        "audit.jsonl",
        &format!("jobs/{JOB_ID}.json"),
    ] {
        let (_dir, ws) = workspace();
        let fifo = ws.join(".troupe").join(relative);
        mkfifo(&fifo);
        let args = run_args(&ws);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = troupe_within(&ws, &args);
        assert_refused(&ran, &fifo);
    }
}

#[test]
fn run_leaves_alone_a_job_whose_process_note_is_a_fifo() {
    let (_dir, ws) = workspace();
    let jobs = ws.join(".troupe/jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::write(
        jobs.join(format!("{JOB_ID}.json")),
        format!(
            r#"{{"id":"{JOB_ID}","agent":"lead","command":"sleep 1000","status":"running","exit_code":null,"started_at_utc":"2026-07-30T08:00:00.000Z","finished_at_utc":null,"output_tail":null}}"#
        ),
    )
    .unwrap();
    mkfifo(&jobs.join(format!("{JOB_ID}.process")));
    let args = run_args(&ws);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = troupe_within(&ws, &args);
    assert_eq!(ran.code, 0, "{ran:#?}");
    let record: Value =
        serde_json::from_slice(&std::fs::read(jobs.join(format!("{JOB_ID}.json"))).unwrap())
            .unwrap();
    assert_eq!(record["status"], "cancelled");
    let tail = record["output_tail"].as_str().unwrap();
    assert!(tail.contains("not a regular file"), "{tail}");
}
