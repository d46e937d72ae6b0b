//! A team opened by the commands that look at it without running it — `troupe log`,
//! `timeline`, `serve`, `watch` and `memory`: its event stream (and wakeups when it grows), its
//! agents' conversations, its usage, its memory records and the inspector's views, on the
//! workspace's files or a shared team's database (which must already hold troupe's schema:
//! nothing is created). The commands work on [`TeamView`] the same way for either backend.
//!
//! Those commands live in the CLI crate; this is their one way in, so no module outside
//! `store` and `bootstrap` names an adapter.

use std::path::Path;
use std::sync::Arc;

use troupe_wire::AgentName;

use super::options::StoreChoice;
use crate::agent::transcript::Loaded;
use crate::inspect::Inspector;
use crate::layout::Layout;
use crate::store::events::stream::EventStream;
use crate::store::memory::MemoryStore;
use crate::store::usage::TeamUsage;
use crate::store::{BackendError, IoError};

/// The memory records of the team `store` names: the workspace's folder, or a shared
/// team's rows (connected now, creating nothing).
pub async fn open_memory(
    workspace: &Path,
    store: &StoreChoice,
) -> Result<MemoryStore, BackendError> {
    Ok(TeamView::open(workspace, store).await?.memory())
}

/// A team, opened to be looked at. Cloning shares it (and a database's connection).
#[derive(Clone)]
pub struct TeamView {
    inspector: Arc<Inspector>,
}

impl std::fmt::Debug for TeamView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamView").finish_non_exhaustive()
    }
}

impl TeamView {
    /// Opens the team `store` names for `workspace`, changing nothing: the workspace's files
    /// (nothing is read yet), or a shared team's database (connected now).
    pub async fn open(workspace: &Path, store: &StoreChoice) -> Result<Self, BackendError> {
        let (clock, stores) = super::no_team::command_stores(workspace, store, "view").await?;
        Ok(Self {
            inspector: Arc::new(Inspector::on(Layout::new(workspace), clock, stores)),
        })
    }

    /// The team's event stream.
    pub fn events(&self) -> Arc<dyn EventStream> {
        self.inspector.stores().events.clone()
    }

    /// The conversation of `agent` since its last compaction (empty when it has none).
    pub async fn conversation(&self, agent: &AgentName) -> Result<Loaded, IoError> {
        self.inspector.stores().transcripts.open(agent).load().await
    }

    /// The team's token usage (a shared team's: every process's records).
    pub fn usage(&self) -> Arc<dyn TeamUsage> {
        self.inspector.stores().usage.clone()
    }

    /// The team's read-only views (roster, requests, mailboxes, usage…).
    pub fn inspector(&self) -> Arc<Inspector> {
        self.inspector.clone()
    }

    /// The runs' recordings (a shared team's: those its leads copied to the database).
    pub fn recordings(&self) -> Arc<dyn crate::store::recordings::Recordings> {
        self.inspector.stores().recordings.clone()
    }

    /// The team's memory records.
    pub fn memory(&self) -> MemoryStore {
        self.inspector.stores().memory.clone()
    }
}
