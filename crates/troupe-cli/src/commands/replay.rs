//! `troupe replay RUN`: a recorded run played again (being built).

use std::path::Path;

use crate::args::ReplayArgs;
use crate::error::CliError;

pub async fn replay(_workspace: &Path, args: ReplayArgs) -> Result<(), CliError> {
    Err(CliError::usage(format!(
        "troupe replay is not built yet ({})",
        args.run
    )))
}
