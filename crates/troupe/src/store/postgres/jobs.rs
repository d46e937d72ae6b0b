//! A shared team's background job records (`troupe_jobs`): each process copies every record
//! it writes to its own `.troupe/jobs/` (started, then finished), one upsert each, with the
//! host that runs the job — so `troupe jobs --store` shows every host's jobs. The record text
//! is the file's; `jobs::record` parses and checks it.

use uuid::Uuid;

use super::roster::hostname;
use super::{db_error, PgStore};
use crate::store::team_copy::{JobLine, TeamCopy, TeamJobs};
use crate::store::BackendError;

pub struct PgJobs {
    store: PgStore,
    host: String,
}

impl PgJobs {
    pub fn new(store: PgStore) -> Self {
        Self {
            store,
            host: hostname(),
        }
    }

    /// Creates or replaces the record of job `id` (an upsert: repeating it writes the same).
    pub async fn put(&self, id: Uuid, record: &str) -> Result<(), BackendError> {
        let (store, host) = (&self.store, &self.host);
        super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                client
                    .execute(
                        "INSERT INTO troupe_jobs (team, id, host, record) VALUES ($1, $2, $3, $4)
                         ON CONFLICT (team, id) DO UPDATE
                            SET host = excluded.host, record = excluded.record",
                        &[&store.team(), &id, host, &record],
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| db_error("copy a job record", e))
            })
        })
        .await
    }

    /// Every record of the team: (id, host, record text).
    pub async fn all(&self) -> Result<Vec<(Uuid, String, String)>, BackendError> {
        let store = &self.store;
        super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                client
                    .query(
                        "SELECT id, host, record FROM troupe_jobs WHERE team = $1",
                        &[&store.team()],
                    )
                    .await
                    .map(|rows| {
                        rows.iter()
                            .map(|r| (r.get(0), r.get(1), r.get(2)))
                            .collect()
                    })
                    .map_err(|e| db_error("read the team's job records", e))
            })
        })
        .await
    }
}

#[async_trait::async_trait]
impl TeamCopy<JobLine> for PgJobs {
    async fn copy(&self, record: &JobLine) -> Result<(), BackendError> {
        self.put(record.id, &record.record).await
    }
}

#[async_trait::async_trait]
impl TeamJobs for PgJobs {
    async fn all(&self) -> Result<Vec<(Uuid, String, String)>, BackendError> {
        PgJobs::all(self).await
    }
}
