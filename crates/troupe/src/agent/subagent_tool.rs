//! `task` (SPEC §4.1 tool 7): runs a one-shot subagent — a fresh runner with its own history and
//! only the base tools (`shell`, `read_file`, `write_file`, `edit_file`, `glob`) — and returns its
//! final answer as the tool result.
//!
//! The subagent acts for the calling agent: its tool calls go through the caller's permission
//! policy (same rules, same approval provider, same audit sink) under the caller's name. It has
//! no team or protocol tools and no `task` tool, so it cannot message anyone, spawn teammates,
//! answer protocols or nest. Its turns are bounded; cancelling the caller cancels it.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{RunObserver, Runner, TurnEnd};
use crate::error::ErrorCode;
use crate::model::ModelClient;
use crate::tools::{Dispatcher, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};

pub struct SubagentTool {
    model: Arc<dyn ModelClient>,
    /// The subagent's tools under the caller's policy; built by the composition root.
    dispatcher: Arc<Dispatcher>,
    observer: Arc<dyn RunObserver>,
    max_turns: usize,
    /// What the composition root adds to each subagent's runner (context budget, usage).
    configure: Option<Configure>,
}

/// Adds settings to a freshly built runner.
pub type Configure = Arc<dyn Fn(Runner) -> Runner + Send + Sync>;

impl SubagentTool {
    pub const NAME: &'static str = "task";

    pub fn new(
        model: Arc<dyn ModelClient>,
        dispatcher: Arc<Dispatcher>,
        observer: Arc<dyn RunObserver>,
        max_turns: usize,
    ) -> Self {
        Self {
            model,
            dispatcher,
            observer,
            max_turns,
            configure: None,
        }
    }

    /// Applies `configure` to every subagent's runner.
    pub fn configured(mut self, configure: Configure) -> Self {
        self.configure = Some(configure);
        self
    }
}

fn system_prompt(caller: &str) -> String {
    format!(
        "You are a subagent working for {caller}. Do the one task you are given with your tools, \
         then answer with a short, complete report of what you found or did. You cannot talk to \
         anyone else; your final answer is all {caller} will see."
    )
}

#[async_trait]
impl ToolHandler for SubagentTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: Self::NAME.into(),
            description: "Run a one-shot subagent on a self-contained task (it has shell, \
                read_file, write_file, edit_file and glob, under your permissions, and a fresh \
                conversation). Returns its final report. Use it to keep long explorations out of \
                your own context."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "minLength": 1,
                                    "description": "the task, with everything the subagent needs to know"}
                },
                "required": ["description"],
                "additionalProperties": false
            }),
            effect: Effect::External,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let description = args
            .get("description")
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty())
            .ok_or_else(|| ToolError::InvalidArguments("description must not be blank".into()))?;
        let mut runner = Runner::new(
            ctx.agent.clone(),
            system_prompt(ctx.agent.as_str()),
            self.model.clone(),
            self.dispatcher.clone(),
            ctx.workspace.clone(),
            self.observer.clone(),
        )
        .with_max_turns(self.max_turns);
        if let Some(configure) = &self.configure {
            runner = configure(runner);
        }
        let outcome = runner
            .run_user_turn(description, &ctx.cancel)
            .await
            .map_err(|e| ToolError::Coded {
                code: e.code(),
                message: format!("subagent: {e}"),
            })?;
        match outcome.end {
            TurnEnd::Answered(text) if !text.trim().is_empty() => Ok(text),
            TurnEnd::Answered(_) => Ok("(the subagent finished without a written report)".into()),
            TurnEnd::MaxTurns { limit } => Err(ToolError::Failed(format!(
                "the subagent made {limit} model calls without finishing; give it a smaller task"
            ))),
            TurnEnd::Cancelled => Err(ToolError::Cancelled("the subagent was cancelled".into())),
            end @ (TurnEnd::TokenBudget { .. } | TurnEnd::CostBudget { .. }) => {
                Err(ToolError::Failed(format!(
                    "the subagent {}",
                    end.stop_reason().unwrap_or_default()
                )))
            }
        }
    }
}
