//! One spinner line per busy agent on stderr, with how long the current activity has taken
//! (`⠋ lead     waiting for the model 3.2s`, `⠋ writer   running shell 1.1s`). Used only when
//! stderr is a terminal. Lines printed meanwhile go through [`Spinners::suspend`] so that they
//! land above the spinners instead of through them; while a prompt is up, [`Spinners::hide`]
//! takes them off the screen.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use super::style;

/// How often a spinner turns (and its time is redrawn).
const TICK: Duration = Duration::from_millis(100);

/// What keeps one agent busy.
struct Busy {
    /// Drawn once the agent is busy.
    bar: Option<ProgressBar>,
    model: bool,
    /// The attempt the model call is on, after a retry or a fallback.
    attempt: Option<String>,
    /// Running tools by call id.
    tools: BTreeMap<String, String>,
    message: String,
}

impl Busy {
    /// What the spinner says. A tool's name is the model's word until the registry knows it,
    /// and a fallback's model name a settings file's: shown, never obeyed.
    fn message(&self) -> String {
        let message = if !self.tools.is_empty() {
            let names: Vec<&str> = self.tools.values().map(String::as_str).collect();
            format!("running {}", names.join(", "))
        } else if self.model {
            match &self.attempt {
                Some(how) => format!("waiting for the model ({how})"),
                None => "waiting for the model".to_owned(),
            }
        } else {
            String::new()
        };
        troupe::terminal_text::line_for_terminal(&message).into_owned()
    }
}

/// The spinners of every busy agent.
pub struct Spinners {
    multi: MultiProgress,
    style: ProgressStyle,
    colour: bool,
    busy: Mutex<HashMap<String, Busy>>,
}

impl Spinners {
    /// Spinners on stderr; `colour` paints the agent names.
    pub fn new(colour: bool) -> Self {
        let style = ProgressStyle::with_template("{spinner} {prefix} {msg} {secs}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner())
            .with_key(
                "secs",
                |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                    let _ = write!(out, "{:.1}s", state.elapsed().as_secs_f64());
                },
            );
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        super::terminal::set_active(Some(multi.clone()));
        Self {
            multi,
            style,
            colour,
            busy: Mutex::new(HashMap::new()),
        }
    }

    /// A model call of `agent` started (`true`) or ended.
    pub fn model(&self, agent: &str, busy: bool) {
        self.update(agent, |b| {
            b.model = busy;
            b.attempt = None;
        });
    }

    /// The model call of `agent` goes on another way: `how` is e.g. `attempt 2`, `fallback m2`.
    pub fn model_again(&self, agent: &str, how: String) {
        self.update(agent, |b| {
            if b.model {
                b.attempt = Some(how);
            }
        });
    }

    /// A tool call of `agent` started.
    pub fn tool_started(&self, agent: &str, call_id: &str, tool: &str) {
        self.update(agent, |b| {
            b.tools.insert(call_id.to_owned(), tool.to_owned());
        });
    }

    /// A tool call of `agent` ended.
    pub fn tool_finished(&self, agent: &str, call_id: &str) {
        self.update(agent, |b| {
            b.tools.remove(call_id);
        });
    }

    /// `agent` is no longer busy at all (it stopped).
    pub fn idle(&self, agent: &str) {
        self.update(agent, |b| {
            b.model = false;
            b.attempt = None;
            b.tools.clear();
        });
    }

    /// Every spinner off the screen, for good (the run ended).
    pub fn clear(&self) {
        let mut busy = troupe::sync::lock(&self.busy);
        for bar in busy.drain().filter_map(|(_, b)| b.bar) {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
        let _ = self.multi.clear();
    }

    /// Runs `f` (which writes to the terminal) with the spinners off the screen, then redraws
    /// them.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.multi.suspend(f)
    }

    /// Takes the spinners off the screen until [`Spinners::show`] (a prompt is up).
    pub fn hide(&self) {
        let _ = self.multi.clear();
        self.multi.set_draw_target(ProgressDrawTarget::hidden());
    }

    /// Draws the spinners again after [`Spinners::hide`].
    pub fn show(&self) {
        self.multi.set_draw_target(ProgressDrawTarget::stderr());
    }

    fn update(&self, agent: &str, change: impl FnOnce(&mut Busy)) {
        let mut all = troupe::sync::lock(&self.busy);
        let busy = all.entry(agent.to_owned()).or_insert_with(|| Busy {
            bar: None,
            model: false,
            attempt: None,
            tools: BTreeMap::new(),
            message: String::new(),
        });
        change(busy);
        let message = busy.message();
        if message.is_empty() {
            if let Some(bar) = all.remove(agent).and_then(|done| done.bar) {
                bar.finish_and_clear();
                self.multi.remove(&bar);
            }
            return;
        }
        if message == busy.message {
            return;
        }
        match &busy.bar {
            Some(bar) => {
                bar.reset_elapsed();
                bar.set_message(message.clone());
            }
            None => {
                // Complete before it is added: its first frame already says what it waits on.
                let bar = ProgressBar::hidden()
                    .with_style(self.style.clone())
                    .with_prefix(style::agent_column(agent, self.colour))
                    .with_message(message.clone());
                let bar = self.multi.add(bar);
                bar.enable_steady_tick(TICK);
                busy.bar = Some(bar);
            }
        }
        busy.message = message;
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        self.clear();
        super::terminal::set_active(None);
    }
}
