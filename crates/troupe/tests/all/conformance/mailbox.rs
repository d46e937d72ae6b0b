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

use super::{both, Backend, Stores};
use crate::mailbox::{agent, at};

both!(
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

fn claim_all(store: &dyn MailboxStore, who: &str) -> Vec<MailboxMessage> {
    std::iter::from_fn(|| store.claim(&agent(who)).unwrap()).collect()
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

fn claims_are_fifo_by_creation_time_then_id(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    for (n, offset) in [(5, 30), (9, 10), (2, 20), (7, 10), (1, 40)] {
        store.send(&message(n, "alice", offset, "x")).unwrap();
    }
    let order: Vec<MessageId> = claim_all(store.as_ref(), "alice")
        .iter()
        .map(|m| m.id())
        .collect();
    assert_eq!(order, vec![id(7), id(9), id(2), id(5), id(1)]);
    assert_eq!(store.claim(&agent("alice")).unwrap(), None);
}

fn a_duplicate_id_is_refused_in_every_state(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    let m = message(1, "alice", 0, "first");
    store.send(&m).unwrap();
    let again = message(1, "alice", 5, "other text, same id");
    let refused = |state| {
        let err = store.send(&again).unwrap_err();
        assert_eq!(err.code(), "mailbox_duplicate");
        assert!(
            matches!(&err, MailboxError::Duplicate { state: s, .. } if *s == state),
            "{err:?}"
        );
    };
    refused(MailboxState::Ready);
    let claimed = store.claim(&agent("alice")).unwrap().unwrap();
    refused(MailboxState::Processing);
    store.ack(&agent("alice"), &claimed).unwrap();
    refused(MailboxState::Done);
    let m2 = message(2, "alice", 0, "second");
    store.send(&m2).unwrap();
    store.quarantine(&agent("alice"), m2.id(), "test").unwrap();
    let err = store.send(&message(2, "alice", 0, "x")).unwrap_err();
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
    let counts = store.counts(&agent("alice")).unwrap();
    assert_eq!((counts.ready, counts.done, counts.quarantine), (0, 1, 1));
}

fn ack_is_idempotent_and_checks_content(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    let m = message(1, "alice", 0, "work");
    // An ack of a message nobody claimed is refused.
    store.send(&m).unwrap();
    let err = store.ack(&agent("alice"), &m).unwrap_err();
    assert_eq!(err.code(), "mailbox_not_processing");
    let claimed = store.claim(&agent("alice")).unwrap().unwrap();
    assert_eq!(claimed, m);
    assert_eq!(store.ack(&agent("alice"), &m).unwrap(), AckOutcome::Acked);
    assert_eq!(
        store.ack(&agent("alice"), &m).unwrap(),
        AckOutcome::AlreadyDone
    );
    let other = message(1, "alice", 0, "different content, same id");
    assert_eq!(
        store.ack(&agent("alice"), &other).unwrap_err().code(),
        "mailbox_ack_conflict"
    );
    assert_eq!(
        messages(store.list(&agent("alice"), MailboxState::Done).unwrap()),
        vec![m.id()]
    );
}

fn release_puts_a_claim_back_and_it_is_claimed_again(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    store.send(&message(1, "alice", 0, "a")).unwrap();
    store.send(&message(2, "alice", 10, "b")).unwrap();
    let first = store.claim(&agent("alice")).unwrap().unwrap();
    store.release(&agent("alice"), first.id()).unwrap();
    // Released, it is the oldest again.
    assert_eq!(store.claim(&agent("alice")).unwrap().unwrap().id(), id(1));
    // Releasing what is not claimed is refused.
    assert_eq!(
        store.release(&agent("alice"), id(2)).unwrap_err().code(),
        "mailbox_not_processing"
    );
    assert_eq!(
        store.release(&agent("alice"), id(99)).unwrap_err().code(),
        "mailbox_not_processing"
    );
}

fn quarantine_takes_ready_and_claimed_messages_with_their_reason(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    store.send(&message(1, "alice", 0, "a")).unwrap();
    store.send(&message(2, "alice", 10, "b")).unwrap();
    let claimed = store.claim(&agent("alice")).unwrap().unwrap();
    let record = store
        .quarantine(&agent("alice"), claimed.id(), "bad protocol message")
        .unwrap();
    assert_eq!(record.from, MailboxState::Processing);
    assert_eq!(record.reason, "bad protocol message");
    let record = store
        .quarantine(&agent("alice"), id(2), "left over")
        .unwrap();
    assert_eq!(record.from, MailboxState::Ready);
    assert_eq!(
        messages(
            store
                .list(&agent("alice"), MailboxState::Quarantine)
                .unwrap()
        ),
        vec![id(1), id(2)]
    );
    assert_eq!(store.claim(&agent("alice")).unwrap(), None);
    assert_eq!(
        store
            .quarantine(&agent("alice"), id(1), "again")
            .unwrap_err()
            .code(),
        "mailbox_not_processing"
    );
}

fn a_dead_claimers_messages_come_back_on_recovery(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    // The claimer dies holding its claim: for PostgreSQL its lease runs out at once.
    let dead = s.mailbox_with_lease(Duration::ZERO);
    dead.send(&message(1, "alice", 0, "a")).unwrap();
    dead.send(&message(2, "alice", 10, "b")).unwrap();
    let held = dead.claim(&agent("alice")).unwrap().unwrap();
    drop(dead);
    let next = s.mailbox();
    let report = next.recover(&agent("alice")).unwrap();
    assert_eq!(report.released, vec![held.id()]);
    assert_eq!(
        claim_all(next.as_ref(), "alice")
            .iter()
            .map(|m| m.id())
            .collect::<Vec<_>>(),
        vec![id(1), id(2)]
    );
}

fn counts_agents_and_listings_follow_the_transitions(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    for n in 1..=4 {
        store.send(&message(n, "bob", n as i64, "x")).unwrap();
    }
    store.send(&message(10, "alice", 0, "y")).unwrap();
    let a = store.claim(&agent("bob")).unwrap().unwrap();
    store.ack(&agent("bob"), &a).unwrap();
    let _b = store.claim(&agent("bob")).unwrap().unwrap();
    store.quarantine(&agent("bob"), id(3), "q").unwrap();
    assert_eq!(
        store.counts(&agent("bob")).unwrap(),
        MailboxCounts {
            ready: 1,
            processing: 1,
            done: 1,
            quarantine: 1
        }
    );
    assert_eq!(
        messages(store.list(&agent("bob"), MailboxState::Ready).unwrap()),
        vec![id(4)]
    );
    assert_eq!(
        messages(store.list(&agent("bob"), MailboxState::Processing).unwrap()),
        vec![id(2)]
    );
    let agents: Vec<String> = store
        .agents()
        .unwrap()
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert_eq!(agents, vec!["alice", "bob"]);
    assert_eq!(
        store.counts(&agent("carol")).unwrap(),
        MailboxCounts::default()
    );
}

fn an_oversized_message_is_refused(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    let store = s.mailbox();
    let huge = "x".repeat(1024 * 1024 + 1);
    let err = store.send(&message(1, "alice", 0, &huge)).unwrap_err();
    assert_eq!(err.code(), "mailbox_message_too_large");
    assert_eq!(
        store.counts(&agent("alice")).unwrap(),
        MailboxCounts::default()
    );
}

fn threads_on_several_instances_claim_each_message_exactly_once(backend: Backend) {
    let Some(s) = Stores::new(backend) else {
        return;
    };
    const N: u128 = 200;
    let sender = s.mailbox();
    for n in 0..N {
        sender
            .send(&message(n, "alice", (n % 7) as i64, "job"))
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
                barrier.wait();
                while let Some(m) = store.claim(&agent("alice")).unwrap() {
                    assert_eq!(store.ack(&agent("alice"), &m).unwrap(), AckOutcome::Acked);
                    acked.lock().unwrap().push(m.id());
                }
            });
        }
    });
    let acked = acked.lock().unwrap().clone();
    let unique: BTreeSet<MessageId> = acked.iter().copied().collect();
    assert_eq!(acked.len(), N as usize, "a message was acked twice");
    assert_eq!(unique.len(), N as usize, "a message was lost");
    assert_eq!(sender.counts(&agent("alice")).unwrap().done, N as usize);
}
