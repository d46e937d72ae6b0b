//! The soak suite (issue 45): one process runs a lead and eight teammates, cycle after cycle,
//! for `minutes`, and samples itself every minute. The goals are checked at the end and
//! reported; a missed goal is a finding, not a failure (the suite still exits 0).
//!
//! A cycle is what `troupe run --prompt` is: the team built on the workspace (or the shared
//! team in PostgreSQL), the lead's prompt driven until the team is quiescent, the run's
//! memories kept, the team closed. The teammates persist across cycles as they do across
//! runs (the roster, their conversations); each cycle restarts their workers. In a cycle
//! (the scripted team of `soak/model.rs`, answering after `latency`): a board task for each
//! teammate, a message to each, a plan from each approved by the lead, and each teammate's
//! file write, read, shell command and message to the lead.
//!
//! Samples are taken between cycles (the team closed), after the first cycle to end past each
//! minute and a settling pause (`SETTLE`): RSS, open fds and threads of this process (`/proc/self`), the state's size (bytes
//! under `.troupe/`; on PostgreSQL the total size of the soak's own schema's tables, indexes
//! included), and p50/p99 of the round trips measured in that minute (see `soak/model.rs`).
//!
//! With `retention`, every kind's age is that many seconds and `auto` is on. The bench also
//! With `auto`, each run's close (`Team::close`) runs gc: the workspace's files, and a shared
//! team's tables.

mod goals;
mod model;
mod probe;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::bootstrap::{build_team, PgOptions, StoreChoice, TeamSettings, DEFAULT_SHARED_LEASE};
use troupe::layout::Layout;
use troupe::model::ModelClient;
use troupe::store::postgres::testing::TestDb;
use troupe::store::retention::{Kind, Policy, Rule};
use troupe::team::{ModelChooser, NoTeamObserver};
use troupe::wire::AgentName;

use crate::result::BenchResult;
use crate::team::bench_settings;
use goals::{Goals, Sample};
use model::{Shared, SoakModels};
use probe::{tree_bytes, Process};

/// The teammates of the soak.
const TEAMMATES: usize = 8;
/// A cycle that has not ended by then is abandoned (its team closed) and counted as failed.
const CYCLE_LIMIT: Duration = Duration::from_secs(120);
/// Failed cycles in a row after which the soak stops: the team no longer works.
const FAILURES_IN_A_ROW: usize = 3;
/// How long a sample waits after a cycle's close: what the close let go of in the background —
/// the mailbox watch's thread (`notify` does not join it), a database store's runtime and its
/// connections — is gone by then.
const SETTLE: Duration = Duration::from_secs(2);
/// Threads the runtime may add for blocking work (file and store calls). They stay up to
/// 10 s after their last job, so between 0 and this many are alive at a sample: the slack of
/// the threads goal.
pub const BLOCKING_THREADS: usize = 16;

/// What the soak is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub minutes: u64,
    /// A PostgreSQL URL: the team in a schema of its own there.
    pub store: Option<String>,
    pub latency: Duration,
    /// Every kind's age, with `auto` on.
    pub retention: Option<Duration>,
    /// Where to write the summary too.
    pub out: Option<PathBuf>,
}

pub fn run(dir: &Path, options: &Options) -> BenchResult<Value> {
    let workspace = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let root = std::fs::canonicalize(workspace.path()).map_err(|e| e.to_string())?;
    let db = match &options.store {
        Some(url) => Some(database(url)?),
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let names: Vec<AgentName> = (0..TEAMMATES)
        .map(|i| AgentName::parse(&format!("mate-{i}")).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let shared = Shared::new(options.latency, names);
    let settings = || team_settings(&root, &shared, db.as_ref(), options.retention);

    runtime.block_on(cycle(settings(), "soak setup: spawn the team", db.as_ref()))?;
    let start = Instant::now();
    let limit = Duration::from_secs(options.minutes * 60);
    let mut samples: Vec<Sample> = Vec::new();
    let mut round_trips: Vec<Vec<u32>> = Vec::new();
    let (mut cycles, mut failed, mut in_a_row, mut unseen) = (0u64, 0u64, 0usize, 0usize);
    while start.elapsed() < limit {
        match runtime.block_on(cycle(
            settings(),
            "soak cycle: dispatch the work",
            db.as_ref(),
        )) {
            Ok(()) => in_a_row = 0,
            Err(e) => {
                failed += 1;
                in_a_row += 1;
                unseen += shared.drop_unseen();
                eprintln!("soak: cycle {cycles} failed: {e}");
                if in_a_row >= FAILURES_IN_A_ROW {
                    return Err(format!("{in_a_row} cycles in a row failed; the last: {e}"));
                }
            }
        }
        cycles += 1;
        let minute = samples.len() as u64 + 1;
        if start.elapsed() >= Duration::from_secs(minute * 60) || start.elapsed() >= limit {
            std::thread::sleep(SETTLE);
            let mut trips = shared.take_round_trips();
            let mut sample = Sample::take(
                minute,
                start.elapsed(),
                cycles,
                Process::now(),
                state_bytes(&root, db.as_ref())?,
                tree_bytes(&Layout::new(&root).state_dir()),
                &mut trips,
            );
            sample.cycles_in_minute = cycles - samples.last().map_or(0, |s| s.cycles);
            eprintln!("soak: {}", sample.line(options.minutes));
            samples.push(sample);
            round_trips.push(trips);
        }
    }
    drop(runtime);
    let goals = Goals::check(
        &samples,
        &round_trips,
        options.retention,
        BLOCKING_THREADS as u64,
    );
    for missed in goals.missed() {
        eprintln!("soak: goal missed: {missed}");
    }
    let summary = json!({
        "suite": "soak",
        "store": if db.is_some() { "postgres" } else { "files" },
        "minutes": options.minutes,
        "teammates": TEAMMATES,
        "latency_ms": options.latency.as_millis() as u64,
        "retention_s": options.retention.map(|r| r.as_secs()),
        "cycle": "a run: team built, the lead's prompt driven until quiescent, memories kept, team closed",
        "round_trip": "a teammate's model answering send_message to the lead's model called with that message's event",
        "sampled": "between cycles, 2 s after the first cycle to end past each minute",
        "cycles": cycles,
        "failed_cycles": failed,
        "round_trips_unseen": unseen,
        "model_calls": shared.calls(),
        "tool_errors": shared.tool_errors(),
        "gc": options.retention.map(|_| "each run's close ([retention] auto)"),
        "samples": samples,
        "goals": goals,
    });
    if let Some(out) = &options.out {
        let text = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
        std::fs::write(out, text).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    Ok(summary)
}

/// A schema of its own on the server at `url`, dropped at the end.
fn database(url: &str) -> BenchResult<TestDb> {
    // `TestDb` takes its server from the environment; the process is still single-threaded.
    std::env::set_var("TROUPE_TEST_PG_URL", url);
    TestDb::create().ok_or_else(|| format!("PostgreSQL at {url} cannot be reached"))
}

fn team_settings(
    root: &Path,
    shared: &Arc<Shared>,
    db: Option<&TestDb>,
    retention: Option<Duration>,
) -> TeamSettings {
    let models = SoakModels(shared.clone());
    let lead: Arc<dyn ModelClient> = models.model_for(&AgentName::lead());
    let mut settings = bench_settings(root, lead, Arc::new(NoTeamObserver), 16);
    settings.models = Arc::new(models);
    // As `troupe run`: arrivals from other processes are watched for.
    settings.watch = true;
    if let Some(db) = db {
        settings.store = StoreChoice::Postgres(PgOptions {
            url: db.url(),
            team: "soak".to_owned(),
            local_workers: true,
            lease: DEFAULT_SHARED_LEASE,
        });
    }
    if let Some(age) = retention {
        settings.settings.retention = policy(age);
    }
    settings
}

/// Every kind kept for `age`, gc at each run's close.
fn policy(age: Duration) -> Policy {
    let mut policy = Policy::default();
    for kind in Kind::ALL {
        policy.set(
            kind,
            Rule {
                age: Some(age),
                size: None,
            },
        );
    }
    policy.auto = true;
    policy
}

/// One run, as `troupe run --prompt` makes it. A run that does not end in time is described
/// (on PostgreSQL, from the team's tables) before its team is closed.
async fn cycle(settings: TeamSettings, prompt: &str, db: Option<&TestDb>) -> BenchResult<()> {
    let mut team = build_team(settings).await.map_err(|e| e.to_string())?;
    let mut driver = team.driver();
    let cancel = CancellationToken::new();
    let driven =
        tokio::time::timeout(CYCLE_LIMIT, driver.run(&mut team.lead, prompt, &cancel)).await;
    let result = match driven {
        Ok(Ok(_)) => {
            team.lead.remember_run().await;
            Ok(())
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => {
            if let Some(db) = db {
                eprintln!("soak: the team at the time-out: {}", stuck(db));
            }
            Err(format!("not quiescent within {CYCLE_LIMIT:?}"))
        }
    };
    drop(driver);
    team.close().await;
    result
}

/// The state's bytes: the schema's tables on PostgreSQL, else `.troupe/`.
fn state_bytes(root: &Path, db: Option<&TestDb>) -> BenchResult<u64> {
    let Some(db) = db else {
        return Ok(tree_bytes(&Layout::new(root).state_dir()));
    };
    let text = db
        .query_text(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::text FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')",
        )
        .map_err(|e| format!("the state's size: {e}"))?;
    Ok(text.and_then(|t| t.parse().ok()).unwrap_or(0))
}

/// The soak team's open messages, teammate leases and workers, in one line.
fn stuck(db: &TestDb) -> String {
    let sql = "SELECT concat_ws(' | ', 'now ' || clock_timestamp()::text, \
        'messages: ' || (SELECT string_agg(agent || ' ' || state || coalesce(' by ' || claimed_by, '') \
            || coalesce(' until ' || lease_until::text, ''), ', ' ORDER BY agent, created_ms) \
            FROM troupe_messages WHERE team = 'soak'), \
        'teammates: ' || (SELECT string_agg(name || ' ' || coalesce(holder, '-') || coalesce(' until ' \
            || lease_until::text, ''), ', ' ORDER BY name) FROM troupe_teammates WHERE team = 'soak'), \
        'workers: ' || (SELECT string_agg(id || ' ' || role || ' heartbeat ' || heartbeat_at::text, ', ') \
            FROM troupe_workers WHERE team = 'soak'))";
    match db.query_text(sql) {
        Ok(text) => text.unwrap_or_default(),
        Err(e) => format!("(unreadable: {e})"),
    }
}
