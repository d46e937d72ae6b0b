//! `troupe`: the command-line tool. Thin by design: parse arguments, turn them into validated
//! settings, hand them to the library, render the result, map failures to exit codes.
//!
//! Exit codes: 0 success; 1 a failure, printed as one line `troupe: <cause>`; 2 bad usage or
//! missing configuration (clap's own usage errors also exit 2); 3 the team stopped without a
//! final answer (turn limit); 130 interrupted (Ctrl-C).

mod args;
mod commands;
mod interrupt;
mod observe;
mod render;

use std::process::ExitCode;

use clap::Parser;

use crate::args::Cli;
use crate::commands::CliError;

fn main() -> ExitCode {
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
        Err(CliError::Incomplete(message)) => {
            eprintln!("troupe: {message}");
            ExitCode::from(3)
        }
        Err(CliError::Interrupted(message)) => {
            eprintln!("troupe: {message}");
            ExitCode::from(interrupt::INTERRUPTED_EXIT)
        }
    }
}
