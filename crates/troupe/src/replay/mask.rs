//! A request as replay compares it: what changes from run to run without anyone changing
//! anything is masked, and the rest is compared exactly.
//!
//! Masked: ids (UUIDs: message and request ids, which every run makes anew), times (`Z` times
//! as troupe writes them), the workspace's path (replay runs in another folder), and the two
//! sections of a living system prompt that follow the team's timing rather than its
//! configuration — the team (who is spawned yet, and each one's status) and the pending
//! requests — and the notes that bring those sections up to date (`agent::prompt`). A changed
//! prompt, definition, tool description or tool result shows; a teammate that was `running` in
//! one run and `idle` in the other does not.

use sha2::{Digest, Sha256};

use crate::agent::prompt::is_note;
use crate::model::{ChatMessage, ModelRequest};
use crate::secrets::Redactor;

/// What masking needs to know: the workspace's path in this run.
#[derive(Debug, Clone)]
pub struct Masking {
    workspace: String,
}

impl Masking {
    pub fn new(workspace: &str) -> Self {
        Self {
            workspace: workspace.trim_end_matches('/').to_owned(),
        }
    }

    /// `text` with ids, times and the workspace's path masked.
    pub fn text(&self, text: &str) -> String {
        let text = if self.workspace.len() > 1 {
            text.replace(&self.workspace, "<workspace>")
        } else {
            text.to_owned()
        };
        mask_times(&mask_uuids(&text))
    }

    /// A system prompt: as [`Masking::text`], and the timing-dependent sections.
    fn system(&self, text: &str) -> String {
        let mut out = Vec::new();
        let mut section = "";
        for line in self.text(text).lines() {
            if let Some(title) = line.strip_prefix("## ") {
                section = if title.starts_with("Team") {
                    out.push(line.to_owned());
                    out.push("<team>".to_owned());
                    "team"
                } else if title == "Pending requests" {
                    // Left out whole: the section comes and goes with the team's timing.
                    "pending"
                } else {
                    ""
                };
                if section.is_empty() {
                    out.push(line.to_owned());
                }
                continue;
            }
            if section.is_empty() {
                out.push(line.to_owned());
            }
        }
        out.join("\n").trim_end().to_owned()
    }

    /// The request as text, one part per block, masked: what is digested and diffed.
    pub fn render(&self, request: &ModelRequest) -> String {
        let mut out = format!("purpose: {}\n", request.purpose.as_str());
        // The living prompt's notes follow the team's timing like the sections masked in the
        // system prompt: left out whole (and not counted, so the messages after them line up).
        let messages = request.messages.iter().filter(|m| !is_note(m));
        for (i, message) in messages.enumerate() {
            let (role, body) = match message {
                ChatMessage::System { content } => ("system", self.system(content)),
                ChatMessage::User { content } => ("user", self.text(content)),
                ChatMessage::Assistant(a) => {
                    let mut body = a
                        .content
                        .as_deref()
                        .map(|t| self.text(t))
                        .unwrap_or_default();
                    for call in &a.tool_calls {
                        body.push_str(&format!(
                            "\n[tool call {} {}] {}",
                            call.id,
                            call.name,
                            self.text(&call.arguments)
                        ));
                    }
                    ("assistant", body)
                }
                ChatMessage::Tool {
                    tool_call_id,
                    content,
                } => ("tool", format!("[{tool_call_id}] {}", self.text(content))),
            };
            out.push_str(&format!("== message {} ({role})\n{body}\n", i + 1));
        }
        for tool in &request.tools {
            out.push_str(&format!(
                "== tool {}\n{}\nparameters: {}\n",
                tool.name,
                self.text(&tool.description),
                tool.parameters
            ));
        }
        out
    }

    /// The request as compared: [`Masking::render`], with the run's secrets cleared (as the
    /// recording holds them).
    pub fn compared(&self, request: &ModelRequest, redactor: &Redactor) -> String {
        redactor.redact(&self.render(request)).into_owned()
    }

    /// The digest of the request as compared.
    pub fn digest(&self, request: &ModelRequest, redactor: &Redactor) -> String {
        hex(&Sha256::digest(self.compared(request, redactor).as_bytes()))
    }
}

/// The lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every UUID in `text`, in order (lowercased).
pub fn uuids(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i + 36 <= bytes.len() {
        if is_uuid(&bytes[i..i + 36]) && boundary(bytes, i, 36) {
            found.push(text[i..i + 36].to_ascii_lowercase());
            i += 36;
        } else {
            i += 1;
        }
    }
    found
}

/// `text` with each UUID replaced by what `with` gives for it.
pub fn replace_uuids(text: &str, mut with: impl FnMut(&str) -> String) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut i = 0;
    while i + 36 <= bytes.len() {
        if is_uuid(&bytes[i..i + 36]) && boundary(bytes, i, 36) {
            out.push_str(&text[last..i]);
            out.push_str(&with(&text[i..i + 36].to_ascii_lowercase()));
            i += 36;
            last = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[last..]);
    out
}

fn mask_uuids(text: &str) -> String {
    replace_uuids(text, |_| "<id>".to_owned())
}

fn is_uuid(b: &[u8]) -> bool {
    b.iter().enumerate().all(|(i, c)| match i {
        8 | 13 | 18 | 23 => *c == b'-',
        _ => c.is_ascii_hexdigit(),
    })
}

/// Whether `len` bytes at `at` stand alone (not part of a longer run of hex digits).
fn boundary(bytes: &[u8], at: usize, len: usize) -> bool {
    let before = at.checked_sub(1).map(|i| bytes[i]);
    let after = bytes.get(at + len).copied();
    !before.is_some_and(|c| c.is_ascii_alphanumeric())
        && !after.is_some_and(|c| c.is_ascii_alphanumeric())
}

/// `2026-12-06T14:37:00Z` and `…:00.123Z` (and `+00:00`) as `<time>`.
fn mask_times(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut i = 0;
    while i + 19 <= bytes.len() {
        if let Some(len) = time_at(&bytes[i..]) {
            out.push_str(&text[last..i]);
            out.push_str("<time>");
            i += len;
            last = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[last..]);
    out
}

/// The length of an RFC 3339 time at the start of `b`, if one is there.
fn time_at(b: &[u8]) -> Option<usize> {
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    let shape = digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && (b[10] == b'T' || b[10] == b' ')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !shape {
        return None;
    }
    let mut len = 19;
    if b.get(len) == Some(&b'.') {
        len += 1;
        while b.get(len).is_some_and(u8::is_ascii_digit) {
            len += 1;
        }
    }
    match b.get(len) {
        Some(b'Z') => Some(len + 1),
        Some(b'+') | Some(b'-') if b.len() >= len + 6 => Some(len + 6),
        _ => Some(len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_times_and_the_workspace_are_masked() {
        let m = Masking::new("/tmp/ws-1/");
        let text = "request 0b5c3e1a-9f3e-4c1e-8a47-1d2e3f4a5b6c at 2026-12-06T14:37:00.123Z in \
                    /tmp/ws-1/src/a.rs";
        assert_eq!(
            m.text(text),
            "request <id> at <time> in <workspace>/src/a.rs"
        );
        // A longer run of hex digits is not an id.
        assert_eq!(
            uuids("x0b5c3e1a-9f3e-4c1e-8a47-1d2e3f4a5b6c"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_system_prompt_masks_the_team_and_the_pending_requests_only() {
        let m = Masking::new("/w");
        let a = "You are alice.\n\n## Team (led by lead)\n- bob (running): tester\n\n## Pending \
                 requests\n- plan_approval x from a to b: pending";
        let b = "You are alice.\n\n## Team (led by lead)\n(no teammates)";
        assert_eq!(m.system(a), m.system(b));
        let c = "You are alice!\n\n## Team (led by lead)\n- bob (idle): tester";
        assert_ne!(m.system(b), m.system(c));
    }

    #[test]
    fn uuids_are_found_and_replaced_in_order() {
        let a = "0b5c3e1a-9f3e-4c1e-8a47-1d2e3f4a5b6c";
        let b = "1b5c3e1a-9f3e-4c1e-8a47-1d2e3f4a5b6c";
        let text = format!("{{\"request_id\":\"{a}\"}} and {b}");
        assert_eq!(uuids(&text), vec![a.to_owned(), b.to_owned()]);
        assert_eq!(
            replace_uuids(&text, |u| if u == a { b.to_owned() } else { u.to_owned() }),
            format!("{{\"request_id\":\"{b}\"}} and {b}")
        );
    }
}
