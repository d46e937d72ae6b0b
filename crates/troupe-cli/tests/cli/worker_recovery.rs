//! A shared team's workers after faults and at rest, with real PostgreSQL and real `troupe
//! worker` processes on scripted models:
//!
//! - a worker SIGKILLed while its teammate holds a task claim: the teammate is taken over by the
//!   other worker within its lease, and the dead incarnation's claim comes back to the board at
//!   the takeover (not when the board's five-minute lease runs out), so the task is completed
//!   exactly once within the teammate lease plus 2 s;
//! - an idle teammate in a worker: the worker's takeover looks find nothing to do and change no
//!   status (no `teammate_status` events while nothing changes);
//! - a lead that runs its teammates itself, starting while an earlier run's lease on one is
//!   still live: it takes the teammate over once the lease runs out, as a worker does, and the
//!   run ends (it used to wait for that teammate for ever).
//!
//! Skipped (with a notice) where no PostgreSQL can be reached.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::store::events::read;
use troupe::store::postgres::testing::TestDb;
use troupe::store::tasks::{Task, TaskBoard, TaskStatus};

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
        Self::start_as(ws, url, script, lease, true)
    }

    /// With `local_workers`, the lead's process runs the teammates (`troupe run`'s default).
    fn start_as(ws: &Path, url: &str, script: &Value, lease: &str, no_local: bool) -> Self {
        let script = script_in(ws, script);
        let mut c: Command = command(ws);
        c.args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
            .args(["--approval", "auto", "--sandbox", "off", "--no-memory"])
            .args(["--model-script", script.to_str().unwrap()])
            .args(["--store", url])
            .args(no_local.then_some("--no-local-workers"))
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

fn tasks_of(db: &TestDb, runtime: &tokio::runtime::Runtime) -> Vec<Task> {
    let board = troupe::store::postgres::PgTaskBoard::new(
        db.store("default"),
        Arc::new(troupe::clock::SystemClock),
        Arc::new(troupe::ids::RandomIds),
    );
    runtime.block_on(board.list()).unwrap()
}

/// Lets a shell call of a killed worker, still blocked on the FIFO `gate`, end.
fn open_gate(gate: &Path) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(mut writer) = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(gate)
    {
        let _ = writer.write_all(b"\n");
    }
}

#[test]
fn a_killed_workers_task_claim_comes_back_at_takeover_and_is_completed_once() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    const LEASE: Duration = Duration::from_secs(3);
    let lease = "3s";
    let ((_l, lead_ws), (_a, a_ws), (_b, b_ws), (_g, shared)) =
        (workspace(), workspace(), workspace(), workspace());
    let gate = shared.join("gate");
    let here = shared.join("where");
    let c = std::ffi::CString::new(gate.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path in our temp folder.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // The lead puts a task on the board and spawns alpha; alpha answers its first message,
    // takes the task and blocks in a shell call that says in which workspace it runs. The
    // worker that takes alpha over plays alpha's script from its start: its first answer
    // completes the task.
    let script = json!({"agents": {
        "lead": [
            {"tool_calls": [{"name": "create_task", "arguments": {"subject": "slow job"}}]},
            {"tool_calls": [{"name": "spawn_teammate", "arguments": {"name": "alpha", "role": "worker", "prompt": "Say ready."}}]},
            text("waiting"), text("noted"), text("noted"), text("noted"), text("noted")
        ],
        "alpha": [
            text("ready"),
            {"tool_calls": [{"name": "shell", "arguments": {"command": format!(
                "pwd > {}; read line < {}", here.display(), gate.display())}}]},
            text("finished"), text("finished")
        ]
    }});
    let a = start_worker(&a_ws, &url, &script, lease);
    let b = start_worker(&b_ws, &url, &script, lease);
    let lead = Lead::start(&lead_ws, &url, &script, lease);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let holder = wait_until(Instant::now() + Duration::from_secs(60), || {
        let written = std::fs::read_to_string(&here).ok()?;
        written
            .ends_with('\n')
            .then(|| PathBuf::from(written.trim()))
    })
    .unwrap_or_else(|| panic!("alpha never ran its task\nA: {}\nB: {}", a.log(), b.log()));
    let claimed: Vec<Task> = tasks_of(&db, &runtime);
    assert_eq!(
        claimed
            .iter()
            .map(|t| (t.subject.as_str(), t.status))
            .collect::<Vec<_>>(),
        [("slow job", TaskStatus::InProgress)]
    );
    let (dead, survivor, dead_ws, survivor_ws) = if holder == a_ws {
        (a, b, &a_ws, &b_ws)
    } else {
        assert_eq!(holder, b_ws);
        (b, a, &b_ws, &a_ws)
    };
    dead.signal(libc::SIGKILL);
    let mut dead = dead;
    dead.child.wait().unwrap();
    let killed = Instant::now();
    // Taken over within the teammate lease (plus a look), the claim settled at once: the task
    // is completed within the lease plus 2 s, plus a margin for the scripted turns.
    let bound = LEASE + Duration::from_secs(2) + Duration::from_secs(2);
    let completed = wait_until(killed + bound, || {
        tasks_of(&db, &runtime)
            .into_iter()
            .find(|t| t.status == TaskStatus::Completed)
    });
    open_gate(&gate);
    let completed = completed.unwrap_or_else(|| {
        panic!(
            "the task was not completed within {bound:?} of the kill: {:#?}\nsurvivor: {}",
            tasks_of(&db, &runtime),
            survivor.log()
        )
    });
    assert_eq!(completed.owner.as_ref().map(|o| o.as_str()), Some("alpha"));
    let returned = completed
        .returned
        .as_ref()
        .expect("the dead claim came back");
    assert!(
        returned.reason.contains("taken over"),
        "{returned:?}\nsurvivor: {}",
        survivor.log()
    );
    let (code, stderr) = lead.finish(Duration::from_secs(60));
    assert_eq!(code, 0, "{stderr}\nsurvivor: {}", survivor.log());
    // Completed exactly once, by the survivor.
    assert_eq!(events_in(dead_ws, "task_completed").len(), 0);
    assert_eq!(events_in(survivor_ws, "task_completed").len(), 1);
    assert_eq!(survivor.stop(), 0);
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

#[test]
fn a_lead_running_its_teammates_takes_over_one_an_earlier_run_left_leased() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let lease = "2s";
    let (_l, lead_ws) = workspace();
    // The first run spawns alpha, which answers; the run ends with alpha idle.
    let first = json!({"agents": {
        "lead": [
            {"tool_calls": [{"name": "spawn_teammate", "arguments": {"name": "alpha", "role": "worker", "prompt": "Say ready."}}]},
            text("waiting"), text("noted"), text("noted")
        ],
        "alpha": [text("ready"), text("ready")]
    }});
    let (code, stderr) =
        Lead::start_as(&lead_ws, &url, &first, lease, false).finish(Duration::from_secs(60));
    assert_eq!(code, 0, "{stderr}");
    // An earlier run that could not free alpha's lease (killed, or its close cut short):
    // another holder has it for two more seconds.
    db.execute(
        "UPDATE troupe_teammates SET holder = 'gone:1:00000000', \
           lease_until = clock_timestamp() + interval '2 seconds' WHERE name = 'alpha'",
    )
    .unwrap();
    // The next run sends alpha a message and is over only once alpha has answered it.
    let second = json!({"agents": {
        "lead": [
            {"tool_calls": [{"name": "send_message", "arguments": {"to": "alpha", "content": "once more"}}]},
            text("waiting"), text("noted"), text("noted"), text("noted")
        ],
        "alpha": [text("done again"), text("done again")]
    }});
    let (code, stderr) =
        Lead::start_as(&lead_ws, &url, &second, lease, false).finish(Duration::from_secs(60));
    assert_eq!(code, 0, "{stderr}");
    let answered = db
        .query_text(
            "SELECT count(*) FROM troupe_transcripts \
              WHERE agent = 'alpha' AND line LIKE '%done again%'",
        )
        .unwrap();
    assert_eq!(
        answered.as_deref(),
        Some("1"),
        "alpha answered once: {stderr}"
    );
}
