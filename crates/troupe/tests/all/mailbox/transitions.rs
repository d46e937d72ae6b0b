//! Every transition and invariant of SPEC §3.1/§3.2 on one mailbox.

use std::collections::BTreeSet;
use std::fs;
use std::time::{Duration, SystemTime};

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::ids::IdGenerator;
use troupe::store::mailbox::{
    AckOutcome, MailboxCounts, MailboxEntry, MailboxError, MailboxState, MailboxStore,
    RecoveryReport, MAX_MESSAGE_BYTES,
};
use troupe::wire::{
    Content, MailboxMessage, MessageId, ProtocolMessage, ProtocolMessageKind, RequestId,
};

use super::{agent, at, message, Fixture};

fn id(n: u128) -> MessageId {
    MessageId::from_uuid(uuid::Uuid::from_u128((0x4000 << 64) | (0x8000 << 48) | n)).unwrap()
}

async fn claim_all(store: &dyn MailboxStore, who: &str) -> Vec<MailboxMessage> {
    let mut all = Vec::new();
    while let Some(m) = store.claim(&agent(who)).await.unwrap() {
        all.push(m);
    }
    all
}

#[tokio::test]
async fn send_writes_the_canonical_bytes_durably_into_ready() {
    let fx = Fixture::new();
    let store = fx.store();
    let m = fx.msg("alice", 0);
    store.send(&m).await.unwrap();
    let file = fx
        .folder("alice", MailboxState::Ready)
        .join(format!("{}.json", m.id()));
    assert_eq!(fs::read(file).unwrap(), m.to_json_bytes());
    // No temp file is left beside it, and the other folders exist and are empty.
    assert_eq!(fx.names("alice", MailboxState::Ready).len(), 1);
    assert_eq!(
        store.counts(&agent("alice")).await.unwrap(),
        MailboxCounts {
            ready: 1,
            ..MailboxCounts::default()
        }
    );
}

#[tokio::test]
async fn claim_takes_the_oldest_by_created_at_then_id() {
    let fx = Fixture::new();
    let store = fx.store();
    let sent = [
        message(id(5), "alice", at(30), "c"),
        message(id(9), "alice", at(10), "a2"),
        message(id(2), "alice", at(20), "b"),
        message(id(7), "alice", at(10), "a1"),
        message(id(1), "alice", at(40), "d"),
    ];
    for m in &sent {
        store.send(m).await.unwrap();
    }
    let claimed: Vec<MessageId> = claim_all(&store, "alice")
        .await
        .iter()
        .map(|m| m.id())
        .collect();
    assert_eq!(claimed, vec![id(7), id(9), id(2), id(5), id(1)]);
    // A fresh instance (index built by listing the folder) agrees.
    let fx2 = Fixture::new();
    for m in &sent {
        fx2.store().send(m).await.unwrap();
    }
    let claimed: Vec<MessageId> = claim_all(&fx2.store(), "alice")
        .await
        .iter()
        .map(|m| m.id())
        .collect();
    assert_eq!(claimed, vec![id(7), id(9), id(2), id(5), id(1)]);
}

#[tokio::test]
async fn claim_moves_ready_to_processing_and_answers_none_when_empty() {
    let fx = Fixture::new();
    let store = fx.store();
    assert_eq!(store.claim(&agent("alice")).await.unwrap(), None);
    let m = fx.msg("alice", 0);
    store.send(&m).await.unwrap();
    assert_eq!(store.claim(&agent("alice")).await.unwrap(), Some(m.clone()));
    assert_eq!(store.claim(&agent("alice")).await.unwrap(), None);
    assert_eq!(
        fx.ids_in("alice", MailboxState::Processing),
        BTreeSet::from([m.id().to_string()])
    );
    assert!(fx.names("alice", MailboxState::Ready).is_empty());
}

#[tokio::test]
async fn a_duplicate_id_is_refused_in_every_folder() {
    let fx = Fixture::new();
    let store = fx.store();
    let alice = agent("alice");
    let m = fx.msg("alice", 0);
    let twin = message(m.id(), "alice", at(5), "other content");
    let expect_duplicate = async |state: MailboxState| {
        let err = store.send(&twin).await.unwrap_err();
        assert!(
            matches!(&err, MailboxError::Duplicate { state: s, id, .. } if *s == state && *id == m.id()),
            "{state}: {err:?}"
        );
        assert_eq!(err.code(), "mailbox_duplicate");
    };
    store.send(&m).await.unwrap();
    expect_duplicate(MailboxState::Ready).await;
    store.claim(&alice).await.unwrap();
    expect_duplicate(MailboxState::Processing).await;
    store.ack(&alice, &m).await.unwrap();
    expect_duplicate(MailboxState::Done).await;
    let q = fx.msg("alice", 0);
    store.send(&q).await.unwrap();
    store.quarantine(&alice, q.id(), "bad").await.unwrap();
    let q_twin = message(q.id(), "alice", at(1), "x");
    assert!(matches!(
        store.send(&q_twin).await,
        Err(MailboxError::Duplicate {
            state: MailboxState::Quarantine,
            ..
        })
    ));
    // The original bytes are untouched.
    let done = fx
        .folder("alice", MailboxState::Done)
        .join(format!("{}.json", m.id()));
    assert_eq!(fs::read(done).unwrap(), m.to_json_bytes());
}

#[tokio::test]
async fn ack_moves_processing_to_done_and_is_idempotent() {
    let fx = Fixture::new();
    let store = fx.store();
    let alice = agent("alice");
    let m = fx.msg("alice", 0);
    store.send(&m).await.unwrap();
    // Not claimed yet: not processing.
    let err = store.ack(&alice, &m).await.unwrap_err();
    assert!(matches!(err, MailboxError::NotProcessing { .. }), "{err:?}");
    assert_eq!(err.code(), "mailbox_not_processing");
    store.claim(&alice).await.unwrap();
    assert_eq!(store.ack(&alice, &m).await.unwrap(), AckOutcome::Acked);
    assert_eq!(
        store.ack(&alice, &m).await.unwrap(),
        AckOutcome::AlreadyDone
    );
    // A retry from a new instance (after a restart) is still idempotent.
    assert_eq!(
        fx.store().ack(&alice, &m).await.unwrap(),
        AckOutcome::AlreadyDone
    );
    let changed = message(m.id(), "alice", m.created_at_utc(), "different");
    let err = store.ack(&alice, &changed).await.unwrap_err();
    assert!(matches!(err, MailboxError::AckConflict { .. }), "{err:?}");
    assert_eq!(err.code(), "mailbox_ack_conflict");
    let never_sent = fx.msg("alice", 0);
    assert!(matches!(
        store.ack(&alice, &never_sent).await,
        Err(MailboxError::NotProcessing { .. })
    ));
    assert_eq!(
        fx.ids_in("alice", MailboxState::Done),
        BTreeSet::from([m.id().to_string()])
    );
}

#[tokio::test]
async fn release_puts_a_claimed_message_back_in_order() {
    let fx = Fixture::new();
    let store = fx.store();
    let alice = agent("alice");
    let older = fx.msg("alice", 0);
    let newer = fx.msg("alice", 10);
    store.send(&older).await.unwrap();
    store.send(&newer).await.unwrap();
    assert_eq!(store.claim(&alice).await.unwrap(), Some(older.clone()));
    store.release(&alice, older.id()).await.unwrap();
    assert_eq!(fx.names("alice", MailboxState::Processing).len(), 0);
    // The released message is older, so it comes first again.
    assert_eq!(store.claim(&alice).await.unwrap(), Some(older.clone()));
    assert_eq!(store.claim(&alice).await.unwrap(), Some(newer.clone()));
    // Releasing something that is not processing is refused.
    store.ack(&alice, &older).await.unwrap();
    assert!(matches!(
        store.release(&alice, older.id()).await,
        Err(MailboxError::NotProcessing { .. })
    ));
    assert!(matches!(
        store.release(&alice, fx.ids.message_id()).await,
        Err(MailboxError::NotProcessing { .. })
    ));
}

#[tokio::test]
async fn quarantine_moves_from_processing_or_ready_and_records_the_reason() {
    let fx = Fixture::new();
    let store = fx.store();
    let alice = agent("alice");
    let claimed = fx.msg("alice", 0);
    let waiting = fx.msg("alice", 1);
    store.send(&claimed).await.unwrap();
    store.send(&waiting).await.unwrap();
    store.claim(&alice).await.unwrap();
    fx.clock.advance_millis(1500);
    let record = store
        .quarantine(&alice, claimed.id(), "wrong parties")
        .await
        .unwrap();
    assert_eq!(record.file_name, format!("{}.json", claimed.id()));
    assert_eq!(record.from, MailboxState::Processing);
    assert_eq!(record.reason, "wrong parties");
    assert_eq!(record.at.to_string(), "2026-07-30T08:00:01.500Z");
    store
        .quarantine(&alice, waiting.id(), "expired")
        .await
        .unwrap();
    // The quarantined ready message is no longer claimable.
    assert_eq!(store.claim(&alice).await.unwrap(), None);
    let journal = fx.journal("alice");
    assert_eq!(
        journal[0],
        serde_json::json!({"file_name": record.file_name, "from": "processing",
                           "reason": "wrong parties", "at": "2026-07-30T08:00:01.500Z"})
    );
    assert_eq!(journal[1]["from"], "ready");
    assert_eq!(journal[1]["reason"], "expired");
    assert_eq!(
        store.list(&alice, MailboxState::Quarantine).await.unwrap(),
        vec![
            MailboxEntry::Message(claimed.clone()),
            MailboxEntry::Message(waiting.clone())
        ]
    );
    // Neither can be quarantined again or acked.
    assert!(matches!(
        store.quarantine(&alice, claimed.id(), "again").await,
        Err(MailboxError::NotProcessing { .. })
    ));
    assert!(matches!(
        store.ack(&alice, &claimed).await,
        Err(MailboxError::NotProcessing { .. })
    ));
}

#[tokio::test]
async fn recover_moves_processing_back_to_ready_and_quarantines_invalid_files() {
    let fx = Fixture::new();
    let alice = agent("alice");
    let (a, b, c) = (fx.msg("alice", 0), fx.msg("alice", 1), fx.msg("alice", 2));
    {
        let crashed = fx.store();
        for m in [&a, &b, &c] {
            crashed.send(m).await.unwrap();
        }
        crashed.claim(&alice).await.unwrap();
        crashed.claim(&alice).await.unwrap();
    }
    // A broken file left in processing/ by some other writer.
    let junk = fx
        .folder("alice", MailboxState::Processing)
        .join("junk.json");
    fs::write(&junk, b"{").unwrap();
    let store = fx.store();
    let report = store.recover(&alice).await.unwrap();
    assert_eq!(
        report,
        RecoveryReport {
            released: vec![a.id(), b.id()],
            quarantined: vec!["junk.json".to_owned()],
        }
    );
    assert!(fx.names("alice", MailboxState::Processing).is_empty());
    assert_eq!(claim_all(&store, "alice").await, vec![a, b, c]);
    assert_eq!(store.recover(&alice).await.unwrap().released.len(), 3);
    assert_eq!(fx.journal("alice")[0]["from"], "processing");
}

#[tokio::test]
async fn every_sent_message_ends_in_exactly_one_folder() {
    let fx = Fixture::new();
    let store = fx.store();
    let alice = agent("alice");
    let sent: Vec<MailboxMessage> = (0..12).map(|i| fx.msg("alice", i % 4)).collect();
    for m in &sent {
        store.send(m).await.unwrap();
    }
    for i in 0..9 {
        let m = store.claim(&alice).await.unwrap().unwrap();
        match i % 3 {
            0 => assert_eq!(store.ack(&alice, &m).await.unwrap(), AckOutcome::Acked),
            1 => store.release(&alice, m.id()).await.unwrap(),
            _ => {
                store.quarantine(&alice, m.id(), "test").await.unwrap();
            }
        }
    }
    let mut seen = BTreeSet::new();
    let mut total = 0;
    for state in MailboxState::ALL {
        let ids = fx.ids_in("alice", state);
        total += ids.len();
        seen.extend(ids);
    }
    let expected: BTreeSet<String> = sent.iter().map(|m| m.id().to_string()).collect();
    assert_eq!(seen, expected);
    assert_eq!(total, expected.len(), "an id is in two folders");
    let counts = store.counts(&alice).await.unwrap();
    assert_eq!(
        counts.ready + counts.processing + counts.done + counts.quarantine,
        12
    );
}

#[tokio::test]
async fn list_is_oldest_first_and_counts_ignore_temp_files() {
    let fx = Fixture::new();
    let store = fx.store();
    let alice = agent("alice");
    let late = fx.msg("alice", 50);
    let early = fx.msg("alice", 5);
    store.send(&late).await.unwrap();
    store.send(&early).await.unwrap();
    let temp = fx
        .folder("alice", MailboxState::Ready)
        .join(".x.json.tmp-1-1");
    fs::write(&temp, b"partial").unwrap();
    assert_eq!(
        store.list(&alice, MailboxState::Ready).await.unwrap(),
        vec![
            MailboxEntry::Message(early.clone()),
            MailboxEntry::Message(late.clone())
        ]
    );
    assert_eq!(store.counts(&alice).await.unwrap().ready, 2);
    assert_eq!(claim_all(&store, "alice").await, vec![early, late]);
    // The temp file was ignored: neither delivered nor quarantined.
    assert!(temp.exists());
    assert!(fx.names("alice", MailboxState::Quarantine).is_empty());
    // A mailbox that was never created lists empty.
    assert_eq!(
        store
            .list(&agent("nobody"), MailboxState::Done)
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(
        store.counts(&agent("nobody")).await.unwrap(),
        MailboxCounts::default()
    );
}

#[tokio::test]
async fn agents_are_the_slug_named_folders_sorted() {
    let fx = Fixture::new();
    let store = fx.store();
    assert_eq!(store.agents().await.unwrap(), vec![]);
    store.send(&fx.msg("bob", 0)).await.unwrap();
    store.send(&fx.msg("alice", 0)).await.unwrap();
    let root = fx.layout.mailboxes_dir();
    fs::create_dir(root.join("Not_A_Slug")).unwrap();
    fs::create_dir(root.join(".hidden")).unwrap();
    fs::write(root.join("carol"), b"a file, not a folder").unwrap();
    std::os::unix::fs::symlink(root.join("bob"), root.join("dave")).unwrap();
    assert_eq!(
        store.agents().await.unwrap(),
        vec![agent("alice"), agent("bob")]
    );
}

#[tokio::test]
async fn protocol_messages_travel_like_ordinary_ones() {
    let fx = Fixture::new();
    let store = fx.store();
    let envelope = troupe::wire::message::Envelope {
        id: fx.ids.message_id(),
        sender: agent("alice"),
        recipient: agent("lead"),
        content: Content::parse("my plan").unwrap(),
        created_at_utc: at(0),
    };
    let request: MailboxMessage = ProtocolMessage::request(
        envelope,
        ProtocolMessageKind::PlanApprovalRequest,
        RequestId::from_uuid(fx.ids.next_uuid()).unwrap(),
    )
    .unwrap()
    .into();
    store.send(&request).await.unwrap();
    let claimed = store.claim(&agent("lead")).await.unwrap();
    assert_eq!(claimed, Some(request.clone()));
    assert_eq!(
        store.ack(&agent("lead"), &request).await.unwrap(),
        AckOutcome::Acked
    );
}

#[tokio::test]
async fn a_message_larger_than_the_limit_is_refused_on_send() {
    let fx = Fixture::new();
    let store = fx.store();
    let big = message(
        fx.ids.message_id(),
        "alice",
        at(0),
        &"x".repeat(MAX_MESSAGE_BYTES as usize),
    );
    let err = store.send(&big).await.unwrap_err();
    assert!(matches!(err, MailboxError::TooLarge { .. }), "{err:?}");
    assert_eq!(err.code(), "mailbox_message_too_large");
    assert!(fx.names("alice", MailboxState::Ready).is_empty());
}

/// Sets a folder's mtime, so a test does not depend on the clock tick of the filesystem.
fn set_mtime(dir: &std::path::Path, to: SystemTime) {
    fs::File::open(dir).unwrap().set_modified(to).unwrap();
}

#[tokio::test]
async fn claim_does_not_relist_the_folder_while_the_known_backlog_lasts() {
    let fx = Fixture::new();
    let store = fx.store();
    let alice = agent("alice");
    let known: Vec<_> = (1..=3).map(|i| fx.msg("alice", 10 * i)).collect();
    for m in &known {
        store.send(m).await.unwrap();
    }
    assert_eq!(store.claim(&alice).await.unwrap(), Some(known[0].clone()));
    // Another writer adds an older message but the folder's mtime looks unchanged (same tick):
    // the instance does not see it until its known backlog is empty.
    let ready = fx.folder("alice", MailboxState::Ready);
    let mtime = fs::metadata(&ready).unwrap().modified().unwrap();
    let other = fx.msg("alice", 0);
    fs::write(
        ready.join(format!("{}.json", other.id())),
        other.to_json_bytes(),
    )
    .unwrap();
    set_mtime(&ready, mtime);
    assert_eq!(store.claim(&alice).await.unwrap(), Some(known[1].clone()));
    assert_eq!(store.claim(&alice).await.unwrap(), Some(known[2].clone()));
    // Backlog empty: the folder is listed and the other writer's message is found.
    assert_eq!(store.claim(&alice).await.unwrap(), Some(other));
    assert_eq!(store.claim(&alice).await.unwrap(), None);
}

#[tokio::test]
async fn another_instances_message_is_noticed_while_this_instance_has_a_backlog() {
    let fx = Fixture::new();
    let mine = fx.store();
    let theirs = fx.store();
    let alice = agent("alice");
    let backlog: Vec<_> = (1..=3).map(|i| fx.msg("alice", 10 * i)).collect();
    for m in &backlog {
        mine.send(m).await.unwrap();
    }
    assert_eq!(mine.claim(&alice).await.unwrap(), Some(backlog[0].clone()));
    let urgent = fx.msg("alice", 0);
    theirs.send(&urgent).await.unwrap();
    // A visibly changed folder (forced, so the test does not depend on the mtime tick) makes
    // the next claim list it, and the older message comes first.
    set_mtime(
        &fx.folder("alice", MailboxState::Ready),
        SystemTime::UNIX_EPOCH + Duration::from_secs(1),
    );
    assert_eq!(mine.claim(&alice).await.unwrap(), Some(urgent));
    // Without the forced mtime it is still never lost: found at the latest when the backlog
    // is empty.
    let late = fx.msg("alice", 1);
    theirs.send(&late).await.unwrap();
    let rest: BTreeSet<_> = claim_all(&mine, "alice")
        .await
        .iter()
        .map(|m| m.id())
        .collect();
    assert_eq!(
        rest,
        BTreeSet::from([backlog[1].id(), backlog[2].id(), late.id()])
    );
}

#[tokio::test]
async fn a_message_claimed_by_another_instance_is_skipped_not_duplicated() {
    let fx = Fixture::new();
    let a = fx.store();
    let b = fx.store();
    let alice = agent("alice");
    let sent: Vec<_> = (0..4).map(|i| fx.msg("alice", i)).collect();
    for m in &sent {
        a.send(m).await.unwrap();
    }
    // Both instances build their index over the same four files.
    assert_eq!(a.claim(&alice).await.unwrap(), Some(sent[0].clone()));
    assert_eq!(b.claim(&alice).await.unwrap(), Some(sent[1].clone()));
    // a's index still lists sent[1]; its rename fails and it moves on.
    assert_eq!(a.claim(&alice).await.unwrap(), Some(sent[2].clone()));
    assert_eq!(b.claim(&alice).await.unwrap(), Some(sent[3].clone()));
    assert_eq!(a.claim(&alice).await.unwrap(), None);
    assert_eq!(b.claim(&alice).await.unwrap(), None);
}
