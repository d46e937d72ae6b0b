//! A shared team's artifacts (`troupe_artifacts`): [`PgArtifacts`] takes a copy of every
//! artifact a process writes under its own `.troupe/artifacts/`, its first
//! [`SHARED_ARTIFACT_BYTES`](crate::store::artifacts::SHARED_ARTIFACT_BYTES), so that a worker in
//! another workspace can make the ones a teammate's history names (`read_file`).
//!
//! The copy is one insert per artifact, made before the result naming it enters the history
//! (so a takeover right after finds it); a repeat of an insert whose outcome was lost adds
//! nothing (the key is the team, the agent and the file's name). One that fails is reported
//! once on the tracing output: the artifact's file stands, only other workspaces miss it.

use std::sync::atomic::{AtomicBool, Ordering};

use super::roster::hostname;
use super::{db_error, retrying, PgStore};
use crate::store::artifacts::{ArtifactCopy, ArtifactKey, SharedArtifact, SHARED_ARTIFACT_BYTES};
use crate::store::BackendError;

pub struct PgArtifacts {
    store: PgStore,
    host: String,
    warned: AtomicBool,
}

impl PgArtifacts {
    pub fn new(store: PgStore) -> Self {
        Self {
            store,
            host: hostname(),
            warned: AtomicBool::new(false),
        }
    }

    async fn insert(&self, key: &ArtifactKey, head: &[u8], bytes: u64) -> Result<(), BackendError> {
        // The bound holds whoever calls (the store already cuts there).
        let head = &head[..head.len().min(SHARED_ARTIFACT_BYTES)];
        let (agent, name) = (key.agent().as_str(), key.name());
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        retrying(|| {
            self.store.bounded(async {
                let client = self.store.client().await?;
                client
                    .execute(
                        "INSERT INTO troupe_artifacts (team, agent, name, bytes, content, host)
                         VALUES ($1, $2, $3, $4, $5, $6)
                         ON CONFLICT (team, agent, name) DO NOTHING",
                        &[&self.store.team(), &agent, &name, &bytes, &head, &self.host],
                    )
                    .await
                    .map_err(|e| db_error("copy an artifact", e))?;
                Ok(())
            })
        })
        .await
    }
}

#[async_trait::async_trait]
impl ArtifactCopy for PgArtifacts {
    fn keeps(&self) -> bool {
        true
    }

    async fn copy(&self, key: &ArtifactKey, head: &[u8], bytes: u64) {
        if let Err(e) = self.insert(key, head, bytes).await {
            if !self.warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "{e}: the team's store misses the artifact {} (it is in this workspace only; \
                     a worker elsewhere cannot read it)",
                    key.relative_path()
                );
            }
        }
    }

    async fn fetch(&self, key: &ArtifactKey) -> Result<Option<SharedArtifact>, BackendError> {
        let (agent, name) = (key.agent().as_str(), key.name());
        retrying(|| {
            self.store.bounded(async {
                let client = self.store.client().await?;
                let row = client
                    .query_opt(
                        "SELECT content, bytes FROM troupe_artifacts
                          WHERE team = $1 AND agent = $2 AND name = $3",
                        &[&self.store.team(), &agent, &name],
                    )
                    .await
                    .map_err(|e| db_error("read an artifact", e))?;
                Ok(row.map(|row| SharedArtifact {
                    head: row.get(0),
                    bytes: u64::try_from(row.get::<_, i64>(1)).unwrap_or(0),
                }))
            })
        })
        .await
    }
}
