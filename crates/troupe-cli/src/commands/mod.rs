//! One function per command. Each turns raw arguments into validated settings first, so that
//! bad input is refused before anything runs.

mod demo;
mod inspect;
mod review;
mod run;

use std::path::PathBuf;

use crate::args::{Cli, Command};

/// How a command failed, which decides the exit code.
#[derive(Debug)]
pub enum CliError {
    /// Bad input or missing configuration: exit 2.
    Usage(String),
    /// Anything else: exit 1.
    Failed(String),
    /// The team stopped without a final answer (turn limit): exit 3.
    Incomplete(String),
    /// Ctrl-C: exit 130.
    Interrupted(String),
}

impl CliError {
    pub fn failed(error: impl std::fmt::Display) -> Self {
        Self::Failed(one_line(&error.to_string()))
    }
}

/// Errors are printed as one line, whatever they carry.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn execute(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Demo { workspace } => demo::demo(workspace.or(cli.workspace)),
        Command::Run(args) => run::run(&resolve_workspace(cli.workspace)?, args),
        Command::Review {
            request_id,
            approve,
            reject: _,
            feedback,
        } => review::review(
            &resolve_workspace(cli.workspace)?,
            &request_id,
            approve,
            feedback,
        ),
        Command::Status { json } => inspect::status(&resolve_workspace(cli.workspace)?, json),
        Command::Requests { status, json } => {
            inspect::requests(&resolve_workspace(cli.workspace)?, status.as_deref(), json)
        }
        Command::Jobs { json } => inspect::jobs(&resolve_workspace(cli.workspace)?, json),
        Command::Cron { json } => inspect::cron(&resolve_workspace(cli.workspace)?, json),
        Command::Tasks { json } => inspect::tasks(&resolve_workspace(cli.workspace)?, json),
        Command::Mailbox { agent, state, json } => inspect::mailbox(
            &resolve_workspace(cli.workspace)?,
            &agent,
            state.as_deref(),
            json,
        ),
    }
}

fn resolve_workspace(raw: Option<PathBuf>) -> Result<PathBuf, CliError> {
    let path = match raw {
        Some(p) => p,
        None => std::env::current_dir()
            .map_err(|e| CliError::Failed(format!("cannot read the current directory: {e}")))?,
    };
    if !path.is_dir() {
        return Err(CliError::Usage(format!(
            "workspace {} is not a folder",
            path.display()
        )));
    }
    // Absolute, so that prompts, audit lines and the run lock name one place.
    std::fs::canonicalize(&path)
        .map_err(|e| CliError::Failed(format!("cannot resolve workspace {}: {e}", path.display())))
}

/// `90s`, `5m`, `1h`, `250ms`, or plain seconds.
pub fn parse_duration(raw: &str) -> Result<std::time::Duration, CliError> {
    let raw = raw.trim();
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (number, unit) = raw.split_at(split);
    let value: u64 = number.parse().map_err(|_| {
        CliError::Usage(format!(
            "invalid duration {raw:?}: expected e.g. 90s, 5m, 1h"
        ))
    })?;
    let millis = match unit {
        "ms" => Some(value),
        "" | "s" => value.checked_mul(1_000),
        "m" => value.checked_mul(60_000),
        "h" => value.checked_mul(3_600_000),
        _ => None,
    }
    .filter(|&ms| ms > 0)
    .ok_or_else(|| {
        CliError::Usage(format!(
            "invalid duration {raw:?}: expected e.g. 90s, 5m, 1h"
        ))
    })?;
    Ok(std::time::Duration::from_millis(millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5m").unwrap().as_secs(), 300);
        assert_eq!(parse_duration("90s").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("90").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("250ms").unwrap().as_millis(), 250);
        assert_eq!(parse_duration("1h").unwrap().as_secs(), 3600);
        for bad in ["", "m", "5x", "-5s", "0s", "1.5m"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
