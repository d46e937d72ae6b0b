//! The task board tools (SPEC §4.1, tools 9–13): `create_task`, `get_task`, `list_tasks`,
//! `claim_task`, `complete_task`, over a [`TaskBoard`].
//!
//! The owner of a claim is the calling agent (`ToolContext::agent`), never an argument; the
//! claim's token stays in this process ([`HeldClaims`]), so `complete_task` completes with the
//! claim the caller holds here, and a stale holder's completion is refused. Results
//! are JSON: `{"task": …}` or `{"tasks": […]}`, each task with its `open_blockers`. Board calls
//! run on a task of their own, so that a call stuck on the board's lock is given up when the
//! agent stops. Their scope is troupe's own state
//! (the board under `.troupe/tasks/`), so the default policy allows them without asking.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{str_arg, Effect, Scope, ToolContext, ToolDefinition, ToolError, ToolHandler};
use troupe_wire::AgentName;

use crate::store::tasks::{
    views, HeldClaims, NewTask, Task, TaskBoard, TaskError, TaskId, TaskView, MAX_BLOCKERS,
    MAX_DESCRIPTION_CHARS, MAX_SUBJECT_CHARS, MAX_TAGS, MAX_TAG_CHARS,
};

/// The five tools over one board, in the order SPEC §4.1 offers them.
pub fn task_tools(claims: Arc<HeldClaims>) -> Vec<Arc<dyn ToolHandler>> {
    let board = claims.board().clone();
    vec![
        Arc::new(CreateTask(board.clone())),
        Arc::new(GetTask(board.clone())),
        Arc::new(ListTasks(board)),
        Arc::new(ClaimTask(claims.clone())),
        Arc::new(CompleteTask(claims)),
    ]
}

fn task_error(error: TaskError) -> ToolError {
    ToolError::coded(&error)
}

/// Runs a board call on a task of its own and waits for it: a call stuck on the board's lock
/// (another process holds it) is given up when the tool call is cancelled (the agent stops),
/// instead of holding the turn until the lock is free.
async fn detached<T: Send + 'static>(
    call: impl std::future::Future<Output = Result<T, TaskError>> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::spawn(call)
        .await
        .map_err(|e| ToolError::Failed(format!("the task board call stopped: {e}")))?
        .map_err(task_error)
}

fn task_id_arg(args: &Value) -> Result<TaskId, ToolError> {
    TaskId::parse(str_arg(args, "task_id")?).map_err(task_error)
}

fn id_schema() -> Value {
    json!({"type": "string", "minLength": 36, "maxLength": 36,
           "description": "A task id (a UUID, as create_task or list_tasks return it)."})
}

fn task_id_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"task_id": id_schema()},
        "required": ["task_id"],
        "additionalProperties": false
    })
}

/// One task with its open blockers, which needs the whole board.
async fn task_result(board: &Arc<dyn TaskBoard>, task: Task) -> Result<String, ToolError> {
    let board = board.clone();
    let tasks = detached(async move { board.list().await }).await?;
    let view = views(&tasks)
        .into_iter()
        .find(|v| v.task.id == task.id)
        .unwrap_or(TaskView {
            task,
            open_blockers: Vec::new(),
        });
    Ok(json!({ "task": view }).to_string())
}

pub struct CreateTask(pub Arc<dyn TaskBoard>);

#[async_trait]
impl ToolHandler for CreateTask {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "create_task".to_owned(),
            description: "Add a task to the team's task board, pending and unowned. List in \
                `blocked_by` the ids of tasks that must be completed before this one can be \
                claimed (they must exist). Idle teammates take tasks that fit them from the \
                board on their own: give `assignee` to reserve it for one teammate, or `tags` \
                (skills such as rust, docs) to offer it to teammates whose role names one. \
                Returns the task with its id."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "subject": {"type": "string", "minLength": 1, "maxLength": MAX_SUBJECT_CHARS,
                                "description": "What the task is, in one line."},
                    "description": {"type": "string", "maxLength": MAX_DESCRIPTION_CHARS,
                                    "description": "Details: context, acceptance criteria."},
                    "blocked_by": {"type": "array", "maxItems": MAX_BLOCKERS, "items": id_schema()},
                    "tags": {"type": "array", "maxItems": MAX_TAGS,
                             "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_CHARS},
                             "description": "Skills the task needs (lowercase words): it fits teammates whose role names one."},
                    "assignee": {"type": "string", "minLength": 1,
                                 "description": "The one agent (a teammate's name) who may take it."}
                },
                "required": ["subject"],
                "additionalProperties": false
            }),
            effect: Effect::Write,
        }
    }

    fn scope(&self) -> Scope {
        Scope::TroupeState
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let subject = str_arg(&args, "subject")?.to_owned();
        let description = args
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let blocked_by = match args.get("blocked_by").and_then(Value::as_array) {
            Some(ids) => ids
                .iter()
                .map(|id| {
                    id.as_str()
                        .ok_or_else(|| {
                            ToolError::InvalidArguments("blocked_by holds a non-string".to_owned())
                        })
                        .and_then(|raw| TaskId::parse(raw).map_err(task_error))
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        let tags = match args.get("tags").and_then(Value::as_array) {
            Some(tags) => tags
                .iter()
                .map(|tag| {
                    tag.as_str().map(str::to_owned).ok_or_else(|| {
                        ToolError::InvalidArguments("tags holds a non-string".to_owned())
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        let assignee = match args.get("assignee").and_then(Value::as_str) {
            Some(raw) => Some(
                AgentName::parse(raw)
                    .map_err(|e| ToolError::InvalidArguments(format!("assignee: {e}")))?,
            ),
            None => None,
        };
        let new = NewTask {
            subject,
            description,
            blocked_by,
            tags,
            assignee,
        };
        let board = self.0.clone();
        let task = detached(async move { board.create(new).await }).await?;
        task_result(&self.0, task).await
    }
}

pub struct GetTask(pub Arc<dyn TaskBoard>);

#[async_trait]
impl ToolHandler for GetTask {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "get_task".to_owned(),
            description: "Show one task of the task board: subject, description, status, owner, \
                blockers and which of them are still open."
                .to_owned(),
            parameters: task_id_schema(),
            effect: Effect::Read,
        }
    }

    fn scope(&self) -> Scope {
        Scope::TroupeState
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let id = task_id_arg(&args)?;
        let board = self.0.clone();
        let task = detached(async move { board.get(&id).await }).await?;
        task_result(&self.0, task).await
    }
}

pub struct ListTasks(pub Arc<dyn TaskBoard>);

#[async_trait]
impl ToolHandler for ListTasks {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "list_tasks".to_owned(),
            description: "List every task of the task board in creation order, with status, \
                owner and open blockers. A pending task with no open blockers can be claimed."
                .to_owned(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
            effect: Effect::Read,
        }
    }

    fn scope(&self) -> Scope {
        Scope::TroupeState
    }

    async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<String, ToolError> {
        let board = self.0.clone();
        let tasks = detached(async move { board.list().await }).await?;
        Ok(json!({ "tasks": views(&tasks) }).to_string())
    }
}

pub struct ClaimTask(pub Arc<HeldClaims>);

#[async_trait]
impl ToolHandler for ClaimTask {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "claim_task".to_owned(),
            description: "Claim a pending task: you become its owner and it is in_progress, \
                under a lease that is renewed for you while you work (if you stop, it runs out \
                and the task goes back to the board). Refused if someone else claimed it first, \
                if it is assigned to someone else, or while any task blocking it is not \
                completed."
                .to_owned(),
            parameters: task_id_schema(),
            effect: Effect::Write,
        }
    }

    fn scope(&self) -> Scope {
        Scope::TroupeState
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let id = task_id_arg(&args)?;
        let agent = ctx.agent.clone();
        let claims = self.0.clone();
        let task = detached(async move { claims.claim(&id, &agent).await }).await?;
        task_result(self.0.board(), task).await
    }
}

pub struct CompleteTask(pub Arc<HeldClaims>);

#[async_trait]
impl ToolHandler for CompleteTask {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "complete_task".to_owned(),
            description: "Mark a task you own (claimed, in_progress) as completed; tasks it \
                blocked may then be claimed. Needs your live claim: a claim whose lease ran out \
                (the task went back to the board) cannot complete it."
                .to_owned(),
            parameters: task_id_schema(),
            effect: Effect::Write,
        }
    }

    fn scope(&self) -> Scope {
        Scope::TroupeState
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let id = task_id_arg(&args)?;
        let agent = ctx.agent.clone();
        let claims = self.0.clone();
        let task = detached(async move { claims.complete(&id, &agent).await }).await?;
        task_result(self.0.board(), task).await
    }
}
