//! A repetition's checks, run against its workspace copy and what its run did.
//!
//! Files are read only when they are regular files inside the copy (a link the run made to a
//! file outside it, or a FIFO, fails the check instead of being read). A `command` runs with
//! `sh -c` in the copy, confined as troupe confines agents' commands (workspace-write, no
//! network); where the machine cannot confine, the check fails and says so — it never runs
//! unconfined.

use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use troupe::process::{CappedOutput, Ending, GroupChild, Stop};
use troupe::sandbox::{Policy, Sandbox};

use super::events::Observed;
use super::outcome::{Cost, Failure};
use super::suite::Check;

/// How much of a file a content check reads.
const FILE_CAP: u64 = 16 * 1024 * 1024;

/// What the run did, as the checks see it.
pub struct Facts<'a> {
    pub observed: &'a Observed,
    pub exit_code: Option<i32>,
    pub seconds: f64,
    pub tokens: u64,
    pub cost: &'a Cost,
}

/// Every check of `checks` that fails, with why. `timeout` bounds each `command`, and
/// `cancel` (Ctrl-C) stops it.
pub async fn run(
    checks: &[Check],
    workspace: &Path,
    facts: &Facts<'_>,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Vec<Failure> {
    let mut failures = Vec::new();
    for check in checks {
        let verdict = match check {
            Check::FileExists(path) => read(workspace, path).map(|_| ()),
            Check::FileContains { path, text } => read(workspace, path).and_then(|content| {
                if content.contains(text.as_str()) {
                    Ok(())
                } else {
                    Err(format!("{path} does not contain {text:?}"))
                }
            }),
            Check::FileMatches { path, regex } => read(workspace, path).and_then(|content| {
                if regex.is_match(&content) {
                    Ok(())
                } else {
                    Err(format!("{path} has no match for /{}/", regex.as_str()))
                }
            }),
            Check::Command(command) => confined(command, workspace, timeout, cancel).await,
            Check::ToolCalled(tool) => {
                if facts.observed.tools.contains(tool) {
                    Ok(())
                } else {
                    Err(format!(
                        "{tool} was never called ({})",
                        called(facts.observed)
                    ))
                }
            }
            Check::ToolNotCalled(tool) => {
                if facts.observed.tools.contains(tool) {
                    Err(format!("{tool} was called"))
                } else {
                    Ok(())
                }
            }
            Check::ExitCode(want) => exit_code(*want, facts),
            Check::MaxTokens(most) => {
                if facts.tokens <= *most {
                    Ok(())
                } else {
                    Err(format!("{} tokens, more than {most}", facts.tokens))
                }
            }
            Check::MaxCost(most) => cost(*most, facts),
            Check::MaxSeconds(most) => {
                if facts.seconds <= *most {
                    Ok(())
                } else {
                    Err(format!("{:.1} s, more than {most} s", facts.seconds))
                }
            }
        };
        if let Err(why) = verdict {
            failures.push(Failure::new(check.describe(), why));
        }
    }
    failures
}

fn called(observed: &Observed) -> String {
    if observed.tools.is_empty() {
        "no tool was called".into()
    } else {
        let names: Vec<&str> = observed.tools.iter().map(String::as_str).collect();
        format!("called: {}", names.join(", "))
    }
}

fn exit_code(want: i32, facts: &Facts<'_>) -> Result<(), String> {
    match facts.exit_code {
        Some(code) if code == want => Ok(()),
        got => {
            let got = got.map_or_else(|| "no exit code".to_owned(), |c| format!("exit {c}"));
            let why = facts
                .observed
                .error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            Err(format!("the run ended with {got}, not {want}{why}"))
        }
    }
}

fn cost(most: f64, facts: &Facts<'_>) -> Result<(), String> {
    if !facts.cost.unpriced.is_empty() {
        return Err(format!(
            "no price for {}: the cost is unknown",
            facts.cost.unpriced.join(", ")
        ));
    }
    match facts.cost.usd {
        None if facts.tokens == 0 => Ok(()),
        None => Err("the cost could not be read (troupe usage)".into()),
        Some(usd) if usd <= most => Ok(()),
        Some(usd) => Err(format!("${usd:.4}, more than ${most}")),
    }
}

/// The text of `path` in `workspace`, if it is a regular file inside it.
fn read(workspace: &Path, path: &str) -> Result<String, String> {
    use std::io::Read;
    let full = workspace.join(path);
    let resolved = match std::fs::canonicalize(&full) {
        Ok(resolved) => resolved,
        Err(_) => return Err(format!("{path} does not exist")),
    };
    if !resolved.starts_with(workspace) {
        return Err(format!("{path} leads out of the workspace"));
    }
    let meta = std::fs::metadata(&resolved).map_err(|e| format!("{path}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{path} is not a regular file"));
    }
    let file = std::fs::File::open(&resolved).map_err(|e| format!("{path}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(FILE_CAP)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{path}: {e}"))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Runs `command` in `workspace`, confined; passes when it exits 0.
async fn confined(
    command: &str,
    workspace: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<(), String> {
    let sandbox = Sandbox::new(&Policy::default(), workspace).map_err(|e| {
        format!("cannot confine the command on this machine, so it did not run: {e}")
    })?;
    let group = GroupChild::spawn_confined(command, workspace, &sandbox)
        .map_err(|e| format!("cannot start it: {e}"))?;
    let mut output = CappedOutput::tail_only(2000);
    let ending = group
        .run(
            &mut output,
            Some(Instant::now() + timeout),
            cancel,
            Stop::Kill,
        )
        .await
        .map_err(|e| format!("waiting for it: {e}"))?;
    let last = || {
        output
            .render()
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| format!(": {}", l.trim()))
            .unwrap_or_default()
    };
    match ending {
        Ending::Exited(status) if status.success() => Ok(()),
        Ending::Exited(status) => Err(format!(
            "{}{}",
            troupe::process::describe_status(status),
            last()
        )),
        Ending::TimedOut => Err(format!(
            "still running after {} s; stopped",
            timeout.as_secs_f64()
        )),
        Ending::Cancelled => Err("stopped by Ctrl-C".into()),
    }
}
