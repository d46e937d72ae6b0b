//! Delivery failures (SPEC §5, §4.4): a request whose message cannot be sent stays registered and
//! pending, the caller gets `protocol_delivery_error`, nothing is retried behind its back; a
//! teammate whose answer cannot be delivered releases the request and becomes `failed`.
//!
//! The runtime is built from its parts (Postman, ProtocolRuntime, TeamRuntime) around a mailbox
//! store that fails `send` on demand.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::agent::{NullObserver, Runner};
use troupe::error::ErrorCode;
use troupe::permissions::hooks::Hooks;
use troupe::permissions::{AutoApproval, MemoryAuditSink, PermissionPolicy};
use troupe::store::mailbox::{
    AckOutcome, FileMailboxStore, MailboxCounts, MailboxEntry, MailboxError, MailboxState,
    MailboxStore, QuarantineRecord, RecoveryReport,
};
use troupe::store::protocol::{JsonProtocolStore, ProtocolStore};
use troupe::store::IoError;
use troupe::team::tools::{RequestShutdown, SendMessage, SubmitPlan};
use troupe::team::{TeamError, TeamHandle, TeamPorts, TeamRuntime, TeammateFactory};
use troupe::tools::{Dispatcher, ToolContext, ToolHandler, ToolRegistry};
use troupe::wire::{
    AgentName, MailboxMessage, MessageId, RequestKind, RequestStatus, TeammateRecord,
    TeammateStatus,
};

use super::support::{at_once, name, say, Fixture, Signal, TestModel};

/// A file mailbox whose `send` fails for the message kinds listed in `failing`, and whose next
/// `lead_ack_failures` acks of the lead's messages fail.
struct FlakyMailbox {
    inner: FileMailboxStore,
    failing: Mutex<Vec<&'static str>>,
    lead_ack_failures: Mutex<usize>,
    /// Acks of the lead's messages that failed (injected).
    failed_lead_acks: Mutex<Vec<MessageId>>,
    /// Run once, at the next count of the lead's mailbox: the driver's last look before it
    /// decides the run is over.
    at_lead_count: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl FlakyMailbox {
    fn fail(&self, kinds: &[&'static str]) {
        *self.failing.lock().unwrap() = kinds.to_vec();
    }
}

#[async_trait::async_trait]
impl MailboxStore for FlakyMailbox {
    async fn send(&self, message: &MailboxMessage) -> Result<(), MailboxError> {
        if self.failing.lock().unwrap().contains(&message.kind_str()) {
            return Err(MailboxError::Io(IoError::new(
                "write",
                std::path::Path::new("ready"),
                std::io::Error::other("disk full (injected)"),
            )));
        }
        self.inner.send(message).await
    }
    async fn claim(&self, agent: &AgentName) -> Result<Option<MailboxMessage>, MailboxError> {
        self.inner.claim(agent).await
    }
    async fn ack(
        &self,
        agent: &AgentName,
        message: &MailboxMessage,
    ) -> Result<AckOutcome, MailboxError> {
        {
            let mut left = self.lead_ack_failures.lock().unwrap();
            if agent.is_lead() && *left > 0 {
                *left -= 1;
                self.failed_lead_acks.lock().unwrap().push(message.id());
                return Err(MailboxError::Io(IoError::new(
                    "move",
                    std::path::Path::new("processing"),
                    std::io::Error::other("I/O error (injected)"),
                )));
            }
        }
        self.inner.ack(agent, message).await
    }
    async fn release(&self, agent: &AgentName, id: MessageId) -> Result<(), MailboxError> {
        self.inner.release(agent, id).await
    }
    async fn quarantine(
        &self,
        agent: &AgentName,
        id: MessageId,
        reason: &str,
    ) -> Result<QuarantineRecord, MailboxError> {
        self.inner.quarantine(agent, id, reason).await
    }
    async fn recover(&self, agent: &AgentName) -> Result<RecoveryReport, MailboxError> {
        self.inner.recover(agent).await
    }
    async fn list(
        &self,
        agent: &AgentName,
        state: MailboxState,
    ) -> Result<Vec<MailboxEntry>, MailboxError> {
        self.inner.list(agent, state).await
    }
    async fn counts(&self, agent: &AgentName) -> Result<MailboxCounts, MailboxError> {
        if agent.is_lead() {
            if let Some(hook) = self.at_lead_count.lock().unwrap().take() {
                hook();
            }
        }
        self.inner.counts(agent).await
    }
    async fn agents(&self) -> Result<Vec<AgentName>, MailboxError> {
        self.inner.agents().await
    }
}

/// Teammates with `send_message` and `submit_plan`, answering every message with text.
struct Factory {
    workspace: std::path::PathBuf,
    signal: Signal,
    audit: Arc<MemoryAuditSink>,
}

#[async_trait::async_trait]
impl TeammateFactory for Factory {
    async fn build(
        &self,
        team: TeamHandle,
        teammate: &TeammateRecord,
    ) -> Result<Runner, TeamError> {
        let name = &teammate.name;
        let mut registry = ToolRegistry::new();
        registry
            .register(Arc::new(SendMessage(team.clone())))
            .unwrap();
        registry.register(Arc::new(SubmitPlan(team))).unwrap();
        let policy = PermissionPolicy::default_policy(Arc::new(AutoApproval), self.audit.clone());
        Ok(Runner::new(
            name.clone(),
            format!("You are {name}"),
            TestModel::new(&self.signal, |_| say("done")),
            Arc::new(Dispatcher::new(Arc::new(registry), policy, Hooks::new())),
            self.workspace.clone(),
            Arc::new(NullObserver),
        ))
    }
}

struct Parts {
    mailbox: Arc<FlakyMailbox>,
    store: Arc<dyn ProtocolStore>,
    runtime: TeamRuntime,
}

async fn parts(f: &Fixture) -> Parts {
    let clock = Arc::new(f.clock.clone());
    let mailbox = Arc::new(FlakyMailbox {
        inner: FileMailboxStore::new(&f.layout, clock.clone()),
        failing: Mutex::new(Vec::new()),
        lead_ack_failures: Mutex::new(0),
        failed_lead_acks: Mutex::new(Vec::new()),
        at_lead_count: Mutex::new(None),
    });
    let store: Arc<dyn ProtocolStore> =
        Arc::new(JsonProtocolStore::open(&f.layout, clock.clone(), f.ids.clone()).unwrap());
    let factory = Arc::new(Factory {
        workspace: f.workspace.clone(),
        signal: f.signal.clone(),
        audit: Arc::new(MemoryAuditSink::new(clock.clone())),
    });
    let runtime = TeamRuntime::new(
        f.layout.clone(),
        TeamPorts {
            mailbox: mailbox.clone(),
            protocol: store.clone(),
            clock,
            ids: f.ids.clone(),
            observer: f.recorder.clone(),
            request_ttl: Duration::from_secs(300),
            transcripts: std::sync::Arc::new(troupe::agent::transcript::FileTranscripts(
                f.layout.clone(),
            )),
            placement: std::sync::Arc::new(troupe::team::Here),
            worktrees: None,
        },
        factory,
    )
    .await
    .unwrap();
    Parts {
        mailbox,
        store,
        runtime,
    }
}

/// Spawns `writer` and waits until its first task is done and it is idle.
async fn spawn_writer(f: &Fixture, p: &Parts) {
    p.runtime
        .spawn_teammate(&name("writer"), "writer", "Say done.")
        .await
        .unwrap();
    f.signal
        .until("the writer idle", || {
            at_once(p.runtime.status_of(&name("writer"))) == Some(TeammateStatus::Idle)
                && !p.runtime.any_worker_running()
        })
        .await;
}

fn ctx(f: &Fixture, agent: &str) -> ToolContext {
    ToolContext::new(name(agent), f.workspace.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_message_cannot_be_sent_stays_pending() {
    let f = Fixture::new();
    let p = parts(&f).await;
    spawn_writer(&f, &p).await;
    let lead_before = p.mailbox.counts(&AgentName::lead()).await.unwrap();
    p.mailbox
        .fail(&["shutdown_request", "plan_approval_request"]);

    // The runtime call itself.
    let error = p
        .runtime
        .protocol()
        .open(
            RequestKind::PlanApproval,
            &name("writer"),
            &AgentName::lead(),
            "my plan",
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "protocol_delivery_error");
    // Through the tools the model calls.
    let shutdown = RequestShutdown(p.runtime.handle())
        .call(&ctx(&f, "lead"), json!({"teammate": "writer"}))
        .await
        .unwrap_err();
    assert!(
        shutdown
            .to_tool_text()
            .starts_with("Error [protocol_delivery_error]"),
        "{}",
        shutdown.to_tool_text()
    );
    let plan = SubmitPlan(p.runtime.handle())
        .call(&ctx(&f, "writer"), json!({"plan": "a plan"}))
        .await
        .unwrap_err();
    assert!(plan
        .to_tool_text()
        .starts_with("Error [protocol_delivery_error]"));

    // Each request was registered once and stays pending; no message went anywhere.
    let requests = p.store.list().await.unwrap();
    assert_eq!(
        requests
            .iter()
            .map(|r| (r.kind(), r.stored_status()))
            .collect::<Vec<_>>(),
        [
            (RequestKind::PlanApproval, RequestStatus::Pending),
            (RequestKind::Shutdown, RequestStatus::Pending),
            (RequestKind::PlanApproval, RequestStatus::Pending),
        ]
    );
    assert!(
        shutdown.to_string().contains(&requests[1].id().to_string()),
        "the error names the pending request: {shutdown}"
    );
    assert_eq!(
        p.mailbox.counts(&AgentName::lead()).await.unwrap(),
        lead_before
    );
    assert_eq!(f.count("writer", MailboxState::Ready).await, 0);
    // The writer is still usable: the failure was the delivery's, not the teammate's.
    assert_eq!(
        p.runtime.status_of(&name("writer")).await,
        Some(TeammateStatus::Idle)
    );
    p.runtime.close().await;
}

/// Spawns the writer, makes its shutdown answer undeliverable, asks it to shut down, and waits
/// until it failed (the worker releases the message before it reports `failed`).
async fn shutdown_whose_answer_fails(f: &Fixture, p: &Parts) -> troupe::wire::ProtocolRequest {
    spawn_writer(f, p).await;
    p.mailbox.fail(&["shutdown_response"]);
    let request = p
        .runtime
        .protocol()
        .open(
            RequestKind::Shutdown,
            &AgentName::lead(),
            &name("writer"),
            "stop",
        )
        .await
        .unwrap();
    f.signal
        .until("the writer failed", || {
            at_once(p.runtime.status_of(&name("writer"))) == Some(TeammateStatus::Failed)
        })
        .await;
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_whose_answer_cannot_be_delivered_releases_the_request_and_fails() {
    let f = Fixture::new();
    let p = parts(&f).await;
    let request = shutdown_whose_answer_fails(&f, &p).await;

    // The request message is back in ready/, nothing in processing/, the request pending.
    let ready = f.messages("writer", MailboxState::Ready).await;
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].kind_str(), "shutdown_request");
    assert_eq!(f.count("writer", MailboxState::Processing).await, 0);
    assert_eq!(
        p.store
            .get(request.id())
            .await
            .unwrap()
            .unwrap()
            .stored_status(),
        RequestStatus::Pending
    );
    // The reason is visible to the lead (roster, and the tools' refusal).
    let record = p
        .runtime
        .roster()
        .await
        .into_iter()
        .find(|r| r.name.as_str() == "writer")
        .unwrap();
    let detail = record.detail.unwrap();
    assert!(
        detail.contains(&format!(
            "could not answer shutdown request {}",
            request.id()
        )),
        "{detail}"
    );
    let refused = RequestShutdown(p.runtime.handle())
        .call(&ctx(&f, "lead"), json!({"teammate": "writer"}))
        .await
        .unwrap_err();
    assert!(refused.to_tool_text().starts_with("Error [teammate_state]"));
    assert!(
        refused.to_string().contains("could not answer"),
        "{refused}"
    );
    assert_eq!(p.store.list().await.unwrap().len(), 1);
    p.runtime.close().await;
}

/// The answer whose delivery failed stays recorded: the next run delivers it at start, and the
/// teammate — handling the released request again — stops without answering a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_shutdown_answer_is_delivered_by_the_next_run_and_never_doubled() {
    recorded_shutdown_answer_in_the_next_run(false).await;
}

/// The same, when the lead consumed the delivered answer before the teammate saw the request
/// again: the request is resolved by the teammate's own answer, so it stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_whose_recorded_answer_was_consumed_stops_on_the_redelivered_request() {
    recorded_shutdown_answer_in_the_next_run(true).await;
}

/// The ids of the shutdown responses in the lead's mailbox, in any folder.
async fn responses(f: &Fixture) -> Vec<MessageId> {
    let mut ids = Vec::new();
    for state in MailboxState::ALL {
        for m in f.messages("lead", state).await {
            if m.kind_str() == "shutdown_response" {
                ids.push(m.id());
            }
        }
    }
    ids
}

async fn recorded_shutdown_answer_in_the_next_run(consumed_first: bool) {
    let f = Fixture::new();
    let p = parts(&f).await;
    let request = shutdown_whose_answer_fails(&f, &p).await;
    p.runtime.close().await;
    assert_eq!(responses(&f).await, Vec::<MessageId>::new());
    let recorded = std::fs::read(
        f.layout
            .protocol_answers_dir()
            .join(format!("{}.json", request.id())),
    )
    .unwrap();
    let MailboxMessage::Protocol(recorded) = MailboxMessage::from_json_bytes(&recorded).unwrap()
    else {
        panic!("not a protocol message")
    };

    // The next run: the mailbox works again.
    let next = parts(&f).await;
    assert_eq!(
        next.runtime
            .protocol()
            .deliver_recorded_answers()
            .await
            .unwrap(),
        1
    );
    assert_eq!(responses(&f).await, [recorded.id()]);
    if consumed_first {
        next.store.consume_response(&recorded).await.unwrap();
    }
    next.runtime.wake_all().await;
    f.signal
        .until("the writer shut down", || {
            at_once(next.runtime.status_of(&name("writer"))) == Some(TeammateStatus::Shutdown)
        })
        .await;
    // Closing waits for the worker, which acks the request before it ends.
    next.runtime.close().await;
    assert_eq!(
        f.messages("writer", MailboxState::Done)
            .await
            .iter()
            .map(MailboxMessage::kind_str)
            .collect::<Vec<_>>(),
        ["task", "shutdown_request"]
    );
    assert_eq!(responses(&f).await, [recorded.id()], "answered once");
    assert_eq!(f.recorder.quarantined(), Vec::new());
    let expected = if consumed_first {
        RequestStatus::Approved
    } else {
        // The lead consumes it when it reads it.
        RequestStatus::Pending
    };
    assert_eq!(
        next.store
            .get(request.id())
            .await
            .unwrap()
            .unwrap()
            .stored_status(),
        expected
    );
}

/// SPEC §4.3: an event enters the lead's history once; an ack that failed is retried later
/// without another model call for that event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_lead_ack_is_retried_without_another_model_call() {
    let f = Fixture::new();
    let p = parts(&f).await;
    spawn_writer(&f, &p).await;
    // The writer's result is waiting in the lead's mailbox; its first two acks will fail.
    *p.mailbox.lead_ack_failures.lock().unwrap() = 2;

    let lead_model = TestModel::new(&f.signal, |c| {
        if c.last_is_tool_result() || !c.events().is_empty() {
            say("noted")
        } else {
            super::support::call("request_shutdown", json!({"teammate": "writer"}))
        }
    });
    let mut registry = ToolRegistry::new();
    registry
        .register(Arc::new(RequestShutdown(p.runtime.handle())))
        .unwrap();
    let policy = PermissionPolicy::default_policy(
        Arc::new(AutoApproval),
        Arc::new(MemoryAuditSink::new(Arc::new(f.clock.clone()))),
    );
    let mut lead = Runner::new(
        AgentName::lead(),
        "You are lead",
        lead_model.clone(),
        Arc::new(Dispatcher::new(Arc::new(registry), policy, Hooks::new())),
        f.workspace.clone(),
        Arc::new(NullObserver),
    );
    let mut driver = troupe::team::Driver::new(p.runtime.clone());
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        driver.run(
            &mut lead,
            "wrap up",
            &tokio_util::sync::CancellationToken::new(),
        ),
    )
    .await
    .expect("the run did not end")
    .unwrap();
    assert_eq!(outcome.answer, "noted");

    let failed = p.mailbox.failed_lead_acks.lock().unwrap().clone();
    assert_eq!(failed.len(), 2, "the injected failures happened");
    // Every event is in the history exactly once…
    let history = lead.history().messages();
    let events: Vec<String> = history
        .iter()
        .filter_map(|m| match m {
            troupe::model::ChatMessage::User { content } => content.strip_prefix("[event] "),
            _ => None,
        })
        .map(|body| {
            serde_json::from_str::<serde_json::Value>(body).unwrap()["message_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let mut unique = events.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        events.len(),
        "an event was appended twice: {events:?}"
    );
    for id in &failed {
        assert!(
            events.contains(&id.to_string()),
            "{id} never reached the history"
        );
    }
    // …each model call after the user turn saw a new event (no call for a retried ack)…
    let event_counts: Vec<usize> = lead_model
        .requests()
        .iter()
        .map(|r| {
            r.messages
                .iter()
                .filter(|m| matches!(m, troupe::model::ChatMessage::User { content } if content.starts_with("[event] ")))
                .count()
        })
        .collect();
    let user_turn_calls = 2;
    for pair in event_counts[user_turn_calls..].windows(2) {
        assert!(
            pair[1] > pair[0],
            "a model call without a new event: {event_counts:?}"
        );
    }
    // …and in the end everything is acked and the request is approved.
    let counts = p.mailbox.counts(&AgentName::lead()).await.unwrap();
    assert_eq!((counts.ready, counts.processing), (0, 0));
    assert_eq!(counts.done, events.len());
    let requests = p.store.list().await.unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].stored_status(), RequestStatus::Approved);
}

/// An external event (here a cron wakeup) that arrives during the driver's last look — after it
/// took the channels, before it declared the team quiet — runs at once; the run neither ends
/// without it nor waits for a wakeup that nothing would send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_arriving_during_the_last_look_runs_at_once() {
    let f = Fixture::new();
    let p = parts(&f).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let wakeup = troupe::cron::CronWakeup {
        job_id: troupe::cron::CronJobId::parse("00000000-0000-4000-8000-0000000000c1").unwrap(),
        prompt: troupe::wire::Content::parse("check the build").unwrap(),
        scheduled_for_utc: f.now(),
        fired_at_utc: f.now(),
    };
    let lead_model = TestModel::new(&f.signal, |c| {
        if c.events().is_empty() {
            say("first answer")
        } else {
            say("handled the wakeup")
        }
    });
    let policy = PermissionPolicy::default_policy(
        Arc::new(AutoApproval),
        Arc::new(MemoryAuditSink::new(Arc::new(f.clock.clone()))),
    );
    let mut lead = Runner::new(
        AgentName::lead(),
        "You are lead",
        lead_model.clone(),
        Arc::new(Dispatcher::new(
            Arc::new(ToolRegistry::new()),
            policy,
            Hooks::new(),
        )),
        f.workspace.clone(),
        Arc::new(NullObserver),
    );
    // The wakeup is sent while the driver counts the lead's mailbox in its quiescence check.
    *p.mailbox.at_lead_count.lock().unwrap() = Some(Box::new(move || {
        tx.send(wakeup).unwrap();
        // The sender stays alive (as the cron runtime's does): no close ends the wait.
        std::mem::forget(tx);
    }));
    let mut driver = troupe::team::Driver::with_external(
        p.runtime.clone(),
        troupe::team::ExternalEvents {
            jobs: None,
            job_completions: None,
            cron_wakeups: Some(rx),
            ..Default::default()
        },
    );
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        driver.run(&mut lead, "go", &tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("the run waited for a wakeup that had already arrived")
    .unwrap();
    assert_eq!(outcome.answer, "handled the wakeup");
    assert_eq!(lead_model.calls(), 2);
}
