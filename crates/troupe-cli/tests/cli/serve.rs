//! `troupe serve` (the live web view) and `troupe timeline --html`, through the real binary and a
//! tiny HTTP/1.1 client over `TcpStream` (127.0.0.1 only).
//!
//! - Every route refuses a missing or wrong token, a token in the wrong place (POST: header
//!   only) and a foreign `Host` with 403.
//! - GET changes nothing under `.troupe/` (hashed before and after) and creates nothing in a
//!   workspace without it.
//! - `/api/state`, `/api/events`, `/api/conversation` on a workspace where `troupe demo` ran;
//!   each agent's cost by its models' prices.
//! - The event stream: started before `.troupe/` exists, it follows `troupe demo` to its last
//!   event; a reconnection with `Last-Event-ID` gets only the newer events.
//! - `POST /api/review` answers a pending plan exactly like `troupe review` (same state, same
//!   refusal of a second answer); bodies must be JSON, without duplicate keys.
//! - The server listens on 127.0.0.1 only.
//! - `timeline --html` writes one offline file holding the events, never inside `.troupe/`.
//! - `serve --store`: a shared team served from its database, live through its NOTIFY.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::clock::SystemClock;
use troupe::ids::RandomIds;
use troupe::layout::Layout;
use troupe::store::protocol::{JsonProtocolStore, NewRequest, ProtocolStore};
use troupe::wire::{
    AgentName, Content, RequestId, RequestKind, TeamRoster, TeammateRecord, TeammateStatus,
};

use super::support::{assert_fails, command, troupe_in};

const WAIT: Duration = Duration::from_secs(30);

/// A running `troupe serve`; killed when dropped.
pub(super) struct Server {
    child: Option<Child>,
    pub(super) port: u16,
    pub(super) token: String,
    url: String,
}

impl Server {
    pub(super) fn start(workspace: &Path) -> Self {
        Self::start_with(workspace, &[])
    }

    /// `troupe serve` with `extra` arguments (`--store URL`).
    fn start_with(workspace: &Path, extra: &[&str]) -> Self {
        let mut child = command(workspace)
            .args(["serve", "--port", "0", "--workspace"])
            .arg(workspace)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(WAIT).expect("serve prints its address");
        let prefix = format!("troupe: serving {} at ", workspace.display());
        assert!(line.starts_with(&prefix), "{line:?}");
        let url = line[line.find("http://").unwrap()..].trim().to_owned();
        let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
        let (port, query) = rest.split_once("/?token=").unwrap();
        Self {
            child: Some(child),
            port: port.parse().unwrap(),
            token: query.to_owned(),
            url,
        }
    }

    pub(super) fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// GET with the token in the query.
    fn get(&self, path: &str) -> Response {
        let sep = if path.contains('?') { '&' } else { '?' };
        request(
            self.port,
            "GET",
            &format!("{path}{sep}token={}", self.token),
            &[("Host", &self.host())],
            None,
        )
    }

    pub(super) fn get_json(&self, path: &str) -> Value {
        let response = self.get(path);
        assert_eq!(response.status, 200, "{path}: {response:?}");
        serde_json::from_slice(&response.body).unwrap()
    }

    /// POST JSON with the token header.
    pub(super) fn post(&self, path: &str, body: &str) -> Response {
        request(
            self.port,
            "POST",
            path,
            &[
                ("Host", &self.host()),
                ("X-Troupe-Token", &self.token),
                ("Content-Type", "application/json"),
            ],
            Some(body.as_bytes()),
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[derive(Debug)]
pub(super) struct Response {
    pub(super) status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

impl Response {
    pub(super) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
}

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream
}

fn send_head(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) {
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    if let Some(body) = body {
        stream.write_all(body).unwrap();
    }
}

/// One request on its own connection; the whole response.
pub(super) fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Response {
    let mut stream = connect(port);
    send_head(&mut stream, method, path, headers, body);
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .get("transfer-encoding")
        .is_some_and(|t| t == "chunked")
    {
        body = dechunk(&body);
    }
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let end = raw.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..end]).unwrap(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[end + 2..end + 2 + size]);
        raw = &raw[end + 4 + size..];
    }
}

/// A workspace where `troupe demo` ran.
fn demo_workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let ran = troupe_in(&ws, &["demo"]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    (dir, ws)
}

/// Every path under `dir` with its kind and contents, to compare before and after.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut all = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            all.insert(path.clone(), b"dir".to_vec());
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        } else {
            all.insert(path.clone(), std::fs::read(&path).unwrap());
        }
    }
    all
}

const GET_ROUTES: [&str; 8] = [
    "/",
    "/app.js",
    "/style.css",
    "/api/state",
    "/api/events",
    "/api/events?since=3&limit=2",
    "/api/events/stream",
    "/api/conversation?agent=lead",
];

#[test]
fn every_route_refuses_a_missing_or_misplaced_token_and_a_foreign_host() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let host = server.host();
    let wrong = "0".repeat(64);
    let bearer = format!("Bearer {}", server.token);
    for path in GET_ROUTES {
        let sep = if path.contains('?') { '&' } else { '?' };
        let missing = request(server.port, "GET", path, &[("Host", &host)], None);
        assert_eq!(missing.status, 403, "{path} without a token");
        assert_eq!(missing.json()["error"]["code"], "forbidden");
        let bad = format!("{path}{sep}token={wrong}");
        let wrong_token = request(server.port, "GET", &bad, &[("Host", &host)], None);
        assert_eq!(wrong_token.status, 403, "{path} with a wrong token");
        let short = format!("{path}{sep}token={}", &server.token[..63]);
        assert_eq!(
            request(server.port, "GET", &short, &[("Host", &host)], None).status,
            403
        );
        let good = format!("{path}{sep}token={}", server.token);
        for foreign in [
            "evil.example",
            "evil.example:80",
            "127.0.0.1",
            "localhost:1",
        ] {
            let rebound = request(server.port, "GET", &good, &[("Host", foreign)], None);
            assert_eq!(rebound.status, 403, "{path} with Host {foreign}");
            assert_eq!(rebound.json()["error"]["code"], "forbidden_host");
        }
        let no_host = request(server.port, "GET", &good, &[], None);
        assert_eq!(no_host.status, 403, "{path} without Host");
    }
    // The right token, in the query or as a bearer, from either name of the address.
    for path in ["/", "/api/state"] {
        let with_header = request(
            server.port,
            "GET",
            path,
            &[
                ("Host", &format!("localhost:{}", server.port)),
                ("Authorization", &bearer),
            ],
            None,
        );
        assert_eq!(with_header.status, 200, "{path}: {with_header:?}");
    }
    let page = server.get("/");
    assert_eq!(page.status, 200);
    let html = String::from_utf8(page.body).unwrap();
    for id in [
        "id=\"agents\"",
        "id=\"timeline\"",
        "id=\"plans\"",
        "id=\"send\"",
    ] {
        assert!(html.contains(id), "{id}");
    }
    assert_eq!(page.headers["referrer-policy"], "no-referrer");
    // POST takes the token from its header only.
    let body = json!({"request_id": "0195a1b2-c3d4-4e5f-8a6b-7c8d9e0f1a2b", "approve": true});
    for path in ["/api/review", "/api/permission", "/api/send"] {
        let body = body.to_string();
        let in_query = request(
            server.port,
            "POST",
            &format!("{path}?token={}", server.token),
            &[("Host", &host), ("Content-Type", "application/json")],
            Some(body.as_bytes()),
        );
        assert_eq!(in_query.status, 403, "{path} with the token in the query");
        let as_bearer = request(
            server.port,
            "POST",
            path,
            &[
                ("Host", &host),
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
            ],
            Some(body.as_bytes()),
        );
        assert_eq!(as_bearer.status, 403, "{path} with a bearer token");
        let wrong_header = request(
            server.port,
            "POST",
            path,
            &[
                ("Host", &host),
                ("X-Troupe-Token", &wrong),
                ("Content-Type", "application/json"),
            ],
            Some(body.as_bytes()),
        );
        assert_eq!(wrong_header.status, 403, "{path} with a wrong header");
        let foreign = request(
            server.port,
            "POST",
            path,
            &[
                ("Host", "evil.example"),
                ("X-Troupe-Token", &server.token),
                ("Content-Type", "application/json"),
            ],
            Some(body.as_bytes()),
        );
        assert_eq!(foreign.status, 403, "{path} with a foreign Host");
    }
    // Nothing was created by any of it.
    assert!(!dir.path().join(".troupe").exists());
}

#[test]
fn get_changes_nothing_and_reports_the_demo() {
    let (_dir, ws) = demo_workspace();
    let state_dir = Layout::new(&ws).state_dir();
    let before = snapshot(&state_dir);
    let server = Server::start(&ws);
    for path in GET_ROUTES {
        if path == "/api/events/stream" {
            continue;
        }
        assert_eq!(server.get(path).status, 200, "{path}");
    }

    let events_file = std::fs::read_to_string(Layout::new(&ws).events_log()).unwrap();
    let count = events_file.lines().count() as u64;
    let state = server.get_json("/api/state");
    assert_eq!(state["workspace"], ws.display().to_string());
    assert_eq!(state["last_seq"], count);
    assert_eq!(state["pending_plans"], json!([]));
    let agents = state["agents"].as_array().unwrap();
    assert_eq!(agents[0]["name"], "lead");
    let writer = agents.iter().find(|a| a["name"] == "writer").unwrap();
    assert_eq!(writer["status"], "shutdown");
    for agent in agents {
        for key in ["role", "status", "tokens_in", "tokens_out", "cost_usd"] {
            assert!(agent.get(key).is_some(), "{key} in {agent}");
        }
        // The demo's answers carry tokens, and its model a (made-up) price in the built-in
        // table.
        assert!(agent["tokens_in"].as_u64().unwrap() > 0, "{agent}");
        assert!(agent["cost_usd"].as_f64().unwrap() > 0.0, "{agent}");
        assert_eq!(agent["unpriced_models"], json!([]), "{agent}");
    }

    let all = server.get_json("/api/events");
    let seqs: Vec<u64> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=count).collect::<Vec<_>>());
    let first_line: Value = serde_json::from_str(events_file.lines().next().unwrap()).unwrap();
    assert_eq!(all[0], first_line, "events are the file's own objects");
    let some = server.get_json(&format!("/api/events?since={}&limit=2", count - 3));
    let seqs: Vec<u64> = some
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [count - 2, count - 1]);
    assert_eq!(server.get("/api/events?since=x").status, 400);

    // The page's way: the latest events first, then older ones by seq, filtered or not.
    let latest = server.get_json("/api/events?before=end&limit=2");
    let seqs_of = |page: &Value| -> Vec<u64> {
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(seqs_of(&latest), [count - 1, count]);
    assert_eq!(latest["next_before"], count - 1);
    assert_eq!(latest["last_seq"], count);
    let older = server.get_json(&format!("/api/events?before={}&limit=2", count - 1));
    assert_eq!(seqs_of(&older), [count - 3, count - 2]);
    let start = server.get_json("/api/events?before=3&limit=10");
    assert_eq!(seqs_of(&start), [1, 2]);
    assert_eq!(start["next_before"], Value::Null, "the stream's start");
    let file_events: Vec<Value> = events_file
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let writer_texts: Vec<u64> = file_events
        .iter()
        .filter(|e| e["agent"] == "writer" && e["kind"] == "assistant_text")
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(!writer_texts.is_empty());
    let filtered =
        server.get_json("/api/events?before=end&limit=100&agent=writer&kind=assistant_text");
    assert_eq!(seqs_of(&filtered), writer_texts);
    assert_eq!(filtered["next_before"], Value::Null);
    let first_prompt = file_events[0]["prompt"].as_str().unwrap().to_uppercase();
    let word = first_prompt.split_whitespace().next().unwrap();
    let by_text = server.get_json(&format!("/api/events?before=end&q={word}"));
    assert!(seqs_of(&by_text).contains(&1), "{word}: {by_text}");
    assert_eq!(server.get("/api/events?before=x").status, 400);

    let lead = server.get_json("/api/conversation?agent=lead");
    assert!(!lead["messages"].as_array().unwrap().is_empty(), "{lead}");
    assert!(lead["messages"][0]["message"]["role"].is_string(), "{lead}");
    assert_eq!(server.get("/api/conversation?agent=Lead%2F..").status, 400);
    assert_eq!(server.get("/api/nothing").status, 404);

    // The stream's index is the server's own cache (it is its writer); nothing else changes.
    let mut after = snapshot(&state_dir);
    assert!(
        after.remove(&Layout::new(&ws).events_index()).is_some(),
        "{:?}",
        after.keys()
    );
    assert_eq!(after, before, "GET changed .troupe/");
}

/// An agent's cost on the page is `troupe usage`'s: each model's tokens at its own price (the
/// settings' `[prices]` over the built-in table), the models with no price named.
#[test]
fn the_state_shows_each_agents_cost_by_its_models_prices() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(ws.join(".troupe")).unwrap();
    let line = |model: &str, prompt: u64, completion: u64| {
        json!({"at": "2026-07-30T08:00:00.000Z", "run_id": "r", "agent": "lead", "model": model,
               "purpose": "turn", "prompt_tokens": prompt, "completion_tokens": completion,
               "total_tokens": prompt + completion})
        .to_string()
            + "\n"
    };
    // $2 for 1M prompt tokens of gpt-4.1 (as a dated snapshot), and 10 tokens of a local model.
    std::fs::write(
        ws.join(".troupe/usage.jsonl"),
        line("gpt-4.1-2025-04-14", 1_000_000, 0) + &line("local", 5, 5),
    )
    .unwrap();
    let lead = |server: &Server| server.get_json("/api/state")["agents"][0].clone();

    let server = Server::start(&ws);
    let shown = lead(&server);
    assert_eq!(
        (&shown["tokens_in"], &shown["tokens_out"]),
        (&json!(1_000_005), &json!(5))
    );
    assert_eq!(shown["cost_usd"], json!(2.0));
    assert_eq!(shown["unpriced_models"], json!(["local"]));
    drop(server);

    std::fs::write(
        ws.join("troupe.toml"),
        "[prices.local]\ninput = 100000\noutput = 100000\n",
    )
    .unwrap();
    let server = Server::start(&ws);
    let shown = lead(&server);
    assert_eq!(shown["cost_usd"], json!(3.0));
    assert_eq!(shown["unpriced_models"], json!([]));
}

/// `cost_series` is the cost over time: cumulative USD per agent and in total, one point per
/// slot with a priced call (the models with no price named, their tokens counted nowhere); its
/// last total is the sum of the agents' costs beside it, and a record appended later grows it.
#[test]
fn the_state_has_the_cost_over_time_ending_at_the_sum_of_the_agents_costs() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(ws.join(".troupe")).unwrap();
    write_roster_with_writer(&Layout::new(&ws), TeammateStatus::Idle);
    let line = |at: &str, agent: &str, model: &str, prompt: u64, completion: u64| {
        json!({"at": at, "run_id": "r", "agent": agent, "model": model,
               "purpose": "turn", "prompt_tokens": prompt, "completion_tokens": completion,
               "total_tokens": prompt + completion})
        .to_string()
            + "\n"
    };
    let log = ws.join(".troupe/usage.jsonl");
    // gpt-4.1: $2 per 1M prompt tokens, $8 per 1M completion tokens.
    std::fs::write(
        &log,
        line("2026-07-30T08:00:00.000Z", "lead", "gpt-4.1", 1_000_000, 0)
            + &line("2026-07-30T08:01:00.000Z", "writer", "gpt-4.1", 0, 250_000)
            + &line("2026-07-30T08:01:30.000Z", "writer", "local", 5, 5),
    )
    .unwrap();
    let server = Server::start(&ws);
    let state = server.get_json("/api/state");
    assert_eq!(
        state["cost_series"],
        json!({
            "points": [
                {"at": "2026-07-30T08:00:00.000Z", "agents": {"lead": 2.0}, "total_usd": 2.0},
                {"at": "2026-07-30T08:01:00.000Z", "agents": {"lead": 2.0, "writer": 2.0},
                 "total_usd": 4.0},
            ],
            "total_usd": 4.0,
            "unpriced_models": ["local"],
            "slot_ms": 1000,
            "max_points": 120,
        })
    );
    let agents_sum: f64 = state["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["cost_usd"].as_f64())
        .sum();
    assert_eq!(state["agents"][1]["name"], "writer");
    assert_eq!(state["cost_series"]["total_usd"].as_f64(), Some(agents_sum));

    // Appended while the server runs (a torn tail first: not counted until it is whole).
    let later = line("2026-07-30T08:05:00.000Z", "lead", "gpt-4.1", 500_000, 0);
    let (head, tail) = later.split_at(20);
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(head.as_bytes()).unwrap();
    let state = server.get_json("/api/state");
    assert_eq!(state["cost_series"]["points"].as_array().unwrap().len(), 2);
    file.write_all(tail.as_bytes()).unwrap();
    let state = server.get_json("/api/state");
    let points = state["cost_series"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 3, "{state:#}");
    assert_eq!(
        points[2],
        json!({"at": "2026-07-30T08:05:00.000Z", "agents": {"lead": 3.0, "writer": 2.0},
               "total_usd": 5.0})
    );
    assert_eq!(state["agents"][0]["cost_usd"], json!(3.0));
}

#[test]
fn a_workspace_without_state_shows_an_empty_team_and_stays_empty() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let state = server.get_json("/api/state");
    assert_eq!(state["agents"].as_array().unwrap().len(), 1, "{state}");
    assert_eq!(state["agents"][0]["name"], "lead");
    assert_eq!(state["last_seq"], 0);
    assert_eq!(server.get_json("/api/events"), json!([]));
    assert_eq!(
        server.get_json("/api/conversation?agent=lead")["messages"],
        json!([])
    );
    assert!(!dir.path().join(".troupe").exists());
}

/// Reads server-sent events from `stream` until one has id `last`; their ids in order.
fn read_ids_until(stream: &mut TcpStream, last: u64) -> Vec<u64> {
    let deadline = Instant::now() + WAIT;
    let mut reader = BufReader::new(stream);
    let mut ids = Vec::new();
    let mut line = String::new();
    while ids.last() != Some(&last) {
        assert!(Instant::now() < deadline, "no event {last}; got {ids:?}");
        line.clear();
        let n = reader.read_line(&mut line).unwrap();
        assert!(n > 0, "the stream ended; got {ids:?}");
        if let Some(id) = line.strip_prefix("id: ") {
            ids.push(id.trim().parse().unwrap());
        }
    }
    ids
}

fn open_stream(server: &Server, extra: &[(&str, &str)]) -> TcpStream {
    let mut stream = connect(server.port);
    let host = server.host();
    let mut headers = vec![("Host", host.as_str()), ("Accept", "text/event-stream")];
    headers.extend_from_slice(extra);
    send_head(
        &mut stream,
        "GET",
        &format!("/api/events/stream?token={}", server.token),
        &headers,
        None,
    );
    stream
}

#[test]
fn the_stream_follows_a_run_from_before_its_state_exists_and_resumes_after_an_id() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let server = Server::start(&ws);
    let mut live = open_stream(&server, &[]);
    // The stream answers before anything happens: its headers and a retry hint.
    let mut head = [0u8; 12];
    live.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");

    let ran = troupe_in(&ws, &["demo"]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    let count = std::fs::read_to_string(Layout::new(&ws).events_log())
        .unwrap()
        .lines()
        .count() as u64;
    let ids = read_ids_until(&mut live, count);
    assert_eq!(
        ids,
        (1..=count).collect::<Vec<_>>(),
        "every event once, in order"
    );

    let resume_at = (count - 5).to_string();
    let mut resumed = open_stream(&server, &[("Last-Event-ID", &resume_at)]);
    assert_eq!(
        read_ids_until(&mut resumed, count),
        (count - 4..=count).collect::<Vec<_>>()
    );
    // `?since=` does the same for a first connection.
    let mut since = connect(server.port);
    send_head(
        &mut since,
        "GET",
        &format!(
            "/api/events/stream?since={}&token={}",
            count - 1,
            server.token
        ),
        &[("Host", &server.host())],
        None,
    );
    assert_eq!(read_ids_until(&mut since, count), [count]);
}

/// A workspace where the idle teammate `writer` waits for an answer to one plan.
async fn workspace_with_a_plan() -> (tempfile::TempDir, PathBuf, RequestId) {
    workspace_with_a_plan_of(TeammateStatus::Idle).await
}

/// A workspace where `writer`, with `status`, submitted one plan.
async fn workspace_with_a_plan_of(
    status: TeammateStatus,
) -> (tempfile::TempDir, PathBuf, RequestId) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let layout = Layout::new(&ws);
    let store =
        JsonProtocolStore::open(&layout, Arc::new(SystemClock), Arc::new(RandomIds)).unwrap();
    let id = store
        .create(NewRequest {
            kind: RequestKind::PlanApproval,
            sender: AgentName::parse("writer").unwrap(),
            target: AgentName::lead(),
            content: Content::parse("Write NOTES.md.").unwrap(),
            ttl: Duration::from_secs(3600),
        })
        .await
        .unwrap()
        .id();
    write_roster_with_writer(&layout, status);
    (dir, ws, id)
}

/// `.troupe/team.json` with one teammate, `writer`, with `status`.
fn write_roster_with_writer(layout: &Layout, status: TeammateStatus) {
    let roster = TeamRoster {
        version: TeamRoster::VERSION,
        teammates: vec![TeammateRecord {
            name: AgentName::parse("writer").unwrap(),
            role: "writer".into(),
            status,
            detail: None,
            updated_at_utc: troupe::clock::Clock::now(&SystemClock),
            plan_required: false,
            earlier_plan: None,
            definition: None,
            isolation: troupe_wire::Isolation::None,
        }],
    };
    std::fs::write(layout.team_file(), roster.to_json_bytes()).unwrap();
}

/// The requests as `troupe requests --json` shows them, without times and message ids.
fn requests_of(ws: &Path) -> Vec<Value> {
    let ran = troupe_in(ws, &["requests", "--json"]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    let all: Value = serde_json::from_str(&ran.stdout).unwrap();
    all["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            json!({
                "kind": r["kind"], "sender": r["sender"], "target": r["target"],
                "status": r["status"], "approved": r["resolution"]["approved"],
                "answer": r["resolution"]["content"],
            })
        })
        .collect()
}

/// The writer's mailbox as `troupe mailbox writer --json` shows it, without ids and times.
fn writer_mail(ws: &Path) -> Vec<Value> {
    mail_of(ws, "writer")
}

/// `agent`'s mailbox as `troupe mailbox AGENT --json` shows it, without ids and times.
pub(super) fn mail_of(ws: &Path, agent: &str) -> Vec<Value> {
    let ran = troupe_in(ws, &["mailbox", agent, "--json"]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    let all: Value = serde_json::from_str(&ran.stdout).unwrap();
    all["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let message = &m["message"];
            json!({"state": m["state"], "type": message["type"], "kind": message["kind"],
                   "sender": message["sender"], "approved": message["approved"],
                   "content": message["content"]})
        })
        .collect()
}

#[tokio::test]
async fn a_review_from_the_page_is_the_same_as_troupe_review() {
    let (_web_dir, web_ws, web_plan) = workspace_with_a_plan().await;
    let (_cli_dir, cli_ws, cli_plan) = workspace_with_a_plan().await;
    let server = Server::start(&web_ws);

    let plans = server.get_json("/api/state")["pending_plans"].clone();
    assert_eq!(plans.as_array().unwrap().len(), 1, "{plans}");
    assert_eq!(plans[0]["request_id"], web_plan.to_string());
    assert_eq!(plans[0]["from"], "writer");
    assert_eq!(plans[0]["to"], "lead");
    assert_eq!(plans[0]["plan"], "Write NOTES.md.");
    assert!(plans[0]["expires_at"].is_string() && plans[0]["created_at"].is_string());

    let body = json!({"request_id": web_plan.to_string(), "approve": true, "feedback": "Go."});
    let answered = server.post("/api/review", &body.to_string());
    assert_eq!(answered.status, 200, "{answered:?}");
    let answer = answered.json();
    assert_eq!(answer["ok"], true);
    assert_eq!(answer["recipient"], "writer");
    let cli = troupe_in(
        &cli_ws,
        &[
            "review",
            &cli_plan.to_string(),
            "--approve",
            "--feedback",
            "Go.",
        ],
    );
    assert_eq!(cli.code, 0, "{cli:#?}");

    assert_eq!(requests_of(&web_ws), requests_of(&cli_ws));
    assert_eq!(writer_mail(&web_ws), writer_mail(&cli_ws));
    assert_eq!(writer_mail(&web_ws).len(), 1);
    assert_eq!(
        writer_mail(&web_ws)[0]["approved"],
        true,
        "{:?}",
        writer_mail(&web_ws)
    );
    assert_eq!(writer_mail(&web_ws)[0]["content"], "Go.");
    assert_eq!(server.get_json("/api/state")["pending_plans"], json!([]));

    // A second answer is refused with the code `troupe review` gives, and changes nothing.
    let state = std::fs::read(Layout::new(&web_ws).protocol_state()).unwrap();
    let again = server.post(
        "/api/review",
        &json!({"request_id": web_plan.to_string(), "approve": false}).to_string(),
    );
    assert_eq!(again.status, 409, "{again:?}");
    assert_eq!(again.json()["error"]["code"], "protocol_state_error");
    assert_fails(
        &troupe_in(&cli_ws, &["review", &cli_plan.to_string(), "--reject"]),
        1,
        "[protocol_state_error]",
    );
    assert_eq!(
        std::fs::read(Layout::new(&web_ws).protocol_state()).unwrap(),
        state
    );
    assert_eq!(writer_mail(&web_ws).len(), 1);

    // An unknown request: 404; a malformed id: 400.
    let unknown = server.post(
        "/api/review",
        &json!({"request_id": "0195a1b2-c3d4-4e5f-8a6b-7c8d9e0f1a2b", "approve": true}).to_string(),
    );
    assert_eq!(unknown.status, 404, "{unknown:?}");
    assert_eq!(unknown.json()["error"]["code"], "protocol_not_found");
    let malformed = server.post("/api/review", r#"{"request_id": "xyz", "approve": true}"#);
    assert_eq!(malformed.status, 400, "{malformed:?}");
}

#[tokio::test]
async fn a_plan_of_a_shut_down_teammate_is_refused_like_troupe_review_refuses_it() {
    let (_dir, ws, plan) = workspace_with_a_plan_of(TeammateStatus::Shutdown).await;
    let server = Server::start(&ws);
    let body = json!({"request_id": plan.to_string(), "approve": true});
    let refused = server.post("/api/review", &body.to_string());
    assert_eq!(refused.status, 409, "{refused:?}");
    assert_eq!(refused.json()["error"]["code"], "teammate_state");
    assert_fails(
        &troupe_in(&ws, &["review", &plan.to_string(), "--approve"]),
        1,
        "[teammate_state]",
    );
    let writer = AgentName::parse("writer").unwrap();
    assert!(
        !Layout::new(&ws).mailbox_dir(&writer).exists(),
        "nothing was sent"
    );
}

#[tokio::test]
async fn a_message_from_the_page_is_the_same_as_troupe_send() {
    let (_web_dir, web_ws, _) = workspace_with_a_plan().await;
    let (_cli_dir, cli_ws, _) = workspace_with_a_plan().await;
    let server = Server::start(&web_ws);
    let sent = server.post(
        "/api/send",
        r#"{"agent": "writer", "text": "Also add a title."}"#,
    );
    assert_eq!(sent.status, 200, "{sent:?}");
    assert_eq!(sent.json()["ok"], true);
    let cli = troupe_in(&cli_ws, &["send", "writer", "Also add a title."]);
    assert_eq!(cli.code, 0, "{cli:#?}");
    assert_eq!(writer_mail(&web_ws), writer_mail(&cli_ws));
    assert_eq!(writer_mail(&web_ws)[0]["sender"], "user");
    assert_eq!(writer_mail(&web_ws)[0]["content"], "Also add a title.");

    // Refused with `troupe send`'s codes: nobody of that name 404, a bad name or text 400.
    let ghost = server.post("/api/send", r#"{"agent": "ghost", "text": "hi"}"#);
    assert_eq!(ghost.status, 404, "{ghost:?}");
    assert_eq!(ghost.json()["error"]["code"], "unknown_agent");
    assert_fails(
        &troupe_in(&cli_ws, &["send", "ghost", "hi"]),
        1,
        "[unknown_agent]",
    );
    assert_eq!(
        server
            .post("/api/send", r#"{"agent": "Lead!", "text": "hi"}"#)
            .status,
        400
    );
    let empty = server.post("/api/send", r#"{"agent": "writer", "text": ""}"#);
    assert_eq!(empty.status, 400, "{empty:?}");
    assert_eq!(writer_mail(&web_ws).len(), 1);
}

#[tokio::test]
async fn post_bodies_are_strict_json() {
    let (_dir, ws, plan) = workspace_with_a_plan().await;
    let server = Server::start(&ws);
    let id = plan.to_string();
    let duplicate = format!(r#"{{"request_id": "{id}", "approve": false, "approve": true}}"#);
    let refused = server.post("/api/review", &duplicate);
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("duplicate"));
    let unknown_field = format!(r#"{{"request_id": "{id}", "approve": true, "as": "writer"}}"#);
    assert_eq!(server.post("/api/review", &unknown_field).status, 400);
    let duplicate_send = r#"{"agent": "lead", "agent": "writer", "text": "hi"}"#;
    assert_eq!(server.post("/api/send", duplicate_send).status, 400);
    let not_json = request(
        server.port,
        "POST",
        "/api/review",
        &[
            ("Host", &server.host()),
            ("X-Troupe-Token", &server.token),
            ("Content-Type", "text/plain"),
        ],
        Some(format!(r#"{{"request_id": "{id}", "approve": true}}"#).as_bytes()),
    );
    assert_eq!(not_json.status, 415);
    let huge = format!(
        r#"{{"request_id": "{id}", "approve": true, "feedback": "{}"}}"#,
        "x".repeat(70 * 1024)
    );
    assert_eq!(server.post("/api/review", &huge).status, 413);
    // None of these answered the plan.
    assert_eq!(
        server.get_json("/api/state")["pending_plans"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// This machine's address on its default route, if it has one (no packet is sent).
fn other_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn the_server_listens_on_127_0_0_1_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    let stream = connect(server.port);
    assert_eq!(
        stream.peer_addr().unwrap(),
        SocketAddr::from(([127, 0, 0, 1], server.port))
    );
    if let Some(ip) = other_address() {
        let elsewhere = TcpStream::connect_timeout(&SocketAddr::new(ip, server.port), WAIT);
        assert!(elsewhere.is_err(), "reachable on {ip}");
    }
}

#[test]
fn sigterm_stops_the_server_with_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path());
    let mut child = server.child.take().unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: signalling our own child, which has not been waited for yet.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = rx
        .recv_timeout(WAIT)
        .expect("serve stops on SIGTERM")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(TcpStream::connect(("127.0.0.1", server.port)).is_err());
}

#[test]
fn timeline_html_is_one_offline_file_with_the_events() {
    let (dir, ws) = demo_workspace();
    let out = dir.path().join("timeline.html");
    let ran = troupe_in(&ws, &["timeline", "--html", out.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    let events = std::fs::read_to_string(Layout::new(&ws).events_log()).unwrap();
    let count = events.lines().count();
    assert!(
        ran.stdout.contains(&format!("wrote {count} events to ")),
        "{ran:#?}"
    );
    assert!(ran.stdout.contains("timeline.html"), "{ran:#?}");
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert!(
        !html.contains("__TOKEN__") && !html.contains("app.js?"),
        "no token, no files"
    );
    let start = html
        .find(r#"<script type="application/json" id="events">"#)
        .unwrap();
    let rest = &html[start..];
    let json_start = rest.find('>').unwrap() + 1;
    let json_end = rest.find("</script>").unwrap();
    let embedded: Value = serde_json::from_str(&rest[json_start..json_end]).unwrap();
    let expected: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(embedded, Value::Array(expected));
    assert!(html.contains(r#"id="timeline""#) && html.contains("<style>"));

    // Never into .troupe/, not even through a relative path.
    let inside = Layout::new(&ws).state_dir().join("timeline.html");
    let refused = troupe_in(&ws, &["timeline", "--html", inside.to_str().unwrap()]);
    assert_fails(&refused, 2, "state folder");
    let sneaky = ws.join(".troupe/../.troupe/t.html");
    let refused = troupe_in(&ws, &["timeline", "--html", sneaky.to_str().unwrap()]);
    assert_fails(&refused, 2, "state folder");
    assert!(!inside.exists());
}

/// A team shared through PostgreSQL, served from a folder with no state: its whole stream
/// (written by other processes), live through the database's NOTIFY; a message from the page
/// goes into the team's database; the folder stays empty.
#[test]
fn a_shared_team_is_served_from_its_database() {
    use troupe::store::events::{EventListener, EventLog, EventSink};
    use troupe::store::postgres::events::PgEventMirror;
    use troupe::store::postgres::testing::TestDb;
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let store = db.store("default");
    // Another process of the team writes its events.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(elsewhere.path().join(".troupe")).unwrap();
    let log = EventLog::open(
        &Layout::new(elsewhere.path()),
        Arc::new(SystemClock),
        "run-elsewhere".into(),
        troupe::secrets::Redactor::default(),
    )
    .unwrap();
    let mirror = PgEventMirror::start(&store);
    log.subscribe(mirror.clone() as Arc<dyn EventListener>);
    log.emit("troupe", "run_started", serde_json::Map::new());
    log.emit("lead", "assistant_text", {
        let mut m = serde_json::Map::new();
        m.insert("text".into(), "hello".into());
        m
    });
    let dir = tempfile::tempdir().unwrap();
    // Wait for the copies: the server's first read must see both.
    mirror.close();
    let server = Server::start_with(dir.path(), &["--store", &url]);
    let state = server.get_json("/api/state");
    assert_eq!(state["agents"][0]["name"], "lead", "{state:#}");
    let events = server.get_json("/api/events");
    let kinds: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["run_started", "assistant_text"]);
    let last = events[1]["seq"].as_u64().unwrap();
    assert_eq!(state["last_seq"].as_u64(), Some(last));
    // Live: an event another process adds reaches an open stream.
    let mut stream = open_stream(&server, &[]);
    assert_eq!(read_ids_until(&mut stream, last).last(), Some(&last));
    let follower = PgEventMirror::start(&store);
    log.subscribe(follower.clone() as Arc<dyn EventListener>);
    log.emit("lead", "assistant_text", {
        let mut m = serde_json::Map::new();
        m.insert("text".into(), "later".into());
        m
    });
    follower.close();
    assert_eq!(read_ids_until(&mut stream, last + 1), vec![last + 1]);
    // Older events come from the database by position, filtered or not.
    let page = server.get_json(&format!("/api/events?before={}&limit=5", last + 1));
    let kinds: Vec<&str> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["run_started", "assistant_text"], "{page:#}");
    assert_eq!(page["next_before"], Value::Null);
    let said = server.get_json("/api/events?before=end&agent=lead&q=HELLO");
    let seqs: Vec<u64> = said["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [last], "{said:#}");
    // Conversations come from the database (the lead has none yet).
    let conversation = server.get_json("/api/conversation?agent=lead");
    assert_eq!(conversation["messages"], json!([]), "{conversation:#}");
    // A message from the page lands in the team's database.
    let sent = server.post(
        "/api/send",
        r#"{"agent":"lead","text":"also the changelog"}"#,
    );
    assert_eq!(sent.status, 200, "{sent:?}");
    let mailbox = troupe_in(dir.path(), &["mailbox", "lead", "--json", "--store", &url]);
    let mailbox: Value = serde_json::from_str(&mailbox.stdout).unwrap();
    assert_eq!(
        mailbox["messages"][0]["message"]["content"],
        "also the changelog"
    );
    assert!(!dir.path().join(".troupe").exists());
}
