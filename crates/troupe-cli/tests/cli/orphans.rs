//! A background job whose `troupe run` is killed (SIGKILL: no chance to close) keeps running in
//! its own process group; the next `troupe run` on the workspace stops that group and records
//! the job `cancelled`. Real processes throughout.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use super::support::command;

/// Waits (bounded) for a process to exit, through a pidfd, zombie or not.
fn exits_within(pid: i32, timeout: Duration) -> bool {
    // SAFETY: plain syscalls on values we own.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as i32;
        if fd < 0 {
            return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        }
        let deadline = std::time::Instant::now() + timeout;
        let exited = loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            match libc::poll(&mut pfd, 1, left.as_millis() as i32) {
                1 => break true,
                -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
                }
                _ => break false,
            }
        };
        libc::close(fd);
        exited
    }
}

#[test]
fn the_next_run_stops_a_job_a_killed_run_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let fifo = ws.join("ready.fifo");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let first = ws.join("first.json");
    std::fs::write(
        &first,
        json!({"responses": [
            {"tool_calls": [{"name": "shell", "arguments": {
                // The note naming the group is written just after the spawn; the job waits for
                // it before saying it runs, so the kill below never lands in between.
                "command": "sleep 1000 & echo $! > grandchild.pid; \
                            until ls .troupe/jobs/*.process >/dev/null 2>&1; do sleep 0.01; done; \
                            echo go > ready.fifo; wait",
                "run_in_background": true}}]},
            {"text": "started"}
        ]})
        .to_string(),
    )
    .unwrap();
    let second = ws.join("second.json");
    std::fs::write(&second, json!({"responses": [{"text": "ok"}]}).to_string()).unwrap();
    let ws_arg = ws.to_str().unwrap();

    // The first run starts the job and waits for it (a running job keeps the run alive).
    let mut run = command(&ws)
        .args([
            "run",
            "--workspace",
            ws_arg,
            "--approval",
            "auto",
            "--prompt",
            "go",
        ])
        .args(["--model-script", first.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(std::fs::read_to_string(&fifo).unwrap(), "go\n");
    run.kill().unwrap(); // SIGKILL: troupe cannot close anything
    run.wait().unwrap();
    let grandchild: i32 = std::fs::read_to_string(ws.join("grandchild.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !exits_within(grandchild, Duration::from_millis(50)),
        "the job outlived its run"
    );

    // The next run settles it.
    let out = command(&ws)
        .args([
            "run",
            "--workspace",
            ws_arg,
            "--approval",
            "auto",
            "--prompt",
            "again",
        ])
        .args(["--model-script", second.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        exits_within(grandchild, Duration::from_secs(10)),
        "the orphaned job was not stopped"
    );
    let records: Vec<Value> = std::fs::read_dir(ws.join(".troupe/jobs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["status"], "cancelled");
    let tail = records[0]["output_tail"].as_str().unwrap();
    assert!(tail.contains("was terminated"), "{tail}");
    // The note naming the group is gone with the job.
    let notes = std::fs::read_dir(ws.join(".troupe/jobs"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "process")
        })
        .count();
    assert_eq!(notes, 0);
}
