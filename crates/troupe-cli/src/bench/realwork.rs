//! The realwork suite (issue 46): a team builds a small Rust library crate, against one agent
//! doing the same scripted work alone.
//!
//! **The work.** A git repository in a temporary folder holds the committed skeleton of a crate
//! with no dependencies (`realwork/source.rs`): `src/lib.rs` declares one module per task. Each
//! task writes one module, `src/<m>.rs`, and its unit tests, `src/<m>/tests.rs`; tasks 0 and 1
//! also add a line at the same place of `CHANGELOG.md`, so that exactly one merge conflicts.
//!
//! **The team run.** A scripted lead (`realwork/script.rs`) puts every task on the board and
//! spawns `teammates` teammates with `isolation: "worktree"` in one answer; the two changelog
//! tasks are assigned to two different teammates, the others are for whoever is idle. The
//! teammates pull the tasks from the board and work in their worktrees with the file tools —
//! read `src/lib.rs`, write the module, write its tests, (edit the changelog), answer — so four
//! (five) model calls per task; troupe commits each finished task on the teammate's branch.
//! Once every task's result has reached it, the lead calls `merge_teammate` for each teammate;
//! for the branch that conflicts (troupe aborts the merge and names the files), the lead runs
//! `git merge` in its shell, prints the conflicted file, writes it as the union of both sides
//! and commits. **The solo run**: the same prompt to a lead with no teammates, which does every
//! task in its own checkout with the same calls, each task finished by `git commit` instead of
//! an answer, then answers. Every model call of both runs waits `latency`.
//!
//! Commands run unconfined (`bench_settings`, as in every team suite). Under the default
//! sandbox (workspace-write) the hand merge cannot be done at all: the lead's `git merge` fails
//! on `.git` (read-only to confined commands: "cannot lock ref 'ORIG_HEAD' … Read-only file
//! system"), the branch stays unmerged and its files are missing in the lead's checkout.
//!
//! Each run is `troupe run`'s driver on the lead's prompt until the team is quiescent (the wall
//! time); then the team is closed, the lead's checkout checked (every module and test file as
//! written, the changelog with both lines, no uncommitted change, every conflicted branch part
//! of `HEAD`), and `cargo test --offline` run in it (a child process, its own
//! `CARGO_TARGET_DIR` in the temporary folder; not part of the wall time).
//!
//! **Figures** (`realwork/report.rs`, `realwork/measure.rs`):
//! - `speedup` = solo wall / team wall; `ideal_speedup` = teammates.
//! - `runtime_share` = (team wall − model time on the critical path) / team wall, where the
//!   model time on the critical path is: the lead's calls that ended before any teammate's first
//!   call started (setup), plus the sum of the calls of the teammate whose last call ended last,
//!   plus the lead's model time after that last teammate call ended (a lead call in flight then
//!   counts from that instant). The rest — spawning, worktrees, claims, commits, results
//!   delivered, event turns started, merges, and any wait the critical teammate had that was not
//!   its own model call — is the runtime's. `no_model_in_flight_ms` is a lower bound: the time
//!   no agent's model call was in flight at all.
//! - `coordination_share` = coordination bytes / all prompt bytes of the team run: every model
//!   request's bytes as sent (`sent_bytes`: messages and tools), summed over every request of
//!   every agent; coordination = messages between agents and task texts (user messages other
//!   than the person's prompt), team tool calls with their results, and the system prompt's
//!   team sections (see `realwork/measure.rs`). `share_with_team_tool_definitions` adds the
//!   team tools' definitions sent in each request.
//! - `fixed_prompt_bytes`: the tools JSON and the system message of the first request of the
//!   lead and of a teammate.
//! - `lost_work`: tasks not completed exactly once (the board and the `task_completed` events),
//!   plus files missing or not as written in the lead's checkout after the merges, plus
//!   changelog lines missing, plus uncommitted changes, plus conflicted branches left unmerged.

mod measure;
mod report;
mod script;
mod source;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use troupe::bootstrap::build_team;
use troupe::store::tasks::{TaskBoard, TaskStatus};
use troupe::team::{ModelChooser, NoTeamObserver};
use troupe::wire::AgentName;
use troupe::worktree::git::{Git, Place};

use crate::result::{fail, BenchResult};
use crate::team::bench_settings;
use report::{report, CargoTest, Merges, RunFigures, Shape};
use script::{Mode, Models, Script};
use source::Module;

/// What both leads are asked.
const PROMPT: &str = "Build the crate in this repository: one module and its unit tests per \
                      task (src/lib.rs declares them).";

pub fn run(dir: &Path, teammates: usize, latency_ms: u64, tasks: usize) -> BenchResult<Value> {
    if teammates == 0 || tasks < 2 {
        return Err("realwork needs at least 1 teammate and 2 tasks".to_owned());
    }
    let latency = Duration::from_millis(latency_ms);
    let modules = source::modules(tasks);
    let names: Vec<AgentName> = (0..teammates)
        .map(|i| AgentName::parse(&format!("mate-{i}")).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let team = one_run(&runtime, dir, Mode::Team, latency, &modules, &names)
        .map_err(fail("the team run"))?;
    let solo =
        one_run(&runtime, dir, Mode::Solo, latency, &modules, &[]).map_err(fail("the solo run"))?;
    let shape = Shape {
        teammates,
        tasks,
        latency_ms,
    };
    Ok(report(shape, &team, &solo))
}

/// One run on a fresh repository: driven, checked, tested.
fn one_run(
    runtime: &tokio::runtime::Runtime,
    dir: &Path,
    mode: Mode,
    latency: Duration,
    modules: &[Module],
    names: &[AgentName],
) -> BenchResult<RunFigures> {
    let workspace = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let base = std::fs::canonicalize(workspace.path()).map_err(|e| e.to_string())?;
    let root = base.join("repo");
    repository(&root, modules)?;
    let script = Script::new(mode, latency, modules.to_vec(), names.to_vec());
    let models = Models(script.clone());
    let lead_model = models.model_for(&AgentName::lead());
    // The solo lead's one turn holds every task's calls.
    let max_turns = 6 * modules.len() + 20;
    let mut settings = bench_settings(&root, lead_model, Arc::new(NoTeamObserver), max_turns);
    settings.models = Arc::new(models);
    // Generous: every call in a row, twice, and a minute.
    let limit = latency * (12 * modules.len() as u32 + 40) + Duration::from_secs(60);

    let (start, wall, tasks_lost) = runtime.block_on(async {
        let mut team = build_team(settings).await.map_err(|e| e.to_string())?;
        let mut driver = team.driver();
        let cancel = CancellationToken::new();
        let start = Instant::now();
        let driven = tokio::time::timeout(limit, driver.run(&mut team.lead, PROMPT, &cancel)).await;
        let wall = start.elapsed();
        let lost = tasks_not_done_once(&root, &team.board).await;
        drop(driver);
        team.close().await;
        match driven {
            Ok(Ok(_)) => Ok((start, wall, lost?)),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("not quiescent within {limit:?}")),
        }
    })?;

    let mut figures = RunFigures::from_calls(start, wall.as_secs_f64() * 1000.0, &script.calls());
    let seen = script.merges();
    let resolved = seen
        .conflicted
        .iter()
        .filter(|name| is_ancestor(&root, &format!("troupe/{name}")))
        .count();
    figures.merges = Merges {
        clean: seen.clean,
        conflicted: seen.conflicted.len(),
        resolved,
        failed: seen.failed,
    };
    figures.lost = tasks_lost;
    figures.lost.extend(checkout_lost(&root, modules)?);
    for name in seen.conflicted.iter().skip(resolved) {
        figures
            .lost
            .push(format!("the branch of {name} is not merged"));
    }
    figures.cargo = cargo_test(&root, &base.join("target"))?;
    Ok(figures)
}

/// `git <args>` in `dir` through troupe's own runner, as the bench's identity.
fn git(dir: &Path, args: &[&str]) -> BenchResult<String> {
    Git::new(&Place::Checkout(dir.to_path_buf()), args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@troupe.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@troupe.invalid")
        .run()
        .map_err(|e| e.to_string())
}

/// A repository holding the crate's skeleton in one commit. Its own identity is set for the
/// commits the lead makes with its shell.
fn repository(root: &Path, modules: &[Module]) -> BenchResult<()> {
    for (path, content) in source::skeleton(modules) {
        let path = root.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&path, content).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    git(root, &["init", "-q", "-b", "main"])?;
    git(root, &["config", "user.name", "lead"])?;
    git(root, &["config", "user.email", "lead@troupe.invalid"])?;
    git(root, &["add", "-A"])?;
    git(root, &["commit", "-q", "-m", "The crate's skeleton"])?;
    Ok(())
}

/// Whether `rev` is part of `HEAD` in `root`.
fn is_ancestor(root: &Path, rev: &str) -> bool {
    Git::new(
        &Place::Checkout(root.to_path_buf()),
        ["merge-base", "--is-ancestor", rev, "HEAD"],
    )
    .read_only()
    .output()
    .is_ok_and(|out| out.ok())
}

/// Board tasks not completed exactly once (by the board's status and the run's
/// `task_completed` events), one line each.
async fn tasks_not_done_once(root: &Path, board: &Arc<dyn TaskBoard>) -> BenchResult<Vec<String>> {
    let events = troupe::store::events::read::read_all(&root.join(".troupe/events.jsonl"))
        .map_err(|e| e.to_string())?;
    let mut completions: HashMap<String, usize> = HashMap::new();
    for event in events.iter().filter(|e| e.kind == "task_completed") {
        *completions
            .entry(event.str("task_id").unwrap_or("").to_owned())
            .or_default() += 1;
    }
    let tasks = board.list().await.map_err(|e| e.to_string())?;
    Ok(tasks
        .iter()
        .filter_map(|t| {
            let n = completions.get(&t.id.to_string()).copied().unwrap_or(0);
            (t.status != TaskStatus::Completed || n != 1).then(|| {
                format!(
                    "task {} ({}): {:?}, completed {n} times",
                    t.id, t.subject, t.status
                )
            })
        })
        .collect())
}

/// What is missing from the lead's checkout after the run, one line each.
fn checkout_lost(root: &Path, modules: &[Module]) -> BenchResult<Vec<String>> {
    let mut lost = Vec::new();
    for module in modules {
        for (path, content) in [
            (module.path(), &module.source),
            (module.tests_path(), &module.tests),
        ] {
            match std::fs::read_to_string(root.join(&path)) {
                Ok(text) if text == *content => {}
                Ok(_) => lost.push(format!("{path} is not as written")),
                Err(_) => lost.push(format!("{path} is missing")),
            }
        }
    }
    let changelog = std::fs::read_to_string(root.join(source::CHANGELOG)).unwrap_or_default();
    for line in source::changelog_after(modules) {
        let n = changelog.lines().filter(|l| *l == line).count();
        if n != 1 {
            lost.push(format!("{} has `{line}` {n} times", source::CHANGELOG));
        }
    }
    let status = git(root, &["status", "--porcelain"])?;
    for line in status.lines() {
        lost.push(format!("uncommitted in the lead's checkout: {line}"));
    }
    Ok(lost)
}

/// `cargo test --offline` in `root`, building in `target`.
fn cargo_test(root: &Path, target: &PathBuf) -> BenchResult<CargoTest> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let start = Instant::now();
    let output = std::process::Command::new(&cargo)
        .args(["test", "--offline"])
        .current_dir(root)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .map_err(|e| format!("run cargo test: {e}"))?;
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        eprintln!(
            "realwork: cargo test failed in {}:\n{stdout}\n{}",
            root.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let tests_passed = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("test result: "))
        .filter_map(|l| l.split("; ").next())
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|n| n.parse::<usize>().ok())
        .sum();
    Ok(CargoTest {
        passed: output.status.success(),
        ms: ms.round(),
        tests_passed,
    })
}
