//! The contention suite: real OS processes on one workspace.
//!
//! `procs` worker processes each run `n` plan round trips on one protocol store, and `procs`
//! processes each send `n` messages to one mailbox while this process claims and acks. Locks
//! wait (they never give up), so the expected result is zero errors, every request resolved
//! exactly once and every message in `done/` exactly once.

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use troupe::clock::{Clock, SystemClock};
use troupe::error::ErrorCode;
use troupe::ids::RandomIds;
use troupe::layout::Layout;
use troupe::store::mailbox::{FileMailboxStore, MailboxEntry, MailboxState, MailboxStore};
use troupe::store::protocol::{JsonProtocolStore, ProtocolStore};
use troupe::wire::{AgentName, RequestStatus};

use crate::result::{block_on, BenchResult};
use crate::stats::{per_second, round2};

const SINK: &str = "sink";

fn spawn_worker(workspace: &Path, role: &str, index: usize, n: usize) -> BenchResult<Child> {
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    Command::new(exe)
        .arg("contention-worker")
        .arg("--workspace")
        .arg(workspace)
        .args([
            "--role",
            role,
            "--index",
            &index.to_string(),
            "--n",
            &n.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawn worker: {e}"))
}

/// What a worker reports on stdout: `{"errors": k, "lock_timeouts": t, "first_error": …}`.
fn collect(mut child: Child) -> BenchResult<(u64, u64)> {
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        stdout
            .read_to_string(&mut out)
            .map_err(|e| format!("worker output: {e}"))?;
    }
    let status = child.wait().map_err(|e| format!("wait worker: {e}"))?;
    let report: Value = serde_json::from_str(out.trim())
        .map_err(|e| format!("worker exited {status} with unreadable report {out:?}: {e}"))?;
    if let Some(first) = report["first_error"].as_str() {
        eprintln!("troupe-bench: worker error: {first}");
    }
    Ok((
        report["errors"].as_u64().unwrap_or(1),
        report["lock_timeouts"].as_u64().unwrap_or(0),
    ))
}

pub fn run(dir: &Path, procs: usize, n: usize) -> BenchResult<Value> {
    block_on(run_async(dir, procs, n))?
}

async fn run_async(dir: &Path, procs: usize, n: usize) -> BenchResult<Value> {
    let disk = crate::disk::durable_writes_per_s(dir, Duration::from_secs(2))?;
    let ws = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let layout = Layout::new(ws.path());
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let sink = AgentName::parse(SINK).map_err(|e| e.to_string())?;

    let start = Instant::now();
    let mut protocol_workers = Vec::new();
    let mut senders = Vec::new();
    for i in 0..procs {
        protocol_workers.push(spawn_worker(ws.path(), "protocol", i, n)?);
        senders.push(spawn_worker(ws.path(), "sender", i, n)?);
    }

    // Claim while the senders run; stop once they have all exited and nothing is left.
    let mailbox = FileMailboxStore::new(&layout, clock.clone());
    let mut claimed = 0usize;
    let mut errors = 0u64;
    let mut lock_timeouts = 0u64;
    loop {
        match mailbox.claim(&sink).await {
            Ok(Some(msg)) => {
                if let Err(e) = mailbox.ack(&sink, &msg).await {
                    eprintln!("troupe-bench: ack: {e}");
                    errors += 1;
                }
                claimed += 1;
            }
            Ok(None) => {
                let mut all_exited = true;
                for child in &mut senders {
                    if child.try_wait().map_err(|e| e.to_string())?.is_none() {
                        all_exited = false;
                    }
                }
                if all_exited
                    && mailbox
                        .claim(&sink)
                        .await
                        .map(|m| m.is_none())
                        .unwrap_or(false)
                {
                    break;
                }
                // Not a synchronisation sleep in a test: the claimer backs off while the
                // senders are still writing.
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => {
                eprintln!("troupe-bench: claim: {e}");
                errors += 1;
                if errors > 100 {
                    return Err("too many claim errors".into());
                }
            }
        }
    }
    for child in senders.into_iter().chain(protocol_workers) {
        let (e, t) = collect(child)?;
        errors += e;
        lock_timeouts += t;
    }
    let span = start.elapsed();

    // Verify from disk, with fresh instances.
    let protocol = JsonProtocolStore::open(&layout, clock.clone(), Arc::new(RandomIds))
        .map_err(|e| e.to_string())?;
    let requests = protocol.list().await.map_err(|e| e.to_string())?;
    let resolved: HashSet<_> = requests
        .iter()
        .filter(|r| r.stored_status() == RequestStatus::Approved)
        .map(|r| r.id())
        .collect();
    let resolutions: HashSet<_> = requests
        .iter()
        .filter_map(|r| r.resolution().map(|res| res.message_id))
        .collect();
    let mailbox = FileMailboxStore::new(&layout, clock);
    let done = mailbox
        .list(&sink, MailboxState::Done)
        .await
        .map_err(|e| e.to_string())?;
    let done_ids: HashSet<_> = done
        .iter()
        .filter_map(|e| match e {
            MailboxEntry::Message(m) => Some(m.id()),
            MailboxEntry::Invalid { .. } => None,
        })
        .collect();
    let counts = mailbox.counts(&sink).await.map_err(|e| e.to_string())?;
    let expected = procs * n;
    let ok = resolved.len() == expected
        && resolutions.len() == expected
        && requests.len() == expected
        && done_ids.len() == expected
        && done.len() == expected
        && counts.ready + counts.processing + counts.quarantine == 0
        && claimed == expected
        && errors == 0;
    Ok(json!({
        "suite": "contention",
        "procs": procs,
        "n": n,
        "disk_durable_writes_per_s": round2(disk),
        "errors": errors,
        "lock_timeouts": lock_timeouts,
        "requests_created": requests.len(),
        "requests_resolved": resolved.len(),
        "messages_sent": expected,
        "messages_claimed": claimed,
        "messages_done": done_ids.len(),
        "wall_s": round2(span.as_secs_f64()),
        "ops_per_s": round2(per_second(expected * 3, span)),
        "ok": ok,
    }))
}

/// A worker process: `protocol` runs n round trips as teammate `w-<index>`; `sender` sends n
/// messages to the sink mailbox. Prints its report as one JSON line.
pub fn worker(workspace: &Path, role: &str, index: usize, n: usize) -> ExitCode {
    match block_on(work(workspace, role, index, n)) {
        Ok(code) => code,
        Err(e) => {
            println!(
                "{}",
                json!({"errors": 1, "lock_timeouts": 0, "first_error": e})
            );
            ExitCode::SUCCESS
        }
    }
}

async fn work(workspace: &Path, role: &str, index: usize, n: usize) -> ExitCode {
    let layout = Layout::new(workspace);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let mut errors = 0u64;
    let mut lock_timeouts = 0u64;
    let mut first_error: Option<String> = None;
    let mut note = |code: &str, e: String| {
        errors += 1;
        if code.contains("lock") {
            lock_timeouts += 1;
        }
        first_error.get_or_insert(e);
    };
    match role {
        "protocol" => match JsonProtocolStore::open(&layout, clock.clone(), Arc::new(RandomIds)) {
            Ok(store) => match AgentName::parse(&format!("w-{index}")) {
                Ok(me) => {
                    for _ in 0..n {
                        let done = crate::protocol::round_trip(&store, clock.as_ref(), &me).await;
                        if let Err(e) = done {
                            note("protocol", e);
                        }
                    }
                }
                Err(e) => note("name", e.to_string()),
            },
            Err(e) => note(e.code(), e.to_string()),
        },
        "sender" => {
            let store = FileMailboxStore::new(&layout, clock.clone());
            for i in 0..n {
                let sent =
                    match crate::mailbox::message(&RandomIds, clock.as_ref(), "lead", SINK, i) {
                        Ok(m) => store
                            .send(&m)
                            .await
                            .map_err(|e| format!("{} [{}]", e, e.code())),
                        Err(e) => Err(e),
                    };
                if let Err(e) = sent {
                    note("send", e);
                }
            }
        }
        other => note("role", format!("unknown role {other}")),
    }
    println!(
        "{}",
        json!({"errors": errors, "lock_timeouts": lock_timeouts, "first_error": first_error})
    );
    ExitCode::SUCCESS
}
