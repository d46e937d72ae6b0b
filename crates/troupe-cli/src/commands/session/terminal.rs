//! The session on a terminal: `troupe watch`'s view (panes, pending plans) above, the output of
//! the last command or prompt below it, and the prompt line at the bottom. One loop waits on
//! one channel — keys, pastes, stream changes, the end of a prompt's work — on tokio's blocking
//! pool, as the watch view's does; the terminal is given back however it ends (the watch's
//! guard and panic hook).

use std::path::Path;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind};
use ratatui::crossterm::execute;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;
use troupe::terminal_text::line_for_terminal;
use troupe::wire::AgentName;

use super::commands::{self, SlashCommand};
use super::core::{Core, Submitted};
use super::history;
use super::prompt::{Action, Prompt};
use crate::args::SessionArgs;
use crate::error::CliError;
use crate::watch::feed::{Feed, Wake};
use crate::watch::render::{draw_in, Chrome};
use crate::watch::state::View;
use crate::watch::team::Team;
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
                    Ok(table) => self.output = table.lines().map(str::to_owned).collect(),
                    Err(e) => self.view.notice = Some(e.to_string()),
                }
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
        let output_rows = self.output.len().min(OUTPUT_ROWS) as u16;
        let prompt_rows = self.prompt.text.split('\n').count().min(8) as u16;
        let [view, output, prompt] = Layout::vertical([
            Constraint::Min(6),
            Constraint::Length(if output_rows == 0 { 0 } else { output_rows + 2 }),
            Constraint::Length(prompt_rows + 2),
        ])
        .areas(frame.area());
        draw_in(frame, view, &self.view, self.colour, &CHROME);
        if output_rows > 0 {
            let from = self.output.len() - usize::from(output_rows);
            let lines: Vec<Line<'static>> = self.output[from..]
                .iter()
                .map(|line| Line::from(shown(line)))
                .collect();
            frame.render_widget(
                Paragraph::new(lines).block(Block::default().borders(Borders::ALL)),
                output,
            );
        }
        let title = if self.core.is_working() {
            " the team is at work: Enter sends the line to the lead · Ctrl-C stops the work "
        } else {
            " prompt · Enter sends · Alt-Enter new line · ↑ earlier · /help "
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
    }
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
