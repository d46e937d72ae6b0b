//! The runner: one agent's tool-call loop.
//!
//! A turn repeats: call the model with the history and the tools; append its answer; run each
//! requested tool call through the dispatcher and append its result; stop when the model answers
//! without tool calls (or the max-turns bound is reached, or the turn is cancelled).
//!
//! **Safe points.** Cancellation is honoured only where the history is consistent: before a
//! model call (a model call in flight is abandoned and nothing is appended), and between tool
//! calls. When a turn is cancelled after the model asked for tools, every call that did not run
//! is answered with `Error [cancelled]`, so the history never holds a tool call without its
//! result and never a half-written result.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use troupe_wire::AgentName;

use super::compactor::{Compactor, Results};
use super::context::{ContextBudget, Keep, ResultBudget, REACTIVE_KEEP_GROUPS};
use super::history::History;
use super::memory::Memory;
use super::observer::{ProgressTo, RunObserver, Trigger, TurnSummary};
use super::prompt::{compose, note, Section, SystemPromptSource};
use super::transcript::{Origin, Transcript};
use super::usage::{NoUsage, UsageSink};
use crate::error::{tool_error_text, ErrorCode};
use crate::hooks::{CommandHooks, PromptBlocked};
use crate::model::progress;
use crate::model::{
    AssistantMessage, ChatMessage, FinishReason, ModelClient, ModelError, ModelRequest,
    ModelResponse, Purpose, ToolSpec, Usage,
};
use crate::prices::Cost;
use crate::store::artifacts::ArtifactStore;
use crate::tools::{Dispatcher, ToolContext};

/// What the model is told when its answer was cut off by the output limit.
pub const CONTINUE_PROMPT: &str = "Continue exactly where you left off. Do not repeat any text, \
     no apology, no recap. Pick up mid-thought.";

/// How many times one cut-off answer is continued.
pub const MAX_CONTINUATIONS: usize = 3;

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    /// The model answered without tool calls; its text (possibly empty).
    Answered(String),
    /// The model was still calling tools when the max-turns bound was reached.
    MaxTurns { limit: usize },
    /// The turn was cancelled at a safe point.
    Cancelled,
    /// The run's token budget was spent (checked before each model call).
    TokenBudget { limit: u64, used: u64 },
    /// The run's cost budget was spent, by the estimate (checked before each model call).
    CostBudget { limit: Cost, used: Cost },
}

impl TurnEnd {
    /// Its name in one word, for observers: `answered`, `max_turns`, `cancelled`, …
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Answered(_) => "answered",
            Self::MaxTurns { .. } => "max_turns",
            Self::Cancelled => "cancelled",
            Self::TokenBudget { .. } => "token_budget",
            Self::CostBudget { .. } => "cost_budget",
        }
    }

    /// Why the turn ended without an answer, in words; `None` for an answer.
    pub fn stop_reason(&self) -> Option<String> {
        match self {
            Self::Answered(_) => None,
            Self::MaxTurns { limit } => Some(format!(
                "stopped after {limit} model calls without a final answer"
            )),
            Self::Cancelled => Some("cancelled".to_owned()),
            Self::TokenBudget { limit, used } => Some(format!(
                "stopped: the run's token budget of {limit} is spent ({used} used)"
            )),
            Self::CostBudget { limit, used } => Some(format!(
                "stopped: the run's cost budget of {} is spent ({} estimated)",
                limit.text(),
                used.text()
            )),
        }
    }

    /// Whether the run's token or cost budget ended the turn: the run stops.
    pub fn budget_spent(&self) -> bool {
        matches!(self, Self::TokenBudget { .. } | Self::CostBudget { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnOutcome {
    pub end: TurnEnd,
    pub model_calls: usize,
    pub tool_calls: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The model call failed for good (after the client's retries and fallback).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A UserPromptSubmit hook blocked the person's prompt (before any model call).
    #[error(transparent)]
    PromptBlocked(#[from] PromptBlocked),
}

impl ErrorCode for RunnerError {
    fn code(&self) -> &'static str {
        match self {
            Self::Model(e) => e.code(),
            Self::PromptBlocked(_) => "hook_blocked",
        }
    }
}

pub struct Runner {
    agent: AgentName,
    model: Arc<dyn ModelClient>,
    dispatcher: Arc<Dispatcher>,
    /// The function specs offered to the model, in the registry's order (part of the contract).
    tools: Vec<ToolSpec>,
    workspace: PathBuf,
    history: History,
    /// The most model calls one turn may make.
    max_turns: usize,
    observer: Arc<dyn RunObserver>,
    /// Renders the living system prompt, if it lives.
    system_source: Option<Arc<dyn SystemPromptSource>>,
    /// What of the living prompt the model has been shown in this conversation (`None`: nothing
    /// yet by this runner, so the next call rebuilds the system message whole).
    shown: Option<Shown>,
    usage: Arc<dyn UsageSink>,
    /// The run's token budget (all agents together), if any.
    max_run_tokens: Option<u64>,
    /// The run's cost budget (all agents together, estimated by `usage`), if any.
    max_run_cost: Option<Cost>,
    /// Keeps what is sent inside the model's window.
    compactor: Compactor,
    /// Admits tool results into the history (artifacts for large ones).
    results: Results,
    /// Memories selected before a turn (and extracted, when `remember`).
    memory: Option<Arc<Memory>>,
    remember: bool,
    /// Where this run's part of the conversation starts (for the end-of-run extraction).
    run_start: usize,
    /// The settings' UserPromptSubmit and Stop hooks, if any.
    hooks: Option<CommandHooks>,
}

/// The tools `dispatcher` offers the model now, in registry order, without unavailable ones.
fn offered_tools(dispatcher: &Dispatcher) -> Vec<ToolSpec> {
    dispatcher
        .registry()
        .available_definitions()
        .map(|d| ToolSpec {
            name: d.name.clone(),
            description: d.description.clone(),
            parameters: d.parameters.clone(),
        })
        .collect()
}

impl Runner {
    pub const DEFAULT_MAX_TURNS: usize = 50;

    pub fn new(
        agent: AgentName,
        system_prompt: impl Into<String>,
        model: Arc<dyn ModelClient>,
        dispatcher: Arc<Dispatcher>,
        workspace: impl Into<PathBuf>,
        observer: Arc<dyn RunObserver>,
    ) -> Self {
        let tools = offered_tools(&dispatcher);
        let compactor = Compactor::new(
            agent.clone(),
            ContextBudget::for_model("", None),
            model.clone(),
            Arc::new(NoUsage),
            observer.clone(),
        );
        Self {
            agent,
            model,
            dispatcher,
            tools,
            workspace: workspace.into(),
            history: History::new(system_prompt),
            max_turns: Self::DEFAULT_MAX_TURNS,
            observer,
            system_source: None,
            shown: None,
            usage: Arc::new(NoUsage),
            max_run_tokens: None,
            max_run_cost: None,
            compactor,
            results: Results(None),
            memory: None,
            remember: false,
            run_start: 1,
            hooks: None,
        }
    }

    /// Runs `hooks`' UserPromptSubmit hooks on each person's prompt and their Stop hooks when a
    /// turn ends with an answer (a block continues the turn once).
    pub fn with_hooks(mut self, hooks: CommandHooks) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// Keeps requests inside `budget` (compaction) and, with `artifacts`, large tool results
    /// out of the history (kept whole as artifacts, previewed).
    pub fn with_context(mut self, budget: ContextBudget, artifacts: Option<ArtifactStore>) -> Self {
        self.compactor.set_budget(budget);
        self.results = Results(artifacts.map(ResultBudget::new));
        self
    }

    /// Selects relevant memories into the system prompt before each user turn; with
    /// `remember`, extracts new ones before a summary compaction and at the end of the run.
    pub fn with_memory(mut self, memory: Arc<Memory>, remember: bool) -> Self {
        self.compactor.set_memory(remember.then(|| memory.clone()));
        self.memory = Some(memory);
        self.remember = remember;
        self
    }

    /// Selects the memories relevant to `prompt` into the system prompt (no model call when
    /// there are none). A failure leaves the memory section as it was.
    pub async fn recall(&self, prompt: &str) {
        let (Some(memory), Some(source)) = (&self.memory, &self.system_source) else {
            return;
        };
        match memory.relevant(prompt).await {
            Ok(records) => source.set_memory(Memory::render_for_prompt(&records)),
            Err(e) => tracing::warn!(agent = %self.agent, "memory selection failed: {e}"),
        }
    }

    /// Extracts new memories from this run's part of the conversation (when remembering).
    pub async fn remember_run(&self) {
        let (Some(memory), true) = (&self.memory, self.remember) else {
            return;
        };
        let start = self.run_start.clamp(1, self.history.len());
        // The living prompt's notes say how the team stood, not what is worth remembering.
        let conversation: Vec<ChatMessage> = self.history.messages()[start..]
            .iter()
            .zip(&self.history.origins()[start.min(self.history.origins().len())..])
            .filter(|(_, origin)| **origin != Origin::Note)
            .map(|(message, _)| message.clone())
            .collect();
        if conversation.is_empty() {
            return;
        }
        if let Err(e) = memory.remember(&conversation).await {
            tracing::warn!(agent = %self.agent, "memory extraction failed: {e}");
        }
    }

    /// Refreshes the system prompt from `source` before every model call (see
    /// [`super::prompt`]: the changing sections reach the model as notes).
    pub fn with_system_prompt(mut self, source: Arc<dyn SystemPromptSource>) -> Self {
        self.history
            .set_system_prompt(compose(&source.render(), &source.changing()));
        self.system_source = Some(source);
        self
    }

    /// Records every response's token usage in `usage`; with `max_run_tokens`, a turn ends
    /// before a model call once the run's total has reached it.
    pub fn with_usage(mut self, usage: Arc<dyn UsageSink>, max_run_tokens: Option<u64>) -> Self {
        self.compactor.set_usage(usage.clone());
        self.usage = usage;
        self.max_run_tokens = max_run_tokens;
        self
    }

    /// Ends a turn before a model call once the run's estimated cost (`usage`'s
    /// [`UsageSink::run_cost`]) has reached `limit`.
    pub fn with_cost_budget(mut self, limit: Option<Cost>) -> Self {
        self.max_run_cost = limit;
        self
    }

    /// Continues the conversation kept in `transcript` (if any) and keeps writing to it.
    pub async fn with_transcript(
        mut self,
        transcript: Arc<dyn Transcript>,
    ) -> Result<Self, crate::store::IoError> {
        let loaded = transcript.load().await?;
        let system_prompt = self.history.system_prompt().to_owned();
        self.history = History::restore(system_prompt, loaded, transcript).await;
        self.run_start = self.history.len();
        Ok(self)
    }

    pub fn with_max_turns(mut self, max_turns: usize) -> Self {
        self.max_turns = max_turns.max(1);
        self
    }

    pub fn agent(&self) -> &AgentName {
        &self.agent
    }

    pub fn history(&self) -> &History {
        &self.history
    }

    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// Appends a user message once per key (see [`History::push_once`]).
    pub async fn push_user_once(&mut self, key: &str, content: impl Into<String>) -> bool {
        self.history
            .push_once(key, ChatMessage::user(content))
            .await
    }

    /// Appends a person's `prompt` and runs a turn.
    pub async fn run_user_turn(
        &mut self,
        prompt: impl Into<String>,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, RunnerError> {
        let mut prompt = prompt.into();
        if let Some(hooks) = &self.hooks {
            prompt = hooks.user_prompt_submit(&self.agent, prompt).await?;
        }
        self.recall(&prompt).await;
        self.history
            .push_as(Origin::Person, ChatMessage::user(prompt))
            .await;
        self.run_turn(cancel).await
    }

    /// The observer this runner reports to (a caller says through it which messages the next
    /// turn handles).
    pub fn observer(&self) -> &Arc<dyn RunObserver> {
        &self.observer
    }

    /// Runs the loop on the history as it is; the observer sees the turn start and end.
    pub async fn run_turn(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, RunnerError> {
        self.observer.turn_starting(&self.agent).await;
        self.observer.turn_started(&self.agent);
        let result = self.turn_loop(cancel).await;
        match &result {
            Ok(outcome) => self.observer.turn_finished(
                &self.agent,
                Ok(&TurnSummary {
                    end: outcome.end.kind(),
                    model_calls: outcome.model_calls,
                    tool_calls: outcome.tool_calls,
                }),
            ),
            Err(e) => self.observer.turn_finished(&self.agent, Err(e.code())),
        }
        result
    }

    async fn turn_loop(&mut self, cancel: &CancellationToken) -> Result<TurnOutcome, RunnerError> {
        let mut outcome = TurnOutcome {
            end: TurnEnd::Cancelled,
            model_calls: 0,
            tool_calls: 0,
        };
        // A Stop hook's block continues the turn once; a second one is only a warning.
        let mut stop_continued = false;
        loop {
            if cancel.is_cancelled() {
                outcome.end = TurnEnd::Cancelled;
                return Ok(outcome);
            }
            if outcome.model_calls >= self.max_turns {
                outcome.end = TurnEnd::MaxTurns {
                    limit: self.max_turns,
                };
                return Ok(outcome);
            }
            if let Some(limit) = self.max_run_tokens {
                let used = self.usage.run_total();
                if used >= limit {
                    outcome.end = TurnEnd::TokenBudget { limit, used };
                    return Ok(outcome);
                }
            }
            if let Some(limit) = self.max_run_cost {
                let used = self.usage.run_cost();
                if used >= limit {
                    outcome.end = TurnEnd::CostBudget { limit, used };
                    return Ok(outcome);
                }
            }
            self.refresh_system_prompt().await;
            outcome.model_calls += 1;
            self.observer
                .model_call_started(&self.agent, outcome.model_calls);
            let sink = Arc::new(ProgressTo {
                observer: self.observer.clone(),
                agent: self.agent.clone(),
            });
            let response = match progress::observed(sink, self.complete_compacting(cancel)).await {
                Ok(Some(response)) => response,
                Ok(None) => {
                    outcome.end = TurnEnd::Cancelled;
                    return Ok(outcome);
                }
                Err(e) => {
                    self.observer
                        .model_call_failed(&self.agent, &e.to_string(), e.code());
                    return Err(e.into());
                }
            };
            self.observer.model_call_finished(&self.agent, &response);
            let message = response.message;
            if message.tool_calls.is_empty() {
                let text = message.content.clone().unwrap_or_default();
                self.history.push(ChatMessage::Assistant(message)).await;
                if let Some(continuation) = self.stop_hooks(&mut stop_continued).await {
                    self.history.push(ChatMessage::user(continuation)).await;
                    continue;
                }
                outcome.end = TurnEnd::Answered(text);
                return Ok(outcome);
            }
            let calls = message.tool_calls.clone();
            self.history.push(ChatMessage::Assistant(message)).await;
            let ctx = ToolContext::new(self.agent.clone(), self.workspace.clone())
                .with_cancel(cancel.child_token())
                .with_artifacts(self.results.artifacts());
            self.results.start_batch();
            for call in &calls {
                if cancel.is_cancelled() {
                    let text = tool_error_text(
                        "cancelled",
                        "the run was cancelled before this tool call ran",
                    );
                    self.history
                        .push(ChatMessage::tool_result(call.id.clone(), text))
                        .await;
                    continue;
                }
                self.observer.tool_started(&self.agent, call);
                let result = self
                    .dispatcher
                    .dispatch(&ctx, &call.name, &call.arguments)
                    .await;
                outcome.tool_calls += 1;
                self.observer.tool_finished(&self.agent, call, &result);
                let content = self.results.admit(result.content).await;
                self.history
                    .push(ChatMessage::tool_result(call.id.clone(), content))
                    .await;
            }
        }
    }

    /// Runs the Stop hooks after an answer: the continuation when one blocks for the first time
    /// in this turn (`continued` is then set); a later block is a warning and the turn ends.
    async fn stop_hooks(&self, continued: &mut bool) -> Option<String> {
        let blocked = self.hooks.as_ref()?.stop(&self.agent).await?;
        if *continued {
            tracing::warn!(
                agent = %self.agent,
                "hook {} blocked the end of the turn again; the turn ends (a Stop hook continues a turn at most once)",
                blocked.hook
            );
            return None;
        }
        *continued = true;
        Some(blocked.reason)
    }

    /// The next model call on the (compacted) history; a prompt-too-long refusal compacts
    /// down to the last few exchanges and tries once more. `None` when cancelled.
    async fn complete_compacting(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<Option<ModelResponse>, ModelError> {
        // Tools that became unavailable (an MCP server that died) are no longer offered.
        self.tools = offered_tools(&self.dispatcher);
        let system = self.whole_system_prompt();
        let request = self
            .compactor
            .request(&mut self.history, &self.tools, &system, cancel)
            .await;
        self.compacted_with_shown();
        let refused = match self.complete_joined(request, cancel).await {
            Err(e) if e.is_context_too_long() => e,
            other => return other,
        };
        let keep = Keep::Exchanges(REACTIVE_KEEP_GROUPS);
        let compacted = self
            .compactor
            .compact(
                &mut self.history,
                &self.tools,
                &system,
                keep,
                Trigger::PromptTooLong,
                cancel,
            )
            .await;
        self.compacted_with_shown();
        if compacted.is_none() {
            // Nothing older to compact: the request is too long as it is.
            return Err(refused);
        }
        let retry = self
            .compactor
            .request(&mut self.history, &self.tools, &system, cancel)
            .await;
        self.compacted_with_shown();
        self.complete_joined(retry, cancel).await
    }

    /// Brings what the model is shown of the living prompt up to date before a model call: the
    /// whole system message when this runner has shown nothing yet, after a compaction, or when
    /// the stable part changed; otherwise a note of what changed in the changing sections, put
    /// before the newest inputs (when the history ends on a tool result, the note waits for the
    /// next inputs, so the request stays the previous one plus appended messages).
    async fn refresh_system_prompt(&mut self) {
        let Some(source) = &self.system_source else {
            return;
        };
        // What the prompt shows from the ports is read here; rendering reads only memory.
        source.refresh().await;
        let stable = source.render();
        let changing = source.changing();
        let generation = self.history.generation();
        if let Some(shown) = self
            .shown
            .as_mut()
            .filter(|s| s.stable == stable && s.generation == generation)
        {
            if let Some(note) = note(&shown.changing, &changing) {
                if self.history.insert_note(note) {
                    shown.changing = changing;
                }
            }
            return;
        }
        let prompt = compose(&stable, &changing);
        if prompt != self.history.system_prompt() {
            self.history.set_system_prompt(prompt);
        }
        self.shown = Some(Shown {
            stable,
            changing,
            generation,
        });
    }

    /// The system prompt as it stands, whole (with what a waiting note would say): what a
    /// compaction starts the history with.
    fn whole_system_prompt(&self) -> String {
        match &self.system_source {
            Some(source) => compose(&source.render(), &source.changing()),
            None => self.history.system_prompt().to_owned(),
        }
    }

    /// After the compactor ran: a compaction started the history with the whole system prompt,
    /// which shows the model everything (no note is owed).
    fn compacted_with_shown(&mut self) {
        let generation = self.history.generation();
        let (Some(source), Some(shown)) = (&self.system_source, &mut self.shown) else {
            return;
        };
        if shown.generation != generation {
            *shown = Shown {
                stable: source.render(),
                changing: source.changing(),
                generation,
            };
        }
    }

    /// One model call, its usage recorded; `None` when cancelled first.
    async fn complete_once(
        &self,
        request: &ModelRequest,
        cancel: &CancellationToken,
    ) -> Result<Option<ModelResponse>, ModelError> {
        let response = tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(None),
            response = self.model.complete(request) => response?,
        };
        self.usage
            .record(&self.agent, request.purpose, &response)
            .await;
        Ok(Some(response))
    }

    /// A model call whose answer, when cut off by the output limit, is continued and joined.
    async fn complete_joined(
        &self,
        request: ModelRequest,
        cancel: &CancellationToken,
    ) -> Result<Option<ModelResponse>, ModelError> {
        let Some(mut response) = self.complete_once(&request, cancel).await? else {
            return Ok(None);
        };
        let mut continued = 0;
        while response.finish_reason == FinishReason::Length
            && response.message.tool_calls.is_empty()
            && continued < MAX_CONTINUATIONS
        {
            continued += 1;
            let so_far = response.message.content.clone().unwrap_or_default();
            let mut messages = request.messages.clone();
            messages.push(ChatMessage::Assistant(AssistantMessage::text(
                so_far.clone(),
            )));
            messages.push(ChatMessage::user(CONTINUE_PROMPT));
            let next_request = ModelRequest {
                messages,
                tools: request.tools.clone(),
                purpose: Purpose::Turn,
            };
            let Some(next) = self.complete_once(&next_request, cancel).await? else {
                return Ok(None);
            };
            let mut joined = so_far;
            joined.push_str(next.message.content.as_deref().unwrap_or_default());
            let mut reasoning = std::mem::take(&mut response.message.reasoning);
            reasoning.extend(next.message.reasoning);
            response = ModelResponse {
                message: AssistantMessage {
                    content: Some(joined),
                    tool_calls: next.message.tool_calls,
                    reasoning,
                },
                finish_reason: next.finish_reason,
                usage: add_usage(response.usage, next.usage),
                model: next.model,
            };
        }
        Ok(Some(response))
    }
}

/// What of the living prompt a runner's model has been shown.
struct Shown {
    stable: String,
    /// The changing sections as the model knows them: from the system message, then notes.
    changing: Vec<Section>,
    /// The history's generation the system message was built for.
    generation: u64,
}

fn add_usage(a: Option<Usage>, b: Option<Usage>) -> Option<Usage> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Usage {
            prompt_tokens: a.prompt_tokens + b.prompt_tokens,
            completion_tokens: a.completion_tokens + b.completion_tokens,
            total_tokens: a.total_tokens + b.total_tokens,
            cache_read_tokens: a.cache_read_tokens + b.cache_read_tokens,
            cache_write_tokens: a.cache_write_tokens + b.cache_write_tokens,
            estimated: a.estimated || b.estimated,
        }),
        (a, b) => a.or(b),
    }
}
