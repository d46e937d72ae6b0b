//! `--store`, `--team` and `TROUPE_LEASE`: where a team's stores are.

use super::{parse_duration, CliError};

/// Where the stores are: `--store`, else `TROUPE_STORE_URL`, else files; a store URL must be
/// PostgreSQL's. The team key: `--team`, else `TROUPE_TEAM`, else `default`.
pub fn store_choice(
    flags: &crate::args::StoreFlags,
    local_workers: bool,
) -> Result<troupe::bootstrap::StoreChoice, CliError> {
    let from_env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    // `main` moved TROUPE_STORE_URL out of the environment (it may hold the database's
    // password; no command an agent runs may read it).
    let taken = troupe::secrets::environment::taken("TROUPE_STORE_URL")
        .and_then(|v| v.to_str())
        .map(str::to_owned)
        .filter(|v| !v.trim().is_empty());
    let Some(url) = flags
        .store
        .clone()
        .or(taken)
        .or_else(|| from_env("TROUPE_STORE_URL"))
    else {
        if flags.team.is_some() {
            return Err(CliError::Usage(
                "--team names a team in a shared store: give --store postgres://… too".into(),
            ));
        }
        return Ok(troupe::bootstrap::StoreChoice::Files);
    };
    if !troupe::store::postgres::is_postgres_url(&url) {
        return Err(CliError::Usage(
            "--store takes a PostgreSQL URL (postgres://user@host:port/database)".into(),
        ));
    }
    let team = flags
        .team
        .clone()
        .or_else(|| from_env("TROUPE_TEAM"))
        .unwrap_or_else(|| "default".into());
    if team.trim().is_empty() || team.len() > 200 {
        return Err(CliError::Usage("--team must be 1 to 200 characters".into()));
    }
    let lease = match from_env("TROUPE_LEASE") {
        None => troupe::bootstrap::DEFAULT_SHARED_LEASE,
        Some(raw) => {
            let lease = parse_duration(&raw).map_err(|_| {
                CliError::Usage(format!(
                    "TROUPE_LEASE must be a duration like 10s, not {raw:?}"
                ))
            })?;
            if lease < std::time::Duration::from_millis(300) {
                return Err(CliError::Usage(
                    "TROUPE_LEASE must be at least 300ms".into(),
                ));
            }
            lease
        }
    };
    Ok(troupe::bootstrap::StoreChoice::Postgres(
        troupe::bootstrap::PgOptions {
            url,
            team,
            local_workers,
            lease,
        },
    ))
}
