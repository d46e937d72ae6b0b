//! `troupe review` from another process while a team runs (SPEC §8): the running team notices
//! the answer through its filesystem watch — the teammate continues and the run ends. Without
//! the watch nothing would wake the teammate before the request's five-minute window closed.
//!
//! The team runs in this process (`build_team` with `watch: true`), because `troupe run
//! --model-script` shares one script between all agents; the reviewer is the real binary.
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
        redactor: troupe::secrets::Redactor::default(),
    })
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
