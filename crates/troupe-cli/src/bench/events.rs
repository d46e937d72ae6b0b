//! The events suite (SPEC §10): what the event stream costs the run, and how soon a follower
//! sees an event.
//!
//! - `append_us_*`: one `tool_finished` event with typical fields recorded by
//!   [`EventLog::record`] on a real `.troupe/events.jsonl` (redaction against one secret, the
//!   line built, the append), per event.
//! - `follow_latency_ms_*`: from just before an event is recorded until a `troupe log -f --json`
//!   child process (the real binary, next to this one) has printed it on its stdout, one event
//!   at a time. The child wakes on inotify; this process blocks reading its pipe.
//!
//! The web view's `page_load_ms_10k` is measured elsewhere (in a browser) and is not part of
//! this suite's output.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use troupe::clock::SystemClock;
use troupe::layout::Layout;
use troupe::secrets::Redactor;
use troupe::store::events::{kinds, EventLog};
use troupe::wire::Event;

use crate::result::{fail, BenchResult};
use crate::stats::{percentile_us, round2};

/// Appends before the measured ones (page cache, allocator).
const WARMUP: usize = 500;

pub fn run(dir: &Path, appends: usize, follows: usize) -> BenchResult<Value> {
    let disk = crate::disk::durable_writes_per_s(dir, Duration::from_secs(2))?;
    let mut append = append_samples(dir, appends)?;
    let mut follow = follow_samples(dir, follows)?;
    let ms = |us: f64| round2(us / 1e3);
    // The served page in headless Chromium; without a browser the figure is null, with why.
    let page = crate::page_load::figures(dir).unwrap_or_else(|e| {
        let mut none = Map::new();
        none.insert("page_load_ms_10k".into(), Value::Null);
        none.insert("page_load_error".into(), Value::from(e));
        none
    });
    let mut figures = json!({
        "suite": "events",
        "appends": appends,
        "follows": follows,
        "disk_durable_writes_per_s": round2(disk),
        "append_us_p50": round2(percentile_us(&mut append, 50.0)),
        "append_us_p90": round2(percentile_us(&mut append, 90.0)),
        "append_us_p99": round2(percentile_us(&mut append, 99.0)),
        "follow_latency_ms_p50": ms(percentile_us(&mut follow, 50.0)),
        "follow_latency_ms_p90": ms(percentile_us(&mut follow, 90.0)),
        "follow_latency_ms_p99": ms(percentile_us(&mut follow, 99.0)),
    });
    if let Value::Object(all) = &mut figures {
        all.extend(page);
    }
    Ok(figures)
}

/// A fresh workspace with its state folder and an open event stream.
fn open_log(dir: &Path) -> BenchResult<(tempfile::TempDir, EventLog)> {
    let workspace = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let layout = Layout::new(workspace.path());
    std::fs::create_dir_all(layout.state_dir()).map_err(|e| e.to_string())?;
    let log = EventLog::open(
        &layout,
        Arc::new(SystemClock),
        "00000000-0000-4000-8000-0000000000e1".into(),
        // A run always redacts its API key.
        Redactor::new(["sk-bench-not-a-real-key-0123456789"]),
    )
    .map_err(|e| e.to_string())?;
    Ok((workspace, log))
}

/// The fields of a typical `tool_finished`.
fn tool_finished(i: usize) -> Map<String, Value> {
    kinds::fields(json!({
        "call_id": format!("call_{i}"),
        "tool": "read_file",
        "duration_ms": 3,
        "outcome": "ok",
        "rule": "default",
        "preview": kinds::preview(
            "fn main() {\n    println!(\"hello, world\");\n}\n// and some more text of the file"
        ),
    }))
}

fn append_samples(dir: &Path, appends: usize) -> BenchResult<Vec<Duration>> {
    let (_workspace, log) = open_log(dir)?;
    for i in 0..WARMUP {
        log.record("lead", kinds::TOOL_FINISHED, tool_finished(i));
    }
    let mut samples = Vec::with_capacity(appends);
    for i in 0..appends {
        let fields = tool_finished(i);
        let start = Instant::now();
        log.record("lead", kinds::TOOL_FINISHED, fields);
        samples.push(start.elapsed());
    }
    // Every append landed: the stream holds them all, gapless.
    let last = troupe::store::events::read::last_seq(log.path()).map_err(|e| e.to_string())?;
    if last != (WARMUP + appends) as u64 {
        return Err(format!(
            "the stream ends at seq {last}, not {}",
            WARMUP + appends
        ));
    }
    Ok(samples)
}

/// The `troupe` binary built next to this one.
fn troupe_binary() -> BenchResult<PathBuf> {
    let me =
        std::env::current_exe().map_err(|e| fail("cannot find troupe-bench")(e.to_string()))?;
    let path = me.with_file_name("troupe");
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} not found: build it first (cargo build --release)",
            path.display()
        ))
    }
}

/// The follower process; stopped (SIGTERM) and reaped however the suite ends.
struct Follower(Child);

impl Drop for Follower {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            // SAFETY: kill on the pid of our own child, not reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let _ = self.0.wait();
    }
}

/// Reads lines of the follower until the event `seq`.
fn wait_for(lines: &mut impl BufRead, seq: u64) -> BenchResult<()> {
    let mut line = String::new();
    loop {
        line.clear();
        let read = lines
            .read_line(&mut line)
            .map_err(|e| fail("reading troupe log")(e.to_string()))?;
        if read == 0 {
            return Err(format!("troupe log -f ended before event {seq}"));
        }
        let event = Event::parse_line(line.trim_end())
            .map_err(|e| format!("troupe log printed {line:?}: {e}"))?;
        if event.seq >= seq {
            return Ok(());
        }
    }
}

fn follow_samples(dir: &Path, follows: usize) -> BenchResult<Vec<Duration>> {
    let troupe = troupe_binary()?;
    let (workspace, log) = open_log(dir)?;
    // One event before the follower starts: its first line says that its watch is in place.
    let first = log.record("lead", kinds::TOOL_FINISHED, tool_finished(0));
    let mut follower = Follower(
        Command::new(troupe)
            .args(["log", "-f", "--json", "--workspace"])
            .arg(workspace.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| fail("cannot start troupe log -f")(e.to_string()))?,
    );
    let stdout = follower
        .0
        .stdout
        .take()
        .ok_or("troupe log -f has no stdout")?;
    let mut lines = BufReader::new(stdout);
    wait_for(&mut lines, first.seq)?;
    let mut samples = Vec::with_capacity(follows);
    for i in 1..=follows {
        let fields = tool_finished(i);
        let start = Instant::now();
        let event = log.record("lead", kinds::TOOL_FINISHED, fields);
        wait_for(&mut lines, event.seq)?;
        samples.push(start.elapsed());
    }
    drop(follower);
    Ok(samples)
}
