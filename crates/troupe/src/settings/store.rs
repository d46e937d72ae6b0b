//! `[store]`: where a team's stores are when no flag or environment variable says. The table as
//! written, its checks, the merge (project over user, per key), and what needs trust (`url`:
//! the database a team's state goes to).
//!
//! `url` a PostgreSQL URL (`postgres://…` or `postgresql://…`) that carries no password: one in
//! the user part, a `password` parameter or a key/value string is refused as a secret, without
//! echoing it (the whole URL goes in `TROUPE_STORE_URL` instead; [`super::store_url`]); `team` 1
//! to [`MAX_TEAM_CHARS`] characters, not blank; `lease` like a hook's timeout, or in
//! milliseconds (`"500ms"`), [`MIN_STORE_LEASE`] to [`MAX_STORE_LEASE`].

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::duration::{duration_of, parse_duration, RawTimeout};
use super::error::SettingsError;
use super::section::{first, needs_trust, Layers, Spans};
use super::store_url::store_url;
use super::trust::{TrustItem, TrustKind};
use super::StoreSettings;

/// The longest team key, in characters (as `--team`).
pub const MAX_TEAM_CHARS: usize = 200;
/// The shortest teammate lease (as `TROUPE_LEASE`): a heartbeat every third of it has to keep up.
pub const MIN_STORE_LEASE: Duration = Duration::from_millis(300);
/// The longest lease a settings file may give: a takeover waits that long for a dead worker.
pub const MAX_STORE_LEASE: Duration = Duration::from_secs(3600);

/// What a lease may be, said the same way for `[store] lease` and `TROUPE_LEASE`.
pub const LEASE_FORM: &str = "300ms to 1h: an integer of seconds (10) or a duration with units \
     (\"500ms\", \"10s\", \"2m\", \"1h30m\")";

/// A lease within [`MIN_STORE_LEASE`]..=[`MAX_STORE_LEASE`], read by [`parse_duration`].
pub fn parse_lease(raw: &str) -> Option<Duration> {
    parse_duration(raw).filter(|l| (MIN_STORE_LEASE..=MAX_STORE_LEASE).contains(l))
}

/// `[store]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    url: Option<Spanned<String>>,
    team: Option<Spanned<String>>,
    lease: Option<Spanned<RawTimeout>>,
}

/// One file's `[store]`, checked.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedStore {
    url: Option<String>,
    team: Option<String>,
    lease: Option<Duration>,
}

pub(super) fn parse(raw: RawStore, spans: &Spans<'_>) -> Result<ParsedStore, SettingsError> {
    let mut parsed = ParsedStore::default();
    if let Some(url) = raw.url {
        parsed.url = Some(
            store_url(url.get_ref())
                .map_err(|(kind, why)| spans.error(kind, url.span().start, why))?,
        );
    }
    if let Some(team) = raw.team {
        let value = team.get_ref().trim();
        if value.is_empty() || value.chars().count() > MAX_TEAM_CHARS {
            return Err(spans.invalid(
                team.span().start,
                format!("`store.team` must be 1 to {MAX_TEAM_CHARS} characters, not blank"),
            ));
        }
        parsed.team = Some(value.to_owned());
    }
    if let Some(lease) = raw.lease {
        parsed.lease = Some(
            duration_of(lease.get_ref(), true)
                .filter(|l| (MIN_STORE_LEASE..=MAX_STORE_LEASE).contains(l))
                .ok_or_else(|| {
                    spans.invalid(
                        lease.span().start,
                        format!("`store.lease` must be {LEASE_FORM}"),
                    )
                })?,
        );
    }
    Ok(parsed)
}

/// Project over user, per key.
pub(super) fn merge(layers: &Layers<'_, ParsedStore>) -> StoreSettings {
    StoreSettings {
        url: first(layers, |s| s.url.clone()),
        team: first(layers, |s| s.team.clone()),
        lease: first(layers, |s| s.lease),
    }
}

/// Takes a project's `url` out: where the team's state goes waits for trust.
pub(super) fn split_trust(store: &mut ParsedStore, items: &mut Vec<TrustItem>) {
    if let Some(url) = store.url.take() {
        items.push(needs_trust(
            TrustKind::Store,
            format!("keeps the team's state in {url} ([store] url)"),
            url,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::files::PROJECT_FILE_NAME;
    use super::super::section::testing::{load_err, workspace};
    use super::super::{Settings, SettingsErrorKind as Kind, Source, Sourced};
    use super::*;

    #[test]
    fn the_store_section_loads_and_merges_project_over_user_per_key() {
        let dir = workspace(Some(
            "[store]\nurl = \" postgres://troupe@db.example:5432/team \"\nlease = \"500ms\"\n",
        ));
        let user = dir.path().join("user.toml");
        std::fs::write(
            &user,
            "[store]\nurl = \"postgresql://me@localhost/mine\"\nteam = \" backend \"\nlease = 30\n",
        )
        .unwrap();
        let s = Settings::load(dir.path(), Some(&user)).unwrap();
        let project = Source::Project(dir.path().join(PROJECT_FILE_NAME));
        assert_eq!(
            s.store,
            StoreSettings {
                url: Some(Sourced {
                    value: "postgres://troupe@db.example:5432/team".into(),
                    source: project.clone(),
                }),
                team: Some(Sourced {
                    value: "backend".into(),
                    source: Source::User(user.clone()),
                }),
                lease: Some(Sourced {
                    value: Duration::from_millis(500),
                    source: project,
                }),
            }
        );
        // The user's file alone, and the bounds of team and lease.
        let dir = workspace(None);
        let team = "é".repeat(MAX_TEAM_CHARS);
        std::fs::write(
            &user,
            format!("[store]\nteam = \"{team}\"\nlease = \"1h\"\n"),
        )
        .unwrap();
        let s = Settings::load(dir.path(), Some(&user)).unwrap();
        assert_eq!(s.store.url, None);
        assert_eq!(s.store.team.unwrap().value, team);
        assert_eq!(s.store.lease.unwrap().value, MAX_STORE_LEASE);
        for (lease, millis) in [
            ("\"300ms\"", 300),
            ("1", 1000),
            ("\"10s\"", 10_000),
            ("\"2m\"", 120_000),
            // The same reading as flags and TROUPE_LEASE: compound forms too.
            ("\"1m30s\"", 90_000),
            ("\"1.5m\"", 90_000),
        ] {
            let dir = workspace(Some(&format!("[store]\nlease = {lease}\n")));
            let s = Settings::load(dir.path(), None).unwrap();
            assert_eq!(
                s.store.lease.unwrap().value,
                Duration::from_millis(millis),
                "{lease}"
            );
        }
    }

    #[test]
    fn bad_store_values_are_refused_with_file_and_line_never_echoing_a_password() {
        let long_team = "t".repeat(MAX_TEAM_CHARS + 1);
        for (text, kind, line, needle) in [
            (
                "[store]\nteam = \"t\"\nurl = \"postgres://u:s3cret-pw@db.example/team\"\n".to_owned(),
                Kind::Secret,
                3,
                "give the whole URL in TROUPE_STORE_URL",
            ),
            (
                "[store]\nurl = \"postgresql://u@db.example/team?sslmode=disable&password=s3cret-pw\"\n".to_owned(),
                Kind::Secret,
                2,
                "a password never goes in a settings file",
            ),
            (
                "[store]\nurl = \"host=db.example user=u password=s3cret-pw dbname=team\"\n".to_owned(),
                Kind::Secret,
                2,
                "TROUPE_STORE_URL",
            ),
            (
                "[store]\nurl = \"postgres://u:s3cret-pw@db.example:port/team\"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.url` must be a PostgreSQL URL",
            ),
            (
                "[store]\nurl = \"mysql://u@db.example/team\"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.url` must be a PostgreSQL URL (postgres://",
            ),
            (
                "[store]\nurl = \"host=db.example dbname=team\"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.url` must be a PostgreSQL URL",
            ),
            (
                "[store]\nurl = \" \"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.url` must not be blank",
            ),
            (
                "[store]\nurl = \"postgres://h/db\"\nteam = \"  \"\n".to_owned(),
                Kind::Invalid,
                3,
                "`store.team` must be 1 to 200 characters",
            ),
            (
                format!("[store]\nteam = \"{long_team}\"\n"),
                Kind::Invalid,
                2,
                "`store.team` must be 1 to 200 characters",
            ),
            (
                "[store]\nlease = \"299ms\"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.lease` must be 300ms to 1h",
            ),
            (
                "[store]\nlease = 0\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.lease` must be 300ms to 1h",
            ),
            (
                "[store]\nlease = \"61m\"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.lease` must be 300ms to 1h",
            ),
            (
                "[store]\nlease = \"soon\"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.lease` must be 300ms to 1h",
            ),
            (
                "[store]\nurl = \"postgres://h/db\"\nschema = \"troupe\"\n".to_owned(),
                Kind::UnknownKey,
                3,
                "unknown key `schema`",
            ),
            (
                "[store]\npassword = \"s3cret-pw\"\n".to_owned(),
                Kind::Secret,
                2,
                "`password` looks like a secret",
            ),
        ] {
            let err = load_err(&text);
            assert_eq!((err.kind, err.line), (kind, Some(line)), "{text}: {err}");
            let shown = err.to_string();
            assert!(
                shown.contains(&format!("troupe.toml:{line}: ")),
                "{text}: {err}"
            );
            assert!(shown.contains(needle), "{text}: {err}");
            assert!(!shown.contains("s3cret"), "{text}: {err}");
        }
        // A hook's timeout still takes no milliseconds.
        let err = load_err("[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = \"1500ms\"\n");
        assert_eq!((err.kind, err.line), (Kind::Invalid, Some(4)), "{err}");
    }
}
