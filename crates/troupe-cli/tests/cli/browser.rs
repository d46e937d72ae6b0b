//! The live page of `troupe serve` in a real headless Chromium (through the DevTools client of
//! the bench, `src/bench/cdp.rs`), during a scripted `troupe run`: the agents and the timeline
//! appear, a person approves the teammate's pending plan by clicking, the teammate continues and
//! the run ends; requests without the token are refused. Screenshots of the page and of
//! `troupe timeline --html` go to `target/browser-artifacts/` (`serve-plan.png` with the plan
//! pending, `serve.png` after the run, `timeline.png`).
//!
//! Chromium must be installed (Debian's `chromium`; `.ci/run` installs it): without it the test
//! fails and says so. `TROUPE_SKIP_BROWSER=1` skips it with a notice, for machines that cannot
//! install it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::support::{command, troupe_in};

#[allow(dead_code)] // The bench uses more of it than these tests.
#[path = "../../src/bench/cdp.rs"]
pub(super) mod cdp;

use cdp::Page;

pub(super) const WAIT: Duration = Duration::from_secs(30);

pub(super) fn skipped() -> bool {
    let skip = std::env::var_os("TROUPE_SKIP_BROWSER").is_some_and(|v| v == "1");
    if skip {
        eprintln!("TROUPE_SKIP_BROWSER=1: the browser test is skipped");
    }
    skip
}

/// A real browser page, or a failure that says how to get Chromium.
pub(super) fn open_page() -> Page {
    Page::open().unwrap_or_else(|e| panic!("cannot drive a headless Chromium: {e}"))
}

/// `target/browser-artifacts/`, created.
pub(super) fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/browser-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A child process killed (if still running) when the test ends, pass or fail.
pub(super) struct Running(pub(super) Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads `reader` to its end in the background, line by line, into the channel.
pub(super) fn lines_of(reader: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Starts `troupe serve --port 0` on `ws` and returns it with the URL it printed.
pub(super) fn serve(ws: &Path) -> (Running, String) {
    let mut child = command(ws)
        .args(["serve", "--workspace", ws.to_str().unwrap(), "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let lines = lines_of(child.stdout.take().unwrap());
    let running = Running(child);
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("troupe serve printed no URL: {e}"));
        if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) {
            assert!(
                url.starts_with("http://127.0.0.1:") && url.contains("?token="),
                "{line}"
            );
            return (running, url.to_owned());
        }
    }
}

/// Waits for the run to close its stdout (it exits), within [`WAIT`]; its status and stdout.
pub(super) fn exit_of(
    run: &mut Running,
    stdout: &mpsc::Receiver<String>,
) -> (ExitStatus, Vec<String>) {
    let deadline = Instant::now() + WAIT;
    let mut lines = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match stdout.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("troupe run did not end: {lines:?}"),
        }
    }
    (run.0.wait().unwrap(), lines)
}

/// The status line of a plain HTTP request to the server of `url`.
fn status_line(url: &str, request_line: &str) -> String {
    let authority = url.trim_start_matches("http://").split('/').next().unwrap();
    let mut stream = TcpStream::connect(authority).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        stream,
        "{request_line}\r\nHost: {authority}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut first = String::new();
    BufReader::new(stream).read_line(&mut first).unwrap();
    first.trim_end().to_owned()
}

fn tool(name: &str, arguments: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": arguments}]})
}

#[tokio::test]
async fn a_person_approves_a_plan_in_the_browser_and_the_teammate_continues() {
    if skipped() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    // The lead spawns the writer and only ever answers in words: it never reviews the plan. The
    // writer plans, waits for a person's answer, then writes.
    let waiting = json!({"text": "Waiting for the writer."});
    let script = json!({"agents": {
        "lead": [
            tool("spawn_teammate", json!({"name": "writer", "role": "writer",
                                          "prompt": "Plan, then write out.txt."})),
            waiting, waiting, waiting, waiting, waiting, waiting, waiting, waiting
        ],
        "writer": [
            tool("submit_plan", json!({"plan": "Write out.txt."})),
            {"text": "Plan submitted."},
            tool("write_file", json!({"path": "out.txt", "content": "approved in the browser"})),
            {"text": "Wrote out.txt."}
        ]
    }});
    let script_path = ws.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let mut child = command(&ws)
        .args(["run", "--prompt", "Have a writer plan, then write."])
        .args(["--approval", "auto", "--model-script"])
        .arg(&script_path)
        .args(["--workspace", ws.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = lines_of(child.stdout.take().unwrap());
    let stderr = lines_of(child.stderr.take().unwrap());
    let mut run = Running(child);
    let (_server, url) = serve(&ws);

    let mut page = open_page();
    page.navigate(&url).unwrap();
    page.wait_for(
        r#"document.body.dataset.ready === '1'
           && document.querySelector('#agents .agent[data-agent="lead"]')
           && document.querySelector('#agents .agent[data-agent="writer"]')
           && document.querySelector('#timeline [data-seq]')"#,
        WAIT,
    )
    .unwrap();
    page.wait_for(
        "document.querySelector('.plan[data-request] button.approve')",
        WAIT,
    )
    .unwrap_or_else(|e| panic!("no pending plan on the page: {e}"));
    let request = page
        .evaluate("document.querySelector('.plan[data-request]').dataset.request")
        .unwrap();
    let request = request.as_str().unwrap().to_owned();
    assert!(
        !ws.join("out.txt").exists(),
        "the writer waits for the plan"
    );
    page.screenshot(&artifacts().join("serve-plan.png"))
        .unwrap();
    let seen = page
        .evaluate("Number(document.body.dataset.lastSeq)")
        .unwrap()
        .as_u64()
        .unwrap();

    page.evaluate("document.querySelector('.plan[data-request] button.approve').click(); true")
        .unwrap();
    // The teammate continues: its write shows on its lane, after what the page had shown.
    page.wait_for(
        &format!(
            r#"[...document.querySelectorAll('#timeline .event[data-kind="tool_finished"][data-agent="writer"]')]
               .some(e => Number(e.dataset.seq) > {seen})"#
        ),
        WAIT,
    )
    .unwrap();
    let (status, said) = exit_of(&mut run, &stdout);
    assert!(
        status.success(),
        "{status}; stdout: {said:?}; stderr: {:?}",
        stderr.try_iter().collect::<Vec<_>>()
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).unwrap(),
        "approved in the browser"
    );
    // The click answered the request in the protocol store, as `troupe review` does, and the
    // running writer consumed that answer.
    let store = troupe::store::protocol::JsonProtocolStore::open(
        &troupe::layout::Layout::new(&ws),
        std::sync::Arc::new(troupe::clock::SystemClock),
        std::sync::Arc::new(troupe::ids::RandomIds),
    )
    .unwrap();
    let answered = troupe::store::protocol::ProtocolStore::get(
        &store,
        troupe::wire::RequestId::parse(&request).unwrap(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        answered.stored_status(),
        troupe::wire::RequestStatus::Approved
    );
    let events =
        troupe::store::events::read::read_all(&troupe::layout::Layout::new(&ws).events_log())
            .unwrap();
    let consumed: Vec<&str> = events
        .iter()
        .filter(|e| e.kind == "request_consumed" && e.str("request_id") == Some(&request))
        .map(|e| e.agent.as_str())
        .collect();
    assert_eq!(consumed, ["writer"]);
    page.wait_for(
        "document.body.dataset.lastSeq && !document.querySelector('.plan[data-request] button.approve')",
        WAIT,
    )
    .unwrap();
    page.screenshot(&artifacts().join("serve.png")).unwrap();

    // Without the token, nothing is served: from the page's own origin, and plainly.
    let refused = page
        .evaluate(
            "Promise.all([fetch('/'), fetch('/?token=wrong')]).then(rs => rs.map(r => r.status))",
        )
        .unwrap();
    assert_eq!(refused, json!([403, 403]));
    assert!(status_line(&url, "GET / HTTP/1.1").contains(" 403 "));
    assert!(status_line(&url, "GET /?token=wrong HTTP/1.1").contains(" 403 "));

    // The same timeline as one file, opened from the disk.
    let html = artifacts().join("timeline.html");
    let timeline = troupe_in(&ws, &["timeline", "--html", html.to_str().unwrap()]);
    assert_eq!(timeline.code, 0, "{timeline:#?}");
    page.navigate(&format!("file://{}", html.display()))
        .unwrap();
    page.wait_for(
        r#"document.querySelector('#timeline .event[data-kind="tool_finished"][data-agent="writer"]')"#,
        WAIT,
    )
    .unwrap();
    page.screenshot(&artifacts().join("timeline.png")).unwrap();
}
