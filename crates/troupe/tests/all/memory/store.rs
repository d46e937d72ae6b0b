//! The memory folder: atomic writes under the lock, a listing that reports bad entries without
//! hiding the good ones, names checked before any path is built.

use std::fs;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::layout::Layout;
use troupe::store::memory::{MemoryStore, MAX_RECORD_FILE_BYTES};

use super::{mkfifo, record, store};

#[tokio::test]
async fn opening_and_reading_create_nothing() {
    let (dir, store) = store();
    assert_eq!(store.list().await.unwrap().records, vec![]);
    assert_eq!(store.get("missing").await.unwrap(), None);
    assert!(!store.forget("missing").await.unwrap());
    assert!(!dir.path().join(".troupe").exists());
}

#[tokio::test]
async fn put_get_list_forget() {
    let (dir, store) = store();
    let b = record("b-record", "second\n");
    let a = record("a-record", "first\n");
    store.put(&b).await.unwrap();
    store.put(&a).await.unwrap();
    let path = dir.path().join(".troupe/memory/a-record.md");
    assert_eq!(fs::read_to_string(&path).unwrap(), a.render());
    assert_eq!(store.get("a-record").await.unwrap(), Some(a.clone()));
    let catalog = store.list().await.unwrap();
    assert_eq!(catalog.records, vec![a.clone(), b.clone()]);
    assert_eq!(catalog.problems, vec![]);

    let replaced = record("a-record", "replaced\n");
    store.put(&replaced).await.unwrap();
    assert_eq!(store.get("a-record").await.unwrap(), Some(replaced));

    assert!(store.forget("a-record").await.unwrap());
    assert!(!store.forget("a-record").await.unwrap());
    assert_eq!(store.get("a-record").await.unwrap(), None);
    assert_eq!(store.list().await.unwrap().records, vec![b]);
}

#[tokio::test]
async fn names_that_are_not_slugs_are_refused_before_any_path_is_touched() {
    let (dir, store) = store();
    // A valid-looking record one folder up, which `../victim` would name.
    fs::create_dir_all(dir.path().join(".troupe")).unwrap();
    let victim = dir.path().join(".troupe/victim.md");
    fs::write(&victim, record("victim", "").render()).unwrap();
    for name in ["../victim", "a/b", "", "Upper", "x.md"] {
        assert_eq!(
            store.get(name).await.unwrap_err().code(),
            "memory_invalid",
            "{name}"
        );
        assert_eq!(
            store.forget(name).await.unwrap_err().code(),
            "memory_invalid",
            "{name}"
        );
    }
    let mut bad = record("ok", "");
    bad.name = "../victim".to_owned();
    assert_eq!(store.put(&bad).await.unwrap_err().code(), "memory_invalid");
    assert_eq!(
        store
            .apply_merge(&["../victim".to_owned()], &record("ok", ""))
            .await
            .unwrap_err()
            .code(),
        "memory_invalid"
    );
    assert!(victim.exists());
    assert!(
        !dir.path().join(".troupe/memory").exists(),
        "nothing was created"
    );
}

#[tokio::test]
async fn bad_entries_are_listed_as_problems_without_hiding_the_good_ones() {
    let (dir, store) = store();
    store.put(&record("good", "body\n")).await.unwrap();
    let memory = dir.path().join(".troupe/memory");
    let outside = dir.path().join("outside.md");
    fs::write(&outside, record("linked", "").render()).unwrap();
    std::os::unix::fs::symlink(&outside, memory.join("linked.md")).unwrap();
    mkfifo(&memory.join("fifo.md"));
    fs::write(memory.join("malformed.md"), "no front matter\n").unwrap();
    fs::write(memory.join("wrong-name.md"), record("other", "").render()).unwrap();
    fs::write(
        memory.join("huge.md"),
        "x".repeat(MAX_RECORD_FILE_BYTES as usize + 1),
    )
    .unwrap();
    fs::write(memory.join("Bad_Name.md"), record("good", "").render()).unwrap();
    fs::create_dir(memory.join("folder.md")).unwrap();
    // Not records: ignored silently.
    fs::write(memory.join("notes.txt"), "not a record").unwrap();
    fs::write(memory.join(".good.md.tmp-1-0"), "torn").unwrap();

    let catalog = store.list().await.unwrap();
    assert_eq!(catalog.records, vec![record("good", "body\n")]);
    let files: Vec<String> = catalog
        .problems
        .iter()
        .map(|p| p.file.rsplit('/').next().unwrap().to_owned())
        .collect();
    assert_eq!(
        files,
        [
            "Bad_Name.md",
            "fifo.md",
            "folder.md",
            "huge.md",
            "linked.md",
            "malformed.md",
            "wrong-name.md"
        ]
    );
    for problem in &catalog.problems {
        assert!(
            !problem.reason.is_empty() && !problem.reason.contains('\n'),
            "{problem:?}"
        );
    }
    let reason = |file: &str| {
        catalog
            .problems
            .iter()
            .find(|p| p.file.ends_with(file))
            .unwrap()
            .reason
            .clone()
    };
    assert!(reason("fifo.md").contains("FIFO"), "{}", reason("fifo.md"));
    assert!(
        reason("linked.md").contains("symbolic link"),
        "{}",
        reason("linked.md")
    );
    assert!(reason("huge.md").contains("bytes"), "{}", reason("huge.md"));
    // `get` of a bad entry is an error naming it, not a hang or a silent miss.
    assert_eq!(store.get("fifo").await.unwrap_err().code(), "memory_io");
    assert_eq!(store.get("linked").await.unwrap_err().code(), "memory_io");
    assert_eq!(
        store.get("malformed").await.unwrap_err().code(),
        "memory_malformed"
    );
    // A bad entry can be forgotten (the link itself, never its target).
    assert!(store.forget("linked").await.unwrap());
    assert!(outside.exists());
}

#[tokio::test]
async fn a_torn_write_leaves_the_old_record() {
    let (dir, store) = store();
    let old = record("kept", "old body\n");
    store.put(&old).await.unwrap();
    let memory = dir.path().join(".troupe/memory");
    // What a crash in the middle of `durable::replace` leaves: a temp file beside the record,
    // holding part of the new bytes, never renamed into place.
    let new = record("kept", "new body that was being written\n").render();
    fs::write(
        memory.join(format!(".kept.md.tmp-{}-7", std::process::id())),
        &new.as_bytes()[..new.len() / 2],
    )
    .unwrap();
    assert_eq!(store.get("kept").await.unwrap(), Some(old.clone()));
    let catalog = store.list().await.unwrap();
    assert_eq!(catalog.records, vec![old]);
    assert_eq!(catalog.problems, vec![]);
    // The next write goes through whatever was left.
    let next = record("kept", "next\n");
    store.put(&next).await.unwrap();
    assert_eq!(store.get("kept").await.unwrap(), Some(next));
}

#[tokio::test]
async fn a_failed_write_leaves_the_old_records() {
    let (dir, store) = store();
    let old = record("kept", "old\n");
    store.put(&old).await.unwrap();
    // A folder where a record should go makes the replace fail at its rename.
    let memory = dir.path().join(".troupe/memory");
    fs::create_dir(memory.join("blocked.md")).unwrap();
    fs::write(memory.join("blocked.md/x"), "x").unwrap();
    let err = store.put(&record("blocked", "new\n")).await.unwrap_err();
    assert_eq!(err.code(), "memory_io");
    // A merge whose record cannot be written removes nothing.
    let err = store
        .apply_merge(
            &["kept".to_owned(), "other".to_owned()],
            &record("blocked", "m\n"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "memory_io");
    assert_eq!(store.get("kept").await.unwrap(), Some(old));
    let leftovers: Vec<_> = fs::read_dir(&memory)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());
}

#[tokio::test]
async fn a_merge_writes_the_merged_record_then_removes_the_others() {
    let (_dir, store) = store();
    for name in ["tabs", "indent", "editor", "unrelated"] {
        store.put(&record(name, name)).await.unwrap();
    }
    let into = record("editor", "tabs, four wide\n");
    store
        .apply_merge(
            &["tabs".to_owned(), "indent".to_owned(), "editor".to_owned()],
            &into,
        )
        .await
        .unwrap();
    assert_eq!(
        store.list().await.unwrap().records,
        vec![into, record("unrelated", "unrelated")]
    );
}

#[tokio::test]
async fn a_symlinked_memory_folder_is_refused_for_writes() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join(".troupe")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(".troupe/memory")).unwrap();
    let store = MemoryStore::open(&Layout::new(dir.path()));
    assert_eq!(
        store.put(&record("a", "")).await.unwrap_err().code(),
        "memory_io"
    );
    assert_eq!(fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn concurrent_puts_all_land_whole() {
    let (_dir, store) = store();
    let store = Arc::new(store);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    for i in 0..5 {
                        store
                            .put(&record(&format!("t{t}-r{i}"), &format!("{t}/{i}\n")))
                            .await
                            .unwrap();
                        // Every thread also replaces one shared record.
                        store
                            .put(&record("shared", &format!("from {t}\n").repeat(50)))
                            .await
                            .unwrap();
                    }
                })
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let catalog = store.list().await.unwrap();
    assert_eq!(catalog.problems, vec![]);
    assert_eq!(catalog.records.len(), 8 * 5 + 1);
    for t in 0..8 {
        for i in 0..5 {
            let name = format!("t{t}-r{i}");
            assert_eq!(
                store.get(&name).await.unwrap(),
                Some(record(&name, &format!("{t}/{i}\n")))
            );
        }
    }
    let shared = store.get("shared").await.unwrap().unwrap();
    assert!((0..8).any(|t| shared.body == format!("from {t}\n").repeat(50)));
}
