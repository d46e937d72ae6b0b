//! One settings file's text into its sections, in two passes with the `toml` crate: first its
//! syntax (duplicate keys refused) and its secrets ([`super::secrets`]) on the untyped tree, then
//! `deny_unknown_fields` structs with spans — each section parsing its own table — so every error
//! names the file, the line and the key. Unknown keys, malformed TOML and bad values are errors;
//! a value is never guessed.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::approvals::{ParsedApprovals, RawApprovals};
use super::context::{ParsedContext, RawContext};
use super::error::{SettingsError, SettingsErrorKind as Kind};
use super::hooks::{ParsedHook, RawHook};
use super::mcp::RawMcpServer;
use super::model::{ParsedModel, RawModel};
use super::prices::{ParsedPrices, RawPrices};
use super::retention::{ParsedRetention, RawRetention};
use super::rules::{ParsedRules, RawPermissions};
use super::run::{ParsedRun, RawRun};
use super::sandbox::{ParsedSandbox, RawSandbox};
use super::secrets::check_secrets;
use super::section::{line_of, Spans};
use super::store::{ParsedStore, RawStore};
use super::tasks::{ParsedTasks, RawTasks};
use super::team::{ParsedTeam, RawTeam};
use super::telemetry::{ParsedTelemetry, RawTelemetry};
use super::McpServerSpec;
use super::{
    approvals, context, hooks, mcp, model, prices, retention, rules, run, sandbox, store, tasks,
    team, telemetry,
};

/// One file, validated: each section's own values.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedFile {
    pub model: ParsedModel,
    pub rules: ParsedRules,
    pub hooks: Vec<ParsedHook>,
    pub sandbox: ParsedSandbox,
    pub store: ParsedStore,
    pub tasks: ParsedTasks,
    pub team: ParsedTeam,
    pub mcp_servers: Vec<McpServerSpec>,
    pub prices: ParsedPrices,
    pub run: ParsedRun,
    pub approvals: ParsedApprovals,
    pub telemetry: ParsedTelemetry,
    pub context: ParsedContext,
    pub retention: ParsedRetention,
}

/// The file as written; every key known, every value spanned for its line.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    model: RawModel,
    #[serde(default)]
    permissions: RawPermissions,
    #[serde(default)]
    hooks: Vec<Spanned<RawHook>>,
    #[serde(default)]
    sandbox: RawSandbox,
    #[serde(default)]
    store: RawStore,
    #[serde(default)]
    tasks: RawTasks,
    #[serde(default)]
    team: RawTeam,
    #[serde(default)]
    mcp_servers: Vec<Spanned<RawMcpServer>>,
    #[serde(default)]
    prices: RawPrices,
    #[serde(default)]
    run: RawRun,
    #[serde(default)]
    approvals: RawApprovals,
    #[serde(default)]
    telemetry: RawTelemetry,
    #[serde(default)]
    context: RawContext,
    #[serde(default)]
    retention: RawRetention,
}

/// Validates one file's text; the sections in file-format order, so a file with several
/// problems is refused for the same one every time.
pub(super) fn parse(path: &Path, text: &str) -> Result<ParsedFile, SettingsError> {
    // First the syntax and the secrets, on the untyped tree: a secret is refused with its hint
    // rather than as an unknown key.
    let tree = toml::de::DeTable::parse(text).map_err(|err| {
        SettingsError::new(
            Kind::Syntax,
            path,
            err.span().map(|s| line_of(text, s.start)),
            format!("not valid TOML: {}", err.message().trim()),
        )
    })?;
    check_secrets(path, text, tree.get_ref())?;
    let raw: RawFile = toml::from_str(text).map_err(|err| {
        let line = err.span().map(|s| line_of(text, s.start));
        let message = without_value(err.message().trim());
        match unknown_key(&message) {
            Some(key) => SettingsError::new(
                Kind::UnknownKey,
                path,
                line,
                format!("unknown key `{key}` ({message})"),
            ),
            None => SettingsError::new(Kind::Invalid, path, line, message),
        }
    })?;
    let spans = Spans { path, text };
    Ok(ParsedFile {
        model: model::parse(raw.model, &spans)?,
        rules: rules::parse(raw.permissions, &spans)?,
        hooks: hooks::parse(raw.hooks, &spans)?,
        sandbox: sandbox::parse(raw.sandbox, &spans)?,
        store: store::parse(raw.store, &spans)?,
        tasks: tasks::parse(raw.tasks, &spans)?,
        team: team::parse(raw.team, &spans)?,
        mcp_servers: mcp::parse(raw.mcp_servers, &spans)?,
        prices: prices::parse(raw.prices, &spans)?,
        run: run::parse(raw.run, &spans)?,
        approvals: approvals::parse(raw.approvals, &spans)?,
        telemetry: telemetry::parse(raw.telemetry, &spans)?,
        context: context::parse(raw.context, &spans)?,
        retention: retention::parse(raw.retention, &spans)?,
    })
}

/// serde's "invalid type: string \"…\", expected i64" without the value it quotes: the value
/// is the person's line (it may hold a secret), and the file and line already say where.
fn without_value(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        let Some(rest) = message.strip_prefix(prefix) else {
            continue;
        };
        let Some(expected) = rest.rfind(", expected ") else {
            continue;
        };
        let kind = rest.split([' ', ',']).next().unwrap_or_default();
        return format!("{prefix}{kind}, {}", &rest[expected + 2..]);
    }
    message.to_owned()
}

/// The key of serde's "unknown field `x`, expected …" message.
fn unknown_key(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::load_err;
    use super::super::SettingsErrorKind as Kind;

    #[test]
    fn unknown_keys_name_file_line_and_key() {
        let err = load_err("[model]\nmodel = \"m\"\n\nmodle = \"x\"\n");
        assert_eq!(err.kind, Kind::UnknownKey);
        assert_eq!(err.line, Some(4));
        assert!(
            err.to_string()
                .contains("troupe.toml:4: unknown key `modle`"),
            "{err}"
        );
        let err = load_err("[permissions]\nallow = []\n[hooks2]\n");
        assert_eq!((err.kind, err.line), (Kind::UnknownKey, Some(3)));
        assert!(err.message.contains("`hooks2`"), "{err}");
        let err = load_err("[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\nmatch = \"shell\"\n");
        assert_eq!((err.kind, err.line), (Kind::UnknownKey, Some(4)));
    }

    #[test]
    fn a_refused_line_is_named_never_quoted() {
        for (text, says) in [
            ("[model]\nmodel = sk-secret-abc\n", "not valid TOML"),
            (
                "[model]\ncontext_window = \"sk-secret-abc\"\n",
                "invalid type: string, expected i64",
            ),
            (
                "[run]\nmax_cost = \"sk-secret-abc, expected x\"\n",
                "invalid type: string, expected f64",
            ),
            ("[model]\nmodel = \"sk-secret-abc\n", "not valid TOML"),
        ] {
            let err = load_err(text);
            assert_eq!(err.line, Some(2), "{text}: {err}");
            let shown = err.to_string();
            assert!(shown.contains(says), "{text}: {shown}");
            assert!(!shown.contains("sk-secret"), "{text}: {shown}");
        }
    }

    #[test]
    fn malformed_and_duplicate_keys_name_the_line() {
        let err = load_err("[model]\nmodel = \"a\"\nmodel = \"b\"\n");
        assert_eq!((err.kind, err.line), (Kind::Syntax, Some(3)));
        let err = load_err("[model]\nmodel = \n");
        assert_eq!((err.kind, err.line), (Kind::Syntax, Some(2)));
        let err = load_err("[model]\ncontext_window = \"big\"\n");
        assert_eq!((err.kind, err.line), (Kind::Invalid, Some(2)));
        assert!(err.to_string().contains("troupe.toml:2:"), "{err}");
    }
}
