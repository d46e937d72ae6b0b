//! Ids a person types, and reviews racing as real processes.
//!
//! - Short ids: two requests made in the same millisecond (UUIDv7 ids alike but for their random
//!   part) have distinct short ids, shown by `troupe requests`; `troupe approve` and `troupe
//!   review` accept each short id (and the full id), and refuse an ambiguous part naming the
//!   candidates.
//! - Two `troupe review` processes racing on one pending plan, repeated, while this process
//!   consumes the teammate's mailbox as a running team does: the winner answers, the loser prints
//!   exactly one line (no warning about "finishing" the winner's delivery, which it would print
//!   — and deliver a second copy — when it missed the winner's message being claimed) and the
//!   plan is answered once.

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use troupe::clock::SystemClock;
use troupe::layout::Layout;
use troupe::store::mailbox::{FileMailboxStore, MailboxStore};
use troupe::wire::{AgentName, TeammateStatus};

use std::sync::Mutex;
use std::time::Duration;

use troupe::approvals::PermissionAsk;
use troupe::ids::IdGenerator;
use troupe::store::protocol::{JsonProtocolStore, NewRequest, ProtocolStore};
use troupe::wire::{Content, RequestId, RequestKind};

use super::review::{answers_to_writer, workspace_with_plans};
use super::support::{assert_fails, command, ran, troupe_in};

/// Request ids handed out in order.
struct FixedIds(Mutex<Vec<&'static str>>);

impl IdGenerator for FixedIds {
    fn next_uuid(&self) -> uuid::Uuid {
        uuid::Uuid::parse_str(self.0.lock().unwrap().remove(0)).unwrap()
    }
}

/// UUIDv7 ids of one millisecond: the 8 characters people used to see are the same.
const SAME_MS: [&str; 4] = [
    "019a1b2c-3d4e-7f01-8a2b-4c5d6e7f8091",
    "019a1b2c-3d4e-7f01-9b3c-5d6e7f8091a2",
    "019a1b2c-3d4e-7a02-a4c5-d6e7f8091a2b",
    "019a1b2c-3d4e-7a02-b5d6-e7f8091a2b3c",
];

#[tokio::test]
async fn requests_of_one_millisecond_have_short_ids_a_person_can_type() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let store = JsonProtocolStore::open(
        &Layout::new(&ws),
        Arc::new(SystemClock),
        Arc::new(FixedIds(Mutex::new(SAME_MS.to_vec()))),
    )
    .unwrap();
    let ask = PermissionAsk::new(
        "shell",
        troupe::permissions::effect::Effect::Execute,
        &serde_json::json!({"command": "cargo test"}),
        None,
        "asked",
        None,
        None,
    )
    .to_content();
    let mut ids = Vec::new();
    for kind in [
        RequestKind::Permission,
        RequestKind::Permission,
        RequestKind::PlanApproval,
        RequestKind::PlanApproval,
    ] {
        let (sender, target, content) = match kind {
            RequestKind::Permission => ("lead", AgentName::user(), ask.as_str()),
            _ => ("writer", AgentName::lead(), "Write NOTES.md."),
        };
        let request = store
            .create(NewRequest {
                kind,
                sender: AgentName::parse(sender).unwrap(),
                target,
                content: Content::parse(content).unwrap(),
                ttl: Duration::from_secs(3600),
            })
            .await
            .unwrap();
        ids.push(request.id());
    }
    super::review::set_status(&ws, TeammateStatus::Idle);
    let shorts: Vec<String> = ids.iter().map(RequestId::short).collect();
    assert_eq!(shorts, ["6e7f8091", "7f8091a2", "f8091a2b", "091a2b3c"]);

    let listed = troupe_in(&ws, &["requests"]);
    assert_eq!(listed.code, 0, "{listed:#?}");
    for (short, id) in shorts.iter().zip(&ids) {
        assert!(
            listed
                .stdout
                .lines()
                .any(|l| l.starts_with(&format!("{short}  {id}"))),
            "{listed:#?}"
        );
    }

    // A part of an id that several end or start with is refused, naming them by short id.
    let ambiguous = troupe_in(&ws, &["approve", "019a1b2c"]);
    assert_fails(&ambiguous, 2, "is ambiguous");
    for short in &shorts {
        assert!(ambiguous.stderr.contains(short.as_str()), "{ambiguous:#?}");
    }

    let approved = troupe_in(&ws, &["approve", &shorts[0]]);
    assert_eq!(approved.code, 0, "{approved:#?}");
    assert!(
        approved.stdout.contains(&ids[0].to_string()),
        "{approved:#?}"
    );
    let denied = troupe_in(&ws, &["deny", &ids[1].to_string()]);
    assert_eq!(denied.code, 0, "{denied:#?}");
    assert!(denied
        .stdout
        .starts_with(&format!("denied permission request {}", ids[1])));
    let reviewed = troupe_in(&ws, &["review", &shorts[2], "--approve"]);
    assert_eq!(reviewed.code, 0, "{reviewed:#?}");
    assert!(reviewed
        .stdout
        .starts_with(&format!("approved plan request {}", ids[2])));
    let reviewed = troupe_in(&ws, &["review", &shorts[3], "--reject"]);
    assert_eq!(reviewed.code, 0, "{reviewed:#?}");
    assert!(reviewed
        .stdout
        .starts_with(&format!("rejected plan request {}", ids[3])));
    // Each request got its own answer, once.
    assert_eq!(answers_to_writer(&ws).await.len(), 2);
    let again = troupe_in(&ws, &["approve", &shorts[0]]);
    assert_fails(&again, 1, "already answered");
}

#[tokio::test]
async fn a_losing_review_prints_one_line_and_touches_no_live_delivery() {
    const ROUNDS: usize = 10;
    let ids: Vec<&'static str> = (0..ROUNDS)
        .map(|i| &*Box::leak(format!("0195a1b2-0000-4000-8000-0000000001{i:02}").into_boxed_str()))
        .collect();
    let (_dir, ws, plans) = workspace_with_plans(TeammateStatus::Idle, &ids).await;
    // The running team's side: the writer's answers are claimed and acked as they arrive.
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (ws, stop) = (ws.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let mailbox = FileMailboxStore::new(&Layout::new(&ws), Arc::new(SystemClock));
            let writer = AgentName::parse("writer").unwrap();
            while !stop.load(Ordering::SeqCst) {
                runtime.block_on(async {
                    if !Layout::new(&ws).mailbox_dir(&writer).is_dir() {
                        return;
                    }
                    if let Ok(Some(m)) = mailbox.claim(&writer).await {
                        let _ = mailbox.ack(&writer, &m).await;
                    }
                });
                std::thread::yield_now();
            }
        })
    };
    for (round, plan) in plans.iter().enumerate() {
        let children: Vec<_> = ["--approve", "--reject"]
            .iter()
            .map(|decision| {
                command(&ws)
                    .args(["review", &plan.to_string(), decision])
                    .args(["--workspace", ws.to_str().unwrap()])
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let results: Vec<_> = children
            .into_iter()
            .map(|c| ran(c.wait_with_output().unwrap()))
            .collect();
        let winners = results.iter().filter(|r| r.code == 0).count();
        assert_eq!(winners, 1, "round {round}: {results:#?}");
        for loser in results.iter().filter(|r| r.code != 0) {
            assert_fails(loser, 1, "was already answered");
        }
    }
    stop.store(true, Ordering::SeqCst);
    consumer.join().unwrap();
    // Counted once the consumer has stopped: a listing of the mailbox's folders taken while it
    // moves a message from one to the next can see it in both, or in neither.
    let answers = answers_to_writer(&ws).await;
    for (round, plan) in plans.iter().enumerate() {
        let to_plan = answers.iter().filter(|a| a.request_id() == *plan).count();
        assert_eq!(to_plan, 1, "round {round}: one answer");
    }
}
