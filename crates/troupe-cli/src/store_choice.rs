//! `--store`, `--team`, `TROUPE_STORE_URL`, `TROUPE_TEAM`, `TROUPE_LEASE` and `[store]`: where
//! a team's stores are. Each value: flag > environment > `troupe.toml` > the user's
//! `config.toml` > default (the file store; team `default`; [`DEFAULT_SHARED_LEASE`]). The
//! settings files' values were checked when they were loaded; the flags and the environment are
//! checked here.

use std::time::Duration;

use troupe::bootstrap::{PgOptions, StoreChoice, DEFAULT_SHARED_LEASE};
use troupe::settings::{parse_lease, Settings, Source, Sourced, LEASE_FORM};

use crate::args::StoreFlags;
use crate::error::CliError;

/// The store values a command would use, each with where it came from (`troupe config` shows
/// them). `team` and `lease` only matter with a `url`.
#[derive(Debug, Clone)]
pub struct EffectiveStore {
    /// None: the file store under `.troupe/`. May carry a password (from the flag or the
    /// environment): show it with `troupe::settings::store_url_shown`.
    pub url: Option<Sourced<String>>,
    pub team: Sourced<String>,
    pub lease: Sourced<Duration>,
}

/// Where the stores are (see the module docs); a store URL must be PostgreSQL's, and `--team`
/// without a URL from any source is a usage error.
pub fn store_choice(
    flags: &StoreFlags,
    settings: &Settings,
    local_workers: bool,
) -> Result<StoreChoice, CliError> {
    if flags.local {
        return Ok(StoreChoice::Files);
    }
    let Some(url) = store_url(flags, settings)? else {
        if flags.team.is_some() {
            return Err(CliError::usage(
                "--team names a team in a shared store: give --store postgres://… too".into(),
            ));
        }
        return Ok(StoreChoice::Files);
    };
    Ok(StoreChoice::Postgres(PgOptions {
        url: url.value,
        team: team(flags, settings)?.value,
        local_workers,
        lease: lease(settings)?.value,
    }))
}

/// Every store value with its source, checked as [`store_choice`] checks them (`team` and
/// `lease` too when there is no URL: `troupe config` shows what a shared store would use).
pub fn effective_store(
    flags: &StoreFlags,
    settings: &Settings,
) -> Result<EffectiveStore, CliError> {
    Ok(EffectiveStore {
        url: if flags.local {
            None
        } else {
            store_url(flags, settings)?
        },
        team: team(flags, settings)?,
        lease: lease(settings)?,
    })
}

/// A non-blank environment variable.
fn from_env(name: &str) -> Option<Sourced<String>> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|value| Sourced {
            value,
            source: Source::Env(name.into()),
        })
}

/// `--store`, else `TROUPE_STORE_URL`, else `[store] url`; none: files.
fn store_url(flags: &StoreFlags, settings: &Settings) -> Result<Option<Sourced<String>>, CliError> {
    // `main` moved TROUPE_STORE_URL out of the environment (it may hold the database's
    // password; no command an agent runs may read it).
    let taken = troupe::secrets::environment::taken("TROUPE_STORE_URL")
        .and_then(|v| v.to_str())
        .filter(|v| !v.trim().is_empty())
        .map(|value| Sourced {
            value: value.to_owned(),
            source: Source::Env("TROUPE_STORE_URL".into()),
        });
    let given = flags
        .store
        .clone()
        .map(|value| Sourced {
            value,
            source: Source::Flag("--store".into()),
        })
        .or(taken)
        .or_else(|| from_env("TROUPE_STORE_URL"));
    if let Some(url) = &given {
        if !troupe::store::is_postgres_url(&url.value) {
            return Err(CliError::usage(
                "--store takes a PostgreSQL URL (postgres://user@host:port/database)".into(),
            ));
        }
    }
    Ok(given.or_else(|| settings.store.url.clone()))
}

/// `--team`, else `TROUPE_TEAM`, else `[store] team`, else `default`.
fn team(flags: &StoreFlags, settings: &Settings) -> Result<Sourced<String>, CliError> {
    let given = flags
        .team
        .clone()
        .map(|value| Sourced {
            value,
            source: Source::Flag("--team".into()),
        })
        .or_else(|| from_env("TROUPE_TEAM"));
    if let Some(team) = &given {
        if team.value.trim().is_empty() || team.value.len() > troupe::settings::MAX_TEAM_CHARS {
            return Err(CliError::usage("--team must be 1 to 200 characters".into()));
        }
    }
    Ok(given
        .or_else(|| settings.store.team.clone())
        .unwrap_or_else(|| Sourced {
            value: "default".into(),
            source: Source::Default,
        }))
}

/// `TROUPE_LEASE`, else `[store] lease`, else [`DEFAULT_SHARED_LEASE`].
fn lease(settings: &Settings) -> Result<Sourced<Duration>, CliError> {
    if let Some(raw) = from_env("TROUPE_LEASE") {
        let lease = parse_lease(&raw.value).ok_or_else(|| {
            CliError::usage(format!(
                "TROUPE_LEASE must be {LEASE_FORM}, not {:?}",
                raw.value
            ))
        })?;
        return Ok(Sourced {
            value: lease,
            source: raw.source,
        });
    }
    Ok(settings.store.lease.clone().unwrap_or(Sourced {
        value: DEFAULT_SHARED_LEASE,
        source: Source::Default,
    }))
}

/// The team `choice` names, opened to be looked at: the workspace's files, or the shared
/// team's database (it connects, changing nothing). Every command that reads a team's stream,
/// conversations or usage takes what this opens, the same way for either backend.
pub async fn team_view(
    workspace: &std::path::Path,
    choice: &StoreChoice,
) -> Result<troupe::bootstrap::TeamView, CliError> {
    troupe::bootstrap::TeamView::open(workspace, choice)
        .await
        .map_err(|e| CliError::coded(&e))
}

/// What `troupe gc` prunes besides the workspace's files: a shared team's tables, or nothing.
pub async fn shared_retention(
    choice: &StoreChoice,
) -> Result<std::sync::Arc<dyn troupe::store::retention::Prune>, CliError> {
    match choice {
        StoreChoice::Files => Ok(std::sync::Arc::new(troupe::store::retention::NoSharedState)),
        StoreChoice::Postgres(pg) => troupe::store::shared_state(&pg.url, &pg.team)
            .await
            .map_err(|e| CliError::coded(&e)),
    }
}
