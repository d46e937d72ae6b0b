//! `[team]`: how a team works.
//!
//! - `isolation` — `"worktree"` or `"none"` (the default) — is the isolation `spawn_teammate`
//!   uses when a call names none (`troupe run --isolation` decides over it). Nothing about it
//!   needs trust: a worktree only narrows where a teammate writes.
//! - `remote` — the name of a git remote of the checkout (`origin`) — makes worktree teammates'
//!   branches travel between the clones of a shared team: the lead publishes a
//!   teammate's base there when it spawns it, the host that runs the teammate pushes its
//!   branch after each commit, and `merge_teammate` fetches it from there. It **needs trust**
//!   in a workspace's own `troupe.toml`: it decides where the team's code is pushed.
//!
//! Project over user, per key.

use serde::Deserialize;
use toml::Spanned;
use troupe_wire::Isolation;

use super::error::SettingsError;
use super::section::{first, needs_trust, Layers, Spans};
use super::trust::{TrustItem, TrustKind};
use super::TeamSection;

/// The longest remote name accepted.
const MAX_REMOTE_CHARS: usize = 100;

/// `[team]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTeam {
    isolation: Option<Spanned<String>>,
    remote: Option<Spanned<String>>,
}

/// One file's `[team]`, checked.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedTeam {
    isolation: Option<Isolation>,
    remote: Option<String>,
}

pub(super) fn parse(raw: RawTeam, spans: &Spans<'_>) -> Result<ParsedTeam, SettingsError> {
    let mut parsed = ParsedTeam::default();
    if let Some(isolation) = raw.isolation {
        parsed.isolation = Some(
            Isolation::parse(isolation.get_ref())
                .map_err(|why| spans.invalid(isolation.span().start, format!("team.{}", why.0)))?,
        );
    }
    if let Some(remote) = raw.remote {
        let name = remote.get_ref().trim();
        check_remote_name(name)
            .map_err(|why| spans.invalid(remote.span().start, format!("team.remote {why}")))?;
        parsed.remote = Some(name.to_owned());
    }
    Ok(parsed)
}

/// A git remote's name as troupe accepts it: what `git remote add` would, without anything a
/// command line could read as an option or a path (`-x`, `../x`, `/x`, `x:y`, a URL).
pub fn check_remote_name(name: &str) -> Result<(), String> {
    let fits = !name.is_empty()
        && name.chars().count() <= MAX_REMOTE_CHARS
        && !name.starts_with(['-', '.', '/'])
        && !name.ends_with(['/', '.'])
        && !name.contains("..")
        && !name.contains("//")
        && !name.ends_with(".lock")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if fits {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not the name of a git remote: letters, digits, '-', '_', '.' and '/' \
             (not first), at most {MAX_REMOTE_CHARS} characters; name a remote of the checkout, \
             such as \"origin\", not a URL"
        ))
    }
}

/// A workspace's own `remote` waits for trust: it decides where the team's code is pushed.
pub(super) fn split_trust(team: &mut ParsedTeam, items: &mut Vec<TrustItem>) {
    if let Some(remote) = team.remote.take() {
        items.push(needs_trust(
            TrustKind::GitRemote,
            format!("pushes teammates' branches to git remote {remote} ([team] remote)"),
            remote,
        ));
    }
}

/// `isolation` and `remote`: project over user, per key.
pub(super) fn merge(layers: &Layers<'_, ParsedTeam>) -> TeamSection {
    TeamSection {
        isolation: first(layers, |t| t.isolation),
        remote: first(layers, |t| t.remote.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::{load_err, workspace};
    use super::super::Settings;
    use super::*;
    use troupe_wire::Isolation;

    #[test]
    fn the_team_section_loads_and_refuses_unknown_values() {
        let dir = workspace(Some("[team]\nisolation = \"worktree\"\n"));
        let settings = Settings::load(dir.path(), None).unwrap();
        assert_eq!(settings.team.isolation.unwrap().value, Isolation::Worktree);
        assert!(settings.team.remote.is_none());
        let err = load_err("[team]\nisolation = \"container\"\n");
        assert!(err.to_string().contains(":2"), "{err}");
        assert!(err.to_string().contains("isolation must be"), "{err}");
        let err = load_err("[team]\nremotes = 1\n");
        assert!(err.to_string().contains("unknown key `remotes`"), "{err}");
    }

    #[test]
    fn a_remote_is_a_remote_s_name_never_an_option_a_path_or_a_url() {
        for good in ["origin", "up-stream", "team/shared", "a.b", "x_1"] {
            assert_eq!(check_remote_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "-u",
            "--upload-pack=evil",
            ".hidden",
            "../repo",
            "/srv/repo.git",
            "a//b",
            "a/",
            "x.lock",
            "git@host:repo.git",
            "https://example.com/r.git",
            "has space",
            "ünïcode",
            &"r".repeat(101),
        ] {
            assert!(check_remote_name(bad).is_err(), "{bad:?}");
        }
        let err = load_err("[team]\nisolation = \"worktree\"\nremote = \"--mirror\"\n");
        assert!(err.to_string().contains(":3"), "{err}");
        assert!(err.to_string().contains("team.remote"), "{err}");
        let err = load_err("[team]\nremote = 7\n");
        assert!(err.to_string().contains(":2"), "{err}");
    }

    #[test]
    fn the_user_s_remote_applies_and_a_workspace_s_own_waits_for_trust() {
        let dir = workspace(Some("[team]\nremote = \" shared \"\n"));
        let user = dir.path().join("user.toml");
        std::fs::write(&user, "[team]\nremote = \"origin\"\n").unwrap();
        let reviewed = Settings::load_reviewed(dir.path(), Some(&user)).unwrap();
        let waiting: Vec<_> = reviewed
            .items
            .iter()
            .filter(|i| i.kind == TrustKind::GitRemote)
            .collect();
        assert_eq!(waiting.len(), 1, "{:?}", reviewed.items);
        assert_eq!(waiting[0].content, "shared");
        // Untrusted, the person's own remote stands; trusted, the workspace's decides.
        assert_eq!(reviewed.untrusted.team.remote.unwrap().value, "origin");
        assert_eq!(reviewed.trusted.team.remote.unwrap().value, "shared");
    }
}
