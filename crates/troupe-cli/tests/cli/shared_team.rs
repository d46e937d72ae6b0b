//! A team across processes on PostgreSQL: the lead in one `troupe run` (no local workers), the
//! writer in a `troupe worker` with another workspace folder, one database. The demo's whole
//! flow — spawn with plan_required, the write denied while the plan is pending, approval, the
//! write, the report, shutdown — through the real binaries, against one streaming model mock.
//! Skipped (with a notice) where no PostgreSQL can be reached.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use pretty_assertions::assert_eq;
use serde_json::Value;
use troupe::store::postgres::testing::TestDb;

use super::sse_server::SseServer;
use super::support::{command, json, troupe_in};

pub const MODEL_ENV: [(&str, &str); 2] = [
    ("OPENAI_API_KEY", "sk-shared-team-0123456789"),
    ("OPENAI_MODEL", "gpt-stream"),
];

/// A `troupe worker` child; its stderr is read until it says it runs (no sleeping), then
/// drained on a thread into the returned log.
pub struct WorkerProcess {
    pub child: Child,
    pub log: std::sync::Arc<std::sync::Mutex<String>>,
    /// Every later stderr line, as it comes.
    pub lines: std::sync::mpsc::Receiver<String>,
}

impl WorkerProcess {
    pub fn start(ws: &std::path::Path, url: &str, base_url: &str) -> Self {
        Self::start_with(ws, url, base_url, &[])
    }

    pub fn start_with(
        ws: &std::path::Path,
        url: &str,
        base_url: &str,
        env: &[(&str, &str)],
    ) -> Self {
        Self::from_command(Self::command(ws, url, base_url, env))
    }

    fn command(
        ws: &std::path::Path,
        url: &str,
        base_url: &str,
        env: &[(&str, &str)],
    ) -> std::process::Command {
        let mut c = command(ws);
        c.args([
            "worker",
            "--workspace",
            ws.to_str().unwrap(),
            "--store",
            url,
            "--approval",
            "auto",
            "--sandbox",
            "off",
            "--no-memory",
        ])
        .env("OPENAI_BASE_URL", base_url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        for (k, v) in MODEL_ENV.iter().chain(env) {
            c.env(k, v);
        }
        c
    }

    /// Starts `c` (a `troupe worker` command) and reads its stderr until it runs.
    pub fn from_command(mut c: std::process::Command) -> Self {
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap());
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        loop {
            let mut line = String::new();
            assert_ne!(
                lines.read_line(&mut line).unwrap(),
                0,
                "the worker ended before it ran: {}",
                log.lock().unwrap()
            );
            log.lock().unwrap().push_str(&line);
            if line.contains("is running") {
                break;
            }
        }
        let drained = log.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in lines.lines() {
                let Ok(line) = line else { break };
                drained.lock().unwrap().push_str(&line);
                drained.lock().unwrap().push('\n');
                let _ = tx.send(line);
            }
        });
        Self {
            child,
            log,
            lines: rx,
        }
    }

    /// SIGTERM, then its exit code.
    pub fn stop(mut self) -> i32 {
        self.signal(libc::SIGTERM);
        self.child.wait().unwrap().code().unwrap_or(-1)
    }

    pub fn signal(&self, signal: i32) {
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The first later stderr line that contains `needle` (a minute at most).
    pub fn wait_for(&self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("the worker never said {needle:?} ({e}): {}", self.log()),
            }
        }
    }
}

/// A test that fails must not leave its worker running.
impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The writer's audit lines in the workspace `ws` (none when there is no audit log).
pub fn writer_audit_lines(ws: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(ws.join(".troupe/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["agent"] == "writer")
        .collect()
}

/// The writer's audit as (tool, decision).
pub fn writer_audit(ws: &std::path::Path) -> Vec<(String, String)> {
    writer_audit_lines(ws)
        .iter()
        .map(|l| {
            (
                l["tool"].as_str().unwrap().to_owned(),
                l["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// `troupe run` of the demo's prompt as the lead of the shared team at `url`, with no local
/// workers, against the model mock at `base_url`; `env` adds to the model's variables.
pub async fn lead_run(
    ws: &std::path::Path,
    url: &str,
    base_url: &str,
    env: &[(&str, &str)],
) -> super::support::Ran {
    let mut all: Vec<(&str, &str)> = MODEL_ENV.to_vec();
    all.push(("OPENAI_BASE_URL", base_url));
    all.extend_from_slice(env);
    super::team_flow::run(
        ws,
        &[
            "--prompt",
            troupe::demo::PROMPT,
            "--approval",
            "auto",
            "--sandbox",
            "off",
            "--no-memory",
            "--max-turns",
            "10",
            "--store",
            url,
            "--no-local-workers",
        ],
        &all,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_flow_runs_with_the_lead_and_the_writer_in_two_processes() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let lead_dir = tempfile::tempdir().unwrap();
    let worker_dir = tempfile::tempdir().unwrap();
    let lead_ws = std::fs::canonicalize(lead_dir.path()).unwrap();
    let worker_ws = std::fs::canonicalize(worker_dir.path()).unwrap();
    let server = SseServer::start().await;
    server.respond_with(super::streaming::team);

    let worker = {
        let (ws, url, base) = (worker_ws.clone(), url.clone(), server.base_url.clone());
        tokio::task::spawn_blocking(move || WorkerProcess::start(&ws, &url, &base))
            .await
            .unwrap()
    };
    let out = lead_run(&lead_ws, &url, &server.base_url, &[]).await;
    let log = worker.log.clone();
    assert_eq!(out.code, 0, "{out:#?}\nworker: {}", log.lock().unwrap());
    assert_eq!(
        out.stdout,
        "writer wrote NOTES.md under an approved plan and has shut down.\n"
    );
    // The writer's file effect happened in the worker's checkout, not the lead's.
    assert!(std::fs::read_to_string(worker_ws.join("NOTES.md"))
        .unwrap()
        .starts_with("# Notes"));
    assert!(!lead_ws.join("NOTES.md").exists());
    // Its audit is the worker's: plan, write denied while pending, then allowed.
    assert_eq!(
        writer_audit(&worker_ws),
        [
            ("submit_plan", "allow"),
            ("write_file", "deny"),
            ("write_file", "allow"),
        ]
        .map(|(t, d)| (t.to_owned(), d.to_owned()))
    );
    assert!(writer_audit(&lead_ws).is_empty());
    // And the team's audit in the database holds the same decisions, in order.
    assert_eq!(
        db.query_text(
            "SELECT string_agg(tool || ':' || decision, ',' ORDER BY id) FROM troupe_audit \
             WHERE agent = 'writer'"
        )
        .unwrap()
        .as_deref(),
        Some("submit_plan:allow,write_file:deny,write_file:allow")
    );
    // The shared state, seen from a third process through the store.
    let status = json(&troupe_in(&lead_ws, &["status", "--json", "--store", &url]));
    let writer = status["teammates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "writer")
        .cloned()
        .unwrap();
    assert_eq!(writer["status"], "shutdown", "{status:#}");
    // The lead left the worker registry when it closed; the worker is there, holding the
    // writer, with a recent heartbeat.
    let workers = status["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 1, "{status:#}");
    assert_eq!(workers[0]["role"], "worker");
    assert_eq!(workers[0]["teammates"], serde_json::json!(["writer"]));
    assert!(workers[0]["heartbeat_age_ms"].as_i64().unwrap() < 60_000);
    // The lead's background job ran on the lead's host; the team's job list has it.
    let jobs = json(&troupe_in(&worker_ws, &["jobs", "--json", "--store", &url]));
    let commands: Vec<&str> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["command"].as_str().unwrap())
        .collect();
    assert_eq!(commands, ["wc -l NOTES.md"], "{jobs:#}");
    assert_ne!(jobs["jobs"][0]["status"], "running", "{jobs:#}");
    // Token usage: the team's, every process's model calls (each also in its own folder).
    let own = |ws: &std::path::Path| {
        json(&troupe_in(ws, &["status", "--json"]))["usage"]["total"]["total_tokens"]
            .as_u64()
            .unwrap()
    };
    let (lead_tokens, worker_tokens) = (own(&lead_ws), own(&worker_ws));
    assert!(lead_tokens > 0 && worker_tokens > 0);
    assert_eq!(
        status["usage"]["total"]["total_tokens"].as_u64(),
        Some(lead_tokens + worker_tokens),
        "{status:#}"
    );
    assert!(status["usage"]["agents"]["writer"]["total_tokens"].as_u64() > Some(0));
    let text = troupe_in(&lead_ws, &["status", "--store", &url]);
    assert!(text.stdout.contains("workers (shared store)"), "{text:#?}");
    // Without --store the lead's workspace shows no team: it is all in the database.
    let local = json(&troupe_in(&lead_ws, &["status", "--json"]));
    assert_eq!(local["teammates"], serde_json::json!([]));
    assert!(local.get("workers").is_none());
    let plan = json(&troupe_in(
        &lead_ws,
        &["requests", "--json", "--store", &url],
    ));
    let statuses: Vec<&str> = plan["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["approved", "approved"], "{plan:#}");
    let code = tokio::task::spawn_blocking(move || worker.stop())
        .await
        .unwrap();
    assert_eq!(code, 0, "worker: {}", log.lock().unwrap());
    // The team's whole event stream, from a third folder: both processes' events, in one
    // order; each process closed its copy of the stream when it ended.
    let elsewhere = tempfile::tempdir().unwrap();
    let stream = troupe_in(elsewhere.path(), &["log", "--json", "--store", &url]);
    assert_eq!(stream.code, 0, "{stream:#?}");
    let events: Vec<Value> = stream
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let started: std::collections::BTreeSet<&str> = events
        .iter()
        .filter(|e| e["kind"] == "run_started")
        .map(|e| e["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        started.len(),
        2,
        "the lead's and the worker's runs: {stream:#?}"
    );
    let ended = events.iter().filter(|e| e["kind"] == "run_ended").count();
    assert_eq!(ended, 2, "{stream:#?}");
    assert!(
        events
            .iter()
            .any(|e| e["agent"] == "writer" && e["kind"] == "tool_finished"),
        "the writer's tool calls, made in the worker: {stream:#?}"
    );
    assert!(events.iter().any(|e| e["agent"] == "lead"));
    // The timeline of the whole team, as one page.
    let page = elsewhere.path().join("team.html");
    let written = troupe_in(
        elsewhere.path(),
        &[
            "timeline",
            "--html",
            page.to_str().unwrap(),
            "--store",
            &url,
        ],
    );
    assert_eq!(
        written.stdout,
        format!("wrote {} events to {}\n", events.len(), page.display()),
        "{written:#?}"
    );
    let text = troupe_in(
        elsewhere.path(),
        &["log", "--store", &url, "--agent", "writer"],
    );
    assert!(
        text.stdout.lines().all(|l| l.contains(" writer ")),
        "{text:#?}"
    );
    assert!(!elsewhere.path().join(".troupe").exists());
}

/// A person reviews a plan of a teammate that runs in a worker: `troupe review --store` from a
/// third process answers it through the database, the worker's teammate goes on, the lead's run
/// ends. The lead runs with `--require-plans`, which reaches the worker through the roster.
#[test]
fn a_person_approves_from_a_third_process_a_plan_made_in_a_worker() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let (lead_dir, worker_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let lead_ws = std::fs::canonicalize(lead_dir.path()).unwrap();
    let worker_ws = std::fs::canonicalize(worker_dir.path()).unwrap();
    let tool = |name: &str, arguments: Value| serde_json::json!({"tool_calls": [{"name": name, "arguments": arguments}]});
    let text = |t: &str| serde_json::json!({"text": t});
    let script = serde_json::json!({"agents": {
        "lead": [
            tool("spawn_teammate", serde_json::json!({
                "name": "writer", "role": "writer", "prompt": "Write out.txt."})),
            text("done"), text("done"), text("done"), text("done"), text("done"), text("done")
        ],
        "writer": [
            tool("write_file", serde_json::json!({"path": "out.txt", "content": "too early"})),
            tool("submit_plan", serde_json::json!({"plan": "Write out.txt."})),
            text("plan submitted"),
            tool("write_file", serde_json::json!({"path": "out.txt", "content": "approved"})),
            text("wrote out.txt")
        ]
    }});
    let script_path = lead_ws.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let worker_script = worker_ws.join("script.json");
    std::fs::write(&worker_script, script.to_string()).unwrap();

    let mut c = command(&worker_ws);
    c.args([
        "worker",
        "--workspace",
        worker_ws.to_str().unwrap(),
        "--store",
        &url,
        "--approval",
        "auto",
        "--sandbox",
        "off",
        "--no-memory",
        "--model-script",
        worker_script.to_str().unwrap(),
    ]);
    let worker = WorkerProcess::from_command(c);
    let mut lead = command(&lead_ws);
    lead.args([
        "run",
        "--workspace",
        lead_ws.to_str().unwrap(),
        "--prompt",
        "Have the writer write out.txt under a plan a person approves.",
        "--approval",
        "auto",
        "--sandbox",
        "off",
        "--no-memory",
        "--require-plans",
        "--model-script",
        script_path.to_str().unwrap(),
        "--store",
        &url,
        "--no-local-workers",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let child = lead.spawn().unwrap();
    // The writer's plan, created in the worker's process.
    let line = worker.wait_for("plan_approval request");
    let request_id = line
        .split_whitespace()
        .map(|t| t.trim_matches(|c| c == '(' || c == ')'))
        // The run's lines show the short id a person types (the id's last 8 hex digits).
        .find(|t| super::support::is_short_request_id(t))
        .unwrap_or_else(|| panic!("no request id in {line:?}"))
        .to_owned();
    let reviewed = troupe_in(
        &lead_ws,
        &["review", &request_id, "--approve", "--store", &url],
    );
    assert_eq!(reviewed.code, 0, "{reviewed:#?}");
    let out = super::plans::wait(child);
    assert_eq!(out.code, 0, "{out:#?}\nworker: {}", worker.log());
    assert_eq!(out.stdout, "done\n");
    assert_eq!(
        std::fs::read_to_string(worker_ws.join("out.txt")).unwrap(),
        "approved"
    );
    // Gated from its first call (the lead's --require-plans), then allowed once approved.
    let audit: Vec<(String, String, String)> = writer_audit_lines(&worker_ws)
        .iter()
        .map(|l| {
            (
                l["tool"].as_str().unwrap().to_owned(),
                l["decision"].as_str().unwrap().to_owned(),
                l["rule"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        audit
            .iter()
            .map(|(t, d, _)| (t.as_str(), d.as_str()))
            .collect::<Vec<_>>(),
        [
            ("write_file", "deny"),
            ("submit_plan", "allow"),
            ("write_file", "allow")
        ]
    );
    assert_eq!(audit[0].2, "plan_gate");
    assert_eq!(worker.stop(), 0);
}

/// `TROUPE_STORE_URL` may carry the database's password: troupe takes it out of its own
/// environment at start, like the model keys, so no command an agent runs can read it — and the
/// run still uses the store it names.
#[test]
fn the_store_url_from_the_environment_is_used_and_no_command_can_read_it() {
    let Some(db) = TestDb::create() else { return };
    let password = "s3cret-store-password";
    let url = db.url().replacen(
        "postgres://postgres@",
        &format!("postgres://postgres:{password}@"),
        1,
    );
    assert!(url.contains(password), "{url}");
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let script = serde_json::json!({"responses": [
        {"tool_calls": [{"name": "shell", "arguments": {
            "command": "tr '\\0' '\\n' < /proc/$PPID/environ > environ.txt; echo \"own=${TROUPE_STORE_URL:-unset}\" >> environ.txt"}}]},
        {"text": "done"}
    ]});
    std::fs::write(ws.join("script.json"), script.to_string()).unwrap();
    let mut c = command(&ws);
    c.args([
        "run",
        "--workspace",
        ws.to_str().unwrap(),
        "--prompt",
        "look",
        "--model-script",
        "script.json",
        "--sandbox",
        "off",
        "--approval",
        "auto",
        "--no-memory",
    ])
    .env("TROUPE_STORE_URL", &url)
    .stdin(Stdio::null());
    let out = super::support::ran(c.output().unwrap());
    assert_eq!(out.code, 0, "{out:#?}");
    let environ = std::fs::read_to_string(ws.join("environ.txt")).unwrap();
    assert!(environ.lines().any(|l| l == "own=unset"), "{environ}");
    assert!(!environ.contains("TROUPE_STORE_URL="), "{environ}");
    assert!(!environ.contains(password), "{environ}");
    assert!(!out.stderr.contains(password), "{out:#?}");
    // The lead's conversation went to the database the variable named.
    let lines = db
        .query_text("SELECT count(*)::text FROM troupe_transcripts WHERE agent = 'lead'")
        .unwrap()
        .unwrap();
    assert!(lines.parse::<u32>().unwrap() > 0, "{lines}");
}

/// The task board of a shared team is the database's: `troupe tasks --store` in any folder
/// shows what another process put on it, per team; without `--store` the folder's own (empty)
/// board.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_board_of_a_shared_team_is_read_through_the_store() {
    use std::sync::Arc;
    use troupe::store::tasks::{NewTask, TaskBoard};
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let board = troupe::store::postgres::PgTaskBoard::new(
        db.store("default"),
        Arc::new(troupe::clock::SystemClock),
        Arc::new(troupe::ids::RandomIds),
    );
    let first = board
        .create(NewTask {
            subject: "write the notes".into(),
            description: None,
            blocked_by: vec![],
            ..Default::default()
        })
        .await
        .unwrap();
    board
        .create(NewTask {
            subject: "review the notes".into(),
            description: None,
            blocked_by: vec![first.id],
            ..Default::default()
        })
        .await
        .unwrap();
    board
        .claim(&first.id, &troupe::wire::AgentName::parse("lead").unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let listed = json(&troupe_in(
        dir.path(),
        &["tasks", "--json", "--store", &url],
    ));
    let rows: Vec<(&str, &str, usize)> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["subject"].as_str().unwrap(),
                t["status"].as_str().unwrap(),
                t["open_blockers"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("write the notes", "in_progress", 0),
            ("review the notes", "pending", 1)
        ]
    );
    let text = troupe_in(dir.path(), &["tasks", "--store", &url]);
    assert!(text.stdout.contains("write the notes"), "{text:#?}");
    let other_team = json(&troupe_in(
        dir.path(),
        &["tasks", "--json", "--store", &url, "--team", "other"],
    ));
    assert_eq!(other_team["tasks"], serde_json::json!([]));
    let local = json(&troupe_in(dir.path(), &["tasks", "--json"]));
    assert_eq!(local["tasks"], serde_json::json!([]));
}

/// A person steers a shared team from any machine: `troupe send --store` writes into the
/// team's database (the lead's mailbox there, none in the local folder), and an agent the
/// team's roster does not know is refused as on files.
#[test]
fn a_person_sends_to_a_shared_team_through_the_store() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    drop(db.store("default"));
    let dir = tempfile::tempdir().unwrap();
    let sent = json(&troupe_in(
        dir.path(),
        &[
            "send",
            "lead",
            "please also update the changelog",
            "--json",
            "--store",
            &url,
        ],
    ));
    assert_eq!(sent["from"], "user");
    let listed = json(&troupe_in(
        dir.path(),
        &["mailbox", "lead", "--json", "--store", &url],
    ));
    let messages = listed["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{listed:#}");
    assert_eq!(
        messages[0]["message"]["id"], sent["message_id"],
        "{listed:#}"
    );
    assert_eq!(messages[0]["state"], "ready");
    assert!(
        !dir.path().join(".troupe").exists(),
        "the local folder was written"
    );
    let refused = troupe_in(dir.path(), &["send", "ghost", "hello", "--store", &url]);
    super::support::assert_fails(&refused, 1, "no agent named ghost");
}

/// `troupe log -f --store` follows the shared stream: an event another process adds is printed
/// when its NOTIFY arrives (the test waits on the follower's output, not on a clock).
#[test]
fn following_the_shared_stream_prints_what_another_process_adds() {
    use std::sync::Arc;
    use troupe::store::events::{EventListener, EventLog};
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let store = db.store("default");
    let dir = tempfile::tempdir().unwrap();
    let mut follower = command(dir.path())
        .args(["log", "-f", "--json", "--store", &url, "--workspace"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follower.stdout.take().unwrap()).lines();
    // A follower that never prints must not hang the suite: killed after a minute.
    let pid = follower.id() as i32;
    let (done, finished) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .is_err()
        {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    // Another process's run writes two events; its mirror copies them to the database.
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".troupe")).unwrap();
    let log = EventLog::open(
        &troupe::layout::Layout::new(ws.path()),
        Arc::new(troupe::clock::SystemClock),
        "run-elsewhere".into(),
        troupe::secrets::Redactor::default(),
    )
    .unwrap();
    let mirror = troupe::store::postgres::events::PgEventMirror::start(&store);
    log.subscribe(mirror.clone() as Arc<dyn EventListener>);
    use troupe::store::events::EventSink;
    log.emit("lead", "run_started", serde_json::Map::new());
    log.emit("lead", "assistant_text", {
        let mut m = serde_json::Map::new();
        m.insert("text".into(), "hello from elsewhere".into());
        m
    });
    mirror.close();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let second: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["kind"], "run_started");
    assert_eq!(second["text"], "hello from elsewhere");
    assert_eq!(second["run_id"], "run-elsewhere");
    let _ = done.send(());
    unsafe { libc::kill(follower.id() as i32, libc::SIGTERM) };
    assert_eq!(follower.wait().unwrap().code(), Some(0));
}

/// A shared team's memory is the database's: `troupe memory --store` lists, shows and forgets
/// the records every process of the team sees; the local folder is not touched.
#[tokio::test]
async fn the_memory_of_a_shared_team_is_read_and_forgotten_through_the_store() {
    use std::sync::Arc;
    use troupe::store::memory::{MemoryRecord, MemoryStore, MemoryType};
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let dir = tempfile::tempdir().unwrap();
    let shared = MemoryStore::on(Arc::new(troupe::store::postgres::memory::PgMemory::new(
        db.store("default"),
    )));
    shared
        .put(
            &MemoryRecord::new(
                "prefers-tabs",
                MemoryType::Feedback,
                "the team indents with tabs",
                "Use tabs, width 4.",
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let listed = json(&troupe_in(
        dir.path(),
        &["memory", "list", "--json", "--store", &url],
    ));
    assert_eq!(listed["records"][0]["name"], "prefers-tabs", "{listed:#}");
    let shown = troupe_in(
        dir.path(),
        &["memory", "show", "prefers-tabs", "--store", &url],
    );
    assert!(shown.stdout.contains("Use tabs, width 4."), "{shown:#?}");
    let local = json(&troupe_in(dir.path(), &["memory", "list", "--json"]));
    assert_eq!(local["records"], serde_json::json!([]));
    let forgot = troupe_in(
        dir.path(),
        &["memory", "forget", "prefers-tabs", "--store", &url],
    );
    assert_eq!(forgot.code, 0, "{forgot:#?}");
    assert_eq!(shared.get("prefers-tabs").await.unwrap(), None);
    assert!(!dir.path().join(".troupe").exists());
}

/// A shared team's lead keeps its durable cron jobs in the database: `troupe cron --store`
/// lists them from any folder; the folder's own file has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cron_jobs_of_a_shared_team_are_read_through_the_store() {
    use std::sync::Arc;
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let dir = tempfile::tempdir().unwrap();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let cron = troupe::cron::CronRuntime::open_store(
        troupe::cron::CronStore::on(Arc::new(
            troupe::store::postgres::document::PgDocument::new(
                db.store("default"),
                troupe::cron::store::CRON_DOCUMENT,
            ),
        )),
        Arc::new(troupe::clock::SystemClock),
        Arc::new(troupe::ids::RandomIds),
        tx,
    )
    .await
    .unwrap();
    let job = cron
        .schedule(troupe::cron::ScheduleRequest {
            cron: "30 2 * * *".into(),
            prompt: "run the nightly checks".into(),
            timezone: "UTC".into(),
            recurring: true,
            durable: true,
        })
        .await
        .unwrap();
    let listed = json(&troupe_in(dir.path(), &["cron", "--json", "--store", &url]));
    assert_eq!(listed["jobs"][0]["id"], job.id.to_string(), "{listed:#}");
    assert_eq!(listed["jobs"][0]["prompt"], "run the nightly checks");
    let local = json(&troupe_in(dir.path(), &["cron", "--json"]));
    assert_eq!(local["jobs"], serde_json::json!([]));
    assert!(!dir.path().join(".troupe").exists());
}

/// `troupe compact --store` compacts an agent's conversation in the team's database, from any
/// folder: the boundary is in the team's transcript, the event (trigger `manual`) in the
/// team's stream, and the next run goes on from the compacted history. While a lead of the
/// team runs (it holds the team's lead lock) compact is refused, as the run lock refuses it on
/// files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_with_a_store_compacts_the_teams_conversation_unless_a_lead_runs() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(ws.join("blob.txt"), "small\n").unwrap();
    let read = serde_json::json!({"tool_calls": [{"name": "read_file", "arguments": {"path": "blob.txt"}}]});
    let script = serde_json::json!({"responses": [read, read, read, read, read, read, read, {"text": "ok"}]});
    let shared = ["--store", url.as_str(), "--no-memory"];
    let out = super::sessions::run_scripted(&ws, "read a lot", &script, &shared);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(!ws.join(".troupe/transcripts/lead.jsonl").exists());

    // Another folder: the conversation is the database's, not a workspace's.
    let other = tempfile::tempdir().unwrap();
    let other = std::fs::canonicalize(other.path()).unwrap();
    let model = other.join("compact-script.json");
    std::fs::write(&model, serde_json::json!({"responses": []}).to_string()).unwrap();
    let compact = |args: &[&str]| {
        let mut all = vec!["compact", "--model-script", model.to_str().unwrap()];
        all.extend(["--store", url.as_str()]);
        all.extend(args);
        troupe_in(&other, &all)
    };
    let report = json(&compact(&["--json", "--no-memory"]));
    assert_eq!(report["compacted"], true, "{report:#}");
    assert_eq!(report["kind"], "summary");
    let after = report["messages_after"].as_u64().unwrap();
    assert!(after < report["messages_before"].as_u64().unwrap());
    let boundaries = db
        .query_text(
            "SELECT count(*)::text FROM troupe_transcripts WHERE team = 'default'
               AND agent = 'lead' AND generation = 0 AND line LIKE '%\"compaction\"%'",
        )
        .unwrap();
    assert_eq!(boundaries.as_deref(), Some("1"));
    let event = db
        .query_text(
            "SELECT line FROM troupe_events WHERE team = 'default'
               AND line LIKE '%\"kind\":\"compaction\"%' ORDER BY id DESC LIMIT 1",
        )
        .unwrap()
        .expect("no compaction event in the team's stream");
    let event: Value = serde_json::from_str(&event).unwrap();
    assert_eq!(event["agent"], "lead", "{event:#}");
    assert_eq!(event["trigger"], "manual", "{event:#}");
    assert_eq!(event["messages_after"], after, "{event:#}");

    // The next run loads the compacted conversation and adds its exchange to it.
    let next = serde_json::json!({"responses": [{"text": "still here"}]});
    let out = super::sessions::run_scripted(&ws, "and now?", &next, &shared);
    assert_eq!(out.code, 0, "{out:#?}");
    let again = json(&compact(&["--json", "--no-memory"]));
    assert_eq!(again["messages_before"], after + 2, "{again:#}");

    // A running lead of the team holds its lead lock: refused, nothing changed.
    let lead = troupe::store::postgres::lead_lock(&db.store("default"))
        .await
        .unwrap()
        .expect("the lead lock is free");
    let busy = compact(&[]);
    super::support::assert_fails(&busy, 1, "[workspace_busy]");
    assert!(
        busy.stderr.contains("a lead of team \"default\""),
        "{busy:#?}"
    );
    drop(lead);
    // An agent without a conversation in the team.
    let unknown = compact(&["--agent", "nobody"]);
    super::support::assert_fails(&unknown, 1, "[no_conversation]");
}

/// An artifact travels with its team: the lead, run in one clone, reads a file too large for its
/// history (an artifact under that clone's `.troupe/artifacts/`, copied to the database); the
/// lead's next run, in another clone on "another host", goes on from the same conversation and
/// reads the artifact its history names — made there from the team's copy.
#[test]
fn an_artifact_written_in_one_clone_is_read_by_the_team_in_another() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = std::fs::canonicalize(dir_a.path()).unwrap();
    let b = std::fs::canonicalize(dir_b.path()).unwrap();
    let big: String = (0..4_000).map(|i| format!("log line {i:05}\n")).collect();
    std::fs::write(a.join("build.log"), &big).unwrap();
    let shared = ["--store", url.as_str(), "--no-memory"];
    let first = serde_json::json!({"responses": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "build.log"}}]},
        {"text": "read it"}
    ]});
    let out = super::sessions::run_scripted(&a, "read the log", &first, &shared);
    assert_eq!(out.code, 0, "{out:#?}");
    let name = db
        .query_text("SELECT name FROM troupe_artifacts WHERE team = 'default' AND agent = 'lead'")
        .unwrap()
        .expect("no artifact in the team's store");
    let path = format!(".troupe/artifacts/lead/{name}");
    assert_eq!(std::fs::read_to_string(a.join(&path)).unwrap(), big);
    let named = db
        .query_text(&format!(
            "SELECT count(*)::text FROM troupe_transcripts WHERE agent = 'lead' AND line LIKE '%{path}%'"
        ))
        .unwrap();
    assert_ne!(named.as_deref(), Some("0"), "the history names {path}");

    // The other clone has no artifacts; the lead's next run there reads it all the same.
    assert!(!b.join(".troupe").exists());
    let second = serde_json::json!({"responses": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": path, "limit": 2}}]},
        {"text": "read it again"}
    ]});
    let out = super::sessions::run_scripted(&b, "read it again", &second, &shared);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(std::fs::read_to_string(b.join(&path)).unwrap(), big);
    let result = db
        .query_text(
            "SELECT line FROM troupe_transcripts WHERE agent = 'lead'
               AND line LIKE '%made from the team''s store%' ORDER BY seq DESC LIMIT 1",
        )
        .unwrap()
        .expect("no tool result made from the team's store");
    assert!(result.contains("log line 00000"), "{result}");
}
