//! Signals that end the view as `q` does, so that the terminal is given back even when the
//! view is stopped from outside: SIGTERM and SIGHUP (its terminal closed), and SIGINT when
//! asked (`troupe watch`; for `troupe run --watch` SIGINT stays the run's, see `interrupt.rs`).
//! The handlers are installed before [`listen`] returns, so a signal sent once the view is up is
//! never missed; they are awaited by a task on the command's runtime.

use std::sync::mpsc::Sender;

use tokio::signal::unix::{signal, SignalKind};

use super::feed::Wake;
use crate::error::CliError;

/// Sends [`Wake::Stop`] at the first of the signals. Called on the command's runtime.
pub fn listen(with_interrupt: bool, wake: Sender<Wake>) -> Result<(), CliError> {
    let failed =
        |e: std::io::Error| CliError::failed(format_args!("cannot listen for signals: {e}"));
    let mut int = if with_interrupt {
        Some(signal(SignalKind::interrupt()).map_err(failed)?)
    } else {
        None
    };
    let mut term = signal(SignalKind::terminate()).map_err(failed)?;
    let mut hup = signal(SignalKind::hangup()).map_err(failed)?;
    tokio::spawn(async move {
        let interrupted = async {
            match &mut int {
                Some(int) => int.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = hup.recv() => {}
            _ = interrupted => {}
        }
        let _ = wake.send(Wake::Stop);
    });
    Ok(())
}
