//! `troupe watch` (and `troupe run --watch`): the team in a full-screen terminal view — one pane
//! per agent (status, current tool, last lines of its text, tokens), the pending plan requests,
//! keys to move between panes, answer a plan and message an agent. It follows the live stream
//! and restores the terminal however it ends.
//!
//! Layout:
//! - [`state`]: the [`state::View`], folded from events and store reads; pure.
//! - [`render`]: the screen as a function of the view (ratatui).
//! - [`keys`]: what each key does to the view, and the effects it asks for.
//! - [`feed`]: the event stream followed as `troupe log -f` follows it (file watch or NOTIFY).
//! - [`team`]: the store reads, and answers and messages through `troupe review`'s and
//!   `troupe send`'s own paths.
//! - [`terminal`]: raw mode and the alternate screen, restored on return, error and panic.
//! - [`signals`]: SIGTERM, SIGHUP (and for `troupe watch` SIGINT) end the view as `q` does.
//! - [`waiting`]: how the view's thread waits for async work on the command's runtime.
//!
//! One loop waits on one channel: keys (a thread blocked reading the terminal), stream changes
//! (the watch) and the end of a run. No timer: nothing is redrawn unless something happened.
//! The loop runs on tokio's blocking pool (`troupe::sync::offload`), never on the runtime's
//! threads, while the signals, the stream's listener and a run go on there.

pub(crate) mod feed;
pub(crate) mod keys;
pub(crate) mod render;
pub(crate) mod signals;
pub(crate) mod state;
pub(crate) mod team;
pub(crate) mod terminal;
pub(crate) mod waiting;

use std::any::Any;
use std::future::Future;
use std::io::IsTerminal;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::pin::pin;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::task::Poll;

use ratatui::crossterm::event::{self, Event as TermEvent};
use troupe::bootstrap::StoreChoice;

use crate::args::StoreFlags;
use crate::error::CliError;
use feed::{Feed, Wake};
use state::{Effect, View};
use team::Team;
use terminal::Screen;

/// `troupe watch`: the view of the workspace's team (or the shared team `store` names) until
/// `q` or Ctrl-C.
pub async fn watch(workspace: &Path, store: &StoreFlags) -> Result<(), CliError> {
    need_terminal("troupe watch")?;
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let store = crate::store_choice::store_choice(store, &settings, false)?;
    let (wake, woken) = channel();
    let session = Session::open(workspace, store, wake.clone()).await?;
    signals::listen(true, wake.clone())?;
    match session.show(woken, wake).await {
        Ok(viewed) => viewed,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// The view needs stdout to be a terminal; without one it is a usage error (exit 2) that says
/// what to use instead.
pub fn need_terminal(what: &str) -> Result<(), CliError> {
    if std::io::stdout().is_terminal() {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "{what} needs a terminal on stdout; to follow the team without one, use `troupe log -f`"
    ))
    .with_code("not_a_terminal"))
}

/// `troupe run --watch`: `drive` goes on while the view is up. Leaving the view while the run
/// still goes calls `stop` (the run's Ctrl-C) and waits for the run to close; the run's outcome
/// is returned once the view is gone.
pub async fn watch_run<T>(
    workspace: &Path,
    store: StoreChoice,
    stop: impl FnOnce(),
    drive: impl Future<Output = T>,
) -> Result<T, CliError> {
    let (wake, woken) = channel();
    let session = Session::open(workspace, store, wake.clone()).await?;
    signals::listen(false, wake.clone())?;
    let run_wake = wake.clone();
    let mut running = pin!(async move {
        let outcome = caught(drive).await;
        // The end may have nothing new to read (a run that failed at start).
        let _ = run_wake.send(Wake::Changed);
        outcome
    });
    let mut viewing = pin!(session.show(woken, wake));
    let (viewed, outcome) = tokio::select! {
        biased;
        outcome = &mut running => (viewing.await, outcome),
        viewed = &mut viewing => {
            // A view that panicked leaves the run be, and says so once it has ended.
            if viewed.is_ok() {
                eprintln!("troupe: left the view; closing the team at a safe point");
                stop();
            }
            (viewed, running.await)
        }
    };
    let viewed = viewed.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let outcome = outcome.map_err(|_| CliError::failed("the run's thread panicked"))?;
    viewed.map(|()| outcome)
}

/// `future`'s output, or the panic that ended it (as a thread's join returns it).
async fn caught<T>(future: impl Future<Output = T>) -> Result<T, Box<dyn Any + Send>> {
    let mut future = pin!(future);
    std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic)),
        }
    })
    .await
}

/// The view of one team, with its stream and stores.
struct Session {
    feed: Feed,
    team: Team,
    view: View,
    colour: bool,
}

impl Session {
    async fn open(
        workspace: &Path,
        store: StoreChoice,
        wake: Sender<Wake>,
    ) -> Result<Self, CliError> {
        Ok(Self {
            feed: Feed::open(workspace, &store, wake).await?,
            team: Team::open(workspace, store).await?,
            view: View::default(),
            colour: crate::observe::style::colour_wanted(true),
        })
    }

    /// Runs the view's loop ([`Self::run`]) on tokio's blocking pool until it ends; a panic in
    /// it (the terminal already given back by the panic hook) is returned, to be resumed.
    async fn show(
        self,
        woken: Receiver<Wake>,
        wake: Sender<Wake>,
    ) -> Result<Result<(), CliError>, Box<dyn Any + Send>> {
        troupe::sync::offload("the view", move || {
            std::panic::catch_unwind(AssertUnwindSafe(move || self.run(&woken, wake)))
        })
        .await
        .unwrap_or_else(|stopped| Ok(Err(CliError::failed(stopped))))
    }

    /// Takes the terminal and shows the view until the person quits.
    fn run(mut self, woken: &Receiver<Wake>, wake: Sender<Wake>) -> Result<(), CliError> {
        let mut screen = Screen::take()?;
        read_keys(wake)?;
        self.catch_up();
        loop {
            screen
                .terminal
                .draw(|frame| render::draw(frame, &self.view, self.colour))
                .map_err(|e| {
                    CliError::failed(format_args!("cannot draw the view: {e}"))
                        .with_code("terminal_error")
                })?;
            let Ok(first) = woken.recv() else {
                return Ok(());
            };
            let mut changed = false;
            for wake in std::iter::once(first).chain(woken.try_iter()) {
                match wake {
                    Wake::Key(key) => match keys::press(&mut self.view, key) {
                        Some(Effect::Quit) => return Ok(()),
                        Some(effect) => {
                            self.view.notice = Some(self.team.carry_out(&effect));
                            changed = true;
                        }
                        None => {}
                    },
                    // The next draw takes the new size; a paste is typing, which the view has none of.
                    Wake::Resize | Wake::Paste(_) | Wake::Said(_) => {}
                    Wake::Changed => changed = true,
                    Wake::Stop => return Ok(()),
                }
            }
            if changed {
                self.catch_up();
            }
        }
    }

    /// Reads everything new in the stream and the stores into the view; a failure is shown,
    /// not fatal (the next change tries again).
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

/// A thread blocked reading the terminal sends each key press, paste and resize; it ends when the
/// view has gone (its channel closed) or the terminal cannot be read.
pub(crate) fn read_keys(wake: Sender<Wake>) -> Result<(), CliError> {
    std::thread::Builder::new()
        .name("watch-keys".into())
        .spawn(move || loop {
            let sent = match event::read() {
                Ok(TermEvent::Key(key)) => wake.send(Wake::Key(key)),
                Ok(TermEvent::Resize(..)) => wake.send(Wake::Resize),
                Ok(TermEvent::Paste(text)) => wake.send(Wake::Paste(text)),
                Ok(_) => Ok(()),
                Err(_) => return,
            };
            if sent.is_err() {
                return;
            }
        })
        .map(drop)
        .map_err(|e| CliError::failed(format_args!("cannot read the keyboard: {e}")))
}
