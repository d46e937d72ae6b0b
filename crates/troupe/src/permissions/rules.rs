//! Permission rules and their combination. Rules are pure except the ones that declare they read
//! a port ([`PermissionRule::reads_ports`]); a rule is async, so such a rule awaits its port.
//!
//! Every rule is evaluated; each may say nothing or give a verdict. The strongest verdict wins:
//! **deny > ask > allow** (among equals, the first rule in order is the one reported). When no
//! rule says anything, the fallback is `ask`, so a policy built without the defaults fails
//! towards a person rather than towards running.

use serde_json::Value;
use troupe_wire::AgentName;

use super::effect::{Effect, Scope};

/// What the rules say about a call. Ordered by strength: `Allow < Ask < Deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

/// The call being judged. Also what hooks see.
#[derive(Debug, Clone, Copy)]
pub struct PermissionRequest<'a> {
    pub agent: &'a AgentName,
    pub tool: &'a str,
    pub effect: Effect,
    /// Whose state the tool changes (the tool's [`crate::tools::ToolHandler::scope`]).
    pub scope: Scope,
    /// The validated arguments object.
    pub arguments: &'a Value,
    /// For a tool that runs commands, the sandbox mode they run under (for the audit line).
    pub sandbox: Option<crate::sandbox::Mode>,
    /// What the call would change (a write's diff), made only if someone is asked.
    pub preview: Option<super::approval::Preview<'a>>,
    /// The protected path (`crate::protected`) the call would write, if any: the policy then
    /// asks a person whatever the rules allow, unless a rule names that path exactly.
    pub protected: Option<&'a crate::protected::Hit>,
}

/// One rule's verdict, with its name and reason for the audit log and the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleVerdict {
    pub decision: Decision,
    pub rule: String,
    pub reason: String,
}

impl RuleVerdict {
    pub fn new(decision: Decision, rule: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            decision,
            rule: rule.into(),
            reason: reason.into(),
        }
    }
}

/// A rule: no state changes, and no I/O unless it says so. `None` means "no opinion".
///
/// **Contract:** a rule is a function of the request and, when [`Self::reads_ports`] is true,
/// of what it reads through a port (the plan gate reads the latest plan from the protocol
/// store, an async port). Evaluation is async so that such a rule awaits its port; a rule that
/// reads nothing never waits.
#[async_trait::async_trait]
pub trait PermissionRule: Send + Sync {
    async fn evaluate(&self, request: &PermissionRequest<'_>) -> Option<RuleVerdict>;

    /// Whether [`Self::evaluate`] reads a port (and may block). False for pure rules.
    fn reads_ports(&self) -> bool {
        false
    }
}

/// The name of the verdict used when no rule gives one.
pub const FALLBACK_RULE: &str = "fallback";

/// Evaluates every rule and keeps the strongest verdict (first among equals).
pub async fn combine<'r>(
    rules: impl IntoIterator<Item = &'r dyn PermissionRule>,
    request: &PermissionRequest<'_>,
) -> RuleVerdict {
    let mut strongest: Option<RuleVerdict> = None;
    for rule in rules {
        if let Some(verdict) = rule.evaluate(request).await {
            let stronger = strongest
                .as_ref()
                .is_none_or(|s| verdict.decision > s.decision);
            if stronger {
                strongest = Some(verdict);
            }
        }
    }
    strongest.unwrap_or_else(|| {
        RuleVerdict::new(
            Decision::Ask,
            FALLBACK_RULE,
            "no rule decided this call, so a person is asked",
        )
    })
}

/// The default policy of SPEC §7: read → allow; write to troupe's own state (bookkeeping:
/// todo list, task board, cron) → allow; other writes and execute → ask; external (protocol and
/// team tools) → allow, except the tools of MCP servers (named [`MCP_TOOL_PREFIX`]`<server>__…`):
/// they act on whatever the server reaches, so they ask. A process can reach anything, so an
/// execute tool asks whatever its scope.
#[derive(Debug, Clone, Copy, Default)]
pub struct EffectDefaults;

/// How the name of every MCP server's tool starts: `mcp__<server>__<tool>`.
pub const MCP_TOOL_PREFIX: &str = "mcp__";

impl EffectDefaults {
    pub const RULE: &'static str = "default";
}

#[async_trait::async_trait]
impl PermissionRule for EffectDefaults {
    async fn evaluate(&self, request: &PermissionRequest<'_>) -> Option<RuleVerdict> {
        let (decision, reason) = match (request.effect, request.scope) {
            (Effect::Read, _) => (Decision::Allow, "read tools are allowed"),
            (Effect::Write, Scope::TroupeState) => (
                Decision::Allow,
                "bookkeeping tools are allowed: they change only troupe's own state",
            ),
            (Effect::Write, Scope::World) => (Decision::Ask, "write tools need approval"),
            (Effect::Execute, _) => (Decision::Ask, "execute tools need approval"),
            (Effect::External, _) if request.tool.starts_with(MCP_TOOL_PREFIX) => {
                (Decision::Ask, "tools of MCP servers need approval")
            }
            (Effect::External, _) => (Decision::Allow, "protocol and team tools are allowed"),
        };
        Some(RuleVerdict::new(decision, Self::RULE, reason))
    }
}

/// A rule that gives the same verdict for the named tools (or every tool when `tools` is
/// empty). Handy for configuration and tests.
#[derive(Debug, Clone)]
pub struct FixedRule {
    pub name: String,
    pub tools: Vec<String>,
    pub decision: Decision,
    pub reason: String,
}

#[async_trait::async_trait]
impl PermissionRule for FixedRule {
    async fn evaluate(&self, request: &PermissionRequest<'_>) -> Option<RuleVerdict> {
        let applies = self.tools.is_empty() || self.tools.iter().any(|t| t == request.tool);
        applies.then(|| RuleVerdict::new(self.decision, &self.name, &self.reason))
    }
}
