//! The model's side of memory (SPEC §9): what to keep from a conversation, which records a prompt
//! needs, and which records say the same thing twice.
//!
//! Each query is one tool-less call ([`ModelRequest::side`]) whose answer must be strict JSON: a
//! single surrounding ```` ```json ```` fence is tolerated, anything else malformed is an error and
//! nothing is written. Every record in an answer is validated like a record on disk, so a bad
//! answer never half-updates the store.
//!
//! [`Memory`] ties the queries to the [`MemoryStore`]: `remember` after a session, `relevant`
//! before one, [`Memory::render_for_prompt`] for the system prompt.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use troupe_wire::AgentName;

use super::usage::UsageSink;
use crate::error::ErrorCode;
use crate::model::{ChatMessage, ModelClient, ModelRequest, Purpose};
use crate::store::memory::{MemoryError, MemoryRecord, MemoryStore, MemoryType};

/// Past this many records, `remember` asks for a consolidation.
pub const CONSOLIDATE_AFTER_RECORDS: usize = 40;
/// Past this many bytes of descriptions in total, `remember` asks for a consolidation.
pub const CONSOLIDATE_AFTER_DESCRIPTION_BYTES: usize = 16 * 1024;
/// The most records `select` keeps.
pub const MAX_SELECTED: usize = 5;
/// The most of a conversation the extraction sees (its end).
pub const MAX_CONVERSATION_BYTES: usize = 48 * 1024;
/// The most of one tool result (or tool call's arguments) the extraction sees.
pub const MAX_TOOL_TEXT_BYTES: usize = 300;

const EXTRACT_INSTRUCTION: &str = "\
You maintain the durable memory of an agent: short records that survive across sessions.
Read the conversation and return ONLY the records worth keeping for future sessions:
- user: who the user is, their role and preferences;
- feedback: corrections and guidance the user gave about how to work (what to do or avoid, and why);
- project: facts about the project, its goals, decisions and deadlines that are not in the code;
- reference: where to find things outside the workspace (links, documents, systems).
Do not record what is in the code or the files, what can be derived from them, the task's \
progress, or anything only useful in this session. Reuse the name of an existing record to \
update it rather than creating a near-duplicate.
Answer with a JSON array only, no prose. Each element is an object with exactly the keys \
\"name\" (a lowercase slug like `prefers-short-answers`, at most 64 bytes), \"type\" (one of \
user, feedback, project, reference), \"description\" (one line, at most 200 characters) and \
\"body\" (at most 4096 bytes and 200 lines). Answer [] when there is nothing new worth keeping.";

const SELECT_INSTRUCTION: &str = "\
You choose which durable memory records help with the user's request. Below is the catalog \
(name, type, description). Answer with a JSON array only, no prose: the names of at most 5 \
records that are clearly useful for this request, most useful first. Answer [] when none is.";

const CONSOLIDATE_INSTRUCTION: &str = "\
You tidy an agent's durable memory. Below are all its records. Find records that duplicate or \
overlap each other and merge each group into one record that keeps every fact. Answer with a \
JSON array only, no prose; each element is {\"merge\": [names of at least two existing records], \
\"into\": {\"name\", \"type\", \"description\", \"body\"}}. A name appears in at most one merge; \
the merged record's name is one of the merged names or a new name. Bodies stay under 4096 bytes \
and 200 lines, descriptions one line under 200 characters. Answer [] when nothing overlaps.";

/// One consolidation: the records `merge` become the record `into`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merge {
    pub merge: Vec<String>,
    pub into: MemoryRecord,
}

/// The memory queries, each one model call.
#[derive(Clone)]
pub struct MemoryQueries {
    model: Arc<dyn ModelClient>,
    /// Where each answer's token usage is recorded, and for whom (`usage.jsonl` lists the
    /// `memory_extract` and `memory_select` calls like every other).
    usage: Option<(AgentName, Arc<dyn UsageSink>)>,
}

/// A record as the model writes it: exactly these keys.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordAnswer {
    name: String,
    #[serde(rename = "type")]
    kind: MemoryType,
    description: String,
    body: String,
}

impl RecordAnswer {
    fn into_record(self) -> Result<MemoryRecord, MemoryError> {
        MemoryRecord::new(self.name, self.kind, self.description, self.body)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MergeAnswer {
    merge: Vec<String>,
    into: RecordAnswer,
}

impl MemoryQueries {
    pub fn new(model: Arc<dyn ModelClient>) -> Self {
        Self { model, usage: None }
    }

    /// Records the usage of every answer for `agent`.
    pub fn with_usage(mut self, agent: AgentName, usage: Arc<dyn UsageSink>) -> Self {
        self.usage = Some((agent, usage));
        self
    }

    /// The records worth keeping from `conversation`; `catalog` is shown so that an update reuses
    /// an existing name. Any invalid record makes the whole answer invalid.
    pub async fn extract(
        &self,
        conversation: &[ChatMessage],
        catalog: &[MemoryRecord],
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        let purpose = Purpose::MemoryExtract;
        let user = format!(
            "Existing records:\n{}\n\nConversation:\n{}",
            catalog_text(catalog),
            render_conversation(conversation)
        );
        let answers: Vec<RecordAnswer> = self.ask(purpose, EXTRACT_INSTRUCTION, user).await?;
        let mut names = BTreeSet::new();
        let mut records = Vec::with_capacity(answers.len());
        for answer in answers {
            let record = answer
                .into_record()
                .map_err(|e| answer_error(purpose, e.to_string()))?;
            if !names.insert(record.name.clone()) {
                return Err(answer_error(
                    purpose,
                    format!("record {:?} appears twice", record.name),
                ));
            }
            records.push(record);
        }
        Ok(records)
    }

    /// The names of the records relevant to `prompt`: names not in `catalog` dropped, duplicates
    /// dropped, at most [`MAX_SELECTED`]. No model call for an empty catalog.
    pub async fn select(
        &self,
        prompt: &str,
        catalog: &[MemoryRecord],
    ) -> Result<Vec<String>, MemoryError> {
        if catalog.is_empty() {
            return Ok(Vec::new());
        }
        let user = format!("Catalog:\n{}\n\nRequest:\n{prompt}", catalog_text(catalog));
        let names: Vec<String> = self
            .ask(Purpose::MemorySelect, SELECT_INSTRUCTION, user)
            .await?;
        let known: BTreeSet<&str> = catalog.iter().map(|r| r.name.as_str()).collect();
        let mut seen = BTreeSet::new();
        Ok(names
            .into_iter()
            .filter(|name| known.contains(name.as_str()) && seen.insert(name.clone()))
            .take(MAX_SELECTED)
            .collect())
    }

    /// Groups of overlapping records to merge. Every merged name must be in `catalog`, each merge
    /// names at least two records, no name is in two merges, and a merged record never takes the
    /// name of a record outside its merge (which it would overwrite).
    pub async fn consolidate(&self, catalog: &[MemoryRecord]) -> Result<Vec<Merge>, MemoryError> {
        let purpose = Purpose::MemoryConsolidate;
        let user = format!("Records:\n{}", full_catalog_text(catalog));
        let answers: Vec<MergeAnswer> = self.ask(purpose, CONSOLIDATE_INSTRUCTION, user).await?;
        let known: BTreeSet<&str> = catalog.iter().map(|r| r.name.as_str()).collect();
        let mut used = BTreeSet::new();
        let mut targets = BTreeSet::new();
        let mut merges = Vec::with_capacity(answers.len());
        for answer in answers {
            let into = answer
                .into
                .into_record()
                .map_err(|e| answer_error(purpose, e.to_string()))?;
            let group: BTreeSet<&str> = answer.merge.iter().map(String::as_str).collect();
            if group.len() != answer.merge.len() {
                return Err(answer_error(purpose, "a merge names a record twice".into()));
            }
            if group.len() < 2 {
                return Err(answer_error(
                    purpose,
                    "a merge names fewer than two records".into(),
                ));
            }
            for name in &answer.merge {
                if !known.contains(name.as_str()) {
                    return Err(answer_error(
                        purpose,
                        format!("merge names unknown record {name:?}"),
                    ));
                }
                if !used.insert(name.clone()) {
                    return Err(answer_error(
                        purpose,
                        format!("record {name:?} is in two merges"),
                    ));
                }
            }
            if known.contains(into.name.as_str()) && !group.contains(into.name.as_str()) {
                return Err(answer_error(
                    purpose,
                    format!(
                        "merged record {:?} would overwrite a record outside its merge",
                        into.name
                    ),
                ));
            }
            if !targets.insert(into.name.clone()) {
                return Err(answer_error(
                    purpose,
                    format!("two merges write record {:?}", into.name),
                ));
            }
            merges.push(Merge {
                merge: answer.merge,
                into,
            });
        }
        Ok(merges)
    }

    async fn ask<T: DeserializeOwned>(
        &self,
        purpose: Purpose,
        instruction: &str,
        user: String,
    ) -> Result<T, MemoryError> {
        let request = ModelRequest::side(
            purpose,
            vec![ChatMessage::system(instruction), ChatMessage::user(user)],
        );
        let response = self
            .model
            .complete(&request)
            .await
            .map_err(|e| MemoryError::Model {
                purpose: purpose.as_str(),
                message: format!("{e} [{}]", e.code()),
            })?;
        if let Some((agent, usage)) = &self.usage {
            usage.record(agent, purpose, &response).await;
        }
        if !response.message.tool_calls.is_empty() {
            return Err(answer_error(purpose, "the answer calls tools".into()));
        }
        let text = response.message.content.unwrap_or_default();
        troupe_wire::strict::from_json_str(strip_fence(&text), "")
            .map_err(|e| answer_error(purpose, e.to_string()))
    }
}

fn answer_error(purpose: Purpose, reason: String) -> MemoryError {
    MemoryError::Answer {
        purpose: purpose.as_str(),
        reason,
    }
}

/// The text inside one surrounding ```` ``` ```` or ```` ```json ```` fence, else the text.
fn strip_fence(text: &str) -> &str {
    let trimmed = text.trim();
    let inner = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"));
    match inner {
        Some(inner) if inner.starts_with('\n') || inner.starts_with(' ') => inner.trim(),
        _ => trimmed,
    }
}

fn catalog_text(catalog: &[MemoryRecord]) -> String {
    if catalog.is_empty() {
        return "(none)".to_owned();
    }
    catalog
        .iter()
        .map(|r| format!("- {} ({}): {}", r.name, r.kind, r.description))
        .collect::<Vec<_>>()
        .join("\n")
}

fn full_catalog_text(catalog: &[MemoryRecord]) -> String {
    catalog
        .iter()
        .map(|r| format!("## {} ({}): {}\n{}", r.name, r.kind, r.description, r.body))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The conversation as one text for the extraction: system prompts left out (they hold the
/// memory already), tool results and arguments cut short, and only the last
/// [`MAX_CONVERSATION_BYTES`] kept.
pub fn render_conversation(conversation: &[ChatMessage]) -> String {
    let mut parts = Vec::with_capacity(conversation.len());
    for message in conversation {
        match message {
            ChatMessage::System { .. } => {}
            ChatMessage::User { content } => parts.push(format!("[user]\n{content}")),
            ChatMessage::Assistant(assistant) => {
                if let Some(content) = &assistant.content {
                    parts.push(format!("[assistant]\n{content}"));
                }
                for call in &assistant.tool_calls {
                    parts.push(format!(
                        "[assistant called {}]\n{}",
                        call.name,
                        cut(&call.arguments, MAX_TOOL_TEXT_BYTES)
                    ));
                }
            }
            ChatMessage::Tool { content, .. } => {
                parts.push(format!(
                    "[tool result]\n{}",
                    cut(content, MAX_TOOL_TEXT_BYTES)
                ));
            }
        }
    }
    let text = parts.join("\n\n");
    tail(&text, MAX_CONVERSATION_BYTES).to_owned()
}

/// At most `max` bytes of the start of `text` (on a character boundary), marked when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [cut, {} bytes in all]", &text[..end], text.len())
}

/// At most `max` bytes of the end of `text`, on a character boundary.
fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// What [`Memory::remember`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RememberOutcome {
    /// The names written (new or replaced), in the model's order.
    pub written: Vec<String>,
    /// How many merges were applied by the consolidation (0 when none ran).
    pub merged: usize,
}

/// The memory of one workspace: the store and the queries on it.
pub struct Memory {
    store: MemoryStore,
    queries: MemoryQueries,
}

impl Memory {
    pub fn new(store: MemoryStore, queries: MemoryQueries) -> Self {
        Self { store, queries }
    }

    pub fn store(&self) -> &MemoryStore {
        &self.store
    }

    /// Extracts what is worth keeping from `conversation` and writes it (a record with an
    /// existing name replaces it); then, if the catalog passes its budget, consolidates it.
    /// An invalid answer writes nothing.
    pub async fn remember(
        &self,
        conversation: &[ChatMessage],
    ) -> Result<RememberOutcome, MemoryError> {
        let catalog = self.store.list().await?;
        let records = self.queries.extract(conversation, &catalog.records).await?;
        let mut outcome = RememberOutcome::default();
        for record in &records {
            self.store.put(record).await?;
            outcome.written.push(record.name.clone());
        }
        let catalog = self.store.list().await?;
        if over_budget(&catalog.records) {
            let merges = self.queries.consolidate(&catalog.records).await?;
            for merge in &merges {
                self.store.apply_merge(&merge.merge, &merge.into).await?;
                outcome.merged += 1;
            }
        }
        Ok(outcome)
    }

    /// The records relevant to `prompt` (at most [`MAX_SELECTED`]), in the model's order.
    pub async fn relevant(&self, prompt: &str) -> Result<Vec<MemoryRecord>, MemoryError> {
        let catalog = self.store.list().await?;
        let names = self.queries.select(prompt, &catalog.records).await?;
        let by_name: BTreeMap<&str, &MemoryRecord> = catalog
            .records
            .iter()
            .map(|r| (r.name.as_str(), r))
            .collect();
        Ok(names
            .iter()
            .filter_map(|name| by_name.get(name.as_str()).map(|r| (*r).clone()))
            .collect())
    }

    /// The system prompt's memory section; empty for no records.
    pub fn render_for_prompt(records: &[MemoryRecord]) -> String {
        if records.is_empty() {
            return String::new();
        }
        let mut text = String::from(
            "# Memory\n\nDurable notes from earlier sessions that bear on this request. \
             Follow user and feedback notes; check project and reference notes against the \
             workspace before relying on them.\n",
        );
        for record in records {
            text.push_str(&format!(
                "\n## {} ({}): {}\n{}\n",
                record.name,
                record.kind,
                record.description,
                record.body.trim_end()
            ));
        }
        text
    }
}

/// Whether the catalog is big enough to consolidate.
pub fn over_budget(records: &[MemoryRecord]) -> bool {
    records.len() > CONSOLIDATE_AFTER_RECORDS
        || records.iter().map(|r| r.description.len()).sum::<usize>()
            > CONSOLIDATE_AFTER_DESCRIPTION_BYTES
}
