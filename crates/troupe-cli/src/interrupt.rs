//! Ctrl-C during a run (SPEC §8). The first interrupt fires the run's cancellation token: the
//! approval prompt on screen is answered "no", the agents stop at their next safe point and the
//! team is closed as usual (in-flight messages back to `ready/`, jobs stopped), and the command
//! exits 130. A second interrupt exits 130 at once, whatever the first is still waiting for.
//!
//! One signal stream is kept for both, so that an interrupt arriving between the two is never
//! lost (tokio's `ctrl_c()` would miss one sent before it is polled again).

use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::error::{CliError, INTERRUPTED_EXIT};

/// What the first interrupt fires, in this order.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    /// Fired by the signal: the lead stops at its next safe point and the driver returns.
    pub run: CancellationToken,
    /// Fired once the teammates were told to stop: an approval prompt on screen is answered
    /// "no". Later than `run`, so that a teammate whose prompt ends finds its team closing and
    /// cannot go on to another model call.
    pub prompts: CancellationToken,
}

/// Starts listening for SIGINT on the current tokio runtime; `cancel` fires on the first, the
/// second exits the process. Listening stops when the returned guard is dropped (the team is
/// closed): from then on an interrupt does nothing, as once the run's end dropped its runtime.
pub fn listen(cancel: CancellationToken) -> Result<DropGuard, CliError> {
    let mut interrupts = signal(SignalKind::interrupt())
        .map_err(|e| CliError::failed(format_args!("cannot listen for Ctrl-C: {e}")))?;
    let listening = CancellationToken::new();
    let stopped = listening.clone();
    tokio::spawn(async move {
        let interrupted = async move {
            if interrupts.recv().await.is_none() {
                return;
            }
            eprintln!(
                "troupe: interrupted; closing the team at a safe point (Ctrl-C again exits at \
                 once)"
            );
            cancel.cancel();
            if interrupts.recv().await.is_some() {
                eprintln!("troupe: interrupted again; exiting at once");
                // Nothing is dropped on this exit: no command, hook or job may outlive it.
                troupe::process::kill_every_group();
                std::process::exit(i32::from(INTERRUPTED_EXIT));
            }
        };
        tokio::select! {
            () = interrupted => {}
            () = stopped.cancelled() => {}
        }
    });
    Ok(listening.drop_guard())
}
