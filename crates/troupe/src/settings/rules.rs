//! `[permissions]`: the `allow`, `ask` and `deny` entries. The table as written, each entry's
//! syntax ([`check_rule`]), the merge (every file's entries: project before user within each
//! list, `index` the entry's position in its own file's list), and what needs trust (`allow`
//! entries: they widen what agents may do; `deny` and `ask` only tighten).
//!
//! **The rule grammar lives here, not in `crate::permissions`:** an entry is `name` or
//! `name(arg)` — name `[a-z0-9_]+`, a non-empty argument, the `)` last — and a file with a
//! malformed entry is refused when it loads, with its file and line. `settings` sits a layer
//! below `permissions` (`tests/all/architecture.rs`, LAYERS), so it may not call up into it; the
//! grammar sits at the lowest layer that checks it, and `permissions` (which matches entries,
//! `permissions::patterns`) takes it from here, re-exported as `permissions::check_rule`.

use serde::Deserialize;
use toml::Spanned;

use super::error::SettingsError;
use super::section::{line_of, needs_trust, Layers, Spans};
use super::trust::{TrustItem, TrustKind};
use super::{RuleEntry, RuleList};

/// `[permissions]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPermissions {
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    ask: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
}

/// One file's entries, checked, in file order within each list: each entry's text and its
/// 1-based line (for errors found once every file is read, such as a rule naming no tool).
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedRules {
    deny: Vec<(String, usize)>,
    ask: Vec<(String, usize)>,
    allow: Vec<(String, usize)>,
}

pub(super) fn parse(raw: RawPermissions, spans: &Spans<'_>) -> Result<ParsedRules, SettingsError> {
    let mut parsed = ParsedRules::default();
    for (list, entries, out) in [
        ("allow", raw.allow, &mut parsed.allow),
        ("ask", raw.ask, &mut parsed.ask),
        ("deny", raw.deny, &mut parsed.deny),
    ] {
        for (index, entry) in entries.into_iter().enumerate() {
            check_rule(entry.get_ref()).map_err(|why| {
                spans.invalid(
                    entry.span().start,
                    format!("permissions.{list}[{index}] {:?}: {why}", entry.get_ref()),
                )
            })?;
            let line = line_of(spans.text, entry.span().start);
            out.push((entry.into_inner(), line));
        }
    }
    Ok(parsed)
}

/// Every file's entries: deny, ask, allow; within each list project entries before user ones.
pub(super) fn merge(layers: &Layers<'_, ParsedRules>) -> Vec<RuleEntry> {
    let mut rules = Vec::new();
    for list in [RuleList::Deny, RuleList::Ask, RuleList::Allow] {
        for (source, parsed) in layers {
            let entries = match list {
                RuleList::Deny => &parsed.deny,
                RuleList::Ask => &parsed.ask,
                RuleList::Allow => &parsed.allow,
            };
            rules.extend(
                entries
                    .iter()
                    .enumerate()
                    .map(|(index, (text, line))| RuleEntry {
                        list,
                        text: text.clone(),
                        source: (*source).clone(),
                        index,
                        line: *line,
                    }),
            );
        }
    }
    rules
}

/// Takes a project's `allow` entries out: each one waits for trust.
pub(super) fn split_trust(rules: &mut ParsedRules, items: &mut Vec<TrustItem>) {
    for (rule, _line) in std::mem::take(&mut rules.allow) {
        items.push(needs_trust(
            TrustKind::Allow,
            format!("allows {rule} without asking ([permissions] allow)"),
            rule,
        ));
    }
}

/// A rule entry or matcher: `name` or `name(arg)`, name `[a-z0-9_]+`, arg non-empty, `)` last.
pub fn check_rule(text: &str) -> Result<(), String> {
    let (name, arg) = match text.find('(') {
        Some(open) => {
            let Some(arg) = text[open + 1..].strip_suffix(')') else {
                return Err("the argument must end with `)` at the end of the entry".into());
            };
            (&text[..open], Some(arg))
        }
        None => (text, None),
    };
    if name.is_empty() {
        return Err("the tool name is missing".into());
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(format!(
            "the tool name {name:?} must be lowercase letters, digits and `_`"
        ));
    }
    if let Some(arg) = arg {
        if arg.trim().is_empty() {
            return Err("the argument in `( )` must not be empty (leave out the parentheses to match every call)".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::load_err;
    use super::super::SettingsErrorKind as Kind;
    use super::*;

    #[test]
    fn bad_rules_are_refused() {
        for bad in [
            "",
            "Shell",
            "shell(",
            "shell()",
            "shell(x)y",
            "(x)",
            "shell (x)",
            "shell( )",
        ] {
            let err = load_err(&format!(
                "[permissions]\nask = [\n  \"read_file\",\n  {bad:?},\n]\n"
            ));
            assert_eq!(
                (err.kind, err.line),
                (Kind::Invalid, Some(4)),
                "{bad}: {err}"
            );
            assert!(err.message.contains("permissions.ask[1]"), "{err}");
        }
        for good in [
            "shell",
            "mcp__server__tool",
            "shell(cargo test:*)",
            "read_file(.env)",
            "x(a(b))",
        ] {
            assert_eq!(check_rule(good), Ok(()), "{good}");
        }
    }
}
