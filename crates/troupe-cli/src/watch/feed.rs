//! The event stream the view follows, as `troupe log -f` follows it: `.troupe/events.jsonl`
//! read in batches from where the last read stopped, woken by the kernel's file watch (the
//! workspace is watched until `.troupe/` appears); or, for a shared team, its database stream,
//! woken by the stream's `NOTIFY`. Never a timer. Each wakeup is sent as [`Wake::Changed`].

use std::path::Path;
use std::sync::mpsc::Sender;
use std::sync::Arc;

use troupe::bootstrap::StoreChoice;
use troupe::store::events::stream::{EventReader, Watching};
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
    /// Text pasted (bracketed paste, the session's prompt line): its lines kept.
    Paste(String),
    /// Lines for the person from work going on elsewhere (the end of a session's prompt).
    Said(Vec<String>),
    /// The stream (or the team) may have changed.
    Changed,
    /// A signal asked the view to end.
    Stop,
}

/// How much of a file is read at a time (a database's reader reads a bounded number of rows).
const BATCH_BYTES: usize = 1024 * 1024;

/// The stream, and what keeps its wakeups coming.
pub struct Feed {
    reader: Box<dyn EventReader>,
    _watching: Watching,
    /// Where the view's thread waits for each read of the stream (the wakeups' tasks run on
    /// the command's runtime until the feed is dropped).
    runtime: Runtime,
}

impl Feed {
    /// Starts watching before the first read, so that nothing appended in between is missed.
    pub async fn open(
        workspace: &Path,
        store: &StoreChoice,
        wake: Sender<Wake>,
    ) -> Result<Self, CliError> {
        let stream = crate::store_choice::team_view(workspace, store)
            .await?
            .events();
        let watching = stream
            .on_change(Arc::new(move || wake.send(Wake::Changed).is_ok()))
            .map_err(|e| CliError::coded(&e))?;
        let reader = stream.reader(0).await.map_err(|e| CliError::coded(&e))?;
        Ok(Self {
            reader,
            _watching: watching,
            runtime: Runtime::current(),
        })
    }

    /// The next batch of new events (empty when there is nothing new).
    pub fn next_batch(&mut self) -> Result<Vec<Event>, CliError> {
        self.runtime
            .wait(self.reader.next_batch(BATCH_BYTES))
            .map_err(|e| CliError::coded(&e))
    }
}
