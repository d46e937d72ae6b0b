//! Ctrl-C on a real `troupe run` (SPEC §8): SIGINT sent to the process while it waits at an
//! approval prompt on a pseudo-terminal, while a model call hangs on a loopback server that never
//! answers, and twice while the first interrupt cannot reach a safe point. Every wait is for an
//! event (a line on stderr, an accepted connection, a lock waiter, a process exit), never a sleep.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::support::command;
// A pseudo-terminal: (the side the test types into, the side troupe reads as its stdin).
use super::terminal::pty;

/// Long enough for a slow machine; a hang is a failure, not a wait.
const WAIT: Duration = Duration::from_secs(30);

/// The child's stderr, collected by a thread; tests wait for text to appear in it.
#[derive(Clone, Default)]
struct Collected(Arc<(Mutex<String>, Condvar)>);

impl Collected {
    fn from(mut stream: impl Read + Send + 'static) -> Self {
        let collected = Self::default();
        let shared = collected.0.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stream.read(&mut buf) {
                if n == 0 {
                    break;
                }
                shared
                    .0
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
                shared.1.notify_all();
            }
        });
        collected
    }

    /// Waits until `ready(text)` holds; panics with the text so far after [`WAIT`].
    fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        let mut text = self.0 .0.lock().unwrap();
        while !ready(&text) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "timed out waiting for {what}; stderr so far:\n{text}"
            );
            text = self.0 .1.wait_timeout(text, left).unwrap().0;
        }
        text.clone()
    }
}

/// A running `troupe`, waited for on a thread so that a hang fails the test instead (and is
/// killed when the test ends, so that a failure leaves no process behind).
struct Running {
    pid: i32,
    exited: std::sync::mpsc::Receiver<i32>,
    reaped: std::cell::Cell<bool>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.reaped.get() && self.exited.try_recv().is_err() {
            // SAFETY: kill(2) on our child, which its waiter has not reaped.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}

impl Running {
    fn new(mut child: Child) -> Self {
        let pid = i32::try_from(child.id()).unwrap();
        let (tx, exited) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let status = child.wait().unwrap();
            let _ = tx.send(status.code().expect("troupe was killed by a signal"));
        });
        Self {
            pid,
            exited,
            reaped: std::cell::Cell::new(false),
        }
    }

    fn interrupt(&self) {
        // SAFETY: kill(2) on the pid of a child whose waiter is still waiting (not reaped).
        assert_eq!(unsafe { libc::kill(self.pid, libc::SIGINT) }, 0);
    }

    /// The exit code, once it exits (a failure after [`WAIT`]).
    fn exit_code(&self) -> i32 {
        let code = self
            .exited
            .recv_timeout(WAIT)
            .expect("troupe did not exit after Ctrl-C");
        self.reaped.set(true);
        code
    }
}

fn start_run(ws: &Path, args: &[&str], stdin: Stdio) -> (Running, Collected) {
    let mut child = command(ws)
        .args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Collected::from(child.stderr.take().unwrap());
    (Running::new(child), stderr)
}

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

fn folder_count(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// The end of the approval prompt, with or without the always/save choices.
const PROMPT_END: &str = "/N] ";

#[test]
fn ctrl_c_at_an_approval_prompt_closes_the_team_and_exits_130() {
    let (_dir, ws) = workspace();
    let script = ws.join("script.json");
    std::fs::write(
        &script,
        json!({"agents": {
            "lead": [
                {"tool_calls": [{"name": "shell", "arguments": {
                    "command": "exec sleep 1000", "run_in_background": true}}]},
                {"tool_calls": [{"name": "spawn_teammate", "arguments": {
                    "name": "writer", "role": "writer", "prompt": "Write out.txt."}}]},
                {"text": "Waiting for the writer."}
            ],
            "writer": [
                {"tool_calls": [{"name": "write_file", "arguments": {
                    "path": "out.txt", "content": "never"}}]},
                {"text": "wrote it"}
            ]
        }})
        .to_string(),
    )
    .unwrap();
    let (mut typed, terminal) = pty();
    let (run, stderr) = start_run(
        &ws,
        &["--model-script", script.to_str().unwrap()],
        Stdio::from(terminal),
    );

    // The lead asks to start a background job: allowed at the terminal.
    let text = stderr.wait_for("the first prompt", |t| t.contains(PROMPT_END));
    assert!(text.contains("agent lead wants to run shell"), "{text}");
    assert!(!text.contains("no terminal"), "a terminal is there: {text}");
    typed.write_all(b"y\n").unwrap();

    // The writer, holding its task message in processing/, asks to write; nobody answers.
    let text = stderr.wait_for("the writer's prompt", |t| {
        t.matches(PROMPT_END).count() == 2
    });
    assert!(
        text.contains("agent writer wants to run write_file"),
        "{text}"
    );
    let processing = ws.join(".troupe/mailboxes/writer/processing");
    assert_eq!(folder_count(&processing), 1, "the writer's task is claimed");
    let jobs_dir = ws.join(".troupe/jobs");
    let note = std::fs::read_dir(&jobs_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "process"))
        .expect("the job is running");
    let note: Value = serde_json::from_slice(&std::fs::read(note).unwrap()).unwrap();
    let pgid = i32::try_from(note["pgid"].as_i64().unwrap()).unwrap();

    run.interrupt();
    let code = run.exit_code();
    let text = stderr.wait_for("the last line", |t| t.contains("[interrupted]"));
    assert_eq!(code, 130, "{text}");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("troupe: interrupted"),
        "{text}"
    );

    // The prompt was answered "no" and audited; the write never happened.
    assert!(!ws.join("out.txt").exists());
    let audit = std::fs::read_to_string(ws.join(".troupe/audit.jsonl")).unwrap();
    let denied: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["agent"] == "writer" && e["tool"] == "write_file")
        .collect();
    assert_eq!(denied.len(), 1, "{audit}");
    assert_eq!(denied[0]["decision"], "deny");
    assert!(
        denied[0]["reason"]
            .as_str()
            .unwrap()
            .contains("interrupted"),
        "{audit}"
    );
    // The claimed message is back in ready/, nothing is left in processing/.
    assert_eq!(folder_count(&processing), 0);
    assert_eq!(folder_count(&ws.join(".troupe/mailboxes/writer/ready")), 1);
    // The job's whole process group is gone, and the job is recorded cancelled.
    // SAFETY: kill(2) with signal 0 only checks whether the group exists.
    let alive = unsafe { libc::kill(-pgid, 0) };
    assert_eq!(
        (alive, std::io::Error::last_os_error().raw_os_error()),
        (-1, Some(libc::ESRCH)),
        "the job's process group outlived the run"
    );
    let records: Vec<Value> = std::fs::read_dir(&jobs_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["status"], "cancelled");
    // The run lock is free: the next run starts.
    let status: Value =
        serde_json::from_str(&super::support::troupe_in(&ws, &["status", "--json"]).stdout)
            .unwrap();
    assert_eq!(status["run"]["active"], false);
}

#[test]
fn ctrl_c_during_a_model_call_that_never_returns_exits_130() {
    let (_dir, ws) = workspace();
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", server.local_addr().unwrap());
    let mut c = command(&ws);
    c.args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_MODEL", "m")
        .env("OPENAI_BASE_URL", &base)
        .env("TROUPE_MODEL_TIMEOUT_SECS", "600")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let stderr = Collected::from(child.stderr.take().unwrap());
    let run = Running::new(child);
    // The model call is in flight once its connection is accepted; it is never answered.
    let (_connection, _) = server.accept().unwrap();
    run.interrupt();
    let code = run.exit_code();
    let text = stderr.wait_for("the last line", |t| t.contains("[interrupted]"));
    assert_eq!(code, 130, "{text}");
}

/// Whether `/proc/locks` shows process `pid` waiting for a lock on the file with inode `inode`.
fn waits_for_lock(pid: i32, inode: u64) -> bool {
    let locks = std::fs::read_to_string("/proc/locks").unwrap();
    locks.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(1) == Some(&"->")
            && fields.get(5) == Some(&pid.to_string().as_str())
            && fields
                .get(6)
                .is_some_and(|dev_inode| dev_inode.ends_with(&format!(":{inode}")))
    })
}

/// Starts a run on `ws` whose lead calls `create_task` once, and waits until the process is
/// stuck waiting for the lock held through `lock` (inode `inode`), as the kernel's list of lock
/// waiters shows; polled, bounded.
fn run_stuck_on_lock(ws: &Path, inode: u64) -> (Running, Collected) {
    let script = ws.join("script.json");
    std::fs::write(
        &script,
        json!({"responses": [
            {"tool_calls": [{"name": "create_task", "arguments": {"subject": "blocked"}}]},
            {"text": "never reached"}
        ]})
        .to_string(),
    )
    .unwrap();
    let (run, stderr) = start_run(
        ws,
        &[
            "--approval",
            "auto",
            "--model-script",
            script.to_str().unwrap(),
        ],
        Stdio::null(),
    );
    let deadline = Instant::now() + WAIT;
    while !waits_for_lock(run.pid, inode) {
        assert!(
            Instant::now() < deadline,
            "troupe never waited for the lock"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    (run, stderr)
}

/// Creates and locks `name` under `ws/.troupe/dir`; returns the held file and its inode.
fn hold_lock(ws: &Path, dir: &str, name: &str) -> (std::fs::File, u64) {
    let dir = ws.join(".troupe").join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let lock = std::fs::File::create(dir.join(name)).unwrap();
    lock.lock().unwrap();
    let inode = std::os::unix::fs::MetadataExt::ino(&lock.metadata().unwrap());
    (lock, inode)
}

#[test]
fn ctrl_c_cancels_a_tool_call_stuck_on_a_lock_and_closes_the_team() {
    let (_dir, ws) = workspace();
    // The test holds the task board's lock, so the lead's create_task waits for it.
    let (lock, inode) = hold_lock(&ws, "tasks", ".tasks.lock");
    let (run, stderr) = run_stuck_on_lock(&ws, inode);

    run.interrupt();
    // Still holding the lock: the stuck call was given up, not waited for.
    let code = run.exit_code();
    let text = stderr.wait_for("the last line", |t| t.contains("[interrupted]"));
    assert_eq!(code, 130, "{text}");
    assert!(
        text.contains("create_task was cancelled: the agent is stopping"),
        "{text}"
    );
    assert!(!text.contains("exiting at once"), "{text}");
    assert_eq!(
        folder_count(&ws.join(".troupe/mailboxes/lead/processing")),
        0,
        "{text}"
    );
    drop(lock);
}

#[test]
fn a_second_ctrl_c_exits_at_once_while_the_first_cannot_reach_a_safe_point() {
    let (_dir, ws) = workspace();
    // The test holds the protocol store's lock, which the team needs while it is being built
    // (answers recorded by an earlier run are delivered first): no safe point is reached before
    // the lock is free, and nothing there can be cancelled.
    let (lock, inode) = hold_lock(&ws, "protocol", ".protocol.lock");
    let (run, stderr) = run_stuck_on_lock(&ws, inode);

    run.interrupt();
    stderr.wait_for("the first interrupt", |t| t.contains("closing the team"));
    run.interrupt();
    // Still holding the lock: the exit cannot have waited for the stuck start.
    let code = run.exit_code();
    let text = stderr.wait_for("the last line", |t| t.contains("exiting at once"));
    assert_eq!(code, 130, "{text}");
    drop(lock);
}

/// Whether process `pid` is gone (a zombie counts as gone: it runs nothing).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn a_second_ctrl_c_leaves_no_hook_running() {
    let (_dir, ws) = workspace();
    // The hook records its pid (exec keeps it) and holds the run before any model call, for
    // far longer than the test waits: a hook that is not killed outlives the wait below. The
    // pid is read as soon as it is written, while troupe may still be returning from the
    // spawn: the interrupts race the hook's registration (which a kill must wait for).
    std::fs::write(
        ws.join("troupe.toml"),
        "[[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"echo $$ > hook.pid && exec sleep 600\"\n",
    )
    .unwrap();
    let script = ws.join("script.json");
    std::fs::write(&script, r#"{"responses": [{"text": "done"}]}"#).unwrap();
    let (run, stderr) = start_run(
        &ws,
        &[
            "--trust-workspace",
            "--model-script",
            script.to_str().unwrap(),
        ],
        Stdio::null(),
    );
    let deadline = std::time::Instant::now() + WAIT;
    let pid = loop {
        let text = std::fs::read_to_string(ws.join("hook.pid")).unwrap_or_default();
        if let Ok(pid) = text.trim().parse::<i32>() {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the hook never started"
        );
        std::thread::yield_now();
    };
    run.interrupt();
    stderr.wait_for("the first interrupt", |t| t.contains("closing the team"));
    run.interrupt();
    assert_eq!(run.exit_code(), 130);
    let deadline = std::time::Instant::now() + WAIT;
    while !gone(pid) {
        if std::time::Instant::now() >= deadline {
            // SAFETY: kill(2) on the hook troupe left behind, so that the failure leaves none.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the hook's process {pid} outlived troupe");
        }
        std::thread::yield_now();
    }
}
