//! The board suite (issue 25): teammates that pull their own work. `teammates` teammates, each
//! in its own git worktree of a repository made here, take `tasks` tasks from the board; each
//! task is two model calls of `latency` (a scripted model that waits) and one file edit in the
//! teammate's worktree.
//!
//! - `effective_parallelism` = (tasks × 2 × latency) / (wall × teammates): 1.0 is every
//!   teammate busy with a model call the whole time;
//! - `double_claims` (a task claimed more than once) and `lost_tasks` (not completed exactly
//!   once), counted from the run's event stream and the board;
//! - `idle_model_calls` and `idle_cpu_s` over 5 s with an empty board afterwards;
//! - `merge_ms_p50`: merging a teammate's branch of 10 changed files into the lead's checkout.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use troupe::bootstrap::{build_team, PgOptions, StoreChoice, DEFAULT_SHARED_LEASE};
use troupe::model::{ModelClient, ModelError, ModelRequest, ModelResponse, ToolCall};
use troupe::store::tasks::{NewTask, TaskStatus};
use troupe::team::NoTeamObserver;
use troupe::wire::{AgentName, Isolation};
use troupe::worktree::git::{Git, Place};
use troupe::worktree::Worktrees;

use crate::result::BenchResult;
use crate::stats::{cpu_seconds, p50_us, round2};
use crate::team::bench_settings;

/// A model that waits `latency`, then: on a `[task]` prompt, edits a file named for the task;
/// after the edit's result, answers; on anything else, answers.
struct SlowWorker {
    latency: Duration,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl ModelClient for SlowWorker {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.latency).await;
        let body = troupe::model::openai::wire::request_body("bench", request);
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        if last["role"] == "tool" {
            return Ok(ModelResponse::text("done", "bench"));
        }
        let text = last["content"].as_str().unwrap_or("");
        match text.strip_prefix("[task] ") {
            Some(rest) => {
                let id: String = rest.chars().take(36).collect();
                let args = json!({"path": format!("task-{id}.txt"), "content": "done\n"});
                Ok(ModelResponse::tool_calls(
                    vec![ToolCall::new(
                        format!("call_{id}"),
                        "write_file",
                        args.to_string(),
                    )],
                    "bench",
                ))
            }
            None => Ok(ModelResponse::text("ready", "bench")),
        }
    }
}

/// `git <args>` in `dir` through troupe's own runner (hardened like every git troupe runs),
/// as the bench's identity.
fn git(dir: &Path, args: &[&str]) -> BenchResult<()> {
    let dir = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Git::new(&Place::Checkout(dir), args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@troupe.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@troupe.invalid")
        .run()
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// A repository with one commit.
fn repository(dir: &Path) -> BenchResult<()> {
    git(dir, &["init", "-q", "-b", "main"])?;
    std::fs::write(dir.join("README.md"), "bench\n").map_err(|e| e.to_string())?;
    git(dir, &["add", "README.md"])?;
    git(dir, &["commit", "-q", "-m", "start"])
}

/// On the files of a temporary workspace, or (`store`: a PostgreSQL URL) on a team of its own in
/// that database, its teammates run by this process.
pub fn run(
    dir: &Path,
    teammates: usize,
    tasks: usize,
    latency_ms: u64,
    store: Option<&str>,
) -> BenchResult<Value> {
    let workspace = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let root = std::fs::canonicalize(workspace.path()).map_err(|e| e.to_string())?;
    repository(&root)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let model = Arc::new(SlowWorker {
        latency: Duration::from_millis(latency_ms),
        calls: AtomicUsize::new(0),
    });
    let mut settings = bench_settings(&root, model.clone(), Arc::new(NoTeamObserver), 8);
    if let Some(url) = store {
        settings.store = StoreChoice::Postgres(PgOptions {
            url: url.to_owned(),
            team: format!("bench-board-{}", uuid::Uuid::new_v4().simple()),
            local_workers: true,
            lease: DEFAULT_SHARED_LEASE,
        });
    }
    let _guard = runtime.enter();
    let team = runtime
        .block_on(build_team(settings))
        .map_err(|e| e.to_string())?;
    let names: Vec<AgentName> = (0..teammates)
        .map(|i| AgentName::parse(&format!("mate-{i}")).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    for name in &names {
        runtime
            .block_on(team.runtime.spawn_defined(
                name,
                "benchmark",
                "Say ready.",
                false,
                None,
                Isolation::Worktree,
            ))
            .map_err(|e| e.to_string())?;
    }
    // Every teammate answered its first message and went idle.
    wait(Duration::from_secs(60), "the teammates to be ready", || {
        !team.runtime.any_worker_running()
    })?;
    let calls_before = model.calls.load(Ordering::SeqCst);

    let start = Instant::now();
    for i in 0..tasks {
        runtime
            .block_on(team.board.create(NewTask {
                subject: format!("task {i}"),
                ..NewTask::default()
            }))
            .map_err(|e| e.to_string())?;
    }
    let limit = Duration::from_millis(latency_ms * 2 * tasks as u64 + 60_000);
    wait(limit, "every task to be completed", || {
        runtime.block_on(team.board.list()).is_ok_and(|all| {
            all.iter().all(|t| t.status == TaskStatus::Completed)
                && !team.runtime.any_worker_running()
        })
    })?;
    let wall = start.elapsed();
    let task_calls = model.calls.load(Ordering::SeqCst) - calls_before;

    // Idle: nothing on the board for anyone.
    let idle_calls_before = model.calls.load(Ordering::SeqCst);
    let cpu_before = cpu_seconds();
    std::thread::sleep(Duration::from_secs(5));
    let idle_cpu = cpu_seconds() - cpu_before;
    let idle_model_calls = model.calls.load(Ordering::SeqCst) - idle_calls_before;

    let (double_claims, lost_tasks) = exactly_once(&root, &runtime, &team.board)?;
    runtime.block_on(team.runtime.close());
    drop(team);
    let mut merges = merge_samples(&root, 5)?;
    let ideal = (tasks as f64) * 2.0 * (latency_ms as f64 / 1000.0);
    Ok(json!({
        "suite": "board",
        "store": if store.is_some() { "postgres" } else { "files" },
        "teammates": teammates,
        "tasks": tasks,
        "latency_ms": latency_ms,
        "wall_s": round2(wall.as_secs_f64()),
        "task_model_calls": task_calls,
        "effective_parallelism": round2(ideal / (wall.as_secs_f64() * teammates as f64)),
        "double_claims": double_claims,
        "lost_tasks": lost_tasks,
        "idle_model_calls": idle_model_calls,
        "idle_cpu_s": (idle_cpu * 10_000.0).round() / 10_000.0,
        "merge_ms_p50": round2(p50_us(&mut merges) / 1000.0),
    }))
}

/// Waits until `done`, looking every 20 ms; an error after `limit`.
fn wait(limit: Duration, what: &str, done: impl Fn() -> bool) -> BenchResult<()> {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Tasks claimed more than once, and tasks not completed exactly once, from the event stream
/// and the board.
fn exactly_once(
    root: &Path,
    runtime: &tokio::runtime::Runtime,
    board: &Arc<dyn troupe::store::tasks::TaskBoard>,
) -> BenchResult<(usize, usize)> {
    let events = troupe::store::events::read::read_all(&root.join(".troupe/events.jsonl"))
        .map_err(|e| e.to_string())?;
    let count = |kind: &str| {
        let mut by_task: HashMap<String, usize> = HashMap::new();
        for event in events.iter().filter(|e| e.kind == kind) {
            *by_task
                .entry(event.str("task_id").unwrap_or("").to_owned())
                .or_default() += 1;
        }
        by_task
    };
    let claims = count("task_claimed");
    let completions = count("task_completed");
    let tasks = runtime.block_on(board.list()).map_err(|e| e.to_string())?;
    let double = claims.values().filter(|n| **n > 1).count();
    let lost = tasks
        .iter()
        .filter(|t| {
            t.status != TaskStatus::Completed
                || completions.get(&t.id.to_string()).copied() != Some(1)
        })
        .count();
    Ok((double, lost))
}

/// `rounds` merges of a teammate branch that changes 10 files into the lead's checkout.
fn merge_samples(root: &Path, rounds: usize) -> BenchResult<Vec<Duration>> {
    let layout = troupe::layout::Layout::new(root);
    let worktrees = Worktrees::new(layout);
    let mut samples = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let name = AgentName::parse(&format!("merger-{round}")).map_err(|e| e.to_string())?;
        let attached = worktrees.attach(&name).map_err(|e| e.to_string())?;
        let _ = attached;
        let path = worktrees.path_of(&name);
        for file in 0..10 {
            std::fs::write(
                path.join(format!("merge-{round}-{file}.txt")),
                format!("round {round} file {file}\n"),
            )
            .map_err(|e| e.to_string())?;
        }
        worktrees
            .commit(&name, "ten files")
            .map_err(|e| e.to_string())?;
        let start = Instant::now();
        let merged = worktrees.merge(&name).map_err(|e| e.to_string())?;
        samples.push(start.elapsed());
        let _ = merged;
    }
    Ok(samples)
}
