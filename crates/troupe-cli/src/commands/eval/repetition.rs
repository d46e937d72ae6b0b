//! One repetition of a case: a fresh copy of the fixture in a temporary folder, the trust
//! gate, `troupe run` on it as a child process (at the case's timeout: Ctrl-C, so that it
//! stops its team, then SIGKILL to its process group), its cost from `troupe usage`, then the checks. The folder is removed afterwards.
//!
//! Every run keeps its team in its copy's own `.troupe/` (`--local`), whatever shared store the
//! person's settings name: a repetition is a fresh workspace, never a shared team.
//!
//! **Trust.** Each copy is a new folder no one has trusted, so a fixture whose `troupe.toml`
//! or `.env` holds trust-requiring values (hooks, MCP servers, a model server, allow rules, a
//! looser sandbox, …) would make `troupe run` exit 2. The fixture is the suite author's own
//! input, but running it is the person's decision: such a repetition fails with one reason
//! naming what the files would do, unless `troupe eval` itself was told to trust
//! (`--trust-workspace` or `TROUPE_TRUST_WORKSPACE=1`), in which case each run is told the same.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use troupe::settings::trust::TRUST_WORKSPACE_VAR;

use super::checks::{self, Facts};
use super::events;
use super::fixture;
use super::outcome::{Cost, Failure, Outcome};
use super::suite::{Case, Fixture, Model};

/// How long `troupe usage` may take after a run.
const USAGE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a run past its timeout has to stop its team after its Ctrl-C.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long the run's pipes may stay open after it ended (only a process that left its group
/// can hold them).
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How much of the run's stderr is kept for a failure's reason.
const STDERR_TAIL: usize = 4000;

/// Runs repetition `number` of `case` (the suite's `index`-th). `cancel` (Ctrl-C) stops its run
/// as its timeout would, and its checks.
pub async fn run(index: usize, case: &Case, number: u32, cancel: &CancellationToken) -> Outcome {
    let mut outcome = Outcome {
        case: index,
        number,
        seconds: 0.0,
        tokens: 0,
        cost: Cost::default(),
        exit_code: None,
        failures: Vec::new(),
    };
    let dir = match tempfile::Builder::new().prefix("troupe-eval-").tempdir() {
        Ok(dir) => dir,
        Err(e) => {
            outcome
                .failures
                .push(Failure::new("fixture", format!("no temporary folder: {e}")));
            return outcome;
        }
    };
    let workspace = match prepare(case, dir.path()).await {
        Ok(workspace) => workspace,
        Err(why) => {
            outcome.failures.push(Failure::new("fixture", why));
            return outcome;
        }
    };
    if let Err(why) = trusted(&workspace) {
        outcome.failures.push(Failure::new("trust", why));
        return outcome;
    }
    let started = Instant::now();
    let ran = match spawn_run(case, &workspace, cancel).await {
        Ok(ran) => ran,
        Err(why) => {
            outcome.failures.push(Failure::new("run", why));
            return outcome;
        }
    };
    outcome.seconds = started.elapsed().as_secs_f64();
    outcome.exit_code = ran.exit_code;
    let mut observed = events::observe(&ran.stdout);
    if observed.error.is_none() && ran.exit_code != Some(0) {
        observed.error = last_line(&ran.stderr);
    }
    match ran.stopped {
        None => {}
        Some(Stopped::Timeout) => outcome.failures.push(Failure::new(
            "timeout",
            format!(
                "the run took longer than {} s and was stopped",
                case.timeout.as_secs_f64()
            ),
        )),
        Some(Stopped::Interrupted) => {
            outcome
                .failures
                .push(Failure::new("interrupted", "stopped by Ctrl-C"));
            return outcome;
        }
    }
    let (tokens, cost) = usage(&workspace).await;
    outcome.tokens = tokens.unwrap_or(observed.tokens).max(observed.tokens);
    outcome.cost = cost;
    let facts = Facts {
        observed: &observed,
        exit_code: outcome.exit_code,
        seconds: outcome.seconds,
        tokens: outcome.tokens,
        cost: &outcome.cost,
    };
    let failures = checks::run(&case.checks, &workspace, &facts, case.timeout, cancel).await;
    outcome.failures.extend(failures);
    drop(dir);
    outcome
}

/// The fresh workspace under `dir`, canonical.
async fn prepare(case: &Case, dir: &Path) -> Result<PathBuf, String> {
    let base = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let workspace = base.join("workspace");
    let fixture = case.fixture.clone();
    let into = workspace.clone();
    troupe::sync::offload("copying the fixture", move || match fixture {
        Fixture::Folder(root) => {
            std::fs::create_dir(&into).map_err(|e| format!("{}: {e}", into.display()))?;
            fixture::copy_folder(&root, &into)
        }
        Fixture::Git { repo, rev, commit } => fixture::checkout_git(&repo, &commit, &into)
            .map_err(|why| format!("checking out {rev:?} of {}: {why}", repo.display())),
    })
    .await
    .map_err(|e| e.to_string())??;
    Ok(workspace)
}

/// Whether the copy may run: its files hold nothing that needs trust, or eval was told to trust.
fn trusted(workspace: &Path) -> Result<(), String> {
    let review = crate::trust::review(workspace, false).map_err(|e| e.cause().to_owned())?;
    if review.items.is_empty() || crate::trust::opted_in() {
        return Ok(());
    }
    Err(format!(
        "the fixture's files would {}; troupe eval runs such a fixture only when told to trust \
         it (troupe --trust-workspace eval …, or {TRUST_WORKSPACE_VAR}=1)",
        crate::trust::summary(&review.items)
    ))
}

/// What the child `troupe run` left.
struct Ran {
    stdout: String,
    stderr: String,
    exit_code: Option<i32>,
    /// Why it was stopped before it ended, if it was.
    stopped: Option<Stopped>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    Timeout,
    Interrupted,
}

/// Kills the child's process group when dropped (a timeout, eval's own future dropped).
struct GroupKill(libc::pid_t);

impl GroupKill {
    fn signal(&self, signal: libc::c_int) {
        // SAFETY: killpg only sends a signal; a group already gone yields ESRCH.
        unsafe {
            libc::killpg(self.0, signal);
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
    }
}

/// `troupe run --workspace W --prompt - --json --approval A [--model-…]`, the prompt on stdin.
async fn spawn_run(
    case: &Case,
    workspace: &Path,
    cancel: &CancellationToken,
) -> Result<Ran, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find troupe itself: {e}"))?;
    let mut command = Command::new(exe);
    command
        .arg("run")
        .arg("--workspace")
        .arg(workspace)
        .args(["--prompt", "-", "--json", "--local"])
        .args(["--approval", case.approval.as_str()]);
    match &case.model {
        Model::Configured => {}
        Model::Script(file) => {
            command.arg("--model-script").arg(file);
        }
        Model::Recording(file) => {
            command.arg("--model-recording").arg(file);
        }
    }
    if crate::trust::opted_in() {
        command.env(TRUST_WORKSPACE_VAR, "1");
    }
    command
        .current_dir(workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start troupe run: {e}"))?;
    let group = child
        .id()
        .and_then(|id| libc::pid_t::try_from(id).ok())
        .map(GroupKill)
        .ok_or_else(|| "troupe run exited before it started".to_owned())?;
    if let Some(mut stdin) = child.stdin.take() {
        let prompt = case.prompt.clone();
        tokio::spawn(async move {
            // A run that fails before reading its prompt closes the pipe: not an error here.
            let _ = stdin.write_all(prompt.as_bytes()).await;
        });
    }
    let stdout = tokio::spawn(read_all(child.stdout.take()));
    let stderr = tokio::spawn(read_all(child.stderr.take()));
    let ended = tokio::select! {
        status = child.wait() => Ok(status),
        () = tokio::time::sleep(case.timeout) => Err(Stopped::Timeout),
        () = cancel.cancelled() => Err(Stopped::Interrupted),
    };
    let (status, stopped) = match ended {
        Ok(status) => (status.ok(), None),
        Err(why) => {
            // Ctrl-C first, so that troupe stops its team and the commands it started (in
            // process groups of their own); then SIGKILL to whatever is left of the group.
            group.signal(libc::SIGINT);
            let status = tokio::time::timeout(STOP_GRACE, child.wait()).await;
            (status.ok().and_then(Result::ok), Some(why))
        }
    };
    drop(group);
    let drained = |task: tokio::task::JoinHandle<Vec<u8>>| async move {
        let abort = task.abort_handle();
        match tokio::time::timeout(DRAIN_GRACE, task).await {
            Ok(Ok(bytes)) => bytes,
            _ => {
                abort.abort();
                Vec::new()
            }
        }
    };
    let out = drained(stdout).await;
    let err = drained(stderr).await;
    let mut stderr = String::from_utf8_lossy(&err).into_owned();
    if stderr.len() > STDERR_TAIL {
        let cut = stderr.len() - STDERR_TAIL;
        let cut = (cut..stderr.len())
            .find(|i| stderr.is_char_boundary(*i))
            .unwrap_or(stderr.len());
        stderr.drain(..cut);
    }
    Ok(Ran {
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr,
        exit_code: status.and_then(|s| s.code()),
        stopped,
    })
}

async fn read_all<R: tokio::io::AsyncRead + Unpin>(reader: Option<R>) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(mut reader) = reader {
        let _ = reader.read_to_end(&mut bytes).await;
    }
    bytes
}

fn last_line(text: &str) -> Option<String> {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.strip_prefix("troupe: ").unwrap_or(l).to_owned())
}

/// The run's tokens and estimated cost, from `troupe usage --workspace W --json`.
async fn usage(workspace: &Path) -> (Option<u64>, Cost) {
    let Ok(exe) = std::env::current_exe() else {
        return (None, Cost::default());
    };
    let mut command = Command::new(exe);
    command
        .arg("usage")
        .arg("--workspace")
        .arg(workspace)
        .args(["--json", "--local"])
        .current_dir(workspace)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(USAGE_TIMEOUT, command.output()).await {
        Ok(Ok(output)) if output.status.success() => output,
        _ => return (None, Cost::default()),
    };
    let Ok(report) = serde_json::from_slice::<Value>(&output.stdout) else {
        return (None, Cost::default());
    };
    let total = &report["total"];
    let unpriced = total["unpriced_models"]
        .as_array()
        .map(|models| {
            models
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    (
        total["total_tokens"].as_u64(),
        Cost {
            usd: total["cost_usd"].as_f64(),
            unpriced,
        },
    )
}
