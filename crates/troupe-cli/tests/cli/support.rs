//! Running `troupe` as a child process, with the model variables removed so that the tests never
//! depend on (or reach) a real model server.

use std::path::Path;
use std::process::{Command, Output};

/// Every variable the model configuration reads (`troupe::model::config::VARIABLES`, spelled
/// out so that a new one is a conscious addition here).
pub const MODEL_VARIABLES: [&str; 18] = [
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "OPENAI_FALLBACK_MODEL",
    "TROUPE_MODEL_TIMEOUT_SECS",
    "TROUPE_MODEL_MAX_ATTEMPTS",
    "TROUPE_MODEL_OVERLOAD_FALLBACK_AFTER",
    "TROUPE_MODEL_DEADLINE_SECS",
    "TROUPE_PROVIDER",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_BASE_URL",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "OPENAI_API_VERSION",
    "AZURE_OPENAI_API_VERSION",
    "TROUPE_MODEL_MAX_TOKENS",
    "TROUPE_THINKING_BUDGET",
];

/// What a finished command left.
#[derive(Debug)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Where the tests' troupe looks for the user's `config.toml`: a folder with no settings, so
/// that the developer's real settings are never read (a test that wants some sets its own).
/// One per test process: a command that records something there (the approval prompt's
/// `[s]ave` records the entry's trust) leaves it to this run's tests alone, never to a later
/// run's.
pub fn no_user_config() -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "troupe-cli-tests-no-user-config-{}",
        std::process::id()
    ))
}

pub fn command(cwd: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command.current_dir(cwd);
    command.env("XDG_CONFIG_HOME", no_user_config());
    without_settings_variables(&mut command);
    command
}

/// Removes from `command`'s environment every model and store variable (and
/// `TROUPE_TRUST_WORKSPACE`), for a command that runs troupe in a shell.
pub fn without_settings_variables(command: &mut Command) -> &mut Command {
    for name in MODEL_VARIABLES
        .iter()
        .chain(&STORE_VARIABLES)
        .chain(&TELEMETRY_VARIABLES)
    {
        command.env_remove(name);
    }
    command
}

/// A developer's OpenTelemetry variables must not send a test's spans anywhere.
const TELEMETRY_VARIABLES: [&str; 13] = [
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
];

/// A developer's shared-store settings must not turn a test's run into a database run.
/// A developer's `TROUPE_TRUST_WORKSPACE` must not trust a test's workspace either.
const STORE_VARIABLES: [&str; 4] = [
    "TROUPE_STORE_URL",
    "TROUPE_TEAM",
    "TROUPE_LEASE",
    "TROUPE_TRUST_WORKSPACE",
];

pub fn ran(output: Output) -> Ran {
    Ran {
        code: output.status.code().expect("troupe was killed by a signal"),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Runs `troupe ARGS` in `cwd`.
pub fn troupe(cwd: &Path, args: &[&str]) -> Ran {
    ran(command(cwd).args(args).output().unwrap())
}

/// Runs `troupe ARGS --workspace WS`.
pub fn troupe_in(workspace: &Path, args: &[&str]) -> Ran {
    let mut all: Vec<&str> = args.to_vec();
    let ws = workspace.to_str().unwrap();
    all.extend(["--workspace", ws]);
    troupe(workspace, &all)
}

/// Parses stdout as JSON, failing with the whole output if it is not.
pub fn json(ran: &Ran) -> serde_json::Value {
    assert_eq!(ran.code, 0, "{ran:#?}");
    serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("{e}: {ran:#?}"))
}

/// A failure as the CLI promises it: the exit code, nothing on stdout, one line on stderr
/// starting `troupe: ` and containing `needle`, no panic.
pub fn assert_fails(ran: &Ran, code: i32, needle: &str) {
    assert_eq!(ran.code, code, "{ran:#?}");
    assert!(!ran.stderr.contains("panicked"), "{ran:#?}");
    let lines: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {ran:#?}");
    assert!(lines[0].starts_with("troupe: "), "{ran:#?}");
    assert!(lines[0].contains(needle), "{needle:?} in {ran:#?}");
}

/// A failure under `--json`: the exit code, nothing on stderr, and on stdout one object
/// `{"error":{"code","message"}}` whose code is `code`.
pub fn assert_fails_json(ran: &Ran, exit: i32, code: &str) {
    assert_eq!(ran.code, exit, "{ran:#?}");
    assert_eq!(ran.stderr, "", "{ran:#?}");
    let error: serde_json::Value =
        serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("{e}: {ran:#?}"));
    assert_eq!(error["error"]["code"], code, "{ran:#?}");
    assert!(error["error"]["message"].is_string(), "{ran:#?}");
}

/// The sorted keys of a JSON object.
pub fn keys(value: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

/// A fresh workspace after `troupe demo --workspace` ran in it.
pub fn demo_workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(dir.path()).unwrap();
    let ran = troupe(
        &workspace,
        &["demo", "--workspace", workspace.to_str().unwrap()],
    );
    assert_eq!(ran.code, 0, "{ran:#?}");
    (dir, workspace)
}

/// A failure in whichever form the command's flags ask for: one `troupe: …` line on stderr, or,
/// under `--json`, one error object on stdout. Returns the failure as `<message> [<code>]`.
pub fn failure_text(ran: &Ran, exit: i32) -> String {
    assert_eq!(ran.code, exit, "{ran:#?}");
    assert!(!ran.stderr.contains("panicked"), "{ran:#?}");
    if ran.stderr.is_empty() {
        let error: serde_json::Value =
            serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("{e}: {ran:#?}"));
        let message = error["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("{ran:#?}"));
        let code = error["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("{ran:#?}"));
        return format!("{message} [{code}]");
    }
    assert_eq!(ran.stdout, "", "{ran:#?}");
    let lines: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {ran:#?}");
    lines[0]
        .strip_prefix("troupe: ")
        .unwrap_or_else(|| panic!("{ran:#?}"))
        .to_owned()
}

/// Waits (inotify, bounded) until `.troupe/events.jsonl` holds an event matching `found`;
/// returns it.
pub fn wait_for_event(
    ws: &Path,
    what: &str,
    found: impl Fn(&troupe::wire::Event) -> bool,
) -> troupe::wire::Event {
    let file = ws.join(".troupe/events.jsonl");
    let changed = std::sync::Arc::new((std::sync::Mutex::new(0_u64), std::sync::Condvar::new()));
    let signal = changed.clone();
    let _watch = troupe::store::events::follow::watch_file(&file, move || {
        *signal.0.lock().unwrap() += 1;
        signal.1.notify_all();
    })
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = changed.0.lock().unwrap();
    loop {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if let Some(event) = text
            .lines()
            .filter_map(|l| troupe::wire::Event::parse_line(l).ok())
            .find(|e| found(e))
        {
            return event;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(!left.is_zero(), "timed out waiting for {what}:\n{text}");
        seen = changed.1.wait_timeout(seen, left).unwrap().0;
    }
}

/// `git <args>` in `dir` as a person's git would run it — the repository's own config honoured —
/// with a test identity and nothing from the machine: no `GIT_*` variable of the environment,
/// no `/etc/gitconfig`, HOME the given folder. Its output, whatever its status.
pub fn git_output(dir: &Path, home: &Path, args: &[&str]) -> Output {
    let mut command = Command::new("git");
    for (key, _) in std::env::vars() {
        if key.starts_with("GIT_") {
            command.env_remove(key);
        }
    }
    command
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", home)
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgSign=false",
        ])
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

/// [`git_output`], which must succeed: its stdout.
pub fn git(dir: &Path, home: &Path, args: &[&str]) -> String {
    let out = git_output(dir, home, args);
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Whether `token` is a short request id as the run's lines show it: 8 lowercase hex digits.
pub fn is_short_request_id(token: &str) -> bool {
    token.len() == troupe::wire::SHORT_REQUEST_ID_LEN
        && token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// SIGKILLs `run`, a `troupe run` whose agent is blocked in a shell call reading the FIFO
/// `gate`, and waits until nothing of it holds the workspace `ws`. The shell call may outlive
/// the killed run (a sandboxed command is not killed with it) and, while it lives, keep the
/// workspace's run lock: it is let go — a writer opened in a thread of its own, since the shell
/// may be gone already — and the wait is on the lock itself.
pub fn kill_run_blocked_on(run: &mut std::process::Child, ws: &Path, gate: &Path) {
    run.kill().unwrap(); // SIGKILL
    run.wait().unwrap();
    let gate = gate.to_owned();
    std::thread::spawn(move || {
        use std::io::Write;
        if let Ok(mut gate) = std::fs::OpenOptions::new().write(true).open(gate) {
            let _ = gate.write_all(b"go\n");
        }
    });
    let run_lock = std::fs::File::open(troupe::layout::Layout::new(ws).run_lock()).unwrap();
    run_lock.lock().unwrap();
}
