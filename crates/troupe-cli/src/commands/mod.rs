//! One function per command. Each turns raw arguments into validated settings first, so that
//! bad input is refused before anything runs.

mod compact;
mod completions;
pub(crate) mod config;
mod demo;
mod inspect;
mod log;
mod mcp;
mod memory;
pub mod review;
mod run;
mod send;
mod store;
mod timeline;
mod trust;
mod worker;

use std::path::PathBuf;

use crate::args::{Cli, Command};
pub use crate::error::CliError;
pub use store::store_choice;

pub fn execute(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Demo { workspace } => demo::demo(workspace.or(cli.workspace), cli.verbose),
        Command::Run(args) => run::run(&resolve_workspace(cli.workspace)?, args, cli.verbose),
        Command::Worker(args) => {
            worker::worker(&resolve_workspace(cli.workspace)?, args, cli.verbose)
        }
        Command::Review {
            request_id,
            approve,
            reject: _,
            feedback,
            store,
        } => review::review(
            &resolve_workspace(cli.workspace)?,
            &request_id,
            approve,
            feedback,
            &store,
        ),
        Command::Send {
            agent,
            text,
            json,
            store,
        } => send::send(
            &resolve_workspace(cli.workspace)?,
            &agent,
            &text,
            json,
            &store,
        ),
        Command::Status { json, store } => {
            inspect::status(&resolve_workspace(cli.workspace)?, json, &store)
        }
        Command::Requests {
            status,
            json,
            store,
        } => inspect::requests(
            &resolve_workspace(cli.workspace)?,
            status.as_deref(),
            json,
            &store,
        ),
        Command::Jobs { json, store } => {
            inspect::jobs(&resolve_workspace(cli.workspace)?, json, &store)
        }
        Command::Cron { json, store } => {
            inspect::cron(&resolve_workspace(cli.workspace)?, json, &store)
        }
        Command::Tasks { json, store } => {
            inspect::tasks(&resolve_workspace(cli.workspace)?, json, &store)
        }
        Command::Compact {
            agent,
            model,
            no_memory,
            json,
            store,
        } => compact::compact(
            &resolve_workspace(cli.workspace)?,
            &agent,
            &model,
            no_memory,
            json,
            &store,
        ),
        Command::Memory {
            action,
            json,
            store,
            team,
        } => memory::memory(
            &resolve_workspace(cli.workspace)?,
            action,
            json,
            &crate::args::StoreFlags {
                store,
                team,
                ..Default::default()
            },
        ),
        Command::Serve { port, store } => {
            crate::serve::serve(&resolve_workspace(cli.workspace)?, port, &store)
        }
        Command::Timeline { html, store } => {
            timeline::timeline_html(&resolve_workspace(cli.workspace)?, &html, &store)
        }
        Command::Log(args) => log::log(&resolve_workspace(cli.workspace)?, &args),
        Command::Completions { shell } => completions::completions(shell),
        Command::Mcp { action, json } => mcp::mcp(&resolve_workspace(cli.workspace)?, action, json),
        Command::Trust { show, revoke, yes } => trust::trust(
            &resolve_workspace(cli.workspace)?,
            trust::Action::of(show, revoke, yes),
        ),
        Command::Config { model, store, json } => {
            config::config(&resolve_workspace(cli.workspace)?, &model, &store, json)
        }
        Command::Mailbox {
            agent,
            state,
            json,
            store,
        } => inspect::mailbox(
            &resolve_workspace(cli.workspace)?,
            &agent,
            state.as_deref(),
            json,
            &store,
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

/// The largest text read from standard input for `--prompt -` or `troupe send AGENT -`.
pub const MAX_STDIN_TEXT_BYTES: u64 = 1024 * 1024;

/// `raw` itself, or for `-` the whole of standard input (UTF-8, at most
/// [`MAX_STDIN_TEXT_BYTES`]), as other agent CLIs read a piped prompt. `what` names it in errors.
pub fn text_or_stdin(raw: &str, what: &str) -> Result<String, CliError> {
    if raw != "-" {
        return Ok(raw.to_owned());
    }
    use std::io::Read;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_STDIN_TEXT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::Failed(format!("cannot read {what} from standard input: {e}")))?;
    if bytes.len() as u64 > MAX_STDIN_TEXT_BYTES {
        return Err(CliError::Usage(format!(
            "{what} on standard input is over {} MiB",
            MAX_STDIN_TEXT_BYTES / (1024 * 1024)
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| CliError::Usage(format!("{what} on standard input is not valid UTF-8")))
}

/// `90s`, `5m`, `1h30m`, `1h 30m`, `1.5h`, `250ms` (humantime's units), or plain seconds; never
/// zero.
pub fn parse_duration(raw: &str) -> Result<std::time::Duration, CliError> {
    let raw = raw.trim();
    troupe::settings::parse_duration(raw).ok_or_else(|| {
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
}
