//! Playing a recording: every model call of a team answered from it.
//!
//! [`Player::models`] gives each agent a client whose calls are served **in the recorded
//! global order**: a call waits until every call recorded before it was served, so a team's
//! parallel teammates are sequenced the way they ran. Each request is compared with the
//! recorded one (both masked, `mask.rs`); at the first difference the player records the
//! [`Divergence`] and either stops the run (its stop token fires and the call never returns,
//! so the run ends at its agents' next safe point) or, given a live model, hands every agent's
//! calls to it from then on. The ids a recorded answer carries (a plan request's id in a
//! `review_plan` call) are those of the recorded run: each is translated to the id this run
//! made, learned by lining up the ids of the two requests, which masking found equal.
//!
//! The lead's events are paced too ([`crate::team::EventPacing`]): an event turn of the lead
//! starts with the events its recorded turn started with, in the same order, so that two
//! results which arrived together in the recorded run are not answered in two turns now.
//!
//! Without comparison ([`Mode::AnswerOnly`], `troupe run --model-recording`), each agent just
//! gets its recorded answers in its order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use troupe_wire::AgentName;

use super::load::Recording;
use super::mask::{replace_uuids, uuids, Masking};
use crate::agent::prompt::{is_note, is_note_text};
use crate::error::ErrorCode;
use crate::model::{ChatMessage, ModelClient, ModelError, ModelRequest, ModelResponse, Purpose};
use crate::secrets::Redactor;
use crate::sync::lock;
use crate::team::ModelChooser;
use crate::team::{EventPacing, Pace};

/// Whether requests are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `troupe replay`: in the recorded order, each request compared.
    Compare,
    /// `--model-recording`: each agent's answers in its order, nothing compared.
    AnswerOnly,
}

/// How a recording is played.
pub struct PlayOptions {
    pub mode: Mode,
    /// Serve this many calls of the global order, then stop the run.
    pub until: Option<usize>,
    /// The models that go on after a divergence.
    pub live: Option<Arc<dyn ModelChooser>>,
    /// How long a call waits for its turn in the global order (and the lead for the events of
    /// its recorded turn) before the run is said to have stalled.
    pub stall: Duration,
    /// This run's workspace (masked like the recorded one).
    pub workspace: String,
    /// The run's secrets, cleared before requests are compared, as in the recording.
    pub redactor: Redactor,
}

/// Where a replay first differed from its recording.
#[derive(Debug, Clone, PartialEq)]
pub enum Divergence {
    /// A request differs from the recorded one.
    Request {
        /// The call's place in the global order, from 1.
        call: usize,
        agent: String,
        /// The agent's call, from 1.
        index: usize,
        /// A unified diff from the recorded request to this run's (masked).
        diff: String,
        /// What the recorded model answered to the recorded request.
        recorded_answer: String,
    },
    /// An agent made a call the recording does not have.
    Extra { agent: String, index: usize },
    /// The call that comes next in the recorded order never came.
    Stalled {
        call: usize,
        agent: String,
        index: usize,
        waited: Duration,
    },
    /// The run ended before making every recorded call.
    Missing {
        call: usize,
        agent: String,
        index: usize,
    },
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Request {
                call, agent, index, ..
            } => write!(
                f,
                "call {call} ({agent}'s call {index}) differs from the recorded request"
            ),
            Self::Extra { agent, index } => write!(
                f,
                "{agent} made a call {index} that the recording does not have"
            ),
            Self::Stalled {
                call,
                agent,
                index,
                waited,
            } => write!(
                f,
                "the run stalled: call {call} ({agent}'s call {index}) did not come within {}s",
                waited.as_secs()
            ),
            Self::Missing { call, agent, index } => write!(
                f,
                "the run ended without making call {call} ({agent}'s call {index})"
            ),
        }
    }
}

/// What a replay did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Calls answered from the recording.
    pub served: usize,
    /// Calls in the recording.
    pub total: usize,
    pub divergence: Option<Divergence>,
    /// The run was stopped after this many calls (`until`).
    pub stopped_after: Option<usize>,
}

#[derive(Default)]
struct State {
    /// The next place in the global order to serve.
    next: usize,
    served: HashMap<AgentName, usize>,
    divergence: Option<Divergence>,
    /// Calls go to the live models.
    live: bool,
    until_reached: bool,
    /// Recorded id → this run's.
    ids: HashMap<String, String>,
    /// How many messages each agent's last answered request had.
    seen: HashMap<AgentName, usize>,
    /// The lead's call being paced for, and since when.
    pacing: Option<(usize, Instant)>,
}

/// A recording being played.
pub struct Player {
    recording: Recording,
    recorded: Masking,
    now: Masking,
    options: PlayOptions,
    state: Mutex<State>,
    notify: tokio::sync::Notify,
    stop: CancellationToken,
}

enum Step {
    Answer(Result<ModelResponse, ModelError>),
    Live,
    Stop,
    Wait,
}

impl Player {
    pub fn new(recording: Recording, options: PlayOptions) -> Arc<Self> {
        Arc::new(Self {
            recorded: Masking::new(&recording.start.workspace),
            now: Masking::new(&options.workspace),
            recording,
            options,
            state: Mutex::default(),
            notify: tokio::sync::Notify::new(),
            stop: CancellationToken::new(),
        })
    }

    pub fn recording(&self) -> &Recording {
        &self.recording
    }

    /// Fired when the run must stop: at a divergence without live models, or at `until`.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// The team's models: every agent answered by this player.
    pub fn models(self: &Arc<Self>) -> Arc<dyn ModelChooser> {
        Arc::new(ReplayModels(self.clone()))
    }

    /// What the replay did so far (once the run ended: everything).
    pub fn report(&self) -> Report {
        let state = lock(&self.state);
        let served: usize = state.served.values().sum();
        let mut divergence = state.divergence.clone();
        if divergence.is_none() && !state.until_reached && self.options.mode == Mode::Compare {
            if let Some(call) = self.recording.calls.get(state.next) {
                divergence = Some(Divergence::Missing {
                    call: state.next + 1,
                    agent: call.agent.to_string(),
                    index: call.index + 1,
                });
            }
        }
        Report {
            served,
            total: self.recording.calls.len(),
            divergence,
            stopped_after: state.until_reached.then_some(state.next),
        }
    }

    async fn answer(
        &self,
        agent: &AgentName,
        live: Option<&Arc<dyn ModelClient>>,
        request: &ModelRequest,
    ) -> Result<ModelResponse, ModelError> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let step = self.step(&mut lock(&self.state), agent, request);
            match step {
                Step::Answer(answer) => return answer,
                Step::Live => match live {
                    Some(model) => return model.complete(request).await,
                    None => return Err(stopped()),
                },
                Step::Stop => {
                    self.stop.cancel();
                    // The runtime's own calls (memory, summaries) may run outside the run's
                    // cancellable select — the run-end memory extraction does — so they fail
                    // at once, which each of them tolerates; a turn is ended by the run's
                    // cancellation at its select, never answered.
                    if !request.purpose.is_turn() {
                        return Err(stopped());
                    }
                    std::future::pending::<()>().await;
                }
                Step::Wait => {
                    if tokio::time::timeout(self.options.stall, notified)
                        .await
                        .is_err()
                    {
                        let mut state = lock(&self.state);
                        if state.divergence.is_none() && !state.live {
                            let next = state.next;
                            if let Some(call) = self.recording.calls.get(next) {
                                let divergence = Divergence::Stalled {
                                    call: next + 1,
                                    agent: call.agent.to_string(),
                                    index: call.index + 1,
                                    waited: self.options.stall,
                                };
                                self.diverge(&mut state, divergence);
                            }
                        }
                    }
                }
            }
        }
    }

    fn step(&self, state: &mut State, agent: &AgentName, request: &ModelRequest) -> Step {
        if state.live {
            return Step::Live;
        }
        if state.divergence.is_some() || state.until_reached {
            return Step::Stop;
        }
        let k = state.served.get(agent).copied().unwrap_or(0);
        let Some(&position) = self.recording.of_agent(agent).get(k) else {
            let divergence = Divergence::Extra {
                agent: agent.to_string(),
                index: k + 1,
            };
            return self.diverge(state, divergence);
        };
        if self.options.mode == Mode::AnswerOnly {
            *state.served.entry(agent.clone()).or_default() += 1;
            return Step::Answer(self.recorded_answer(state, position));
        }
        if let Some(until) = self.options.until.filter(|until| position >= *until) {
            // Every call before `until` is answered first.
            if state.next < until {
                return Step::Wait;
            }
            state.until_reached = true;
            self.notify.notify_waiters();
            return Step::Stop;
        }
        if position != state.next {
            return Step::Wait;
        }
        let recorded = &self.recording.calls[position];
        // The recorded digest first: the recorded request is rendered only when it differs.
        let now = self.now.compared(request, &self.options.redactor);
        let then = (super::mask::hex(&Sha256::digest(now.as_bytes())) != recorded.digest)
            .then(|| {
                self.recorded
                    .compared(&recorded.request.to_request(), &self.options.redactor)
            })
            .filter(|then| *then != now);
        if let Some(then) = then {
            let divergence = Divergence::Request {
                call: position + 1,
                agent: agent.to_string(),
                index: k + 1,
                diff: crate::tools::preview::diff("request", &then, &now),
                recorded_answer: match &recorded.answer {
                    Ok(answer) => serde_json::to_string_pretty(&answer.message).unwrap_or_default(),
                    Err(error) => format!("(an error) {error}"),
                },
            };
            return self.diverge(state, divergence);
        }
        // Ids are new only in the messages added since the agent's previous call.
        let from = state.seen.get(agent).copied().unwrap_or(0);
        learn_ids(
            &mut state.ids,
            &recorded.request.messages,
            &request.messages,
            from,
        );
        let seen = request.messages.iter().filter(|m| !is_note(m)).count();
        state.seen.insert(agent.clone(), seen);
        state.next += 1;
        *state.served.entry(agent.clone()).or_default() += 1;
        state.pacing = None;
        self.notify.notify_waiters();
        Step::Answer(self.recorded_answer(state, position))
    }

    fn diverge(&self, state: &mut State, divergence: Divergence) -> Step {
        state.divergence = Some(divergence);
        self.notify.notify_waiters();
        if self.options.live.is_some() {
            state.live = true;
            Step::Live
        } else {
            Step::Stop
        }
    }

    /// The recorded answer at `position`, its ids translated to this run's.
    fn recorded_answer(&self, state: &State, position: usize) -> Result<ModelResponse, ModelError> {
        match &self.recording.calls[position].answer {
            Ok(answer) if state.ids.is_empty() => Ok(answer.clone()),
            Ok(answer) => {
                let text = serde_json::to_string(answer).unwrap_or_default();
                let text = replace_uuids(&text, |id| {
                    state.ids.get(id).cloned().unwrap_or_else(|| id.to_owned())
                });
                Ok(serde_json::from_str(&text).unwrap_or_else(|_| answer.clone()))
            }
            Err(error) => Err(ModelError::Implementation(Box::new(RecordedFailure(
                error.clone(),
            )))),
        }
    }
}

/// The ids of two requests that masking found equal, paired in order, in their messages from
/// the `from`th on, notes left out (only messages added since the agent's previous call can
/// name a new id).
fn learn_ids(
    ids: &mut HashMap<String, String>,
    then: &[Arc<ChatMessage>],
    now: &[ChatMessage],
    from: usize,
) {
    // Notes of the living prompt follow the team's timing (masking leaves them out too), so
    // `from` counts the other messages.
    let then: Vec<&ChatMessage> = then
        .iter()
        .map(|m| &**m)
        .filter(|m| !is_note(m))
        .skip(from)
        .collect();
    let now: Vec<&ChatMessage> = now.iter().filter(|m| !is_note(m)).skip(from).collect();
    let (Ok(then), Ok(now)) = (serde_json::to_string(&then), serde_json::to_string(&now)) else {
        return;
    };
    let (then, now) = (uuids(&then), uuids(&now));
    if then.len() == now.len() {
        for (recorded, made) in then.into_iter().zip(now) {
            ids.entry(recorded).or_insert(made);
        }
    }
}

impl EventPacing for Player {
    fn arrange(&self, texts: &[String]) -> Pace {
        let identity = || Pace::Now((0..texts.len()).collect());
        let mut state = lock(&self.state);
        if self.options.mode == Mode::AnswerOnly || state.live || state.divergence.is_some() {
            return identity();
        }
        let lead = AgentName::lead();
        let k = state.served.get(&lead).copied().unwrap_or(0);
        let Some(&position) = self
            .recording
            .of_agent(&lead)
            .get(k..)
            .unwrap_or(&[])
            .iter()
            .find(|&&p| self.recording.calls[p].purpose == Purpose::Turn)
        else {
            return identity();
        };
        let tail: Vec<String> =
            trailing_user_messages(&self.recording.calls[position].request.messages)
                .iter()
                .map(|t| self.recorded.text(t))
                .collect();
        let mut used = vec![false; tail.len()];
        let mut order: Vec<(usize, usize)> = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let masked = self.now.text(text);
            // An event that is not one of the recorded turn's waits for a later turn.
            if let Some(j) = (0..tail.len()).find(|&j| !used[j] && tail[j] == masked) {
                used[j] = true;
                order.push((j, i));
            }
        }
        // Some of the recorded turn's events have not arrived (those that came early wait for
        // a later turn): wait for them, at most the stall timeout, then go on with what is
        // here — the comparison will say how it differs.
        if order.len() < tail.len() {
            let since = match state.pacing {
                Some((p, since)) if p == position => since,
                _ => {
                    let now = Instant::now();
                    state.pacing = Some((position, now));
                    now
                }
            };
            if let Some(left) = self.options.stall.checked_sub(since.elapsed()) {
                return Pace::Wait(left);
            }
            return identity();
        }
        order.sort_unstable();
        Pace::Now(order.into_iter().map(|(_, i)| i).collect())
    }
}

/// The user messages that end a request (an event turn's events).
fn trailing_user_messages(messages: &[Arc<ChatMessage>]) -> Vec<&str> {
    let mut tail: Vec<&str> = messages
        .iter()
        .rev()
        .map_while(|m| match &**m {
            ChatMessage::User { content } => Some(content.as_str()),
            _ => None,
        })
        .filter(|text| !is_note_text(text))
        .collect();
    tail.reverse();
    tail
}

/// The models of a replayed team.
struct ReplayModels(Arc<Player>);

impl ReplayModels {
    fn client(&self, agent: &AgentName, model: Option<&str>) -> Arc<dyn ModelClient> {
        Arc::new(ReplayModel {
            player: self.0.clone(),
            agent: agent.clone(),
            live: self
                .0
                .options
                .live
                .as_ref()
                .map(|live| live.model_named(agent, model)),
        })
    }
}

impl ModelChooser for ReplayModels {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient> {
        self.client(agent, None)
    }

    fn model_named(&self, agent: &AgentName, model: Option<&str>) -> Arc<dyn ModelClient> {
        self.client(agent, model)
    }

    fn pacing(&self) -> Option<Arc<dyn EventPacing>> {
        Some(self.0.clone())
    }
}

struct ReplayModel {
    player: Arc<Player>,
    agent: AgentName,
    live: Option<Arc<dyn ModelClient>>,
}

#[async_trait::async_trait]
impl ModelClient for ReplayModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.player
            .answer(&self.agent, self.live.as_ref(), request)
            .await
    }
}

/// A call the recorded model answered with a failure, failing the same way now.
#[derive(Debug, thiserror::Error)]
#[error("{0} (as recorded)")]
pub struct RecordedFailure(String);

impl ErrorCode for RecordedFailure {
    fn code(&self) -> &'static str {
        "replay_recorded_failure"
    }
}

impl crate::model::ImplementationError for RecordedFailure {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A call made after the replay stopped.
fn stopped() -> ModelError {
    ModelError::Implementation(Box::new(RecordedFailure(
        "the replay stopped at its first difference".into(),
    )))
}

#[cfg(test)]
mod tests {
    use super::super::record::{CallLine, Line, RequestDelta, Start, VERSION};
    use super::*;

    fn recording(lead_requests: &[Vec<ChatMessage>]) -> Recording {
        let mut lines = vec![Line::Start(Start {
            version: VERSION,
            run: "r".into(),
            at: "2026-07-30T08:00:00.000Z".into(),
            prompt: "p".into(),
            workspace: "/w".into(),
            settings: "none".into(),
            git: None,
        })];
        let mut previous: Option<ModelRequest> = None;
        for (i, messages) in lead_requests.iter().enumerate() {
            let request = ModelRequest::turn(messages.clone(), Vec::new());
            lines.push(Line::Call(Box::new(CallLine {
                seq: i as u64,
                agent: "lead".into(),
                index: i,
                purpose: Purpose::Turn,
                digest: String::new(),
                request: RequestDelta::between(previous.as_ref().map(|p| (i - 1, p)), &request),
                answer: Some(ModelResponse::text("ok", "m")),
                error: None,
            })));
            previous = Some(request);
        }
        let text: String = lines
            .iter()
            .map(|l| serde_json::to_string(l).unwrap() + "\n")
            .collect();
        Recording::parse(&text).unwrap()
    }

    fn player(recording: Recording) -> Arc<Player> {
        Player::new(
            recording,
            PlayOptions {
                mode: Mode::Compare,
                until: None,
                live: None,
                stall: Duration::from_secs(30),
                workspace: "/w".into(),
                redactor: Redactor::default(),
            },
        )
    }

    #[tokio::test]
    async fn a_runtime_call_that_differs_fails_at_once_with_the_divergence_reported() {
        let (sys, prompt) = (ChatMessage::system("s"), ChatMessage::user("p"));
        let player = player(recording(&[vec![sys.clone(), prompt]]));
        let lead = player.models().model_for(&AgentName::lead());
        // A memory extraction where the recording has the lead's turn: a divergence, and no
        // run's cancellation to end the call (it comes after the run).
        let extraction = ModelRequest::side(Purpose::MemoryExtract, vec![sys]);
        let answered = tokio::time::timeout(Duration::from_secs(30), lead.complete(&extraction))
            .await
            .expect("the call never ended");
        assert!(answered.is_err());
        assert!(player.stop_token().is_cancelled());
        assert!(matches!(
            player.report().divergence,
            Some(Divergence::Request { call: 1, .. })
        ));
    }

    #[tokio::test]
    async fn the_lead_waits_for_its_recorded_turns_events_and_holds_back_early_ones() {
        let (sys, prompt) = (ChatMessage::system("s"), ChatMessage::user("p"));
        let answer = ChatMessage::Assistant(crate::model::AssistantMessage::text("ok"));
        let event = |who: &str| format!("[event] {{\"sender\":\"{who}\"}}");
        let first = vec![sys.clone(), prompt.clone()];
        let second = vec![sys, prompt, answer, ChatMessage::user(event("beta"))];
        let player = player(recording(&[first.clone(), second]));
        // The lead's first call is answered; its next turn must start with beta's result.
        let models = player.models();
        let lead = models.model_for(&AgentName::lead());
        lead.complete(&ModelRequest::turn(first, Vec::new()))
            .await
            .unwrap();
        let pacing = models.pacing().unwrap();
        // Only alpha's result is here: wait (holding it).
        assert!(matches!(pacing.arrange(&[event("alpha")]), Pace::Wait(_)));
        // Both: beta's now, alpha's held for a later turn.
        assert_eq!(
            pacing.arrange(&[event("alpha"), event("beta")]),
            Pace::Now(vec![1])
        );
    }
}
