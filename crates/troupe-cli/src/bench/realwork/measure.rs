//! What the realwork suite measures of each model call, and the pure computations over it:
//! the coordination bytes of a request, the fixed prompt bytes, and the model time on the
//! team run's critical path.
//!
//! **Coordination bytes** of a request (JSON bytes, as `sent_bytes` counts them):
//! - messages between agents and task texts: every user message except the person's prompt
//!   (the lead's first user message) — the lead's `[event]` messages (teammates' results), a
//!   teammate's spawn prompt and `[task]` texts — and any system message after the first (an
//!   appended team note);
//! - team tool calls and their results: the calls of [`TEAM_TOOLS`] in assistant messages and
//!   the tool results answering them;
//! - the team sections of the system message: `## Team…` (the roster) and
//!   `## Pending requests`.
//!
//! Tool definitions are not counted (they are the fixed prompt overhead, reported apart); the
//! team tools' definitions are counted only in the `…_with_team_tool_definitions` share.

use std::collections::HashSet;
use std::time::Instant;

use serde::Serialize;
use troupe::model::{ChatMessage, ModelRequest};

/// The tools that exist for working as a team: calling them, and what they answer, is
/// coordination.
pub const TEAM_TOOLS: [&str; 12] = [
    "spawn_teammate",
    "send_message",
    "request_shutdown",
    "review_plan",
    "review_permission",
    "submit_plan",
    "create_task",
    "get_task",
    "list_tasks",
    "claim_task",
    "complete_task",
    "merge_teammate",
];

/// The system prompt's sections about the team (by title prefix).
const TEAM_SECTIONS: [&str; 2] = ["Team", "Pending requests"];

/// One model call as the bench saw it.
#[derive(Debug, Clone)]
pub struct Call {
    /// `lead` or the teammate's name.
    pub agent: String,
    /// From entering the model to its answer (the latency and the script's decision).
    pub start: Instant,
    pub end: Instant,
    /// An agent's turn (not one of the runtime's own calls: summary, memory).
    pub turn: bool,
    /// The request's bytes as sent (`sent_bytes`: messages and tools).
    pub bytes: usize,
    pub coordination: Coordination,
    /// The team tools' definitions among the request's tools, in bytes.
    pub team_tool_definitions: usize,
    /// The request's tools JSON and its system message, in bytes.
    pub fixed: Fixed,
}

/// A request's coordination bytes, by kind (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Coordination {
    pub messages_and_tasks: usize,
    pub team_tool_calls: usize,
    pub prompt_team_sections: usize,
}

impl Coordination {
    pub fn total(&self) -> usize {
        self.messages_and_tasks + self.team_tool_calls + self.prompt_team_sections
    }

    pub fn add(&mut self, other: &Self) {
        self.messages_and_tasks += other.messages_and_tasks;
        self.team_tool_calls += other.team_tool_calls;
        self.prompt_team_sections += other.prompt_team_sections;
    }
}

/// The fixed part of a request: its tools and its system message, in JSON bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Fixed {
    pub tools: usize,
    pub system: usize,
}

impl Fixed {
    pub fn of(request: &ModelRequest) -> Self {
        Self {
            tools: json_len(&request.tools),
            system: match request.messages.first() {
                Some(m @ ChatMessage::System { .. }) => json_len(m),
                _ => 0,
            },
        }
    }
}

/// The length of `value` as JSON.
pub fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    serde_json::to_vec(value).map_or(0, |v| v.len())
}

/// The bytes of the team tools' definitions among `request`'s tools.
pub fn team_tool_definitions(request: &ModelRequest) -> usize {
    request
        .tools
        .iter()
        .filter(|t| TEAM_TOOLS.contains(&t.name.as_str()))
        .map(json_len)
        .sum()
}

/// The coordination bytes of `request` (see the module docs). `person_first`: the agent's
/// first user message is the person's prompt, which is not coordination (the lead's).
pub fn coordination(request: &ModelRequest, person_first: bool) -> Coordination {
    let mut out = Coordination::default();
    let mut team_calls: HashSet<&str> = HashSet::new();
    let mut person_seen = !person_first;
    for (i, message) in request.messages.iter().enumerate() {
        match message {
            ChatMessage::System { content } if i == 0 => {
                out.prompt_team_sections += team_sections(content);
            }
            ChatMessage::System { .. } => out.messages_and_tasks += json_len(message),
            ChatMessage::User { content } => {
                if !person_seen && !content.starts_with("[event]") {
                    person_seen = true;
                } else {
                    out.messages_and_tasks += json_len(message);
                }
            }
            ChatMessage::Assistant(assistant) => {
                for call in &assistant.tool_calls {
                    if TEAM_TOOLS.contains(&call.name.as_str()) {
                        out.team_tool_calls += json_len(call);
                        team_calls.insert(call.id.as_str());
                    }
                }
            }
            ChatMessage::Tool { tool_call_id, .. } => {
                if team_calls.contains(tool_call_id.as_str()) {
                    out.team_tool_calls += json_len(message);
                }
            }
        }
    }
    out
}

/// The JSON bytes of the system prompt's team sections: each from its `\n\n## <title>` to the
/// next section or the end.
fn team_sections(system: &str) -> usize {
    system
        .split("\n\n## ")
        .skip(1)
        .filter(|section| TEAM_SECTIONS.iter().any(|t| section.starts_with(t)))
        .map(|section| json_len(&format!("\n\n## {section}")).saturating_sub(2))
        .sum()
}

/// A model call's interval, in ms from the run's start.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub agent: String,
    pub start: f64,
    pub end: f64,
}

impl Span {
    fn ms(&self) -> f64 {
        (self.end - self.start).max(0.0)
    }
}

/// The model time on the team run's critical path (see `realwork.rs`'s docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CriticalPath {
    /// The lead's calls that ended before any teammate's first call started.
    pub setup_model_ms: f64,
    /// The teammate whose last call ended last, and the sum of its calls.
    pub critical_teammate: Option<String>,
    pub teammate_model_ms: f64,
    /// The lead's model time after the critical teammate's last call ended.
    pub tail_model_ms: f64,
    /// When the critical teammate's first call started and its last ended (0 without one).
    pub teammate_first_start: f64,
    pub teammate_last_end: f64,
}

impl CriticalPath {
    pub fn model_ms(&self) -> f64 {
        self.setup_model_ms + self.teammate_model_ms + self.tail_model_ms
    }

    /// The runtime's time on the path of a run of `wall_ms`, in three parts: up to the critical
    /// teammate's first call (spawning, the board), between its first call and its last, and
    /// after its last (results delivered, merges, the lead's tools). With no teammate, all of
    /// it is in the first.
    pub fn runtime_parts(&self, wall_ms: f64) -> [f64; 3] {
        if self.critical_teammate.is_none() {
            return [(wall_ms - self.setup_model_ms).max(0.0), 0.0, 0.0];
        }
        [
            (self.teammate_first_start - self.setup_model_ms).max(0.0),
            (self.teammate_last_end - self.teammate_first_start - self.teammate_model_ms).max(0.0),
            (wall_ms - self.teammate_last_end - self.tail_model_ms).max(0.0),
        ]
    }

    /// Of the run's `spans` (every agent's model calls); with no teammate's call, every lead
    /// call is on the path (the solo run).
    pub fn of(spans: &[Span]) -> Self {
        let is_lead = |s: &&Span| s.agent == "lead";
        let lead: Vec<&Span> = spans.iter().filter(is_lead).collect();
        let mates: Vec<&Span> = spans.iter().filter(|s| !is_lead(s)).collect();
        let Some(last) = mates.iter().max_by(|a, b| a.end.total_cmp(&b.end)) else {
            return Self {
                setup_model_ms: lead.iter().map(|s| s.ms()).sum(),
                ..Self::default()
            };
        };
        let first_start = mates.iter().map(|s| s.start).fold(f64::INFINITY, f64::min);
        let critical: Vec<&&Span> = mates.iter().filter(|s| s.agent == last.agent).collect();
        Self {
            teammate_first_start: critical
                .iter()
                .map(|s| s.start)
                .fold(f64::INFINITY, f64::min),
            teammate_last_end: last.end,
            setup_model_ms: lead
                .iter()
                .filter(|s| s.end <= first_start)
                .map(|s| s.ms())
                .sum(),
            critical_teammate: Some(last.agent.clone()),
            teammate_model_ms: critical.iter().map(|s| s.ms()).sum(),
            tail_model_ms: lead
                .iter()
                .map(|s| (s.end - s.start.max(last.end)).max(0.0))
                .sum(),
        }
    }
}

/// How long at least one of `spans` was in flight: the measure of their union.
pub fn union_ms(spans: &[Span]) -> f64 {
    let mut sorted: Vec<(f64, f64)> = spans.iter().map(|s| (s.start, s.end)).collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (start, end) in sorted {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    total + current.map_or(0.0, |(s, e)| e - s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe::model::{AssistantMessage, ToolCall};

    fn span(agent: &str, start: f64, end: f64) -> Span {
        Span {
            agent: agent.to_owned(),
            start,
            end,
        }
    }

    #[test]
    fn the_critical_path_is_setup_then_the_last_teammate_then_the_tail() {
        let spans = [
            span("lead", 0.0, 100.0),   // setup
            span("lead", 110.0, 210.0), // concurrent with the teammates
            span("mate-0", 105.0, 205.0),
            span("mate-0", 210.0, 310.0),
            span("mate-1", 120.0, 220.0),
            span("mate-1", 225.0, 325.0),
            span("lead", 300.0, 400.0), // in flight when mate-1 ends: 75 ms after
            span("lead", 410.0, 510.0), // tail
        ];
        let path = CriticalPath::of(&spans);
        assert_eq!(
            path,
            CriticalPath {
                setup_model_ms: 100.0,
                critical_teammate: Some("mate-1".to_owned()),
                teammate_model_ms: 200.0,
                tail_model_ms: 175.0,
                teammate_first_start: 120.0,
                teammate_last_end: 325.0,
            }
        );
        assert_eq!(path.model_ms(), 475.0);
        assert_eq!(path.runtime_parts(520.0), [20.0, 5.0, 20.0]);
        let solo = CriticalPath::of(&[span("lead", 0.0, 10.0), span("lead", 12.0, 22.0)]);
        assert_eq!(solo.model_ms(), 20.0);
        assert_eq!(solo.runtime_parts(25.0), [5.0, 0.0, 0.0]);
        assert_eq!(union_ms(&spans), 100.0 + (400.0 - 105.0) + 100.0);
        assert_eq!(union_ms(&[]), 0.0);
    }

    #[test]
    fn coordination_counts_messages_team_calls_and_team_sections() {
        let system = "You are lead.\n\n## Tools\nshell\n\n## Team\n- mate-0 (idle): dev\n\n\
                      ## Pending requests\n- plan x";
        let spawn = ToolCall::new("c1", "spawn_teammate", "{\"name\":\"mate-0\"}");
        let shell = ToolCall::new("c2", "shell", "{\"command\":\"ls\"}");
        let event = ChatMessage::user("[event] {\"kind\":\"result\"}");
        let spawned = ChatMessage::tool_result("c1", "{\"spawned\":\"mate-0\"}");
        let request = ModelRequest::turn(
            vec![
                ChatMessage::system(system),
                ChatMessage::user("Build the crate."),
                ChatMessage::Assistant(AssistantMessage::tool_calls(vec![spawn.clone(), shell])),
                spawned.clone(),
                ChatMessage::tool_result("c2", "a\nb"),
                event.clone(),
            ],
            Vec::new(),
        );
        let sections = json_len("\n\n## Team\n- mate-0 (idle): dev") - 2
            + json_len("\n\n## Pending requests\n- plan x")
            - 2;
        assert_eq!(
            coordination(&request, true),
            Coordination {
                messages_and_tasks: json_len(&event),
                team_tool_calls: json_len(&spawn) + json_len(&spawned),
                prompt_team_sections: sections,
            }
        );
        // A teammate's first user message is the lead's: coordination too.
        let person = json_len(&ChatMessage::user("Build the crate."));
        assert_eq!(
            coordination(&request, false).messages_and_tasks,
            json_len(&event) + person
        );
    }
}
