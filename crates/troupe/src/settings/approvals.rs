//! `[approvals]`: how a tool call the policy sends to `ask` is answered (SPEC §13).
//!
//! - `ttl` — how long a permission request waits for its answer (a duration, `"10m"` by
//!   default, from 10 s to 24 h). A request that expires is a denial with that reason.
//! - `route` — `"person"` (the default: a person answers, at the run's terminal, with `troupe
//!   approve`/`deny` or on the page) or `"lead"`: a teammate's ask also goes to the lead, which
//!   answers with `review_permission`. A person can still answer first. `"lead"` **needs
//!   trust** in a workspace's own `troupe.toml`: it lets a model approve the team's writes and
//!   commands.
//! - `no_terminal` — what an ask does in a process with no terminal to prompt: `"deny"` (the
//!   default for `troupe run`, SPEC §7: denied at once, saying how to allow) or `"wait"` (it
//!   waits for an answer from another terminal or the page, up to `ttl`). `troupe worker`
//!   waits unless a file says `"deny"`.
//!
//! Project over user, per key.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::duration::{duration_of, RawTimeout};
use super::error::SettingsError;
use super::section::{first, needs_trust, Layers, Spans};
use super::trust::{TrustItem, TrustKind};
use super::{Source, Sourced};

/// The default response window of a permission request.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(600);
/// The shortest window a file may set.
pub const MIN_APPROVAL_TTL: Duration = Duration::from_secs(10);
/// The longest window a file may set.
pub const MAX_APPROVAL_TTL: Duration = Duration::from_secs(24 * 3600);

/// Who a teammate's ask goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApprovalRoute {
    /// A person answers (terminal, `troupe approve`, the page).
    #[default]
    Person,
    /// The lead answers with `review_permission`; a person may answer first.
    Lead,
}

impl ApprovalRoute {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Person => "person",
            Self::Lead => "lead",
        }
    }
}

/// What an ask does when the process has no terminal to prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoTerminal {
    /// Denied at once, saying how to allow (SPEC §7).
    Deny,
    /// Waits for an answer from elsewhere, up to the request's window.
    Wait,
}

impl NoTerminal {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Wait => "wait",
        }
    }
}

/// `[approvals]`, merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalSettings {
    pub ttl: Duration,
    /// Where `ttl` came from (`troupe config` says), [`Source::Default`] when no file sets it.
    pub ttl_source: Source,
    pub route: ApprovalRoute,
    /// Where `route` came from, [`Source::Default`] when no file sets it.
    pub route_source: Source,
    /// `None`: the command decides (`troupe run` denies, `troupe worker` waits).
    pub no_terminal: Option<Sourced<NoTerminal>>,
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        Self {
            ttl: DEFAULT_APPROVAL_TTL,
            ttl_source: Source::Default,
            route: ApprovalRoute::Person,
            route_source: Source::Default,
            no_terminal: None,
        }
    }
}

/// `[approvals]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApprovals {
    ttl: Option<Spanned<RawTimeout>>,
    route: Option<Spanned<String>>,
    no_terminal: Option<Spanned<String>>,
}

/// One file's `[approvals]`, checked.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedApprovals {
    ttl: Option<Duration>,
    route: Option<ApprovalRoute>,
    no_terminal: Option<NoTerminal>,
}

pub(super) fn parse(
    raw: RawApprovals,
    spans: &Spans<'_>,
) -> Result<ParsedApprovals, SettingsError> {
    let mut parsed = ParsedApprovals::default();
    if let Some(ttl) = raw.ttl {
        parsed.ttl = Some(
            duration_of(ttl.get_ref(), false)
                .filter(|t| (MIN_APPROVAL_TTL..=MAX_APPROVAL_TTL).contains(t))
                .ok_or_else(|| {
                    spans.invalid(
                        ttl.span().start,
                        "`approvals.ttl` must be a duration from 10s to 24h (\"10m\", \"90s\", or seconds)",
                    )
                })?,
        );
    }
    if let Some(route) = raw.route {
        parsed.route = Some(match route.get_ref().as_str() {
            "person" => ApprovalRoute::Person,
            "lead" => ApprovalRoute::Lead,
            other => {
                return Err(spans.invalid(
                    route.span().start,
                    format!("`approvals.route` must be \"person\" or \"lead\", not {other:?}"),
                ))
            }
        });
    }
    if let Some(mode) = raw.no_terminal {
        parsed.no_terminal = Some(match mode.get_ref().as_str() {
            "deny" => NoTerminal::Deny,
            "wait" => NoTerminal::Wait,
            other => {
                return Err(spans.invalid(
                    mode.span().start,
                    format!("`approvals.no_terminal` must be \"deny\" or \"wait\", not {other:?}"),
                ))
            }
        });
    }
    Ok(parsed)
}

/// A workspace's own `route = "lead"` waits for trust: it lets a model answer the team's asks.
pub(super) fn split_trust(approvals: &mut ParsedApprovals, items: &mut Vec<TrustItem>) {
    if approvals.route == Some(ApprovalRoute::Lead) {
        approvals.route = None;
        items.push(needs_trust(
            TrustKind::ApprovalRoute,
            "lets the lead answer teammates' permission asks ([approvals] route)".to_owned(),
            "lead".to_owned(),
        ));
    }
}

/// Project over user, per key.
pub(super) fn merge(layers: &Layers<'_, ParsedApprovals>) -> ApprovalSettings {
    let ttl = first(layers, |a| a.ttl);
    let route = first(layers, |a| a.route);
    ApprovalSettings {
        ttl: ttl.as_ref().map_or(DEFAULT_APPROVAL_TTL, |s| s.value),
        ttl_source: ttl.map_or(Source::Default, |s| s.source),
        route: route.as_ref().map_or(ApprovalRoute::Person, |s| s.value),
        route_source: route.map_or(Source::Default, |s| s.source),
        no_terminal: first(layers, |a| a.no_terminal),
    }
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::{load_err, workspace};
    use super::super::Settings;
    use super::*;

    #[test]
    fn the_section_loads_with_defaults_and_refuses_bad_values() {
        let dir = workspace(None);
        let settings = Settings::load(dir.path(), None).unwrap();
        assert_eq!(settings.approvals, ApprovalSettings::default());
        assert_eq!(settings.approvals.ttl, Duration::from_secs(600));

        let dir = workspace(Some(
            "[approvals]\nttl = \"2m\"\nroute = \"lead\"\nno_terminal = \"wait\"\n",
        ));
        let settings = Settings::load(dir.path(), None).unwrap();
        assert_eq!(settings.approvals.ttl, Duration::from_secs(120));
        assert_eq!(settings.approvals.route, ApprovalRoute::Lead);
        assert_eq!(
            settings.approvals.no_terminal.map(|s| s.value),
            Some(NoTerminal::Wait)
        );

        for (text, needle) in [
            ("[approvals]\nttl = \"1s\"\n", "approvals.ttl"),
            ("[approvals]\nttl = \"2d\"\n", "approvals.ttl"),
            ("[approvals]\nroute = \"model\"\n", "approvals.route"),
            (
                "[approvals]\nno_terminal = \"maybe\"\n",
                "approvals.no_terminal",
            ),
            ("[approvals]\nrout = \"lead\"\n", "unknown key `rout`"),
        ] {
            let err = load_err(text);
            assert!(err.to_string().contains(needle), "{text}: {err}");
            assert!(err.to_string().contains(":2"), "{text}: {err}");
        }
    }

    #[test]
    fn a_workspace_routing_asks_to_the_lead_needs_trust() {
        let dir = workspace(Some("[approvals]\nroute = \"lead\"\nttl = \"1m\"\n"));
        let reviewed = Settings::load_reviewed(dir.path(), None).unwrap();
        assert_eq!(reviewed.trusted.approvals.route, ApprovalRoute::Lead);
        assert_eq!(reviewed.untrusted.approvals.route, ApprovalRoute::Person);
        // Only the route waits: the window only narrows what is asked.
        assert_eq!(reviewed.untrusted.approvals.ttl, Duration::from_secs(60));
        assert!(reviewed
            .items
            .iter()
            .any(|i| i.kind == TrustKind::ApprovalRoute && i.content == "lead"));
    }
}
