//! A permission rule must name a tool some agent can call (SPEC §7: "a rule naming no known tool
//! is a settings error"): `deny = ["wirte_file"]` would protect nothing. The grammar of an entry
//! is checked where the file loads (`settings::rules::check_rule`); the tool names are known only
//! here, a layer above the settings — the lead's and the teammates' lists ([`LEAD_TOOLS`],
//! [`TEAMMATE_TOOLS`]) and the `mcp__<server>__<tool>` names of the configured MCP servers, whose
//! tools are known only once they start, so any tool of a configured server is accepted.
//!
//! Callers check the settings as read from every file, before trust leaves anything out: a rule
//! naming a server of the workspace's own `[[mcp_servers]]` is not wrong because the server waits
//! for trust.

use crate::permissions::rules::MCP_TOOL_PREFIX;
use crate::settings::{RuleEntry, Settings, SettingsError, SettingsErrorKind};
use crate::tools::mcp::sanitise;

use super::prompts::{LEAD_TOOLS, TEAMMATE_TOOLS};

/// Every rule of `settings` names a built-in tool or a tool of a configured MCP server; else the
/// first that does not, as an error naming its file, line and the nearest known name.
pub fn check_rule_tools(settings: &Settings) -> Result<(), SettingsError> {
    let servers: Vec<String> = settings
        .mcp_servers
        .iter()
        .map(|s| format!("{MCP_TOOL_PREFIX}{}__", sanitise(&s.name)))
        .collect();
    for rule in &settings.rules {
        let name = rule.text.split('(').next().unwrap_or_default();
        let known = LEAD_TOOLS.contains(&name)
            || TEAMMATE_TOOLS.contains(&name)
            || servers
                .iter()
                .any(|prefix| name.len() > prefix.len() && name.starts_with(prefix.as_str()));
        if !known {
            return Err(unknown(rule, name, &servers));
        }
    }
    Ok(())
}

fn unknown(rule: &RuleEntry, name: &str, servers: &[String]) -> SettingsError {
    let what = match name.strip_prefix(MCP_TOOL_PREFIX) {
        Some(_) if servers.is_empty() => {
            "names the tool of an MCP server, and no [[mcp_servers]] entry is configured".to_owned()
        }
        Some(_) => format!(
            "names no tool of a configured MCP server ({})",
            servers
                .iter()
                .map(|s| format!("{s}<tool>"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => "names no known tool".to_owned(),
    };
    let candidates = LEAD_TOOLS
        .iter()
        .chain(TEAMMATE_TOOLS.iter())
        .map(|s| (*s).to_owned())
        .chain(servers.iter().map(|s| format!("{s}<tool>")));
    let nearest = candidates.min_by_key(|c| edit_distance(name, c));
    let hint = nearest.map_or_else(String::new, |n| format!("; did you mean {n}?"));
    let file = match &rule.source {
        crate::settings::Source::User(p) | crate::settings::Source::Project(p) => p.clone(),
        other => other.describe().into(),
    };
    SettingsError {
        kind: SettingsErrorKind::Invalid,
        file,
        line: Some(rule.line),
        message: format!(
            "permissions.{}[{}] {:?} {what}{hint}",
            rule.list.as_str(),
            rule.index,
            rule.text
        ),
    }
}

/// The Levenshtein distance of `a` and `b`, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = Vec::with_capacity(b.len() + 1);
        current.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distances() {
        for (a, b, d) in [
            ("", "", 0),
            ("wirte_file", "write_file", 2),
            ("shel", "shell", 1),
            ("grep", "glob", 3),
            ("abc", "", 3),
        ] {
            assert_eq!(edit_distance(a, b), d, "{a} {b}");
        }
    }

    #[test]
    fn the_nearest_name_is_suggested() {
        let rule = RuleEntry {
            list: crate::settings::RuleList::Deny,
            text: "wirte_file(x)".into(),
            source: crate::settings::Source::Project("troupe.toml".into()),
            index: 0,
            line: 3,
        };
        let err = unknown(&rule, "wirte_file", &[]);
        assert_eq!(
            err.to_string(),
            "troupe.toml:3: permissions.deny[0] \"wirte_file(x)\" names no known tool; did you \
             mean write_file?"
        );
    }
}
