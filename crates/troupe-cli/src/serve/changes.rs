//! One wakeup source for every live stream of `troupe serve`: the team's stream's own wakeups
//! (the kernel's file watch on `.troupe/events.jsonl` — the workspace watched until `.troupe/`
//! appears — or a shared team's `NOTIFY`s; never polling).
//!
//! Every change bumps a counter in a `tokio::sync::watch` channel; each stream waits on its own
//! receiver and reads whatever its cursor has not seen.

use std::sync::Arc;

use tokio::sync::watch;
use troupe::store::events::stream::{EventStream, Watching};
use troupe::store::PortError;

/// Keeps the wakeups coming; dropping it stops them.
pub struct Changes {
    rx: watch::Receiver<u64>,
    _watching: Watching,
}

impl Changes {
    /// Starts the wakeups of `stream`. Must be called inside a Tokio runtime.
    pub fn start(stream: &dyn EventStream) -> Result<Self, PortError> {
        let (tx, rx) = watch::channel(0u64);
        let watching = stream.on_change(Arc::new(move || {
            tx.send_modify(|n| *n = n.wrapping_add(1));
            true
        }))?;
        Ok(Self {
            rx,
            _watching: watching,
        })
    }

    /// A receiver that sees every later change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.rx.clone()
    }
}
