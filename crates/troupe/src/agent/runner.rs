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

use super::history::History;
use super::observer::RunObserver;
use super::transcript::FileTranscript;
use crate::error::{tool_error_text, ErrorCode};
use crate::model::{ChatMessage, ModelClient, ModelError, ModelRequest, ToolSpec};
use crate::tools::{Dispatcher, ToolContext};

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    /// The model answered without tool calls; its text (possibly empty).
    Answered(String),
    /// The model was still calling tools when the max-turns bound was reached.
    MaxTurns { limit: usize },
    /// The turn was cancelled at a safe point.
    Cancelled,
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
}

impl ErrorCode for RunnerError {
    fn code(&self) -> &'static str {
        match self {
            Self::Model(e) => e.code(),
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
        let tools = dispatcher
            .registry()
            .definitions()
            .map(|d| ToolSpec {
                name: d.name.clone(),
                description: d.description.clone(),
                parameters: d.parameters.clone(),
            })
            .collect();
        Self {
            agent,
            model,
            dispatcher,
            tools,
            workspace: workspace.into(),
            history: History::new(system_prompt),
            max_turns: Self::DEFAULT_MAX_TURNS,
            observer,
        }
    }

    /// Continues the conversation kept in `transcript` (if any) and keeps writing to it.
    pub fn with_transcript(
        mut self,
        transcript: Arc<FileTranscript>,
    ) -> Result<Self, crate::store::IoError> {
        let loaded = transcript.load()?;
        let system_prompt = match self.history.messages().first() {
            Some(ChatMessage::System { content }) => content.clone(),
            _ => String::new(),
        };
        self.history = History::restore(system_prompt, loaded, transcript);
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
    pub fn push_user_once(&mut self, key: &str, content: impl Into<String>) -> bool {
        self.history.push_once(key, ChatMessage::user(content))
    }

    /// Appends `prompt` and runs a turn.
    pub async fn run_user_turn(
        &mut self,
        prompt: impl Into<String>,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, RunnerError> {
        self.history.push(ChatMessage::user(prompt));
        self.run_turn(cancel).await
    }

    /// Runs the loop on the history as it is.
    pub async fn run_turn(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, RunnerError> {
        let mut outcome = TurnOutcome {
            end: TurnEnd::Cancelled,
            model_calls: 0,
            tool_calls: 0,
        };
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
            outcome.model_calls += 1;
            self.observer
                .model_call_started(&self.agent, outcome.model_calls);
            let request = ModelRequest::turn(self.history.messages().to_vec(), self.tools.clone());
            let response = tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    outcome.end = TurnEnd::Cancelled;
                    return Ok(outcome);
                }
                response = self.model.complete(&request) => response?,
            };
            self.observer.model_call_finished(&self.agent, &response);
            let message = response.message;
            if message.tool_calls.is_empty() {
                let text = message.content.clone().unwrap_or_default();
                self.history.push(ChatMessage::Assistant(message));
                outcome.end = TurnEnd::Answered(text);
                return Ok(outcome);
            }
            let calls = message.tool_calls.clone();
            self.history.push(ChatMessage::Assistant(message));
            let ctx = ToolContext::new(self.agent.clone(), self.workspace.clone())
                .with_cancel(cancel.child_token());
            for call in &calls {
                if cancel.is_cancelled() {
                    let text = tool_error_text(
                        "cancelled",
                        "the run was cancelled before this tool call ran",
                    );
                    self.history
                        .push(ChatMessage::tool_result(call.id.clone(), text));
                    continue;
                }
                self.observer.tool_started(&self.agent, call);
                let result = self
                    .dispatcher
                    .dispatch(&ctx, &call.name, &call.arguments)
                    .await;
                outcome.tool_calls += 1;
                self.observer.tool_finished(&self.agent, call, &result);
                self.history
                    .push(ChatMessage::tool_result(call.id.clone(), result.content));
            }
        }
    }
}
