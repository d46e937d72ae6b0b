//! `[sandbox]`: how commands are confined. The table as written, its checks, the merge, and
//! what needs trust: whatever loosens — `mode = "off"` or a mode looser than the person's own
//! `config.toml` says, `network` other than off, `hooks = false` (hook commands unconfined).
//!
//! `mode` one of `workspace-write`, `read-only`, `off`; `network` `true`, `false` or
//! `"loopback"`; `deny_read` and `deny_write` lists of non-blank paths (absolute, `~/…` or
//! relative to the workspace) that commands may not read, or write (`deny_write` joins the
//! protected paths every writer checks, `crate::protected`); `hooks` a boolean (confine hook
//! commands too). `mode`, `network` and `hooks`: project over user; `deny_read` and
//! `deny_write`: both files' entries, project first (they only tighten: no trust needed).

use serde::Deserialize;
use toml::Spanned;

use super::error::SettingsError;
use super::section::{first, needs_trust, Layers, Spans};
use super::trust::{TrustItem, TrustKind};
use super::SandboxSettings;
use crate::sandbox::{Mode as SandboxMode, Network};

/// `[sandbox]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSandbox {
    mode: Option<Spanned<String>>,
    network: Option<Spanned<RawNetwork>>,
    #[serde(default)]
    deny_read: Vec<Spanned<String>>,
    #[serde(default)]
    deny_write: Vec<Spanned<String>>,
    hooks: Option<bool>,
}

/// A `network` value as written (`[sandbox]` and an MCP server's).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawNetwork {
    Flag(bool),
    Text(String),
}

/// `true`, `false` or `"loopback"`.
pub(super) fn network_of(raw: &RawNetwork) -> Result<Network, String> {
    match raw {
        RawNetwork::Flag(true) => Ok(Network::On),
        RawNetwork::Flag(false) => Ok(Network::Off),
        RawNetwork::Text(t) if t == "loopback" => Ok(Network::Loopback),
        RawNetwork::Text(t) => Err(format!("must be true, false or \"loopback\", not {t:?}")),
    }
}

/// One file's `[sandbox]`, checked.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedSandbox {
    mode: Option<SandboxMode>,
    network: Option<Network>,
    deny_read: Vec<String>,
    deny_write: Vec<String>,
    hooks: Option<bool>,
}

/// Non-blank paths of a `deny_*` list.
fn paths(
    list: Vec<Spanned<String>>,
    key: &str,
    spans: &Spans<'_>,
) -> Result<Vec<String>, SettingsError> {
    let mut out = Vec::new();
    for (index, path) in list.into_iter().enumerate() {
        if path.get_ref().trim().is_empty() {
            return Err(spans.invalid(
                path.span().start,
                format!("sandbox.{key}[{index}] must not be blank"),
            ));
        }
        out.push(path.into_inner());
    }
    Ok(out)
}

pub(super) fn parse(raw: RawSandbox, spans: &Spans<'_>) -> Result<ParsedSandbox, SettingsError> {
    let mut parsed = ParsedSandbox::default();
    if let Some(mode) = raw.mode {
        parsed.mode = Some(
            mode.get_ref()
                .parse::<SandboxMode>()
                .map_err(|why| spans.invalid(mode.span().start, format!("sandbox.mode: {why}")))?,
        );
    }
    if let Some(network) = raw.network {
        parsed.network = Some(network_of(network.get_ref()).map_err(|why| {
            spans.invalid(network.span().start, format!("sandbox.network {why}"))
        })?);
    }
    parsed.deny_read = paths(raw.deny_read, "deny_read", spans)?;
    parsed.deny_write = paths(raw.deny_write, "deny_write", spans)?;
    parsed.hooks = raw.hooks;
    Ok(parsed)
}

/// `mode`, `network`, `hooks`: project over user; `deny_read`, `deny_write`: every file's,
/// project first.
pub(super) fn merge(layers: &Layers<'_, ParsedSandbox>) -> SandboxSettings {
    let mut deny_read = Vec::new();
    let mut deny_write = Vec::new();
    for (_, parsed) in layers {
        deny_read.extend(parsed.deny_read.iter().cloned());
        deny_write.extend(parsed.deny_write.iter().cloned());
    }
    SandboxSettings {
        mode: first(layers, |s| s.mode),
        network: first(layers, |s| s.network),
        deny_read,
        deny_write,
        hooks: first(layers, |s| s.hooks),
    }
}

/// Takes `hooks = false` out of a project's `[sandbox]`: hook commands unconfined.
pub(super) fn split_unconfined_hooks(sandbox: &mut ParsedSandbox, items: &mut Vec<TrustItem>) {
    if sandbox.hooks == Some(false) {
        sandbox.hooks = None;
        items.push(needs_trust(
            TrustKind::UnconfinedHooks,
            "runs hook commands unconfined ([sandbox] hooks = false)".into(),
            "false".into(),
        ));
    }
}

/// Takes out of a project's `[sandbox]` what loosens the confinement of commands: `mode =
/// "off"`, then a `network` other than off.
pub(super) fn split_loosening(sandbox: &mut ParsedSandbox, items: &mut Vec<TrustItem>) {
    if sandbox.mode == Some(SandboxMode::Off) {
        sandbox.mode = None;
        items.push(needs_trust(
            TrustKind::SandboxMode,
            "runs commands unconfined ([sandbox] mode = \"off\")".into(),
            "off".into(),
        ));
    }
    if let Some(network) = sandbox.network.filter(|n| *n != Network::Off) {
        sandbox.network = None;
        items.push(needs_trust(
            TrustKind::Network,
            format!(
                "gives commands the network: {} ([sandbox] network)",
                network.as_str()
            ),
            network.as_str().into(),
        ));
    }
}

/// The project's mode may tighten the user's, not loosen it: `workspace-write` (the default)
/// over a user's `read-only` needs trust too. Takes it out of the (already split) project
/// section when it is looser than `user`'s.
pub(super) fn split_looser_than_user(
    project: &mut ParsedSandbox,
    user: Option<&ParsedSandbox>,
    items: &mut Vec<TrustItem>,
) {
    let user_mode = user.and_then(|u| u.mode);
    if let (Some(mode), Some(user)) = (project.mode, user_mode) {
        if strictness(user) > strictness(mode) {
            project.mode = None;
            items.push(needs_trust(
                TrustKind::SandboxMode,
                format!(
                    "runs commands under {} instead of your {} ([sandbox] mode)",
                    mode.as_str(),
                    user.as_str()
                ),
                mode.as_str().into(),
            ));
        }
    }
}

/// How strictly a mode confines: read-only > workspace-write > off.
fn strictness(mode: SandboxMode) -> u8 {
    match mode {
        SandboxMode::Off => 0,
        SandboxMode::WorkspaceWrite => 1,
        SandboxMode::ReadOnly => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::{load_err, workspace};
    use super::super::trust::TrustKind;
    use super::super::{Settings, Source};
    use crate::sandbox::{Mode as SandboxMode, Network};

    #[test]
    fn the_sandbox_section_loads_and_merges_project_over_user() {
        let dir = workspace(Some(
            "[sandbox]\nmode = \"read-only\"\nnetwork = \"loopback\"\ndeny_read = [\"secrets\"]\n",
        ));
        let user = dir.path().join("user.toml");
        std::fs::write(
            &user,
            "[sandbox]\nmode = \"off\"\nnetwork = true\ndeny_read = [\"~/.kube\"]\nhooks = true\n",
        )
        .unwrap();
        let settings = Settings::load(dir.path(), Some(&user)).unwrap();
        let sandbox = settings.sandbox;
        assert_eq!(sandbox.mode.unwrap().value, SandboxMode::ReadOnly);
        assert_eq!(sandbox.network.unwrap().value, Network::Loopback);
        assert_eq!(sandbox.deny_read, ["secrets", "~/.kube"]);
        let hooks = sandbox.hooks.unwrap();
        assert!(hooks.value);
        assert_eq!(hooks.source, Source::User(user));
        for (text, needle) in [
            ("[sandbox]\nmode = \"loose\"\n", "unknown sandbox mode"),
            (
                "[sandbox]\nnetwork = \"sometimes\"\n",
                "true, false or \"loopback\"",
            ),
            ("[sandbox]\ndeny_read = [\" \"]\n", "must not be blank"),
            ("[sandbox]\nwrite = [\"/\"]\n", "unknown key `write`"),
        ] {
            let err = load_err(text);
            assert!(err.to_string().contains(needle), "{text}: {err}");
            assert!(err.to_string().contains(":2"), "{text}: {err}");
        }
    }

    #[test]
    fn a_mode_looser_than_the_users_waits_for_trust() {
        let dir = workspace(Some("[sandbox]\nmode = \"workspace-write\"\n"));
        let user = dir.path().join("user.toml");
        std::fs::write(&user, "[sandbox]\nmode = \"read-only\"\n").unwrap();
        let reviewed = Settings::load_reviewed(dir.path(), Some(&user)).unwrap();
        let mode = |s: &Settings| s.sandbox.mode.as_ref().map(|m| m.value);
        assert_eq!(mode(&reviewed.untrusted), Some(SandboxMode::ReadOnly));
        assert_eq!(mode(&reviewed.trusted), Some(SandboxMode::WorkspaceWrite));
        assert_eq!(reviewed.items.len(), 1, "{:?}", reviewed.items);
        assert_eq!(reviewed.items[0].kind, TrustKind::SandboxMode);
        assert!(reviewed.items[0]
            .shown
            .contains("instead of your read-only"));
    }

    #[test]
    fn a_stricter_sandbox_needs_no_trust() {
        let dir = workspace(Some(
            "[sandbox]\nmode = \"read-only\"\nnetwork = false\nhooks = true\n[permissions]\ndeny = [\"shell\"]\n",
        ));
        let reviewed = Settings::load_reviewed(dir.path(), None).unwrap();
        assert!(reviewed.items.is_empty(), "{:?}", reviewed.items);
        assert_eq!(reviewed.trusted, reviewed.untrusted);
    }
}
