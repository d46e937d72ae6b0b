//! `PgDocument`: one small whole document of a team in `troupe_documents` (the lead's durable
//! cron jobs are the document `cron`, the text `cron.json` would hold), read whole and changed
//! by one read-modify-write in a transaction under the team's documents lock — the database's
//! counterpart of a file replaced under a lock file. The caller parses and checks the text.

use super::{db_error, locked, Lock, PgStore};
use crate::store::BackendError;

pub use crate::store::document::Change;
use crate::store::document::TeamDocument;
use crate::store::PortError;

#[derive(Clone)]
pub struct PgDocument {
    store: PgStore,
    name: String,
}

impl PgDocument {
    pub fn new(store: PgStore, name: &str) -> Self {
        Self {
            store,
            name: name.to_owned(),
        }
    }

    /// Where it is, for messages.
    pub fn place(&self) -> String {
        format!(
            "troupe_documents {:?} (team {:?})",
            self.name,
            self.store.team()
        )
    }

    pub async fn read(&self) -> Result<Option<String>, BackendError> {
        let (store, name) = (&self.store, &self.name);
        super::retrying(|| async move {
            store
                .bounded(async {
                    let client = store.client().await?;
                    client
                        .query_opt(
                            "SELECT text FROM troupe_documents WHERE team = $1 AND name = $2",
                            &[&store.team(), name],
                        )
                        .await
                        .map(|row| row.map(|r| r.get(0)))
                        .map_err(|e| db_error("read a document", e))
                })
                .await
        })
        .await
    }

    /// Applies `change` to the current text in one locked transaction: `Ok(Err(why))` when the
    /// change refused (nothing written, as when its bytes are not UTF-8).
    pub async fn update(&self, change: Change) -> Result<Result<(), String>, BackendError> {
        let (store, name) = (&self.store, &self.name);
        store
            .bounded(async {
                let mut client = store.client().await?;
                let tx = locked(&mut client, store.team(), Lock::Documents).await?;
                let current: Option<String> = tx
                    .query_opt(
                        "SELECT text FROM troupe_documents WHERE team = $1 AND name = $2",
                        &[&store.team(), name],
                    )
                    .await
                    .map_err(|e| db_error("read a document", e))?
                    .map(|r| r.get(0));
                let text = match change(current.map(String::into_bytes))
                    .and_then(|bytes| String::from_utf8(bytes).map_err(|e| e.to_string()))
                {
                    Ok(text) => text,
                    Err(why) => return Ok(Err(why)),
                };
                tx.execute(
                    "INSERT INTO troupe_documents (team, name, text) VALUES ($1, $2, $3)
                     ON CONFLICT (team, name) DO UPDATE SET text = excluded.text",
                    &[&store.team(), name, &text],
                )
                .await
                .map_err(|e| db_error("write a document", e))?;
                tx.commit()
                    .await
                    .map_err(|e| db_error("commit a document", e))?;
                Ok(Ok(()))
            })
            .await
    }
}

#[async_trait::async_trait]
impl TeamDocument for PgDocument {
    fn place(&self) -> String {
        PgDocument::place(self)
    }

    async fn read(&self) -> Result<Option<Vec<u8>>, PortError> {
        Ok(PgDocument::read(self).await?.map(String::into_bytes))
    }

    async fn update(&self, change: Change) -> Result<Result<(), String>, PortError> {
        Ok(PgDocument::update(self, change).await?)
    }
}
