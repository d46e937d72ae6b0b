//! `troupe log`: prints the event stream `.troupe/events.jsonl`, during or after a run, and with
//! `-f` keeps following it. Only reads: no state folder is created, no lock is taken; a missing
//! stream prints nothing (or, with `-f`, is waited for).
//!
//! Following wakes on the kernel's file watch (inotify), never on a timer: on the state folder,
//! or on the workspace until the state folder appears. It ends on Ctrl-C or SIGTERM (exit 0: a
//! follower stopped by its user ended normally) and as soon as nobody reads stdout any more
//! (`troupe log -f | head -3`), quietly with exit 0.
//!
//! With a store URL (`--store`, `TROUPE_STORE_URL`, `[store] url`) it prints a shared team's
//! stream from its database instead: every process's events in the team's order, each `seq`
//! replaced by its position in that order (so `--since` takes those positions). Following
//! wakes on the stream's `NOTIFY` (and rereads after a lost connection), never on a timer.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use troupe::store::events::kinds;
use troupe::store::events::stream::{EventReader, EventStream};
use troupe::terminal_text::{json_for_terminal, line_for_terminal};
use troupe::wire::Event;

use crate::args::LogArgs;
use crate::error::CliError;
use crate::event_line::describe;

pub async fn log(workspace: &Path, args: &LogArgs) -> Result<(), CliError> {
    let mut printer = Printer {
        filter: Filter::new(args)?,
        json: args.json,
        until_end: args.until_end.then(UntilEnd::default),
    };
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let choice = crate::store_choice::store_choice(&args.store, &settings, false)?;
    let view = crate::store_choice::team_view(workspace, &choice).await?;
    print_log(view.events(), args.follow, &mut printer).await
}

/// How much of a file is read and printed at a time: a large stream is never held whole (a
/// database's reader reads a bounded number of rows).
const BATCH_BYTES: usize = 1024 * 1024;

#[derive(Debug, PartialEq, Eq)]
enum Batch {
    /// Printed some; there may be more.
    More,
    /// Nothing new.
    Done,
    /// stdout's reader went away.
    Gone,
}

/// Reads and prints one batch of new events.
async fn print_batch(
    reader: &mut Box<dyn EventReader>,
    printer: &mut Printer,
) -> Result<Batch, CliError> {
    let events = reader
        .next_batch(BATCH_BYTES)
        .await
        .map_err(|e| CliError::coded(&e))?;
    if events.is_empty() {
        return Ok(Batch::Done);
    }
    Ok(match printer.print(&events)? {
        Reader::Gone => Batch::Gone,
        Reader::Open => Batch::More,
    })
}

/// Prints everything new; `Gone` when stdout's reader went away.
async fn print_new(
    reader: &mut Box<dyn EventReader>,
    printer: &mut Printer,
) -> Result<Batch, CliError> {
    loop {
        match print_batch(reader, printer).await? {
            Batch::More => {}
            Batch::Done => {
                printer.caught_up();
                return Ok(Batch::Done);
            }
            Batch::Gone => return Ok(Batch::Gone),
        }
    }
}

/// Prints the stream (after `--since`), and with `follow` keeps printing what comes.
async fn print_log(
    stream: Arc<dyn EventStream>,
    follow: bool,
    printer: &mut Printer,
) -> Result<(), CliError> {
    let coded = |e: troupe::store::PortError| CliError::coded(&e);
    if !follow {
        let mut reader = stream.reader(printer.filter.since).await.map_err(coded)?;
        print_new(&mut reader, printer).await?;
        return Ok(());
    }
    if printer.until_end.is_some() {
        printer.starts_after(stream.last().await.map_err(coded)?);
    }
    let mut reader = stream.reader(printer.filter.since).await.map_err(coded)?;
    follow_with(
        // The wakeups start before the first read, so that nothing appended in between is
        // missed: the kernel's file watch, or every NOTIFY of a shared stream (and every
        // reconnection of its listener).
        |changed| {
            stream
                .on_change(Arc::new(move || changed.send(Wake::Changed).is_ok()))
                .map_err(coded)
        },
        async || print_new(&mut reader, printer).await,
    )
    .await
}

/// Which events are shown.
#[derive(Debug)]
struct Filter {
    agents: Vec<String>,
    kinds: Vec<String>,
    since: u64,
}

impl Filter {
    fn new(args: &LogArgs) -> Result<Self, CliError> {
        if let Some(unknown) = args.kind.iter().find(|k| !kinds::ALL.contains(&k.as_str())) {
            return Err(CliError::usage(format!(
                "unknown event kind {unknown:?}; the kinds are: {}",
                kinds::ALL.join(", ")
            ))
            .with_code("unknown_kind"));
        }
        Ok(Self {
            agents: args.agent.clone(),
            kinds: args.kind.clone(),
            since: args.since.unwrap_or(0),
        })
    }

    fn shows(&self, event: &Event) -> bool {
        event.seq > self.since
            && (self.agents.is_empty() || self.agents.contains(&event.agent))
            && (self.kinds.is_empty() || self.kinds.contains(&event.kind))
    }
}

/// Whether anyone still reads stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    Open,
    Gone,
}

struct Printer {
    filter: Filter,
    json: bool,
    /// `--until-end`: the run followed, and whether it ended.
    until_end: Option<UntilEnd>,
}

/// Which run `--until-end` waits for: the one going on when the follower has read the stream
/// as it was (the latest started and not ended), else the next one to start.
///
/// "As it was" is the stream up to its last event when the follower started (`start_seq`):
/// events appended while the follower was still reading the history may arrive in the same
/// read as it, and must count as new all the same.
#[derive(Debug, Default)]
struct UntilEnd {
    /// The `seq` of the stream's last event when the follower started.
    start_seq: Option<u64>,
    /// Runs started and not ended yet, in the order they started.
    open: Vec<String>,
    target: Option<String>,
    caught_up: bool,
    ended: bool,
}

impl UntilEnd {
    fn see(&mut self, event: &Event) {
        if self.start_seq.is_some_and(|start| event.seq > start) {
            self.catch_up();
        }
        match event.kind.as_str() {
            kinds::RUN_STARTED => {
                self.open.push(event.run_id.clone());
                if self.caught_up && self.target.is_none() {
                    self.target = Some(event.run_id.clone());
                }
            }
            kinds::RUN_ENDED => {
                self.open.retain(|run| *run != event.run_id);
                self.ended |= self.target.as_deref() == Some(event.run_id.as_str());
            }
            _ => {}
        }
    }

    /// The stream as it was at start has been read.
    fn catch_up(&mut self) {
        if !self.caught_up {
            self.caught_up = true;
            self.target = self.open.last().cloned();
        }
    }
}

impl Printer {
    /// For `--until-end`: the stream as it is now ends at `seq`; what comes after is new.
    fn starts_after(&mut self, seq: u64) {
        if let Some(until) = &mut self.until_end {
            until.start_seq = Some(seq);
        }
    }

    /// The stream read so far is all there was (for `--until-end`).
    fn caught_up(&mut self) {
        if let Some(until) = &mut self.until_end {
            until.catch_up();
        }
    }

    /// Prints the events the filter shows, in one write, and flushes; `Gone` too once the run
    /// `--until-end` follows has ended (its `run_ended` printed, nothing after it).
    fn print(&mut self, events: &[Event]) -> Result<Reader, CliError> {
        let mut text = String::new();
        let mut ended = false;
        for event in events {
            if self.filter.shows(event) {
                if self.json {
                    text.push_str(&json_for_terminal(&event.to_line()));
                } else {
                    text.push_str(&line(event));
                }
                text.push('\n');
            }
            if let Some(until) = &mut self.until_end {
                until.see(event);
                if until.ended {
                    ended = true;
                    break;
                }
            }
        }
        let done = if ended { Reader::Gone } else { Reader::Open };
        if text.is_empty() {
            return Ok(done);
        }
        let mut out = std::io::stdout().lock();
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => Ok(done),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Reader::Gone),
            Err(e) => Err(CliError::failed(format_args!(
                "cannot write to stdout: {e}"
            ))),
        }
    }
}

/// `#<seq> <HH:MM:SS.mmm> <agent> <what happened>`, the time in UTC like the file's. The stream
/// quotes models, tools and servers (and a workspace's file may be anyone's): the line is shown
/// on one line with its control characters escaped, never obeyed. `--json` prints the event as
/// serde wrote it, with `\uXXXX` for what serde leaves a terminal to act on.
pub(crate) fn line(event: &Event) -> String {
    let line = format!(
        "#{} {} {} {}",
        event.seq,
        event.at.as_datetime().format("%H:%M:%S%.3f"),
        event.agent,
        describe(event)
    );
    line_for_terminal(&line).into_owned()
}

/// Why the follower woke up.
#[derive(Debug, Clone, Copy)]
enum Wake {
    /// Something changed in the stream's folder.
    Changed,
    /// Nobody reads stdout any more.
    ReaderGone,
}

/// Follows a stream until Ctrl-C, SIGTERM or stdout's reader goes. `wakes` starts what says
/// the stream changed (before the first read; what it returns is kept alive meanwhile);
/// `print` prints everything new, `Gone` when stdout's reader went away.
async fn follow_with<K>(
    wakes: impl FnOnce(UnboundedSender<Wake>) -> Result<K, CliError>,
    mut print: impl AsyncFnMut() -> Result<Batch, CliError>,
) -> Result<(), CliError> {
    {
        let listen = |kind, name| {
            signal(kind)
                .map_err(|e| CliError::failed(format_args!("cannot listen for {name}: {e}")))
        };
        let mut interrupt = listen(SignalKind::interrupt(), "Ctrl-C")?;
        let mut terminate = listen(SignalKind::terminate(), "SIGTERM")?;
        let (wake, mut woken) = unbounded_channel();
        let _kept = wakes(wake.clone())?;
        watch_reader(wake);
        loop {
            if print().await? == Batch::Gone {
                return Ok(());
            }
            tokio::select! {
                first = woken.recv() => {
                    if !still_read(first, &mut woken) {
                        return Ok(());
                    }
                }
                _ = interrupt.recv() => return Ok(()),
                _ = terminate.recv() => return Ok(()),
            }
        }
    }
}

/// Takes every wakeup already queued after `first` (one read covers them all); false once
/// stdout's reader is gone.
fn still_read(first: Option<Wake>, woken: &mut UnboundedReceiver<Wake>) -> bool {
    let mut wake = first;
    loop {
        match wake {
            None | Some(Wake::ReaderGone) => return false,
            Some(Wake::Changed) => {}
        }
        match woken.try_recv() {
            Ok(next) => wake = Some(next),
            Err(_) => return true,
        }
    }
}

/// Sends [`Wake::ReaderGone`] once stdout is a pipe (or socket) whose reader has gone, so that a
/// follower with nothing new to print still ends. The thread sleeps in `poll` for the error
/// condition only (no events asked for, no timeout): a terminal or a file never wakes it.
fn watch_reader(wake: UnboundedSender<Wake>) {
    let spawned = std::thread::Builder::new()
        .name("stdout-reader".into())
        .spawn(move || loop {
            let mut fd = libc::pollfd {
                fd: libc::STDOUT_FILENO,
                events: 0,
                revents: 0,
            };
            // SAFETY: one valid pollfd, for the duration of the call.
            let rc = unsafe { libc::poll(&mut fd, 1, -1) };
            if rc < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            if fd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                let _ = wake.send(Wake::ReaderGone);
            }
            return;
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot watch stdout's reader; following ends at the next write");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;

    fn run_event(seq: u64, kind: &str, run: &str) -> Event {
        Event::parse_line(&format!(
            r#"{{"seq":{seq},"at":"2026-07-30T08:01:02.345Z","run_id":"{run}","agent":"troupe","kind":"{kind}"}}"#
        ))
        .unwrap()
    }

    /// The run a follower started after an earlier one ended is followed to its end, even when
    /// its events arrive in the same read as the history (a follower still reading it).
    #[test]
    fn until_end_tells_the_history_from_what_came_after_it_started() {
        let mut until = UntilEnd {
            start_seq: Some(2),
            ..UntilEnd::default()
        };
        for e in [
            run_event(1, kinds::RUN_STARTED, "a1"),
            run_event(2, kinds::RUN_ENDED, "a1"),
            run_event(3, kinds::RUN_STARTED, "b2"),
        ] {
            until.see(&e);
            assert!(!until.ended);
        }
        until.see(&run_event(4, kinds::RUN_ENDED, "b2"));
        assert!(until.ended, "{until:?}");
        // Without a start position only an empty read catches up: the same events in one
        // read never end it (the race this guards against).
        let mut blind = UntilEnd::default();
        for seq in 1..=4 {
            let (kind, run) = [
                (kinds::RUN_STARTED, "a1"),
                (kinds::RUN_ENDED, "a1"),
                (kinds::RUN_STARTED, "b2"),
                (kinds::RUN_ENDED, "b2"),
            ][seq as usize - 1];
            blind.see(&run_event(seq, kind, run));
        }
        assert!(!blind.ended);
    }

    fn args(kind: &[&str]) -> LogArgs {
        LogArgs {
            follow: false,
            until_end: false,
            agent: vec!["lead".into()],
            kind: kind.iter().map(|k| (*k).to_owned()).collect(),
            since: Some(1),
            json: false,
            store: crate::args::StoreFlags::default(),
        }
    }

    fn event(seq: u64, agent: &str, kind: &str) -> Event {
        Event::parse_line(&format!(
            r#"{{"seq":{seq},"at":"2026-07-30T08:01:02.345Z","run_id":"r","agent":"{agent}","kind":"{kind}","text":"hi"}}"#
        ))
        .unwrap()
    }

    #[test]
    fn the_filter_keeps_agent_kind_and_later_seq() {
        let filter = Filter::new(&args(&[kinds::ASSISTANT_TEXT])).unwrap();
        assert!(filter.shows(&event(2, "lead", kinds::ASSISTANT_TEXT)));
        assert!(!filter.shows(&event(1, "lead", kinds::ASSISTANT_TEXT)));
        assert!(!filter.shows(&event(2, "alice", kinds::ASSISTANT_TEXT)));
        assert!(!filter.shows(&event(2, "lead", kinds::TOOL_STARTED)));
    }

    #[test]
    fn an_unknown_kind_is_a_usage_error_listing_the_kinds() {
        let err = Filter::new(&args(&["tool_done"])).unwrap_err();
        assert_eq!(err.kind(), Kind::Usage, "{err:?}");
        assert_eq!(err.code(), "unknown_kind", "{err:?}");
        let message = err.to_string();
        assert!(message.contains("tool_done"), "{message}");
        assert!(message.contains(kinds::TOOL_FINISHED), "{message}");
    }

    #[test]
    fn a_line_has_seq_time_agent_and_words() {
        assert_eq!(
            line(&event(7, "lead", kinds::ASSISTANT_TEXT)),
            "#7 08:01:02.345 lead says: hi"
        );
    }
}
