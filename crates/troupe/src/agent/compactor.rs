//! Where compaction sits in the runner's loop (SPEC §9).
//!
//! Before every model call the runner asks [`Compactor::request`] for the request to send:
//!
//! 1. the history, **micro-compacted**: when the request passes the trigger (half the budget),
//!    one batch of the oldest large tool results is cleared down to a target (a quarter of
//!    it), never the last exchange's (nor, while they fit in the target, those
//!    of the two before it) nor results under 1 KB; the cleared ones stay cleared
//!    (the history holds how many and the transcript records it) so every request until the
//!    next batch is the previous one plus appended messages — see `context::micro`;
//! 2. if that request is still larger than the model's budget (three quarters of its context
//!    window, see `context::window`), a **summary compaction** first: the older history is
//!    summarised by one tool-less model call into the strict summary object, and the history
//!    becomes the system prompt, the summary, the person's words that must stay verbatim, and
//!    the most recent exchanges (never a tool call without its result). A summary that is not
//!    valid is asked for once more; if it fails again the older history is dropped with a
//!    note — compaction never fails a turn. The history is replaced with a boundary in the
//!    transcript, so the next run continues from the compacted conversation.
//!
//! After the call, a prompt-too-long refusal from the server triggers a **reactive**
//! compaction that keeps only the last 5 exchanges, and one retry (in the runner).
//!
//! Tool results are admitted through the [`ResultBudget`] before they enter the history: a
//! result over 30,000 bytes (or past 200,000 bytes in one batch) is kept whole as an artifact
//! and the history gets a preview.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use troupe_wire::AgentName;

use super::context::{
    compacted, drop_oldest, next_batch, parse_summary, plan, render_summary, sent_bytes,
    summary_request_within, ContextBudget, Keep, MicroPolicy, ResultBudget, Summary,
};
use super::history::History;
use super::memory::Memory;
use super::observer::{CompactionReport, RunObserver, Trigger};
use super::transcript::{Boundary, BoundaryKind, Origin};
use super::usage::UsageSink;
use crate::model::{ChatMessage, ModelClient, ModelRequest, ToolSpec};
use crate::store::artifacts::ArtifactStore;

/// How many exchanges a reactive compaction keeps (the server refused the request as too long).
pub const REACTIVE_KEEP_EXCHANGES: usize = 5;

/// Bytes of the budget left for the summary instruction and the JSON around the history.
const SUMMARY_INSTRUCTION_ROOM: usize = 3_000;

/// How many times the summary is asked for before the older history is dropped instead.
pub const SUMMARY_ATTEMPTS: usize = 2;

/// Compaction for one agent's runner.
pub struct Compactor {
    agent: AgentName,
    budget: ContextBudget,
    model: Arc<dyn ModelClient>,
    usage: Arc<dyn UsageSink>,
    observer: Arc<dyn RunObserver>,
    /// Memory to extract from the summarised part before it is summarised (when remembering).
    memory: Option<Arc<Memory>>,
}

impl Compactor {
    pub fn new(
        agent: AgentName,
        budget: ContextBudget,
        model: Arc<dyn ModelClient>,
        usage: Arc<dyn UsageSink>,
        observer: Arc<dyn RunObserver>,
    ) -> Self {
        Self {
            agent,
            budget,
            model,
            usage,
            observer,
            memory: None,
        }
    }

    /// Extract memories from what is about to be summarised.
    pub fn set_memory(&mut self, memory: Option<Arc<Memory>>) {
        self.memory = memory;
    }

    pub fn set_usage(&mut self, usage: Arc<dyn UsageSink>) {
        self.usage = usage;
    }

    pub fn set_budget(&mut self, budget: ContextBudget) {
        self.budget = budget;
    }

    /// The request to send for `history`: micro-compacted, after a summary compaction when it
    /// would pass the budget (the compacted history then starts with `system`, the agent's
    /// whole current system prompt).
    pub async fn request(
        &self,
        history: &mut History,
        tools: &[ToolSpec],
        system: &str,
        cancel: &CancellationToken,
    ) -> ModelRequest {
        self.clear_under_pressure(history, tools).await;
        let request = build(history, tools);
        if sent_bytes(&request.messages, tools) <= self.budget.budget_bytes {
            return request;
        }
        let keep = Keep::Bytes(self.budget.budget_bytes / 4);
        if self
            .compact(history, tools, system, keep, Trigger::Budget, cancel)
            .await
            .is_none()
        {
            return request;
        }
        self.clear_under_pressure(history, tools).await;
        build(history, tools)
    }

    /// Micro-compaction: when the request for `history` passes the trigger, one batch of old
    /// results is cleared from now on (see `context::micro`).
    async fn clear_under_pressure(&self, history: &mut History, tools: &[ToolSpec]) {
        let policy = MicroPolicy::for_budget(&self.budget);
        let cleared = history.cleared_results();
        if let Some(count) = next_batch(history.messages(), tools, cleared, &policy) {
            tracing::debug!(
                agent = %self.agent,
                "micro-compaction: {} more tool results cleared",
                count - cleared
            );
            history.clear_results(count).await;
        }
    }

    /// Compacts `history` now, keeping `keep` of its recent part; the compacted history starts
    /// with `system` (the system prompt is rebuilt, never summarised) and keeps no note of the
    /// living prompt (the rebuilt prompt holds what they said). `None` when there was nothing
    /// older to compact, or the compaction was cancelled (the history is then unchanged).
    pub async fn compact(
        &self,
        history: &mut History,
        tools: &[ToolSpec],
        system: &str,
        keep: Keep,
        trigger: Trigger,
        cancel: &CancellationToken,
    ) -> Option<CompactionReport> {
        let plan = plan(history.messages(), history.origins(), keep)?;
        let messages_before = history.len();
        let bytes_before = sent_bytes(&history.sent_messages(), tools);
        let older = &history.messages()[plan.summarise.clone()];
        let older_origins = &history.origins()[plan.summarise.clone()];
        if let Some(memory) = &self.memory {
            // Before the words are summarised away: what is worth keeping across sessions.
            if let Err(e) = memory.remember(older).await {
                tracing::warn!(agent = %self.agent, "memory extraction failed: {e}");
            }
        }
        let summary = self.summarise(older, older_origins, cancel).await?;
        let system = ChatMessage::system(system);
        let (mut messages, mut origins, kind) = match summary {
            Some(summary) => {
                let text = render_summary(&summary, &plan.person_words);
                let (messages, origins) =
                    compacted(system, &plan, text, history.messages(), history.origins());
                (messages, origins, BoundaryKind::Summary)
            }
            None => {
                let (messages, origins) =
                    drop_oldest(system, history.messages(), history.origins(), keep);
                (messages, origins, BoundaryKind::Dropped)
            }
        };
        without_notes(&mut messages, &mut origins);
        history
            .replace(
                messages,
                origins,
                Boundary {
                    kind,
                    replaced: messages_before,
                },
            )
            .await;
        let report = CompactionReport {
            trigger,
            kind,
            messages_before,
            messages_after: history.len(),
            bytes_before,
            bytes_after: sent_bytes(&history.sent_messages(), tools),
        };
        self.observer.compacted(&self.agent, &report);
        Some(report)
    }

    /// The summary of `older`, asked for up to [`SUMMARY_ATTEMPTS`] times. `Some(None)` when
    /// every attempt failed (the caller drops instead); `None` when cancelled.
    async fn summarise(
        &self,
        older: &[ChatMessage],
        origins: &[Origin],
        cancel: &CancellationToken,
    ) -> Option<Option<Summary>> {
        // The summary request must fit the window too: the rendered history gets the budget
        // less room for the instruction.
        let room = self
            .budget
            .budget_bytes
            .saturating_sub(SUMMARY_INSTRUCTION_ROOM);
        let request = summary_request_within(older, origins, room);
        for attempt in 1..=SUMMARY_ATTEMPTS {
            let answer = tokio::select! {
                biased;
                () = cancel.cancelled() => return None,
                answer = self.model.complete(&request) => answer,
            };
            let failure = match answer {
                Ok(response) => {
                    self.usage
                        .record(&self.agent, request.purpose, &response)
                        .await;
                    let text = response.message.content.unwrap_or_default();
                    match parse_summary(&text) {
                        Ok(summary) => return Some(Some(summary)),
                        Err(e) => e.to_string(),
                    }
                }
                Err(e) => e.to_string(),
            };
            tracing::warn!(
                agent = %self.agent,
                attempt,
                "summary compaction: no valid summary ({failure})"
            );
        }
        Some(None)
    }
}

/// Takes the living prompt's notes out of a compacted history.
fn without_notes(messages: &mut Vec<ChatMessage>, origins: &mut Vec<Origin>) {
    let mut kept = origins.iter().map(|o| *o != Origin::Note);
    messages.retain(|_| kept.next().unwrap_or(true));
    origins.retain(|o| *o != Origin::Note);
}

/// The request for `history` as it is, its cleared results replaced by the placeholder.
fn build(history: &History, tools: &[ToolSpec]) -> ModelRequest {
    ModelRequest::turn(history.sent_messages(), tools.to_vec())
}

/// Admits tool results into a history (see [`ResultBudget`]); without a store, results go in
/// whole.
pub struct Results(pub Option<ResultBudget>);

impl Results {
    pub fn start_batch(&mut self) {
        if let Some(budget) = &mut self.0 {
            budget.start_batch();
        }
    }

    /// Where results too large for the history are kept (`None`: nowhere).
    pub fn artifacts(&self) -> Option<ArtifactStore> {
        self.0.as_ref().map(|budget| budget.store().clone())
    }

    pub async fn admit(&mut self, content: String) -> String {
        match &mut self.0 {
            Some(budget) => budget.admit(content).await,
            None => content,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::observer::NullObserver;
    use crate::agent::prompt::is_note;
    use crate::agent::usage::NoUsage;
    use crate::model::ScriptedModel;

    /// A compaction starts the history with the system prompt it is given (the whole current
    /// one) and keeps no note of the living prompt, even one among the kept recent messages.
    #[tokio::test]
    async fn a_compaction_takes_the_given_system_prompt_and_drops_the_notes() {
        let compactor = Compactor::new(
            AgentName::lead(),
            ContextBudget::for_window(4_096),
            Arc::new(ScriptedModel::new()),
            Arc::new(NoUsage),
            Arc::new(NullObserver),
        );
        let mut history = History::new("old prompt");
        history
            .push_as(Origin::Person, ChatMessage::user("first"))
            .await;
        history
            .push(ChatMessage::Assistant(
                crate::model::AssistantMessage::text("one"),
            ))
            .await;
        history
            .push_as(Origin::Person, ChatMessage::user("second"))
            .await;
        history
            .push(ChatMessage::Assistant(
                crate::model::AssistantMessage::text("two"),
            ))
            .await;
        history
            .push_once("e-1", ChatMessage::user("[event] x"))
            .await;
        assert!(history.insert_note(crate::agent::prompt::note(&[], &[team()]).unwrap()));
        history
            .push(ChatMessage::Assistant(
                crate::model::AssistantMessage::text("three"),
            ))
            .await;
        assert!(history.messages().iter().any(is_note));
        let report = compactor
            .compact(
                &mut history,
                &[],
                "new prompt",
                Keep::Exchanges(4),
                Trigger::Manual,
                &CancellationToken::new(),
            )
            .await;
        assert!(report.is_some());
        assert_eq!(history.system_prompt(), "new prompt");
        assert!(!history.messages().iter().any(is_note), "{history:#?}");
        assert_eq!(history.messages().len(), history.origins().len());
        assert!(!history.origins().contains(&Origin::Note));
        assert_eq!(history.generation(), 1);
    }

    fn team() -> crate::agent::prompt::Section {
        crate::agent::prompt::Section {
            title: "Team".into(),
            entries: vec![crate::agent::prompt::Entry {
                key: "w".into(),
                text: "- w (idle): writer".into(),
                gone: "- w: gone".into(),
            }],
            empty: String::new(),
        }
    }
}
