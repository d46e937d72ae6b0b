//! Shared fixture for the team runtime tests: a temp workspace with a manual clock and sequential
//! ids, per-agent models that decide from the conversation (and can be held at a gate), a
//! recording observer, and a signal every model call and team update bumps — tests await it
//! (with a timeout) instead of sleeping.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;
use troupe::agent::NullObserver;
use troupe::bootstrap::{build_team, ModelChooser, Team, TeamSettings};
use troupe::clock::{Clock, ManualClock};
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::model::openai::wire;
use troupe::model::{ModelClient, ModelError, ModelRequest, ModelResponse, ToolCall};
use troupe::permissions::AutoApproval;
use troupe::store::mailbox::{FileMailboxStore, MailboxEntry, MailboxState, MailboxStore};
use troupe::team::{DriveOutcome, TeamObserver, TeamUpdate};
use troupe::wire::{AgentName, MailboxMessage, ProtocolRequest, TeammateStatus, UtcTime};

/// The longest any test waits for something to happen before failing.
pub const WAIT: Duration = Duration::from_secs(20);

pub fn name(raw: &str) -> AgentName {
    AgentName::parse(raw).unwrap()
}

/// A counter bumped on every model call and team update.
#[derive(Clone)]
pub struct Signal(Arc<watch::Sender<u64>>);

impl Signal {
    pub fn new() -> Self {
        Self(Arc::new(watch::channel(0).0))
    }

    pub fn bump(&self) {
        self.0.send_modify(|n| *n += 1);
    }

    /// Waits until `cond` holds, re-checking after every bump; fails after [`WAIT`].
    pub async fn until(&self, what: &str, mut cond: impl FnMut() -> bool) {
        let mut rx = self.0.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            rx.borrow_and_update();
            if cond() {
                return;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(result) => result.unwrap(),
                Err(_) => panic!("timed out waiting for {what}"),
            }
        }
    }

    /// [`Self::until`] for a condition that reads an async port (a mailbox, the requests).
    pub async fn until_async(&self, what: &str, mut cond: impl AsyncFnMut() -> bool) {
        let mut rx = self.0.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            rx.borrow_and_update();
            if cond().await {
                return;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(result) => result.unwrap(),
                Err(_) => panic!("timed out waiting for {what}"),
            }
        }
    }
}

/// Records every team update and bumps the signal.
pub struct Recorder {
    updates: Mutex<Vec<TeamUpdate>>,
    signal: Signal,
}

impl Recorder {
    pub fn updates(&self) -> Vec<TeamUpdate> {
        self.updates.lock().unwrap().clone()
    }

    /// Messages sent so far, in order.
    pub fn sent(&self) -> Vec<MailboxMessage> {
        self.updates()
            .into_iter()
            .filter_map(|u| match u {
                TeamUpdate::Sent(m) => Some(m),
                _ => None,
            })
            .collect()
    }

    /// (agent, message id, reason) of every quarantine.
    pub fn quarantined(&self) -> Vec<(String, String, String)> {
        self.updates()
            .into_iter()
            .filter_map(|u| match u {
                TeamUpdate::Quarantined {
                    agent,
                    message,
                    reason,
                } => Some((agent.to_string(), message, reason)),
                _ => None,
            })
            .collect()
    }

    pub fn statuses_of(&self, agent: &str) -> Vec<TeammateStatus> {
        self.updates()
            .into_iter()
            .filter_map(|u| match u {
                TeamUpdate::Status { name, status, .. } if name.as_str() == agent => Some(status),
                _ => None,
            })
            .collect()
    }
}

impl TeamObserver for Recorder {
    fn update(&self, update: &TeamUpdate) {
        self.updates.lock().unwrap().push(update.clone());
        self.signal.bump();
    }
}

/// What a scripted agent does next.
#[derive(Debug, Clone)]
pub enum Reply {
    Text(String),
    Call(&'static str, Value),
}

pub fn say(text: &str) -> Reply {
    Reply::Text(text.to_owned())
}

pub fn call(tool: &'static str, args: Value) -> Reply {
    Reply::Call(tool, args)
}

/// A conversation as the OpenAI wire sends it: `messages` of a Chat Completions body. Both the
/// in-process models and the mock HTTP server decide from this view.
pub struct Convo<'a>(pub &'a [Value]);

impl<'a> Convo<'a> {
    pub fn system(&self) -> &'a str {
        self.0[0]["content"].as_str().unwrap_or("")
    }

    pub fn last_is_tool_result(&self) -> bool {
        self.0.last().is_some_and(|m| m["role"] == "tool")
    }

    /// The last tool result's text.
    pub fn last_tool_result(&self) -> Option<&'a str> {
        self.0
            .last()
            .filter(|m| m["role"] == "tool")
            .and_then(|m| m["content"].as_str())
    }

    /// Arguments of every call of `tool` the agent made so far.
    pub fn calls_named(&self, tool: &str) -> Vec<Value> {
        self.0
            .iter()
            .filter(|m| m["role"] == "assistant")
            .filter_map(|m| m["tool_calls"].as_array())
            .flatten()
            .filter(|c| c["function"]["name"] == tool)
            .map(|c| serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap())
            .collect()
    }

    pub fn user_texts(&self) -> Vec<&'a str> {
        self.0
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .collect()
    }

    /// The JSON bodies of the `[event]` user messages.
    pub fn events(&self) -> Vec<Value> {
        self.user_texts()
            .into_iter()
            .filter_map(|t| t.strip_prefix("[event] "))
            .map(|body| serde_json::from_str(body).unwrap())
            .collect()
    }

    pub fn last_user(&self) -> &'a str {
        self.user_texts().last().copied().unwrap_or("")
    }

    /// A tool-call id unique within this conversation.
    pub fn next_call_id(&self) -> String {
        format!("call_{}", self.0.len())
    }
}

pub type Script = Box<dyn Fn(&Convo<'_>) -> Reply + Send + Sync>;

/// An in-process model for one agent: decides from the conversation, records every request,
/// bumps the signal when a call starts, and holds a call at its gate if one was set.
pub struct TestModel {
    script: Script,
    requests: Mutex<Vec<ModelRequest>>,
    gates: Mutex<HashMap<usize, oneshot::Receiver<()>>>,
    signal: Signal,
}

impl TestModel {
    pub fn new(
        signal: &Signal,
        script: impl Fn(&Convo<'_>) -> Reply + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            script: Box::new(script),
            requests: Mutex::new(Vec::new()),
            gates: Mutex::new(HashMap::new()),
            signal: signal.clone(),
        })
    }

    /// Holds the `call`-th request (1-based) until the returned sender fires (or is dropped).
    pub fn gate(&self, call: usize) -> oneshot::Sender<()> {
        let (tx, rx) = oneshot::channel();
        self.gates.lock().unwrap().insert(call, rx);
        tx
    }

    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap().clone()
    }

    pub fn calls(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    /// The wire `messages` of the `n`-th request (1-based).
    pub fn wire_messages(&self, n: usize) -> Vec<Value> {
        let request = &self.requests()[n - 1];
        wire::request_body("test", request)["messages"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// The user messages of the `n`-th request.
    pub fn user_texts(&self, n: usize) -> Vec<String> {
        let messages = self.wire_messages(n);
        Convo(&messages)
            .user_texts()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }
}

#[async_trait::async_trait]
impl ModelClient for TestModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let gate = {
            let mut requests = self.requests.lock().unwrap();
            requests.push(request.clone());
            self.gates.lock().unwrap().remove(&requests.len())
        };
        self.signal.bump();
        if let Some(gate) = gate {
            let _ = gate.await;
        }
        let body = wire::request_body("test", request);
        let convo = Convo(body["messages"].as_array().unwrap());
        Ok(match (self.script)(&convo) {
            Reply::Text(text) => ModelResponse::text(text, "test"),
            Reply::Call(tool, args) => ModelResponse::tool_calls(
                vec![ToolCall::new(convo.next_call_id(), tool, args.to_string())],
                "test",
            ),
        })
    }
}

/// Each agent's model by name; an agent without one gets a model that only says "ok".
pub struct Models {
    by_agent: HashMap<String, Arc<TestModel>>,
    fallback: Arc<TestModel>,
}

impl Models {
    pub fn new(signal: &Signal, models: &[(&str, &Arc<TestModel>)]) -> Arc<Self> {
        Arc::new(Self {
            by_agent: models
                .iter()
                .map(|(agent, model)| ((*agent).to_owned(), Arc::clone(model)))
                .collect(),
            fallback: TestModel::new(signal, |_| say("ok")),
        })
    }
}

impl ModelChooser for Models {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient> {
        self.by_agent
            .get(agent.as_str())
            .cloned()
            .unwrap_or_else(|| self.fallback.clone())
    }
}

/// A temp workspace, a manual clock, sequential ids, a recorder and its signal.
pub struct Fixture {
    /// Keeps the workspace alive for the test.
    _dir: tempfile::TempDir,
    pub workspace: PathBuf,
    pub layout: Layout,
    pub clock: ManualClock,
    pub ids: Arc<SequentialIds>,
    pub signal: Signal,
    pub recorder: Arc<Recorder>,
}

impl Fixture {
    /// The events of `kind` in the workspace's `.troupe/events.jsonl`, in order.
    pub fn events_of(&self, kind: &str) -> Vec<troupe::wire::Event> {
        troupe::store::events::read::read_all(&self.workspace.join(".troupe/events.jsonl"))
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == kind)
            .collect()
    }

    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let workspace = std::fs::canonicalize(dir.path()).unwrap();
        let signal = Signal::new();
        Self {
            layout: Layout::new(&workspace),
            _dir: dir,
            workspace,
            clock: ManualClock::at_spec_epoch(),
            ids: Arc::new(SequentialIds::new()),
            recorder: Arc::new(Recorder {
                updates: Mutex::new(Vec::new()),
                signal: signal.clone(),
            }),
            signal,
        }
    }

    pub fn now(&self) -> UtcTime {
        self.clock.now()
    }

    pub fn settings(&self, models: Arc<dyn ModelChooser>) -> TeamSettings {
        TeamSettings {
            workspace: self.workspace.clone(),
            clock: Arc::new(self.clock.clone()),
            ids: self.ids.clone(),
            models,
            approval: Arc::new(AutoApproval),
            run_observer: Arc::new(NullObserver),
            team_observer: self.recorder.clone(),
            max_turns: 10,
            request_ttl: Duration::from_secs(300),
            shell_timeout: Duration::from_secs(10),
            watch: false,
            require_plans: false,
            redactor: troupe::secrets::Redactor::default(),
            long_lived: Default::default(),
            events: Default::default(),
            settings: Default::default(),
            sandbox: troupe::bootstrap::SandboxOptions::off(&self.workspace),
            mcp: Default::default(),
            store: Default::default(),
        }
    }

    pub async fn build(&self, models: Arc<dyn ModelChooser>) -> Team {
        build_team(self.settings(models)).await.unwrap()
    }

    /// A mailbox store on the same folders (for setting up and inspecting).
    pub fn mailbox(&self) -> FileMailboxStore {
        FileMailboxStore::new(&self.layout, Arc::new(self.clock.clone()))
    }

    /// The messages in one folder of `agent`'s mailbox, oldest first.
    pub async fn messages(&self, agent: &str, state: MailboxState) -> Vec<MailboxMessage> {
        if !self.layout.mailbox_dir(&name(agent)).is_dir() {
            return Vec::new();
        }
        self.mailbox()
            .list(&name(agent), state)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                MailboxEntry::Message(m) => Some(m),
                MailboxEntry::Invalid { .. } => None,
            })
            .collect()
    }

    pub async fn count(&self, agent: &str, state: MailboxState) -> usize {
        if !self.layout.mailbox_dir(&name(agent)).is_dir() {
            return 0;
        }
        self.mailbox()
            .counts(&name(agent))
            .await
            .unwrap()
            .get(state)
    }

    /// Every protocol request, as `troupe requests` sees it.
    pub async fn requests(&self) -> Vec<ProtocolRequest> {
        use troupe::store::protocol::{JsonProtocolStore, ProtocolStore};
        JsonProtocolStore::open(&self.layout, Arc::new(self.clock.clone()), self.ids.clone())
            .unwrap()
            .list()
            .await
            .unwrap()
    }

    pub fn state_bytes(&self) -> Vec<u8> {
        std::fs::read(self.layout.protocol_state()).unwrap_or_default()
    }

    /// The audit lines, parsed.
    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.layout.audit_log())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub fn status_of(&self, team: &Team, agent: &str) -> Option<TeammateStatus> {
        at_once(team.runtime.status_of(&name(agent)))
    }
}

/// What a team on files answers at once (its roster is in memory), for a condition that
/// cannot wait: `future` polled once, which must be enough.
pub fn at_once<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("a team on files answers at once"),
    }
}

/// Runs the driver on `team` to its end, in the current task.
pub async fn drive(team: &mut Team, prompt: &str) -> DriveOutcome {
    let mut driver = team.driver();
    tokio::time::timeout(
        WAIT,
        driver.run(&mut team.lead, prompt, &CancellationToken::new()),
    )
    .await
    .expect("the run did not end")
    .unwrap()
}

/// Runs the driver on `team` in its own task; the handle gives the team back with the outcome.
pub fn drive_in_background(
    mut team: Team,
    prompt: &str,
) -> tokio::task::JoinHandle<(Team, DriveOutcome)> {
    let prompt = prompt.to_owned();
    tokio::spawn(async move {
        let outcome = drive(&mut team, &prompt).await;
        (team, outcome)
    })
}

/// Awaits a background run, failing after [`WAIT`].
pub async fn finish(run: tokio::task::JoinHandle<(Team, DriveOutcome)>) -> (Team, DriveOutcome) {
    tokio::time::timeout(WAIT, run)
        .await
        .expect("the run did not end")
        .unwrap()
}

/// The `request_id` of a plan request event, if the conversation holds one.
pub fn plan_request_events(convo: &Convo<'_>) -> Vec<Value> {
    convo
        .events()
        .into_iter()
        .filter(|e| e["protocol_kind"] == "plan_approval_request")
        .collect()
}

/// Whether a tool result is the plan gate's denial.
pub fn is_gate_denial(result: &str) -> bool {
    result.starts_with("Error [permission_denied]") && result.contains("plan request")
}
