//! Hostile and broken files: each ends in quarantine with a recorded reason (or is refused with a
//! clear error), and the valid messages beside it are still delivered.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStringExt;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::error::ErrorCode;
use troupe::ids::IdGenerator;
use troupe::store::mailbox::{MailboxEntry, MailboxError, MailboxState, MailboxStore};
use troupe::wire::{AgentName, MailboxMessage};

use super::{agent, Fixture};

fn json_of(m: &MailboxMessage) -> Value {
    serde_json::from_slice(&m.to_json_bytes()).unwrap()
}

/// Writes `bytes` straight into `alice/ready/` as `name`, the way a foreign writer would.
fn plant(fx: &Fixture, name: &OsString, bytes: &[u8]) {
    let ready = fx.folder("alice", MailboxState::Ready);
    fs::create_dir_all(&ready).unwrap();
    fs::write(ready.join(name), bytes).unwrap();
}

#[tokio::test]
async fn bad_files_in_ready_are_quarantined_and_valid_ones_still_delivered() {
    let fx = Fixture::new();
    let store = fx.store();
    let alice = agent("alice");
    let first = fx.msg("alice", 0);
    let last = fx.msg("alice", 100);
    store.send(&first).await.unwrap();
    store.send(&last).await.unwrap();

    let named = |m: &MailboxMessage| OsString::from(format!("{}.json", m.id()));
    let mut corpus: Vec<(&str, OsString, Vec<u8>, &str)> = Vec::new();
    let m = fx.msg("alice", 1);
    let bytes = m.to_json_bytes();
    corpus.push((
        "truncated JSON",
        named(&m),
        bytes[..bytes.len() - 5].to_vec(),
        "does not parse",
    ));
    let m = fx.msg("alice", 2);
    let mut v = json_of(&m);
    v["priority"] = json!(1);
    corpus.push((
        "extra key",
        named(&m),
        v.to_string().into(),
        "does not parse",
    ));
    let m = fx.msg("alice", 3);
    let mut v = json_of(&m);
    v.as_object_mut().unwrap().remove("created_at_utc");
    corpus.push((
        "missing key",
        named(&m),
        v.to_string().into(),
        "does not parse",
    ));
    let m = fx.msg("bob", 4);
    corpus.push((
        "wrong recipient",
        named(&m),
        m.to_json_bytes(),
        "recipient bob differs from the mailbox alice",
    ));
    let (m, other) = (fx.msg("alice", 5), fx.msg("alice", 5));
    corpus.push((
        "file name differs from id",
        named(&other),
        m.to_json_bytes(),
        "differs from the message id",
    ));
    let m = fx.msg("alice", 6);
    let mut bytes = m.to_json_bytes();
    let at = bytes.iter().position(|b| *b == b'h').unwrap(); // inside "hello"
    bytes[at] = 0xff;
    corpus.push(("non-UTF-8 bytes", named(&m), bytes, "does not parse"));
    let mut raw_name = vec![0xff, 0xfe];
    raw_name.extend_from_slice(b".json");
    corpus.push((
        "non-UTF-8 file name",
        OsString::from_vec(raw_name),
        fx.msg("alice", 7).to_json_bytes(),
        "not valid UTF-8",
    ));
    corpus.push((
        "not a uuid name",
        OsString::from("hello.json"),
        fx.msg("alice", 8).to_json_bytes(),
        "not <message-id>.json",
    ));
    let m = fx.msg("alice", 9);
    corpus.push((
        "upper-case uuid name",
        OsString::from(format!("{}.json", m.id().to_string().to_uppercase())),
        m.to_json_bytes(),
        "not <message-id>.json",
    ));
    let m = fx.msg("alice", 10);
    let mut v = json_of(&m);
    v["recipient"] = json!("../alice");
    corpus.push((
        "recipient with ..",
        named(&m),
        v.to_string().into(),
        "invalid agent name",
    ));
    let m = fx.msg("alice", 11);
    let mut v = json_of(&m);
    v["recipient"] = json!("alice/ready");
    corpus.push((
        "recipient with /",
        named(&m),
        v.to_string().into(),
        "invalid agent name",
    ));

    for (_, name, bytes, _) in &corpus {
        plant(&fx, name, bytes);
    }
    // A huge (sparse) file: quarantined without being read whole.
    let huge_name = OsString::from(format!("{}.json", fx.ids.message_id()));
    let huge = fs::File::create(fx.folder("alice", MailboxState::Ready).join(&huge_name)).unwrap();
    huge.set_len(64 * 1024 * 1024).unwrap();
    // A folder where a message file should be.
    let dir_name = OsString::from(format!("{}.json", fx.ids.message_id()));
    fs::create_dir(fx.folder("alice", MailboxState::Ready).join(&dir_name)).unwrap();

    // Only the two valid messages are delivered, in order.
    assert_eq!(store.claim(&alice).await.unwrap(), Some(first));
    assert_eq!(store.claim(&alice).await.unwrap(), Some(last));
    assert_eq!(store.claim(&alice).await.unwrap(), None);

    let mut expected: BTreeSet<OsString> = corpus.iter().map(|c| c.1.clone()).collect();
    expected.insert(huge_name.clone());
    expected.insert(dir_name.clone());
    assert_eq!(fx.names("alice", MailboxState::Quarantine), expected);
    assert!(fx.names("alice", MailboxState::Ready).is_empty());

    let journal = fx.journal("alice");
    let reason_of = |name: &OsString| -> String {
        let lossy = name.to_string_lossy();
        let line = journal
            .iter()
            .find(|l| l["file_name"] == *lossy)
            .unwrap_or_else(|| panic!("no journal line for {lossy}"));
        assert_eq!(line["from"], "ready");
        line["reason"].as_str().unwrap().to_owned()
    };
    for (label, name, _, why) in &corpus {
        let reason = reason_of(name);
        assert!(reason.contains(why), "{label}: {reason}");
    }
    assert!(reason_of(&huge_name).contains("larger than the 1048576 bytes"));
    assert!(reason_of(&dir_name).contains("not a regular file"));
    assert_eq!(journal.len(), expected.len());

    // The listing of quarantine shows parseable files as messages and the rest with reasons.
    let listed = store.list(&alice, MailboxState::Quarantine).await.unwrap();
    let invalid: Vec<_> = listed
        .iter()
        .filter_map(|e| match e {
            MailboxEntry::Invalid { file_name, reason } => Some((file_name, reason)),
            MailboxEntry::Message(_) => None,
        })
        .collect();
    assert_eq!(listed.len(), expected.len());
    assert!(invalid.iter().all(|(_, reason)| reason.is_some()));
    let truncated = corpus[0].1.to_string_lossy().into_owned();
    let (_, reason) = invalid
        .iter()
        .find(|(name, _)| **name == truncated)
        .unwrap();
    assert!(reason.as_deref().unwrap().contains("does not parse"));
}

#[tokio::test]
async fn a_symlinked_message_file_is_moved_as_a_link_and_never_followed() {
    let fx = Fixture::new();
    let store = fx.store();
    let alice = agent("alice");
    let valid = fx.msg("alice", 5);
    store.send(&valid).await.unwrap();
    // The link points at a perfectly valid message outside the mailbox.
    let outside = fx.dir.path().join("outside.json");
    let target = fx.msg("alice", 0);
    fs::write(&outside, target.to_json_bytes()).unwrap();
    let name = format!("{}.json", target.id());
    std::os::unix::fs::symlink(
        &outside,
        fx.folder("alice", MailboxState::Ready).join(&name),
    )
    .unwrap();
    assert_eq!(store.claim(&alice).await.unwrap(), Some(valid));
    assert_eq!(store.claim(&alice).await.unwrap(), None);
    let moved = fx.folder("alice", MailboxState::Quarantine).join(&name);
    assert!(fs::symlink_metadata(&moved)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read(&outside).unwrap(), target.to_json_bytes());
    assert!(fx.journal("alice")[0]["reason"]
        .as_str()
        .unwrap()
        .contains("symbolic link"));
    // Listing quarantine does not follow it either.
    assert_eq!(
        store.list(&alice, MailboxState::Quarantine).await.unwrap(),
        vec![MailboxEntry::Invalid {
            file_name: name,
            reason: Some("a symbolic link, not a regular file (not followed)".to_owned()),
        }]
    );
}

fn assert_invalid_mailbox<T: std::fmt::Debug>(result: Result<T, MailboxError>) {
    match result {
        Err(e @ MailboxError::InvalidMailbox { .. }) => {
            assert_eq!(e.code(), "mailbox_invalid");
            assert!(e.to_string().contains("symbolic link"), "{e}");
        }
        other => panic!("expected InvalidMailbox, got {other:?}"),
    }
}

#[tokio::test]
async fn a_symlinked_mailbox_folder_is_refused_and_nothing_is_followed() {
    let fx = Fixture::new();
    let elsewhere = fx.dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::create_dir_all(fx.layout.mailboxes_dir()).unwrap();
    std::os::unix::fs::symlink(&elsewhere, fx.layout.mailbox_dir(&agent("alice"))).unwrap();
    let store = fx.store();
    let alice = agent("alice");
    let m = fx.msg("alice", 0);
    assert_invalid_mailbox(store.send(&m).await);
    assert_invalid_mailbox(store.claim(&alice).await);
    assert_invalid_mailbox(store.recover(&alice).await);
    assert_invalid_mailbox(store.list(&alice, MailboxState::Ready).await);
    assert_invalid_mailbox(store.counts(&alice).await);
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[tokio::test]
async fn a_symlinked_ready_folder_is_refused_and_nothing_is_followed() {
    let fx = Fixture::new();
    let elsewhere = fx.dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let victim = fx.msg("alice", 0);
    fs::write(
        elsewhere.join(format!("{}.json", victim.id())),
        victim.to_json_bytes(),
    )
    .unwrap();
    let base = fx.layout.mailbox_dir(&agent("alice"));
    fs::create_dir_all(&base).unwrap();
    std::os::unix::fs::symlink(&elsewhere, base.join("ready")).unwrap();
    let store = fx.store();
    let alice = agent("alice");
    assert_invalid_mailbox(store.claim(&alice).await);
    assert_invalid_mailbox(store.send(&fx.msg("alice", 1)).await);
    assert_invalid_mailbox(store.list(&alice, MailboxState::Ready).await);
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 1);
}

#[tokio::test]
async fn a_symlinked_mailboxes_root_is_refused() {
    let fx = Fixture::new();
    let elsewhere = fx.dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::create_dir_all(fx.layout.state_dir()).unwrap();
    std::os::unix::fs::symlink(&elsewhere, fx.layout.mailboxes_dir()).unwrap();
    let store = fx.store();
    assert_invalid_mailbox(store.send(&fx.msg("alice", 0)).await);
    assert!(store.agents().await.is_err());
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[tokio::test]
async fn names_with_dots_or_slashes_cannot_become_agent_names() {
    for bad in ["..", "../alice", "alice/ready", "/etc", "a/../b", "."] {
        assert!(AgentName::parse(bad).is_err(), "{bad}");
        assert!(serde_json::from_value::<AgentName>(json!(bad)).is_err());
    }
    // A message whose recipient is such a string cannot be parsed, so it cannot be sent; the
    // file planted by hand is quarantined (see the corpus test) — here from processing/ too.
    let fx = Fixture::new();
    let m = fx.msg("alice", 0);
    let mut v = json_of(&m);
    v["recipient"] = json!("../bob");
    assert!(MailboxMessage::from_json_bytes(v.to_string().as_bytes()).is_err());
    let processing = fx.folder("alice", MailboxState::Processing);
    fs::create_dir_all(&processing).unwrap();
    fs::write(processing.join(format!("{}.json", m.id())), v.to_string()).unwrap();
    let report = fx.store().recover(&agent("alice")).await.unwrap();
    assert_eq!(report.quarantined, vec![format!("{}.json", m.id())]);
    assert!(report.released.is_empty());
}

#[tokio::test]
async fn quarantine_never_overwrites_a_file_of_the_same_name() {
    let fx = Fixture::new();
    let store = fx.store();
    let alice = agent("alice");
    let name = OsString::from("broken.json");
    for content in [b"one".as_slice(), b"two", b"three"] {
        plant(&fx, &name, content);
        assert_eq!(store.claim(&alice).await.unwrap(), None);
    }
    let q = fx.folder("alice", MailboxState::Quarantine);
    assert_eq!(fs::read(q.join("broken.json")).unwrap(), b"one");
    assert_eq!(fs::read(q.join("broken.json.1")).unwrap(), b"two");
    assert_eq!(fs::read(q.join("broken.json.2")).unwrap(), b"three");
    let names: Vec<_> = fx
        .journal("alice")
        .iter()
        .map(|l| l["file_name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, vec!["broken.json", "broken.json.1", "broken.json.2"]);
}

#[tokio::test]
async fn a_long_reason_is_truncated_to_keep_the_journal_line_under_4k() {
    let fx = Fixture::new();
    let store = fx.store();
    let alice = agent("alice");
    let m = fx.msg("alice", 0);
    store.send(&m).await.unwrap();
    store.claim(&alice).await.unwrap();
    let record = store
        .quarantine(&alice, m.id(), &"why ".repeat(5000))
        .await
        .unwrap();
    assert_eq!(record.reason.len(), 20_000);
    let text = fs::read_to_string(fx.layout.mailbox_dir(&alice).join("quarantine.jsonl")).unwrap();
    assert!(text.len() < 4096, "{}", text.len());
    assert!(fx.journal("alice")[0]["reason"]
        .as_str()
        .unwrap()
        .ends_with('…'));
}

#[tokio::test]
async fn temp_files_are_ignored_not_quarantined() {
    let fx = Fixture::new();
    let store = fx.store();
    plant(&fx, &OsString::from(".abc.json.tmp-1-2"), b"{");
    assert_eq!(store.claim(&agent("alice")).await.unwrap(), None);
    assert!(fx.names("alice", MailboxState::Quarantine).is_empty());
    assert_eq!(store.counts(&agent("alice")).await.unwrap().ready, 0);
}
