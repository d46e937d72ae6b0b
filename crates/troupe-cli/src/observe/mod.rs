//! The terminal view of a run, rendered from its event stream (SPEC §10): one line per event
//! that matters ([`filter`]), the agent's name in its own colour ([`style`]), spinners for the
//! agents that wait on the model or a tool ([`spinners`]). `troupe run` shows it on stderr,
//! `troupe demo` as its timeline on stdout. Also here: the `--json` stream ([`json`]), the
//! approval prompt that takes the spinners off the screen ([`approval`]) and the tracing output
//! ([`logging`], [`terminal`]).

pub mod approval;
pub(crate) mod filter;
pub mod json;
pub mod logging;
mod spinners;
pub(crate) mod style;
mod terminal;

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Instant;

use troupe::store::events::{kinds, EventListener};
use troupe::terminal_text::line_for_terminal;
use troupe::wire::Event;

use crate::event_line;
use spinners::Spinners;

/// Where the lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    Stdout,
    Stderr,
}

/// Lines held back while a prompt is up.
#[derive(Default)]
struct Held {
    prompts: usize,
    lines: Vec<String>,
}

/// The terminal view: an [`EventListener`] that prints each event as a line.
pub struct Console {
    start: Instant,
    sink: Sink,
    /// Every event is a line (`-v`), not only those [`filter::shown`] by default.
    verbose: bool,
    colour: bool,
    /// Only when stderr is a terminal.
    spinners: Option<Spinners>,
    held: Mutex<Held>,
}

impl Console {
    /// Colours when `sink` is a terminal and `NO_COLOR` is not set; spinners when stderr is a
    /// terminal.
    pub fn new(sink: Sink, verbose: bool) -> Self {
        let on_terminal = match sink {
            Sink::Stdout => std::io::stdout().is_terminal(),
            Sink::Stderr => std::io::stderr().is_terminal(),
        };
        let spinners = std::io::stderr()
            .is_terminal()
            .then(|| Spinners::new(style::colour_wanted(true)));
        Self {
            start: Instant::now(),
            sink,
            verbose,
            colour: style::colour_wanted(on_terminal),
            spinners,
            held: Mutex::new(Held::default()),
        }
    }

    /// Takes the spinners off the screen and holds lines back until the guard is dropped: a
    /// prompt is up and must stay the last thing on the screen.
    pub fn pause(&self) -> Paused<'_> {
        let mut held = troupe::sync::lock(&self.held);
        held.prompts += 1;
        if held.prompts == 1 {
            if let Some(spinners) = &self.spinners {
                spinners.hide();
            }
        }
        Paused(self)
    }

    fn resume(&self) {
        let mut held = troupe::sync::lock(&self.held);
        held.prompts = held.prompts.saturating_sub(1);
        if held.prompts == 0 {
            if let Some(spinners) = &self.spinners {
                spinners.show();
            }
            for line in std::mem::take(&mut held.lines) {
                self.write(&line);
            }
        }
    }

    /// Every spinner off the screen for good: the run is over.
    pub fn finish(&self) {
        if let Some(spinners) = &self.spinners {
            spinners.clear();
        }
    }

    /// The line of `event`: the time since the start, the agent, the words. The words quote
    /// models, tools and servers: shown on one line with their control characters escaped.
    fn line_of(&self, event: &Event) -> String {
        format!(
            "{:>8.3}s  {} {}\n",
            self.start.elapsed().as_secs_f64(),
            style::agent_column(&event.agent, self.colour),
            line_for_terminal(&event_line::describe(event))
        )
    }

    fn write(&self, line: &str) {
        let write = || {
            let _ = match self.sink {
                Sink::Stdout => {
                    let mut out = std::io::stdout().lock();
                    out.write_all(line.as_bytes()).and_then(|()| out.flush())
                }
                Sink::Stderr => std::io::stderr().lock().write_all(line.as_bytes()),
            };
        };
        match &self.spinners {
            Some(spinners) => spinners.suspend(write),
            None => write(),
        }
    }

    /// Feeds the spinners: who waits on the model, who runs which tool.
    fn track(&self, spinners: &Spinners, event: &Event) {
        let agent = event.agent.as_str();
        let call_id = event.str("call_id").unwrap_or("");
        match event.kind.as_str() {
            kinds::MODEL_CALL_STARTED => spinners.model(agent, true),
            kinds::MODEL_CALL_FINISHED | kinds::MODEL_CALL_FAILED => spinners.model(agent, false),
            kinds::MODEL_RETRY => spinners.model_again(
                agent,
                format!("attempt {}", event.u64("attempt").unwrap_or(0) + 1),
            ),
            kinds::MODEL_FALLBACK => spinners.model_again(
                agent,
                format!("fallback {}", event.str("to").unwrap_or("model")),
            ),
            kinds::TOOL_STARTED => {
                spinners.tool_started(agent, call_id, event.str("tool").unwrap_or("a tool"));
            }
            kinds::TOOL_FINISHED => spinners.tool_finished(agent, call_id),
            kinds::TEAMMATE_STATUS if !matches!(event.str("status"), Some("running" | "idle")) => {
                spinners.idle(agent);
            }
            kinds::RUN_ENDED => spinners.clear(),
            _ => {}
        }
    }
}

impl EventListener for Console {
    fn event(&self, event: &Event) {
        if let Some(spinners) = &self.spinners {
            self.track(spinners, event);
        }
        if !filter::shown(&event.kind, self.verbose) {
            return;
        }
        let line = self.line_of(event);
        let mut held = troupe::sync::lock(&self.held);
        if held.prompts > 0 {
            held.lines.push(line);
        } else {
            self.write(&line);
        }
    }
}

/// While alive, a prompt is up (see [`Console::pause`]).
pub struct Paused<'a>(&'a Console);

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.resume();
    }
}
