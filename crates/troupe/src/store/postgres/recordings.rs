//! A shared team's run recordings (`troupe_recordings`): each lead process copies every line it
//! writes to its own `.troupe/recordings/<run>.jsonl` (a [`TeamCopy`]), one insert each, so that
//! `troupe replay --store` finds the team's runs from any host.

use super::roster::hostname;
use super::{db_error, PgStore};
use crate::store::recordings::{RecordingLine, Recordings};
use crate::store::team_copy::TeamCopy;
use crate::store::BackendError;

pub struct PgRecordings {
    store: PgStore,
    host: String,
}

impl PgRecordings {
    pub fn new(store: PgStore) -> Self {
        Self {
            store,
            host: hostname(),
        }
    }
}

#[async_trait::async_trait]
impl TeamCopy<RecordingLine> for PgRecordings {
    async fn copy(&self, record: &RecordingLine) -> Result<(), BackendError> {
        let (store, host) = (&self.store, &self.host);
        let line_no = i64::try_from(record.line_no).unwrap_or(i64::MAX);
        super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                client
                    .execute(
                        "INSERT INTO troupe_recordings (team, run_id, line_no, host, line)
                         VALUES ($1, $2, $3, $4, $5)
                         ON CONFLICT (team, run_id, line_no) DO NOTHING",
                        &[&store.team(), &record.run, &line_no, host, &record.line],
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| db_error("copy a recording line", e))
            })
        })
        .await
    }
}

#[async_trait::async_trait]
impl Recordings for PgRecordings {
    async fn runs(&self) -> Result<Vec<String>, BackendError> {
        let store = &self.store;
        super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                client
                    .query(
                        "SELECT run_id FROM troupe_recordings WHERE team = $1 AND line_no = 0
                         ORDER BY at, run_id",
                        &[&store.team()],
                    )
                    .await
                    .map(|rows| rows.iter().map(|row| row.get::<_, String>(0)).collect())
                    .map_err(|e| db_error("list the recordings", e))
            })
        })
        .await
    }

    async fn text(&self, run: &str) -> Result<Option<String>, BackendError> {
        let store = &self.store;
        let lines: Vec<String> = super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                client
                    .query(
                        "SELECT line FROM troupe_recordings WHERE team = $1 AND run_id = $2
                         ORDER BY line_no",
                        &[&store.team(), &run],
                    )
                    .await
                    .map(|rows| rows.iter().map(|row| row.get::<_, String>(0)).collect())
                    .map_err(|e| db_error("read a recording", e))
            })
        })
        .await?;
        Ok((!lines.is_empty()).then(|| {
            let mut text = lines.join("\n");
            text.push('\n');
            text
        }))
    }
}
