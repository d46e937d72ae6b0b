//! `troupe log`: the event stream printed and followed from another process. Nothing is created
//! in a workspace without state; filters on a real stream written by `troupe demo`; `--json`
//! prints the file's own lines; corrupt lines and FIFOs fail at once. Followers (`-f`) see events
//! appended by an `EventLog` in this process, including when `.troupe` did not exist when they
//! started, and end when their stdout's reader goes away or on SIGTERM. Every wait is for a line,
//! an exit or a kernel watch, with a deadline that fails the test.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use troupe::clock::SystemClock;
use troupe::layout::Layout;
use troupe::secrets::Redactor;
use troupe::store::events::{kinds, EventLog};

use super::special_files::{mkfifo, troupe_within};
use super::support::{assert_fails, command, demo_workspace, failure_text, troupe_in};

/// Long enough for a slow machine; a hang is a failure, not a wait.
const WAIT: Duration = Duration::from_secs(30);

fn empty_workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

fn file_lines(ws: &Path) -> Vec<String> {
    std::fs::read_to_string(Layout::new(ws).events_log())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn stdout_lines(stdout: &str) -> Vec<String> {
    stdout.lines().map(str::to_owned).collect()
}

fn field(line: &str, key: &str) -> serde_json::Value {
    serde_json::from_str::<serde_json::Value>(line).unwrap()[key].clone()
}

fn open_log(ws: &Path) -> EventLog {
    open_run_log(ws, "00000000-0000-4000-8000-00000000001f")
}

/// The stream of `ws` as run `run_id` writes it.
fn open_run_log(ws: &Path, run_id: &str) -> EventLog {
    let layout = Layout::new(ws);
    std::fs::create_dir_all(layout.state_dir()).unwrap();
    EventLog::open(
        &layout,
        Arc::new(SystemClock),
        run_id.into(),
        Redactor::default(),
    )
    .unwrap()
}

fn say(log: &EventLog, agent: &str, text: &str) -> u64 {
    let fields = kinds::fields(serde_json::json!({ "text": text }));
    log.record(agent, kinds::ASSISTANT_TEXT, fields).seq
}

#[test]
fn log_on_a_workspace_without_state_prints_nothing_and_creates_nothing() {
    let (_dir, ws) = empty_workspace();
    for args in [
        &["log"][..],
        &["log", "--json"],
        &["log", "--kind", "run_started"],
    ] {
        let ran = troupe_in(&ws, args);
        assert_eq!(ran.code, 0, "{ran:#?}");
        assert_eq!(ran.stdout, "", "{ran:#?}");
        assert_eq!(ran.stderr, "", "{ran:#?}");
    }
    assert_eq!(
        std::fs::read_dir(&ws).unwrap().count(),
        0,
        "nothing created"
    );
}

#[test]
fn filters_select_the_demo_streams_lines_exactly() {
    let (_dir, ws) = demo_workspace();
    let all = file_lines(&ws);
    assert!(all.len() > 10, "the demo writes events: {all:?}");
    let lines = |args: &[&str]| {
        let ran = troupe_in(&ws, args);
        assert_eq!(ran.code, 0, "{ran:#?}");
        assert_eq!(ran.stderr, "", "{ran:#?}");
        stdout_lines(&ran.stdout)
    };
    let having = |keep: &dyn Fn(&str) -> bool| -> Vec<String> {
        all.iter().filter(|l| keep(l)).cloned().collect()
    };

    assert_eq!(
        lines(&["log", "--json"]),
        all,
        "--json prints the file's lines"
    );
    let writer = having(&|l| field(l, "agent") == "writer");
    assert!(!writer.is_empty() && writer.len() < all.len());
    assert_eq!(lines(&["log", "--json", "--agent", "writer"]), writer);
    assert_eq!(
        lines(&["log", "--json", "--agent", "writer", "--agent", "lead"]),
        having(&|l| field(l, "agent") == "writer" || field(l, "agent") == "lead")
    );
    let tools = having(&|l| {
        field(l, "kind") == kinds::TOOL_STARTED || field(l, "kind") == kinds::TOOL_FINISHED
    });
    assert!(!tools.is_empty());
    assert_eq!(
        lines(&[
            "log",
            "--json",
            "--kind",
            kinds::TOOL_STARTED,
            "--kind",
            kinds::TOOL_FINISHED
        ]),
        tools
    );
    let later = having(&|l| field(l, "seq").as_u64().unwrap() > 10);
    assert_eq!(later.len(), all.len() - 10);
    assert_eq!(lines(&["log", "--json", "--since", "10"]), later);
    assert_eq!(
        lines(&["log", "--json", "--since", "10", "--agent", "writer"]),
        having(&|l| field(l, "seq").as_u64().unwrap() > 10 && field(l, "agent") == "writer")
    );

    // The human form: one line per event, `#<seq> <HH:MM:SS.mmm> <agent> <words>`.
    let human = lines(&["log", "--agent", "writer"]);
    assert_eq!(human.len(), writer.len());
    for (text, json) in human.iter().zip(&writer) {
        let words: Vec<&str> = text.splitn(4, ' ').collect();
        assert_eq!(words[0], format!("#{}", field(json, "seq")), "{text}");
        let at = field(json, "at");
        assert_eq!(words[1], &at.as_str().unwrap()[11..23], "{text}");
        assert_eq!(words[2], "writer", "{text}");
        assert!(words.len() == 4 && !words[3].is_empty(), "{text}");
    }
}

#[test]
fn an_unknown_kind_is_refused_with_the_list_of_kinds() {
    let (_dir, ws) = empty_workspace();
    let ran = troupe_in(&ws, &["log", "--kind", "tool_done"]);
    assert_fails(&ran, 2, "tool_done");
    assert!(ran.stderr.contains(kinds::TOOL_FINISHED), "{ran:#?}");
    let ran = troupe_in(&ws, &["log", "-f", "--kind", "nope"]);
    assert_fails(&ran, 2, "nope");
    assert_eq!(
        std::fs::read_dir(&ws).unwrap().count(),
        0,
        "nothing created"
    );
}

#[test]
fn a_corrupt_line_fails_naming_its_number() {
    let (_dir, ws) = empty_workspace();
    let log = open_log(&ws);
    say(&log, "lead", "one");
    drop(log);
    let path = Layout::new(&ws).events_log();
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("not an event\n");
    std::fs::write(&path, text).unwrap();
    for args in [&["log"][..], &["log", "-f"]] {
        let ran = troupe_within(&ws, args);
        assert_eq!(ran.code, 1, "{ran:#?}");
        assert!(ran.stderr.contains("line 2"), "{ran:#?}");
    }
}

#[test]
fn a_fifo_in_place_of_the_stream_fails_at_once() {
    let (_dir, ws) = empty_workspace();
    mkfifo(&Layout::new(&ws).events_log());
    for args in [&["log"][..], &["log", "-f", "--json"]] {
        let ran = troupe_within(&ws, args);
        let failure = failure_text(&ran, 1);
        assert!(failure.contains("events.jsonl"), "{failure}");
        assert!(failure.contains("FIFO"), "{failure}");
    }
}

/// A `troupe log -f --json` child: its stdout lines arrive on a channel; its exit code too.
/// Killed if the test ends before it exits.
struct Follower {
    pid: i32,
    lines: Receiver<String>,
    exited: Receiver<i32>,
}

impl Follower {
    /// Starts following `ws`; the reader of its stdout stops (closing the pipe) after `keep`
    /// lines, if given.
    fn start(ws: &Path, keep: Option<usize>) -> Self {
        Self::start_with(ws, keep, &[])
    }

    fn start_with(ws: &Path, keep: Option<usize>, extra: &[&str]) -> Self {
        let mut child = command(ws)
            .args(["log", "-f", "--json", "--workspace", ws.to_str().unwrap()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let stdout = child.stdout.take().unwrap();
        let (line_tx, lines) = channel();
        std::thread::spawn(move || {
            let reader = BufReader::new(stdout);
            for (n, line) in reader.lines().enumerate() {
                let Ok(line) = line else { return };
                if line_tx.send(line).is_err() {
                    return;
                }
                if keep == Some(n + 1) {
                    return; // drops stdout: nobody reads it any more
                }
            }
        });
        let (exit_tx, exited) = channel();
        std::thread::spawn(move || {
            let status = child.wait().unwrap();
            let _ = exit_tx.send(status.code().unwrap_or(-1));
        });
        Self { pid, lines, exited }
    }

    fn next_line(&self) -> String {
        self.lines
            .recv_timeout(WAIT)
            .expect("troupe log -f printed no new line in time")
    }

    fn exit_code(&self) -> i32 {
        self.exited
            .recv_timeout(WAIT)
            .expect("troupe log -f did not exit in time")
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our child, whose waiter has not reaped it.
        assert_eq!(unsafe { libc::kill(self.pid, signal) }, 0);
    }

    /// Waits until the child has a kernel file watch (inotify) in place; polled, bounded.
    fn wait_until_watching(&self) {
        let deadline = Instant::now() + WAIT;
        while !has_inotify_watch(self.pid) {
            assert!(Instant::now() < deadline, "troupe log -f never watched");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        if self.exited.try_recv().is_err() {
            // SAFETY: kill(2) on our child, whose waiter has not reaped it.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}

/// Whether process `pid` holds an inotify instance with at least one watch.
fn has_inotify_watch(pid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return false;
    };
    entries.flatten().any(|entry| {
        std::fs::read_to_string(entry.path())
            .is_ok_and(|info| info.lines().any(|l| l.starts_with("inotify wd:")))
    })
}

#[test]
fn follow_prints_events_as_they_are_appended() {
    let (_dir, ws) = empty_workspace();
    std::fs::create_dir(ws.join(".troupe")).unwrap();
    let follower = Follower::start(&ws, None);
    follower.wait_until_watching();
    let log = open_log(&ws);
    for i in 0..5 {
        let seq = say(&log, "lead", &format!("line {i}"));
        let line = follower.next_line();
        assert_eq!(field(&line, "seq"), seq, "{line}");
        assert_eq!(line, file_lines(&ws)[usize::try_from(seq).unwrap() - 1]);
    }
    follower.signal(libc::SIGTERM);
    assert_eq!(follower.exit_code(), 0, "SIGTERM ends following normally");
}

#[test]
fn follow_started_before_the_state_folder_exists_sees_the_events() {
    let (_dir, ws) = empty_workspace();
    let follower = Follower::start(&ws, None);
    follower.wait_until_watching();
    assert!(!ws.join(".troupe").exists(), "following creates nothing");
    let log = open_log(&ws);
    let first = say(&log, "lead", "first");
    assert_eq!(field(&follower.next_line(), "seq"), first);
    let second = say(&log, "writer", "second");
    assert_eq!(field(&follower.next_line(), "seq"), second);
    follower.signal(libc::SIGINT);
    assert_eq!(follower.exit_code(), 0, "Ctrl-C ends following normally");
}

#[test]
fn follow_ends_when_its_reader_goes_away() {
    let (_dir, ws) = demo_workspace();
    // Like `troupe log -f | head -n 2`: the whole stream fits in the pipe, so only the reader
    // going away (not a failed write) can end the follower.
    let follower = Follower::start(&ws, Some(2));
    assert_eq!(field(&follower.next_line(), "seq"), 1);
    assert_eq!(field(&follower.next_line(), "seq"), 2);
    assert_eq!(follower.exit_code(), 0, "a closed stdout ends it quietly");
}

/// `--until-end` stops at the end of the run going on when it starts, or of the next one —
/// never at an earlier run's end it reads from the history.
#[test]
fn until_end_stops_when_the_followed_run_ends() {
    let (_dir, ws) = empty_workspace();
    let empty = kinds::fields(serde_json::json!({}));
    let earlier = open_run_log(&ws, "00000000-0000-4000-8000-0000000000a1");
    earlier.record("troupe", kinds::RUN_STARTED, empty.clone());
    earlier.record("troupe", kinds::RUN_ENDED, empty.clone());
    let follower = Follower::start_with(&ws, None, &["--until-end"]);
    assert_eq!(field(&follower.next_line(), "kind"), "run_started");
    assert_eq!(field(&follower.next_line(), "kind"), "run_ended");
    follower.wait_until_watching();
    assert!(
        follower.exited.try_recv().is_err(),
        "an earlier run's end does not stop it"
    );
    let next = open_run_log(&ws, "00000000-0000-4000-8000-0000000000b2");
    next.record("troupe", kinds::RUN_STARTED, empty.clone());
    say(&next, "lead", "working");
    next.record("troupe", kinds::RUN_ENDED, empty.clone());
    // A later run after it is never printed: it stopped at the followed run's end.
    next.record("troupe", kinds::RUN_STARTED, empty);
    let printed: Vec<String> = (0..3).map(|_| follower.next_line()).collect();
    assert_eq!(follower.exit_code(), 0, "{printed:#?}");
    assert_eq!(field(&printed[2], "kind"), "run_ended");
    assert_eq!(
        field(&printed[2], "run_id"),
        "00000000-0000-4000-8000-0000000000b2"
    );
    assert!(follower.lines.try_recv().is_err(), "nothing after the end");
}

#[test]
fn until_end_needs_follow() {
    let (_dir, ws) = empty_workspace();
    let out = troupe_in(&ws, &["log", "--until-end"]);
    assert_eq!(out.code, 2, "{out:#?}");
}
