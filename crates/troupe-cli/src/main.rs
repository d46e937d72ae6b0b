//! `troupe`: the command-line tool. Thin by design: parse arguments, turn them into validated
//! settings, hand them to the library, render the result, map failures to exit codes.
//!
//! Exit codes: 0 success; 1 a failure, printed as one line `troupe: <cause>`; 2 bad usage or
//! missing configuration (clap's own usage errors also exit 2); 3 the team stopped without a
//! final answer (turn limit); 130 interrupted (Ctrl-C). With `--json`, an error is one JSON
//! object on stdout instead (`CliError::report`).
//!
//! Every command is an `async fn` run to its end on one tokio runtime, built here from the
//! command ([`args::Command::runtime_flavor`]).

mod agent_setup;
mod args;
mod commands;
mod error;
mod event_line;
mod input;
mod interrupt;
mod json_lines;
mod observe;
mod permission_answer;
mod plan_answer;
mod render;
mod sandboxing;
mod save_allow;
mod serve;
mod store_choice;
mod telemetry;
mod trust;
mod user_message;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::args::{Cli, RuntimeFlavor};
use crate::error::CliError;

fn main() -> ExitCode {
    // SAFETY: first thing in `main`, while the process has its one thread and nothing holds a
    // pointer into the environment. After this, no command troupe runs can read the API key
    // from `/proc/<troupe's pid>/environ` (see `troupe::secrets::environment`).
    unsafe {
        troupe::secrets::environment::take_from_environment();
    }
    let cli = match Cli::try_parse_from(commands::session::arguments()) {
        Ok(cli) => cli,
        Err(error) => return usage_error(&error),
    };
    observe::logging::init(cli.verbose, cli.command.runs_a_team());
    trust::set_flag(cli.trust_workspace);
    let json = cli.command.json_output();
    let runtime = match runtime(cli.command.runtime_flavor()) {
        Ok(runtime) => runtime,
        Err(error) => return error.report(json),
    };
    let result = runtime.block_on(commands::execute(cli));
    // A blocking call the command left behind (a tool's lock wait or file read cannot be
    // cancelled) does not keep the process for long.
    runtime.shutdown_timeout(SHUTDOWN_WAIT);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => error.report(json),
    }
}

/// How long the end of a command waits for blocking work still running.
const SHUTDOWN_WAIT: Duration = Duration::from_millis(500);

/// The command's one runtime, with its I/O and time drivers.
fn runtime(flavor: RuntimeFlavor) -> Result<tokio::runtime::Runtime, CliError> {
    let mut builder = match flavor {
        RuntimeFlavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        RuntimeFlavor::MultiThread => tokio::runtime::Builder::new_multi_thread(),
    };
    builder.enable_all().build().map_err(|e| {
        CliError::failed(format!("start the async runtime: {e}")).with_code("io_error")
    })
}

/// clap's own errors are reported by clap (with usage and hints), except when the arguments ask
/// for JSON: then the error is JSON too. `--help` and `--version` are not errors.
fn usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let wants_json = std::env::args_os().skip(1).any(|arg| arg == "--json");
    let shown = matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if wants_json && !shown {
        return CliError::from_clap(error).report(true);
    }
    error.exit()
}
