//! The one call path of every tool (SPEC §4.2). No other code runs a tool handler.
//!
//! Steps, in this order:
//!
//! 1. **parse** the raw argument string as JSON (blank means `{}`); bad JSON → `invalid_arguments`.
//! 2. **look up** the tool by name; unknown → `unknown_tool`.
//!    A tool that is unavailable now (an MCP server that is down) answers with its own error
//!    (`mcp_server_down`) here: nobody is asked to approve a call that cannot run.
//! 3. **validate** the arguments against the tool's schema → `invalid_arguments` naming the path
//!    (for a tool whose schema is outside the checked subset: a JSON object with the schema's
//!    top-level `required` keys, see [`super::ToolHandler::checked_schema`]).
//!    A tool that writes files names the paths ([`super::ToolHandler::written_paths`]); each is
//!    resolved in the workspace and checked against the protected paths
//!    ([`crate::protected`]): a hit goes with the request, and the policy asks a person for it.
//! 4. **PreToolUse hooks**, in order; the first deny stops the call (audited by the policy as
//!    `hook:<name>`).
//! 5. **permission policy**: rules (deny > ask > allow), then the approval provider when the
//!    rules say `ask`; the decision is audited before it takes effect, and if it cannot be
//!    audited the call is refused (`audit_failed`).
//! 6. **handler**, raced against the context's cancellation token.
//! 7. **redact** the result: every secret of the dispatcher's [`Redactor`] (the API key) is
//!    replaced, in results and in errors alike, before anyone sees it.
//! 8. **PostToolUse hooks** observe the redacted result; they cannot change it, but they (and
//!    the PreToolUse hooks) may add context, appended after the result (then redacted again).
//!
//! A deny at any step means the handler runs **zero** times. Nothing here panics or returns an
//! error to the caller: every failure becomes a `ToolOutcome` with `Error [<code>]: <message>`.
//!
//! **Architecture Invariant:** every [`ToolOutcome`] leaves this module redacted, so whatever
//! the runner does with it (history, transcript, observer, artifacts) holds no secret.

use std::sync::Arc;

use serde_json::Value;

use super::confine::Workspace;
use super::registry::ToolRegistry;
use super::{schema, ToolContext, ToolError};
use crate::permissions::hooks::{append_context, HookDecision, Hooks, ToolResultView};
use crate::permissions::policy::{PermissionDecision, PermissionPolicy};
use crate::permissions::rules::PermissionRequest;
use crate::protected::{Hit, ProtectedPaths, Protection};
use crate::secrets::Redactor;

/// The result of one tool call, as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    pub content: String,
    pub is_error: bool,
    /// The permission decision, when the call got that far (a hook deny counts as one).
    pub decision: Option<PermissionDecision>,
}

impl ToolOutcome {
    fn error(error: &ToolError, decision: Option<PermissionDecision>) -> Self {
        Self {
            content: error.to_tool_text(),
            is_error: true,
            decision,
        }
    }

    fn redacted(mut self, redactor: &Redactor) -> Self {
        redactor.redact_in_place(&mut self.content);
        self
    }
}

/// Runs tool calls for one agent's tool set. Cheap to clone.
#[derive(Clone)]
pub struct Dispatcher {
    registry: Arc<ToolRegistry>,
    policy: PermissionPolicy,
    hooks: Hooks,
    /// What no result may hold; none unless the composition root gives one.
    redactor: Redactor,
    /// The settings' `[sandbox] deny_write`: protected paths beside the built-in ones.
    protected_additions: Arc<[String]>,
}

impl Dispatcher {
    pub fn new(registry: Arc<ToolRegistry>, policy: PermissionPolicy, hooks: Hooks) -> Self {
        Self {
            registry,
            policy,
            hooks,
            redactor: Redactor::default(),
            protected_additions: Arc::from(Vec::new()),
        }
    }

    /// Protects `additions` (`[sandbox] deny_write`) as well as the built-in protected paths.
    pub fn with_protected_additions(mut self, additions: &[String]) -> Self {
        self.protected_additions = Arc::from(additions.to_vec());
        self
    }

    /// The first protected path among the paths the call would write, if any.
    fn protected_hit(
        &self,
        ctx: &ToolContext,
        handler: &dyn super::ToolHandler,
        arguments: &Value,
    ) -> Option<Hit> {
        let written = handler.written_paths(arguments);
        if written.is_empty() {
            return None;
        }
        // A path the workspace cannot resolve is refused by the handler itself.
        let workspace = Workspace::new(&ctx.workspace).ok()?;
        let home = crate::sandbox::Host::from_env().home;
        let protected =
            ProtectedPaths::of(workspace.root(), &self.protected_additions, home.as_deref());
        written.into_iter().find_map(|raw| {
            // A path that does not resolve (`..` below a missing folder) is judged as spelled.
            let resolved = workspace
                .resolve_maybe_missing(raw)
                .unwrap_or_else(|_| workspace.root().join(raw));
            protected
                .find(&resolved)
                // troupe's own state is refused outright by the handler, asked of no one.
                .filter(|hit| hit.entry.protection != Protection::TroupeState)
        })
    }

    /// Redacts `redactor`'s secrets from every result (step 7), and hands it to the handlers.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    pub fn policy(&self) -> &PermissionPolicy {
        &self.policy
    }

    /// Runs one tool call through every step above.
    pub async fn dispatch(
        &self,
        ctx: &ToolContext,
        tool: &str,
        raw_arguments: &str,
    ) -> ToolOutcome {
        let ctx = &ctx.clone().with_redactor(self.redactor.clone());
        // Every early way out is redacted too (step 7).
        let fail = |error: &ToolError, decision: Option<PermissionDecision>| {
            ToolOutcome::error(error, decision).redacted(&self.redactor)
        };
        // 1. parse
        let arguments: Value = if raw_arguments.trim().is_empty() {
            Value::Object(serde_json::Map::new())
        } else {
            // Duplicate keys are refused: an approver must never be shown one value while the
            // handler gets another.
            match troupe_wire::strict::parse_json_str(raw_arguments, "") {
                Ok(v) => v,
                Err(e) => {
                    let error = ToolError::InvalidArguments(format!(
                        "the arguments of {tool} are not valid JSON: {e}"
                    ));
                    return fail(&error, None);
                }
            }
        };
        // 2. look up
        let Some(registered) = self.registry.get(tool) else {
            let error = ToolError::UnknownTool(format!(
                "there is no tool named {tool:?}; available tools: {}",
                self.registry.names().join(", ")
            ));
            return fail(&error, None);
        };
        if let Some(error) = registered.handler.unavailable() {
            return fail(&error, None);
        }
        let definition = &registered.definition;
        // 3. validate
        let valid = if registered.handler.checked_schema() {
            schema::validate(&definition.parameters, &arguments)
        } else {
            schema::validate_loosely(&definition.parameters, &arguments)
        };
        if let Err(e) = valid {
            let error = ToolError::InvalidArguments(format!("{tool}: {e}"));
            return fail(&error, None);
        }
        let handler = &registered.handler;
        let protected = self.protected_hit(ctx, handler.as_ref(), &arguments);
        let preview = || handler.preview(ctx, &arguments);
        let request = PermissionRequest {
            agent: &ctx.agent,
            tool,
            effect: definition.effect,
            scope: registered.handler.scope(),
            arguments: &arguments,
            sandbox: registered.handler.sandbox(),
            preview: Some(crate::permissions::Preview(&preview)),
            protected: protected.as_ref(),
        };
        // 4. PreToolUse hooks
        let mut contexts = Vec::new();
        for hook in &self.hooks.pre {
            let reason = match hook.before(&request).await {
                HookDecision::Continue => continue,
                HookDecision::ContinueWithContext { context } => {
                    contexts.push(context);
                    continue;
                }
                HookDecision::Deny { reason } => reason,
            };
            let (decision, recorded) = self
                .policy
                .deny_by_hook(&request, hook.name(), reason)
                .await;
            if let Err(e) = recorded {
                tracing::warn!(error = %e, "audit of a hook deny failed");
            }
            let error = ToolError::PermissionDenied(format!(
                "{tool} was denied by hook {}: {}",
                hook.name(),
                decision.reason
            ));
            return fail(&error, Some(decision));
        }
        // 5. permission policy
        let decision = match self.policy.decide(&request).await {
            Ok(d) => d,
            Err(e) => {
                let error = ToolError::AuditFailed(format!(
                    "{tool} was not run because its permission decision could not be recorded: {e}"
                ));
                return with_context(fail(&error, None), &contexts, &self.redactor);
            }
        };
        if !decision.allowed {
            let error = ToolError::PermissionDenied(format!(
                "{tool} was denied ({}): {}",
                decision.rule, decision.reason
            ));
            return with_context(fail(&error, Some(decision)), &contexts, &self.redactor);
        }
        // 6. handler
        if ctx.cancel.is_cancelled() {
            let error = ToolError::Cancelled(format!("{tool} was not run: the agent is stopping"));
            return with_context(fail(&error, Some(decision)), &contexts, &self.redactor);
        }
        let result = tokio::select! {
            result = registered.handler.call(ctx, arguments.clone()) => result,
            () = ctx.cancel.cancelled() => Err(ToolError::Cancelled(format!(
                "{tool} was cancelled: the agent is stopping"
            ))),
        };
        let outcome = match result {
            Ok(content) => ToolOutcome {
                content,
                is_error: false,
                decision: Some(decision),
            },
            Err(e) => ToolOutcome::error(&e, Some(decision)),
        };
        // 7. redact
        let outcome = outcome.redacted(&self.redactor);
        // 8. PostToolUse hooks
        for hook in &self.hooks.post {
            let added = hook
                .after(
                    &request,
                    ToolResultView {
                        content: &outcome.content,
                        is_error: outcome.is_error,
                    },
                )
                .await;
            contexts.extend(added);
        }
        with_context(outcome, &contexts, &self.redactor)
    }
}

/// `outcome` with the hooks' contexts appended, redacted again (a hook's text may hold anything).
fn with_context(mut outcome: ToolOutcome, contexts: &[String], redactor: &Redactor) -> ToolOutcome {
    if contexts.is_empty() {
        return outcome;
    }
    append_context(&mut outcome.content, contexts);
    outcome.redacted(redactor)
}
