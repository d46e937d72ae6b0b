//! The mailbox port's contract (SPEC §3), on both backends.

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::store::mailbox::{
    AckOutcome, MailboxCounts, MailboxEntry, MailboxError, MailboxState, MailboxStore,
};
use troupe::wire::{AgentName, Content, MailboxMessage, MessageId, OrdinaryKind, OrdinaryMessage};

use super::{block_on, both_async, Backend, Stores};
use crate::mailbox::{agent, at};

both_async!(
    claims_are_fifo_by_creation_time_then_id,
    a_duplicate_id_is_refused_in_every_state,
    ack_is_idempotent_and_checks_content,
    release_puts_a_claim_back_and_it_is_claimed_again,
    quarantine_takes_ready_and_claimed_messages_with_their_reason,
    a_dead_claimers_messages_come_back_on_recovery,
    counts_agents_and_listings_follow_the_transitions,
    an_oversized_message_is_refused,
    threads_on_several_instances_claim_each_message_exactly_once,
);

fn id(n: u128) -> MessageId {
    MessageId::from_uuid(uuid::Uuid::from_u128((0x4000 << 64) | (0x8000 << 48) | n)).unwrap()
}

fn message(n: u128, to: &str, offset_ms: i64, text: &str) -> MailboxMessage {
    MailboxMessage::Ordinary(OrdinaryMessage {
        id: id(n),
        sender: AgentName::lead(),
        recipient: agent(to),
        kind: OrdinaryKind::Message,
        content: Content::parse(text).unwrap(),
        created_at_utc: at(offset_ms),
    })
}

async fn claim_all(store: &dyn MailboxStore, who: &str) -> Vec<MailboxMessage> {
    let mut all = Vec::new();
    while let Some(m) = store.claim(&agent(who)).await.unwrap() {
        all.push(m);
    }
    all
}

fn messages(entries: Vec<MailboxEntry>) -> Vec<MessageId> {
    entries
        .into_iter()
        .map(|e| match e {
            MailboxEntry::Message(m) => m.id(),
            MailboxEntry::Invalid { file_name, .. } => panic!("invalid entry {file_name}"),
        })
        .collect()
}

async fn claims_are_fifo_by_creation_time_then_id(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    for (n, offset) in [(5, 30), (9, 10), (2, 20), (7, 10), (1, 40)] {
        store.send(&message(n, "alice", offset, "x")).await.unwrap();
    }
    let order: Vec<MessageId> = claim_all(store.as_ref(), "alice")
        .await
        .iter()
        .map(|m| m.id())
        .collect();
    assert_eq!(order, vec![id(7), id(9), id(2), id(5), id(1)]);
    assert_eq!(store.claim(&agent("alice")).await.unwrap(), None);
}

async fn a_duplicate_id_is_refused_in_every_state(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    let m = message(1, "alice", 0, "first");
    store.send(&m).await.unwrap();
    let again = message(1, "alice", 5, "other text, same id");
    let refused = async |state| {
        let err = store.send(&again).await.unwrap_err();
        assert_eq!(err.code(), "mailbox_duplicate");
        assert!(
            matches!(&err, MailboxError::Duplicate { state: s, .. } if *s == state),
            "{err:?}"
        );
    };
    refused(MailboxState::Ready).await;
    let claimed = store.claim(&agent("alice")).await.unwrap().unwrap();
    refused(MailboxState::Processing).await;
    store.ack(&agent("alice"), &claimed).await.unwrap();
    refused(MailboxState::Done).await;
    let m2 = message(2, "alice", 0, "second");
    store.send(&m2).await.unwrap();
    store
        .quarantine(&agent("alice"), m2.id(), "test")
        .await
        .unwrap();
    let err = store.send(&message(2, "alice", 0, "x")).await.unwrap_err();
    assert!(
        matches!(
            err,
            MailboxError::Duplicate {
                state: MailboxState::Quarantine,
                ..
            }
        ),
        "{err:?}"
    );
    // Nothing was lost or doubled.
    let counts = store.counts(&agent("alice")).await.unwrap();
    assert_eq!((counts.ready, counts.done, counts.quarantine), (0, 1, 1));
}

async fn ack_is_idempotent_and_checks_content(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    let m = message(1, "alice", 0, "work");
    // An ack of a message nobody claimed is refused.
    store.send(&m).await.unwrap();
    let err = store.ack(&agent("alice"), &m).await.unwrap_err();
    assert_eq!(err.code(), "mailbox_not_processing");
    let claimed = store.claim(&agent("alice")).await.unwrap().unwrap();
    assert_eq!(claimed, m);
    assert_eq!(
        store.ack(&agent("alice"), &m).await.unwrap(),
        AckOutcome::Acked
    );
    assert_eq!(
        store.ack(&agent("alice"), &m).await.unwrap(),
        AckOutcome::AlreadyDone
    );
    let other = message(1, "alice", 0, "different content, same id");
    assert_eq!(
        store.ack(&agent("alice"), &other).await.unwrap_err().code(),
        "mailbox_ack_conflict"
    );
    assert_eq!(
        messages(
            store
                .list(&agent("alice"), MailboxState::Done)
                .await
                .unwrap()
        ),
        vec![m.id()]
    );
}

async fn release_puts_a_claim_back_and_it_is_claimed_again(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    store.send(&message(1, "alice", 0, "a")).await.unwrap();
    store.send(&message(2, "alice", 10, "b")).await.unwrap();
    let first = store.claim(&agent("alice")).await.unwrap().unwrap();
    store.release(&agent("alice"), first.id()).await.unwrap();
    // Released, it is the oldest again.
    assert_eq!(
        store.claim(&agent("alice")).await.unwrap().unwrap().id(),
        id(1)
    );
    // Releasing what is not claimed is refused.
    assert_eq!(
        store
            .release(&agent("alice"), id(2))
            .await
            .unwrap_err()
            .code(),
        "mailbox_not_processing"
    );
    assert_eq!(
        store
            .release(&agent("alice"), id(99))
            .await
            .unwrap_err()
            .code(),
        "mailbox_not_processing"
    );
}

async fn quarantine_takes_ready_and_claimed_messages_with_their_reason(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    store.send(&message(1, "alice", 0, "a")).await.unwrap();
    store.send(&message(2, "alice", 10, "b")).await.unwrap();
    let claimed = store.claim(&agent("alice")).await.unwrap().unwrap();
    let record = store
        .quarantine(&agent("alice"), claimed.id(), "bad protocol message")
        .await
        .unwrap();
    assert_eq!(record.from, MailboxState::Processing);
    assert_eq!(record.reason, "bad protocol message");
    let record = store
        .quarantine(&agent("alice"), id(2), "left over")
        .await
        .unwrap();
    assert_eq!(record.from, MailboxState::Ready);
    assert_eq!(
        messages(
            store
                .list(&agent("alice"), MailboxState::Quarantine)
                .await
                .unwrap()
        ),
        vec![id(1), id(2)]
    );
    assert_eq!(store.claim(&agent("alice")).await.unwrap(), None);
    assert_eq!(
        store
            .quarantine(&agent("alice"), id(1), "again")
            .await
            .unwrap_err()
            .code(),
        "mailbox_not_processing"
    );
}

async fn a_dead_claimers_messages_come_back_on_recovery(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    // The claimer dies holding its claim: for PostgreSQL its lease runs out at once.
    let dead = s.mailbox_with_lease(Duration::ZERO);
    dead.send(&message(1, "alice", 0, "a")).await.unwrap();
    dead.send(&message(2, "alice", 10, "b")).await.unwrap();
    let held = dead.claim(&agent("alice")).await.unwrap().unwrap();
    drop(dead);
    let next = s.mailbox();
    let report = next.recover(&agent("alice")).await.unwrap();
    assert_eq!(report.released, vec![held.id()]);
    assert_eq!(
        claim_all(next.as_ref(), "alice")
            .await
            .iter()
            .map(|m| m.id())
            .collect::<Vec<_>>(),
        vec![id(1), id(2)]
    );
}

async fn counts_agents_and_listings_follow_the_transitions(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    for n in 1..=4 {
        store.send(&message(n, "bob", n as i64, "x")).await.unwrap();
    }
    store.send(&message(10, "alice", 0, "y")).await.unwrap();
    let a = store.claim(&agent("bob")).await.unwrap().unwrap();
    store.ack(&agent("bob"), &a).await.unwrap();
    let _b = store.claim(&agent("bob")).await.unwrap().unwrap();
    store.quarantine(&agent("bob"), id(3), "q").await.unwrap();
    assert_eq!(
        store.counts(&agent("bob")).await.unwrap(),
        MailboxCounts {
            ready: 1,
            processing: 1,
            done: 1,
            quarantine: 1
        }
    );
    assert_eq!(
        messages(
            store
                .list(&agent("bob"), MailboxState::Ready)
                .await
                .unwrap()
        ),
        vec![id(4)]
    );
    assert_eq!(
        messages(
            store
                .list(&agent("bob"), MailboxState::Processing)
                .await
                .unwrap()
        ),
        vec![id(2)]
    );
    let agents: Vec<String> = store
        .agents()
        .await
        .unwrap()
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert_eq!(agents, vec!["alice", "bob"]);
    assert_eq!(
        store.counts(&agent("carol")).await.unwrap(),
        MailboxCounts::default()
    );
}

async fn an_oversized_message_is_refused(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    let huge = "x".repeat(1024 * 1024 + 1);
    let err = store
        .send(&message(1, "alice", 0, &huge))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "mailbox_message_too_large");
    assert_eq!(
        store.counts(&agent("alice")).await.unwrap(),
        MailboxCounts::default()
    );
}

async fn threads_on_several_instances_claim_each_message_exactly_once(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    const N: u128 = 200;
    let sender = s.mailbox();
    for n in 0..N {
        sender
            .send(&message(n, "alice", (n % 7) as i64, "job"))
            .await
            .unwrap();
    }
    let instances: Vec<Arc<dyn MailboxStore>> = (0..2).map(|_| s.mailbox()).collect();
    let barrier = Arc::new(Barrier::new(4));
    let acked = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|scope| {
        for t in 0..4 {
            let store = instances[t % 2].clone();
            let barrier = barrier.clone();
            let acked = acked.clone();
            scope.spawn(move || {
                block_on(async move {
                    barrier.wait();
                    while let Some(m) = store.claim(&agent("alice")).await.unwrap() {
                        assert_eq!(
                            store.ack(&agent("alice"), &m).await.unwrap(),
                            AckOutcome::Acked
                        );
                        acked.lock().unwrap().push(m.id());
                    }
                })
            });
        }
    });
    let acked = acked.lock().unwrap().clone();
    let unique: BTreeSet<MessageId> = acked.iter().copied().collect();
    assert_eq!(acked.len(), N as usize, "a message was acked twice");
    assert_eq!(unique.len(), N as usize, "a message was lost");
    assert_eq!(
        sender.counts(&agent("alice")).await.unwrap().done,
        N as usize
    );
}
