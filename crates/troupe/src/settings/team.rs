//! `[team]`: how a team works. `isolation` — `"worktree"` or `"none"` (the default) — is the
//! isolation `spawn_teammate` uses when a call names none (`troupe run --isolation` decides over
//! it). Project over user. Nothing here needs trust: a worktree only narrows where a teammate
//! writes.

use serde::Deserialize;
use toml::Spanned;
use troupe_wire::Isolation;

use super::error::SettingsError;
use super::section::{first, Layers, Spans};
use super::TeamSection;

/// `[team]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTeam {
    isolation: Option<Spanned<String>>,
}

/// One file's `[team]`, checked.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedTeam {
    isolation: Option<Isolation>,
}

pub(super) fn parse(raw: RawTeam, spans: &Spans<'_>) -> Result<ParsedTeam, SettingsError> {
    let mut parsed = ParsedTeam::default();
    if let Some(isolation) = raw.isolation {
        parsed.isolation = Some(
            Isolation::parse(isolation.get_ref())
                .map_err(|why| spans.invalid(isolation.span().start, format!("team.{}", why.0)))?,
        );
    }
    Ok(parsed)
}

/// `isolation`: project over user.
pub(super) fn merge(layers: &Layers<'_, ParsedTeam>) -> TeamSection {
    TeamSection {
        isolation: first(layers, |t| t.isolation),
    }
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::{load_err, workspace};
    use super::super::Settings;
    use troupe_wire::Isolation;

    #[test]
    fn the_team_section_loads_and_refuses_unknown_values() {
        let dir = workspace(Some("[team]\nisolation = \"worktree\"\n"));
        let settings = Settings::load(dir.path(), None).unwrap();
        assert_eq!(settings.team.isolation.unwrap().value, Isolation::Worktree);
        let err = load_err("[team]\nisolation = \"container\"\n");
        assert!(err.to_string().contains(":2"), "{err}");
        assert!(err.to_string().contains("isolation must be"), "{err}");
        let err = load_err("[team]\nremote = 1\n");
        assert!(err.to_string().contains("unknown key `remote`"), "{err}");
    }
}
