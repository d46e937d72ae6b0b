//! `troupe run --json`: the event stream as JSON lines on stdout, one event per line as it is
//! written to `.troupe/events.jsonl`, and nothing else.

use std::io::Write;

use troupe::store::events::EventListener;
use troupe::terminal_text::json_for_terminal;
use troupe::wire::Event;

/// Writes every event to stdout as one line. A closed stdout (a reader that went away) is not
/// the run's failure: the events stay in the file.
#[derive(Debug, Default)]
pub struct JsonLines;

impl EventListener for JsonLines {
    fn event(&self, event: &Event) {
        let mut line = json_for_terminal(&event.to_line()).into_owned();
        line.push('\n');
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
    }
}
