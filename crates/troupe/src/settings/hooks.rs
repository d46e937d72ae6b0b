//! `[[hooks]]`: commands run around tool calls and prompts. The entries as written, their
//! checks, the merge (project entries, then the user's), and what needs trust (every project
//! hook: it runs a program).
//!
//! `event` one of `PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `Stop`; a non-blank
//! `command`; `matcher` a tool name or a rule-style pattern ([`check_rule`]); `timeout` 1 to
//! 3600 seconds, an integer (`30`) or a string with units (`"30s"`, `"2m"`, `"1h"`, `"1m30s"`:
//! [`super::parse_duration`], no parts of a second), default [`DEFAULT_HOOK_TIMEOUT`].

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::duration::{duration_of, RawTimeout};
use super::error::SettingsError;
use super::rules::check_rule;
use super::section::{needs_trust, Layers, Spans};
use super::trust::{TrustItem, TrustKind};
use super::{HookEvent, HookSpec, DEFAULT_HOOK_TIMEOUT};

/// The longest a hook may be given (an MCP server's timeouts are bounded the same).
pub const MAX_HOOK_TIMEOUT: Duration = Duration::from_secs(3600);

/// One `[[hooks]]` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHook {
    event: Spanned<String>,
    matcher: Option<Spanned<String>>,
    command: Spanned<String>,
    timeout: Option<Spanned<RawTimeout>>,
}

/// One entry, checked (its file and index are set by the merge).
#[derive(Debug, Clone)]
pub(super) struct ParsedHook {
    event: HookEvent,
    matcher: Option<String>,
    command: String,
    timeout: Duration,
}

pub(super) fn parse(
    raw: Vec<Spanned<RawHook>>,
    spans: &Spans<'_>,
) -> Result<Vec<ParsedHook>, SettingsError> {
    let mut hooks = Vec::new();
    for (index, hook) in raw.into_iter().enumerate() {
        let hook = hook.into_inner();
        let event = match hook.event.get_ref().as_str() {
            "PreToolUse" => HookEvent::PreToolUse,
            "PostToolUse" => HookEvent::PostToolUse,
            "UserPromptSubmit" => HookEvent::UserPromptSubmit,
            "Stop" => HookEvent::Stop,
            "PermissionRequest" => HookEvent::PermissionRequest,
            other => {
                return Err(spans.invalid(
                    hook.event.span().start,
                    format!(
                        "hooks[{index}].event {other:?} is not one of PreToolUse, PostToolUse, \
                         UserPromptSubmit, Stop, PermissionRequest"
                    ),
                ))
            }
        };
        if hook.command.get_ref().trim().is_empty() {
            return Err(spans.invalid(
                hook.command.span().start,
                format!("hooks[{index}].command must not be blank"),
            ));
        }
        let matcher = match hook.matcher {
            Some(m) if m.get_ref().trim().is_empty() => {
                return Err(spans.invalid(
                    m.span().start,
                    format!(
                    "hooks[{index}].matcher must not be blank (leave it out to match every call)"
                ),
                ))
            }
            Some(m) => {
                check_rule(m.get_ref()).map_err(|why| {
                    spans.invalid(
                        m.span().start,
                        format!("hooks[{index}].matcher {:?}: {why}", m.get_ref()),
                    )
                })?;
                Some(m.into_inner())
            }
            None => None,
        };
        let timeout = match hook.timeout {
            None => DEFAULT_HOOK_TIMEOUT,
            Some(t) => hook_timeout(t.get_ref()).ok_or_else(|| {
                spans.invalid(
                    t.span().start,
                    format!(
                        "hooks[{index}].timeout must be 1 to 3600 seconds: an integer (30) or \
                         a string with a unit (\"30s\", \"2m\")"
                    ),
                )
            })?,
        };
        hooks.push(ParsedHook {
            event,
            matcher,
            command: hook.command.into_inner(),
            timeout,
        });
    }
    Ok(hooks)
}

/// `30` or `"30s"` / `"2m"` / `"1h"`, 1 to 3600 seconds.
pub(super) fn hook_timeout(raw: &RawTimeout) -> Option<Duration> {
    duration_of(raw, false)
        .filter(|timeout| (Duration::from_secs(1)..=MAX_HOOK_TIMEOUT).contains(timeout))
}

/// Project hooks, then the user's, each with its file and its index there.
pub(super) fn merge(layers: &Layers<'_, Vec<ParsedHook>>) -> Vec<HookSpec> {
    let mut hooks = Vec::new();
    for (source, parsed) in layers {
        hooks.extend(parsed.iter().enumerate().map(|(index, hook)| HookSpec {
            event: hook.event,
            matcher: hook.matcher.clone(),
            command: hook.command.clone(),
            timeout: hook.timeout,
            source: (*source).clone(),
            index,
        }));
    }
    hooks
}

/// Takes a project's hooks out: each one runs a program, so each waits for trust.
pub(super) fn split_trust(hooks: &mut Vec<ParsedHook>, items: &mut Vec<TrustItem>) {
    for hook in std::mem::take(hooks) {
        let matcher = hook.matcher.as_deref().unwrap_or("*");
        items.push(needs_trust(
            TrustKind::Hook,
            format!(
                "runs hook {} ({matcher}): {}",
                hook.event.as_str(),
                hook.command
            ),
            format!(
                "{}\n{matcher}\n{}\n{}",
                hook.event.as_str(),
                hook.command,
                hook.timeout.as_millis()
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::section::testing::{load_err, workspace};
    use super::super::{Settings, SettingsErrorKind as Kind};

    #[test]
    fn bad_hooks_are_refused() {
        let err = load_err("[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\n[[hooks]]\nevent = \"PreTool\"\ncommand = \"x\"\n");
        assert_eq!((err.kind, err.line), (Kind::Invalid, Some(5)));
        assert!(err.message.contains("hooks[1].event \"PreTool\""), "{err}");
        let err = load_err("[[hooks]]\nevent = \"Stop\"\ncommand = \"  \"\n");
        assert_eq!((err.kind, err.line), (Kind::Invalid, Some(3)));
        let err = load_err("[[hooks]]\nevent = \"Stop\"\n");
        assert_eq!(err.kind, Kind::Invalid, "{err}");
        for bad in [
            "0",
            "3601",
            "-1",
            "\"0s\"",
            "\"61m\"",
            "\"soon\"",
            "\"500ms\"",
            "1.5",
        ] {
            let err = load_err(&format!(
                "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = {bad}\n"
            ));
            assert_eq!(
                (err.kind, err.line),
                (Kind::Invalid, Some(4)),
                "{bad}: {err}"
            );
        }
        for (good, secs) in [
            ("1", 1),
            ("3600", 3600),
            ("\"30s\"", 30),
            // One reading of durations everywhere: plain seconds and compound forms too.
            ("\"30\"", 30),
            ("\"30 sec\"", 30),
            ("\"1m30s\"", 90),
            ("\"2m\"", 120),
            ("\"1h\"", 3600),
        ] {
            let dir = workspace(Some(&format!(
                "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = {good}\n"
            )));
            let s = Settings::load(dir.path(), None).unwrap();
            assert_eq!(s.hooks[0].timeout, Duration::from_secs(secs), "{good}");
        }
    }
}
