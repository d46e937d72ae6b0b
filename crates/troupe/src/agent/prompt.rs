//! The living system prompt (SPEC §9): an agent's prompt is not a constant but a view of things
//! that change while it works — the roster, pending requests, selected memory.
//!
//! A provider's prompt cache reuses the longest unchanged prefix of a request, and the system
//! message comes first: rewriting it at every team change would bill the whole conversation
//! after it again. So a prompt has two parts:
//!
//! - the **stable** part ([`SystemPromptSource::render`]: identity, tools, workspace, project
//!   instructions, skills), which holds for the whole conversation;
//! - the **changing** sections ([`SystemPromptSource::changing`]: memory, team, pending
//!   requests), each a list of keyed entries.
//!
//! The system message is both ([`compose`]) when a conversation starts, when a runner starts
//! on a kept one, after every compaction, and whenever the stable part changed. Between those,
//! a change of the changing sections reaches the model as a short **note** ([`note`]): only the
//! entries that changed, appended to the conversation right before the newest inputs (never
//! between a tool call's result and the model's next answer), so each request is the previous
//! one plus appended messages. Notes live in memory only: the transcript does not record them,
//! and a run that continues the conversation starts from a system message rebuilt in full.

use crate::model::ChatMessage;

/// Renders an agent's current system prompt.
#[async_trait::async_trait]
pub trait SystemPromptSource: Send + Sync {
    /// The stable part of the prompt (the whole prompt, for a source without changing
    /// sections). The same inputs give the very same text.
    fn render(&self) -> String;

    /// The sections that change while the agent works, in the order they follow the stable
    /// part. The default: none.
    fn changing(&self) -> Vec<Section> {
        Vec::new()
    }

    /// Reads what the prompt shows from async ports (a team's roster, the pending requests) for
    /// the next [`Self::render`] and [`Self::changing`]; the runner awaits it before every model
    /// call. The default: nothing.
    async fn refresh(&self) {}

    /// The memory section selected for the coming turn (empty: none). Sources without a memory
    /// section ignore it.
    fn set_memory(&self, _section: String) {}
}

/// A prompt that never changes (subagents, tests).
pub struct FixedPrompt(pub String);

impl SystemPromptSource for FixedPrompt {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// A changing section of a prompt: a titled list of entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub title: String,
    pub entries: Vec<Entry>,
    /// What the section says when it has no entries; empty: the section is left out.
    pub empty: String,
}

/// One entry of a [`Section`], named across renders by its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// What names the entry from one render to the next (a teammate's name, a request's id).
    pub key: String,
    /// The entry as shown (one line, or a block).
    pub text: String,
    /// What a note says once the entry is gone.
    pub gone: String,
}

/// The first line of every note: how a note is told from a person's or an agent's message.
pub const NOTE_HEADER: &str = "<prompt-update>";
/// The last line of every note.
pub const NOTE_FOOTER: &str = "</prompt-update>";
/// What a note says before the changes.
const NOTE_INTRO: &str = "Changed since the system prompt and earlier updates (each line below \
     replaces what they said about the same teammate, request or memory):";

/// The system message: the stable part, then each changing section that has something to
/// say, as `## <title>` and its entries.
pub fn compose(stable: &str, changing: &[Section]) -> String {
    let mut out = stable.trim_end().to_owned();
    for section in changing {
        let body = if section.entries.is_empty() {
            section.empty.clone()
        } else {
            section
                .entries
                .iter()
                .map(|e| e.text.trim_end())
                .collect::<Vec<_>>()
                .join("\n")
        };
        push_section(&mut out, &section.title, &body);
    }
    out
}

/// The note that brings a model that saw `seen` up to `now`: per section, the entries that are
/// new or changed (as they are now) and then those that are gone. `None` when nothing changed.
pub fn note(seen: &[Section], now: &[Section]) -> Option<String> {
    let mut body = String::new();
    for section in now {
        let before = seen.iter().find(|s| s.title == section.title);
        let old = before.map_or(&[][..], |s| s.entries.as_slice());
        let mut lines: Vec<&str> = section
            .entries
            .iter()
            .filter(|e| !old.contains(e))
            .map(|e| e.text.trim_end())
            .collect();
        lines.extend(
            old.iter()
                .filter(|o| !section.entries.iter().any(|e| e.key == o.key))
                .map(|o| o.gone.as_str()),
        );
        if !lines.is_empty() {
            push_section(&mut body, &section.title, &lines.join("\n"));
        }
    }
    // A section that is no longer rendered at all (a source that stopped showing it).
    for section in seen {
        if !now.iter().any(|s| s.title == section.title) {
            let gone: Vec<&str> = section.entries.iter().map(|e| e.gone.as_str()).collect();
            push_section(&mut body, &section.title, &gone.join("\n"));
        }
    }
    if body.trim().is_empty() {
        return None;
    }
    Some(format!("{NOTE_HEADER}\n{NOTE_INTRO}{body}\n{NOTE_FOOTER}"))
}

/// Whether `message` is a note of the living prompt (see the module docs).
pub fn is_note(message: &ChatMessage) -> bool {
    matches!(message, ChatMessage::User { content } if is_note_text(content))
}

/// Whether `text` is a note's text.
pub fn is_note_text(text: &str) -> bool {
    text.starts_with(NOTE_HEADER) && text.trim_end().ends_with(NOTE_FOOTER)
}

/// Appends `## <title>` and `body` to `out`, a blank line before; nothing for an empty body.
pub fn push_section(out: &mut String, title: &str, body: &str) {
    let body = body.trim();
    if body.is_empty() {
        return;
    }
    out.push_str("\n\n## ");
    out.push_str(title);
    out.push('\n');
    out.push_str(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, text: &str) -> Entry {
        Entry {
            key: key.into(),
            text: text.into(),
            gone: format!("- {key}: gone"),
        }
    }

    fn team(entries: Vec<Entry>) -> Section {
        Section {
            title: "Team".into(),
            entries,
            empty: "(no teammates)".into(),
        }
    }

    #[test]
    fn the_system_message_is_the_stable_part_then_the_sections() {
        let sections = [
            Section {
                title: "Memory".into(),
                entries: vec![],
                empty: String::new(),
            },
            team(vec![]),
        ];
        assert_eq!(
            compose("You are lead.\n", &sections),
            "You are lead.\n\n## Team\n(no teammates)"
        );
        let sections = [team(vec![
            entry("a", "- a (idle): x"),
            entry("b", "- b (working): y"),
        ])];
        assert_eq!(
            compose("S", &sections),
            "S\n\n## Team\n- a (idle): x\n- b (working): y"
        );
    }

    #[test]
    fn a_note_holds_only_what_changed() {
        let seen = [team(vec![
            entry("a", "- a (idle): x"),
            entry("b", "- b (working): y"),
        ])];
        assert_eq!(note(&seen, &seen), None);
        let now = [team(vec![
            entry("a", "- a (working): x"),
            entry("c", "- c (working): z"),
        ])];
        let text = note(&seen, &now).unwrap();
        assert_eq!(
            text,
            format!(
                "{NOTE_HEADER}\n{NOTE_INTRO}\n\n## Team\n- a (working): x\n- c (working): z\n- b: gone\n{NOTE_FOOTER}"
            )
        );
        assert!(is_note(&ChatMessage::user(text)));
        assert!(!is_note(&ChatMessage::user(
            "<prompt-update> from a person"
        )));
    }

    #[test]
    fn a_new_section_and_a_vanished_one_are_both_noted() {
        let pending = Section {
            title: "Pending requests".into(),
            entries: vec![entry("r1", "- r1 pending")],
            empty: String::new(),
        };
        let text = note(&[], std::slice::from_ref(&pending)).unwrap();
        assert!(text.contains("## Pending requests\n- r1 pending"), "{text}");
        let text = note(&[pending], &[]).unwrap();
        assert!(text.contains("## Pending requests\n- r1: gone"), "{text}");
    }
}
