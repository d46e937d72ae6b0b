//! The terminal while the view is up: raw mode, the alternate screen, the cursor hidden — and
//! put back however the view ends: on return, on an error (the guard is dropped) and on a panic
//! (a panic hook restores it before the panic message is printed, so the message is readable).

use std::io::{Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::Show;
use ratatui::crossterm::event::DisableBracketedPaste;
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::Terminal;

use crate::error::CliError;

/// Whether the terminal is in the view's state now (so that it is restored once only).
static TAKEN: AtomicBool = AtomicBool::new(false);

/// The terminal, taken for the view; restored when dropped.
pub struct Screen {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Screen {
    /// Takes the terminal on stdout.
    pub fn take() -> Result<Self, CliError> {
        let failed = |e: std::io::Error| {
            restore();
            CliError::failed(format_args!("cannot set up the terminal: {e}"))
                .with_code("terminal_error")
        };
        install_panic_hook();
        TAKEN.store(true, Ordering::SeqCst);
        enable_raw_mode().map_err(failed)?;
        execute!(std::io::stdout(), EnterAlternateScreen).map_err(failed)?;
        let mut terminal =
            Terminal::new(CrosstermBackend::new(std::io::stdout())).map_err(failed)?;
        terminal.hide_cursor().map_err(failed)?;
        terminal.clear().map_err(failed)?;
        Ok(Self { terminal })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// Raw mode off, the alternate screen left, the cursor shown; a no-op when not taken.
fn restore() {
    if TAKEN.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        let mut out = std::io::stdout();
        // Bracketed paste is the session's; turning it off where it was not on is harmless.
        let _ = execute!(out, DisableBracketedPaste, LeaveAlternateScreen, Show);
        let _ = out.flush();
    }
}

/// Once per process: restore the terminal, then report the panic as before.
fn install_panic_hook() {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}
