//! What a permission request and its answer carry (SPEC §13), as the JSON text of their
//! `content`: the protocol store keeps content as text, so a permission request is an ordinary
//! request whose content is this object, read back strictly (unknown or duplicate keys refused).
//!
//! The request: `{"tool","effect","arguments","sandbox","reason","suggestion","preview"}` —
//! the exact validated arguments, unless they are larger than [`MAX_ARGUMENTS_BYTES`] (then
//! `arguments` is `{"truncated": <first bytes>, "bytes": N, "digest": <audit digest>}` and the
//! person sees that the call is bigger than what is shown); `preview` is the diff a write or an
//! edit would make, cut at [`MAX_PREVIEW_BYTES`].
//!
//! The answer: `{"choice","reason","by"}` — `choice` is `once`, `always` (the suggested entry
//! allowed for the rest of the run) or `save` (and saved to the answerer's `troupe.toml`) for
//! an approval, `no` for a denial; `by` says who answered (`terminal`, `troupe approve (pid …)`,
//! `page`, `lead`, `interrupt`, `no terminal`).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::permissions::audit::input_digest;
use crate::permissions::Effect;

/// Arguments larger than this (as JSON) are kept as a preview and a digest.
pub const MAX_ARGUMENTS_BYTES: usize = 32 * 1024;
/// A diff longer than this is cut, saying how long it was.
pub const MAX_PREVIEW_BYTES: usize = 16 * 1024;

/// A permission request's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionAsk {
    pub tool: String,
    pub effect: String,
    pub arguments: Value,
    /// The sandbox mode the command would run in, for tools that run commands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// Why the rules asked.
    pub reason: String,
    /// The rule entry "always" and "save" allow (`shell(cargo test:*)`), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
    /// The diff a write or an edit would make.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
}

impl PermissionAsk {
    pub fn new(
        tool: &str,
        effect: Effect,
        arguments: &Value,
        sandbox: Option<crate::sandbox::Mode>,
        reason: &str,
        suggestion: Option<&str>,
        preview: Option<String>,
    ) -> Self {
        Self {
            tool: tool.to_owned(),
            effect: effect.as_str().to_owned(),
            arguments: bounded_arguments(arguments),
            sandbox: sandbox.map(|m| m.as_str().to_owned()),
            reason: reason.to_owned(),
            suggestion: suggestion.map(str::to_owned),
            preview: preview.map(|p| cut(p, MAX_PREVIEW_BYTES)),
        }
    }

    /// The same ask with every secret `redactor` knows taken out of its arguments, reason and
    /// preview: the request is kept in the protocol store, shown on the page and, routed to the
    /// lead, read by a model — and a preview holds lines of a file the agent never read.
    pub fn redacted(mut self, redactor: &crate::secrets::Redactor) -> Self {
        fn strings(value: &mut Value, redactor: &crate::secrets::Redactor) {
            match value {
                Value::String(text) => redactor.redact_in_place(text),
                Value::Array(items) => items.iter_mut().for_each(|v| strings(v, redactor)),
                Value::Object(map) => map.values_mut().for_each(|v| strings(v, redactor)),
                _ => {}
            }
        }
        strings(&mut self.arguments, redactor);
        redactor.redact_in_place(&mut self.reason);
        if let Some(preview) = self.preview.as_mut() {
            redactor.redact_in_place(preview);
        }
        self
    }

    pub fn to_content(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| format!("{{\"tool\":{:?}}}", self.tool))
    }

    /// Reads a request's content back; duplicate or unknown keys are refused.
    pub fn from_content(text: &str) -> Result<Self, String> {
        let value = troupe_wire::strict::parse_json_str(text, "")
            .map_err(|e| format!("not a permission request: {e}"))?;
        serde_json::from_value(value).map_err(|e| format!("not a permission request: {e}"))
    }

    /// The command or the call in one line, for prompts and lists.
    pub fn summary(&self) -> String {
        match (self.tool.as_str(), self.arguments.get("command")) {
            ("shell", Some(Value::String(command))) => format!("shell: {command}"),
            _ => match self.arguments.get("path") {
                Some(Value::String(path)) => format!("{}: {path}", self.tool),
                _ => format!("{} {}", self.tool, cut(self.arguments.to_string(), 200)),
            },
        }
    }
}

/// How an approval applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Choice {
    /// This call only.
    Once,
    /// This call, and the suggested entry for the rest of the run.
    Always,
    /// As `Always`, and the entry saved to the answerer's `troupe.toml`.
    Save,
    /// Denied.
    No,
}

impl Choice {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Always => "always",
            Self::Save => "save",
            Self::No => "no",
        }
    }

    pub fn approves(self) -> bool {
        !matches!(self, Self::No)
    }
}

/// A permission answer's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionReply {
    pub choice: Choice,
    /// For a denial, what the model is told; for an approval, a note (may be empty).
    pub reason: String,
    /// Who answered.
    pub by: String,
}

impl PermissionReply {
    pub fn new(choice: Choice, reason: impl Into<String>, by: impl Into<String>) -> Self {
        Self {
            choice,
            reason: reason.into(),
            by: by.into(),
        }
    }

    pub fn to_content(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| self.choice.as_str().to_owned())
    }

    pub fn from_content(text: &str) -> Result<Self, String> {
        let value = troupe_wire::strict::parse_json_str(text, "")
            .map_err(|e| format!("not a permission answer: {e}"))?;
        serde_json::from_value(value).map_err(|e| format!("not a permission answer: {e}"))
    }
}

/// `arguments` as given, or — past [`MAX_ARGUMENTS_BYTES`] — a preview with its size and digest.
fn bounded_arguments(arguments: &Value) -> Value {
    let text = arguments.to_string();
    if text.len() <= MAX_ARGUMENTS_BYTES {
        return arguments.clone();
    }
    json!({
        "truncated": cut(text.clone(), MAX_ARGUMENTS_BYTES / 4),
        "bytes": text.len(),
        "digest": input_digest(arguments),
    })
}

/// `text` cut to at most `max` bytes on a character boundary, saying how long it was.
pub(crate) fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let total = text.len();
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!("\n… ({total} bytes in all)"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ask_and_a_reply_travel_as_strict_json() {
        let ask = PermissionAsk::new(
            "shell",
            Effect::Execute,
            &json!({"command": "cargo test"}),
            Some(crate::sandbox::Mode::WorkspaceWrite),
            "execute tools ask",
            Some("shell(cargo test:*)"),
            None,
        );
        let back = PermissionAsk::from_content(&ask.to_content()).unwrap();
        assert_eq!(back, ask);
        assert_eq!(back.summary(), "shell: cargo test");
        let reply = PermissionReply::new(Choice::Always, "", "terminal");
        assert_eq!(
            PermissionReply::from_content(&reply.to_content()).unwrap(),
            reply
        );
        // Duplicate and unknown keys are refused: an approver must see what runs.
        let dup = r#"{"tool":"shell","tool":"write_file","effect":"execute","arguments":{},"reason":"r"}"#;
        assert!(PermissionAsk::from_content(dup).is_err());
        let extra = r#"{"choice":"once","reason":"","by":"x","also":1}"#;
        assert!(PermissionReply::from_content(extra).is_err());
        assert!(
            PermissionReply::from_content(r#"{"choice":"maybe","reason":"","by":"x"}"#).is_err()
        );
    }

    #[test]
    fn a_known_secret_never_reaches_the_request() {
        let redactor = crate::secrets::Redactor::new(["sk-live-0123456789abcdef"]);
        let ask = PermissionAsk::new(
            "write_file",
            Effect::Write,
            &json!({"path": ".env", "content": "KEY=sk-live-0123456789abcdef\n", "n": [1, {"k": "sk-live-0123456789abcdef"}]}),
            None,
            "write tools ask",
            None,
            Some("--- .env\n+++ .env\n-OLD=sk-live-0123456789abcdef\n".to_owned()),
        )
        .redacted(&redactor);
        let content = ask.to_content();
        assert!(!content.contains("sk-live-0123456789abcdef"), "{content}");
        assert_eq!(ask.arguments["content"], "KEY=[redacted]\n");
        assert_eq!(ask.arguments["n"][1]["k"], "[redacted]");
        assert!(ask.preview.unwrap().contains("-OLD=[redacted]"));
    }

    #[test]
    fn huge_arguments_are_kept_as_a_preview_with_their_size_and_digest() {
        let content = "x".repeat(200_000);
        let arguments = json!({"path": "a.txt", "content": content});
        let ask = PermissionAsk::new(
            "write_file",
            Effect::Write,
            &arguments,
            None,
            "write tools ask",
            None,
            Some("y".repeat(100_000)),
        );
        assert!(ask.to_content().len() < 64 * 1024);
        assert_eq!(ask.arguments["digest"], input_digest(&arguments));
        assert!(ask.arguments["bytes"].as_u64().unwrap() > 200_000);
        assert!(ask.preview.unwrap().ends_with("(100000 bytes in all)"));
    }
}
