//! Signals that end the view as `q` does, so that the terminal is given back even when the
//! view is stopped from outside: SIGTERM and SIGHUP (its terminal closed), and SIGINT when
//! asked (`troupe watch`; for `troupe run --watch` SIGINT stays the run's, see `interrupt.rs`).
//! The handlers are installed before [`listen`] returns, so a signal sent once the view is up is
//! never missed.

use std::sync::mpsc::Sender;

use tokio::signal::unix::{signal, SignalKind};

use super::feed::Wake;
use crate::error::CliError;

/// Sends [`Wake::Stop`] at the first of the signals.
pub fn listen(with_interrupt: bool, wake: Sender<Wake>) -> Result<(), CliError> {
    let failed =
        |e: std::io::Error| CliError::failed(format_args!("cannot listen for signals: {e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(failed)?;
    let (mut term, mut hup, mut int) = {
        let _inside = runtime.enter();
        let int = if with_interrupt {
            Some(signal(SignalKind::interrupt()).map_err(failed)?)
        } else {
            None
        };
        (
            signal(SignalKind::terminate()).map_err(failed)?,
            signal(SignalKind::hangup()).map_err(failed)?,
            int,
        )
    };
    std::thread::Builder::new()
        .name("watch-signals".into())
        .spawn(move || {
            runtime.block_on(async move {
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
            });
            let _ = wake.send(Wake::Stop);
        })
        .map(drop)
        .map_err(failed)
}
