//! The tracing output on stderr: `warn` without a flag, `info` with `-v`, `debug` with `-vv`,
//! `trace` beyond; `RUST_LOG`, when set, wins. Colours as for the rest of stderr.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use super::{style, terminal::StderrRecord};

/// The filter for `verbose` (the count of `-v`) when `RUST_LOG` is not set. The MCP SDK's own
/// messages are left out by default and shown from `-v`: troupe reports a server that fails or
/// dies itself, once.
fn level(verbose: u8) -> &'static str {
    match verbose {
        0 => "warn,rmcp=off",
        1 => "info,rmcp=warn",
        2 => "debug",
        _ => "trace",
    }
}

/// Installs the subscriber. A `RUST_LOG` that does not parse falls back to the flag's level
/// (tracing-subscriber says which directive it skipped).
pub fn init(verbose: u8) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(raw) if !raw.trim().is_empty() => EnvFilter::builder()
            .parse(raw.trim())
            .unwrap_or_else(|_| EnvFilter::new(level(verbose))),
        _ => EnvFilter::new(level(verbose)),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(StderrRecord::default)
        .with_ansi(style::colour_wanted(std::io::stderr().is_terminal()))
        .try_init();
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_v_is_one_level_more() {
        assert_eq!(
            [0, 1, 2, 3, 9].map(super::level),
            ["warn,rmcp=off", "info,rmcp=warn", "debug", "trace", "trace"]
        );
    }
}
