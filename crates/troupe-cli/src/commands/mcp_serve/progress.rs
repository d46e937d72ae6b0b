//! A run's events as MCP progress notifications (`notifications/progress`), when the client's
//! `troupe_run` request carried a progress token: each event, as it is written, becomes one
//! notification whose message is the event's line as `troupe log` prints it
//! (`commands::log::line`), and whose progress counts the events so far.
//!
//! The team's event listener is called with the log's lock held and must never block: it only
//! puts the line on an unbounded channel. A task of its own sends the notifications in order;
//! [`Progress::finish`] closes the channel and waits until every line was sent, so that all
//! progress reaches the client before the run's result.

use std::sync::{Arc, Mutex};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::task::JoinHandle;
use troupe::store::events::EventListener;
use troupe::wire::Event;

/// The listener a run's team gets, and the task that sends what it hears.
pub struct Progress {
    listener: Arc<Lines>,
    sender: JoinHandle<()>,
}

impl Progress {
    /// Starts sending the events a listener hears to `peer` as progress of `token`.
    pub fn start(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        let (lines, mut heard) = unbounded_channel::<String>();
        let sender = tokio::spawn(async move {
            let mut count = 0_u32;
            while let Some(line) = heard.recv().await {
                count = count.saturating_add(1);
                let mut param = ProgressNotificationParam::new(token.clone(), f64::from(count));
                param.message = Some(line);
                if let Err(e) = peer.notify_progress(param).await {
                    // The client is gone: nothing more can be sent (the run goes on to its end,
                    // or is stopped by the connection's end).
                    tracing::debug!(error = %e, "a progress notification could not be sent");
                    break;
                }
            }
        });
        Self {
            listener: Arc::new(Lines(Mutex::new(Some(lines)))),
            sender,
        }
    }

    /// The team's listener.
    pub fn listener(&self) -> Arc<dyn EventListener> {
        self.listener.clone()
    }

    /// No more events (the run ended): waits until every line heard was sent.
    pub async fn finish(self) {
        troupe::sync::lock(&self.listener.0).take();
        if let Err(e) = self.sender.await {
            tracing::debug!(error = %e, "the progress task ended abnormally");
        }
    }
}

/// Each event's `troupe log` line onto the channel, until the run's end closes it.
struct Lines(Mutex<Option<UnboundedSender<String>>>);

impl EventListener for Lines {
    fn event(&self, event: &Event) {
        if let Some(lines) = troupe::sync::lock(&self.0).as_ref() {
            let _ = lines.send(crate::commands::log::line(event));
        }
    }
}
