//! Command hooks: the `[[hooks]]` of the settings (SPEC §11), run as external commands. (A layer
//! above `permissions` and `process`, whose traits and process groups it uses.)
//!
//! A hook runs `sh -c COMMAND` in the workspace, in its own process group
//! ([`crate::process::GroupChild`]), with one JSON object on stdin:
//! `{"event","agent","tool","arguments","result","prompt","run_id","workspace"}` (the fields
//! that do not apply to the event are left out; `result` is `{content,is_error}`).
//!
//! Its answer:
//! - exit 0: continue. stdout, when it is a JSON object, may hold `decision` (`"block"` or
//!   `"allow"`), `reason`, and `additional_context` (text added to what the model sees).
//! - exit 2: block; its stderr (trimmed, capped) is the reason given to the model.
//! - any other exit, a crash, a timeout (the whole group is killed), or stdout that is not a
//!   JSON object: a warning (`tracing::warn!`), and the call continues.
//!
//! The four events: PreToolUse and PostToolUse are [`PreToolUse`]/[`PostToolUse`] hooks of the
//! dispatcher ([`CommandHooks::tool_hooks`]); UserPromptSubmit and Stop are run by the runner
//! ([`CommandHooks::user_prompt_submit`], [`CommandHooks::stop`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use troupe_wire::AgentName;

use crate::permissions::hooks::{HookDecision, Hooks, PostToolUse, PreToolUse, ToolResultView};
use crate::permissions::rules::PermissionRequest;
use crate::process::{describe_status, CappedOutput, Ending, GroupChild, SplitOutput, Stop};
use crate::sandbox::Sandbox;
use crate::settings::{HookEvent, HookSpec};

/// At most this many bytes of a hook's stderr become a block reason.
pub const REASON_CAP: usize = 2_000;
/// At most this many bytes of a hook's stdout are read as its answer.
pub const ANSWER_CAP: usize = 64 * 1024;

/// Whether a hook applies to a tool call: `(tool, arguments)`.
pub type ToolMatcher = Arc<dyn Fn(&str, &Value) -> bool + Send + Sync>;
/// Makes the matcher of a hook's `matcher` setting (the seam for rule-style patterns).
pub type MatcherFactory = Arc<dyn Fn(Option<&str>) -> ToolMatcher + Send + Sync>;

/// The matcher of a bare tool name: none or `*` matches every call, a name matches that
/// tool. A rule-style pattern (`shell(cargo test:*)`) matches every call of its tool (the
/// script sees the arguments) until pattern matching is plugged in with
/// [`CommandHooks::with_matchers`].
pub fn tool_name_matcher(pattern: Option<&str>) -> ToolMatcher {
    let name = match pattern.map(str::trim) {
        None | Some("") | Some("*") => return Arc::new(|_: &str, _: &Value| true),
        Some(p) => p.split('(').next().unwrap_or(p).trim().to_owned(),
    };
    Arc::new(move |tool: &str, _: &Value| tool == name)
}

/// How a hook is named in warnings, errors and the audit line: `troupe.toml hooks[0] PreToolUse`.
pub fn hook_name(spec: &HookSpec) -> String {
    format!(
        "{} hooks[{}] {}",
        spec.source.short(),
        spec.index,
        spec.event.as_str()
    )
}

/// What one hook, or the hooks of one event in order, said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookOutcome {
    /// The hook that blocked and its reason; the hooks after it did not run.
    pub blocked: Option<Blocked>,
    /// Every `additional_context`, in hook order.
    pub contexts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub hook: String,
    pub reason: String,
}

/// A person's prompt blocked by a UserPromptSubmit hook.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the prompt was blocked by hook {hook}: {reason}")]
pub struct PromptBlocked {
    pub hook: String,
    pub reason: String,
}

/// Runs one hook with `input` on stdin; never fails (a failure is a warning and a continue).
pub async fn run_hook(
    spec: &HookSpec,
    workspace: &Path,
    input: &Value,
    sandbox: Option<&Sandbox>,
) -> HookOutcome {
    let name = hook_name(spec);
    let continue_with = |context: Option<String>| HookOutcome {
        blocked: None,
        contexts: context.into_iter().collect(),
    };
    let child = match GroupChild::spawn_with_input(
        &spec.command,
        workspace,
        format!("{input}\n").into_bytes(),
        sandbox,
    ) {
        Ok(child) => child,
        Err(e) => {
            tracing::warn!("hook {name} could not start ({e}); continuing");
            return continue_with(None);
        }
    };
    let mut output = SplitOutput {
        stdout: CappedOutput::head_and_tail(ANSWER_CAP),
        stderr: CappedOutput::head_and_tail(REASON_CAP),
    };
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let ending = child
        .run(
            &mut output,
            Some(deadline),
            &CancellationToken::new(),
            Stop::Kill,
        )
        .await;
    let status = match ending {
        Ok(Ending::Exited(status)) => status,
        Ok(Ending::TimedOut) => {
            tracing::warn!(
                "hook {name} timed out after {} and was killed; continuing",
                crate::process::describe_duration(spec.timeout)
            );
            return continue_with(None);
        }
        Ok(Ending::Cancelled) => return continue_with(None),
        Err(e) => {
            tracing::warn!("hook {name} failed ({e}); continuing");
            return continue_with(None);
        }
    };
    match status.code() {
        Some(0) => answer(&name, output.stdout.render().trim()),
        Some(2) => {
            let stderr = output.stderr.render();
            let reason = match stderr.trim() {
                "" => format!("blocked by hook {name}"),
                text => text.to_owned(),
            };
            HookOutcome {
                blocked: Some(Blocked { hook: name, reason }),
                contexts: Vec::new(),
            }
        }
        _ => {
            let stderr = output.stderr.render();
            tracing::warn!(
                "hook {name} failed ({}){}; continuing",
                describe_status(status),
                match stderr.trim() {
                    "" => String::new(),
                    text => format!(": {text}"),
                }
            );
            continue_with(None)
        }
    }
}

/// The outcome of a hook that exited 0 with `stdout`.
fn answer(name: &str, stdout: &str) -> HookOutcome {
    let mut outcome = HookOutcome::default();
    if stdout.is_empty() {
        return outcome;
    }
    let object = match troupe_wire::strict::parse_json_str(stdout, "hook output") {
        Ok(Value::Object(object)) => object,
        Ok(_) => {
            tracing::warn!("hook {name} printed JSON that is not an object; continuing");
            return outcome;
        }
        Err(e) => {
            tracing::warn!("hook {name} printed output that is not JSON ({e}); continuing");
            return outcome;
        }
    };
    let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_owned);
    if let Some(context) = text("additional_context").filter(|c| !c.trim().is_empty()) {
        outcome.contexts.push(context);
    }
    match object.get("decision") {
        None | Some(Value::Null) => {}
        Some(Value::String(d)) if d == "allow" => {}
        Some(Value::String(d)) if d == "block" => {
            let reason = text("reason")
                .filter(|r| !r.trim().is_empty())
                .unwrap_or_else(|| format!("blocked by hook {name}"));
            outcome.blocked = Some(Blocked {
                hook: name.to_owned(),
                reason,
            });
        }
        Some(other) => {
            tracing::warn!(
                "hook {name}: decision {other} is neither \"block\" nor \"allow\"; continuing"
            );
        }
    }
    outcome
}

struct Entry {
    spec: HookSpec,
    matcher: ToolMatcher,
}

/// The command hooks of a run: built once from the settings, shared by every agent.
#[derive(Clone)]
pub struct CommandHooks {
    entries: Arc<Vec<Entry>>,
    workspace: PathBuf,
    run_id: String,
    /// Set when the settings confine hooks too (`[sandbox] hooks = true`).
    sandbox: Option<Arc<Sandbox>>,
}

impl CommandHooks {
    /// The hooks of `specs`, run in `workspace`, with bare-tool-name matchers.
    pub fn new(
        specs: Vec<HookSpec>,
        workspace: impl Into<PathBuf>,
        run_id: impl Into<String>,
    ) -> Self {
        Self::with_matchers(specs, workspace, run_id, Arc::new(tool_name_matcher))
    }

    /// Like [`CommandHooks::new`], with each hook's matcher made by `matchers`.
    pub fn with_matchers(
        specs: Vec<HookSpec>,
        workspace: impl Into<PathBuf>,
        run_id: impl Into<String>,
        matchers: MatcherFactory,
    ) -> Self {
        let entries = specs
            .into_iter()
            .map(|spec| Entry {
                matcher: matchers(spec.matcher.as_deref()),
                spec,
            })
            .collect();
        Self {
            entries: Arc::new(entries),
            workspace: workspace.into(),
            run_id: run_id.into(),
            sandbox: None,
        }
    }

    /// Runs every hook command confined by `sandbox`.
    pub fn confined(mut self, sandbox: Arc<Sandbox>) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn has(&self, event: HookEvent) -> bool {
        self.entries.iter().any(|e| e.spec.event == event)
    }

    /// The dispatcher hooks: one PreToolUse/PostToolUse hook per entry of that event.
    pub fn tool_hooks(&self) -> Hooks {
        let mut hooks = Hooks::new();
        for (index, entry) in self.entries.iter().enumerate() {
            let hook = CommandToolHook {
                hooks: self.clone(),
                index,
                name: hook_name(&entry.spec),
            };
            match entry.spec.event {
                HookEvent::PreToolUse => hooks = hooks.with_pre(Arc::new(hook)),
                HookEvent::PostToolUse => hooks = hooks.with_post(Arc::new(hook)),
                HookEvent::UserPromptSubmit | HookEvent::Stop | HookEvent::PermissionRequest => {}
            }
        }
        hooks
    }

    /// The stdin object of `event` for `agent`, with `fields` beside the common ones.
    fn input(&self, event: HookEvent, agent: &AgentName, fields: Map<String, Value>) -> Value {
        let mut object = Map::new();
        object.insert("event".into(), event.as_str().into());
        object.insert("agent".into(), agent.as_str().into());
        object.extend(fields);
        object.insert("run_id".into(), self.run_id.clone().into());
        object.insert(
            "workspace".into(),
            self.workspace.display().to_string().into(),
        );
        Value::Object(object)
    }

    /// Runs every hook of `event` in order until one blocks.
    async fn run_event(&self, event: HookEvent, input: &Value) -> HookOutcome {
        let mut all = HookOutcome::default();
        for entry in self.entries.iter().filter(|e| e.spec.event == event) {
            let outcome =
                run_hook(&entry.spec, &self.workspace, input, self.sandbox.as_deref()).await;
            all.contexts.extend(outcome.contexts);
            if outcome.blocked.is_some() {
                all.blocked = outcome.blocked;
                break;
            }
        }
        all
    }

    /// UserPromptSubmit: the prompt to use (with every hook's context appended), or the block.
    pub async fn user_prompt_submit(
        &self,
        agent: &AgentName,
        prompt: String,
    ) -> Result<String, PromptBlocked> {
        if !self.has(HookEvent::UserPromptSubmit) {
            return Ok(prompt);
        }
        let mut fields = Map::new();
        fields.insert("prompt".into(), prompt.clone().into());
        let input = self.input(HookEvent::UserPromptSubmit, agent, fields);
        let outcome = self.run_event(HookEvent::UserPromptSubmit, &input).await;
        if let Some(Blocked { hook, reason }) = outcome.blocked {
            return Err(PromptBlocked { hook, reason });
        }
        Ok(join(prompt, &outcome.contexts))
    }

    /// Stop: when a hook blocks, the continuation to give the agent as a user message (the
    /// reason, then every context); `None` lets the turn end.
    pub async fn stop(&self, agent: &AgentName) -> Option<Blocked> {
        if !self.has(HookEvent::Stop) {
            return None;
        }
        let input = self.input(HookEvent::Stop, agent, Map::new());
        let outcome = self.run_event(HookEvent::Stop, &input).await;
        outcome.blocked.map(|Blocked { hook, reason }| Blocked {
            hook,
            reason: join(reason, &outcome.contexts),
        })
    }
}

impl CommandHooks {
    /// PermissionRequest: tells every hook of the event that `agent`'s call of `tool` waits
    /// for an answer (`request_id`, the `arguments`, `summary`, who it is `to`). A notice — to
    /// page a person, say — so its answer is not read; a hook that fails is a warning.
    pub async fn permission_request(
        &self,
        agent: &AgentName,
        tool: &str,
        arguments: &Value,
        fields: Map<String, Value>,
    ) {
        if !self.has(HookEvent::PermissionRequest) {
            return;
        }
        let mut all = fields;
        all.insert("tool".into(), tool.into());
        all.insert("arguments".into(), arguments.clone());
        let input = self.input(HookEvent::PermissionRequest, agent, all);
        for entry in self
            .entries
            .iter()
            .filter(|e| e.spec.event == HookEvent::PermissionRequest)
            .filter(|e| (e.matcher)(tool, arguments))
        {
            run_hook(
                &entry.spec,
                &self.workspace,
                &input,
                self.sandbox.as_deref(),
            )
            .await;
        }
    }
}

fn join(mut text: String, contexts: &[String]) -> String {
    for context in contexts {
        text.push_str("\n\n");
        text.push_str(context);
    }
    text
}

/// One PreToolUse or PostToolUse entry as a dispatcher hook.
struct CommandToolHook {
    hooks: CommandHooks,
    index: usize,
    name: String,
}

impl CommandToolHook {
    fn entry(&self) -> Option<&Entry> {
        self.hooks.entries.get(self.index)
    }

    fn input(
        &self,
        call: &PermissionRequest<'_>,
        event: HookEvent,
        result: Option<Value>,
    ) -> Value {
        let mut fields = Map::new();
        fields.insert("tool".into(), call.tool.into());
        fields.insert("arguments".into(), call.arguments.clone());
        if let Some(result) = result {
            fields.insert("result".into(), result);
        }
        self.hooks.input(event, call.agent, fields)
    }
}

#[async_trait]
impl PreToolUse for CommandToolHook {
    fn name(&self) -> &str {
        &self.name
    }

    async fn before(&self, call: &PermissionRequest<'_>) -> HookDecision {
        let Some(entry) = self.entry() else {
            return HookDecision::Continue;
        };
        if !(entry.matcher)(call.tool, call.arguments) {
            return HookDecision::Continue;
        }
        let input = self.input(call, HookEvent::PreToolUse, None);
        let outcome = run_hook(
            &entry.spec,
            &self.hooks.workspace,
            &input,
            self.hooks.sandbox.as_deref(),
        )
        .await;
        match (outcome.blocked, outcome.contexts.is_empty()) {
            (Some(blocked), _) => HookDecision::Deny {
                reason: blocked.reason,
            },
            (None, true) => HookDecision::Continue,
            (None, false) => HookDecision::ContinueWithContext {
                context: outcome.contexts.join("\n"),
            },
        }
    }
}

#[async_trait]
impl PostToolUse for CommandToolHook {
    async fn after(
        &self,
        call: &PermissionRequest<'_>,
        result: ToolResultView<'_>,
    ) -> Option<String> {
        let entry = self.entry()?;
        if !(entry.matcher)(call.tool, call.arguments) {
            return None;
        }
        let result = serde_json::json!({"content": result.content, "is_error": result.is_error});
        let input = self.input(call, HookEvent::PostToolUse, Some(result));
        let outcome = run_hook(
            &entry.spec,
            &self.hooks.workspace,
            &input,
            self.hooks.sandbox.as_deref(),
        )
        .await;
        if let Some(blocked) = outcome.blocked {
            // The handler already ran: a block can only tell the model why it objects.
            return Some(format!("{} objects: {}", blocked.hook, blocked.reason));
        }
        (!outcome.contexts.is_empty()).then(|| outcome.contexts.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_names_and_star_match() {
        let args = Value::Null;
        assert!(tool_name_matcher(None)("shell", &args));
        assert!(tool_name_matcher(Some("*"))("read_file", &args));
        assert!(tool_name_matcher(Some("shell"))("shell", &args));
        assert!(!tool_name_matcher(Some("shell"))("read_file", &args));
        assert!(tool_name_matcher(Some("shell(cargo test:*)"))(
            "shell", &args
        ));
    }

    #[test]
    fn stdout_json_decides() {
        let out = answer(
            "h",
            r#"{"decision":"block","reason":"no","additional_context":"c"}"#,
        );
        assert_eq!(
            out.blocked,
            Some(Blocked {
                hook: "h".into(),
                reason: "no".into()
            })
        );
        assert_eq!(out.contexts, ["c"]);
        let out = answer("h", r#"{"decision":"allow"}"#);
        assert_eq!(out, HookOutcome::default());
        assert_eq!(answer("h", "not json"), HookOutcome::default());
        assert_eq!(answer("h", "[1]"), HookOutcome::default());
        assert_eq!(
            answer("h", r#"{"decision":"maybe"}"#),
            HookOutcome::default()
        );
    }
}
