//! The terminal view of a run and `troupe run --json`, both rendered from the event stream
//! (SPEC §10): the JSON lines on stdout are exactly `.troupe/events.jsonl`, ending with
//! `run_ended`; colours only on a terminal without `NO_COLOR`; a spinner while a tool runs (on a
//! pseudo-terminal, the tool held on a FIFO the test opens once it sees the spinner); `-v` and
//! `RUST_LOG`; a model retry and a fallback shown as they happen (wiremock on 127.0.0.1).

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use troupe::wire::Event;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::support::{command, ran, wait_for_event, Ran};

/// Long enough for a slow machine; a hang is a failure, not a wait.
const WAIT: Duration = Duration::from_secs(30);

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

/// Writes `script` into the workspace and returns the `troupe run` command using it.
fn scripted(ws: &Path, script: &Value, args: &[&str]) -> std::process::Command {
    let path = ws.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let mut c = command(ws);
    c.args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .args([
            "--model-script",
            path.to_str().unwrap(),
            "--approval",
            "auto",
        ])
        .args(args)
        .stdin(Stdio::null());
    c
}

fn run_scripted(ws: &Path, script: &Value, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut c = scripted(ws, script, args);
    for (k, v) in env {
        c.env(k, v);
    }
    ran(c.output().unwrap())
}

fn events_file(ws: &Path) -> String {
    std::fs::read_to_string(ws.join(".troupe/events.jsonl")).unwrap()
}

fn kinds_of(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| Event::parse_line(l).unwrap().kind)
        .collect()
}

fn glob_then(text: &str) -> Value {
    json!({"responses": [
        {"tool_calls": [{"name": "glob", "arguments": {"pattern": "*.json"}}]},
        {"text": text}
    ]})
}

/// Whether `text` holds a colour (SGR) escape sequence.
fn has_colour(text: &str) -> bool {
    text.match_indices("\x1b[").any(|(at, _)| {
        text[at + 2..]
            .chars()
            .find(|c| !(c.is_ascii_digit() || *c == ';'))
            == Some('m')
    })
}

#[test]
fn json_prints_the_event_stream_and_nothing_else_ending_with_run_ended() {
    let (_dir, ws) = workspace();
    let out = run_scripted(&ws, &glob_then("All done."), &["--json"], &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    let events: Vec<Event> = out
        .stdout
        .lines()
        .map(|l| Event::parse_line(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(events.len() > 3, "{out:#?}");
    for pair in events.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1, "{out:#?}");
    }
    assert_eq!(events[0].kind, "run_started");
    let last = events.last().unwrap();
    assert_eq!(last.kind, "run_ended", "{out:#?}");
    assert_eq!(last.agent, "troupe");
    assert_eq!(last.u64("exit_code"), Some(0));
    assert_eq!(last.str("outcome"), Some("done"));
    assert_eq!(last.str("answer"), Some("All done."));
    assert!(kinds_of(&out.stdout).contains(&"tool_finished".to_owned()));
    // The same events as the file, line for line.
    assert_eq!(out.stdout, events_file(&ws));
    // Human notices stay on stderr, without colours (not a terminal).
    assert!(!out.stderr.contains('\x1b'), "{out:#?}");
}

#[test]
fn json_of_a_run_stopped_by_the_turn_limit_ends_with_its_error() {
    let (_dir, ws) = workspace();
    let glob = json!({"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]});
    let script = json!({"responses": [glob, glob]});
    let out = run_scripted(&ws, &script, &["--json", "--max-turns", "1"], &[]);
    assert_eq!(out.code, 3, "{out:#?}");
    let last = Event::parse_line(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last.kind, "run_ended");
    assert_eq!(last.u64("exit_code"), Some(3));
    assert_eq!(last.str("outcome"), Some("max_turns"));
    assert!(
        last.str("error").unwrap().ends_with("[turn_limit]"),
        "{last:?}"
    );
    assert!(last.str("answer").is_none());
    assert_eq!(
        out.stdout,
        events_file(&ws),
        "nothing but the stream on stdout"
    );
    assert!(
        out.stderr
            .lines()
            .last()
            .unwrap()
            .starts_with("troupe: the lead stopped after 1 model calls"),
        "{out:#?}"
    );
}

#[test]
fn json_errors_before_the_team_exists_are_one_error_object() {
    let (_dir, ws) = workspace();
    let out = ran(command(&ws)
        .args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", " "])
        .arg("--json")
        .output()
        .unwrap());
    super::support::assert_fails_json(&out, 2, "usage");
}

#[test]
fn the_plain_view_renders_the_stream_without_escape_codes_off_a_terminal() {
    let (_dir, ws) = workspace();
    let out = run_scripted(&ws, &glob_then("All done."), &[], &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "All done.\n");
    assert!(!out.stderr.contains("\x1b["), "{out:#?}");
    assert!(out.stderr.contains("lead     tool glob ok in "), "{out:#?}");
    assert!(out.stderr.contains("lead     says: All done."), "{out:#?}");
    // Spinner input and the run's own start and end are lines only with -v.
    assert!(!out.stderr.contains("model call 1 started"), "{out:#?}");
    assert!(!out.stderr.contains("run ended"), "{out:#?}");
    // The stream ends with run_ended in the plain view too.
    let kinds = kinds_of(&events_file(&ws));
    assert_eq!(kinds.last().map(String::as_str), Some("run_ended"));
}

#[test]
fn verbose_shows_every_event_and_info_logs_and_rust_log_chooses_the_logs() {
    let (_dir, ws) = workspace();
    let plain = run_scripted(&ws, &glob_then("ok"), &[], &[]);
    assert_eq!(plain.code, 0, "{plain:#?}");
    assert!(!plain.stderr.contains("INFO"), "{plain:#?}");
    assert!(!plain.stderr.contains("team built"), "{plain:#?}");

    let (_dir, ws) = workspace();
    let verbose = run_scripted(&ws, &glob_then("ok"), &["-v"], &[]);
    assert_eq!(verbose.code, 0, "{verbose:#?}");
    for needle in [
        "lead     model call 1 started",
        "lead     tool glob {",
        "troupe   run ended (done, exit 0)",
        "INFO",
        "team built",
    ] {
        assert!(verbose.stderr.contains(needle), "{needle}: {verbose:#?}");
    }
    assert!(!verbose.stderr.contains("DEBUG"), "{verbose:#?}");

    // -v is global: it may come before the subcommand too.
    let (_dir, ws) = workspace();
    let script = ws.join("script.json");
    std::fs::write(&script, glob_then("ok").to_string()).unwrap();
    let debug = ran(command(&ws)
        .args([
            "-vv",
            "run",
            "--workspace",
            ws.to_str().unwrap(),
            "--prompt",
            "go",
        ])
        .args([
            "--model-script",
            script.to_str().unwrap(),
            "--approval",
            "auto",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap());
    assert_eq!(debug.code, 0, "{debug:#?}");
    assert!(debug.stderr.contains("DEBUG"), "{debug:#?}");
    assert!(debug.stderr.contains("run settings"), "{debug:#?}");
    assert!(debug.stderr.contains("model call 1 started"), "{debug:#?}");

    let (_dir, ws) = workspace();
    let logged = run_scripted(&ws, &glob_then("ok"), &[], &[("RUST_LOG", "debug")]);
    assert_eq!(logged.code, 0, "{logged:#?}");
    assert!(logged.stderr.contains("DEBUG"), "{logged:#?}");
    assert!(logged.stderr.contains("run settings"), "{logged:#?}");
    assert!(
        !logged.stderr.contains("model call 1 started"),
        "RUST_LOG chooses the logs, not the verbose view: {logged:#?}"
    );
}

// ---- On a pseudo-terminal ----

/// Text read from a pseudo-terminal's master side by a thread; tests wait for text in it.
#[derive(Clone, Default)]
pub(super) struct Collected(Arc<(Mutex<(String, bool)>, Condvar)>);

impl Collected {
    pub(super) fn from(mut stream: std::fs::File) -> Self {
        let collected = Self::default();
        let shared = collected.0.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                // EIO once every slave side is closed: the child exited.
                let n = stream.read(&mut buf).unwrap_or(0);
                let mut text = shared.0.lock().unwrap();
                if n == 0 {
                    text.1 = true;
                    shared.1.notify_all();
                    break;
                }
                text.0.push_str(&String::from_utf8_lossy(&buf[..n]));
                shared.1.notify_all();
            }
        });
        collected
    }

    pub(super) fn wait_until(&self, what: &str, ready: impl Fn(&str, bool) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        let mut text = self.0 .0.lock().unwrap();
        while !ready(&text.0, text.1) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "timed out waiting for {what}; so far:\n{}",
                text.0
            );
            text = self.0 .1.wait_timeout(text, left).unwrap().0;
        }
        text.0.clone()
    }

    pub(super) fn wait_for(&self, needle: &str) -> String {
        self.wait_until(needle, |t, _| t.contains(needle))
    }

    pub(super) fn wait_closed(&self) -> String {
        self.wait_until("the end of the output", |_, closed| closed)
    }
}

/// A pseudo-terminal of 120 columns: (master, slave).
pub(super) fn pty() -> (std::fs::File, std::fs::File) {
    // SAFETY: posix_openpt/grantpt/unlockpt/ptsname_r/ioctl on a descriptor we own; every result
    // is checked before use.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        let master = OwnedFd::from_raw_fd(master);
        assert_eq!(libc::grantpt(master.as_raw_fd()), 0);
        assert_eq!(libc::unlockpt(master.as_raw_fd()), 0);
        let size = libc::winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        assert_eq!(libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()),
            0
        );
        let name = std::ffi::CStr::from_ptr(name.as_ptr()).to_str().unwrap();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name)
            .unwrap();
        (std::fs::File::from(master), slave)
    }
}

/// Starts `command` with its stdin and stderr on a fresh pseudo-terminal (stdout dropped): the
/// child, the terminal's side to type into, and what the child writes there.
pub(super) fn on_typed_terminal(
    mut command: std::process::Command,
) -> (std::process::Child, std::fs::File, Collected) {
    let (typed, slave) = pty();
    let child = command
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::null())
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    // `command` holds no copy of the slave once spawned: the master reads EIO at the exit.
    drop(command);
    let text = Collected::from(typed.try_clone().unwrap());
    (child, typed, text)
}

/// Starts `command` with its stderr on a fresh pseudo-terminal (stdout is a pipe, dropped).
fn on_terminal(mut command: std::process::Command) -> (std::process::Child, Collected) {
    let (master, slave) = pty();
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    // `command` holds no copy of the slave once spawned: the master reads EIO at the exit.
    drop(command);
    (child, Collected::from(master))
}

fn mkfifo(path: &Path) {
    let name = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
}

#[test]
fn on_a_terminal_agents_have_colours_and_a_spinner_shows_a_running_tool() {
    let (_dir, ws) = workspace();
    let fifo = ws.join("go.fifo");
    mkfifo(&fifo);
    let script = json!({"responses": [
        {"tool_calls": [{"name": "shell", "arguments": {
            "command": format!("read line < {}; echo got $line", fifo.display())}}]},
        {"text": "All done."}
    ]});
    let (mut child, text) = on_terminal(scripted(&ws, &script, &[]));
    let seen = text.wait_for("running shell");
    assert!(seen.contains("lead"), "{seen}");
    // The tool waits for us: open the FIFO and let it finish.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
    let all = text.wait_closed();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{all}");
    assert!(has_colour(&all), "colours on a terminal: {all:?}");
    assert!(all.contains("\x1b[1;36mlead"), "the lead's colour: {all:?}");
    assert!(all.contains("tool shell ok in"), "{all:?}");
    assert!(all.contains("got go"), "{all:?}");
}

#[test]
fn no_color_on_a_terminal_means_no_colours() {
    let (_dir, ws) = workspace();
    let mut c = scripted(&ws, &glob_then("All done."), &["-v"]);
    c.env("NO_COLOR", "");
    let (mut child, text) = on_terminal(c);
    let all = text.wait_closed();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{all}");
    assert!(all.contains("tool glob ok in"), "{all:?}");
    assert!(all.contains("INFO"), "{all:?}");
    assert!(!has_colour(&all), "{all:?}");
}

// ---- Model retries and fallbacks, as they happen ----

fn answer(model: &str, text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "c1", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    }))
}

/// A response held back until the test says so: the model call it answers is still in flight
/// while the test looks at what the run has shown so far.
struct Gated {
    open: Mutex<std::sync::mpsc::Receiver<()>>,
    opened: Arc<std::sync::atomic::AtomicBool>,
    response: ResponseTemplate,
}

impl Gated {
    fn new(response: ResponseTemplate) -> (Self, std::sync::mpsc::Sender<()>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let gated = Self {
            open: Mutex::new(rx),
            opened: Arc::default(),
            response,
        };
        (gated, tx)
    }
}

impl Respond for Gated {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        if self.open.lock().unwrap().recv_timeout(WAIT).is_ok() {
            self.opened.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        self.response.clone()
    }
}

/// Runs `troupe run` against `server` in a blocking task so that the server keeps serving.
/// Once a line of stderr contains `shown`, `open` is signalled (the gated answer goes out).
async fn run_against(
    ws: &Path,
    server: &MockServer,
    env: &[(&str, &str)],
    shown: &'static str,
    open: std::sync::mpsc::Sender<()>,
) -> Ran {
    let mut c = command(ws);
    c.args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "hi"])
        .args(["--approval", "deny"])
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_MODEL", "m")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        let mut child = c.spawn().unwrap();
        let mut stderr = String::new();
        // Sent once, then dropped: later calls (memory extraction) are answered at once.
        let mut open = Some(open);
        for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
            let line = line.unwrap();
            if line.contains(shown) {
                if let Some(open) = open.take() {
                    let _ = open.send(());
                }
            }
            stderr.push_str(&line);
            stderr.push('\n');
        }
        let mut stdout = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        let code = child.wait().unwrap().code().unwrap();
        Ran {
            code,
            stdout,
            stderr,
        }
    })
    .await
    .unwrap()
}

fn events_of(ws: &Path, kind: &str) -> Vec<Event> {
    events_file(ws)
        .lines()
        .map(|l| Event::parse_line(l).unwrap())
        .filter(|e| e.kind == kind)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_shown_as_it_happens_and_recorded() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(500).set_body_string("boom"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let (gated, open) = Gated::new(answer("m", "Recovered."));
    let opened = gated.opened.clone();
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(gated)
        .mount(&server)
        .await;
    let (_dir, ws) = workspace();
    let retrying = "lead     model m failed (attempt 1), retrying in";
    let out = run_against(&ws, &server, &[], retrying, open).await;
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        opened.load(std::sync::atomic::Ordering::SeqCst),
        "the retry was shown while the call was in flight: {out:#?}"
    );
    assert_eq!(out.stdout, "Recovered.\n");
    assert!(
        out.stderr
            .contains("lead     model m failed (attempt 1), retrying in"),
        "{out:#?}"
    );
    let retries = events_of(&ws, "model_retry");
    assert_eq!(retries.len(), 1, "{}", events_file(&ws));
    assert_eq!(retries[0].u64("attempt"), Some(1));
    let finished = events_of(&ws, "model_call_finished");
    assert_eq!(finished[0].u64("attempts"), Some(2), "{finished:?}");
    // The closing line: tokens per agent and in all.
    assert!(out.stderr.contains("tokens"), "{out:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_is_shown_as_it_happens_and_recorded() {
    let server = MockServer::start().await;
    let (gated, open) = Gated::new(answer("fb", "From the fallback."));
    let opened = gated.opened.clone();
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(json!({"model": "fb"})))
        .respond_with(gated)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(404).set_body_json(json!({
            "error": {"message": "The model `m` does not exist", "type": "invalid_request_error"}
        })))
        .mount(&server)
        .await;
    let (_dir, ws) = workspace();
    let falling_back = "lead     model m failed, falling back to fb";
    let out = run_against(
        &ws,
        &server,
        &[("OPENAI_FALLBACK_MODEL", "fb")],
        falling_back,
        open,
    )
    .await;
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        opened.load(std::sync::atomic::Ordering::SeqCst),
        "the fallback was shown while the call was in flight: {out:#?}"
    );
    assert_eq!(out.stdout, "From the fallback.\n");
    assert!(
        out.stderr
            .contains("lead     model m failed, falling back to fb"),
        "{out:#?}"
    );
    assert_eq!(events_of(&ws, "model_fallback").len(), 1);
    let finished = events_of(&ws, "model_call_finished");
    assert_eq!(
        finished[0].fields.get("fallback_used"),
        Some(&Value::Bool(true)),
        "{finished:?}"
    );
    assert_eq!(finished[0].str("model"), Some("fb"));
}

// ---- The approval prompt with spinners on the screen ----

#[test]
fn nothing_is_drawn_over_the_approval_prompt_and_held_lines_follow_the_answer() {
    let (_dir, ws) = workspace();
    let noted = json!({"text": "Noted."});
    let script = json!({"agents": {
        "lead": [
            {"tool_calls": [{"name": "spawn_teammate", "arguments": {
                "name": "writer", "role": "writer", "prompt": "Plan, then say hello."}}]},
            {"tool_calls": [{"name": "shell", "arguments": {"command": "echo hi"}}]},
            {"text": "All done."}, noted, noted, noted, noted
        ],
        "writer": [
            {"tool_calls": [{"name": "submit_plan", "arguments": {"plan": "Say hello."}}]},
            {"text": "Plan sent."},
            {"text": "Approved, thanks."}, noted, noted, noted
        ]
    }});
    let path = ws.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let mut c = command(&ws);
    c.args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .args(["--model-script", path.to_str().unwrap(), "--require-plans"]);
    let (mut child, mut typed, text) = on_typed_terminal(c);

    // The lead's prompt is up, and the writer's plan waits for an answer.
    let shown = text.wait_for(PROMPT_END);
    assert!(shown.contains("agent lead wants to run shell"), "{shown}");
    let plan = wait_for_event(&ws, "the writer's plan", |e| e.kind == "request_created");
    // A person approves the plan from another terminal: the writer goes on while the prompt is
    // up, and its lines must wait (as must the spinners, off the screen).
    let review = super::support::troupe_in(
        &ws,
        &["review", plan.str("request_id").unwrap(), "--approve"],
    );
    assert_eq!(review.code, 0, "{review:#?}");
    wait_for_event(&ws, "the writer's words", |e| {
        e.agent == "writer" && e.str("text") == Some("Approved, thanks.")
    });
    typed.write_all(b"y\n").unwrap();
    let all = text.wait_closed();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{all}");
    let after = &all[all.find(PROMPT_END).unwrap() + PROMPT_END.len()..];
    assert!(
        after.starts_with("y\r\n"),
        "the prompt stays the last thing on screen until it is answered: {after:?}"
    );
    // The held lines come after the answer.
    assert!(after.contains("says: Approved, thanks."), "{all:?}");
    assert!(after.contains("tool shell ok in"), "{all:?}");
}

/// The end of the approval prompt, with or without the always/save choices.
const PROMPT_END: &str = "/N] ";
