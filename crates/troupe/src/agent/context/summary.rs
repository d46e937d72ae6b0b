//! The summary of older history: its strict JSON shape, the request asking for it, and the user
//! message it becomes (SPEC §9, issue 10 item 3).
//!
//! The summary is one tool-less model call ([`Purpose::Summary`]). Its answer is model output,
//! so it is parsed strictly — exactly five keys, no duplicates, the right types, a goal that
//! says something — and a malformed answer is an error the runner retries once before falling
//! back to dropping the oldest part ([`super::drop_oldest`]).
//!
//! The history to summarise is sent rendered as the text of ONE user message rather than as
//! chat messages: servers refuse tool messages in a request without tools, and the rendering
//! lets tool results be cut to a preview and the whole be bounded (the newest part is kept).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::budget::preview;
use super::{origin_at, Origin};
use crate::error::ErrorCode;
use crate::model::{ChatMessage, ModelRequest, Purpose};

/// The first line of every summary message.
pub const SUMMARY_HEADER: &str = "[Summary of earlier conversation]";
/// A tool result (or a call's arguments) is cut to about this many bytes in the rendering.
const RENDERED_RESULT_BYTES: usize = 2_000;
/// The rendering of the history to summarise is kept under about this many bytes (newest part).
const RENDERED_HISTORY_BYTES: usize = 200_000;

/// The five keys, in the order the instruction and the rendering list them.
const KEYS: [&str; 5] = [
    "current_goal",
    "key_findings",
    "files_read_or_changed",
    "remaining_work",
    "user_constraints",
];

/// What the summary call must answer.
const INSTRUCTION: &str = "You compact the conversation of an AI agent so that it can go on \
working with less context. The conversation to summarise is in the user message. Answer with \
ONE JSON object and nothing else (no prose, no code fence), exactly of this shape:\n\
{\"current_goal\": \"<what the agent is working towards now; not empty>\", \
\"key_findings\": [\"<a fact learned that is still needed>\", ...], \
\"files_read_or_changed\": [\"<path: what was read or changed>\", ...], \
\"remaining_work\": [\"<a step still to do>\", ...], \
\"user_constraints\": [\"<a requirement, preference or constraint stated by a person>\", ...]}\n\
All five keys are required and no other key is allowed; every list holds strings (it may be \
empty). Keep every requirement a person stated in user_constraints, in their words where \
short. Fold earlier summaries in the conversation into this one. Do not call tools. Write in \
the language of the conversation.";

/// The summary object the model answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub current_goal: String,
    pub key_findings: Vec<String>,
    pub files_read_or_changed: Vec<String>,
    pub remaining_work: Vec<String>,
    pub user_constraints: Vec<String>,
}

/// A summary answer that is not the strict JSON object asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed summary: {reason}")]
pub struct SummaryError {
    /// One line saying what is wrong.
    pub reason: String,
}

impl SummaryError {
    fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into().replace(['\n', '\r'], " "),
        }
    }
}

impl ErrorCode for SummaryError {
    fn code(&self) -> &'static str {
        "malformed_summary"
    }
}

/// Parses a summary answer: one JSON object with exactly the five keys (a duplicate key is
/// refused), `current_goal` a non-blank string and the others arrays of strings. One fence
/// around the object (```` ``` ```` or ```` ```json ````) is tolerated; any other text is not.
pub fn parse_summary(text: &str) -> Result<Summary, SummaryError> {
    let json = unfence(text.trim());
    let value = troupe_wire::strict::parse_json_str(json, "summary")
        .map_err(|err| SummaryError::new(err.to_string()))?;
    let Value::Object(mut object) = value else {
        return Err(SummaryError::new("the answer is not a JSON object"));
    };
    if let Some(extra) = object.keys().find(|key| !KEYS.contains(&key.as_str())) {
        return Err(SummaryError::new(format!("unknown key {extra:?}")));
    }
    let mut take = |key: &str| {
        object
            .remove(key)
            .ok_or_else(|| SummaryError::new(format!("missing key {key:?}")))
    };
    let current_goal = match take("current_goal")? {
        Value::String(goal) if !goal.trim().is_empty() => goal,
        Value::String(_) => return Err(SummaryError::new("current_goal is blank")),
        _ => return Err(SummaryError::new("current_goal is not a string")),
    };
    let key_findings = strings("key_findings", take("key_findings")?)?;
    let files_read_or_changed = strings("files_read_or_changed", take("files_read_or_changed")?)?;
    let remaining_work = strings("remaining_work", take("remaining_work")?)?;
    let user_constraints = strings("user_constraints", take("user_constraints")?)?;
    Ok(Summary {
        current_goal,
        key_findings,
        files_read_or_changed,
        remaining_work,
        user_constraints,
    })
}

/// The inside of one surrounding ```` ``` ```` / ```` ```json ```` fence, or `text` itself.
fn unfence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some((opening, body)) = rest.split_once('\n') else {
        return text;
    };
    let language = opening.trim();
    if !(language.is_empty() || language.eq_ignore_ascii_case("json")) {
        return text;
    }
    match body.trim_end().strip_suffix("```") {
        Some(inner) => inner.trim(),
        None => text,
    }
}

fn strings(key: &str, value: Value) -> Result<Vec<String>, SummaryError> {
    let Value::Array(items) = value else {
        return Err(SummaryError::new(format!("{key} is not an array")));
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::String(text) => Ok(text),
            _ => Err(SummaryError::new(format!("{key} holds a non-string item"))),
        })
        .collect()
}

/// The tool-less request asking for a summary of `messages` (the part to summarise; a system
/// message among them is left out: the system prompt is rebuilt, never summarised).
pub fn summary_request(messages: &[ChatMessage], origins: &[Origin]) -> ModelRequest {
    summary_request_within(messages, origins, RENDERED_HISTORY_BYTES)
}

/// [`summary_request`] with the rendered history bounded to about `max_bytes` (at most
/// [`RENDERED_HISTORY_BYTES`]), so that the summary request itself fits a small context window.
pub fn summary_request_within(
    messages: &[ChatMessage],
    origins: &[Origin],
    max_bytes: usize,
) -> ModelRequest {
    ModelRequest::side(
        Purpose::Summary,
        vec![
            ChatMessage::system(INSTRUCTION),
            ChatMessage::user(render_history(
                messages,
                origins,
                max_bytes.clamp(1_000, RENDERED_HISTORY_BYTES),
            )),
        ],
    )
}

/// The history as text, one entry per message with a role label, bounded to about `limit`
/// bytes by keeping the newest entries.
fn render_history(messages: &[ChatMessage], origins: &[Origin], limit: usize) -> String {
    let entries: Vec<String> = messages
        .iter()
        .enumerate()
        .filter_map(|(index, message)| render_message(message, origin_at(origins, index)))
        .collect();
    let mut kept = Vec::new();
    let mut total = 0;
    for entry in entries.iter().rev() {
        if total + entry.len() > limit {
            if kept.is_empty() {
                // The newest entry alone is too large: its start and end stand for it.
                let half = limit / 2;
                kept.push(preview(entry, half, half));
            }
            break;
        }
        total += entry.len() + 2;
        kept.push(entry.clone());
    }
    let omitted = entries.len() - kept.len();
    let mut text = String::from("The conversation to summarise:\n\n");
    if omitted > 0 {
        text.push_str(&format!(
            "[{omitted} older messages omitted: the conversation was too long to send whole]\n\n"
        ));
    }
    kept.reverse();
    text.push_str(&kept.join("\n\n"));
    text
}

fn render_message(message: &ChatMessage, origin: Origin) -> Option<String> {
    match message {
        ChatMessage::System { .. } => None,
        // A note says how the team stood then; the rebuilt system prompt says how it stands.
        ChatMessage::User { .. } if origin == Origin::Note => None,
        ChatMessage::User { content } => {
            let label = match origin {
                Origin::Person => "person",
                Origin::Input => "input (event or message)",
                Origin::Summary => "earlier summary",
                Origin::Runtime | Origin::Note => "runtime",
            };
            Some(format!("[{label}]\n{content}"))
        }
        ChatMessage::Assistant(answer) => {
            let mut text = String::from("[assistant]");
            if let Some(content) = answer.content.as_deref().filter(|c| !c.is_empty()) {
                text.push('\n');
                text.push_str(content);
            }
            for call in &answer.tool_calls {
                text.push_str(&format!(
                    "\n[calls tool {} ({})] {}",
                    call.name,
                    call.id,
                    preview(
                        &call.arguments,
                        RENDERED_RESULT_BYTES / 2,
                        RENDERED_RESULT_BYTES / 2
                    )
                ));
            }
            Some(text)
        }
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => Some(format!(
            "[tool result of {tool_call_id}]\n{}",
            preview(
                content,
                RENDERED_RESULT_BYTES / 2,
                RENDERED_RESULT_BYTES / 2
            )
        )),
    }
}

/// The text of the summary user message: [`SUMMARY_HEADER`], the summary's sections, then the
/// earlier words of a person kept verbatim (oldest first).
///
/// Each summary item is rendered on one line (line breaks in model text become spaces), so no
/// line of model text can pass for the verbatim section that follows it; see
/// [`super::carried_person_words`].
pub fn render_summary(summary: &Summary, person_words: &[String]) -> String {
    let mut text = format!(
        "{SUMMARY_HEADER}\nCurrent goal: {}\n",
        one_line(&summary.current_goal)
    );
    for (title, items) in [
        ("Key findings", &summary.key_findings),
        ("Files read or changed", &summary.files_read_or_changed),
        ("Remaining work", &summary.remaining_work),
        ("User constraints", &summary.user_constraints),
    ] {
        text.push_str(title);
        text.push_str(":\n");
        if items.is_empty() {
            text.push_str("- (none)\n");
        }
        for item in items {
            text.push_str("- ");
            text.push_str(&one_line(item));
            text.push('\n');
        }
    }
    super::plan::append_person_words(&mut text, person_words);
    text
}

fn one_line(text: &str) -> String {
    text.trim().replace(['\n', '\r'], " ")
}
