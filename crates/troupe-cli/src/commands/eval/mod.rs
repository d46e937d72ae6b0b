//! `troupe eval SUITE.toml`: a suite of cases run and checked (being built).

use std::path::Path;

use crate::args::EvalArgs;
use crate::error::CliError;

pub async fn eval(_workspace: &Path, args: EvalArgs) -> Result<(), CliError> {
    Err(CliError::usage(format!(
        "troupe eval is not built yet ({})",
        args.suite.display()
    )))
}
