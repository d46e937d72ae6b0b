//! `.troupe/events.jsonl`: the event stream of every run (SPEC §10), the single source that the
//! terminal output, `troupe run --json`, `troupe log` and the web view all render.
//!
//! - [`EventLog`] appends: one JSON object per line, `seq` gapless across segments (continued
//!   from the last line on open, or from the last closed segment), no fsync per event (it is a record for people; a crash loses at
//!   most the last few lines, and a torn last line is cut before the next append like in every
//!   log). Only the process holding the workspace's run lock appends, so one in-process counter
//!   keeps `seq` gapless, and appends skip the journal's `flock` and per-append tail check
//!   ([`Journal::append_sole`]: the tail is cut on open and after a failed append). Secrets are
//!   redacted from every string field before the line is built.
//!   Listeners (the terminal, `--json`) see each event after it is written, in `seq` order.
//! - [`segments`]: the stream's older part in closed, compressed segments
//!   (`.troupe/events/<first>-<last>.jsonl.gz`): rolled into them by the run lock's holder,
//!   read across by every reader, dropped whole by gc. `events.jsonl` is the open segment.
//! - [`read`]: readers that pick up new complete lines from where they stopped.
//! - [`follow`]: a wakeup on every change of the file, from the kernel (inotify), not a timer.
//! - [`stream`]: the stream as read back by the commands that look at a team, the same port on
//!   files and on a shared team's database.
//! - [`kinds`]: the kinds and their fields, built in one place.
//! - [`observed`]: decorators of the mailbox and protocol ports that report their transitions.
//!
//! A failing append never fails the run: it is reported once on the tracing output and the
//! event still reaches the listeners.

pub mod follow;
pub mod index;
pub mod kinds;
pub mod observed;
pub mod observed_board;
pub mod read;
pub mod segments;
pub mod stream;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{Map, Value};
use troupe_wire::Event;

use super::journal::{Durability, Journal};
use super::IoError;
use crate::clock::Clock;
use crate::layout::Layout;
use crate::secrets::Redactor;

/// The agent name of events about the run itself (started, ended).
pub const RUN_AGENT: &str = "troupe";

/// Where events go. Implemented by [`EventLog`] and [`NoEvents`].
pub trait EventSink: Send + Sync {
    /// Records one event of `kind` about `agent`, with the kind's `fields`.
    fn emit(&self, agent: &str, kind: &'static str, fields: Map<String, Value>);
}

/// Sees every event once it is written, in `seq` order. Called with the log's lock held: a
/// listener must return quickly and must never emit an event itself.
pub trait EventListener: Send + Sync {
    fn event(&self, event: &Event);
}

/// Records nothing (tests and commands without a run).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoEvents;

impl EventSink for NoEvents {
    fn emit(&self, _agent: &str, _kind: &'static str, _fields: Map<String, Value>) {}
}

/// The open event stream of one run.
pub struct EventLog {
    journal: Journal,
    clock: Arc<dyn Clock>,
    run_id: String,
    redactor: Redactor,
    /// The `seq` of the next event; also serialises appends so that lines land in `seq` order.
    next: Mutex<u64>,
    listeners: RwLock<Vec<Arc<dyn EventListener>>>,
    warned: AtomicBool,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog")
            .field("path", &self.journal.path())
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

/// Why the event stream could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum EventLogError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(
        "{path}: line {line} is not an event ({reason}); move the file away to start a new stream"
    )]
    Corrupt {
        path: String,
        line: usize,
        reason: String,
    },
}

impl EventLog {
    /// Opens (creating) `.troupe/events.jsonl` for run `run_id`: a torn last line is cut, and the
    /// next `seq` follows the last complete line's, or the last closed segment's when that is
    /// higher. The state folder must exist.
    pub fn open(
        layout: &Layout,
        clock: Arc<dyn Clock>,
        run_id: String,
        redactor: Redactor,
    ) -> Result<Self, EventLogError> {
        let path = layout.events_log();
        let journal = Journal::open(&path)?;
        journal.cut_torn_tail_now()?;
        // After a roll the open segment may be empty (or hold only closed lines): `seq`
        // continues after the highest one ever written.
        let last = read::last_seq(&path)?.max(segments::closed_through(layout)?);
        Ok(Self {
            journal,
            clock,
            run_id,
            redactor,
            next: Mutex::new(last + 1),
            listeners: RwLock::new(Vec::new()),
            warned: AtomicBool::new(false),
        })
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn path(&self) -> &std::path::Path {
        self.journal.path()
    }

    /// Adds a listener; it sees the events emitted from now on.
    pub fn subscribe(&self, listener: Arc<dyn EventListener>) {
        self.listeners
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(listener);
    }

    /// Lets go of every listener (a listener that copies events elsewhere finishes its copy
    /// when dropped); later events go to the file only.
    pub fn close_listeners(&self) {
        let listeners = std::mem::take(
            &mut *self
                .listeners
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        drop(listeners);
    }

    /// Records one event and returns it as written (redacted).
    pub fn record(&self, agent: &str, kind: &'static str, mut fields: Map<String, Value>) -> Event {
        for value in fields.values_mut() {
            redact_value(&self.redactor, value);
        }
        let mut next = crate::sync::lock(&self.next);
        let event = Event {
            seq: *next,
            at: self.clock.now(),
            run_id: self.run_id.clone(),
            agent: agent.to_owned(),
            kind: kind.to_owned(),
            fields,
        };
        let mut line = event.to_line();
        line.push('\n');
        // The run lock makes this process the stream's only writer; `next` orders its threads.
        match self
            .journal
            .append_sole(line.as_bytes(), Durability::Unsynced)
        {
            Ok(()) => *next += 1,
            Err(e) => {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "cannot append to the event stream; events are shown but not kept");
                }
            }
        }
        for listener in self
            .listeners
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            listener.event(&event);
        }
        event
    }
}

impl EventSink for EventLog {
    fn emit(&self, agent: &str, kind: &'static str, fields: Map<String, Value>) {
        self.record(agent, kind, fields);
    }
}

/// Redacts every string inside `value`, at any depth.
fn redact_value(redactor: &Redactor, value: &mut Value) {
    if redactor.is_empty() {
        return;
    }
    match value {
        Value::String(s) => redactor.redact_in_place(s),
        Value::Array(items) => items.iter_mut().for_each(|v| redact_value(redactor, v)),
        Value::Object(map) => map.values_mut().for_each(|v| redact_value(redactor, v)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use serde_json::json;

    fn open(dir: &std::path::Path, redactor: Redactor) -> EventLog {
        let layout = Layout::new(dir);
        std::fs::create_dir_all(layout.state_dir()).unwrap();
        EventLog::open(
            &layout,
            Arc::new(ManualClock::at_spec_epoch()),
            "run-1".into(),
            redactor,
        )
        .unwrap()
    }

    fn fields(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn seq_continues_across_opens_and_a_torn_tail_is_cut_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path(), Redactor::default());
        log.emit("lead", "a", Map::new());
        log.emit("lead", "b", Map::new());
        drop(log);
        let path = Layout::new(dir.path()).events_log();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(br#"{"seq":3,"at":"#);
        std::fs::write(&path, &bytes).unwrap();

        let log = open(dir.path(), Redactor::default());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.ends_with('\n'),
            "the torn tail is cut on open: {text:?}"
        );
        assert_eq!(log.record("lead", "c", Map::new()).seq, 3);
        let events = read::read_all(&path).unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3]);
        assert!(events.iter().all(|e| e.run_id == "run-1"));
    }

    #[test]
    fn secrets_never_reach_the_file_or_the_listeners() {
        struct Seen(Mutex<Vec<String>>);
        impl EventListener for Seen {
            fn event(&self, event: &Event) {
                self.0.lock().unwrap().push(event.to_line());
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path(), Redactor::new(["sk-secret-123456"]));
        let seen = Arc::new(Seen(Mutex::new(Vec::new())));
        log.subscribe(seen.clone());
        log.emit(
            "lead",
            "assistant_text",
            fields(json!({"text": "key sk-secret-123456", "nested": [{"x": "sk-secret-123456"}]})),
        );
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert!(!text.contains("sk-secret-123456"), "{text}");
        assert!(text.contains(crate::secrets::redact::REDACTED), "{text}");
        assert_eq!(seen.0.lock().unwrap().as_slice(), [text.trim_end()]);
    }

    #[test]
    fn a_corrupt_last_line_is_refused_on_open_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        std::fs::create_dir_all(layout.state_dir()).unwrap();
        std::fs::write(layout.events_log(), "not json\n").unwrap();
        let err = EventLog::open(
            &layout,
            Arc::new(ManualClock::at_spec_epoch()),
            "r".into(),
            Redactor::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn appends_from_many_threads_keep_seq_gapless_and_in_file_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(open(dir.path(), Redactor::default()));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let log = log.clone();
                std::thread::spawn(move || {
                    for _ in 0..250 {
                        log.emit("lead", "x", Map::new());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let seqs: Vec<u64> = read::read_all(log.path())
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, (1..=1000).collect::<Vec<u64>>());
    }
}
