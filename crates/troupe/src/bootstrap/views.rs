//! A shared team opened by the commands that look at it without running it — `troupe
//! log`, `timeline`, `serve` and `memory` with `--store`: its event stream (and wakeups when it
//! grows), its agents' conversations and its memory records, read from the team's database
//! (which must already hold troupe's schema: nothing is created).
//!
//! Those commands live in the CLI crate; this is their one way in, so no module outside
//! `store` and `bootstrap` names the PostgreSQL adapters.

use std::sync::Arc;

use troupe_wire::{AgentName, Event};

use super::options::PgOptions;
use crate::store::memory::MemoryStore;
use crate::store::postgres::events::{on_change, PgEvents};
use crate::store::postgres::memory::PgMemory;
use crate::store::postgres::{PgStore, PgTranscriptLog};
use crate::store::BackendError;

/// The memory records of the team `store` names: the workspace's folder, or a shared
/// team's rows (connected now, creating nothing).
pub async fn open_memory(
    workspace: &std::path::Path,
    store: &super::options::StoreChoice,
) -> Result<MemoryStore, BackendError> {
    Ok(match store.shared() {
        None => MemoryStore::open(&crate::layout::Layout::new(workspace)),
        Some(options) => TeamView::open(options).await?.memory(),
    })
}

/// A shared team, opened to be looked at. Cloning shares the connection.
#[derive(Clone)]
pub struct TeamView {
    store: PgStore,
}

impl std::fmt::Debug for TeamView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamView")
            .field("store", &self.store.shown())
            .finish()
    }
}

impl TeamView {
    /// Connects to the team `options` names, changing nothing.
    pub async fn open(options: &PgOptions) -> Result<Self, BackendError> {
        Ok(Self {
            store: PgStore::connect_existing(&options.url, &options.team).await?,
        })
    }

    /// Where the team is, without the password (for messages).
    pub fn shown(&self) -> &str {
        self.store.shown()
    }

    /// Up to `limit` events of the team's stream after position `after`, in team order, each
    /// with its `seq` set to its position.
    pub async fn events_after(&self, after: u64, limit: i64) -> Result<Vec<Event>, BackendError> {
        PgEvents::new(self.store.clone()).after(after, limit).await
    }

    /// Up to `limit` events of the team's stream before position `before` (the latest of
    /// them), oldest first, each with its `seq` set to its position.
    pub async fn events_before(&self, before: u64, limit: i64) -> Result<Vec<Event>, BackendError> {
        PgEvents::new(self.store.clone())
            .before(before, limit)
            .await
    }

    /// The position of the stream's last event now (0 when it has none).
    pub async fn last_position(&self) -> Result<u64, BackendError> {
        PgEvents::new(self.store.clone()).last().await
    }

    /// Calls `changed` whenever the team's stream may have grown (a notification, or a
    /// reconnection of the listener), until the guard is dropped or `changed` returns false.
    /// Must be called inside a Tokio runtime.
    pub fn on_change(
        &self,
        changed: impl Fn() -> bool + Send + 'static,
    ) -> tokio_util::sync::DropGuard {
        on_change(&self.store, changed)
    }

    /// The conversation of `agent` as its transcript's bytes (empty when it has none).
    pub async fn transcript(&self, agent: &AgentName) -> Result<Vec<u8>, BackendError> {
        PgTranscriptLog::new(self.store.clone(), agent.as_str())
            .read()
            .await
    }

    /// The team's token usage, every process's records (for a reader that folds them as they
    /// arrive).
    pub fn usage(&self) -> Arc<dyn crate::store::usage::TeamUsage> {
        Arc::new(crate::store::postgres::usage::PgUsage::new(
            self.store.clone(),
        ))
    }

    /// The team's read-only views (roster, requests, mailboxes, usage…) on this connection.
    pub fn inspector(&self, workspace: &std::path::Path) -> crate::inspect::Inspector {
        super::no_team::shared_inspector(workspace, self.store.clone())
    }

    /// The team's memory records (the workspace's files keep nothing of them).
    pub fn memory(&self) -> MemoryStore {
        MemoryStore::on(Arc::new(PgMemory::new(self.store.clone())))
    }
}
