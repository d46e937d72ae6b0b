//! The event stream the view follows, as `troupe log -f` follows it: `.troupe/events.jsonl`
//! read in batches from where the last read stopped, woken by the kernel's file watch (the
//! workspace is watched until `.troupe/` appears); or, for a shared team, its database stream,
//! woken by the stream's `NOTIFY`. Never a timer. Each wakeup is sent as [`Wake::Changed`].

use std::path::Path;
use std::sync::mpsc::Sender;

use troupe::bootstrap::{StoreChoice, TeamView};
use troupe::layout::Layout;
use troupe::store::events::follow::{watch_file_in_new_folder, NewFolderWatch};
use troupe::store::events::read::EventCursor;
use troupe::wire::Event;

use super::waiting::Runtime;
use crate::error::CliError;

/// Why the view's loop woke up.
#[derive(Debug)]
pub enum Wake {
    /// A key was pressed.
    Key(ratatui::crossterm::event::KeyEvent),
    /// The terminal changed size.
    Resize,
    /// The stream (or the team) may have changed.
    Changed,
    /// A signal asked the view to end.
    Stop,
}

/// How much of the file is read at a time.
const BATCH_BYTES: usize = 1024 * 1024;

/// How many events of a shared stream are read at a time.
const SHARED_BATCH: i64 = 1000;

/// The stream, and what keeps its wakeups coming.
pub enum Feed {
    Files {
        cursor: EventCursor,
        _watch: NewFolderWatch,
    },
    Shared {
        view: TeamView,
        after: u64,
        /// The listener's tasks run on the command's runtime until the feed is dropped.
        _listening: tokio_util::sync::DropGuard,
        /// Where the view's thread waits for each read of the stream.
        runtime: Runtime,
    },
}

impl Feed {
    /// Starts watching before the first read, so that nothing appended in between is missed.
    pub async fn open(
        workspace: &Path,
        store: &StoreChoice,
        wake: Sender<Wake>,
    ) -> Result<Self, CliError> {
        match crate::store_choice::team_view(store).await? {
            None => {
                let path = Layout::new(workspace).events_log();
                let watch = watch_file_in_new_folder(&path, move || {
                    let _ = wake.send(Wake::Changed);
                })
                .map_err(CliError::failed)?;
                Ok(Self::Files {
                    cursor: EventCursor::new(&path),
                    _watch: watch,
                })
            }
            Some(view) => {
                let listening = view.on_change(move || wake.send(Wake::Changed).is_ok());
                Ok(Self::Shared {
                    view,
                    after: 0,
                    _listening: listening,
                    runtime: Runtime::current(),
                })
            }
        }
    }

    /// The next batch of new events (empty when there is nothing new).
    pub fn next_batch(&mut self) -> Result<Vec<Event>, CliError> {
        match self {
            Self::Files { cursor, .. } => cursor.read_batch(BATCH_BYTES).map_err(CliError::failed),
            Self::Shared {
                view,
                after,
                runtime,
                ..
            } => {
                let batch = runtime
                    .wait(view.events_after(*after, SHARED_BATCH))
                    .map_err(|e| CliError::coded(&e))?;
                if let Some(last) = batch.last() {
                    *after = last.seq;
                }
                Ok(batch)
            }
        }
    }
}
