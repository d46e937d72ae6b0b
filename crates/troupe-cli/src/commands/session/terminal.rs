//! The session on a terminal: `troupe watch`'s view (panes, pending plans) above, the output of
//! the last command or prompt below it, and the prompt line at the bottom. One loop waits on
//! one channel — keys, pastes, stream changes, the end of a prompt's work — on tokio's blocking
//! pool, as the watch view's does; the terminal is given back however it ends (the watch's
//! guard and panic hook).

use std::path::Path;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::crossterm::execute;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;
use troupe::approvals::Choice;
use troupe::terminal_text::line_for_terminal;
use troupe::wire::AgentName;

use super::commands::{self, SlashCommand};
use super::core::{Core, Submitted};
use super::history;
use super::prompt::{Action, Prompt};
use crate::args::SessionArgs;
use crate::error::CliError;
use crate::permission_answer::answer_permission_in;
use crate::watch::feed::{Feed, Wake};
use crate::watch::render::{draw_in, Chrome};
use crate::watch::state::{Effect, View};
use crate::watch::team::{short_request_id, PendingAsk, Team};
use crate::watch::terminal::Screen;
use crate::watch::waiting::Runtime;

/// The keys line under the panes.
const CHROME: Chrome = Chrome {
    title: "troupe session",
    help: "Tab pane · PgUp/PgDn scroll · /help · Ctrl-C stops the work · Ctrl-D leaves",
};

/// How many lines of output are shown at most.
const OUTPUT_ROWS: usize = 10;

/// Opens the core, then the view until the person leaves; work still going is stopped and
/// waited for (the team closed) before returning.
pub async fn session(workspace: &Path, args: SessionArgs) -> Result<(), CliError> {
    let (wake, woken) = channel();
    let said = wake.clone();
    let core = Core::open(
        workspace,
        args,
        Box::new(move |lines| {
            let _ = said.send(Wake::Said(lines));
        }),
    )?;
    let front = Front {
        feed: Feed::open(workspace, core.store(), wake.clone()).await?,
        team: Team::open(workspace, core.store().clone()).await?,
        view: View::default(),
        prompt: Prompt::with_history(history::load(workspace)),
        output: vec!["type a prompt for the lead; /help lists the keys and commands".into()],
        core: core.clone(),
        asks: Vec::new(),
        denying: None,
        colour: crate::observe::style::colour_wanted(true),
        runtime: Runtime::current(),
    };
    crate::watch::signals::listen(false, wake.clone())?;
    let shown = troupe::sync::offload("the session", move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            front.run(&woken, wake)
        }))
    })
    .await;
    if core.cancel() {
        eprintln!("troupe: left the session; closing the team at a safe point");
    }
    core.finished().await;
    match shown {
        Ok(Ok(shown)) => shown,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(stopped) => Err(CliError::failed(stopped)),
    }
}

/// The terminal front end's state.
struct Front {
    feed: Feed,
    team: Team,
    view: View,
    prompt: Prompt,
    /// What the last command or prompt said, shown above the prompt line.
    output: Vec<String>,
    core: Arc<Core>,
    /// The permission asks waiting for a person, oldest first; the first is shown and answered.
    asks: Vec<PendingAsk>,
    /// `n` was pressed on this request: the prompt line is the reason, Enter denies.
    denying: Option<String>,
    colour: bool,
    /// Where `/cost` waits for its read.
    runtime: Runtime,
}

impl Front {
    fn run(mut self, woken: &Receiver<Wake>, wake: Sender<Wake>) -> Result<(), CliError> {
        let mut screen = Screen::take()?;
        // Pasted text arrives whole (its new lines kept, not taken for Enter); the guard's
        // restore turns it off again.
        let _ = execute!(
            std::io::stdout(),
            ratatui::crossterm::event::EnableBracketedPaste
        );
        crate::watch::read_keys(wake)?;
        self.catch_up();
        loop {
            screen
                .terminal
                .draw(|frame| self.draw(frame))
                .map_err(|e| {
                    CliError::failed(format_args!("cannot draw the session: {e}"))
                        .with_code("terminal_error")
                })?;
            let Ok(first) = woken.recv() else {
                return Ok(());
            };
            let mut changed = false;
            for wake in std::iter::once(first).chain(woken.try_iter()) {
                match wake {
                    Wake::Key(key) => {
                        if self.key(key) {
                            return Ok(());
                        }
                        changed = true;
                    }
                    Wake::Paste(text) => self.prompt.paste(&text),
                    Wake::Said(lines) => {
                        self.output.extend(lines);
                        changed = true;
                    }
                    Wake::Resize => {}
                    Wake::Changed => changed = true,
                    Wake::Stop => return Ok(()),
                }
            }
            if changed {
                self.catch_up();
            }
        }
    }

    /// A key; true when the session is to end.
    fn key(&mut self, key: KeyEvent) -> bool {
        if key.kind == KeyEventKind::Release {
            return false;
        }
        if self.answer_key(key) {
            return false;
        }
        match key.code {
            KeyCode::Tab => self.view.select_next(),
            KeyCode::BackTab => self.view.select_previous(),
            KeyCode::PageUp | KeyCode::PageDown => {
                if let Some(pane) = self.view.selected_pane() {
                    if key.code == KeyCode::PageUp {
                        pane.scroll_back(crate::watch::keys::SCROLL_STEP);
                    } else {
                        pane.scroll_forward(crate::watch::keys::SCROLL_STEP);
                    }
                }
            }
            _ => match self.prompt.press(key, self.core.is_working()) {
                Action::None => {}
                Action::Notice(notice) => self.view.notice = Some(notice),
                Action::Cancel => {
                    if self.core.cancel() {
                        self.view.notice =
                            Some("stopping the current work; the session stays".into());
                    }
                }
                Action::Quit => return true,
                Action::Submit(line) => return self.submit(&line),
            },
        }
        false
    }

    /// The keys of a waiting permission ask: `y`, `a`, `s`, `n` on an empty line; while a
    /// denial's reason is typed, Enter denies and Esc goes back. Whether the key was one.
    fn answer_key(&mut self, key: KeyEvent) -> bool {
        if let Some(request_id) = self.denying.clone() {
            return match key.code {
                KeyCode::Enter => {
                    let reason = std::mem::take(&mut self.prompt.text);
                    self.denying = None;
                    let reason = (!reason.trim().is_empty()).then_some(reason);
                    self.answer(&request_id, Choice::No, reason.as_deref());
                    true
                }
                KeyCode::Esc => {
                    self.denying = None;
                    self.prompt.text.clear();
                    true
                }
                _ => false,
            };
        }
        let Some(first) = self.waiting_ask() else {
            return false;
        };
        if !self.prompt.text.is_empty() || !key.modifiers.difference(KeyModifiers::SHIFT).is_empty()
        {
            return false;
        }
        let request_id = first.request_id.clone();
        let choice = match key.code {
            KeyCode::Char('y') => Choice::Once,
            KeyCode::Char('a') => Choice::Always,
            KeyCode::Char('s') => Choice::Save,
            KeyCode::Char('n') => {
                self.denying = Some(request_id);
                return true;
            }
            _ => return false,
        };
        self.answer(&request_id, choice, None);
        true
    }

    /// The ask shown and answered: the oldest of the current work's (none once the work ended:
    /// its asks have no call waiting any more, even before the next read of the stores).
    fn waiting_ask(&self) -> Option<&PendingAsk> {
        self.core.is_working().then(|| self.asks.first()).flatten()
    }

    /// Answers a permission ask through `troupe approve`'s path (one answer per request).
    fn answer(&mut self, request_id: &str, choice: Choice, reason: Option<&str>) {
        let answered = self.runtime.wait(answer_permission_in(
            self.core.workspace(),
            self.core.store(),
            request_id,
            choice,
            reason,
            "session",
        ));
        self.view.notice = Some(match answered {
            Ok(answer) => {
                let mut said = format!(
                    "{} {} of {} ({})",
                    if answer.approved {
                        "approved"
                    } else {
                        "denied"
                    },
                    answer.request_id.short(),
                    answer.agent,
                    answer.summary
                );
                if let Some(saved) = answer.saved {
                    said.push_str(&format!("; {saved}"));
                }
                said
            }
            Err(e) => e.to_string(),
        });
        self.catch_up();
    }

    /// A line done: a command, a prompt, or a message to the lead while the team works.
    fn submit(&mut self, line: &str) -> bool {
        if line.trim_start().starts_with('/') {
            return self.command(line);
        }
        if let Err(e) = history::save(self.core.workspace(), self.prompt.history()) {
            self.view.notice = Some(e);
        }
        match self.core.submit(line) {
            Ok(Submitted::Started) => {
                self.output = vec![format!("› {}", first_line(line))];
            }
            Ok(Submitted::SentToLead(id)) => {
                self.view.notice = Some(format!(
                    "the team is at work: sent to the lead as a message ({})",
                    short(&id)
                ));
            }
            Err(e) => self.view.notice = Some(e.to_string()),
        }
        false
    }

    fn command(&mut self, line: &str) -> bool {
        let command = match commands::parse(line) {
            Ok(command) => command,
            Err(e) => {
                self.view.notice = Some(e);
                return false;
            }
        };
        match command {
            SlashCommand::Exit => return true,
            SlashCommand::Help => {
                self.output = commands::HELP.iter().map(|l| (*l).to_owned()).collect();
            }
            SlashCommand::New => {
                self.core.start_fresh();
                self.view.notice =
                    Some("the next prompt starts the lead on a fresh conversation".into());
            }
            SlashCommand::Cost => {
                let table = self.runtime.wait(crate::commands::usage::table(
                    self.core.workspace(),
                    self.core.store(),
                ));
                match table {
                    Ok(table) => self.output = lines_of(&table),
                    Err(e) => self.view.notice = Some(e.to_string()),
                }
            }
            SlashCommand::Status => {
                let report = self.runtime.wait(self.team.inspector().status());
                match report {
                    Ok(report) => self.output = lines_of(&crate::render::status(&report)),
                    Err(e) => self.view.notice = Some(CliError::coded(&e).to_string()),
                }
            }
            SlashCommand::Tasks => {
                let tasks = self.runtime.wait(self.team.inspector().tasks());
                match tasks {
                    Ok(tasks) => self.output = lines_of(&crate::render::tasks(&tasks)),
                    Err(e) => self.view.notice = Some(CliError::coded(&e).to_string()),
                }
            }
            SlashCommand::Compact(agent) => {
                let agent = agent.as_deref().unwrap_or("lead");
                let compacted = AgentName::parse(agent)
                    .map_err(|e| CliError::usage(e.to_string()))
                    .and_then(|agent| self.core.compact(&agent));
                match compacted {
                    Ok(line) => self.output = vec![line],
                    Err(e) => self.view.notice = Some(e.to_string()),
                }
            }
            SlashCommand::Approve | SlashCommand::Reject(_) => {
                let Some(plan) = self.view.current_plan() else {
                    self.view.notice = Some("no pending plan request".into());
                    return false;
                };
                let effect = Effect::Answer {
                    request_id: plan.request_id.clone(),
                    approve: command == SlashCommand::Approve,
                    feedback: match &command {
                        SlashCommand::Reject(feedback) => feedback.clone(),
                        _ => None,
                    },
                };
                self.view.notice = Some(self.team.carry_out(&effect));
            }
            SlashCommand::Send { agent, text } => {
                let sent = AgentName::parse(&agent)
                    .map_err(|e| CliError::usage(e.to_string()))
                    .and_then(|to| self.core.send(&to, &text));
                self.view.notice = Some(match sent {
                    Ok(id) => format!("sent message {} to {agent}", short(&id.to_string())),
                    Err(e) => e.to_string(),
                });
            }
        }
        false
    }

    fn draw(&self, frame: &mut Frame) {
        let ask = self.waiting_ask().map(ask_lines);
        let shown_output = ask.as_ref().unwrap_or(&self.output);
        let output_rows = shown_output.len().min(OUTPUT_ROWS) as u16;
        let prompt_rows = self.prompt.text.split('\n').count().min(8) as u16;
        let [view, output, prompt] = Layout::vertical([
            Constraint::Min(6),
            Constraint::Length(if output_rows == 0 { 0 } else { output_rows + 2 }),
            Constraint::Length(prompt_rows + 2),
        ])
        .areas(frame.area());
        draw_in(frame, view, &self.view, self.colour, &CHROME);
        if output_rows > 0 {
            // An ask shows from its first line (the call); output shows its last lines.
            let from = if ask.is_some() {
                0
            } else {
                shown_output.len() - usize::from(output_rows)
            };
            let lines: Vec<Line<'static>> = shown_output[from..]
                .iter()
                .take(usize::from(output_rows))
                .map(|line| Line::from(shown(line)))
                .collect();
            let block = match (&ask, self.asks.len()) {
                (None, _) => Block::default().borders(Borders::ALL),
                (Some(_), waiting) => Block::default()
                    .borders(Borders::ALL)
                    .title(format!(
                        " permission asked ({waiting} waiting): y once · a always this session · s save the rule · n deny "
                    ))
                    .title_style(Style::new().add_modifier(Modifier::BOLD)),
            };
            frame.render_widget(Paragraph::new(lines).block(block), output);
        }
        let title = if let Some(denying) = &self.denying {
            format!(
                " deny {}: type the reason (may be empty) · Enter denies · Esc goes back ",
                short_request_id(denying)
            )
        } else if self.core.is_working() {
            " the team is at work: Enter sends the line to the lead · Ctrl-C stops the work "
                .to_owned()
        } else {
            " prompt · Enter sends · Alt-Enter new line · ↑ earlier · /help ".to_owned()
        };
        let mut lines: Vec<Line<'static>> = self
            .prompt
            .text
            .split('\n')
            .map(|line| Line::from(shown(line)))
            .collect();
        if let Some(last) = lines.last_mut() {
            last.push_span("▏");
        }
        let from = lines.len().saturating_sub(usize::from(prompt_rows));
        frame.render_widget(
            Paragraph::new(lines.split_off(from))
                .wrap(Wrap { trim: false })
                .block(
                    Block::default()
                        .borders(Borders::ALL)
                        .title(title)
                        .title_style(Style::new().add_modifier(Modifier::BOLD)),
                ),
            prompt,
        );
    }

    /// Everything new in the stream and the stores, into the view (as the watch view does).
    fn catch_up(&mut self) {
        loop {
            match self.feed.next_batch() {
                Ok(events) if events.is_empty() => break,
                Ok(events) => events.iter().for_each(|e| self.view.apply(e)),
                Err(e) => {
                    self.view.notice = Some(e.to_string());
                    break;
                }
            }
        }
        if let Err(e) = self.team.refresh(&mut self.view) {
            self.view.notice = Some(e.to_string());
        }
        match self.team.pending_asks() {
            // Only the current work's asks have a call waiting for them.
            Ok(asks) => {
                let since = self.core.working_since();
                self.asks = asks
                    .into_iter()
                    .filter(|ask| since.is_some_and(|since| ask.created_at >= since))
                    .collect();
            }
            Err(e) => self.view.notice = Some(e.to_string()),
        }
        // Answered elsewhere (`troupe approve`): the reason being typed has nothing to deny.
        if let Some(denying) = &self.denying {
            if !self.asks.iter().any(|a| &a.request_id == denying) {
                self.denying = None;
            }
        }
    }
}

/// What the person is shown of an ask: who asks for which call, its arguments, its diff.
fn ask_lines(pending: &PendingAsk) -> Vec<String> {
    let ask = &pending.ask;
    let mut lines = vec![format!(
        "{} {} asks: {}",
        short_request_id(&pending.request_id),
        pending.from,
        ask.summary()
    )];
    if !ask.reason.is_empty() {
        lines.push(format!("why: {}", ask.reason));
    }
    lines.push(format!("arguments: {}", ask.arguments));
    if let Some(preview) = &ask.preview {
        lines.extend(preview.lines().map(str::to_owned));
    }
    lines
}

fn lines_of(text: &str) -> Vec<String> {
    text.lines().map(str::to_owned).collect()
}

fn first_line(text: &str) -> String {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default().to_owned();
    if lines.next().is_some() {
        format!("{first} …")
    } else {
        first
    }
}

fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

/// `text` on one line, its control characters escaped, never obeyed.
fn shown(text: &str) -> String {
    line_for_terminal(text).into_owned()
}
