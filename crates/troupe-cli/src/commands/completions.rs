//! `troupe completions <shell>`: a completion script generated from the same clap definition
//! the parser uses, so it never drifts from the real flags.

use clap::CommandFactory;

use crate::args::Cli;
use crate::error::CliError;
use crate::render;

pub async fn completions(shell: clap_complete::Shell) -> Result<(), CliError> {
    // Into memory first: the generator panics on a failed write, `print_verbatim` does not (a
    // closed pipe is not an error).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "troupe", &mut script);
    render::print_verbatim(&String::from_utf8_lossy(&script))
}
