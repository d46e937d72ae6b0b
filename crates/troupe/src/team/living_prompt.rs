//! The living system prompt of the lead and of each teammate (SPEC §9): identity and role, the
//! tools, the workspace, the project's instructions (`AGENTS.md` and the like, see
//! [`super::instructions`]), the skills catalog, selected memory, the current roster and the
//! pending protocol requests — always in that order.
//!
//! Identity, workspace and skills are fixed when the agent is built; the tools are its registry's
//! available ones (an MCP server that went down takes its tools out); memory is set by the
//! runner before each turn; the instructions, the roster and the pending requests are read when
//! the runner refreshes the prompt (before every model call). The text is
//! re-rendered only when one of those inputs changed: the same inputs give the very same
//! string, so the request prefix (and a provider's prompt cache) stays stable while nothing
//! changes. A request is shown as `expired` once its window has closed, so expiry changes the
//! prompt too.

use std::sync::{Arc, Mutex};

use troupe_wire::{AgentName, ProtocolRequest};

use super::instructions::Instructions;
use super::runtime::TeamHandle;
use crate::agent::prompt::SystemPromptSource;
use crate::clock::Clock;
use crate::sync::lock;
use crate::tools::ToolRegistry;

/// The parts fixed when the agent is built.
pub struct FixedParts {
    /// Who the agent is, its role, how the team works for it.
    pub identity: String,
    /// The tools it is offered, in order; a tool that is unavailable when the prompt is
    /// rendered (its MCP server went down) is left out of it, as it is of the model's list.
    pub tools: Arc<ToolRegistry>,
    pub workspace: String,
    /// The skills catalog as rendered for the prompt (empty: no skills).
    pub skills: String,
    /// The agent's workspace's instruction files, read again at each refresh.
    pub instructions: Arc<Instructions>,
}

pub struct LivingPrompt {
    agent: AgentName,
    fixed: FixedParts,
    team: TeamHandle,
    clock: Arc<dyn Clock>,
    memory: Mutex<String>,
    /// The instructions section as last read (by `refresh`).
    instructions: Mutex<String>,
    /// The pending requests as last read from the protocol store (by `refresh`).
    requests: Mutex<Vec<ProtocolRequest>>,
    /// The team section's lines, as [`SystemPromptSource::refresh`] last read the roster.
    roster: Mutex<Vec<String>>,
    cache: Mutex<Option<(Inputs, String)>>,
}

/// What can change, as compared between renders.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Inputs {
    tools: Vec<String>,
    instructions: String,
    memory: String,
    roster: Vec<String>,
    pending: Vec<String>,
}

impl LivingPrompt {
    pub fn new(
        agent: AgentName,
        fixed: FixedParts,
        team: TeamHandle,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            agent,
            fixed,
            team,
            clock,
            memory: Mutex::new(String::new()),
            instructions: Mutex::new(String::new()),
            requests: Mutex::new(Vec::new()),
            roster: Mutex::new(Vec::new()),
            cache: Mutex::new(None),
        }
    }

    fn inputs(&self) -> Inputs {
        let memory = lock(&self.memory).clone();
        let instructions = lock(&self.instructions).clone();
        let tools = self
            .fixed
            .tools
            .available_definitions()
            .map(|t| t.name.clone())
            .collect();
        if self.team.upgrade().is_err() {
            return Inputs {
                tools,
                instructions,
                memory,
                roster: Vec::new(),
                pending: Vec::new(),
            };
        }
        let roster = lock(&self.roster).clone();
        let now = self.clock.now();
        // As last read by `refresh` (before every model call).
        let pending = lock(&self.requests)
            .iter()
            .filter(|r| match r.kind() {
                // A permission request concerns whoever answers it (the lead, when asks are
                // routed to it); its asker is waiting at the call and sees no prompt meanwhile.
                troupe_wire::RequestKind::Permission => *r.target() == self.agent,
                _ => self.agent.is_lead() || *r.sender() == self.agent || *r.target() == self.agent,
            })
            .map(|r| describe_request(r, now))
            .collect();
        Inputs {
            tools,
            instructions,
            memory,
            roster,
            pending,
        }
    }

    fn render_with(&self, inputs: &Inputs) -> String {
        let mut out = self.fixed.identity.trim_end().to_owned();
        section(&mut out, "Tools", &inputs.tools.join(", "));
        section(&mut out, "Workspace", &self.fixed.workspace);
        if !inputs.instructions.is_empty() {
            let body = format!("{INSTRUCTIONS_INTRO}\n\n{}", inputs.instructions);
            section(&mut out, "Project instructions", &body);
        }
        section(
            &mut out,
            "Skills you can load with load_skill",
            &self.fixed.skills,
        );
        section(&mut out, "Memory", &inputs.memory);
        let roster = if inputs.roster.is_empty() {
            "(no teammates)".to_owned()
        } else {
            inputs.roster.join("\n")
        };
        let title = if self.agent.is_lead() {
            "Team"
        } else {
            "Team (led by lead)"
        };
        section(&mut out, title, &roster);
        section(&mut out, "Pending requests", &inputs.pending.join("\n"));
        out
    }
}

#[async_trait::async_trait]
impl SystemPromptSource for LivingPrompt {
    async fn refresh(&self) {
        // Read on the blocking pool (files and a bounded walk); a read that never came back
        // leaves the section as it was.
        let instructions = self.fixed.instructions.clone();
        if let Ok(text) = crate::sync::offload("reading the workspace's instructions", move || {
            instructions.section()
        })
        .await
        {
            *lock(&self.instructions) = text;
        }
        let Ok(team) = self.team.upgrade() else {
            return;
        };
        let roster = team
            .roster()
            .await
            .into_iter()
            .filter(|t| t.name != self.agent)
            .map(|t| {
                format!(
                    "- {} ({}): {}",
                    t.name,
                    t.status.as_str(),
                    one_line(&t.role)
                )
            })
            .collect();
        *lock(&self.roster) = roster;
        // A store that cannot be read leaves the section out this time; the gate and the
        // tools report the failure where it matters.
        let pending = team.protocol().store().pending().await.unwrap_or_default();
        *lock(&self.requests) = pending;
    }

    fn render(&self) -> String {
        let inputs = self.inputs();
        let mut cache = lock(&self.cache);
        if let Some((seen, text)) = cache.as_ref() {
            if *seen == inputs {
                return text.clone();
            }
        }
        let text = self.render_with(&inputs);
        *cache = Some((inputs, text.clone()));
        text
    }

    fn set_memory(&self, section: String) {
        *lock(&self.memory) = section;
    }
}

/// What the instructions section says first.
const INSTRUCTIONS_INTRO: &str = "The workspace's instructions for agents working in it \
     (re-read before each model call; follow them):";

fn section(out: &mut String, title: &str, body: &str) {
    let body = body.trim();
    if body.is_empty() {
        return;
    }
    out.push_str("\n\n## ");
    out.push_str(title);
    out.push('\n');
    out.push_str(body);
}

fn one_line(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 160 {
        let mut cut: String = line.chars().take(160).collect();
        cut.push('…');
        cut
    } else {
        line
    }
}

fn describe_request(request: &ProtocolRequest, now: troupe_wire::UtcTime) -> String {
    let state = if request.is_open_at(now) {
        format!("pending until {}", request.expires_at_utc())
    } else {
        "expired".to_owned()
    };
    format!(
        "- {} {} from {} to {}: {}",
        request.kind().as_str(),
        request.id(),
        request.sender(),
        request.target(),
        state
    )
}
