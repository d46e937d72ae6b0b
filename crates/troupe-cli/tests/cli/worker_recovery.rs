//! A shared team's workers after faults and at rest, with real PostgreSQL and real `troupe
//! worker` processes on scripted models:
//!
//! - an idle teammate in a worker: the worker's takeover looks find nothing to do and change no
//!   status (no `teammate_status` events while nothing changes).
//!
//! Skipped (with a notice) where no PostgreSQL can be reached.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::store::events::read;
use troupe::store::postgres::testing::TestDb;

use super::shared_team::WorkerProcess;
use super::support::command;

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

fn text(t: &str) -> Value {
    json!({"text": t})
}

/// Writes `script` into `ws` and returns its path.
fn script_in(ws: &Path, script: &Value) -> PathBuf {
    let path = ws.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    path
}

/// A `troupe worker` of the team at `url` on the scripted model `script`, with `lease`.
fn start_worker(ws: &Path, url: &str, script: &Value, lease: &str) -> WorkerProcess {
    let script = script_in(ws, script);
    let mut c = command(ws);
    c.args([
        "worker",
        "--workspace",
        ws.to_str().unwrap(),
        "--store",
        url,
    ])
    .args(["--approval", "auto", "--sandbox", "off", "--no-memory"])
    .args(["--model-script", script.to_str().unwrap()])
    .env("TROUPE_LEASE", lease);
    WorkerProcess::from_command(c)
}

/// The lead's `troupe run` (no local workers), killed if the test ends before it did.
struct Lead(Option<Child>);

impl Lead {
    fn start(ws: &Path, url: &str, script: &Value, lease: &str) -> Self {
        let script = script_in(ws, script);
        let mut c: Command = command(ws);
        c.args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
            .args(["--approval", "auto", "--sandbox", "off", "--no-memory"])
            .args(["--model-script", script.to_str().unwrap()])
            .args(["--store", url, "--no-local-workers"])
            .env("TROUPE_LEASE", lease)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Self(Some(c.spawn().unwrap()))
    }

    /// Its exit code and stderr, within `limit`.
    fn finish(mut self, limit: Duration) -> (i32, String) {
        let mut child = self.0.take().unwrap();
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let out = child.wait_with_output().unwrap();
                return (
                    status.code().unwrap_or(-1),
                    String::from_utf8_lossy(&out.stderr).into_owned(),
                );
            }
            assert!(Instant::now() < deadline, "the lead did not finish");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn events_in(ws: &Path, kind: &str) -> Vec<troupe::wire::Event> {
    read::read_all(&ws.join(".troupe/events.jsonl"))
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.kind == kind)
        .collect()
}

/// Polls `found` (an observable state) until it holds or `deadline` passes.
fn wait_until<T>(deadline: Instant, mut found: impl FnMut() -> Option<T>) -> Option<T> {
    loop {
        if let Some(value) = found() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_idle_teammate_in_a_worker_changes_no_status_while_nothing_changes() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    // A short lease: the worker looks for teammates to take over every 100 ms.
    let lease = "1s";
    let ((_l, lead_ws), (_w, w_ws)) = (workspace(), workspace());
    let script = json!({"agents": {
        "lead": [
            {"tool_calls": [{"name": "spawn_teammate", "arguments": {"name": "alpha", "role": "worker", "prompt": "Say ready."}}]},
            text("waiting"), text("noted"), text("noted")
        ],
        "alpha": [text("ready"), text("ready")]
    }});
    let worker = start_worker(&w_ws, &url, &script, lease);
    let lead = Lead::start(&lead_ws, &url, &script, lease);
    let (code, stderr) = lead.finish(Duration::from_secs(60));
    assert_eq!(code, 0, "{stderr}\nworker: {}", worker.log());
    let statuses = || events_in(&w_ws, "teammate_status");
    // The run is over and alpha is idle: the last status the worker wrote says so.
    let settled = wait_until(Instant::now() + Duration::from_secs(10), || {
        statuses()
            .last()
            .filter(|e| e.fields.get("status") == Some(&json!("idle")))
            .map(|_| statuses().len())
    })
    .unwrap_or_else(|| panic!("alpha never went idle: {}", worker.log()));
    // Not a synchronisation: the window under test. Thirty takeover looks happen in it.
    std::thread::sleep(Duration::from_secs(3));
    let after = statuses();
    assert_eq!(
        after.len(),
        settled,
        "status changes while idle: {:#?}",
        &after[settled..]
    );
    assert_eq!(worker.stop(), 0);
}
