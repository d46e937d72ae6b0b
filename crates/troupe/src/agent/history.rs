//! A conversation history with idempotency keys.
//!
//! Inputs that come from outside the runner (events, redelivered messages) carry a stable key —
//! a message id, an event id — and are appended at most once per key, so an at-least-once
//! delivery never shows the model the same input twice. With a transcript, every entry (and its
//! key) is also written to disk, so the same holds across runs.

use std::collections::HashSet;
use std::sync::Arc;

use super::transcript::{Boundary, Loaded, MicroCompaction, Origin, TranscriptSink};
use crate::model::ChatMessage;

#[derive(Clone, Default)]
pub struct History {
    /// The system prompt first (never written to the transcript: it is rebuilt, not recorded),
    /// then the conversation.
    messages: Vec<ChatMessage>,
    /// Who put each message there, in step with `messages`.
    origins: Vec<Origin>,
    /// Keys of inputs already appended.
    applied: HashSet<String>,
    /// How many clearable tool results (counted from the start) are sent cleared: the sticky
    /// state of micro-compaction (`context::micro`). `messages` keeps the originals; this
    /// count is recorded in the transcript so a later run sends the same bytes.
    cleared_results: usize,
    /// Where each appended entry is also written (a transcript), if anywhere.
    sink: Option<Arc<dyn TranscriptSink>>,
    /// How many times the history was replaced (compactions): what the runner compares to know
    /// its system prompt was rebuilt.
    generation: u64,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("messages", &self.messages)
            .field("origins", &self.origins)
            .field("applied", &self.applied)
            .field("cleared_results", &self.cleared_results)
            .field("transcript", &self.sink.is_some())
            .finish()
    }
}

impl History {
    pub fn new(system_prompt: impl Into<String>) -> Self {
        Self {
            messages: vec![ChatMessage::system(system_prompt)],
            origins: vec![Origin::Runtime],
            applied: HashSet::new(),
            cleared_results: 0,
            sink: None,
            generation: 0,
        }
    }

    /// A history that continues `loaded` (an empty transcript starts a new conversation) and
    /// writes every new entry to `sink`. The system prompt is always today's: it may name new
    /// skills or a moved workspace (a system message a transcript holds is replaced). A new
    /// transcript records the first system prompt, for people who read it; later ones are
    /// rebuilt by each run, not recorded.
    pub async fn restore(
        system_prompt: impl Into<String>,
        loaded: Loaded,
        sink: Arc<dyn TranscriptSink>,
    ) -> Self {
        if loaded.messages.is_empty() && loaded.boundaries == 0 {
            let system = ChatMessage::system(system_prompt);
            record(&sink, None, &system, Origin::Runtime).await;
            let mut history = Self::new(String::new());
            history.messages = vec![system];
            history.applied = loaded.keys;
            history.sink = Some(sink);
            return history;
        }
        let mut history = Self {
            messages: loaded.messages,
            origins: loaded.origins,
            applied: loaded.keys,
            cleared_results: loaded.cleared_results,
            sink: Some(sink),
            generation: 0,
        };
        history
            .origins
            .resize(history.messages.len(), Origin::Runtime);
        let system = ChatMessage::system(system_prompt);
        match history.messages.first_mut() {
            Some(first @ ChatMessage::System { .. }) => *first = system,
            _ => {
                history.messages.insert(0, system);
                history.origins.insert(0, Origin::Runtime);
            }
        }
        history
    }

    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    /// Who put each message there, in step with [`History::messages`].
    pub fn origins(&self) -> &[Origin] {
        &self.origins
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The system prompt in use.
    pub fn system_prompt(&self) -> &str {
        match self.messages.first() {
            Some(ChatMessage::System { content }) => content,
            _ => "",
        }
    }

    /// Replaces the system prompt (in memory only: it is rebuilt by every run, never recorded).
    pub fn set_system_prompt(&mut self, prompt: String) {
        match self.messages.first_mut() {
            Some(ChatMessage::System { content }) => *content = prompt,
            _ => {
                self.messages.insert(0, ChatMessage::system(prompt));
                self.origins.insert(0, Origin::Runtime);
            }
        }
    }

    /// Appends the runtime's own message (an answer, a tool result) without a key.
    pub async fn push(&mut self, message: ChatMessage) {
        self.push_as(Origin::Runtime, message).await;
    }

    /// Appends a message without a key, recording who it came from.
    pub async fn push_as(&mut self, origin: Origin, message: ChatMessage) {
        if let Some(sink) = &self.sink {
            record(sink, None, &message, origin).await;
        }
        self.messages.push(message);
        self.origins.push(origin);
    }

    /// Appends an input once per key; returns false (and appends nothing) if the key was seen
    /// before.
    pub async fn push_once(&mut self, key: &str, message: ChatMessage) -> bool {
        if !self.applied.insert(key.to_owned()) {
            return false;
        }
        if let Some(sink) = &self.sink {
            record(sink, Some(key), &message, Origin::Input).await;
        }
        self.messages.push(message);
        self.origins.push(Origin::Input);
        true
    }

    /// Puts a note of the living prompt (see `agent::prompt`) right before the newest inputs:
    /// the user messages at the end of the history, added since the model last answered. In
    /// memory only (a transcript never records a note). Returns false, adding nothing, when the
    /// history does not end on such inputs (it ends on a tool result: the note waits, as a
    /// note must never come between a call's result and the answer to it).
    pub fn insert_note(&mut self, note: String) -> bool {
        let inputs = self
            .messages
            .iter()
            .rev()
            .take_while(|m| matches!(m, ChatMessage::User { .. }))
            .count();
        let at = self.messages.len() - inputs;
        if inputs == 0 || at == 0 {
            return false;
        }
        self.messages.insert(at, ChatMessage::user(note));
        self.origins
            .insert(at.min(self.origins.len()), Origin::Note);
        true
    }

    /// How many times the history was replaced (by compaction).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.applied.contains(key)
    }

    /// How many clearable tool results are sent cleared (see `context::micro`).
    pub fn cleared_results(&self) -> usize {
        self.cleared_results
    }

    /// Sends the first `count` clearable tool results cleared from now on (a micro-compaction
    /// batch), recorded in the transcript. The messages themselves are not changed.
    pub async fn clear_results(&mut self, count: usize) {
        if count == self.cleared_results {
            return;
        }
        self.cleared_results = count;
        if let Some(sink) = &self.sink {
            let cleared = MicroCompaction {
                cleared_results: count,
            };
            if let Err(e) = sink.micro_compaction(&cleared).await {
                // This run sends the same bytes; the next one may clear differently, once.
                tracing::warn!("micro-compaction not written to the transcript: {e}");
            }
        }
    }

    /// What is sent for this history: its messages with the cleared results replaced by a
    /// placeholder.
    pub fn sent_messages(&self) -> Vec<ChatMessage> {
        super::context::sent_messages(&self.messages, self.cleared_results)
    }

    /// Replaces the whole history (a compaction): `messages` must start with the system
    /// message. The transcript gets a boundary and the new history after it, so the next run
    /// loads the compacted conversation; the keys seen so far stay known. No result of the new
    /// history is sent cleared (a boundary resets micro-compaction too).
    pub async fn replace(
        &mut self,
        messages: Vec<ChatMessage>,
        origins: Vec<Origin>,
        boundary: Boundary,
    ) {
        debug_assert_eq!(messages.len(), origins.len());
        if let Some(sink) = &self.sink {
            let written = async {
                sink.boundary(&boundary).await?;
                for (message, origin) in messages.iter().zip(&origins) {
                    if !matches!(message, ChatMessage::System { .. }) && *origin != Origin::Note {
                        sink.append(None, message, *origin).await?;
                    }
                }
                Ok::<(), crate::store::IoError>(())
            }
            .await;
            if let Err(e) = written {
                // The next run would load a boundary with part of the history after it: the
                // history it continues is shorter, never wrong (calls without results are
                // answered as cancelled on load).
                tracing::warn!("compaction not fully written to the transcript: {e}");
            }
        }
        self.messages = messages;
        self.origins = origins;
        self.cleared_results = 0;
        self.generation += 1;
    }
}

async fn record(
    sink: &Arc<dyn TranscriptSink>,
    key: Option<&str>,
    message: &ChatMessage,
    origin: Origin,
) {
    if let Err(e) = sink.append(key, message, origin).await {
        // The conversation goes on in memory; only its memory across runs is at risk.
        tracing::warn!("transcript not written: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keyed_inputs_are_appended_once() {
        let mut h = History::new("sys");
        assert!(h.push_once("m-1", ChatMessage::user("event one")).await);
        assert!(
            !h.push_once("m-1", ChatMessage::user("event one again"))
                .await
        );
        assert!(h.push_once("m-2", ChatMessage::user("event two")).await);
        assert_eq!(h.len(), 3);
        assert!(h.contains_key("m-1"));
    }
}
