//! Durable agent memory (SPEC §9): the record files and their store, and the model's queries on
//! them through the scripted model's side queues.

mod queries;
mod records;
mod store;

use troupe::layout::Layout;
use troupe::store::memory::{MemoryRecord, MemoryStore, MemoryType};

/// A valid record named `name`.
pub fn record(name: &str, body: &str) -> MemoryRecord {
    MemoryRecord::new(
        name,
        MemoryType::Project,
        format!("what {name} is about"),
        body,
    )
    .unwrap()
}

/// A store in a fresh workspace (the folder keeps it alive).
pub fn store() -> (tempfile::TempDir, MemoryStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::open(&Layout::new(dir.path()));
    (dir, store)
}

pub fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}
