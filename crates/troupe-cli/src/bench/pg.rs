//! The PostgreSQL suite (`troupe-bench pg`): the shared store against the local server, with
//! the file store measured in the same run for comparison. Every figure from real processes
//! or threads on this machine, in a schema of its own (dropped at the end):
//!
//! - `sends_per_s`: `procs` threads send `n` messages each to one mailbox;
//! - `claim_ack_per_s`: `procs` consumer processes claim and ack them all (each message done
//!   exactly once, checked);
//! - `raw_commits_per_s`: what the server allows — `procs` connections each committing `n`
//!   single-row inserts, one transaction each, at once (same server, same run); with
//!   `claim_ack_vs_commits` and `sends_vs_commits`, troupe's rates as a share of it;
//! - `protocol_round_trip_us_p50`: create + consume of a plan request;
//! - `wake_latency_ms_p50`: a send → a listener in another connection sees its NOTIFY;
//! - `takeover_s`: a worker process holding a teammate and a claimed message is SIGKILLed →
//!   another worker (this process, looking every tenth of the lease, as `troupe worker` does)
//!   leases the teammate and handles the redelivered message.

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use troupe::clock::{Clock, SystemClock};
use troupe::ids::{IdGenerator, RandomIds};
use troupe::layout::Layout;
use troupe::store::mailbox::{FileMailboxStore, MailboxEntry, MailboxState, MailboxStore};
use troupe::store::postgres::testing::TestDb;
use troupe::store::postgres::wake::{listen, Wake};
use troupe::store::postgres::{Lease, PgMailboxStore, PgProtocolStore, PgRoster, PgStore};
use troupe::store::protocol::{JsonProtocolStore, NewRequest, ProtocolStore, DEFAULT_TTL};
use troupe::wire::message::Envelope;
use troupe::wire::{
    AgentName, Content, ProtocolMessage, RequestKind, TeammateRecord, TeammateStatus,
};

use crate::result::{block_on, runtime, BenchResult};
use crate::stats::{p50_us, per_second, round2};

const SINK: &str = "sink";
const TEAM: &str = "bench";

fn sink() -> AgentName {
    AgentName::parse(SINK).unwrap_or_else(|_| AgentName::lead())
}

/// Where the consumers claim: a PostgreSQL URL, or a workspace folder.
enum Target<'a> {
    Pg(&'a str),
    Files(&'a Path),
}

fn spawn_consumer(target: &Target<'_>, index: usize) -> BenchResult<Child> {
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let mut command = Command::new(exe);
    command
        .arg("pg-worker")
        .args(["--index", &index.to_string()]);
    match target {
        Target::Pg(url) => command.args(["--role", "consume", "--url", url]),
        Target::Files(ws) => command.args(["--role", "consume-files", "--url"]).arg(ws),
    };
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawn a consumer: {e}"))
}

fn report(mut child: Child) -> BenchResult<Value> {
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        stdout
            .read_to_string(&mut out)
            .map_err(|e| format!("consumer output: {e}"))?;
    }
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    serde_json::from_str(out.trim())
        .map_err(|e| format!("a worker exited {status} with an unreadable report {out:?}: {e}"))
}

/// `procs` threads send `n` messages each; the rate over the whole span.
fn sends(store: Arc<dyn MailboxStore>, procs: usize, n: usize) -> BenchResult<(f64, u64)> {
    let ids = Arc::new(RandomIds);
    let clock = SystemClock;
    let start = Instant::now();
    let errors: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..procs)
            .map(|_| {
                let store = store.clone();
                let ids = ids.clone();
                scope.spawn(move || {
                    // Each thread on a runtime of its own, as each sender process would be.
                    block_on(async {
                        let mut errors = 0u64;
                        for _ in 0..n {
                            let sent = match crate::mailbox::message(
                                ids.as_ref(),
                                &clock,
                                "lead",
                                SINK,
                                0,
                            ) {
                                Ok(m) => store.send(&m).await.map_err(|e| e.to_string()),
                                Err(e) => Err(e),
                            };
                            if sent.is_err() {
                                errors += 1;
                            }
                        }
                        errors
                    })
                    .unwrap_or(n as u64)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(n as u64))
            .sum()
    });
    Ok((per_second(procs * n, start.elapsed()), errors))
}

/// `procs` consumer processes drain the sink; the rate, the errors, and whether every
/// message ended done exactly once.
fn drain(
    target: &Target<'_>,
    store: &dyn MailboxStore,
    procs: usize,
    total: usize,
) -> BenchResult<(f64, u64, bool)> {
    let start = Instant::now();
    let children: Vec<Child> = (0..procs)
        .map(|i| spawn_consumer(target, i))
        .collect::<BenchResult<_>>()?;
    let mut errors = 0;
    let mut acked = 0;
    for child in children {
        let r = report(child)?;
        errors += r["errors"].as_u64().unwrap_or(1);
        acked += r["acked"].as_u64().unwrap_or(0);
    }
    let elapsed = start.elapsed();
    let done = block_on(store.list(&sink(), MailboxState::Done))?.map_err(|e| e.to_string())?;
    let unique: HashSet<_> = done
        .iter()
        .filter_map(|e| match e {
            MailboxEntry::Message(m) => Some(m.id()),
            MailboxEntry::Invalid { .. } => None,
        })
        .collect();
    let exactly_once = done.len() == total && unique.len() == total && acked == total as u64;
    Ok((per_second(total, elapsed), errors, exactly_once))
}

fn plan() -> BenchResult<NewRequest> {
    Ok(NewRequest {
        kind: RequestKind::PlanApproval,
        sender: AgentName::parse("writer").map_err(|e| e.to_string())?,
        target: AgentName::lead(),
        content: Content::parse("the plan").map_err(|e| e.to_string())?,
        ttl: DEFAULT_TTL,
    })
}

fn round_trips(store: &dyn ProtocolStore, rounds: usize) -> BenchResult<f64> {
    block_on(round_trips_async(store, rounds))?
}

async fn round_trips_async(store: &dyn ProtocolStore, rounds: usize) -> BenchResult<f64> {
    let ids = RandomIds;
    let clock = SystemClock;
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        let request = store.create(plan()?).await.map_err(|e| e.to_string())?;
        let answer = ProtocolMessage::response(
            Envelope {
                id: ids.message_id(),
                sender: request.target().clone(),
                recipient: request.sender().clone(),
                content: Content::parse("Approved").map_err(|e| e.to_string())?,
                created_at_utc: clock.now(),
            },
            request.kind().response_message_kind(),
            request.id(),
            true,
        )
        .map_err(|e| e.to_string())?;
        store
            .consume_response(&answer)
            .await
            .map_err(|e| e.to_string())?;
        samples.push(start.elapsed());
    }
    Ok(p50_us(&mut samples))
}

/// A send, then the wait until a listener on another connection sees its notification.
fn wake_latency(pg: &PgStore, mailbox: &dyn MailboxStore, samples: usize) -> BenchResult<f64> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let stop = tokio_util::sync::CancellationToken::new();
    listen(pg, tx, stop.clone());
    let first = rx.blocking_recv();
    if first != Some(Wake::Rescan) {
        return Err(format!("the listener did not start: {first:?}"));
    }
    let ids = RandomIds;
    let clock = SystemClock;
    let runtime = runtime()?;
    let mut latencies = Vec::with_capacity(samples);
    for i in 0..samples {
        let message = crate::mailbox::message(&ids, &clock, "lead", "waker", i)?;
        let start = Instant::now();
        runtime
            .block_on(mailbox.send(&message))
            .map_err(|e| e.to_string())?;
        loop {
            match rx.blocking_recv() {
                Some(Wake::Agent(name)) if name == "waker" => break,
                Some(_) => continue,
                None => return Err("the listener stopped".into()),
            }
        }
        latencies.push(start.elapsed());
    }
    stop.cancel();
    Ok(p50_us(&mut latencies) / 1000.0)
}

/// A worker process holds the teammate `mate` and a claimed message; it is SIGKILLed; this
/// process looks like `troupe worker` does until it holds `mate` and has handled the message.
fn takeover(url: &str, pg: &PgStore, lease: Duration) -> BenchResult<f64> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let mate = AgentName::parse("mate").map_err(|e| e.to_string())?;
    let roster = PgRoster::new(pg.clone(), "bench-survivor", lease);
    // The roster is async: its calls run on one small runtime of this look.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime
        .block_on(roster.add(&TeammateRecord {
            name: mate.clone(),
            role: "bench".into(),
            status: TeammateStatus::Idle,
            detail: None,
            updated_at_utc: clock.now(),
            plan_required: false,
            earlier_plan: None,
            definition: None,
            isolation: troupe_wire::Isolation::None,
        }))
        .map_err(|e| e.to_string())?;
    let mailbox = PgMailboxStore::new(pg.clone(), clock.clone(), "bench-survivor", lease);
    let message = crate::mailbox::message(&RandomIds, clock.as_ref(), "lead", "mate", 0)?;
    runtime
        .block_on(mailbox.send(&message))
        .map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let mut holder = Command::new(exe)
        .args(["pg-worker", "--role", "hold", "--index", "0", "--url", url])
        .args(["--lease-ms", &lease.as_millis().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawn the holder: {e}"))?;
    // It says `held` once it holds the teammate and the message.
    let mut stdout = holder.stdout.take().ok_or("no holder stdout")?;
    let mut said = [0u8; 4];
    stdout
        .read_exact(&mut said)
        .map_err(|e| format!("the holder did not report: {e}"))?;
    let killed = Instant::now();
    holder.kill().map_err(|e| format!("kill the holder: {e}"))?;
    let _ = holder.wait();
    let look = troupe::bootstrap::takeover_look(lease);
    let deadline = killed + lease * 3;
    loop {
        if Instant::now() > deadline {
            return Err("the teammate was not taken over within three leases".into());
        }
        if runtime
            .block_on(roster.acquire(&mate))
            .map_err(|e| e.to_string())?
            != Lease::Taken
        {
            let claimed = runtime.block_on(mailbox.claim(&mate));
            if let Some(m) = claimed.map_err(|e| e.to_string())? {
                runtime
                    .block_on(mailbox.ack(&mate, &m))
                    .map_err(|e| e.to_string())?;
                return Ok(killed.elapsed().as_secs_f64());
            }
        }
        std::thread::sleep(look);
    }
}

pub fn run(dir: &Path, procs: usize, n: usize, lease: Duration) -> BenchResult<Value> {
    let Some(db) = TestDb::create() else {
        return Err("PostgreSQL is not reachable (TROUPE_TEST_PG_URL, default \
                    postgres://postgres@127.0.0.1:5432/test)"
            .into());
    };
    let url = db.url();
    let pg = PgStore::connect_in_schema(&url, TEAM, None).map_err(|e| e.to_string())?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let total = procs * n;

    let pg_mailbox: Arc<dyn MailboxStore> = Arc::new(PgMailboxStore::new(
        pg.clone(),
        clock.clone(),
        "bench-sender",
        lease,
    ));
    let (pg_sends, send_errors) = sends(pg_mailbox.clone(), procs, n)?;
    let (pg_claims, claim_errors, pg_once) =
        drain(&Target::Pg(&url), pg_mailbox.as_ref(), procs, total)?;
    let pg_protocol = PgProtocolStore::new(pg.clone(), clock.clone(), Arc::new(RandomIds));
    let pg_round_trip = round_trips(&pg_protocol, 300)?;
    let wake = wake_latency(&pg, pg_mailbox.as_ref(), 200)?;
    let takeover_s = takeover(&url, &pg, lease)?;
    let raw_commits = db.raw_commits_per_s(procs, n).map_err(|e| e.to_string())?;

    // The file store, same shapes, same machine, same run.
    let ws = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let layout = Layout::new(ws.path());
    let file_mailbox: Arc<dyn MailboxStore> =
        Arc::new(FileMailboxStore::new(&layout, clock.clone()));
    let (file_sends, file_send_errors) = sends(file_mailbox.clone(), procs, n)?;
    let (file_claims, file_claim_errors, file_once) = drain(
        &Target::Files(ws.path()),
        file_mailbox.as_ref(),
        procs,
        total,
    )?;
    let file_protocol =
        JsonProtocolStore::open(&layout, clock, Arc::new(RandomIds)).map_err(|e| e.to_string())?;
    let file_round_trip = round_trips(&file_protocol, 300)?;
    let disk = crate::disk::durable_writes_per_s(dir, Duration::from_secs(2))?;

    Ok(json!({
        "suite": "pg",
        "server": pg.shown(),
        "procs": procs,
        "n": n,
        "messages": total,
        "lease_s": lease.as_secs_f64(),
        "postgres": {
            "sends_per_s": round2(pg_sends),
            "claim_ack_per_s": round2(pg_claims),
            "raw_commits_per_s": round2(raw_commits),
            "claim_ack_vs_commits": round2(pg_claims / raw_commits),
            "sends_vs_commits": round2(pg_sends / raw_commits),
            "exactly_once": pg_once,
            "protocol_round_trip_us_p50": round2(pg_round_trip),
            "wake_latency_ms_p50": round2(wake),
            "takeover_s": round2(takeover_s),
            "errors": send_errors + claim_errors,
        },
        "files": {
            "sends_per_s": round2(file_sends),
            "claim_ack_per_s": round2(file_claims),
            "exactly_once": file_once,
            "protocol_round_trip_us_p50": round2(file_round_trip),
            "errors": file_send_errors + file_claim_errors,
        },
        "disk_durable_writes_per_s": round2(disk),
    }))
}

/// One process of the suite: `consume` (PostgreSQL) or `consume-files` claims and acks the sink
/// until it is empty and reports `{"acked": k, "errors": e}`; `hold` leases the teammate `mate`
/// and claims its message, says `held`, and waits to be killed.
pub fn worker(role: &str, index: usize, url: &str, lease_ms: u64) -> ExitCode {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let lease = Duration::from_millis(lease_ms);
    let holder = format!("bench-{role}-{index}-{}", std::process::id());
    let store: Arc<dyn MailboxStore> = match role {
        "consume-files" => Arc::new(FileMailboxStore::new(&Layout::new(Path::new(url)), clock)),
        "consume" | "hold" => match PgStore::connect_in_schema(url, TEAM, None) {
            Ok(pg) => {
                if role == "hold" {
                    return hold(pg, clock, &holder, lease);
                }
                Arc::new(PgMailboxStore::new(pg, clock, &holder, lease))
            }
            Err(e) => {
                println!(
                    "{}",
                    json!({"acked": 0, "errors": 1, "first_error": e.to_string()})
                );
                return ExitCode::FAILURE;
            }
        },
        other => {
            eprintln!("troupe-bench: unknown role {other}");
            return ExitCode::FAILURE;
        }
    };
    let (mut acked, mut errors, mut first) = (0u64, 0u64, None::<String>);
    let drained = block_on(async {
        loop {
            match store.claim(&sink()).await {
                Ok(Some(m)) => match store.ack(&sink(), &m).await {
                    Ok(_) => acked += 1,
                    Err(e) => {
                        errors += 1;
                        first.get_or_insert(e.to_string());
                    }
                },
                Ok(None) => break,
                Err(e) => {
                    errors += 1;
                    first.get_or_insert(e.to_string());
                    break;
                }
            }
        }
    });
    if let Err(e) = drained {
        errors += 1;
        first.get_or_insert(e);
    }
    println!(
        "{}",
        json!({"acked": acked, "errors": errors, "first_error": first})
    );
    ExitCode::SUCCESS
}

fn hold(pg: PgStore, clock: Arc<dyn Clock>, holder: &str, lease: Duration) -> ExitCode {
    let mate = match AgentName::parse("mate") {
        Ok(mate) => mate,
        Err(_) => return ExitCode::FAILURE,
    };
    let roster = PgRoster::new(pg.clone(), holder, lease);
    let mailbox = PgMailboxStore::new(pg, clock, holder, lease);
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return ExitCode::FAILURE;
    };
    let held = runtime.block_on(async {
        roster.acquire(&mate).await.is_ok_and(|l| l != Lease::Taken)
            && roster.register("worker").await.is_ok()
            && matches!(mailbox.claim(&mate).await, Ok(Some(_)))
    });
    if !held {
        eprintln!("troupe-bench: the holder could not take the teammate");
        return ExitCode::FAILURE;
    }
    print!("held");
    let _ = std::io::Write::flush(&mut std::io::stdout());
    // Heartbeats keep both leases while it lives; it is killed from outside.
    loop {
        std::thread::park();
    }
}
