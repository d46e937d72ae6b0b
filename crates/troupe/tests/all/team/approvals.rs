//! Approvals as requests (SPEC §13) in a running team: an ask is a durable `permission` request
//! before anyone is asked; the call waits (no model call) for the first answer — the terminal,
//! another answerer, the lead when asks are routed to it — or its expiry or an interrupt; every
//! other answer is refused naming the first; the audit says who answered.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use troupe::approvals::{ApprovalDesk, Choice, PermissionAsk, PermissionReply};
use troupe::clock::Clock;
use troupe::error::ErrorCode;
use troupe::permissions::TerminalApproval;
use troupe::settings::ApprovalRoute;
use troupe::store::events::EventListener;
use troupe::wire::{Event, ProtocolRequest, RequestKind, RequestStatus};

use super::support::{
    call, drive_in_background, finish, say, Convo, Fixture, Models, Reply, Signal, TestModel,
};

/// Terminal output the test reads; each write bumps the signal it was given.
#[derive(Clone, Default)]
struct Screen(Arc<Mutex<Vec<u8>>>, Option<Signal>);

impl Screen {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl Write for Screen {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        if let Some(signal) = &self.1 {
            signal.bump();
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Terminal input nobody types into: a read blocks until the test ends.
struct NobodyTypes(std::sync::mpsc::Receiver<()>);

impl std::io::Read for NobodyTypes {
    fn read(&mut self, _buf: &mut [u8]) -> std::io::Result<usize> {
        let _ = self.0.recv();
        Ok(0)
    }
}

/// A terminal prompt reading `typed` (a terminal or not), its output dropped.
fn typed_terminal(typed: &[u8], is_terminal: bool) -> Arc<TerminalApproval> {
    Arc::new(TerminalApproval::with_io(
        Box::new(std::io::Cursor::new(typed.to_vec())),
        Box::new(Screen::default()),
        is_terminal,
    ))
}

/// Bumps the signal on every event, so a test can wait for a request to be registered.
struct Bump(Signal);

impl EventListener for Bump {
    fn event(&self, _event: &Event) {
        self.0.bump();
    }
}

/// The lead writes NOTES.md once, then answers with the tool's result.
fn writing_lead() -> impl Fn(&Convo<'_>) -> Reply + Send + Sync {
    |c| {
        if c.last_is_tool_result() {
            return say(c.last_tool_result().unwrap());
        }
        call(
            "write_file",
            json!({"path": "NOTES.md", "content": "hello\n"}),
        )
    }
}

async fn permission_requests(f: &Fixture) -> Vec<ProtocolRequest> {
    f.requests()
        .await
        .into_iter()
        .filter(|r| r.kind() == RequestKind::Permission)
        .collect()
}

struct Asked {
    f: Fixture,
    screen: Screen,
    cancel: CancellationToken,
    lead: Arc<TestModel>,
    _never: std::sync::mpsc::Sender<()>,
}

impl Asked {
    /// Waits until the prompt is on the screen and its request registered.
    async fn prompted(&self) {
        self.f
            .signal
            .until_async("the prompt and its request", async || {
                self.screen.text().ends_with("/N] ")
                    && permission_requests(&self.f).await.len() == 1
            })
            .await;
    }
}

/// A team whose lead asks at a terminal nobody answers; `route` and `ttl` as given.
fn asked(route: ApprovalRoute, ttl: Duration) -> (Asked, troupe::bootstrap::TeamSettings) {
    let f = Fixture::new();
    let (never_tx, never) = std::sync::mpsc::channel();
    let screen = Screen(Arc::default(), Some(f.signal.clone()));
    let cancel = CancellationToken::new();
    let lead = TestModel::new(&f.signal, writing_lead());
    let mut settings = f.settings(Models::new(&f.signal, &[("lead", &lead)]));
    settings.approval = Arc::new(
        TerminalApproval::with_io(
            Box::new(std::io::BufReader::new(NobodyTypes(never))),
            Box::new(screen.clone()),
            true,
        )
        .with_cancel(cancel.clone()),
    );
    settings.settings.approvals.route = route;
    settings.settings.approvals.ttl = ttl;
    settings
        .events
        .listeners
        .push(Arc::new(Bump(f.signal.clone())));
    (
        Asked {
            f,
            screen,
            cancel,
            lead,
            _never: never_tx,
        },
        settings,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_is_registered_then_answered_elsewhere_and_the_prompt_gives_way() {
    let (a, settings) = asked(ApprovalRoute::Person, Duration::from_secs(600));
    let team = troupe::bootstrap::build_team(settings).await.unwrap();
    let runtime = team.runtime.clone();
    let run = drive_in_background(team, "write the notes");
    a.prompted().await;
    let request = permission_requests(&a.f).await.remove(0);
    assert_eq!(request.sender().as_str(), "lead");
    assert_eq!(request.target().as_str(), "user");
    assert!(request.is_pending());
    let ask = PermissionAsk::from_content(request.content().as_str()).unwrap();
    assert_eq!(ask.tool, "write_file");
    assert_eq!(ask.effect, "write");
    assert_eq!(
        ask.arguments,
        json!({"path": "NOTES.md", "content": "hello\n"})
    );
    assert_eq!(
        ask.preview.as_deref(),
        Some("--- NOTES.md\n+++ NOTES.md\n@@ -1,0 +1,1 @@\n+hello\n")
    );
    // Waiting at the call: one model call so far, and none while it waits.
    assert_eq!(a.lead.calls(), 1);

    let desk = ApprovalDesk::new(runtime.protocol().clone());
    desk.answer(
        &request,
        &PermissionReply::new(Choice::Once, "approved with troupe approve (pid 1)", "cli"),
    )
    .await
    .unwrap();
    // A second answer, either way, is refused naming the first.
    let second = desk
        .answer(
            &request,
            &PermissionReply::new(Choice::No, "too late", "page"),
        )
        .await
        .unwrap_err();
    assert_eq!(second.code(), "protocol_state_error");
    assert!(
        second.to_string().contains("already answered (approved)"),
        "{second}"
    );

    let (_team, _) = finish(run).await;
    assert_eq!(
        std::fs::read_to_string(a.f.workspace.join("NOTES.md")).unwrap(),
        "hello\n"
    );
    assert_eq!(a.lead.calls(), 2);
    let screen = a.screen.text();
    assert!(
        screen.contains(&format!(
            "permission request {} was answered elsewhere (cli): approved",
            request.id()
        )),
        "{screen}"
    );
    let audit = a.f.audit();
    let line = audit.iter().find(|l| l["tool"] == "write_file").unwrap();
    assert_eq!(line["rule"], "default+approval:cli");
    assert_eq!(line["decision"], "allow");
    let stored = permission_requests(&a.f).await.remove(0);
    assert_eq!(stored.stored_status(), RequestStatus::Approved);
    assert_eq!(a.f.events_of("permission_requested").len(), 1);
    let answered = a.f.events_of("permission_answered");
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].fields["by"], "cli");
    assert_eq!(answered[0].fields["approved"], true);
    // The mailbox copy of the answer was consumed without a model call.
    assert_eq!(
        a.f.count("lead", troupe::store::mailbox::MailboxState::Ready)
            .await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_ask_expires_as_a_denial_with_its_reason() {
    let (a, settings) = asked(ApprovalRoute::Person, Duration::from_millis(200));
    let team = troupe::bootstrap::build_team(settings).await.unwrap();
    let run = drive_in_background(team, "write the notes");
    a.f.signal
        .until_async("the request", async || {
            permission_requests(&a.f).await.len() == 1
        })
        .await;
    a.f.clock.advance_millis(1_000);
    let (_team, _) = finish(run).await;
    assert!(!a.f.workspace.join("NOTES.md").exists());
    let request = permission_requests(&a.f).await.remove(0);
    assert_eq!(request.status_at(a.f.clock.now()), RequestStatus::Expired);
    let audit = a.f.audit();
    let line = audit.iter().find(|l| l["tool"] == "write_file").unwrap();
    assert_eq!(line["rule"], "default+approval:expiry");
    assert_eq!(line["decision"], "deny");
    assert!(
        line["reason"]
            .as_str()
            .unwrap()
            .contains("expired; treated as no"),
        "{line}"
    );
    assert_eq!(a.f.events_of("permission_expired").len(), 1);
    assert!(
        a.screen.text().contains("expired unanswered"),
        "{}",
        a.screen.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_denies_the_waiting_ask_and_leaves_its_request_unanswered() {
    let (a, settings) = asked(ApprovalRoute::Person, Duration::from_secs(600));
    let team = troupe::bootstrap::build_team(settings).await.unwrap();
    let runtime = team.runtime.clone();
    let run = drive_in_background(team, "write the notes");
    a.prompted().await;
    a.cancel.cancel();
    let (_team, _) = finish(run).await;
    assert!(!a.f.workspace.join("NOTES.md").exists());
    let request = permission_requests(&a.f).await.remove(0);
    assert_eq!(request.stored_status(), RequestStatus::Pending);
    let audit = a.f.audit();
    let line = audit.iter().find(|l| l["tool"] == "write_file").unwrap();
    assert_eq!(line["rule"], "default+approval:interrupt");
    assert_eq!(line["decision"], "deny");
    // Nothing was written into the lead's mailbox; a later answer finds no call waiting.
    assert_eq!(
        a.f.count("lead", troupe::store::mailbox::MailboxState::Ready)
            .await,
        0
    );
    let desk = ApprovalDesk::new(runtime.protocol().clone());
    desk.answer(&request, &PermissionReply::new(Choice::Once, "", "cli"))
        .await
        .unwrap();
    assert!(!a.f.workspace.join("NOTES.md").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_yes_is_the_recorded_answer() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, writing_lead());
    let mut settings = f.settings(Models::new(&f.signal, &[("lead", &lead)]));
    settings.approval = typed_terminal(b"y\n", true);
    let team = troupe::bootstrap::build_team(settings).await.unwrap();
    let (_team, _) = finish(drive_in_background(team, "write")).await;
    assert!(f.workspace.join("NOTES.md").exists());
    let request = permission_requests(&f).await.remove(0);
    assert_eq!(request.stored_status(), RequestStatus::Approved);
    let reply =
        PermissionReply::from_content(request.resolution().unwrap().content.as_str()).unwrap();
    assert_eq!(reply.by, "terminal");
    assert_eq!(reply.reason, "approved at the terminal");
    let audit = f.audit();
    let line = audit.iter().find(|l| l["tool"] == "write_file").unwrap();
    assert_eq!(line["rule"], "default+approval:terminal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_terminal_a_lead_s_ask_is_denied_at_once_and_registers_nothing() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, writing_lead());
    let mut settings = f.settings(Models::new(&f.signal, &[("lead", &lead)]));
    settings.approval = typed_terminal(b"y\n", false);
    let team = troupe::bootstrap::build_team(settings).await.unwrap();
    let (_team, _) = finish(drive_in_background(team, "write")).await;
    assert!(!f.workspace.join("NOTES.md").exists());
    assert!(permission_requests(&f).await.is_empty());
}

/// The lead spawns `alice`; a permission_request event from her is answered with
/// review_permission (`approve`).
fn routing_lead(approve: bool) -> impl Fn(&Convo<'_>) -> Reply + Send + Sync {
    move |c| {
        if c.calls_named("spawn_teammate").is_empty() {
            return call(
                "spawn_teammate",
                json!({"name": "alice", "role": "writer", "prompt": "Write NOTES.md."}),
            );
        }
        let asks: Vec<_> = c
            .events()
            .into_iter()
            .filter(|e| e["protocol_kind"] == "permission_request")
            .collect();
        if asks.len() > c.calls_named("review_permission").len() {
            return call(
                "review_permission",
                json!({"request_id": asks[0]["request_id"], "approve": approve,
                       "reason": "fine by me"}),
            );
        }
        say("Noted.")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routed_to_the_lead_a_teammate_s_ask_is_answered_with_review_permission() {
    for approve in [true, false] {
        let f = Fixture::new();
        let lead = TestModel::new(&f.signal, routing_lead(approve));
        let alice = TestModel::new(&f.signal, writing_lead());
        let mut settings = f.settings(Models::new(
            &f.signal,
            &[("lead", &lead), ("alice", &alice)],
        ));
        // Nobody at a terminal: routed asks still wait, for the lead.
        settings.approval = typed_terminal(b"", false);
        settings.settings.approvals.route = ApprovalRoute::Lead;
        let team = troupe::bootstrap::build_team(settings).await.unwrap();
        let (_team, _) = finish(drive_in_background(team, "get notes written")).await;
        assert_eq!(
            f.workspace.join("NOTES.md").exists(),
            approve,
            "approve={approve}"
        );
        let request = permission_requests(&f).await.remove(0);
        assert_eq!(request.sender().as_str(), "alice");
        assert_eq!(request.target().as_str(), "lead");
        assert_eq!(
            request.stored_status(),
            if approve {
                RequestStatus::Approved
            } else {
                RequestStatus::Rejected
            }
        );
        let audit = f.audit();
        let line = audit
            .iter()
            .find(|l| l["tool"] == "write_file" && l["agent"] == "alice")
            .unwrap();
        assert_eq!(line["rule"], "default+approval:lead");
        let reason = line["reason"].as_str().unwrap();
        assert!(reason.ends_with("by the lead: fine by me"), "{reason}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lead_cannot_answer_an_ask_meant_for_a_person() {
    let (a, settings) = asked(ApprovalRoute::Person, Duration::from_secs(600));
    let team = troupe::bootstrap::build_team(settings).await.unwrap();
    let runtime = team.runtime.clone();
    let run = drive_in_background(team, "write the notes");
    a.f.signal
        .until_async("the request", async || {
            permission_requests(&a.f).await.len() == 1
        })
        .await;
    let request = permission_requests(&a.f).await.remove(0);
    let tool = troupe::approvals::review_tool::ReviewPermission(runtime.handle());
    let ctx = troupe::tools::ToolContext::new(troupe::wire::AgentName::lead(), &a.f.workspace);
    let refused = troupe::tools::ToolHandler::call(
        &tool,
        &ctx,
        json!({"request_id": request.id().to_string(), "approve": true}),
    )
    .await
    .unwrap_err();
    assert!(
        refused.to_string().contains("addressed to user"),
        "{refused}"
    );
    a.cancel.cancel();
    let (_team, _) = finish(run).await;
    assert!(!a.f.workspace.join("NOTES.md").exists());
}

#[test]
fn of_answerers_racing_in_separate_stores_exactly_one_wins_and_the_others_name_it() {
    use troupe::clock::SystemClock;
    use troupe::ids::RandomIds;
    use troupe::store::mailbox::FileMailboxStore;
    use troupe::store::protocol::{JsonProtocolStore, NewRequest};
    use troupe::team::{Postman, ProtocolRuntime};

    let f = Fixture::new();
    let desk_at = || {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let ids = Arc::new(RandomIds);
        let store =
            Arc::new(JsonProtocolStore::open(&f.layout, clock.clone(), ids.clone()).unwrap());
        let postman = Arc::new(Postman::new(
            Arc::new(FileMailboxStore::new(&f.layout, clock.clone())),
            clock,
            ids,
            Arc::new(troupe::team::NoTeamObserver),
        ));
        ApprovalDesk::new(Arc::new(ProtocolRuntime::new(
            store,
            postman,
            Duration::from_secs(600),
        )))
    };
    let ask = PermissionAsk::new(
        "shell",
        troupe::permissions::Effect::Execute,
        &json!({"command": "make"}),
        None,
        "execute tools ask",
        None,
        None,
    );
    // The answerers race on threads of their own, each with its own runtime; this one sets up
    // and inspects.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let request = runtime
        .block_on(desk_at().store().create(NewRequest {
            kind: RequestKind::Permission,
            sender: troupe::wire::AgentName::lead(),
            target: troupe::wire::AgentName::user(),
            content: troupe::wire::Content::parse(ask.to_content()).unwrap(),
            ttl: Duration::from_secs(600),
        }))
        .unwrap();
    let barrier = Arc::new(std::sync::Barrier::new(8));
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let barrier = barrier.clone();
                let request = request.clone();
                let desk = desk_at();
                s.spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    let choice = if i % 2 == 0 { Choice::Once } else { Choice::No };
                    barrier.wait();
                    runtime.block_on(desk.answer(
                        &request,
                        &PermissionReply::new(choice, format!("answerer {i}"), "cli"),
                    ))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won: Vec<_> = results.iter().filter(|r| r.is_ok()).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    let winner = won[0].as_ref().unwrap();
    for refused in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(refused.code(), "protocol_state_error");
        assert!(
            refused.to_string().contains(&winner.id().to_string()),
            "a refusal names the first answer: {refused}"
        );
    }
    // One answer recorded, one message in the asker's mailbox.
    assert_eq!(
        runtime.block_on(f.count("lead", troupe::store::mailbox::MailboxState::Ready)),
        1
    );
    let recorded = runtime
        .block_on(desk_at().answered(&request))
        .unwrap()
        .unwrap();
    assert_eq!(recorded.message.id(), winner.id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_gate_denies_before_any_permission_request_is_registered() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, |c| {
        if c.calls_named("spawn_teammate").is_empty() {
            return call(
                "spawn_teammate",
                json!({"name": "alice", "role": "writer", "prompt": "Write NOTES.md.",
                       "plan_required": true}),
            );
        }
        say("Noted.")
    });
    let alice = TestModel::new(&f.signal, writing_lead());
    let mut settings = f.settings(Models::new(
        &f.signal,
        &[("lead", &lead), ("alice", &alice)],
    ));
    // A person who approves everything at once: the gate must still come first.
    settings.approval = typed_terminal(b"y\ny\ny\n", true);
    let team = troupe::bootstrap::build_team(settings).await.unwrap();
    let (_team, _) = finish(drive_in_background(team, "go")).await;
    assert!(!f.workspace.join("NOTES.md").exists());
    assert!(permission_requests(&f).await.is_empty());
    let audit = f.audit();
    let line = audit
        .iter()
        .find(|l| l["tool"] == "write_file" && l["agent"] == "alice")
        .unwrap();
    assert_eq!(line["decision"], "deny");
    assert!(line["rule"].as_str().unwrap().contains("plan"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_request_hook_is_told_of_each_registered_ask() {
    let (a, mut settings) = asked(ApprovalRoute::Person, Duration::from_secs(600));
    std::fs::write(
        a.f.workspace.join("page-me.sh"),
        "cat > hook-input.part && mv hook-input.part hook-input.json\n",
    )
    .unwrap();
    settings.settings.hooks = vec![troupe::settings::HookSpec {
        event: troupe::settings::HookEvent::PermissionRequest,
        matcher: Some("write_file".into()),
        command: "sh page-me.sh".into(),
        timeout: troupe::settings::DEFAULT_HOOK_TIMEOUT,
        source: troupe::settings::Source::Project("troupe.toml".into()),
        index: 0,
    }];
    let team = troupe::bootstrap::build_team(settings).await.unwrap();
    let runtime = team.runtime.clone();
    let run = drive_in_background(team, "write the notes");
    a.f.signal
        .until_async("the request", async || {
            permission_requests(&a.f).await.len() == 1
        })
        .await;
    // The hook runs beside the waiting call (a process of its own): its file, within the bound.
    let input = a.f.workspace.join("hook-input.json");
    let deadline = std::time::Instant::now() + super::support::WAIT;
    while !input.exists() {
        assert!(std::time::Instant::now() < deadline, "the hook never ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let told: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&input).unwrap()).unwrap();
    let request = permission_requests(&a.f).await.remove(0);
    assert_eq!(told["event"], "PermissionRequest");
    assert_eq!(told["agent"], "lead");
    assert_eq!(told["tool"], "write_file");
    assert_eq!(told["request_id"], request.id().to_string());
    assert_eq!(told["to"], "user");
    assert_eq!(told["summary"], "write_file: NOTES.md");
    assert_eq!(told["arguments"]["path"], "NOTES.md");
    // Told, not asked: the call still waits for its answer.
    assert!(request.is_pending());
    ApprovalDesk::new(runtime.protocol().clone())
        .answer(&request, &PermissionReply::new(Choice::Once, "ok", "cli"))
        .await
        .unwrap();
    let (_team, _) = finish(run).await;
    assert!(a.f.workspace.join("NOTES.md").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routed_to_the_lead_a_person_may_still_answer_first_and_the_lead_is_refused() {
    let f = Fixture::new();
    let person_answered = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answered = person_answered.clone();
    let lead_saw_it = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let saw = lead_saw_it.clone();
    let review = routing_lead(false);
    // The lead reviews only once the person has answered: its answer comes second.
    let lead = TestModel::new(&f.signal, move |c| {
        let asked = c
            .events()
            .iter()
            .any(|e| e["protocol_kind"] == "permission_request");
        if asked && !answered.load(std::sync::atomic::Ordering::SeqCst) && !c.last_is_tool_result()
        {
            saw.store(true, std::sync::atomic::Ordering::SeqCst);
            return say("Waiting for the person.");
        }
        review(c)
    });
    let alice = TestModel::new(&f.signal, writing_lead());
    let mut settings = f.settings(Models::new(
        &f.signal,
        &[("lead", &lead), ("alice", &alice)],
    ));
    settings.approval = typed_terminal(b"", false);
    settings.settings.approvals.route = ApprovalRoute::Lead;
    settings
        .events
        .listeners
        .push(Arc::new(Bump(f.signal.clone())));
    let team = troupe::bootstrap::build_team(settings).await.unwrap();
    let runtime = team.runtime.clone();
    let run = drive_in_background(team, "get notes written");
    // The lead has the ask in its conversation (an answered request's message would be
    // refused on arrival, and the lead would never see it); then the person answers first.
    f.signal
        .until("the lead to see alice's ask", || {
            lead_saw_it.load(std::sync::atomic::Ordering::SeqCst)
        })
        .await;
    let request = permission_requests(&f).await.remove(0);
    assert_eq!(request.target().as_str(), "lead");
    ApprovalDesk::new(runtime.protocol().clone())
        .answer(
            &request,
            &PermissionReply::new(Choice::Once, "approved with cli (pid 7)", "cli"),
        )
        .await
        .unwrap();
    person_answered.store(true, std::sync::atomic::Ordering::SeqCst);
    runtime.wake(&troupe::wire::AgentName::lead());
    let (_team, _) = finish(run).await;
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("NOTES.md")).unwrap(),
        "hello\n"
    );
    let audit = f.audit();
    let line = audit
        .iter()
        .find(|l| l["tool"] == "write_file" && l["agent"] == "alice")
        .unwrap();
    assert_eq!(line["rule"], "default+approval:cli");
    // The lead's later review (a denial) was refused, naming the first answer.
    let reviews: Vec<_> = f
        .events_of("tool_finished")
        .into_iter()
        .filter(|e| e.fields["tool"] == "review_permission")
        .collect();
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    assert_eq!(reviews[0].fields["outcome"], "error");
    let stored = permission_requests(&f).await.remove(0);
    assert_eq!(stored.stored_status(), RequestStatus::Approved);
}
