//! Concurrency with real threads and real processes: every message is claimed exactly once and
//! ends in `done/` exactly once.
//!
//! The process tests re-execute this test binary, running one of the `child_*` tests below with
//! `TROUPE_MAILBOX_CHILD` telling it what to do; without that variable the child tests return at
//! once.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use troupe::clock::SystemClock;
use troupe::ids::{IdGenerator, SequentialIds};
use troupe::layout::Layout;
use troupe::store::mailbox::{AckOutcome, FileMailboxStore, MailboxState, MailboxStore};
use troupe::wire::MessageId;

use super::{agent, at, block_on, message, Fixture};

const CHILD_ENV: &str = "TROUPE_MAILBOX_CHILD";
/// A lost message would make a drain loop wait forever; fail loudly instead.
const DEADLINE: Duration = Duration::from_secs(120);

fn store_at(workspace: &Path) -> FileMailboxStore {
    FileMailboxStore::new(&Layout::new(workspace), Arc::new(SystemClock))
}

/// Claims and acks until the mailbox is empty; returns the ids claimed.
async fn drain(store: &dyn MailboxStore, who: &str) -> Vec<MessageId> {
    let mut claimed = Vec::new();
    while let Some(m) = store.claim(&agent(who)).await.unwrap() {
        assert_eq!(store.ack(&agent(who), &m).await.unwrap(), AckOutcome::Acked);
        claimed.push(m.id());
    }
    claimed
}

async fn send_many(fx: &Fixture, store: &dyn MailboxStore, n: usize) -> BTreeSet<MessageId> {
    let mut sent = BTreeSet::new();
    for i in 0..n {
        let m = fx.msg("alice", (i % 7) as i64);
        store.send(&m).await.unwrap();
        sent.insert(m.id());
    }
    sent
}

/// Every id claimed exactly once, all of them in `done/`, nothing anywhere else.
fn assert_each_once(fx: &Fixture, claimed: Vec<MessageId>, sent: &BTreeSet<MessageId>) {
    let unique: BTreeSet<MessageId> = claimed.iter().copied().collect();
    assert_eq!(unique.len(), claimed.len(), "a message was claimed twice");
    assert_eq!(&unique, sent);
    let done: BTreeSet<String> = sent.iter().map(|id| id.to_string()).collect();
    assert_eq!(fx.ids_in("alice", MailboxState::Done), done);
    for state in [
        MailboxState::Ready,
        MailboxState::Processing,
        MailboxState::Quarantine,
    ] {
        assert!(fx.names("alice", state).is_empty(), "{state} not empty");
    }
}

#[test]
fn threads_sharing_one_instance_claim_each_message_once() {
    let fx = Fixture::new();
    let store = Arc::new(fx.store());
    let sent = block_on(send_many(&fx, store.as_ref(), 200));
    let barrier = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                block_on(drain(store.as_ref(), "alice"))
            })
        })
        .collect();
    let claimed = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_each_once(&fx, claimed, &sent);
}

#[test]
fn threads_with_their_own_instances_claim_each_message_once() {
    let fx = Fixture::new();
    let sent = block_on(send_many(&fx, &fx.store(), 200));
    let barrier = Arc::new(Barrier::new(4));
    let workspace = fx.dir.path().to_path_buf();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (workspace, barrier) = (workspace.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let store = store_at(&workspace);
                barrier.wait();
                block_on(drain(&store, "alice"))
            })
        })
        .collect();
    let claimed = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_each_once(&fx, claimed, &sent);
}

#[test]
fn senders_and_claimers_at_once_lose_and_duplicate_nothing() {
    let fx = Fixture::new();
    let shared = Arc::new(fx.store());
    let ids = Arc::new(SequentialIds::with_prefix(7));
    let per_sender = 80;
    let senders = 3;
    let total = per_sender * senders;
    let claimed = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let workspace = fx.dir.path().to_path_buf();
    let mut handles = Vec::new();
    for s in 0..senders {
        // One sender shares the claimers' instance, the others use their own.
        let store: Arc<dyn MailboxStore> = if s == 0 {
            shared.clone()
        } else {
            Arc::new(store_at(&workspace))
        };
        let ids = Arc::clone(&ids);
        handles.push(std::thread::spawn(move || {
            block_on(async {
                for i in 0..per_sender {
                    let m = message(ids.message_id(), "alice", at((i % 5) as i64), "work");
                    store.send(&m).await.unwrap();
                }
            })
        }));
    }
    for c in 0..3 {
        let store: Arc<dyn MailboxStore> = if c == 0 {
            shared.clone()
        } else {
            Arc::new(store_at(&workspace))
        };
        let (claimed, count) = (Arc::clone(&claimed), Arc::clone(&count));
        handles.push(std::thread::spawn(move || {
            block_on(async {
                let start = Instant::now();
                while count.load(Ordering::SeqCst) < total {
                    assert!(start.elapsed() < DEADLINE, "messages went missing");
                    match store.claim(&agent("alice")).await.unwrap() {
                        Some(m) => {
                            store.ack(&agent("alice"), &m).await.unwrap();
                            claimed.lock().unwrap().push(m.id());
                            count.fetch_add(1, Ordering::SeqCst);
                        }
                        None => std::thread::yield_now(),
                    }
                }
            })
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let sent: BTreeSet<MessageId> = (1..=total as u64)
        .map(|n| {
            let value = (0x4000u128 << 64) | (0x8000u128 << 48) | (7u128 << 32) | u128::from(n);
            MessageId::from_uuid(uuid::Uuid::from_u128(value)).unwrap()
        })
        .collect();
    let claimed = std::mem::take(&mut *claimed.lock().unwrap());
    assert_each_once(&fx, claimed, &sent);
}

/// Runs `child` (a test of this module) in a new process of this binary.
fn spawn_child(child: &str, task: String) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            &format!("mailbox::concurrency::{child}"),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, task)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The ids a child printed as `CLAIMED <id>`; fails the test if the child failed.
fn wait_child(child: std::process::Child) -> Vec<MessageId> {
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "child failed: {:?}", output.status);
    BufReader::new(&output.stdout[..])
        .lines()
        .map_while(Result::ok)
        // The harness prints `test <name> ... ` without a newline before the first of them.
        .filter_map(|l| {
            l.split_once("CLAIMED ")
                .map(|(_, id)| MessageId::parse(id.trim()).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn processes_send_while_the_parent_claims_and_acks() {
    let fx = Fixture::new();
    let store = fx.store();
    let (children, per_child) = (3u16, 60usize);
    let workspace = fx.dir.path().display().to_string();
    let mut kids: Vec<_> = (1..=children)
        .map(|k| spawn_child("child_sender", format!("send|{workspace}|{k}|{per_child}")))
        .collect();
    let total = usize::from(children) * per_child;
    let mut claimed = Vec::new();
    let start = Instant::now();
    while claimed.len() < total {
        assert!(start.elapsed() < DEADLINE, "messages went missing");
        match store.claim(&agent("alice")).await.unwrap() {
            Some(m) => {
                assert_eq!(
                    store.ack(&agent("alice"), &m).await.unwrap(),
                    AckOutcome::Acked
                );
                claimed.push(m.id());
            }
            None => {
                for kid in &mut kids {
                    if let Some(status) = kid.try_wait().unwrap() {
                        assert!(status.success(), "a sender child failed: {status:?}");
                    }
                }
                std::thread::yield_now();
            }
        }
    }
    for kid in kids {
        wait_child(kid);
    }
    assert_eq!(store.claim(&agent("alice")).await.unwrap(), None);
    let sent: BTreeSet<MessageId> = (1..=children)
        .flat_map(|k| {
            let ids = SequentialIds::with_prefix(k);
            (0..per_child).map(move |_| ids.message_id())
        })
        .collect();
    assert_each_once(&fx, claimed, &sent);
}

#[tokio::test]
async fn processes_claiming_at_once_never_claim_a_message_twice() {
    let fx = Fixture::new();
    let sent = send_many(&fx, &fx.store(), 300).await;
    let workspace = fx.dir.path().display().to_string();
    let kids: Vec<_> = (0..2)
        .map(|_| spawn_child("child_claimer", format!("claim|{workspace}")))
        .collect();
    // The parent claims too, so three processes race on the same files.
    let mut claimed = drain(&fx.store(), "alice").await;
    for kid in kids {
        claimed.extend(wait_child(kid));
    }
    assert_each_once(&fx, claimed, &sent);
}

/// Child: `send|<workspace>|<id prefix>|<count>` sends `count` messages to alice.
#[tokio::test]
async fn child_sender() {
    let Ok(task) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = task.split('|').collect();
    if parts[0] != "send" {
        return;
    }
    let store = store_at(Path::new(parts[1]));
    let ids = SequentialIds::with_prefix(parts[2].parse().unwrap());
    let count: usize = parts[3].parse().unwrap();
    for i in 0..count {
        let m = message(
            ids.message_id(),
            "alice",
            at((i % 3) as i64),
            "from a child",
        );
        store.send(&m).await.unwrap();
    }
}

/// Child: `claim|<workspace>` claims and acks alice's messages until none is left, printing
/// `CLAIMED <id>` for each.
#[tokio::test]
async fn child_claimer() {
    let Ok(task) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = task.split('|').collect();
    if parts[0] != "claim" {
        return;
    }
    let store = store_at(Path::new(parts[1]));
    for id in drain(&store, "alice").await {
        println!("CLAIMED {id}");
    }
}

/// A second `send` of a message while a claimer moves it (`ready/` → `processing/` → `done/`)
/// is refused as a duplicate, never written again: the checks follow the message's way through
/// the folders. (A protocol answer finished by a losing reviewer relies on this while the
/// running team consumes the winner's message.)
#[test]
fn a_resend_while_the_message_moves_is_a_duplicate() {
    let fx = Fixture::new();
    let workspace = fx.dir.path().to_path_buf();
    for round in 0..400 {
        let m = fx.msg("alice", 0);
        let sender = store_at(&workspace);
        block_on(sender.send(&m)).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let claimer = {
            let (workspace, barrier) = (workspace.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let store = store_at(&workspace);
                barrier.wait();
                block_on(async {
                    let claimed = store.claim(&agent("alice")).await.unwrap();
                    if let Some(m) = &claimed {
                        // A second copy (the bug) makes this ack conflict; the send says why.
                        let _ = store.ack(&agent("alice"), m).await;
                    }
                    claimed.map(|m| m.id())
                })
            })
        };
        barrier.wait();
        let again = block_on(sender.send(&m));
        let claimed = claimer.join().unwrap();
        assert!(
            matches!(
                again,
                Err(troupe::store::mailbox::MailboxError::Duplicate { .. })
            ),
            "round {round}: {again:?}, claimed {claimed:?}"
        );
        assert!(
            fx.names("alice", MailboxState::Ready).is_empty(),
            "round {round}"
        );
    }
}
