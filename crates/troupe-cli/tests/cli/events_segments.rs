//! The event stream in closed segments, through the binary: scripted runs, a roll through the
//! library (holding the run lock, as gc does), then `troupe log` (text and `--json`) and
//! `troupe timeline` print what they printed before; the next run continues `seq`; a
//! `troupe log -f` started before a roll prints every event once across it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use serde_json::json;
use troupe::layout::Layout;
use troupe::store::events::segments;
use troupe::store::lock::lock_exclusive;

use super::support::{command, troupe_in};

/// Long enough for a slow machine; a hang is a failure, not a wait.
const WAIT: Duration = Duration::from_secs(60);

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

/// One scripted run whose lead answers `answer`.
fn run(ws: &Path, answer: &str) {
    let script = ws.join(format!("script-{}.json", uuid::Uuid::new_v4().simple()));
    std::fs::write(
        &script,
        json!({"agents": {"lead": [{"text": answer}]}}).to_string(),
    )
    .unwrap();
    let out = command(ws)
        .args(["run", "--workspace", ws.to_str().unwrap()])
        .args(["--prompt", "say something", "--approval", "auto"])
        .args(["--model-script", script.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Rolls the open segment as gc does: holding the workspace's run lock.
fn roll(ws: &Path) -> Vec<segments::SegmentInfo> {
    let layout = Layout::new(ws);
    let lock = lock_exclusive(&layout.run_lock()).unwrap();
    segments::roll(&layout, &lock).unwrap()
}

/// What `troupe log` prints, as text and as JSON lines.
fn log(ws: &Path) -> (String, Vec<String>) {
    let text = troupe_in(ws, &["log"]);
    assert_eq!(text.code, 0, "{text:#?}");
    let json = troupe_in(ws, &["log", "--json"]);
    assert_eq!(json.code, 0, "{json:#?}");
    (
        text.stdout,
        json.stdout.lines().map(str::to_owned).collect(),
    )
}

fn timeline(ws: &Path, name: &str) -> String {
    let out = ws.join(name);
    let ran = troupe_in(ws, &["timeline", "--html", out.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    std::fs::read_to_string(out).unwrap()
}

fn seq_of(line: &str) -> u64 {
    serde_json::from_str::<serde_json::Value>(line).unwrap()["seq"]
        .as_u64()
        .unwrap()
}

#[test]
fn log_and_timeline_read_the_same_after_a_roll_and_the_next_run_continues_seq() {
    let (_dir, ws) = workspace();
    run(&ws, "first answer");
    run(&ws, "second answer");
    let (text, lines) = log(&ws);
    let page = timeline(&ws, "before.html");
    let last = seq_of(lines.last().unwrap());
    assert_eq!(
        lines.iter().map(|l| seq_of(l)).collect::<Vec<_>>(),
        (1..=last).collect::<Vec<_>>()
    );

    let made = roll(&ws);
    assert_eq!(
        made.iter().map(|s| (s.first, s.last)).collect::<Vec<_>>(),
        [(1, last)]
    );
    let layout = Layout::new(&ws);
    assert_eq!(std::fs::read_to_string(layout.events_log()).unwrap(), "");
    assert!(made[0].path.starts_with(layout.events_segments_dir()));
    assert_eq!(log(&ws), (text.clone(), lines.clone()), "the same history");
    assert_eq!(timeline(&ws, "after.html"), page);

    run(&ws, "third answer");
    let (text_after, lines_after) = log(&ws);
    assert!(text_after.starts_with(&text), "{text_after}");
    assert_eq!(lines_after[..lines.len()], lines[..]);
    let new: Vec<u64> = lines_after[lines.len()..]
        .iter()
        .map(|l| seq_of(l))
        .collect();
    assert!(!new.is_empty());
    assert_eq!(
        new,
        (last + 1..=last + new.len() as u64).collect::<Vec<_>>()
    );
    assert!(lines_after.iter().any(|l| l.contains("third answer")));
}

/// A `troupe log -f --json` child: its stdout lines on a channel; killed when dropped.
struct Follower {
    child: std::process::Child,
    lines: Receiver<String>,
}

impl Follower {
    fn start(ws: &Path) -> Self {
        let mut child = command(ws)
            .args(["log", "-f", "--json", "--workspace", ws.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    /// The lines printed up to the one of `seq`.
    fn lines_through(&self, seq: u64) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("no line of seq {seq} in time; got {out:#?}"));
            let at = seq_of(&line);
            out.push(line);
            if at >= seq {
                return out;
            }
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_follower_prints_every_event_once_across_rolls() {
    let (_dir, ws) = workspace();
    run(&ws, "first answer");
    let (_, history) = log(&ws);
    let follower = Follower::start(&ws);
    // The history printed: the follower's file watch is in place (it starts before the
    // first read).
    let mut seen = follower.lines_through(seq_of(history.last().unwrap()));
    roll(&ws);
    run(&ws, "second answer");
    roll(&ws);
    run(&ws, "third answer");
    let (_, all) = log(&ws);
    seen.extend(follower.lines_through(seq_of(all.last().unwrap())));
    assert_eq!(seen, all);
    assert!(all.iter().any(|l| l.contains("third answer")));
}
