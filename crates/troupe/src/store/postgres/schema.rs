//! The embedded schema migrations. At start, in one transaction under an advisory lock (so two
//! processes starting at once migrate once): the version table is made if missing, a database
//! whose version is newer than this binary's is refused, and each missing migration is applied
//! and recorded.

use super::{db_error, PgStore};
use crate::store::BackendError;

/// The migrations, in order; a migration is never edited once released, only added after.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("migrations/001_init.sql")),
    (2, include_str!("migrations/002_tasks.sql")),
    (3, include_str!("migrations/003_events.sql")),
    (4, include_str!("migrations/004_usage.sql")),
    (5, include_str!("migrations/005_memory.sql")),
    (6, include_str!("migrations/006_audit.sql")),
    (7, include_str!("migrations/007_documents.sql")),
    (8, include_str!("migrations/008_jobs.sql")),
    (9, include_str!("migrations/009_usage_cache.sql")),
    (10, include_str!("migrations/010_artifacts.sql")),
    (11, include_str!("migrations/011_claim.sql")),
    (12, include_str!("migrations/012_usage_estimated.sql")),
    (13, include_str!("migrations/013_recordings.sql")),
    (14, include_str!("migrations/014_retention.sql")),
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i32 = 14;

/// The advisory lock of migrations (one number for every troupe database).
const MIGRATION_LOCK: i64 = 0x7472_6f75_7065_0001;

pub(super) async fn migrate(store: &PgStore) -> Result<(), BackendError> {
    let mut client = store.client().await?;
    let tx = client
        .transaction()
        .await
        .map_err(|e| db_error("begin the schema migration", e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|e| db_error("lock the schema", e))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS troupe_schema (
             version    integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(|e| db_error("create the schema version table", e))?;
    let current: i32 = tx
        .query_one("SELECT coalesce(max(version), 0) FROM troupe_schema", &[])
        .await
        .map_err(|e| db_error("read the schema version", e))?
        .get(0);
    refuse_newer(store, current)?;
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.batch_execute(sql)
            .await
            .map_err(|e| db_error(&format!("apply schema migration {version}"), e))?;
        tx.execute(
            "INSERT INTO troupe_schema (version) VALUES ($1)",
            &[version],
        )
        .await
        .map_err(|e| db_error("record the schema version", e))?;
    }
    tx.commit()
        .await
        .map_err(|e| db_error("commit the schema migration", e))
}

/// A database whose schema is newer than this binary's is refused: its rows may mean what
/// this troupe does not know.
fn refuse_newer(store: &PgStore, current: i32) -> Result<(), BackendError> {
    if current > SCHEMA_VERSION {
        return Err(BackendError::new(
            "store_schema_newer",
            format!(
                "the database at {} has troupe schema version {current}, newer than this \
                 troupe's {SCHEMA_VERSION}: upgrade troupe (nothing was changed)",
                store.shown()
            ),
        ));
    }
    Ok(())
}

/// Checks, changing nothing, that the database holds troupe's schema at a version this binary
/// reads.
pub(super) async fn check(store: &PgStore) -> Result<(), BackendError> {
    let client = store.client().await?;
    let exists: bool = client
        .query_one("SELECT to_regclass('troupe_schema') IS NOT NULL", &[])
        .await
        .map_err(|e| db_error("look for troupe's schema", e))?
        .get(0);
    if !exists {
        return Err(BackendError::new(
            "store_empty",
            format!(
                "the database at {} holds no troupe team yet (a `troupe run --store` sets it up)",
                store.shown()
            ),
        ));
    }
    let current: i32 = client
        .query_one("SELECT coalesce(max(version), 0) FROM troupe_schema", &[])
        .await
        .map_err(|e| db_error("read the schema version", e))?
        .get(0);
    refuse_newer(store, current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps_up_to_the_version() {
        for (i, (version, _)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*version, i as i32 + 1);
        }
        assert_eq!(MIGRATIONS.last().map(|(v, _)| *v), Some(SCHEMA_VERSION));
    }
}
