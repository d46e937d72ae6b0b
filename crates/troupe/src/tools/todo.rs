//! `todo_write`: the agent's own short checklist for the work at hand (SPEC §4.1, tool 6).
//!
//! Each call replaces the calling agent's whole list and returns it rendered, so the model
//! always sees the list it just wrote. Lists are kept per agent (`ToolContext::agent`) in
//! memory for the run: they are a planning aid for the model, not team state — shared,
//! durable work items belong on the task board. Its scope is troupe's own state, so the
//! default policy allows it without asking (SPEC §7).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use troupe_wire::AgentName;

use super::{Effect, Scope, ToolContext, ToolDefinition, ToolError, ToolHandler};

/// The most items one list may hold.
pub const MAX_TODOS: usize = 50;
/// The longest item, in characters.
pub const MAX_TODO_CHARS: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

impl TodoStatus {
    fn mark(self) -> &'static str {
        match self {
            TodoStatus::Pending => "[ ]",
            TodoStatus::InProgress => "[>]",
            TodoStatus::Completed => "[x]",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoItem {
    pub content: String,
    pub status: TodoStatus,
}

/// The `todo_write` tool. Clones share the same lists.
#[derive(Debug, Clone, Default)]
pub struct TodoTool {
    lists: Arc<Mutex<HashMap<AgentName, Vec<TodoItem>>>>,
}

impl TodoTool {
    pub fn new() -> Self {
        Self::default()
    }

    /// The current list of `agent` (empty if it never wrote one).
    pub fn list(&self, agent: &AgentName) -> Vec<TodoItem> {
        crate::sync::lock(&self.lists)
            .get(agent)
            .cloned()
            .unwrap_or_default()
    }
}

/// Parses and checks a list: at most [`MAX_TODOS`] items, non-blank content, at most one
/// item in progress (the model works on one thing at a time).
pub fn parse_todos(args: &Value) -> Result<Vec<TodoItem>, ToolError> {
    let raw = args
        .get("todos")
        .cloned()
        .ok_or_else(|| ToolError::InvalidArguments("missing argument `todos`".to_owned()))?;
    let todos: Vec<TodoItem> = serde_json::from_value(raw)
        .map_err(|e| ToolError::InvalidArguments(format!("todos: {e}")))?;
    if todos.len() > MAX_TODOS {
        return Err(ToolError::InvalidArguments(format!(
            "a todo list holds at most {MAX_TODOS} items, got {}",
            todos.len()
        )));
    }
    for (i, item) in todos.iter().enumerate() {
        if item.content.trim().is_empty() {
            return Err(ToolError::InvalidArguments(format!(
                "todos[{i}].content is blank"
            )));
        }
        if item.content.chars().count() > MAX_TODO_CHARS {
            return Err(ToolError::InvalidArguments(format!(
                "todos[{i}].content is longer than {MAX_TODO_CHARS} characters"
            )));
        }
    }
    let in_progress = todos
        .iter()
        .filter(|t| t.status == TodoStatus::InProgress)
        .count();
    if in_progress > 1 {
        return Err(ToolError::InvalidArguments(format!(
            "{in_progress} items are in_progress; at most one item may be in_progress at a time"
        )));
    }
    Ok(todos)
}

/// The list as the model sees it: a count line, then `[ ]`, `[>]` or `[x]` and the item.
pub fn render_todos(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "Todo list is empty.".to_owned();
    }
    let done = todos
        .iter()
        .filter(|t| t.status == TodoStatus::Completed)
        .count();
    let mut out = format!("Todo list ({done}/{} completed):", todos.len());
    for item in todos {
        out.push('\n');
        out.push_str(item.status.mark());
        out.push(' ');
        // One item, one line: a newline in the content would look like another item.
        out.push_str(
            &item
                .content
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    out
}

#[async_trait]
impl ToolHandler for TodoTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "todo_write".to_owned(),
            description: format!(
                "Replace your todo list with `todos` and get it back rendered ([ ] pending, \
                 [>] in progress, [x] completed). Use it to plan multi-step work and to track \
                 progress: send the whole list every time, at most {MAX_TODOS} items, at most \
                 one item in_progress. The list is yours alone; for work shared with the team, \
                 use the task board (create_task)."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "maxItems": MAX_TODOS,
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "minLength": 1,
                                            "maxLength": MAX_TODO_CHARS,
                                            "description": "What to do, in one line."},
                                "status": {"type": "string",
                                           "enum": ["pending", "in_progress", "completed"]}
                            },
                            "required": ["content", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["todos"],
                "additionalProperties": false
            }),
            effect: Effect::Write,
        }
    }

    fn scope(&self) -> Scope {
        Scope::TroupeState
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let todos = parse_todos(&args)?;
        let rendered = render_todos(&todos);
        crate::sync::lock(&self.lists).insert(ctx.agent.clone(), todos);
        Ok(rendered)
    }
}
