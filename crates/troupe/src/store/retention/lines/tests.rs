use std::time::Duration;

use troupe_wire::UtcTime;

use super::prune;
use crate::store::journal::{append_replaceable, Durability};
use crate::store::retention::{Kind, Policy, Report, Rule, Sweep, WITHIN_AGE};

const DAY_MS: i64 = 24 * 3600 * 1000;
const NOW_MS: i64 = 1_800_000_000_000;

fn line(days_ago: i64, n: u32) -> String {
    let at = UtcTime::from_unix_millis(NOW_MS - days_ago * DAY_MS).unwrap();
    format!("{{\"at\":\"{at}\",\"agent\":\"lead\",\"tool\":\"shell\",\"n\":{n}}}\n")
}

fn sweep(dry_run: bool) -> Sweep {
    let mut policy = Policy::default();
    policy.set(
        Kind::Audit,
        Rule {
            age: Some(Duration::from_secs(30 * 24 * 3600)),
            size: None,
        },
    );
    Sweep {
        policy,
        now: UtcTime::from_unix_millis(NOW_MS).unwrap(),
        dry_run,
    }
}

#[test]
fn lines_past_the_age_go_and_the_rest_stay_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let text = [
        line(40, 1),
        line(35, 2),
        "not json\n".to_owned(),
        line(10, 3),
        line(0, 4),
    ]
    .concat();
    std::fs::write(&path, format!("{text}{{\"at\":\"torn")).unwrap();

    let mut dry = Report::new(true);
    prune(&path, Kind::Audit, &sweep(true), &mut dry).unwrap();
    assert_eq!(dry.kinds[&Kind::Audit].removed.items, 2);
    assert!(
        std::fs::read_to_string(&path).unwrap().ends_with("torn"),
        "a dry run changed the log"
    );

    let mut report = Report::new(false);
    prune(&path, Kind::Audit, &sweep(false), &mut report).unwrap();
    let audit = &report.kinds[&Kind::Audit];
    assert_eq!(audit.removed.items, 2);
    assert_eq!(
        audit.removed.bytes,
        (line(40, 1).len() + line(35, 2).len()) as u64
    );
    // The unreadable line is kept as new; the torn tail is gone.
    assert_eq!(audit.kept[WITHIN_AGE].items, 3);
    let left = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        left,
        ["not json\n".to_owned(), line(10, 3), line(0, 4)].concat()
    );

    // An append after the replace lands in the new log.
    append_replaceable(&path, line(0, 5).as_bytes(), Durability::Unsynced).unwrap();
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .ends_with(&line(0, 5)));
}

#[test]
fn an_append_waits_for_the_replace_and_lands_in_the_new_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    std::fs::write(&path, [line(40, 1), line(0, 2)].concat()).unwrap();
    // Hold the sidecar lock as gc does from its read to its replace, and start an append.
    let held =
        crate::store::lock::lock_exclusive(&crate::store::journal::replace_lock(&path)).unwrap();
    let appender = {
        let path = path.clone();
        std::thread::spawn(move || {
            append_replaceable(&path, line(0, 3).as_bytes(), Durability::Unsynced).unwrap()
        })
    };
    // Wait until the kernel lists the appender as waiting for the sidecar lock.
    let inode = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(crate::store::journal::replace_lock(&path))
            .unwrap()
            .ino()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !waiting_for(inode) {
        assert!(
            std::time::Instant::now() < deadline,
            "the append never waited"
        );
        std::thread::yield_now();
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        [line(40, 1), line(0, 2)].concat(),
        "the append did not wait for the lock"
    );
    // Replace the log while the appender waits (what `prune` does under the lock).
    let mut staged = crate::store::durable::StagedFile::create(&path).unwrap();
    staged.write_all(line(0, 2).as_bytes()).unwrap();
    staged.place(&path).unwrap();
    drop(held);
    appender.join().unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        [line(0, 2), line(0, 3)].concat(),
        "the append landed in the replaced log"
    );
}

/// Whether `/proc/locks` lists a waiter (`->`) for a lock on the file with inode `inode`.
fn waiting_for(inode: u64) -> bool {
    let locks = std::fs::read_to_string("/proc/locks").unwrap();
    locks.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(1) == Some(&"->")
            && fields
                .get(6)
                .is_some_and(|dev_inode| dev_inode.ends_with(&format!(":{inode}")))
    })
}
