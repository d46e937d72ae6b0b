//! The memory records' contract on both backends: a workspace's folder, or a shared team's
//! rows — put, get, list by name, forget, merge, another instance seeing the same, bad names
//! refused; and (PostgreSQL) a row that is not a record reported beside the valid ones.

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::store::memory::MemoryStore;

use super::{both_async, Backend, Stores};
use crate::memory::record;

both_async!(records_are_kept_listed_forgotten_and_merged,);

async fn names(store: &MemoryStore) -> Vec<String> {
    store
        .list()
        .await
        .unwrap()
        .records
        .into_iter()
        .map(|r| r.name)
        .collect()
}

async fn records_are_kept_listed_forgotten_and_merged(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.memory();
    assert_eq!(store.list().await.unwrap().records, vec![]);
    store.put(&record("tabs", "prefers tabs")).await.unwrap();
    store.put(&record("api-style", "snake case")).await.unwrap();
    store
        .put(&record("tabs", "prefers tabs, width 4"))
        .await
        .unwrap();
    assert_eq!(names(&store).await, ["api-style", "tabs"]);
    assert_eq!(
        store.get("tabs").await.unwrap().unwrap().body,
        "prefers tabs, width 4"
    );
    assert_eq!(store.get("nothing").await.unwrap(), None);
    assert_eq!(
        store.get("../x").await.unwrap_err().code(),
        "memory_invalid"
    );
    // Another instance (another process of the team) sees the same records.
    let other = s.memory();
    assert_eq!(
        other.get("api-style").await.unwrap(),
        store.get("api-style").await.unwrap()
    );
    store
        .apply_merge(
            &["tabs".to_owned(), "api-style".to_owned()],
            &record("style", "tabs (width 4), snake case"),
        )
        .await
        .unwrap();
    assert_eq!(names(&other).await, ["style"]);
    assert!(other.forget("style").await.unwrap());
    assert!(!other.forget("style").await.unwrap());
    assert_eq!(names(&store).await, Vec::<String>::new());
}

/// A row that is not a record is a problem beside the valid records, named; never hiding them.
#[tokio::test]
async fn a_row_that_is_not_a_record_is_reported_beside_the_others() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let store = s.memory();
    store.put(&record("fine", "a good record")).await.unwrap();
    s.db.as_ref()
        .unwrap()
        .execute(
            "INSERT INTO troupe_memory (team, name, text) VALUES ('team-a', 'broken', 'no front matter')",
        )
        .unwrap();
    let catalog = store.list().await.unwrap();
    assert_eq!(catalog.records.len(), 1);
    assert_eq!(catalog.problems.len(), 1);
    assert!(
        catalog.problems[0].file.contains("broken"),
        "{:?}",
        catalog.problems
    );
    assert_eq!(
        store.get("broken").await.unwrap_err().code(),
        "memory_malformed"
    );
}
