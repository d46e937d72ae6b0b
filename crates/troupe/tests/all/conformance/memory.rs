//! The memory records' contract on both backends: a workspace's folder, or a shared team's
//! rows — put, get, list by name, forget, merge, another instance seeing the same, bad names
//! refused; and (PostgreSQL) a row that is not a record reported beside the valid ones.

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::store::memory::MemoryStore;

use super::{both, Backend, Stores};
use crate::memory::record;

both!(records_are_kept_listed_forgotten_and_merged,);

fn names(store: &MemoryStore) -> Vec<String> {
    store
        .list()
        .unwrap()
        .records
        .into_iter()
        .map(|r| r.name)
        .collect()
}

fn records_are_kept_listed_forgotten_and_merged(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.memory();
    assert_eq!(store.list().unwrap().records, vec![]);
    store.put(&record("tabs", "prefers tabs")).unwrap();
    store.put(&record("api-style", "snake case")).unwrap();
    store.put(&record("tabs", "prefers tabs, width 4")).unwrap();
    assert_eq!(names(&store), ["api-style", "tabs"]);
    assert_eq!(
        store.get("tabs").unwrap().unwrap().body,
        "prefers tabs, width 4"
    );
    assert_eq!(store.get("nothing").unwrap(), None);
    assert_eq!(store.get("../x").unwrap_err().code(), "memory_invalid");
    // Another instance (another process of the team) sees the same records.
    let other = s.memory();
    assert_eq!(
        other.get("api-style").unwrap(),
        store.get("api-style").unwrap()
    );
    store
        .apply_merge(
            &["tabs".to_owned(), "api-style".to_owned()],
            &record("style", "tabs (width 4), snake case"),
        )
        .unwrap();
    assert_eq!(names(&other), ["style"]);
    assert!(other.forget("style").unwrap());
    assert!(!other.forget("style").unwrap());
    assert_eq!(names(&store), Vec::<String>::new());
}

/// A row that is not a record is a problem beside the valid records, named; never hiding them.
#[test]
fn a_row_that_is_not_a_record_is_reported_beside_the_others() {
    let Some(s) = Stores::new(Backend::Postgres) else {
        return;
    };
    let store = s.memory();
    store.put(&record("fine", "a good record")).unwrap();
    s.db.as_ref()
        .unwrap()
        .execute(
            "INSERT INTO troupe_memory (team, name, text) VALUES ('team-a', 'broken', 'no front matter')",
        )
        .unwrap();
    let catalog = store.list().unwrap();
    assert_eq!(catalog.records.len(), 1);
    assert_eq!(catalog.problems.len(), 1);
    assert!(
        catalog.problems[0].file.contains("broken"),
        "{:?}",
        catalog.problems
    );
    assert_eq!(store.get("broken").unwrap_err().code(), "memory_malformed");
}
