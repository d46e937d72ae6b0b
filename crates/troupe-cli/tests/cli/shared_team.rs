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
        std::thread::spawn(move || {
            for line in lines.lines() {
                let Ok(line) = line else { break };
                drained.lock().unwrap().push_str(&line);
                drained.lock().unwrap().push('\n');
            }
        });
        Self { child, log }
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
}

pub fn writer_audit(ws: &std::path::Path) -> Vec<(String, String)> {
    std::fs::read_to_string(ws.join(".troupe/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["agent"] == "writer")
        .map(|l| {
            (
                l["tool"].as_str().unwrap().to_owned(),
                l["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
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
    let mut env: Vec<(&str, &str)> = MODEL_ENV.to_vec();
    env.push(("OPENAI_BASE_URL", &server.base_url));
    let out = super::team_flow::run(
        &lead_ws,
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
            &url,
            "--no-local-workers",
        ],
        &env,
    )
    .await;
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
}
