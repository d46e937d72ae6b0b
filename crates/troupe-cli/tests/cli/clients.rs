//! The protocols' official Python clients (PyPI `agent-client-protocol` for ACP, `mcp` for
//! MCP), in the virtual environment `.ci/run` installs (`$HOME/.cache/troupe-test/clients`),
//! which the tests of `troupe acp` and `troupe mcp serve` drive troupe with. Without it those
//! tests skip with one notice, except under `TROUPE_TEST_CLIENTS_REQUIRED=1` (CI), where that
//! is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The venv's Python, or `None` (said once per test) when it is not installed.
pub fn python(test: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    let python = home.join(".cache/troupe-test/clients/bin/python");
    if python.is_file() {
        return Some(python);
    }
    assert!(
        !std::env::var("TROUPE_TEST_CLIENTS_REQUIRED").is_ok_and(|v| v == "1"),
        "TROUPE_TEST_CLIENTS_REQUIRED=1 but {} is missing: run .ci/run once to install the \
         protocols' Python clients",
        python.display()
    );
    eprintln!(
        "skipping {test}: the ACP and MCP Python clients are not installed ({} is missing; \
         .ci/run installs them)",
        python.display()
    );
    None
}

/// A client script of `tests/clients/` run with `python`, troupe's environment as the tests
/// set it (no user config, no model or store variables) passed on to the troupe it starts.
pub fn script(python: &Path, name: &str, cwd: &Path) -> Command {
    let mut command = Command::new(python);
    command
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/clients")
                .join(name),
        )
        .arg(env!("CARGO_BIN_EXE_troupe"))
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", super::support::no_user_config());
    super::support::without_settings_variables(&mut command);
    command
}
