//! `[retention]` (issue 45): how long and how much of each kind of state `troupe gc` keeps,
//! and whether it runs at each run's close. Each kind is an age (`messages = "30d"`), `"never"`
//! (nothing of it is removed), or a table of an age and/or a size (`events = { age = "7d",
//! size = "500MB" }`). Kinds not written keep their defaults ([`Kind::default_rule`]).
//! Project over user, per key.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::duration::{duration_of, RawTimeout};
use super::error::SettingsError;
use super::section::{first, needs_trust, Layers, Spans};
use super::trust::{TrustItem, TrustKind};
use crate::store::retention::{Kind, Policy, Rule};

/// One kind as written: a number of seconds, an age or `"never"`, or a table of `age` and
/// `size` (read by hand, so a wrong key is named in the error).
type RawRule = toml::Value;

/// `[retention]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetention {
    auto: Option<bool>,
    messages: Option<Spanned<RawRule>>,
    quarantine: Option<Spanned<RawRule>>,
    requests: Option<Spanned<RawRule>>,
    transcripts: Option<Spanned<RawRule>>,
    artifacts: Option<Spanned<RawRule>>,
    events: Option<Spanned<RawRule>>,
    worktrees: Option<Spanned<RawRule>>,
    jobs: Option<Spanned<RawRule>>,
    recordings: Option<Spanned<RawRule>>,
    tasks: Option<Spanned<RawRule>>,
    audit: Option<Spanned<RawRule>>,
    usage: Option<Spanned<RawRule>>,
}

/// One file's `[retention]`, checked.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedRetention {
    auto: Option<bool>,
    rules: Vec<(Kind, Rule)>,
}

pub(super) fn parse(
    raw: RawRetention,
    spans: &Spans<'_>,
) -> Result<ParsedRetention, SettingsError> {
    let mut parsed = ParsedRetention {
        auto: raw.auto,
        rules: Vec::new(),
    };
    let written = [
        (Kind::Messages, raw.messages),
        (Kind::Quarantine, raw.quarantine),
        (Kind::Requests, raw.requests),
        (Kind::Transcripts, raw.transcripts),
        (Kind::Artifacts, raw.artifacts),
        (Kind::Events, raw.events),
        (Kind::Worktrees, raw.worktrees),
        (Kind::Jobs, raw.jobs),
        (Kind::Recordings, raw.recordings),
        (Kind::Tasks, raw.tasks),
        (Kind::Audit, raw.audit),
        (Kind::Usage, raw.usage),
    ];
    for (kind, value) in written {
        let Some(value) = value else { continue };
        let offset = value.span().start;
        let rule = rule_of(kind, value.get_ref())
            .map_err(|why| spans.invalid(offset, format!("`retention.{kind}` {why}")))?;
        parsed.rules.push((kind, rule));
    }
    Ok(parsed)
}

const FORM: &str = "must be an age (\"30d\", \"12h\", seconds), \"never\", or { age = …, size = … } (\"500MB\", bytes)";

fn rule_of(kind: Kind, raw: &RawRule) -> Result<Rule, String> {
    match raw {
        toml::Value::Table(table) => {
            if let Some(key) = table.keys().find(|k| *k != "age" && *k != "size") {
                return Err(format!("has an unknown key `{key}` (age, size)"));
            }
            let age = table.get("age").map(age_of).transpose()?.flatten();
            let size = table.get("size").map(size_of).transpose()?;
            if kind == Kind::Usage && size.is_some() {
                return Err("takes an age only: usage is compacted, never removed".into());
            }
            Ok(Rule { age, size })
        }
        other => Ok(Rule {
            age: age_of(other)?,
            size: None,
        }),
    }
}

/// An age: seconds, a duration of at least a second, or `"never"` (`None`).
fn age_of(raw: &toml::Value) -> Result<Option<Duration>, String> {
    let parsed = match raw {
        toml::Value::String(s) if s.trim() == "never" => return Ok(None),
        toml::Value::String(s) => duration_of(&RawTimeout::Text(s.clone()), false),
        toml::Value::Integer(n) => duration_of(&RawTimeout::Seconds(*n), false),
        _ => None,
    };
    parsed
        .filter(|d| *d >= Duration::from_secs(1))
        .map(Some)
        .ok_or_else(|| FORM.to_owned())
}

fn size_of(raw: &toml::Value) -> Result<u64, String> {
    match raw {
        toml::Value::Integer(n) => u64::try_from(*n).ok(),
        toml::Value::String(s) => parse_size(s),
        _ => None,
    }
    .ok_or_else(|| FORM.to_owned())
}

/// Reads a size: bytes, or a number with `B`, `KB`, `MB`, `GB`, `KiB`, `MiB`, `GiB`.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let bytes = number * scale;
    (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

/// What of a workspace's own `[retention]` deletes more than the person asked for needs their
/// trust (a cloned repository must not make troupe delete its history): `auto = true` (gc
/// at each run's close, unasked), and a rule that keeps less than the default (a shorter age,
/// or a size). Such values are taken out until trusted; a longer one applies at once.
pub(super) fn split_trust(project: &mut ParsedRetention, items: &mut Vec<TrustItem>) {
    if project.auto == Some(true) {
        project.auto = None;
        items.push(needs_trust(
            TrustKind::Retention,
            "deletes state at each run's close ([retention] auto)".to_owned(),
            "auto=true".to_owned(),
        ));
    }
    project.rules.retain(|(kind, rule)| {
        let default = kind.default_rule();
        let shorter = match (rule.age, default.age) {
            (Some(mine), Some(theirs)) => mine < theirs,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if !shorter && rule.size.is_none() {
            return true;
        }
        items.push(needs_trust(
            TrustKind::Retention,
            format!("keeps {kind} for less than the default ([retention] {kind})"),
            format!("{kind}={}", describe(rule)),
        ));
        false
    });
}

/// `age=30d size=500000000`, `age=never`: a rule as the trust record has it.
fn describe(rule: &Rule) -> String {
    let age = rule.age.map_or_else(
        || "never".to_owned(),
        |d| humantime::format_duration(d).to_string(),
    );
    match rule.size {
        Some(size) => format!("age={age} size={size}"),
        None => format!("age={age}"),
    }
}

/// Project over user, per key.
pub(super) fn merge(layers: &Layers<'_, ParsedRetention>) -> Policy {
    let mut policy = Policy::default();
    if let Some(auto) = first(layers, |r| r.auto) {
        policy.auto = auto.value;
    }
    for kind in Kind::ALL {
        let rule = first(layers, |r| {
            r.rules
                .iter()
                .find(|(k, _)| *k == kind)
                .map(|(_, rule)| *rule)
        });
        if let Some(rule) = rule {
            policy.set(kind, rule.value);
        }
    }
    policy
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::{load_err, workspace};
    use super::*;
    use crate::settings::Settings;

    fn policy_of(project: &str) -> Policy {
        let dir = workspace(Some(project));
        Settings::load(dir.path(), None).unwrap().retention
    }

    #[test]
    fn kinds_read_as_ages_tables_or_never() {
        let p = policy_of(
            "[retention]\nauto = true\nmessages = \"2d\"\nquarantine = \"never\"\nevents = { age = \"1h\", size = \"5MB\" }\nartifacts = { size = 1024 }\njobs = 60\n",
        );
        assert!(p.auto);
        let day = Duration::from_secs(86_400);
        assert_eq!(p.rule(Kind::Messages).age, Some(2 * day));
        assert_eq!(p.rule(Kind::Quarantine), Rule::default());
        assert_eq!(
            p.rule(Kind::Events),
            Rule {
                age: Some(Duration::from_secs(3600)),
                size: Some(5_000_000)
            }
        );
        assert_eq!(
            p.rule(Kind::Artifacts),
            Rule {
                age: None,
                size: Some(1024)
            }
        );
        assert_eq!(p.rule(Kind::Jobs).age, Some(Duration::from_secs(60)));
        assert_eq!(p.rule(Kind::Recordings), Kind::Recordings.default_rule());
    }

    #[test]
    fn every_kind_is_a_key() {
        for kind in Kind::ALL {
            let p = policy_of(&format!("[retention]\n{kind} = \"3d\"\n"));
            assert_eq!(
                p.rule(kind).age,
                Some(Duration::from_secs(3 * 86_400)),
                "{kind}"
            );
        }
    }

    #[test]
    fn nothing_written_deletes_nothing_unasked() {
        let p = policy_of("");
        assert!(!p.auto);
        assert_eq!(p, Policy::default());
    }

    #[test]
    fn bad_values_are_refused_with_their_key() {
        for bad in [
            "messages = \"soon\"",
            "messages = 0",
            "messages = -3",
            "events = { age = \"1h\", sise = 3 }",
            "events = { size = \"lots\" }",
            "usage = { size = \"1MB\" }",
            "mesages = \"1d\"",
        ] {
            let err = load_err(&format!("[retention]\n{bad}\n")).to_string();
            assert!(
                err.contains("retention") || err.contains("unknown key"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn sizes_read_decimal_and_binary_units() {
        assert_eq!(parse_size("500MB"), Some(500_000_000));
        assert_eq!(parse_size("1GiB"), Some(1 << 30));
        assert_eq!(parse_size("64 KiB"), Some(65_536));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("1.5kb"), Some(1500));
        assert_eq!(parse_size("MB"), None);
        assert_eq!(parse_size("5 parsecs"), None);
    }

    #[test]
    fn a_workspace_that_would_delete_more_waits_for_trust() {
        use crate::settings::trust::TrustKind;
        let dir = workspace(Some(
            "[retention]\nauto = true\nmessages = \"1s\"\nevents = { size = \"1MB\" }\nquarantine = \"365d\"\n",
        ));
        let reviewed = Settings::load_reviewed(dir.path(), None).unwrap();
        let waiting: Vec<_> = reviewed
            .items
            .iter()
            .filter(|i| i.kind == TrustKind::Retention)
            .map(|i| i.content.as_str())
            .collect();
        assert_eq!(
            waiting,
            [
                "auto=true",
                "messages=age=1s",
                "events=age=never size=1000000"
            ]
        );
        let untrusted = &reviewed.untrusted.retention;
        assert!(!untrusted.auto);
        assert_eq!(
            untrusted.rule(Kind::Messages),
            Kind::Messages.default_rule()
        );
        assert_eq!(untrusted.rule(Kind::Events), Kind::Events.default_rule());
        // Keeping longer only keeps more: at once.
        assert_eq!(
            untrusted.rule(Kind::Quarantine).age,
            Some(Duration::from_secs(365 * 86_400))
        );
        let trusted = &reviewed.trusted.retention;
        assert!(trusted.auto);
        assert_eq!(
            trusted.rule(Kind::Messages).age,
            Some(Duration::from_secs(1))
        );
    }
}
