//! The telemetry suite: what OpenTelemetry export costs a run.
//!
//! - `model_call_overhead_us_p50`, `tool_call_overhead_us_p50`: the time the trace observer
//!   adds to one model call and one tool call on the calling thread (its `started` and
//!   `finished` reports: a span opened, its attributes set, the finished span queued), with
//!   export on to a local OTLP/HTTP receiver, minus the same reports to no observer, in rounds
//!   that never fill the queue (`spans_dropped` says whether that held). The export itself
//!   runs on the runtime's other threads meanwhile.
//! - `run_wall_ms_receiver_down` against `run_wall_ms_export_off`: medians of `runs`
//!   alternating runs of the `troupe` binary beside this one (a scripted lead making
//!   `tool_calls` tool calls), with export pointed at a port where nothing listens, and with
//!   export off.
//!
//! The local receiver is `--endpoint` (an OTLP/HTTP base URL, e.g. Arize Phoenix's), or else a
//! minimal one started here that answers every request `200 OK`.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use troupe::agent::RunObserver;
use troupe::model::{ModelResponse, ToolCall, Usage};
use troupe::telemetry::{ExportSettings, RunKey, RunRole, Telemetry, TelemetryOptions};
use troupe::tools::ToolOutcome;
use troupe::wire::AgentName;

use crate::result::BenchResult;
use crate::stats::{p50_us, round2};

pub fn run(
    dir: &Path,
    calls: usize,
    runs: usize,
    tool_calls: usize,
    endpoint: Option<&str>,
) -> BenchResult<Value> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (endpoint, receiver) = match endpoint {
        Some(url) => (url.trim_end_matches('/').to_owned(), "given"),
        None => (runtime.block_on(ok_receiver())?, "built-in 200 OK"),
    };
    let overhead = runtime.block_on(per_call_overhead(&endpoint, calls))?;
    let walls = run_walls(dir, runs, tool_calls)?;
    let ratio = if walls.off_ms > 0.0 {
        walls.down_ms / walls.off_ms
    } else {
        0.0
    };
    Ok(json!({
        "suite": "telemetry",
        "receiver": receiver,
        "calls": calls,
        "model_call_overhead_us_p50": round2(overhead.model_us),
        "tool_call_overhead_us_p50": round2(overhead.tool_us),
        "spans_exported": overhead.exported,
        "spans_dropped": overhead.dropped,
        "runs": runs,
        "tool_calls_per_run": tool_calls,
        "run_wall_ms_export_off": round2(walls.off_ms),
        "run_wall_ms_receiver_down": round2(walls.down_ms),
        "receiver_down_over_off": round2(ratio),
    }))
}

struct Overhead {
    model_us: f64,
    tool_us: f64,
    exported: u64,
    dropped: u64,
}

async fn per_call_overhead(endpoint: &str, calls: usize) -> BenchResult<Overhead> {
    let options = TelemetryOptions {
        export: ExportSettings {
            traces_url: format!("{endpoint}/v1/traces"),
            endpoint_source: "--endpoint".to_owned(),
            service_name: "troupe-bench".to_owned(),
            capture_content: false,
            timeout: Duration::from_secs(5),
        },
        provider: "openai".to_owned(),
        model: "bench-model".to_owned(),
    };
    let telemetry = Telemetry::start(
        &options,
        RunRole {
            key: RunKey::run(&uuid_like()),
            lead: true,
            team: "bench".to_owned(),
            sandbox: "workspace-write".to_owned(),
            redactor: Default::default(),
        },
    )
    .map_err(|e| e.to_string())?;
    let on: Arc<dyn RunObserver> = telemetry.observer();
    let off: Arc<dyn RunObserver> = Arc::new(troupe::agent::NullObserver);
    let agent = AgentName::lead();
    let mut response = ModelResponse::text("done", "bench-model");
    response.usage = Some(Usage {
        prompt_tokens: 1200,
        completion_tokens: 80,
        total_tokens: 1280,
        ..Usage::default()
    });
    let call = ToolCall {
        id: "call_1".to_owned(),
        name: "read_file".to_owned(),
        arguments: r#"{"path":"src/lib.rs"}"#.to_owned(),
    };
    let outcome = ToolOutcome {
        content: "fn main() {}".to_owned(),
        is_error: false,
        decision: None,
    };
    let measure = |observer: &Arc<dyn RunObserver>, n: usize| {
        let (mut model, mut tool) = (Vec::with_capacity(n), Vec::with_capacity(n));
        observer.turn_started(&agent);
        for i in 0..n {
            let start = Instant::now();
            observer.model_call_started(&agent, i + 1);
            observer.model_call_finished(&agent, &response);
            model.push(start.elapsed());
            let start = Instant::now();
            observer.tool_started(&agent, &call);
            observer.tool_finished(&agent, &call, &outcome);
            tool.push(start.elapsed());
        }
        (p50_us(&mut model), p50_us(&mut tool))
    };
    // Alternating rounds, so that a noisy moment weighs on both sides alike; each round queues
    // fewer spans than the queue holds, and the export catches up between rounds (as it does
    // between a run's calls, which wait for a model), so every span measured is queued, none
    // dropped.
    let per_round = troupe::telemetry::QUEUE_CAPACITY / 4;
    let rounds = (calls / per_round).max(1);
    let (mut model_deltas, mut tool_deltas) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (model_on, tool_on) = measure(&on, per_round);
        let (model_off, tool_off) = measure(&off, per_round);
        model_deltas.push(Duration::from_secs_f64(
            (model_on - model_off).max(0.0) / 1e6,
        ));
        tool_deltas.push(Duration::from_secs_f64((tool_on - tool_off).max(0.0) / 1e6));
        tokio::time::sleep(troupe::telemetry::BATCH_DELAY * 3).await;
    }
    let report = telemetry.close(true).await;
    Ok(Overhead {
        model_us: p50_us(&mut model_deltas),
        tool_us: p50_us(&mut tool_deltas),
        exported: report.exported,
        dropped: report.dropped,
    })
}

fn uuid_like() -> String {
    format!(
        "bench-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    )
}

/// A receiver that reads each OTLP request whole and answers `200 OK` (keep-alive).
async fn ok_receiver() -> BenchResult<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let url = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        match stream.read_line(&mut line).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        if line == "\r\n" {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(value) = lower.strip_prefix("content-length:") {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; length];
                    if stream.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if stream.get_mut().write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(url)
}

struct Walls {
    off_ms: f64,
    down_ms: f64,
}

/// Medians of alternating runs of the `troupe` binary beside this one, export off and export to
/// a port where nothing listens.
fn run_walls(dir: &Path, runs: usize, tool_calls: usize) -> BenchResult<Walls> {
    let troupe = std::env::current_exe()
        .map_err(|e| format!("cannot find troupe-bench: {e}"))?
        .with_file_name("troupe");
    let workspace = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let ws = workspace.path();
    std::fs::write(ws.join("notes.txt"), "notes\n").map_err(|e| e.to_string())?;
    let mut steps: Vec<Value> = (0..tool_calls)
        .map(|_| json!({"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}))
        .collect();
    steps.push(json!({"text": "done"}));
    let script = ws.join("script.json");
    std::fs::write(&script, json!({"agents": {"lead": steps}}).to_string())
        .map_err(|e| e.to_string())?;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?;
    let down_url = format!("http://{closed}");
    let once = |endpoint: Option<&str>| -> BenchResult<Duration> {
        let mut command = Command::new(&troupe);
        command
            .args(["run", "--prompt", "Read the notes.", "--approval", "auto"])
            .args(["--sandbox", "off", "--no-memory", "--max-turns"])
            .arg((tool_calls + 5).to_string())
            .arg("--model-script")
            .arg(&script)
            .arg("--workspace")
            .arg(ws)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        if let Some(url) = endpoint {
            command.env("OTEL_EXPORTER_OTLP_ENDPOINT", url);
        }
        let start = Instant::now();
        let status = command.status().map_err(|e| format!("troupe: {e}"))?;
        let took = start.elapsed();
        if !status.success() {
            return Err(format!("troupe run failed: {status}"));
        }
        Ok(took)
    };
    let (mut off, mut down) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        off.push(once(None)?);
        down.push(once(Some(&down_url))?);
    }
    Ok(Walls {
        off_ms: p50_us(&mut off) / 1000.0,
        down_ms: p50_us(&mut down) / 1000.0,
    })
}
