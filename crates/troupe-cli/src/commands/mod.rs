//! One function per command. Each turns raw arguments into validated settings first, so that
//! bad input is refused before anything runs.

mod completions;
mod demo;
mod inspect;
mod review;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::args::{Cli, Command};
use crate::interrupt::INTERRUPTED_EXIT;

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

    /// A usage error found by clap (unknown flag, missing value, …), already rendered by it.
    pub fn from_clap(error: &clap::Error) -> Self {
        let rendered = error.render().to_string();
        let first = rendered.lines().next().unwrap_or("invalid arguments");
        Self::Usage(first.strip_prefix("error: ").unwrap_or(first).to_owned())
    }

    fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Failed(_) => 1,
            Self::Incomplete(_) => 3,
            Self::Interrupted(_) => INTERRUPTED_EXIT,
        }
    }

    fn message(&self) -> &str {
        match self {
            Self::Usage(m) | Self::Failed(m) | Self::Incomplete(m) | Self::Interrupted(m) => m,
        }
    }

    /// The stable code and the message without it. Every command ends a message with
    /// ` [code]` when the error has one; the others get the code of their kind.
    fn code_and_cause(&self) -> (&str, &str) {
        let message = self.message();
        let coded = message
            .strip_suffix(']')
            .and_then(|rest| rest.rsplit_once(" ["))
            .filter(|(_, code)| {
                !code.is_empty()
                    && code
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            });
        match coded {
            Some((cause, code)) => (code, cause),
            None => (
                match self {
                    Self::Usage(_) => "usage",
                    Self::Failed(_) => "failed",
                    Self::Incomplete(_) => "incomplete",
                    Self::Interrupted(_) => "interrupted",
                },
                message,
            ),
        }
    }

    /// Tells the user and gives the exit code: one line `troupe: <cause> [<code>]` on stderr,
    /// or, when JSON was asked for, one object `{"error":{"code","message"}}` on stdout and
    /// nothing on stderr (the exit code is the same).
    pub fn report(&self, json: bool) -> ExitCode {
        if json {
            let (code, cause) = self.code_and_cause();
            let object = serde_json::json!({"error": {"code": code, "message": cause}});
            let _ = crate::render::print_text(&format!("{object}\n"));
        } else {
            eprintln!("troupe: {}", self.message());
        }
        ExitCode::from(self.exit_code())
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
        Command::Completions { shell } => completions::completions(shell),
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

/// `90s`, `5m`, `1h30m`, `1h 30m`, `1.5h`, `250ms` (humantime's units), or plain seconds; never
/// zero.
pub fn parse_duration(raw: &str) -> Result<std::time::Duration, CliError> {
    let raw = raw.trim();
    let parsed = if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) {
        raw.parse().ok().map(std::time::Duration::from_secs)
    } else {
        humantime::parse_duration(raw).ok()
    };
    parsed.filter(|d| !d.is_zero()).ok_or_else(|| {
        CliError::Usage(format!(
            "invalid duration {raw:?}: expected e.g. 90s, 5m, 1h30m"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h30m").unwrap().as_secs(), 5_400);
        assert_eq!(parse_duration("1h 30m").unwrap().as_secs(), 5_400);
        assert_eq!(parse_duration("2m30s").unwrap().as_secs(), 150);
        assert_eq!(parse_duration("1d").unwrap().as_secs(), 86_400);
        assert_eq!(parse_duration("1.5m").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("5m").unwrap().as_secs(), 300);
        assert_eq!(parse_duration("90s").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("90").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("250ms").unwrap().as_millis(), 250);
        assert_eq!(parse_duration("1h").unwrap().as_secs(), 3600);
        for bad in ["", "m", "5x", "-5s", "0s", "0", "5m garbage", "1h30"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn errors_carry_a_stable_code() {
        let coded = CliError::Failed("no mailbox for agent ghost [unknown_agent]".into());
        assert_eq!(
            coded.code_and_cause(),
            ("unknown_agent", "no mailbox for agent ghost")
        );
        let plain = CliError::Usage("invalid agent name \"Lead\"".into());
        assert_eq!(
            plain.code_and_cause(),
            ("usage", "invalid agent name \"Lead\"")
        );
        let odd = CliError::Failed("a message that ends [With Brackets]".into());
        assert_eq!(odd.code_and_cause().0, "failed");
    }
}
