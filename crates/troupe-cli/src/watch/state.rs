//! What the view shows: the team folded from its event stream ([`View::apply`]) and refreshed
//! from its stores (the roster and the pending plan requests, [`View::set_roster`],
//! [`View::set_pending`]), plus what the person is doing in it (the selected pane, a message or
//! feedback being typed). Pure: no terminal, no I/O, so it is tested with plain events.
//!
//! Memory stays bounded however long the stream is: a pane keeps its last [`PANE_LINES`] lines.

use std::collections::VecDeque;

use troupe::store::events::{kinds, RUN_AGENT};
use troupe::wire::Event;

use crate::event_line::describe;
use crate::observe::filter;

/// How many lines of its activity each agent's pane keeps.
pub const PANE_LINES: usize = 1000;

/// How long one kept line may be (longer ones are cut with `…`).
const LINE_CHARS: usize = 400;

/// What an agent is doing right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    Idle,
    /// Waiting for the model.
    Thinking,
    /// Running this tool.
    Tool(String),
}

/// One agent's pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPane {
    pub name: String,
    /// The teammate's role (`lead` for the lead); empty until known.
    pub role: String,
    /// `running`, `idle`, `failed`, `shutdown` (the roster's words).
    pub status: String,
    pub activity: Activity,
    /// Its text and what it did, oldest first, at most [`PANE_LINES`].
    pub lines: VecDeque<String>,
    /// How many of the newest lines are below the pane's bottom: 0 while the pane follows
    /// the newest line, more once a person scrolled back (the lines in view then stay put as
    /// new ones arrive).
    pub back: usize,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

impl AgentPane {
    fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            role: if name == "lead" {
                "lead".into()
            } else {
                String::new()
            },
            status: "idle".into(),
            activity: Activity::Idle,
            lines: VecDeque::new(),
            back: 0,
            tokens_in: 0,
            tokens_out: 0,
        }
    }

    fn push(&mut self, line: String) {
        if self.lines.len() == PANE_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(kinds::cut(&line, LINE_CHARS));
        if self.back > 0 {
            self.back = (self.back + 1).min(self.lines.len().saturating_sub(1));
        }
    }

    /// Scrolls `lines` further back (towards the oldest line kept; one line stays in view).
    pub fn scroll_back(&mut self, lines: usize) {
        self.back = self
            .back
            .saturating_add(lines)
            .min(self.lines.len().saturating_sub(1));
    }

    /// Scrolls `lines` towards the newest line; at it, the pane follows new lines again.
    pub fn scroll_forward(&mut self, lines: usize) {
        self.back = self.back.saturating_sub(lines);
    }
}

/// A plan request waiting for the lead's (a person's) answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingPlan {
    pub request_id: String,
    /// The teammate that submitted it.
    pub from: String,
    pub plan: String,
}

/// Whether a run is going, as the stream tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunState {
    /// No run seen in the stream yet.
    None,
    Running,
    /// The last run ended; its end in words.
    Ended(String),
}

/// What the keyboard is typing into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Keys are commands.
    Keys,
    /// A message to the agent `to`.
    Message { to: String, text: String },
    /// The feedback of a rejection of `request_id`.
    Feedback { request_id: String, text: String },
}

/// Something the view asks its runner to do (the one place with side effects).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Quit,
    Answer {
        request_id: String,
        approve: bool,
        feedback: Option<String>,
    },
    Send {
        to: String,
        text: String,
    },
}

/// Everything the screen is drawn from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// Every agent seen, the lead first, then in the order they appeared.
    pub agents: Vec<AgentPane>,
    /// Index into `agents` of the pane shown large.
    pub selected: usize,
    pub pending: Vec<PendingPlan>,
    pub run: RunState,
    pub input: Input,
    /// The outcome of the last thing the person did (or a failure to read), shown at the bottom.
    pub notice: Option<String>,
    /// Where the stream was read up to.
    pub last_seq: u64,
}

impl Default for View {
    fn default() -> Self {
        Self {
            agents: vec![AgentPane::new("lead")],
            selected: 0,
            pending: Vec::new(),
            run: RunState::None,
            input: Input::Keys,
            notice: None,
            last_seq: 0,
        }
    }
}

impl View {
    /// Folds one event of the stream in.
    pub fn apply(&mut self, event: &Event) {
        self.last_seq = self.last_seq.max(event.seq);
        if event.agent == RUN_AGENT {
            match event.kind.as_str() {
                kinds::RUN_STARTED => {
                    self.run = RunState::Running;
                    self.pane("lead").status = "running".into();
                }
                kinds::RUN_ENDED => {
                    self.run = RunState::Ended(describe(event));
                    let lead = self.pane("lead");
                    lead.status = "idle".into();
                    lead.activity = Activity::Idle;
                }
                _ => {}
            }
            return;
        }
        let pane = self.pane(&event.agent);
        match event.kind.as_str() {
            kinds::MODEL_CALL_STARTED => pane.activity = Activity::Thinking,
            kinds::MODEL_CALL_FINISHED => {
                pane.tokens_in += event.u64("tokens_in").unwrap_or(0);
                pane.tokens_out += event.u64("tokens_out").unwrap_or(0);
                pane.activity = Activity::Idle;
            }
            kinds::MODEL_CALL_FAILED | kinds::TOOL_FINISHED => pane.activity = Activity::Idle,
            kinds::TOOL_STARTED => {
                pane.activity = Activity::Tool(event.str("tool").unwrap_or("?").to_owned());
            }
            kinds::TEAMMATE_SPAWNED => {
                pane.role = event.str("role").unwrap_or_default().to_owned();
                pane.status = "running".into();
            }
            kinds::TEAMMATE_STATUS => {
                if let Some(status) = event.str("status") {
                    pane.status = status.to_owned();
                }
            }
            _ => {}
        }
        if event.kind == kinds::ASSISTANT_TEXT {
            for line in event.str("text").unwrap_or_default().lines() {
                if !line.trim().is_empty() {
                    pane.push(line.trim_end().to_owned());
                }
            }
        } else if filter::shown(&event.kind, false) {
            pane.push(format!("· {}", describe(event)));
        }
    }

    /// The roster as the stores have it (name, role, status of each teammate): over what the
    /// stream said, since a status can change without an event reaching this view (a worker
    /// on another host).
    pub fn set_roster(&mut self, teammates: &[(String, String, String)]) {
        for (name, role, status) in teammates {
            let pane = self.pane(name);
            pane.role.clone_from(role);
            pane.status.clone_from(status);
        }
    }

    /// The plan requests waiting for an answer, as the protocol store has them now.
    pub fn set_pending(&mut self, pending: Vec<PendingPlan>) {
        self.pending = pending;
    }

    /// The plan an answer key acts on: the selected agent's oldest pending plan, else the
    /// oldest pending plan of anyone.
    pub fn current_plan(&self) -> Option<&PendingPlan> {
        let selected = self.agents.get(self.selected).map(|a| a.name.as_str());
        self.pending
            .iter()
            .find(|p| Some(p.from.as_str()) == selected)
            .or_else(|| self.pending.first())
    }

    /// The selected agent's pane.
    pub fn selected_pane(&mut self) -> Option<&mut AgentPane> {
        self.agents.get_mut(self.selected)
    }

    pub fn select_next(&mut self) {
        self.selected = (self.selected + 1) % self.agents.len().max(1);
    }

    pub fn select_previous(&mut self) {
        let n = self.agents.len().max(1);
        self.selected = (self.selected + n - 1) % n;
    }

    /// Tokens of every agent together: (in, out).
    pub fn total_tokens(&self) -> (u64, u64) {
        self.agents
            .iter()
            .fold((0, 0), |(i, o), a| (i + a.tokens_in, o + a.tokens_out))
    }

    /// The pane of `name`, added (after the others) when first seen.
    fn pane(&mut self, name: &str) -> &mut AgentPane {
        let at = match self.agents.iter().position(|a| a.name == name) {
            Some(at) => at,
            None => {
                self.agents.push(AgentPane::new(name));
                self.agents.len() - 1
            }
        };
        &mut self.agents[at]
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::VecDeque;

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    /// An event of the stream, as it is stored.
    pub fn event(seq: u64, agent: &str, kind: &str, fields: serde_json::Value) -> Event {
        let mut line = json!({"seq": seq, "at": "2026-07-30T08:01:02.345Z", "run_id": "r1",
                              "agent": agent, "kind": kind});
        if let (Some(line), Some(fields)) = (line.as_object_mut(), fields.as_object()) {
            line.extend(fields.clone());
        }
        Event::parse_line(&line.to_string()).unwrap()
    }

    /// A team's run: the lead spawns alice, alice thinks, writes, says two lines and submits a
    /// plan; the lead is still running.
    pub fn a_team_at_work() -> View {
        let mut view = View::default();
        for e in [
            event(1, RUN_AGENT, kinds::RUN_STARTED, json!({"prompt": "go"})),
            event(2, "lead", kinds::MODEL_CALL_STARTED, json!({"call": 1})),
            event(
                3,
                "alice",
                kinds::TEAMMATE_SPAWNED,
                json!({"role": "writer"}),
            ),
            event(4, "alice", kinds::MODEL_CALL_STARTED, json!({"call": 1})),
            event(
                5,
                "alice",
                kinds::MODEL_CALL_FINISHED,
                json!({"model": "m", "tokens_in": 100, "tokens_out": 20}),
            ),
            event(
                6,
                "alice",
                kinds::ASSISTANT_TEXT,
                json!({"text": "First I plan.\n\nThen I write."}),
            ),
            event(
                7,
                "alice",
                kinds::TOOL_STARTED,
                json!({"tool": "write_file", "call_id": "c1"}),
            ),
            event(
                8,
                "lead",
                kinds::MODEL_CALL_FINISHED,
                json!({"model": "m", "tokens_in": 7, "tokens_out": 3}),
            ),
        ] {
            view.apply(&e);
        }
        view.set_pending(vec![PendingPlan {
            request_id: "0196c1d2-0000-7000-8000-000000000001".into(),
            from: "alice".into(),
            plan: "Write out.txt, then test it.".into(),
        }]);
        view
    }

    #[test]
    fn the_stream_folds_into_one_pane_per_agent() {
        let view = a_team_at_work();
        assert_eq!(view.run, RunState::Running);
        assert_eq!(view.last_seq, 8);
        assert_eq!(
            view.agents[1],
            AgentPane {
                name: "alice".into(),
                role: "writer".into(),
                status: "running".into(),
                activity: Activity::Tool("write_file".into()),
                lines: VecDeque::from([
                    "· spawned (writer)".to_owned(),
                    "First I plan.".to_owned(),
                    "Then I write.".to_owned(),
                ]),
                back: 0,
                tokens_in: 100,
                tokens_out: 20,
            }
        );
        assert_eq!(
            (
                view.agents[0].name.as_str(),
                &view.agents[0].status,
                &view.agents[0].activity
            ),
            ("lead", &"running".to_owned(), &Activity::Idle)
        );
        assert_eq!(view.total_tokens(), (107, 23));
    }

    #[test]
    fn the_end_of_the_run_and_the_roster_update_the_panes() {
        let mut view = a_team_at_work();
        view.apply(&event(
            9,
            "alice",
            kinds::TOOL_FINISHED,
            json!({"tool": "write_file", "outcome": "ok", "duration_ms": 3}),
        ));
        view.apply(&event(
            10,
            "alice",
            kinds::TEAMMATE_STATUS,
            json!({"status": "idle"}),
        ));
        assert_eq!(
            (view.agents[1].status.as_str(), &view.agents[1].activity),
            ("idle", &Activity::Idle)
        );
        view.apply(&event(
            11,
            RUN_AGENT,
            kinds::RUN_ENDED,
            json!({"exit_code": 0, "outcome": "done"}),
        ));
        assert_eq!(view.run, RunState::Ended("run ended (done, exit 0)".into()));
        assert_eq!(view.agents[0].status, "idle");
        // The stores' roster is over the stream's word, and brings agents the stream has not.
        view.set_roster(&[
            ("alice".into(), "writer".into(), "shutdown".into()),
            ("bob".into(), "tester".into(), "failed".into()),
        ]);
        let seen: Vec<(&str, &str)> = view
            .agents
            .iter()
            .map(|a| (a.name.as_str(), a.status.as_str()))
            .collect();
        assert_eq!(
            seen,
            [("lead", "idle"), ("alice", "shutdown"), ("bob", "failed")]
        );
    }

    #[test]
    fn a_pane_keeps_its_last_lines_only() {
        let mut view = View::default();
        for seq in 1..=(PANE_LINES as u64 + 50) {
            view.apply(&event(
                seq,
                "lead",
                kinds::ASSISTANT_TEXT,
                json!({"text": format!("line {seq}")}),
            ));
        }
        let lead = &view.agents[0];
        assert_eq!(lead.lines.len(), PANE_LINES);
        assert_eq!(lead.lines.front().map(String::as_str), Some("line 51"));
        let newest = format!("line {}", PANE_LINES + 50);
        assert_eq!(lead.lines.back(), Some(&newest));
    }

    fn said(view: &mut View, from: u64, to: u64) {
        for seq in from..=to {
            view.apply(&event(
                seq,
                "lead",
                kinds::ASSISTANT_TEXT,
                json!({"text": format!("line {seq}")}),
            ));
        }
    }

    #[test]
    fn a_pane_scrolled_back_keeps_its_place_as_new_lines_arrive() {
        let mut view = View::default();
        said(&mut view, 1, 30);
        let pane = &mut view.agents[0];
        pane.scroll_back(10);
        assert_eq!(pane.back, 10);
        said(&mut view, 31, 35);
        // The same lines stay at the bottom of the pane: five more are below it now.
        assert_eq!(view.agents[0].back, 15);
        let pane = &mut view.agents[0];
        pane.scroll_forward(5);
        assert_eq!(pane.back, 10);
        // No further back than the oldest line kept, which stays in view.
        pane.scroll_back(usize::MAX);
        assert_eq!(pane.back, 34);
        said(&mut view, 36, 36);
        assert_eq!(view.agents[0].back, 35);
        // Forward to the newest: the pane follows new lines again.
        view.agents[0].scroll_forward(usize::MAX);
        said(&mut view, 37, 40);
        assert_eq!(view.agents[0].back, 0);
    }

    #[test]
    fn a_full_pane_scrolled_back_to_its_oldest_line_stays_within_what_it_keeps() {
        let mut view = View::default();
        said(&mut view, 1, PANE_LINES as u64);
        view.agents[0].scroll_back(usize::MAX);
        said(&mut view, PANE_LINES as u64 + 1, PANE_LINES as u64 + 20);
        let pane = &view.agents[0];
        assert_eq!(pane.lines.len(), PANE_LINES);
        assert_eq!(pane.back, PANE_LINES - 1);
    }
}
