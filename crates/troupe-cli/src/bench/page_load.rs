//! `page_load_ms_10k`: how long the page of `troupe serve` takes, in headless Chromium, from the
//! start of navigation until it says it is ready (`<body data-ready="1">`) on a workspace holding
//! 10,000 events of a realistic run. Each load is in a fresh browser (no cache); the figure is
//! the median.
//!
//! `troupe-bench page-load` also reports the server's resident memory after the loads
//! (`VmRSS`, and its peak `VmHWM`, from `/proc/<pid>/status` of the `troupe serve` process) and
//! the first load on its own (it includes the server indexing the stream, when it had no
//! index yet).
//!
//! The moment of readiness is taken inside the page: a script installed before the page's own
//! records `performance.now()` (milliseconds since navigation start) when a mutation observer
//! first sees the flag, so the time to ask the page afterwards is not counted.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use troupe::clock::SystemClock;
use troupe::layout::Layout;
use troupe::secrets::Redactor;
use troupe::store::events::{kinds, EventLog};

use crate::cdp::Page;
use crate::result::BenchResult;

/// How long a load may take before the figure is given up.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Installed in every document before its own scripts: notes when the ready flag first shows.
const MARK_READY: &str = "(() => {
  const mark = () => {
    if (window.__troupeReadyAt === undefined && document.body
        && document.body.dataset.ready === '1') {
      window.__troupeReadyAt = performance.now();
      observer.disconnect();
    }
  };
  const observer = new MutationObserver(mark);
  observer.observe(document, { subtree: true, childList: true, attributes: true,
                               attributeFilter: ['data-ready'] });
})()";

/// The `troupe` binary: `TROUPE_BIN` if set, else the one beside this `troupe-bench` (cargo
/// builds both into one folder with `--bins`; `cargo run --bin troupe-bench` alone does not
/// rebuild it).
pub fn troupe_beside_this_binary() -> BenchResult<PathBuf> {
    if let Some(path) = std::env::var_os("TROUPE_BIN") {
        return Ok(PathBuf::from(path));
    }
    let this = std::env::current_exe().map_err(|e| format!("cannot find troupe-bench: {e}"))?;
    let troupe = this.with_file_name("troupe");
    if troupe.is_file() {
        Ok(troupe)
    } else {
        Err(format!(
            "{} is missing: build it first (cargo build --release --bins) or set TROUPE_BIN",
            troupe.display()
        ))
    }
}

/// The median milliseconds from navigation start to `body[data-ready="1"]` over `loads` loads of
/// the served page of a workspace holding `events` events, in a temporary folder under `dir`.
pub fn measure(dir: &Path, troupe: &Path, events: usize, loads: usize) -> BenchResult<f64> {
    measure_with_marks(dir, troupe, events, loads).map(|m| m.median)
}

/// What one measurement found.
pub struct Measured {
    /// Median ms to ready.
    pub median: f64,
    /// Ms to ready of the first load.
    pub first: f64,
    /// The median time of each `performance.mark` the page set (where the time went).
    pub marks: Map<String, Value>,
    /// `troupe serve`'s `VmRSS` and `VmHWM` after the loads, in bytes.
    pub memory: Option<(u64, u64)>,
}

/// [`measure`], with the marks, the first load and the server's memory.
pub fn measure_with_marks(
    dir: &Path,
    troupe: &Path,
    events: usize,
    loads: usize,
) -> BenchResult<Measured> {
    let workspace = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    write_events(workspace.path(), events)?;
    let serve = Serve::start(troupe, workspace.path())?;
    let mut ready = Vec::with_capacity(loads);
    let mut marks: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for _ in 0..loads {
        let (at, marked) = load_once(&serve.url)?;
        ready.push(at);
        for (name, at) in marked {
            marks.entry(name).or_default().push(at);
        }
    }
    let memory = memory_of(serve.child.id());
    let first = ready.first().copied().unwrap_or(0.0);
    let median = median_of(ready).ok_or_else(|| "no load measured (loads = 0)".to_string())?;
    let marks = marks
        .into_iter()
        .filter_map(|(name, times)| Some((name, json!(crate::stats::round2(median_of(times)?)))))
        .collect();
    Ok(Measured {
        median,
        first,
        marks,
        memory,
    })
}

/// `VmRSS` and `VmHWM` of process `pid`, in bytes (Linux; none elsewhere).
fn memory_of(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn median_of(mut samples: Vec<f64>) -> Option<f64> {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied()
}

/// One load in a fresh browser: ms to ready, and the page's own marks.
fn load_once(url: &str) -> BenchResult<(f64, Vec<(String, f64)>)> {
    let mut page = Page::open()?;
    page.add_init_script(MARK_READY)?;
    page.navigate(url)?;
    page.wait_for(
        "document.body && document.body.dataset.ready === '1'",
        READY_TIMEOUT,
    )?;
    let ready = page
        .evaluate("window.__troupeReadyAt")?
        .as_f64()
        .ok_or_else(|| "the page got ready before the timing script saw it".to_string())?;
    let marks =
        page.evaluate("performance.getEntriesByType('mark').map(m => [m.name, m.startTime])")?;
    let marks = marks
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|m| Some((m.get(0)?.as_str()?.to_string(), m.get(1)?.as_f64()?)))
                .collect()
        })
        .unwrap_or_default();
    Ok((ready, marks))
}

/// `events` events of a lead and three teammates at work: model calls, the model's words, tool
/// calls (some denied), messages and their delivery, statuses; a `run_ended` last.
pub fn write_events(workspace: &Path, events: usize) -> BenchResult<()> {
    let layout = Layout::new(workspace);
    std::fs::create_dir_all(layout.state_dir()).map_err(|e| e.to_string())?;
    let log = EventLog::open(
        &layout,
        Arc::new(SystemClock),
        "bench-run".to_string(),
        Redactor::default(),
    )
    .map_err(|e| e.to_string())?;
    // All but the closing `run_ended`.
    let body = events.saturating_sub(1);
    let written = std::cell::Cell::new(0);
    let emit = |agent: &str, kind: &'static str, fields: Value| {
        if written.get() < body {
            log.record(agent, kind, kinds::fields(fields));
            written.set(written.get() + 1);
        }
    };
    emit(
        "troupe",
        kinds::RUN_STARTED,
        json!({ "prompt": "Refactor the parser and add tests", "workspace": ".", "model": "gpt-4o" }),
    );
    let teammates = ["parser", "tests", "docs"];
    for name in teammates {
        emit(
            name,
            kinds::TEAMMATE_SPAWNED,
            json!({ "role": format!("{name} worker") }),
        );
    }
    let mut turn = 0usize;
    while written.get() < body {
        let agent = if turn.is_multiple_of(4) {
            "lead"
        } else {
            teammates[turn % 3]
        };
        let call_id = format!("call_{turn}");
        emit(
            agent,
            kinds::MODEL_CALL_STARTED,
            json!({ "call": 1, "purpose": "turn" }),
        );
        emit(
            agent,
            kinds::MODEL_CALL_FINISHED,
            json!({ "model": "gpt-4o", "latency_ms": 900 + turn % 700, "tokens_in": 4000 + turn,
                    "tokens_out": 120 + turn % 300, "finish_reason": "tool_calls", "attempts": 1,
                    "fallback_used": false }),
        );
        emit(
            agent,
            kinds::ASSISTANT_TEXT,
            json!({ "text": format!("Step {turn}: reading the module and checking its callers before the change.") }),
        );
        let arguments = format!(r#"{{"path":"src/parser/part_{turn}.rs"}}"#);
        emit(
            agent,
            kinds::TOOL_STARTED,
            Value::Object(kinds::tool_started(&call_id, "read_file", &arguments)),
        );
        let denied = turn % 25 == 24;
        emit(
            agent,
            kinds::TOOL_FINISHED,
            if denied {
                json!({ "call_id": call_id, "tool": "read_file", "duration_ms": 0, "outcome": "denied",
                        "rule": "deny read .env*", "denial_reason": "matches a deny rule", "preview": "" })
            } else {
                json!({ "call_id": call_id, "tool": "read_file", "duration_ms": 3 + turn % 40,
                        "outcome": "ok", "preview": "pub fn parse(input: &str) -> Result<Ast, ParseError> {" })
            },
        );
        if turn % 3 == 2 {
            let to = if agent == "lead" {
                teammates[turn % 3]
            } else {
                "lead"
            };
            let message_id = format!("00000000-0000-4000-8000-{turn:012}");
            emit(
                agent,
                kinds::MESSAGE_SENT,
                json!({ "message_id": message_id, "from": agent, "to": to, "message_kind": "text",
                        "preview": format!("Done with part {turn}; the tests pass.") }),
            );
            emit(
                to,
                kinds::MESSAGE_CLAIMED,
                json!({ "message_id": message_id }),
            );
            emit(
                to,
                kinds::MESSAGE_ACKED,
                json!({ "message_id": message_id }),
            );
        }
        if turn % 10 == 9 && agent != "lead" {
            emit(agent, kinds::TEAMMATE_STATUS, json!({ "status": "idle" }));
            emit(
                agent,
                kinds::TEAMMATE_STATUS,
                json!({ "status": "working" }),
            );
        }
        turn += 1;
    }
    log.record(
        "troupe",
        kinds::RUN_ENDED,
        kinds::fields(
            json!({ "exit_code": 0, "outcome": "done", "answer": "All parts refactored." }),
        ),
    );
    Ok(())
}

/// A running `troupe serve`, stopped on drop.
struct Serve {
    child: Child,
    /// The printed URL, with its token.
    url: String,
}

impl Serve {
    fn start(troupe: &Path, workspace: &Path) -> BenchResult<Serve> {
        let mut child = Command::new(troupe)
            .arg("serve")
            .arg("--workspace")
            .arg(workspace)
            .args(["--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {} serve: {e}", troupe.display()))?;
        let stdout = child.stdout.take();
        let (sender, urls) = mpsc::channel();
        std::thread::spawn(move || {
            let Some(stdout) = stdout else { return };
            // Reads to the end, so that the server never blocks on a full pipe.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = url_in(&line) {
                    let _ = sender.send(url);
                }
            }
        });
        let mut serve = Serve {
            child,
            url: String::new(),
        };
        serve.url = urls
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| "troupe serve printed no http:// URL within 30 s".to_string())?;
        Ok(serve)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first `http://` word of a line.
pub fn url_in(line: &str) -> Option<String> {
    line.split_whitespace()
        .find(|word| word.starts_with("http://"))
        .map(str::to_string)
}

/// The hook for `troupe-bench events`: `{"page_load_ms_10k": …}` measured with the `troupe`
/// binary beside this one, to merge into the suite's object.
pub fn figures(dir: &Path) -> BenchResult<Map<String, Value>> {
    let troupe = troupe_beside_this_binary()?;
    let median = measure(dir, &troupe, 10_000, 5)?;
    let mut figures = Map::new();
    figures.insert(
        "page_load_ms_10k".to_string(),
        json!(crate::stats::round2(median)),
    );
    Ok(figures)
}

/// `troupe-bench page-load`: the figure on its own, with its inputs and the page's marks.
pub fn run(dir: &Path, events: usize, loads: usize) -> BenchResult<Value> {
    let troupe = troupe_beside_this_binary()?;
    let measured = measure_with_marks(dir, &troupe, events, loads)?;
    let (rss, hwm) = measured.memory.unzip();
    Ok(json!({
        "events": events,
        "loads": loads,
        "page_load_ms_median": crate::stats::round2(measured.median),
        "page_load_ms_first": crate::stats::round2(measured.first),
        "goal_ms": 1000,
        "page_marks_ms_median": measured.marks,
        "serve_rss_bytes": rss,
        "serve_hwm_bytes": hwm,
        "serve_rss_mib": rss.map(|b| crate::stats::round2(b as f64 / 1_048_576.0)),
        "serve_hwm_mib": hwm.map(|b| crate::stats::round2(b as f64 / 1_048_576.0)),
        "goal_rss_mib": 100,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_holds_exactly_the_events_asked_for_ending_the_run() {
        let dir = tempfile::tempdir().unwrap();
        write_events(dir.path(), 1_000).unwrap();
        let events =
            troupe::store::events::read::read_all(&Layout::new(dir.path()).events_log()).unwrap();
        assert_eq!(events.len(), 1_000);
        assert_eq!(events.last().unwrap().kind, kinds::RUN_ENDED);
        assert!(events.iter().any(|e| e.str("outcome") == Some("denied")));
        assert!(events.iter().any(|e| e.kind == kinds::MESSAGE_SENT));
    }

    #[test]
    fn the_url_is_the_first_http_word() {
        assert_eq!(
            url_in("troupe serve: http://127.0.0.1:41234/?token=abc (Ctrl-C stops)").as_deref(),
            Some("http://127.0.0.1:41234/?token=abc")
        );
        assert_eq!(url_in("listening"), None);
    }
}
