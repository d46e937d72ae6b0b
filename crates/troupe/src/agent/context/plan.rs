//! Where summary compaction cuts, what it keeps verbatim, and the history it leaves
//! (SPEC §9 "What compaction never loses").
//!
//! A [`Plan`] splits the history (after its system message) at a group boundary — never between
//! a tool call and its result — into an older part to summarise and a recent part kept as it
//! is. What other agents lose in a summary, troupe keeps:
//! - the **latest request** of a person (the latest [`Origin::Person`] message; if the history
//!   has none, the latest [`Origin::Input`]) stays verbatim in every request after it: if it
//!   falls in the older part it is put back, whole, right after the summary;
//! - **earlier words of a person** in the older part are kept verbatim, newest first, up to
//!   [`PERSON_WORDS_BYTES`] in total, inside the summary message; older ones are left to the
//!   summary's `user_constraints` (the summary instruction asks for them). Words carried in an
//!   earlier summary are found again ([`carried_person_words`]), so they survive any number of
//!   compactions while they fit.
//!
//! The system prompt is not part of any of this: the caller rebuilds it and passes it in.

use std::ops::Range;

use super::groups::groups;
use super::micro::json_len;
use super::{origin_at, Origin};
use crate::model::ChatMessage;

/// The earlier words of a person kept verbatim across a compaction, in bytes.
pub const PERSON_WORDS_BYTES: usize = 8_192;
/// The groups a reactive compaction (after a prompt-too-long answer) keeps verbatim.
pub const REACTIVE_KEEP_GROUPS: usize = 5;

/// The line opening the verbatim words of a person inside a summary (or drop note) message.
const PERSON_WORDS_MARKER: &str = "[Earlier words of the person, verbatim, oldest first]";

/// How much of the recent history a compaction keeps verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The last n groups (a group is one tool exchange, or one other message). Reactive
    /// compaction keeps [`REACTIVE_KEEP_GROUPS`].
    Exchanges(usize),
    /// The most recent groups whose serialised size fits in this many bytes, and at least the
    /// last group (proactive compaction).
    Bytes(usize),
}

/// What a compaction summarises and keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The older messages to summarise (they start after the leading system message).
    pub summarise: Range<usize>,
    /// The first message kept verbatim (`summarise.end`; the history's length if none is kept).
    pub keep_from: usize,
    /// Earlier words of a person in the summarised part kept verbatim, oldest first, at most
    /// [`PERSON_WORDS_BYTES`] in total.
    pub person_words: Vec<String>,
    /// The latest request, when it falls in the summarised part: put back after the summary.
    pub latest_request: Option<String>,
    /// Who made the latest request ([`Origin::Person`], or [`Origin::Input`] in a history
    /// without a person's message), kept with it.
    pub latest_request_origin: Origin,
}

/// Plans a compaction of `messages`, or `None` when there is nothing older to summarise (the
/// older part is empty, or holds only earlier summaries and the latest request).
pub fn plan(messages: &[ChatMessage], origins: &[Origin], keep: Keep) -> Option<Plan> {
    let groups = groups(messages);
    let start = groups.first()?.range.start;
    let first_kept = match keep {
        Keep::Exchanges(count) => groups.len().saturating_sub(count),
        Keep::Bytes(budget) => {
            let mut first = groups.len();
            let mut total = 0usize;
            for (index, group) in groups.iter().enumerate().rev() {
                let size = json_len(&messages[group.range.clone()]);
                if first < groups.len() && total.saturating_add(size) > budget {
                    break;
                }
                total = total.saturating_add(size);
                first = index;
            }
            first
        }
    };
    let keep_from = groups
        .get(first_kept)
        .map_or(messages.len(), |group| group.range.start);
    let summarise = start..keep_from;
    let (latest, latest_request_origin) = match latest_of(messages, origins, Origin::Person) {
        Some(index) => (Some(index), Origin::Person),
        None => (latest_of(messages, origins, Origin::Input), Origin::Input),
    };
    let latest_in_summary = latest.filter(|index| summarise.contains(index));
    let nothing_to_summarise = summarise
        .clone()
        .all(|index| origin_at(origins, index) == Origin::Summary || Some(index) == latest);
    if nothing_to_summarise {
        return None;
    }
    let latest_request = latest_in_summary.and_then(|index| user_text(&messages[index]));
    Some(Plan {
        person_words: person_words(messages, origins, summarise.clone(), latest),
        summarise,
        keep_from,
        latest_request,
        latest_request_origin,
    })
}

/// The index of the latest user message from `origin`.
fn latest_of(messages: &[ChatMessage], origins: &[Origin], origin: Origin) -> Option<usize> {
    (0..messages.len())
        .rev()
        .find(|&index| origin_at(origins, index) == origin && user_text(&messages[index]).is_some())
}

fn user_text(message: &ChatMessage) -> Option<String> {
    match message {
        ChatMessage::User { content } => Some(content.clone()),
        _ => None,
    }
}

/// The person's words in `range` (but the latest request), and those carried by earlier
/// summaries in it, newest first up to [`PERSON_WORDS_BYTES`], returned oldest first.
fn person_words(
    messages: &[ChatMessage],
    origins: &[Origin],
    range: Range<usize>,
    latest: Option<usize>,
) -> Vec<String> {
    let mut candidates = Vec::new();
    for index in range {
        if Some(index) == latest {
            continue;
        }
        let Some(text) = user_text(&messages[index]) else {
            continue;
        };
        match origin_at(origins, index) {
            Origin::Person => candidates.push(text),
            Origin::Summary => candidates.extend(carried_person_words(&text)),
            Origin::Runtime | Origin::Input | Origin::Note => {}
        }
    }
    let mut kept = Vec::new();
    let mut total = 0usize;
    for words in candidates.into_iter().rev() {
        if total + words.len() > PERSON_WORDS_BYTES {
            break;
        }
        total += words.len();
        kept.push(words);
    }
    kept.reverse();
    kept
}

/// The compacted history and its origins: `system`, the summary (as [`Origin::Summary`]), the
/// latest request if it was summarised, then `messages[plan.keep_from..]` unchanged.
pub fn compacted(
    system: ChatMessage,
    plan: &Plan,
    summary_text: String,
    messages: &[ChatMessage],
    origins: &[Origin],
) -> (Vec<ChatMessage>, Vec<Origin>) {
    let mut history = vec![system, ChatMessage::user(summary_text)];
    let mut history_origins = vec![Origin::Runtime, Origin::Summary];
    if let Some(request) = &plan.latest_request {
        history.push(ChatMessage::user(request.clone()));
        history_origins.push(plan.latest_request_origin);
    }
    for (index, message) in messages.iter().enumerate().skip(plan.keep_from) {
        history.push(message.clone());
        history_origins.push(origin_at(origins, index));
    }
    (history, history_origins)
}

/// The fallback when the summary failed: the part a compaction would summarise is dropped and a
/// note says so, keeping the person's words and the latest request as [`compacted`] does.
/// Never fails; with nothing to drop the history is returned with `system` in front.
pub fn drop_oldest(
    system: ChatMessage,
    messages: &[ChatMessage],
    origins: &[Origin],
    keep: Keep,
) -> (Vec<ChatMessage>, Vec<Origin>) {
    match plan(messages, origins, keep) {
        Some(plan) => {
            let mut note = format!(
                "[Earlier conversation dropped: the summary failed. {} messages removed.]",
                plan.summarise.len()
            );
            append_person_words(&mut note, &plan.person_words);
            compacted(system, &plan, note, messages, origins)
        }
        None => {
            let start = usize::from(matches!(messages.first(), Some(ChatMessage::System { .. })));
            let mut history = vec![system];
            let mut history_origins = vec![Origin::Runtime];
            for (index, message) in messages.iter().enumerate().skip(start) {
                history.push(message.clone());
                history_origins.push(origin_at(origins, index));
            }
            (history, history_origins)
        }
    }
}

/// Appends the verbatim section of a summary message: the marker line, then each text framed by
/// its length (`[person message: N bytes]`, the N bytes, a line break), so any text — even one
/// quoting the marker — is read back exactly.
pub(crate) fn append_person_words(text: &mut String, words: &[String]) {
    if words.is_empty() {
        return;
    }
    text.push('\n');
    text.push_str(PERSON_WORDS_MARKER);
    text.push('\n');
    for word in words {
        text.push_str(&format!("[person message: {} bytes]\n", word.len()));
        text.push_str(word);
        text.push('\n');
    }
}

/// The earlier words of a person carried verbatim in a summary (or drop note) message, oldest
/// first. Everything before the section is written by troupe with model text on single `- `
/// lines, so the first marker line is the section's.
pub fn carried_person_words(summary_text: &str) -> Vec<String> {
    let needle = format!("\n{PERSON_WORDS_MARKER}\n");
    let Some(at) = summary_text.find(&needle) else {
        return Vec::new();
    };
    let mut rest = &summary_text[at + needle.len()..];
    let mut words = Vec::new();
    while let Some(framed) = rest.strip_prefix("[person message: ") {
        let Some((length, body)) = framed.split_once(" bytes]\n") else {
            break;
        };
        let Ok(length) = length.parse::<usize>() else {
            break;
        };
        let (Some(word), Some(after)) = (body.get(..length), body.get(length..)) else {
            break;
        };
        words.push(word.to_owned());
        let Some(after) = after.strip_prefix('\n') else {
            break;
        };
        rest = after;
    }
    words
}
