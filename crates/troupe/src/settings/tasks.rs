//! `[tasks]`: the task board's settings. `lease` is how long a claim lasts unless its holder
//! renews it (SPEC §12): a duration like a hook's timeout (`"5m"`, `300`), from
//! [`MIN_LEASE`] to [`MAX_LEASE`]; [`DEFAULT_LEASE`] when no file says. Project over user.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::duration::{duration_of, RawTimeout};
use super::error::SettingsError;
use super::section::{first, Layers, Spans};
use super::Source;
use crate::store::tasks::{DEFAULT_LEASE, MAX_LEASE, MIN_LEASE};

/// `[tasks]`, merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSettings {
    /// How long a claim on the task board lasts unless renewed.
    pub lease: Duration,
    /// Where `lease` came from (`troupe config` says), [`Source::Default`] when no file sets it.
    pub lease_source: Source,
}

impl Default for TaskSettings {
    fn default() -> Self {
        Self {
            lease: DEFAULT_LEASE,
            lease_source: Source::Default,
        }
    }
}

/// `[tasks]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTasks {
    lease: Option<Spanned<RawTimeout>>,
}

/// One file's `[tasks]`, checked.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedTasks {
    lease: Option<Duration>,
}

pub(super) fn parse(raw: RawTasks, spans: &Spans<'_>) -> Result<ParsedTasks, SettingsError> {
    let mut parsed = ParsedTasks::default();
    if let Some(lease) = raw.lease {
        parsed.lease = Some(
            duration_of(lease.get_ref(), false)
                .filter(|l| (MIN_LEASE..=MAX_LEASE).contains(l))
                .ok_or_else(|| {
                    spans.invalid(
                        lease.span().start,
                        "`tasks.lease` must be a duration from 1s to 24h (\"5m\", \"90s\", or seconds)",
                    )
                })?,
        );
    }
    Ok(parsed)
}

/// Project over user.
pub(super) fn merge(layers: &Layers<'_, ParsedTasks>) -> TaskSettings {
    let lease = first(layers, |t| t.lease);
    TaskSettings {
        lease: lease.as_ref().map_or(DEFAULT_LEASE, |s| s.value),
        lease_source: lease.map_or(Source::Default, |s| s.source),
    }
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::load_err;
    use super::super::section::testing::workspace;
    use super::*;

    use crate::settings::Settings;

    fn lease_of(project: &str) -> Duration {
        let dir = workspace(Some(project));
        Settings::load(dir.path(), None).unwrap().tasks.lease
    }

    #[test]
    fn the_lease_is_read_and_bounded() {
        assert_eq!(
            lease_of("[tasks]\nlease = \"90s\"\n"),
            Duration::from_secs(90)
        );
        assert_eq!(lease_of("[tasks]\nlease = 120\n"), Duration::from_secs(120));
        assert_eq!(lease_of(""), DEFAULT_LEASE);
        for bad in ["\"0s\"", "\"25h\"", "\"500ms\"", "-3", "\"soon\""] {
            let err = load_err(&format!("[tasks]\nlease = {bad}\n")).to_string();
            assert!(err.contains("tasks.lease"), "{bad}: {err}");
        }
        let err = load_err("[tasks]\nleas = 3\n").to_string();
        assert!(err.contains("unknown key `leas`"), "{err}");
    }
}
