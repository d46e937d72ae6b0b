use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::*;
use crate::store::retention::{Policy, Tally, WITHIN_AGE};

const DAY: u64 = 86_400;

fn aged(path: &Path, days: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    if !path.exists() {
        std::fs::write(path, b"{}").unwrap();
    }
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(days * DAY))
        .unwrap();
}

fn sweep(dry_run: bool) -> Sweep {
    Sweep {
        policy: Policy::default(),
        now: utc_of(SystemTime::now()),
        dry_run,
    }
}

fn tree(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in walk(root) {
        out.push(entry.strip_prefix(root).unwrap().display().to_string());
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if std::fs::symlink_metadata(&p).unwrap().is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn run(state: &FileState, sweep: &Sweep) -> Report {
    let mut report = Report::new(sweep.dry_run);
    state.prune_blocking(sweep, &mut report).unwrap();
    report
}

#[test]
fn old_done_messages_go_and_quarantine_is_kept_longer() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    let mailbox = layout.mailboxes_dir().join("alice");
    aged(&mailbox.join("done/old.json"), 40);
    aged(&mailbox.join("done/new.json"), 1);
    aged(&mailbox.join("quarantine/q-40.json"), 40);
    aged(&mailbox.join("quarantine/q-100.json"), 100);
    aged(&mailbox.join("ready/waiting.json"), 400);
    aged(&mailbox.join("processing/claimed.json"), 400);
    let report = run(&FileState::new(layout.clone()), &sweep(false));
    let left = tree(dir.path());
    assert_eq!(
        left,
        vec![
            ".troupe/mailboxes/alice/done/new.json",
            ".troupe/mailboxes/alice/processing/claimed.json",
            ".troupe/mailboxes/alice/quarantine/q-40.json",
            ".troupe/mailboxes/alice/ready/waiting.json",
        ]
    );
    assert_eq!(
        report.kinds[&Kind::Messages].removed,
        Tally { items: 1, bytes: 2 }
    );
    assert_eq!(report.kinds[&Kind::Quarantine].removed.items, 1);
    assert_eq!(report.kinds[&Kind::Quarantine].kept[WITHIN_AGE].items, 1);
}

#[test]
fn a_dry_run_changes_nothing_and_reports_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    aged(&layout.mailboxes_dir().join("bob/done/old.json"), 40);
    aged(&layout.transcripts_dir().join("lead.1.jsonl"), 100);
    aged(&layout.recordings_dir().join("run-1.jsonl"), 40);
    let before = tree(dir.path());
    let dry = run(&FileState::new(layout.clone()), &sweep(true));
    assert_eq!(tree(dir.path()), before);
    let wet = run(&FileState::new(layout), &sweep(false));
    assert_eq!(dry.kinds, wet.kinds);
    assert_eq!(wet.removed_total().items, 3);
}

#[test]
fn the_current_conversation_stays_whatever_its_age() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    let t = layout.transcripts_dir();
    aged(&t.join("lead.jsonl"), 1000);
    aged(&t.join("lead.1.jsonl"), 1000);
    aged(&t.join("lead.2.jsonl"), 1);
    aged(&t.join("alice.jsonl"), 1000);
    let report = run(&FileState::new(layout), &sweep(false));
    assert_eq!(
        tree(dir.path()),
        vec![
            ".troupe/transcripts/alice.jsonl",
            ".troupe/transcripts/lead.2.jsonl",
            ".troupe/transcripts/lead.jsonl",
        ]
    );
    assert_eq!(
        report.kinds[&Kind::Transcripts].kept[needed::CURRENT].items,
        2
    );
}

#[test]
fn a_live_run_keeps_what_it_writes() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    let r = layout.recordings_dir();
    aged(&r.join("live.jsonl"), 0);
    aged(&r.join("old.jsonl"), 40);
    let mut policy = Policy::default();
    policy.set(
        Kind::Recordings,
        crate::store::retention::Rule {
            age: None,
            size: Some(1),
        },
    );
    let s = Sweep {
        policy,
        ..sweep(false)
    };
    let since = utc_of(SystemTime::now() - Duration::from_secs(3600));
    let report = run(&FileState::new(layout).with_live_run(Some(since)), &s);
    assert_eq!(tree(dir.path()), vec![".troupe/recordings/live.jsonl"]);
    assert_eq!(
        report.kinds[&Kind::Recordings].kept[needed::LIVE_RUN].items,
        1
    );
}

#[test]
fn links_fifos_and_temp_files_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    let done = layout.mailboxes_dir().join("eve/done");
    aged(&done.join("old.json"), 40);
    let outside = dir.path().join("precious.txt");
    std::fs::write(&outside, b"keep me").unwrap();
    std::os::unix::fs::symlink(&outside, done.join("link.json")).unwrap();
    aged(&done.join(".tmp-123"), 40);
    nix_mkfifo(&done.join("fifo.json"));
    run(&FileState::new(layout), &sweep(false));
    assert!(outside.exists());
    let mut left = tree(&done);
    left.sort();
    assert_eq!(left, vec![".tmp-123", "fifo.json", "link.json"]);
}

fn nix_mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn earlier_conversations_are_named_with_a_number() {
    for (name, earlier) in [
        ("lead.1.jsonl", true),
        ("lead.12.jsonl", true),
        ("lead.jsonl", false),
        ("lead..jsonl", false),
        ("lead.x.jsonl", false),
        ("lead.1.txt", false),
    ] {
        assert_eq!(
            is_earlier_conversation(&OsString::from(name)),
            earlier,
            "{name}"
        );
    }
}

#[test]
fn a_conversation_s_history_before_its_last_compaction_is_set_aside_and_loads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    let path = layout.transcripts_dir().join("lead.jsonl");
    std::fs::create_dir_all(layout.transcripts_dir()).unwrap();
    let entry = |text: &str| {
        format!(
            "{{\"key\":null,\"message\":{{\"role\":\"user\",\"content\":{}}},\"origin\":\"person\"}}\n",
            serde_json::to_string(text).unwrap()
        )
    };
    let mut text = String::new();
    for n in 0..3000 {
        text.push_str(&entry(&format!("old message {n} {}", "x".repeat(80))));
    }
    text.push_str("{\"compaction\":{\"kind\":\"summary\",\"replaced\":3000}}\n");
    text.push_str(&entry("the summary"));
    text.push_str(&entry("the newest request"));
    std::fs::write(&path, &text).unwrap();

    // Beside a live run nothing is rewritten.
    run(
        &FileState::new(layout.clone()).with_run_live(true),
        &sweep(false),
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);

    run(&FileState::new(layout.clone()), &sweep(false));
    // What a load reads — the last boundary and what follows it — is there byte for byte.
    let boundary = text.rfind("{\"compaction\"").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text[boundary..]);
    let earlier = std::fs::read_to_string(layout.transcripts_dir().join("lead.1.jsonl")).unwrap();
    assert!(earlier.starts_with(&entry(&format!("old message 0 {}", "x".repeat(80)))));
    assert_eq!(
        earlier.len() + std::fs::read(&path).unwrap().len(),
        text.len()
    );
    // A second pass has nothing more to set aside.
    run(&FileState::new(layout.clone()), &sweep(false));
    assert!(!layout.transcripts_dir().join("lead.2.jsonl").exists());

    // A planted earlier conversation with the highest number there is: no number is left for
    // the history, the pass fails clearly, and the current conversation is left whole.
    std::fs::write(&path, &text).unwrap();
    let planted = layout
        .transcripts_dir()
        .join(format!("lead.{}.jsonl", u64::MAX));
    std::fs::write(&planted, b"planted").unwrap();
    let mut report = Report::new(false);
    let err = FileState::new(layout.clone())
        .prune_blocking(&sweep(false), &mut report)
        .unwrap_err();
    assert!(err.to_string().contains("no number is left"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}
