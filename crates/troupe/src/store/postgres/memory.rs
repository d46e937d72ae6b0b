//! `PgMemory`: a shared team's memory records in `troupe_memory`, one row per record, so that
//! every process of the team — and a teammate taken over by another worker — remembers the
//! same things. The rules (names, the record format, problems reported beside valid records)
//! stay `store::memory`'s; this keeps rows. Every change is one statement, a merge one
//! transaction.

use super::{db_error, PgStore};
use crate::store::memory::{
    record_of_row, MemoryCatalog, MemoryError, MemoryRecord, MemoryRecords,
};
use crate::store::BackendError;

pub struct PgMemory {
    store: PgStore,
}

impl PgMemory {
    pub fn new(store: PgStore) -> Self {
        Self { store }
    }
}

/// The rows, each a record rendered as its file would be, by name. Every method is one atomic
/// step.
impl PgMemory {
    /// Where the rows are, for messages (`troupe_memory (team "default")`).
    pub fn place(&self) -> String {
        format!("troupe_memory (team {:?})", self.store.team())
    }

    pub async fn rows(&self) -> Result<Vec<(String, String)>, BackendError> {
        let store = &self.store;
        super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                client
                    .query(
                        "SELECT name, text FROM troupe_memory WHERE team = $1 ORDER BY name",
                        &[&store.team()],
                    )
                    .await
                    .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
                    .map_err(|e| db_error("read the team's memory", e))
            })
        })
        .await
    }

    pub async fn row(&self, name: &str) -> Result<Option<String>, BackendError> {
        let store = &self.store;
        super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                client
                    .query_opt(
                        "SELECT text FROM troupe_memory WHERE team = $1 AND name = $2",
                        &[&store.team(), &name],
                    )
                    .await
                    .map(|row| row.map(|r| r.get(0)))
                    .map_err(|e| db_error("read a memory record", e))
            })
        })
        .await
    }

    pub async fn put_row(&self, name: &str, text: &str) -> Result<(), BackendError> {
        // An upsert: repeating it after a lost answer writes the same row.
        let store = &self.store;
        super::retrying(|| {
            store.bounded(async {
                let client = store.client().await?;
                client
                    .execute(
                        "INSERT INTO troupe_memory (team, name, text) VALUES ($1, $2, $3)
                         ON CONFLICT (team, name) DO UPDATE SET text = excluded.text",
                        &[&store.team(), &name, &text],
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| db_error("write a memory record", e))
            })
        })
        .await
    }

    pub async fn delete_row(&self, name: &str) -> Result<bool, BackendError> {
        let store = &self.store;
        store
            .bounded(async {
                let client = store.client().await?;
                client
                    .execute(
                        "DELETE FROM troupe_memory WHERE team = $1 AND name = $2",
                        &[&store.team(), &name],
                    )
                    .await
                    .map(|n| n > 0)
                    .map_err(|e| db_error("remove a memory record", e))
            })
            .await
    }

    pub async fn merge_rows(
        &self,
        name: &str,
        text: &str,
        removed: &[String],
    ) -> Result<(), BackendError> {
        // Repeatable: the upsert writes the same row, the removals find what is left.
        let store = &self.store;
        super::retrying(|| {
            store.bounded(async {
                let mut client = store.client().await?;
                let tx = client
                    .transaction()
                    .await
                    .map_err(|e| db_error("begin a memory merge", e))?;
                tx.execute(
                    "INSERT INTO troupe_memory (team, name, text) VALUES ($1, $2, $3)
                     ON CONFLICT (team, name) DO UPDATE SET text = excluded.text",
                    &[&store.team(), &name, &text],
                )
                .await
                .map_err(|e| db_error("write a merged memory record", e))?;
                tx.execute(
                    "DELETE FROM troupe_memory WHERE team = $1 AND name = ANY($2)",
                    &[&store.team(), &removed],
                )
                .await
                .map_err(|e| db_error("remove merged memory records", e))?;
                tx.commit()
                    .await
                    .map_err(|e| db_error("commit a memory merge", e))
            })
        })
        .await
    }
}

#[async_trait::async_trait]
impl MemoryRecords for PgMemory {
    fn place(&self) -> String {
        PgMemory::place(self)
    }

    async fn list(&self) -> Result<MemoryCatalog, MemoryError> {
        let mut catalog = MemoryCatalog::default();
        let place = self.place();
        for (name, text) in self.rows().await? {
            match record_of_row(&place, &name, &text) {
                Ok(record) => catalog.records.push(record),
                Err(problem) => catalog.problems.push(problem),
            }
        }
        catalog.records.sort_by(|a, b| a.name.cmp(&b.name));
        catalog.problems.sort_by(|a, b| a.file.cmp(&b.file));
        Ok(catalog)
    }

    async fn get(&self, name: &str) -> Result<Option<MemoryRecord>, MemoryError> {
        let Some(text) = self.row(name).await? else {
            return Ok(None);
        };
        record_of_row(&self.place(), name, &text)
            .map(Some)
            .map_err(|p| MemoryError::Malformed {
                file: p.file,
                reason: p.reason,
            })
    }

    async fn put(&self, record: &MemoryRecord) -> Result<(), MemoryError> {
        Ok(self.put_row(&record.name, &record.render()).await?)
    }

    async fn forget(&self, name: &str) -> Result<bool, MemoryError> {
        Ok(self.delete_row(name).await?)
    }

    async fn merge(&self, into: &MemoryRecord, removed: &[String]) -> Result<(), MemoryError> {
        Ok(self.merge_rows(&into.name, &into.render(), removed).await?)
    }
}
