//! `troupe review` (SPEC §6, §8).
//!
//! - From another process while a team runs (the first test): the running team notices the
//!   answer through its filesystem watch — the teammate continues and the run ends. Without the
//!   watch nothing would wake the teammate before the request's five-minute window closed. The
//!   team runs in this process (`build_team` with `watch: true`), because `troupe run
//!   --model-script` shares one script between all agents; the reviewer is the real binary.
//! - With no run going (the others): a plan gets one answer — a second `troupe review` is
//!   refused, and of reviewers racing as real processes exactly one succeeds; a plan of a
//!   shut-down or failed teammate is refused; a request id may be a unique prefix of at least 8
//!   characters; a missing decision names both flags.
//!
//! The clock is the system clock here: two processes judge the same request window.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use troupe::agent::NullObserver;
use troupe::bootstrap::{build_team, ModelChooser, TeamSettings};
use troupe::clock::SystemClock;
use troupe::ids::RandomIds;
use troupe::model::{ChatMessage, ModelClient, ModelResponse, ScriptedModel, ToolCall};
use troupe::permissions::AutoApproval;
use troupe::team::{TeamObserver, TeamUpdate};
use troupe::wire::{AgentName, MailboxMessage, ProtocolMessageKind, RequestStatus};

use super::support::troupe_in;

const WAIT: Duration = Duration::from_secs(20);

fn user_texts(messages: &[ChatMessage]) -> Vec<&str> {
    messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::User { content } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

fn calls(messages: &[ChatMessage], name: &str) -> usize {
    messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Assistant(a) => {
                Some(a.tool_calls.iter().filter(|c| c.name == name).count())
            }
            _ => None,
        })
        .sum()
}

fn tool(n: usize, name: &str, args: serde_json::Value) -> ModelResponse {
    ModelResponse::tool_calls(
        vec![ToolCall::new(format!("call_{n}"), name, args.to_string())],
        "test",
    )
}

/// The lead spawns `writer` and never reviews: a person does, with `troupe review`.
struct Models {
    writer: Arc<ScriptedModel>,
}

impl ModelChooser for Models {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient> {
        if !agent.is_lead() {
            return self.writer.clone();
        }
        Arc::new(ScriptedModel::from_fn(|request| {
            let m = &request.messages;
            Ok(if calls(m, "spawn_teammate") == 0 {
                tool(
                    m.len(),
                    "spawn_teammate",
                    json!({"name": "writer", "role": "writer", "prompt": "Plan, then work."}),
                )
            } else {
                ModelResponse::text("Waiting for the writer.", "test")
            })
        }))
    }
}

/// Forwards every plan request the team sends.
struct PlanRequests(Mutex<mpsc::UnboundedSender<String>>);

impl TeamObserver for PlanRequests {
    fn update(&self, update: &TeamUpdate) {
        if let TeamUpdate::Sent(MailboxMessage::Protocol(p)) = update {
            if p.kind() == ProtocolMessageKind::PlanApprovalRequest {
                let _ = self.0.lock().unwrap().send(p.request_id().to_string());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_from_another_process_reaches_the_running_team() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let writer = Arc::new(ScriptedModel::from_fn(|request| {
        let m = &request.messages;
        let approved = user_texts(m).iter().any(|t| t.starts_with("Plan approved"));
        Ok(
            match (approved, matches!(m.last(), Some(ChatMessage::Tool { .. }))) {
                (false, false) => tool(m.len(), "submit_plan", json!({"plan": "Write NOTES.md."})),
                (false, true) => ModelResponse::text("Plan submitted.", "test"),
                (true, _) => ModelResponse::text("Done under the approved plan.", "test"),
            },
        )
    }));
    let (tx, mut plans) = mpsc::unbounded_channel();
    let mut team = build_team(TeamSettings {
        workspace: ws.clone(),
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
        models: Arc::new(Models {
            writer: writer.clone(),
        }),
        approval: Arc::new(AutoApproval),
        run_observer: Arc::new(NullObserver),
        team_observer: Arc::new(PlanRequests(Mutex::new(tx))),
        max_turns: 5,
        request_ttl: Duration::from_secs(300),
        shell_timeout: Duration::from_secs(5),
        watch: true,
        require_plans: false,
        redactor: troupe::secrets::Redactor::default(),
        long_lived: Default::default(),
        events: Default::default(),
        settings: Default::default(),
        sandbox: troupe::bootstrap::SandboxOptions::off(&ws),
        mcp: Default::default(),
        store: Default::default(),
    })
    .await
    .unwrap();
    let store = team.protocol.clone();
    let run = tokio::spawn(async move {
        let mut driver = team.driver();
        let outcome = driver
            .run(
                &mut team.lead,
                "Have a writer plan.",
                &CancellationToken::new(),
            )
            .await;
        team.close().await;
        outcome
    });

    let request_id = tokio::time::timeout(WAIT, plans.recv())
        .await
        .expect("no plan was submitted")
        .unwrap();
    let review_ws = ws.clone();
    let id = request_id.clone();
    let reviewed = tokio::task::spawn_blocking(move || {
        troupe_in(
            &review_ws,
            &["review", &id, "--approve", "--feedback", "Go ahead."],
        )
    })
    .await
    .unwrap();
    assert_eq!(reviewed.code, 0, "{reviewed:#?}");
    assert!(
        reviewed
            .stdout
            .starts_with(&format!("approved plan request {request_id}; response ")),
        "{reviewed:#?}"
    );
    assert!(reviewed.stdout.contains("delivered to writer's mailbox"));

    let outcome = tokio::time::timeout(WAIT, run)
        .await
        .expect("the running team did not pick the answer up")
        .unwrap()
        .unwrap();
    assert_eq!(outcome.answer, "Waiting for the writer.");
    // The teammate continued with the person's decision, in the same conversation.
    let requests = writer.requests();
    assert_eq!(requests.len(), 3);
    let told = user_texts(&requests[2].messages)
        .last()
        .unwrap()
        .to_string();
    assert!(
        told.starts_with(&format!(
            "Plan approved ({request_id}). Feedback: Go ahead."
        )),
        "{told}"
    );
    let request = store
        .get(troupe::wire::RequestId::parse(&request_id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(request.stored_status(), RequestStatus::Approved);
    let response_id = reviewed.stdout.split("response ").nth(1).unwrap();
    let response_id = response_id.split_whitespace().next().unwrap();
    assert_eq!(
        request.resolution().unwrap().message_id.to_string(),
        response_id
    );
}

// ---- With no run going ----------------------------------------------------------------------

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use troupe::ids::IdGenerator;
use troupe::layout::Layout;
use troupe::store::mailbox::{FileMailboxStore, MailboxEntry, MailboxState, MailboxStore};
use troupe::store::protocol::{JsonProtocolStore, NewRequest, ProtocolStore};
use troupe::wire::{Content, RequestId, RequestKind, TeamRoster, TeammateRecord, TeammateStatus};

use super::support::{assert_fails, command, ran, Ran};

/// Request ids handed out in order (v4-shaped, so that prefixes can be chosen).
struct FixedIds(Mutex<Vec<&'static str>>);

impl IdGenerator for FixedIds {
    fn next_uuid(&self) -> uuid::Uuid {
        let mut ids = self.0.lock().unwrap();
        uuid::Uuid::parse_str(ids.remove(0)).unwrap()
    }
}

/// A workspace where `writer` (with `status` in team.json) submitted one plan per id.
pub(super) async fn workspace_with_plans(
    status: TeammateStatus,
    ids: &[&'static str],
) -> (tempfile::TempDir, PathBuf, Vec<RequestId>) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let layout = Layout::new(&ws);
    let store = JsonProtocolStore::open(
        &layout,
        Arc::new(SystemClock),
        Arc::new(FixedIds(Mutex::new(ids.to_vec()))),
    )
    .unwrap();
    let mut plans = Vec::new();
    for _ in ids {
        plans.push(
            store
                .create(NewRequest {
                    kind: RequestKind::PlanApproval,
                    sender: AgentName::parse("writer").unwrap(),
                    target: AgentName::lead(),
                    content: Content::parse("Write NOTES.md.").unwrap(),
                    ttl: Duration::from_secs(3600),
                })
                .await
                .unwrap()
                .id(),
        );
    }
    set_status(&ws, status);
    (dir, ws, plans)
}

pub(super) fn set_status(ws: &Path, status: TeammateStatus) {
    let roster = TeamRoster {
        version: TeamRoster::VERSION,
        teammates: vec![TeammateRecord {
            name: AgentName::parse("writer").unwrap(),
            role: "writer".into(),
            status,
            detail: None,
            updated_at_utc: troupe::clock::Clock::now(&SystemClock),
            plan_required: false,
            earlier_plan: None,
            definition: None,
            isolation: troupe_wire::Isolation::None,
        }],
    };
    std::fs::write(Layout::new(ws).team_file(), roster.to_json_bytes()).unwrap();
}

/// The outcome of one round of racing reviewers: exactly one won, every other lost with the one
/// line, one answer exists and the winner named it.
fn assert_one_winner(round: usize, results: &[Ran], answers: &[troupe::wire::ProtocolMessage]) {
    let winners: Vec<_> = results.iter().filter(|r| r.code == 0).collect();
    assert_eq!(winners.len(), 1, "round {round}: {results:#?}");
    for loser in results.iter().filter(|r| r.code != 0) {
        assert_fails(loser, 1, "was already answered");
    }
    assert_eq!(answers.len(), 1, "round {round}: one answer exists");
    assert!(
        winners[0].stdout.contains(&answers[0].id().to_string()),
        "{winners:#?}"
    );
}

/// The plan responses in the writer's mailbox, any folder.
pub(super) async fn answers_to_writer(ws: &Path) -> Vec<troupe::wire::ProtocolMessage> {
    let writer = AgentName::parse("writer").unwrap();
    if !Layout::new(ws).mailbox_dir(&writer).is_dir() {
        return Vec::new();
    }
    let mailbox = FileMailboxStore::new(&Layout::new(ws), Arc::new(SystemClock));
    let mut entries = Vec::new();
    for state in MailboxState::ALL {
        entries.extend(mailbox.list(&writer, state).await.unwrap());
    }
    entries
        .into_iter()
        .filter_map(|entry| match entry {
            MailboxEntry::Message(MailboxMessage::Protocol(p))
                if p.kind() == ProtocolMessageKind::PlanApprovalResponse =>
            {
                Some(p)
            }
            _ => None,
        })
        .collect()
}

const PLAN: &str = "0195a1b2-c3d4-4e5f-8a6b-7c8d9e0f1a2b";

#[tokio::test]
async fn a_second_review_is_refused_and_writes_nothing() {
    let (_dir, ws, plans) = workspace_with_plans(TeammateStatus::Idle, &[PLAN]).await;
    let first = troupe_in(&ws, &["review", PLAN, "--approve"]);
    assert_eq!(first.code, 0, "{first:#?}");
    let answered = answers_to_writer(&ws).await;
    assert_eq!(answered.len(), 1);
    let state = std::fs::read(Layout::new(&ws).protocol_state()).unwrap();

    for decision in ["--approve", "--reject"] {
        let again = troupe_in(&ws, &["review", PLAN, decision, "--feedback", "Hm."]);
        assert_fails(&again, 1, "[protocol_state_error]");
        assert!(
            again.stderr.contains(&format!(
                "protocol request {} was already answered (approved) by lead in message {}",
                plans[0],
                answered[0].id()
            )),
            "{again:#?}"
        );
    }
    assert_eq!(
        answers_to_writer(&ws).await,
        answered,
        "nothing more was sent"
    );
    assert_eq!(
        std::fs::read(Layout::new(&ws).protocol_state()).unwrap(),
        state
    );
}

/// The inode of `path`, as `/proc/locks` names it (`major:minor:inode`, hex device).
fn inode_of(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().ino()
}

/// How many processes wait for the lock on the file with inode `inode`.
fn waiting_for(inode: u64) -> usize {
    let suffix = format!(":{inode} ");
    std::fs::read_to_string("/proc/locks")
        .unwrap()
        .lines()
        .filter(|l| l.contains("-> FLOCK") && l.contains(&suffix))
        .count()
}

#[tokio::test]
async fn racing_reviewers_in_separate_processes_send_exactly_one_answer() {
    const REVIEWERS: usize = 6;
    const ROUNDS: usize = 4;
    let ids: Vec<&'static str> = vec![
        "0195a1b2-0000-4000-8000-000000000001",
        "0195a1b2-0000-4000-8000-000000000002",
        "0195a1b2-0000-4000-8000-000000000003",
        "0195a1b2-0000-4000-8000-000000000004",
    ];
    let (_dir, ws, plans) = workspace_with_plans(TeammateStatus::Idle, &ids[..ROUNDS]).await;
    let lock_path = Layout::new(&ws).protocol_lock();
    for (round, plan) in plans.iter().enumerate() {
        // The starting gate: every reviewer opens the protocol store first, so each one queues
        // on the store's lock while this test holds it; all are released at once.
        let gate = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .unwrap();
        gate.lock().unwrap();
        let children: Vec<_> = (0..REVIEWERS)
            .map(|i| {
                let decision = if i % 2 == 0 { "--approve" } else { "--reject" };
                command(&ws)
                    .args(["review", &plan.to_string(), decision])
                    .args(["--workspace", ws.to_str().unwrap()])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let inode = inode_of(&lock_path);
        let deadline = std::time::Instant::now() + WAIT;
        while waiting_for(inode) < REVIEWERS {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: the reviewers never all queued on the lock"
            );
            std::thread::yield_now();
        }
        gate.unlock().unwrap();
        let results: Vec<_> = children
            .into_iter()
            .map(|c| ran(c.wait_with_output().unwrap()))
            .collect();
        let answers: Vec<_> = answers_to_writer(&ws)
            .await
            .into_iter()
            .filter(|a| a.request_id() == *plan)
            .collect();
        assert_one_winner(round, &results, &answers);
    }
}

#[tokio::test]
async fn a_plan_of_a_shut_down_or_failed_teammate_is_refused() {
    for (status, word) in [
        (TeammateStatus::Shutdown, "shutdown"),
        (TeammateStatus::Failed, "failed"),
    ] {
        let (_dir, ws, _plans) = workspace_with_plans(status, &[PLAN]).await;
        let refused = troupe_in(&ws, &["review", PLAN, "--approve"]);
        assert_fails(&refused, 1, "[teammate_state]");
        assert!(
            refused
                .stderr
                .contains(&format!("teammate writer is {word}")),
            "{refused:#?}"
        );
        assert!(answers_to_writer(&ws).await.is_empty());
    }
}

#[tokio::test]
async fn a_review_without_a_decision_names_both_flags() {
    let (_dir, ws, _plans) = workspace_with_plans(TeammateStatus::Idle, &[PLAN]).await;
    let missing = troupe_in(&ws, &["review", PLAN]);
    assert_eq!(missing.code, 2, "{missing:#?}");
    assert!(missing.stderr.contains("--approve"), "{missing:#?}");
    assert!(missing.stderr.contains("--reject"), "{missing:#?}");
    let both = troupe_in(&ws, &["review", PLAN, "--approve", "--reject"]);
    assert_eq!(both.code, 2, "{both:#?}");
    assert!(answers_to_writer(&ws).await.is_empty());
}

#[tokio::test]
async fn a_request_id_may_be_a_unique_prefix_of_at_least_8_characters() {
    const A: &str = "11111111-2222-4333-8444-555555555555";
    const B: &str = "11111111-2222-4333-8444-666666666666";
    const C: &str = "99999999-2222-4333-8444-777777777777";
    let (_dir, ws, _plans) = workspace_with_plans(TeammateStatus::Idle, &[A, B, C]).await;

    assert_fails(
        &troupe_in(&ws, &["review", "9999999", "--approve"]),
        2,
        "at least 8 characters",
    );
    let ambiguous = troupe_in(&ws, &["review", "11111111", "--approve"]);
    assert_fails(&ambiguous, 2, "is ambiguous");
    assert!(ambiguous.stderr.contains(A), "{ambiguous:#?}");
    assert!(ambiguous.stderr.contains(B), "{ambiguous:#?}");
    assert_fails(
        &troupe_in(&ws, &["review", "12345678", "--approve"]),
        1,
        "[protocol_not_found]",
    );
    // Ids are lowercase: an upper-case prefix is not one.
    assert_fails(
        &troupe_in(
            &ws,
            &[
                "review",
                "99999999-2222-4333-8444-77777777777A",
                "--approve",
            ],
        ),
        2,
        "99999999-2222-4333-8444-77777777777A",
    );
    assert!(
        answers_to_writer(&ws).await.is_empty(),
        "nothing was answered"
    );

    let by_prefix = troupe_in(&ws, &["review", "99999999", "--approve"]);
    assert_eq!(by_prefix.code, 0, "{by_prefix:#?}");
    assert!(
        by_prefix
            .stdout
            .starts_with(&format!("approved plan request {C}; response ")),
        "{by_prefix:#?}"
    );
    let longer = troupe_in(&ws, &["review", "11111111-2222-4333-8444-6", "--reject"]);
    assert_eq!(longer.code, 0, "{longer:#?}");
    assert!(longer
        .stdout
        .starts_with(&format!("rejected plan request {B}; ")));
    let full = troupe_in(&ws, &["review", A, "--approve"]);
    assert_eq!(full.code, 0, "{full:#?}");
    assert_eq!(answers_to_writer(&ws).await.len(), 3);
}

#[tokio::test]
async fn a_review_finishes_an_answer_a_dead_reviewer_left_undelivered() {
    let (_dir, ws, plans) = workspace_with_plans(TeammateStatus::Idle, &[PLAN]).await;
    // A reviewer recorded its answer, then died before writing it into the writer's mailbox.
    let recorded = troupe::wire::ProtocolMessage::response(
        troupe::wire::message::Envelope {
            id: troupe::wire::MessageId::parse("0195a1b2-0000-4000-9000-00000000a001").unwrap(),
            sender: AgentName::lead(),
            recipient: AgentName::parse("writer").unwrap(),
            content: Content::parse("Go.").unwrap(),
            created_at_utc: troupe::clock::Clock::now(&SystemClock),
        },
        ProtocolMessageKind::PlanApprovalResponse,
        plans[0],
        true,
    )
    .unwrap();
    let answers = Layout::new(&ws).protocol_answers_dir();
    std::fs::create_dir_all(&answers).unwrap();
    std::fs::write(
        answers.join(format!("{PLAN}.json")),
        MailboxMessage::Protocol(recorded.clone()).to_json_bytes(),
    )
    .unwrap();

    for round in 0..2 {
        let refused = troupe_in(&ws, &["review", PLAN, "--reject"]);
        // The first review also says (a notice, on stderr) that it delivered the answer whose
        // delivery had been interrupted; the second has nothing left to deliver.
        let warned = refused
            .stderr
            .lines()
            .filter(|l| l.starts_with("troupe: ") && l.contains("delivered a recorded answer"))
            .count();
        assert_eq!(warned, usize::from(round == 0), "{refused:#?}");
        let refused = Ran {
            stderr: refused
                .stderr
                .lines()
                .filter(|l| !l.contains("delivered a recorded answer"))
                .map(|l| format!("{l}\n"))
                .collect(),
            ..refused
        };
        assert_fails(
            &refused,
            1,
            &format!(
                "was already answered (approved) by lead in message {}",
                recorded.id()
            ),
        );
        assert_eq!(
            answers_to_writer(&ws).await,
            vec![recorded.clone()],
            "delivered once"
        );
    }
}

// ---- A shared team (PostgreSQL) ---------------------------------------------------------------

use troupe::store::postgres::testing::TestDb;
use troupe::store::postgres::{PgMailboxStore, PgProtocolStore, PgRoster, PgStore, DEFAULT_LEASE};

const TEAM: &str = "race";

/// A shared team whose `writer` is idle, and its protocol store.
async fn shared_team_with_writer(db: &TestDb) -> (PgStore, PgProtocolStore) {
    let pg = db.store(TEAM);
    let roster = PgRoster::new(pg.clone(), "test", DEFAULT_LEASE);
    let writer = TeammateRecord {
        name: AgentName::parse("writer").unwrap(),
        role: "writer".into(),
        status: TeammateStatus::Idle,
        detail: None,
        updated_at_utc: troupe::clock::Clock::now(&SystemClock),
        plan_required: false,
        earlier_plan: None,
        definition: None,
        isolation: troupe_wire::Isolation::None,
    };
    assert!(roster.add(&writer).await.unwrap());
    let protocol = PgProtocolStore::new(pg.clone(), Arc::new(SystemClock), Arc::new(RandomIds));
    (pg, protocol)
}

async fn plan_of_writer(protocol: &PgProtocolStore) -> RequestId {
    protocol
        .create(NewRequest {
            kind: RequestKind::PlanApproval,
            sender: AgentName::parse("writer").unwrap(),
            target: AgentName::lead(),
            content: Content::parse("Write NOTES.md.").unwrap(),
            ttl: Duration::from_secs(3600),
        })
        .await
        .unwrap()
        .id()
}

/// The plan responses to `plan` in the shared writer's mailbox, any state.
async fn shared_answers_to_writer(
    pg: &PgStore,
    plan: RequestId,
) -> Vec<troupe::wire::ProtocolMessage> {
    let writer = AgentName::parse("writer").unwrap();
    let mailbox = PgMailboxStore::new(pg.clone(), Arc::new(SystemClock), "test", DEFAULT_LEASE);
    let mut entries = Vec::new();
    for state in MailboxState::ALL {
        entries.extend(mailbox.list(&writer, state).await.unwrap());
    }
    entries
        .into_iter()
        .filter_map(|entry| match entry {
            MailboxEntry::Message(MailboxMessage::Protocol(p)) if p.request_id() == plan => Some(p),
            _ => None,
        })
        .collect()
}

fn shared_review(ws: &Path, url: &str, plan: RequestId, decision: &str) -> std::process::Command {
    let mut c = command(ws);
    c.args(["review", &plan.to_string(), decision])
        .args([
            "--workspace",
            ws.to_str().unwrap(),
            "--store",
            url,
            "--team",
            TEAM,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Racing `troupe review`s of a shared team: the winner's answer is committed before it is
/// delivered, so the losers find it recorded while the winner may still be delivering it. A
/// loser leaves that delivery to the winner and prints its refusal, one line — no warning that
/// it "delivered a recorded answer whose delivery had been interrupted". The reviewers queue on
/// the team's protocol lock, which this test holds until all of them wait, then lets go: the
/// first loser reads the record right after the winner's commit, while the winner delivers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_reviewers_of_a_shared_team_lose_with_one_line_and_send_one_answer() {
    const REVIEWERS: usize = 4;
    const ROUNDS: usize = 8;
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let (pg, protocol) = shared_team_with_writer(&db).await;
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    // The team's protocol lock (class 1 on schema/team), as `PgProtocolStore` takes it.
    let key = format!("hashtext('{}/{TEAM}')", db.schema());
    let waiting = format!(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1 \
         AND objsubid = 2 AND NOT granted \
         AND objid::bigint = ({key}::bigint + 4294967296) % 4294967296"
    );
    for round in 0..ROUNDS {
        let plan = plan_of_writer(&protocol).await;
        let gate = db
            .hold(&format!("SELECT pg_advisory_xact_lock(1, {key})"))
            .unwrap();
        let children: Vec<_> = (0..REVIEWERS)
            .map(|i| {
                let decision = if i % 2 == 0 { "--approve" } else { "--reject" };
                shared_review(&ws, &url, plan, decision).spawn().unwrap()
            })
            .collect();
        let deadline = std::time::Instant::now() + WAIT;
        while db.query_text(&waiting).unwrap().as_deref() != Some(&REVIEWERS.to_string()) {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: the reviewers never all queued on the lock"
            );
            std::thread::yield_now();
        }
        drop(gate);
        let results: Vec<_> = children
            .into_iter()
            .map(|c| ran(c.wait_with_output().unwrap()))
            .collect();
        assert_one_winner(round, &results, &shared_answers_to_writer(&pg, plan).await);
    }
}

/// A shared team's reviewer recorded its answer and died before delivering it (its delivery
/// lock went with its connection): the next `troupe review` delivers it, once, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_review_finishes_an_answer_a_dead_reviewer_left_undelivered() {
    let Some(db) = TestDb::create() else { return };
    let url = db.url();
    let (pg, protocol) = shared_team_with_writer(&db).await;
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let plan = plan_of_writer(&protocol).await;
    let recorded = troupe::wire::ProtocolMessage::response(
        troupe::wire::message::Envelope {
            id: troupe::wire::MessageId::parse("0195a1b2-0000-4000-9000-00000000a002").unwrap(),
            sender: AgentName::lead(),
            recipient: AgentName::parse("writer").unwrap(),
            content: Content::parse("Go.").unwrap(),
            created_at_utc: troupe::clock::Clock::now(&SystemClock),
        },
        ProtocolMessageKind::PlanApprovalResponse,
        plan,
        true,
    )
    .unwrap();
    let died = protocol
        .answer(&recorded, &|_: &troupe::wire::ProtocolMessage| {
            Err("killed (injected)".to_owned())
        })
        .await;
    assert_eq!(
        troupe::error::ErrorCode::code(&died.unwrap_err()),
        "protocol_delivery_error"
    );
    for round in 0..2 {
        let refused = ran(shared_review(&ws, &url, plan, "--reject").output().unwrap());
        // Every line but the refusal is the notice of the delivery, on the first round only.
        let (warnings, rest): (Vec<&str>, Vec<&str>) = refused
            .stderr
            .lines()
            .partition(|l| !l.contains("was already answered"));
        assert_eq!(warnings.len(), usize::from(round == 0), "{refused:#?}");
        assert!(
            warnings
                .iter()
                .all(|l| l.starts_with("troupe: ") && l.contains("delivered a recorded answer")),
            "{refused:#?}"
        );
        let refused = Ran {
            stderr: rest.iter().map(|l| format!("{l}\n")).collect(),
            ..refused
        };
        assert_fails(
            &refused,
            1,
            &format!(
                "was already answered (approved) by lead in message {}",
                recorded.id()
            ),
        );
        assert_eq!(
            shared_answers_to_writer(&pg, plan).await,
            vec![recorded.clone()],
            "delivered once"
        );
    }
}
