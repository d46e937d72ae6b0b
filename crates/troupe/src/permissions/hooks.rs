//! Hooks around the handler.
//!
//! `PreToolUse` hooks run after argument validation and before the permission policy; any of
//! them may deny the call (the handler then runs zero times). They cannot rewrite arguments:
//! what was validated is what runs. `PostToolUse` hooks observe the result of a handler that
//! ran; they cannot undo or change it. Either kind may add context: text appended to the tool
//! result the model sees (after the result itself, so the result is never altered).

use std::sync::Arc;

use async_trait::async_trait;

use super::rules::PermissionRequest;

/// A PreToolUse hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookDecision {
    Continue,
    /// Continue, and append `context` to the tool result the model sees.
    ContinueWithContext {
        context: String,
    },
    Deny {
        reason: String,
    },
}

#[async_trait]
pub trait PreToolUse: Send + Sync {
    /// Names the hook in the audit log (`hook:<name>`).
    fn name(&self) -> &str;
    async fn before(&self, call: &PermissionRequest<'_>) -> HookDecision;
}

/// What a PostToolUse hook sees of a handler's result.
#[derive(Debug, Clone, Copy)]
pub struct ToolResultView<'a> {
    /// The text given to the model (the `Error [...]` text when `is_error`).
    pub content: &'a str,
    pub is_error: bool,
}

#[async_trait]
pub trait PostToolUse: Send + Sync {
    /// Observes the result; may return context to append to it (what the model sees).
    async fn after(
        &self,
        call: &PermissionRequest<'_>,
        result: ToolResultView<'_>,
    ) -> Option<String>;
}

/// Appends each hook's context to a tool result's text, as the model will see it.
pub fn append_context(content: &mut String, contexts: &[String]) {
    for context in contexts {
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&format!("[hook context] {context}"));
    }
}

/// The hooks of one dispatcher, run in the order added.
#[derive(Clone, Default)]
pub struct Hooks {
    pub pre: Vec<Arc<dyn PreToolUse>>,
    pub post: Vec<Arc<dyn PostToolUse>>,
}

impl Hooks {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_pre(mut self, hook: Arc<dyn PreToolUse>) -> Self {
        self.pre.push(hook);
        self
    }

    pub fn with_post(mut self, hook: Arc<dyn PostToolUse>) -> Self {
        self.post.push(hook);
        self
    }
}
