//! `[run]`: bounds of a `troupe run`. `max_cost` — USD, more than 0 — stops the run gracefully
//! once the estimated cost of its model calls reaches it (exit 3, `[cost_budget]`);
//! `--max-cost` decides over it. Project over user.
//!
//! **Trust.** A budget only tightens: a workspace's `max_cost` applies at once when the
//! person's own `config.toml` sets none, or a higher one. One *above* the person's own would
//! let a run spend more than they said, so it **needs trust**; untrusted, theirs applies.

use serde::Deserialize;
use toml::Spanned;

use super::error::SettingsError;
use super::section::{first, needs_trust, Layers, Spans};
use super::trust::{TrustItem, TrustKind};
use super::Sourced;
use crate::prices::{Cost, MAX_USD};

/// `[run]`, merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSettings {
    /// The run's cost budget, if a file sets one.
    pub max_cost: Option<Sourced<Cost>>,
}

/// `[run]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRun {
    max_cost: Option<Spanned<f64>>,
}

/// One file's `[run]`, checked.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedRun {
    max_cost: Option<Cost>,
}

pub(super) fn parse(raw: RawRun, spans: &Spans<'_>) -> Result<ParsedRun, SettingsError> {
    let mut parsed = ParsedRun::default();
    if let Some(max_cost) = raw.max_cost {
        let usd = *max_cost.get_ref();
        parsed.max_cost = Some(
            Cost::from_usd(usd)
                .filter(|cost| *cost > Cost::ZERO)
                .ok_or_else(|| {
                    spans.invalid(
                        max_cost.span().start,
                        format!(
                            "`run.max_cost` must be a number of USD above 0 and at most \
                             {MAX_USD}, not {usd}"
                        ),
                    )
                })?,
        );
    }
    Ok(parsed)
}

/// Takes out of a project's `[run]` a `max_cost` above the person's own (`user`: their
/// `config.toml`'s), which would loosen their limit (see the module docs).
pub(super) fn split_looser_than_user(
    project: &mut ParsedRun,
    user: Option<&ParsedRun>,
    items: &mut Vec<TrustItem>,
) {
    let (Some(mine), Some(theirs)) = (user.and_then(|u| u.max_cost), project.max_cost) else {
        return;
    };
    if theirs > mine {
        project.max_cost = None;
        items.push(needs_trust(
            TrustKind::CostLimit,
            format!(
                "raises the cost limit to {} from your {} ([run] max_cost)",
                theirs.text(),
                mine.text()
            ),
            theirs.picodollars().to_string(),
        ));
    }
}

/// Project over user.
pub(super) fn merge(layers: &Layers<'_, ParsedRun>) -> RunSettings {
    RunSettings {
        max_cost: first(layers, |r| r.max_cost),
    }
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::{load_err, workspace};
    use super::super::{Settings, SettingsErrorKind as Kind};
    use super::*;

    #[test]
    fn the_budget_is_read_and_must_be_positive_and_finite() {
        let dir = workspace(Some("[run]\nmax_cost = 0.25\n"));
        let settings = Settings::load(dir.path(), None).unwrap();
        assert_eq!(
            settings.run.max_cost.unwrap().value,
            Cost::from_usd(0.25).unwrap()
        );
        let dir = workspace(Some("[run]\nmax_cost = 3\n"));
        let settings = Settings::load(dir.path(), None).unwrap();
        assert_eq!(
            settings.run.max_cost.unwrap().value,
            Cost::from_usd(3.0).unwrap()
        );
        assert_eq!(
            Settings::load(workspace(None).path(), None)
                .unwrap()
                .run
                .max_cost,
            None
        );
        for bad in ["0", "-1", "nan", "inf", "2e6"] {
            let err = load_err(&format!("[run]\n\nmax_cost = {bad}\n"));
            assert_eq!(
                (err.kind, err.line),
                (Kind::Invalid, Some(3)),
                "{bad}: {err}"
            );
            assert!(err.to_string().contains("run.max_cost"), "{bad}: {err}");
        }
        let err = load_err("[run]\nmax_costs = 1\n");
        assert_eq!((err.kind, err.line), (Kind::UnknownKey, Some(2)), "{err}");
    }

    #[test]
    fn a_workspace_s_budget_above_the_person_s_own_waits_for_trust() {
        let usd = |v: f64| Cost::from_usd(v).unwrap();
        let reviewed = |project: &str, user: Option<&str>| {
            let dir = workspace(Some(project));
            let path = dir.path().join("user.toml");
            if let Some(text) = user {
                std::fs::write(&path, text).unwrap();
            }
            let r = Settings::load_reviewed(dir.path(), Some(&path)).unwrap();
            let kinds: Vec<&str> = r.items.iter().map(|i| i.kind.as_str()).collect();
            (
                r.untrusted.run.max_cost.map(|c| c.value),
                r.trusted.run.max_cost.map(|c| c.value),
                kinds.join(","),
            )
        };
        let looser = reviewed(
            "[run]\nmax_cost = 1000000\n",
            Some("[run]\nmax_cost = 0.5\n"),
        );
        assert_eq!(
            looser,
            (Some(usd(0.5)), Some(usd(1_000_000.0)), "cost_limit".into())
        );
        let stricter = reviewed("[run]\nmax_cost = 0.25\n", Some("[run]\nmax_cost = 0.5\n"));
        assert_eq!(stricter, (Some(usd(0.25)), Some(usd(0.25)), String::new()));
        // The person sets none: any budget only stops a run sooner.
        let only = reviewed("[run]\nmax_cost = 1000000\n", None);
        assert_eq!(
            only,
            (
                Some(usd(1_000_000.0)),
                Some(usd(1_000_000.0)),
                String::new()
            )
        );
    }
}
