//! Racing consumers, answerers and creators: threads on one store, several store instances in
//! one process, and separate processes (this test binary re-executed). Exactly one transition
//! wins; exactly one answer is sent; nothing created is lost.
//!
//! Children start together: each opens its store, prints `@@READY@@`, and waits for a line on
//! stdin, which the parent sends only when every child is ready (no sleeps).

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::thread;

use pretty_assertions::assert_eq;
use troupe::clock::ManualClock;
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::store::mailbox::{
    FileMailboxStore, MailboxEntry, MailboxError, MailboxState, MailboxStore,
};
use troupe::store::protocol::{
    Consumed, DeliverAnswer, Delivery, JsonProtocolStore, ProtocolError, ProtocolStore,
};
use troupe::wire::{MailboxMessage, MessageId, ProtocolMessage, ProtocolRequest, RequestId};

use super::support::*;

const ROLE: &str = "TROUPE_PROTOCOL_TEST_CHILD";
const WORKSPACE: &str = "TROUPE_PROTOCOL_TEST_WORKSPACE";
const REQUEST: &str = "TROUPE_PROTOCOL_TEST_REQUEST";
const INDEX: &str = "TROUPE_PROTOCOL_TEST_INDEX";
const CREATES: &str = "TROUPE_PROTOCOL_TEST_CREATES";

fn race_outcome(results: Vec<Result<Consumed, ProtocolError>>) -> Consumed {
    let codes: Vec<&str> = results.iter().map(code).collect();
    assert_eq!(
        codes.iter().filter(|c| **c == "ok").count(),
        1,
        "exactly one consumer must win: {codes:?}"
    );
    assert!(
        codes
            .iter()
            .all(|c| *c == "ok" || *c == "protocol_state_error"),
        "losers fail with protocol_state_error: {codes:?}"
    );
    let winner = results.into_iter().find_map(Result::ok).unwrap();
    assert!(!winner.replayed);
    winner
}

fn race_threads(
    stores: Vec<Arc<JsonProtocolStore>>,
    request: &ProtocolRequest,
    n: u64,
) -> Consumed {
    let barrier = Arc::new(Barrier::new(n as usize));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let store = stores[i as usize % stores.len()].clone();
            let barrier = barrier.clone();
            let msg = answer(request, mid(i), true);
            thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                barrier.wait();
                runtime.block_on(store.consume_response(&msg))
            })
        })
        .collect();
    race_outcome(handles.into_iter().map(|h| h.join().unwrap()).collect())
}

#[tokio::test]
async fn threads_on_one_store_race_and_one_wins() {
    let fx = Fixture::new();
    let store = Arc::new(fx.store());
    let request = store.create(shutdown_of("alice")).await.unwrap();
    let winner = race_threads(vec![store.clone()], &request, 8);
    assert_eq!(store.get(request.id()).await.unwrap(), Some(winner.request));
}

#[tokio::test]
async fn two_store_instances_race_and_one_wins() {
    let fx = Fixture::new();
    let stores = vec![Arc::new(fx.store()), Arc::new(fx.store())];
    let request = stores[0].create(plan_of("alice")).await.unwrap();
    let winner = race_threads(stores.clone(), &request, 8);
    for store in &stores {
        assert_eq!(
            store.get(request.id()).await.unwrap(),
            Some(winner.request.clone())
        );
    }
}

#[tokio::test]
async fn threads_on_several_instances_create_and_lose_nothing() {
    let fx = Fixture::new();
    let (threads, per_thread) = (4u64, 60u64);
    let barrier = Arc::new(Barrier::new(threads as usize));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            // Two threads per instance; the shared id generator keeps ids distinct.
            let store = Arc::new(fx.store());
            let barrier = barrier.clone();
            thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                barrier.wait();
                runtime.block_on(async {
                    for j in 0..per_thread {
                        let request = store.create(shutdown_of("alice")).await.unwrap();
                        store
                            .consume_response(&answer(
                                &request,
                                mid(t * 1000 + j),
                                j.is_multiple_of(2),
                            ))
                            .await
                            .unwrap();
                    }
                })
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let all = fx.store().list().await.unwrap();
    let unique: HashSet<RequestId> = all.iter().map(|r| r.id()).collect();
    assert_eq!(all.len() as u64, threads * per_thread);
    assert_eq!(unique.len(), all.len());
    assert!(all.iter().all(|r| !r.is_pending()));
}

/// Runs children of this binary with the given environments; returns what each reported.
fn run_children(envs: Vec<Vec<(&'static str, String)>>) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<(Child, BufReader<std::process::ChildStdout>)> = envs
        .into_iter()
        .map(|env| {
            let mut child = Command::new(&exe)
                .args([
                    "protocol::concurrency::child",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .envs(env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let stdout = BufReader::new(child.stdout.take().unwrap());
            (child, stdout)
        })
        .collect();
    for (_, stdout) in &mut children {
        wait_for(stdout, "@@READY@@");
    }
    for (child, _) in &mut children {
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    }
    children
        .into_iter()
        .map(|(mut child, mut stdout)| {
            let result = wait_for(&mut stdout, "@@RESULT@@ ");
            assert!(child.wait().unwrap().success());
            result
        })
        .collect()
}

/// Reads lines until one contains `marker`; returns what follows it.
fn wait_for(stdout: &mut impl BufRead, marker: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "child ended before printing {marker}");
        if let Some(at) = line.find(marker) {
            return line[at + marker.len()..].trim().to_owned();
        }
    }
}

/// The child side. Does nothing unless started by `run_children`.
#[tokio::test]
async fn child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let var = |key: &str| std::env::var(key).unwrap();
    let layout = Layout::new(var(WORKSPACE));
    let index: u16 = var(INDEX).parse().unwrap();
    let store = JsonProtocolStore::open(
        &layout,
        Arc::new(ManualClock::at_spec_epoch()),
        Arc::new(SequentialIds::with_prefix(index + 1)),
    )
    .unwrap();
    println!("@@READY@@");
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let outcome = match role.as_str() {
        "consume" => {
            let id = RequestId::parse(&var(REQUEST)).unwrap();
            let request = store.get(id).await.unwrap().unwrap();
            code(
                &store
                    .consume_response(&answer(&request, mid(u64::from(index)), true))
                    .await,
            )
        }
        "create" => {
            let creates: u64 = var(CREATES).parse().unwrap();
            let base = u64::from(index) * 100_000;
            let mut failed = None;
            for j in 0..creates {
                let round = async {
                    let request = store.create(shutdown_of("alice")).await?;
                    store
                        .consume_response(&answer(&request, mid(base + j), true))
                        .await
                }
                .await;
                if let Err(e) = round {
                    failed = Some(e);
                    break;
                }
            }
            failed.map_or("ok", |e| troupe::error::ErrorCode::code(&e))
        }
        "answer" => {
            let id = RequestId::parse(&var(REQUEST)).unwrap();
            let request = store.get(id).await.unwrap().unwrap();
            let mailbox = FileMailboxStore::new(&layout, Arc::new(ManualClock::at_spec_epoch()));
            let message = answer(&request, mid(u64::from(index)), index.is_multiple_of(2));
            code(&store.answer(&message, &ToMailbox(mailbox)).await)
        }
        other => panic!("unknown child role {other}"),
    };
    println!("@@RESULT@@ {outcome}");
    std::io::stdout().flush().unwrap();
}

#[tokio::test]
async fn processes_race_on_one_request_and_one_wins() {
    let fx = Fixture::new();
    let store = fx.store();
    let request = store.create(shutdown_of("alice")).await.unwrap();
    let workspace = fx.layout.workspace().display().to_string();
    let envs = (0..4)
        .map(|i| {
            vec![
                (ROLE, "consume".to_owned()),
                (WORKSPACE, workspace.clone()),
                (REQUEST, request.id().to_string()),
                (INDEX, i.to_string()),
            ]
        })
        .collect();
    let results = run_children(envs);
    assert_eq!(
        results.iter().filter(|r| *r == "ok").count(),
        1,
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .all(|r| r == "ok" || r == "protocol_state_error"),
        "{results:?}"
    );
    let resolved = store.get(request.id()).await.unwrap().unwrap();
    let winner = results.iter().position(|r| r == "ok").unwrap() as u64;
    assert_eq!(resolved.resolution().unwrap().message_id, mid(winner));
}

#[tokio::test]
async fn processes_race_to_answer_and_exactly_one_answer_is_sent() {
    let fx = Fixture::new();
    let store = fx.store();
    let workspace = fx.layout.workspace().display().to_string();
    let mailbox = FileMailboxStore::new(&fx.layout, Arc::new(fx.clock.clone()));
    for round in 0..3 {
        let request = store.create(plan_of("alice")).await.unwrap();
        let envs = (0..4)
            .map(|i| {
                vec![
                    (ROLE, "answer".to_owned()),
                    (WORKSPACE, workspace.clone()),
                    (REQUEST, request.id().to_string()),
                    (INDEX, (round * 10 + i).to_string()),
                ]
            })
            .collect();
        let results = run_children(envs);
        assert_eq!(
            results.iter().filter(|r| *r == "ok").count(),
            1,
            "round {round}: {results:?}"
        );
        assert!(
            results
                .iter()
                .all(|r| r == "ok" || r == "protocol_state_error"),
            "{results:?}"
        );
        let winner = (round * 10 + results.iter().position(|r| r == "ok").unwrap()) as u64;
        let answers: Vec<MessageId> = mailbox
            .list(&name("alice"), MailboxState::Ready)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                MailboxEntry::Message(MailboxMessage::Protocol(p))
                    if p.request_id() == request.id() =>
                {
                    Some(p.id())
                }
                _ => None,
            })
            .collect();
        assert_eq!(answers, [mid(winner)], "round {round}: one answer exists");
        // Still pending: only the recipient consumes an answer.
        assert!(store.get(request.id()).await.unwrap().unwrap().is_pending());
    }
}

#[tokio::test]
async fn processes_create_concurrently_and_lose_nothing() {
    let fx = Fixture::new();
    let (processes, creates) = (4u64, 50u64);
    let workspace = fx.layout.workspace().display().to_string();
    let envs = (0..processes)
        .map(|i| {
            vec![
                (ROLE, "create".to_owned()),
                (WORKSPACE, workspace.clone()),
                (INDEX, i.to_string()),
                (CREATES, creates.to_string()),
            ]
        })
        .collect();
    let results = run_children(envs);
    assert!(results.iter().all(|r| r == "ok"), "{results:?}");
    let all = fx.store().list().await.unwrap();
    let unique: HashSet<RequestId> = all.iter().map(|r| r.id()).collect();
    assert_eq!(all.len() as u64, processes * creates);
    assert_eq!(unique.len(), all.len());
    assert!(all.iter().all(|r| !r.is_pending()));
}

/// Delivers an answer into a file mailbox, as the protocol runtime does.
struct ToMailbox(FileMailboxStore);

#[async_trait::async_trait]
impl DeliverAnswer for ToMailbox {
    async fn deliver(&self, m: &ProtocolMessage) -> Result<Delivery, String> {
        match self.0.send(&MailboxMessage::Protocol(m.clone())).await {
            Ok(()) => Ok(Delivery::Sent),
            Err(MailboxError::Duplicate { .. }) => Ok(Delivery::AlreadyThere),
            Err(e) => Err(e.to_string()),
        }
    }
}
