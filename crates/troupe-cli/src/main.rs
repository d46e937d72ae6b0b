//! `troupe`: the command-line tool. Thin by design: parse arguments, turn them into validated
//! settings, hand them to the library, render the result, map failures to exit codes.
//!
//! Exit codes: 0 success; 1 a failure, printed as one line `troupe: <cause>`; 2 bad usage or
//! missing configuration (clap's own usage errors also exit 2).

mod args;
mod commands;
mod observe;
mod render;

use std::process::ExitCode;

use clap::Parser;

use crate::args::Cli;
use crate::commands::CliError;

fn main() -> ExitCode {
    // SAFETY: first thing in `main`, while the process has its one thread and nothing holds a
    // pointer into the environment. After this, no command troupe runs can read the API key
    // from `/proc/<troupe's pid>/environ` (see `troupe::secrets::environment`).
    unsafe {
        troupe::secrets::environment::take_from_environment();
    }
    let cli = Cli::parse();
    match commands::execute(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Usage(message)) => {
            eprintln!("troupe: {message}");
            ExitCode::from(2)
        }
        Err(CliError::Failed(message)) => {
            eprintln!("troupe: {message}");
            ExitCode::from(1)
        }
    }
}
