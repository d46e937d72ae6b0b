//! The living system prompt of the lead and of each teammate (SPEC §9): identity and role, the
//! tools, the workspace, the project's instructions (`AGENTS.md` and the like, see
//! [`super::instructions`]), the skills catalog — the stable part — then selected memory, the
//! current roster and the pending protocol requests — the changing sections — always in that
//! order.
//!
//! Identity, workspace and skills are fixed when the agent is built; the tools are its registry's
//! available ones (an MCP server that went down takes its tools out); memory is set by the
//! runner before each turn; the instructions, the roster and the pending requests are read when
//! the runner refreshes the prompt (before every model call). The same inputs give the very
//! same text. A change of the changing sections reaches the model as a note with the entries
//! that changed (see [`crate::agent::prompt`]), so the system message — and the request prefix a
//! provider caches — stays the same across spawns, status changes and requests. A request is
//! shown as `expired` once its window has closed, so expiry is noted too.

use std::sync::{Arc, Mutex};

use troupe_wire::{AgentName, ProtocolRequest};

use super::instructions::Instructions;
use super::runtime::TeamHandle;
use crate::agent::prompt::{push_section as section, Entry, Section, SystemPromptSource};
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
    /// The team section's entries, as [`SystemPromptSource::refresh`] last read the roster.
    roster: Mutex<Vec<Entry>>,
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
        }
    }

    /// The pending requests this agent sees, as last read by `refresh`.
    fn pending(&self) -> Vec<Entry> {
        let now = self.clock.now();
        lock(&self.requests)
            .iter()
            .filter(|r| match r.kind() {
                // A permission request concerns whoever answers it (the lead, when asks are
                // routed to it); its asker is waiting at the call and sees no prompt meanwhile.
                troupe_wire::RequestKind::Permission => *r.target() == self.agent,
                _ => self.agent.is_lead() || *r.sender() == self.agent || *r.target() == self.agent,
            })
            .map(|r| Entry {
                key: r.id().to_string(),
                text: describe_request(r, now),
                gone: format!("- {} {}: no longer pending", r.kind().as_str(), r.id()),
            })
            .collect()
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
            .map(|t| Entry {
                key: t.name.to_string(),
                text: format!(
                    "- {} ({}): {}",
                    t.name,
                    t.status.as_str(),
                    one_line(&t.role)
                ),
                gone: format!("- {}: no longer on the team", t.name),
            })
            .collect();
        *lock(&self.roster) = roster;
        // A store that cannot be read leaves the section out this time; the gate and the
        // tools report the failure where it matters.
        let pending = team.protocol().store().pending().await.unwrap_or_default();
        *lock(&self.requests) = pending;
    }

    /// Identity, tools, workspace, instructions and skills: what holds for the conversation.
    fn render(&self) -> String {
        let mut out = self.fixed.identity.trim_end().to_owned();
        let tools: Vec<String> = self
            .fixed
            .tools
            .available_definitions()
            .map(|t| t.name.clone())
            .collect();
        section(&mut out, "Tools", &tools.join(", "));
        section(&mut out, "Workspace", &self.fixed.workspace);
        let instructions = lock(&self.instructions).clone();
        if !instructions.is_empty() {
            let body = format!("{INSTRUCTIONS_INTRO}\n\n{instructions}");
            section(&mut out, "Project instructions", &body);
        }
        section(
            &mut out,
            "Skills you can load with load_skill",
            &self.fixed.skills,
        );
        out
    }

    /// Memory, the team and the pending requests: what changes while the agent works.
    fn changing(&self) -> Vec<Section> {
        let memory = lock(&self.memory).trim().to_owned();
        let memory = Section {
            title: "Memory".to_owned(),
            entries: if memory.is_empty() {
                Vec::new()
            } else {
                vec![Entry {
                    key: "memory".to_owned(),
                    text: memory,
                    gone: "(no memories selected now)".to_owned(),
                }]
            },
            empty: String::new(),
        };
        let in_team = self.team.upgrade().is_ok();
        let title = if self.agent.is_lead() {
            "Team"
        } else {
            "Team (led by lead)"
        };
        let team = Section {
            title: title.to_owned(),
            entries: if in_team {
                lock(&self.roster).clone()
            } else {
                Vec::new()
            },
            empty: "(no teammates)".to_owned(),
        };
        let pending = Section {
            title: "Pending requests".to_owned(),
            entries: if in_team { self.pending() } else { Vec::new() },
            empty: String::new(),
        };
        vec![memory, team, pending]
    }

    fn set_memory(&self, section: String) {
        *lock(&self.memory) = section;
    }
}

/// What the instructions section says first.
const INSTRUCTIONS_INTRO: &str = "The workspace's instructions for agents working in it \
     (re-read before each model call; follow them):";

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
