//! One wakeup source for every live stream of `troupe serve`: the kernel's file watch on
//! `.troupe/events.jsonl` (no polling). While `.troupe/` does not exist yet, the workspace folder
//! is watched for it to appear, and then the events file is watched too.
//!
//! Every change bumps a counter in a `tokio::sync::watch` channel; each stream waits on its own
//! receiver and reads whatever its cursor has not seen.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use troupe::bootstrap::TeamView;
use troupe::layout::Layout;
use troupe::store::events::follow::{watch_file, FileWatch, FollowError};

/// Keeps the watches alive; dropping it stops the wakeups.
pub struct Changes {
    rx: watch::Receiver<u64>,
    _keep: Keep,
}

/// What the wakeups come from.
enum Keep {
    Files {
        _state_dir_watch: FileWatch,
        _events_watch: Arc<Mutex<Option<FileWatch>>>,
    },
    /// A shared team's stream: its `NOTIFY`s (and every reconnection of the listener), until
    /// the guard cancels the listener.
    Shared(#[allow(dead_code)] tokio_util::sync::DropGuard),
}

impl Changes {
    pub fn start(layout: &Layout) -> Result<Self, FollowError> {
        let (tx, rx) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let events_file: PathBuf = layout.events_log();
        let events_watch: Arc<Mutex<Option<FileWatch>>> = Arc::new(Mutex::new(None));
        let ensure = {
            let tx = tx.clone();
            let events_watch = events_watch.clone();
            move |renew: bool| ensure_events_watch(&events_file, &events_watch, &tx, renew)
        };
        // `.troupe` itself, seen from the workspace folder: its creation, or its replacement
        // (then the old folder's watch is dead and a new one is needed).
        let state_dir_watch = watch_file(&layout.state_dir(), {
            let ensure = ensure.clone();
            let tx = tx.clone();
            move || {
                ensure(true);
                tx.send_modify(|n| *n = n.wrapping_add(1));
            }
        })?;
        ensure(false);
        Ok(Self {
            rx,
            _keep: Keep::Files {
                _state_dir_watch: state_dir_watch,
                _events_watch: events_watch,
            },
        })
    }

    /// The wakeups of a shared team's stream: `LISTEN` on its events channel. Must be called
    /// inside a Tokio runtime (the forwarding task runs there).
    pub fn shared(view: &TeamView) -> Self {
        let (tx, rx) = watch::channel(0u64);
        let guard = view.on_change(move || {
            tx.send_modify(|n| *n = n.wrapping_add(1));
            true
        });
        Self {
            rx,
            _keep: Keep::Shared(guard),
        }
    }

    /// A receiver that sees every later change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.rx.clone()
    }
}

/// Starts watching the events file once its folder exists (again, when `renew`).
fn ensure_events_watch(
    events_file: &std::path::Path,
    slot: &Mutex<Option<FileWatch>>,
    tx: &Arc<watch::Sender<u64>>,
    renew: bool,
) {
    let Ok(mut slot) = slot.lock() else { return };
    if renew {
        *slot = None;
    }
    if slot.is_some() || !events_file.parent().is_some_and(std::path::Path::is_dir) {
        return;
    }
    let tx = tx.clone();
    match watch_file(events_file, move || {
        tx.send_modify(|n| *n = n.wrapping_add(1));
    }) {
        Ok(watch) => *slot = Some(watch),
        Err(e) => tracing::warn!("{e}"),
    }
}
