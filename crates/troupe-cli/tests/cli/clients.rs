//! The protocols' official Python clients (PyPI `mcp` for `troupe mcp serve`,
//! `agent-client-protocol` for `troupe acp`), in the virtual environment `.ci/run` installs them
//! into: `$HOME/.cache/troupe-test/clients`. A test that drives troupe with one asks
//! [`require_or_skip`] for the venv's python: without it (or without the package) the test is
//! skipped with one notice, unless `TROUPE_TEST_CLIENTS_REQUIRED=1` (as `.ci/run` sets it):
//! then it fails.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// Set to `1` where the clients must be there (CI): a missing one fails the test.
pub const REQUIRED: &str = "TROUPE_TEST_CLIENTS_REQUIRED";

/// The clients' virtual environment.
pub fn venv() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    Some(PathBuf::from(home).join(".cache/troupe-test/clients"))
}

/// The venv's python, when the venv is there.
pub fn python() -> Option<PathBuf> {
    let python = venv()?.join("bin/python");
    python.is_file().then_some(python)
}

/// Whether the venv's `python` imports `module`.
fn imports(python: &PathBuf, module: &str) -> bool {
    Command::new(python)
        .args(["-c", &format!("import {module}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The venv's python when it imports `module` (the client `what` tests need); else `None`,
/// with one notice per module on stderr — or a panic under `TROUPE_TEST_CLIENTS_REQUIRED=1`.
pub fn require_or_skip(module: &str, what: &str) -> Option<PathBuf> {
    if let Some(python) = python().filter(|python| imports(python, module)) {
        return Some(python);
    }
    let venv = venv().map_or_else(
        || "$HOME/.cache/troupe-test/clients".into(),
        |v| v.display().to_string(),
    );
    assert!(
        std::env::var(REQUIRED).as_deref() != Ok("1"),
        "{what}: the Python module {module} is not installed in {venv} and \
         {REQUIRED}=1 (.ci/run installs it)"
    );
    static NOTIFIED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    if NOTIFIED.lock().unwrap().insert(module.to_owned()) {
        eprintln!(
            "skipped: {what} need the Python module {module} in {venv} (.ci/run installs it; \
             {REQUIRED}=1 makes its absence a failure)"
        );
    }
    None
}

/// A client script of `tests/clients/` run with `python`, troupe's environment as the tests
/// set it (no user config, no model or store variables) passed on to the troupe it starts.
pub fn script(python: &std::path::Path, name: &str, cwd: &std::path::Path) -> Command {
    let mut command = Command::new(python);
    command
        .arg(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/clients")
                .join(name),
        )
        .arg(env!("CARGO_BIN_EXE_troupe"))
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", super::support::no_user_config());
    super::support::without_settings_variables(&mut command);
    command
}
