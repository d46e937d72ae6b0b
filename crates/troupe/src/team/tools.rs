//! The team and protocol tools (SPEC §4.1): the lead's `spawn_teammate`, `send_message`,
//! `request_shutdown`, `review_plan`; the teammate's `send_message`, `submit_plan`.
//!
//! The sender of everything is the calling agent (`ToolContext::agent`), never an argument.
//! These tools hold the team weakly: the team owns the runners that own them. Who may call the
//! lead's tools is the permission policy's business ([`super::lead_only`]), not theirs.

use async_trait::async_trait;
use serde_json::{json, Value};
use troupe_wire::{AgentName, Isolation, OrdinaryKind, RequestId, RequestKind};

use super::definitions::AgentDefinition;
use super::error::TeamError;
use super::runtime::{TeamHandle, TeamRuntime};
use crate::tools::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};

fn team_error(e: TeamError) -> ToolError {
    ToolError::coded(&e)
}

fn name_arg(args: &Value, key: &str) -> Result<AgentName, ToolError> {
    AgentName::parse(str_arg(args, key)?).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

fn schema(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// The `request_id` and `approve` of a review tool's call (`review_plan`, `review_permission`):
/// an id that is not one is `protocol_not_found`, like an unknown one.
pub(crate) fn decision_args(args: &Value) -> Result<(RequestId, bool), ToolError> {
    let request_id =
        RequestId::parse(str_arg(args, "request_id")?).map_err(|e| ToolError::Coded {
            code: "protocol_not_found",
            message: e.to_string(),
        })?;
    let approve = args
        .get("approve")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok((request_id, approve))
}

fn render(value: Value) -> String {
    value.to_string()
}

/// `spawn_teammate`, with the run's default isolation (`[team] isolation`, `--isolation`) for
/// calls that do not name one.
pub struct SpawnTeammate(pub TeamHandle, pub Isolation);

#[async_trait]
impl ToolHandler for SpawnTeammate {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "spawn_teammate".into(),
            description:
                "Create a persistent teammate with its own conversation and tools (shell, \
                read_file, write_file, send_message, submit_plan, edit_file, glob, grep, and the \
                task board's list_tasks, get_task, claim_task, complete_task on your board) and \
                give it its first task. The teammate works in the background; its results arrive \
                later as events. With plan_required: true it cannot write, run commands or claim \
                tasks until you approve a plan of its (review_plan). With agent: \"<definition>\" it is built from that agent \
                definition (its instructions, tools, plan rule and model). The name of a teammate that shut down or failed can be used \
                again: that starts a new teammate with a fresh conversation. With isolation: \
                \"worktree\" (a git repository only) it works in its own git worktree on branch \
                troupe/<name>, made from your HEAD; its work is committed there and you bring it \
                into your checkout with merge_teammate."
                    .into(),
            parameters: schema(
                json!({
                    "name": {"type": "string", "minLength": 1, "description": "a lowercase slug, e.g. writer"},
                    "role": {"type": "string", "minLength": 1, "description": "what this teammate is for"},
                    "prompt": {"type": "string", "minLength": 1, "description": "its first task"},
                    "plan_required": {"type": "boolean", "description": "gate it from its first call until you approve a plan of its (default false: gated only once it submits a plan; a definition with plan_required: true gates it anyway)"},
                    "agent": {"type": "string", "minLength": 1, "description": "the agent definition (agents/<name>.md) to build it from, as listed in your system prompt"},
                    "isolation": {"type": "string", "enum": ["worktree", "none"], "description": "where it works: \"worktree\" (its own git worktree and branch, merged back with merge_teammate) or \"none\" (your checkout); the run's default when absent"}
                }),
                &["name", "role", "prompt"],
            ),
            effect: Effect::External,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let name = name_arg(&args, "name")?;
        let team = self.0.upgrade().map_err(team_error)?;
        let definition = match args.get("agent") {
            None | Some(Value::Null) => None,
            Some(_) => Some(definition_arg(&team, str_arg(&args, "agent")?)?),
        };
        let plan_required = args
            .get("plan_required")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            || definition.as_ref().is_some_and(|d| d.plan_required);
        let role = str_arg(&args, "role")?;
        let isolation = match args.get("isolation") {
            None | Some(Value::Null) => self.1,
            Some(_) => Isolation::parse(str_arg(&args, "isolation")?)
                .map_err(|e| ToolError::InvalidArguments(e.to_string()))?,
        };
        if isolation == Isolation::Worktree {
            let worktrees = team.worktrees().cloned().ok_or_else(|| {
                ToolError::InvalidArguments(
                    "isolation \"worktree\" is not available in this team".into(),
                )
            })?;
            let preparing = name.clone();
            crate::sync::offload("spawn_teammate", move || worktrees.prepare(&preparing))
                .await
                .map_err(|e| ToolError::Failed(e.to_string()))?
                .map_err(|e| ToolError::coded(&e))?;
        }
        let spawned = team
            .spawn_defined(
                &name,
                role,
                str_arg(&args, "prompt")?,
                plan_required,
                definition.as_ref().map(|d| d.name.clone()),
                isolation,
            )
            .await
            .map_err(team_error)?;
        let gated = if spawned.gate.from_first_call() {
            "from its first call until you approve a plan of its"
        } else {
            "only once it submits a plan, until you approve it"
        };
        let mut result = json!({
            "spawned": name,
            "status": "running",
            "plan_required": plan_required,
            "gated": gated,
            "note": "its result will arrive as an event",
        });
        if let Some(definition) = &definition {
            result["agent"] = json!(definition.name.as_str());
        }
        if isolation == Isolation::Worktree {
            if let Some(worktrees) = team.worktrees() {
                let path = worktrees.path_of(&name);
                result["isolation"] = json!("worktree");
                result["branch"] = json!(crate::worktree::branch_of(&name));
                result["worktree"] = json!(path
                    .strip_prefix(&ctx.workspace)
                    .unwrap_or(&path)
                    .display()
                    .to_string());
            }
        }
        if let Some(replaced) = spawned.replaced {
            result["replaced"] = json!(replaced.as_str());
            result["earlier_transcript"] = json!(spawned.earlier_transcript.as_ref().map(|p| {
                p.strip_prefix(&ctx.workspace)
                    .unwrap_or(p)
                    .display()
                    .to_string()
            }));
            result["quarantined_leftover_messages"] = json!(spawned.quarantined);
        }
        Ok(render(result))
    }
}

/// The definition named by `spawn_teammate`'s `agent`; an unknown one is `invalid_arguments`
/// naming the known ones.
fn definition_arg(team: &TeamRuntime, raw: &str) -> Result<AgentDefinition, ToolError> {
    let found = AgentName::parse(raw)
        .ok()
        .and_then(|name| team.definition(&name));
    found.ok_or_else(|| {
        let known: Vec<String> = team
            .definition_names()
            .iter()
            .map(ToString::to_string)
            .collect();
        let known = if known.is_empty() {
            "none (the workspace has no valid agents/*.md)".to_owned()
        } else {
            known.join(", ")
        };
        let why = team
            .definition_problem(raw)
            .map(|why| format!(" (agents/{raw}.md was skipped: {why})"))
            .unwrap_or_default();
        ToolError::InvalidArguments(format!(
            "unknown agent definition {raw:?}{why}; known: {known}"
        ))
    })
}

pub struct SendMessage(pub TeamHandle);

#[async_trait]
impl ToolHandler for SendMessage {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "send_message".into(),
            description:
                "Send a message to another agent of the team (`lead` or a teammate's name). \
                It is delivered durably to their mailbox."
                    .into(),
            parameters: schema(
                json!({
                    "to": {"type": "string", "minLength": 1},
                    "content": {"type": "string", "minLength": 1}
                }),
                &["to", "content"],
            ),
            effect: Effect::External,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let to = name_arg(&args, "to")?;
        if to == ctx.agent {
            return Err(ToolError::InvalidArguments(
                "an agent cannot message itself".into(),
            ));
        }
        let team = self.0.upgrade().map_err(team_error)?;
        let content = str_arg(&args, "content")?;
        if !to.is_lead() {
            team.check_reachable(&to).await.map_err(team_error)?;
        }
        let message = team
            .postman()
            .send_ordinary(&ctx.agent, &to, OrdinaryKind::Message, content)
            .await
            .map_err(team_error)?;
        Ok(render(json!({"sent": message.id(), "to": to})))
    }
}

pub struct RequestShutdown(pub TeamHandle);

#[async_trait]
impl ToolHandler for RequestShutdown {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "request_shutdown".into(),
            description: "Ask a teammate to shut down gracefully. It finishes the message it is \
                working on, answers, and takes no more messages. The answer arrives as an event."
                .into(),
            parameters: schema(
                json!({"teammate": {"type": "string", "minLength": 1}}),
                &["teammate"],
            ),
            effect: Effect::External,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let teammate = name_arg(&args, "teammate")?;
        let team = self.0.upgrade().map_err(team_error)?;
        team.check_reachable(&teammate).await.map_err(team_error)?;
        let request = team
            .protocol()
            .open(
                RequestKind::Shutdown,
                &ctx.agent,
                &teammate,
                "Please finish your current work and shut down.",
            )
            .await
            .map_err(team_error)?;
        Ok(render(json!({
            "request_id": request.id(),
            "status": "pending",
            "expires_at_utc": request.expires_at_utc(),
        })))
    }
}

pub struct ReviewPlan(pub TeamHandle);

#[async_trait]
impl ToolHandler for ReviewPlan {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "review_plan".into(),
            description: "Approve or reject a teammate's pending plan (the request_id comes from \
                its plan_approval_request event). While a plan is pending or rejected the teammate \
                cannot write or execute."
                .into(),
            parameters: schema(
                json!({
                    "request_id": {"type": "string", "minLength": 1},
                    "approve": {"type": "boolean"},
                    "feedback": {"type": "string"}
                }),
                &["request_id", "approve"],
            ),
            effect: Effect::External,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let (request_id, approve) = decision_args(&args)?;
        let feedback = args.get("feedback").and_then(Value::as_str);
        let team = self.0.upgrade().map_err(team_error)?;
        let statuses = troupe_wire::TeamRoster {
            version: troupe_wire::TeamRoster::VERSION,
            teammates: team.roster().await,
        };
        let response = team
            .protocol()
            .review_plan(&ctx.agent, request_id, approve, feedback, &statuses)
            .await
            .map_err(team_error)?;
        Ok(render(json!({
            "request_id": request_id,
            "approved": approve,
            "response_message_id": response.id(),
            "to": response.recipient(),
        })))
    }
}

pub struct SubmitPlan(pub TeamHandle);

#[async_trait]
impl ToolHandler for SubmitPlan {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "submit_plan".into(),
            description: "Submit your plan to the lead for approval. Until the lead approves it, \
                your write and execute tools are blocked; the decision arrives as a message."
                .into(),
            parameters: schema(
                json!({"plan": {"type": "string", "minLength": 1}}),
                &["plan"],
            ),
            effect: Effect::External,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        if ctx.agent.is_lead() {
            return Err(ToolError::PermissionDenied(
                "the lead does not submit plans".into(),
            ));
        }
        let plan = str_arg(&args, "plan")?;
        if plan.trim().is_empty() {
            return Err(ToolError::InvalidArguments("plan must not be blank".into()));
        }
        let team = self.0.upgrade().map_err(team_error)?;
        let request = team
            .protocol()
            .open(
                RequestKind::PlanApproval,
                &ctx.agent,
                &AgentName::lead(),
                plan,
            )
            .await
            .map_err(team_error)?;
        Ok(render(json!({
            "request_id": request.id(),
            "status": "pending",
            "expires_at_utc": request.expires_at_utc(),
            "note": "write and execute tools stay blocked until the lead approves",
        })))
    }
}
