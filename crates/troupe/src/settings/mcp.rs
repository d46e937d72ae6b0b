//! `[[mcp_servers]]`: Model Context Protocol servers whose tools agents may use. The entries as
//! written, their checks, the merge (project entries first, then the user's; a name in both is
//! the project's), and what needs trust (every project server: it starts a program or calls a
//! server).
//!
//! `name` (`[a-z0-9_-]+`, no `__`, unique in its file) and exactly one of `command` (with
//! optional `args`, a list of strings, and `env`, a table of strings) or `url` (`http://` or
//! `https://`); `startup_timeout` (default 10 s) and `call_timeout` (default 60 s) like a hook's
//! timeout; for a stdio server `sandbox` (a mode, default the run's) and `network` (like
//! `[sandbox] network`, default off).
//!
//! Secrets in `env`: a server often needs a token. A secret-looking variable name
//! (`GITHUB_TOKEN`) is accepted there only when its value is a reference to troupe's own
//! environment, exactly `"${NAME}"` ([`env_reference`]), expanded when the server starts; a
//! literal value under a secret-looking name is refused like any other secret
//! (`super::secrets`). So the file names the variable, the value stays in the environment.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::duration::RawTimeout;
use super::error::SettingsError;
use super::hooks::hook_timeout;
use super::sandbox::{network_of, RawNetwork};
use super::section::{needs_trust, Layers, Spans};
use super::trust::{TrustItem, TrustKind};
use super::{
    McpServerSpec, McpTransport, Source, DEFAULT_MCP_CALL_TIMEOUT, DEFAULT_MCP_STARTUP_TIMEOUT,
};
use crate::sandbox::{Mode as SandboxMode, Network};

/// One `[[mcp_servers]]` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcpServer {
    name: Spanned<String>,
    sandbox: Option<Spanned<String>>,
    network: Option<Spanned<RawNetwork>>,
    command: Option<Spanned<String>>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, Spanned<String>>,
    url: Option<Spanned<String>>,
    startup_timeout: Option<Spanned<RawTimeout>>,
    call_timeout: Option<Spanned<RawTimeout>>,
}

/// Whether `name` is a valid MCP server name: `[a-z0-9_-]+`, without `__` (which separates
/// the parts of a tool name `mcp__<server>__<tool>`).
pub fn valid_mcp_server_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains("__")
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Whether `value` is exactly a reference to an environment variable, `${NAME}`; its name.
pub fn env_reference(value: &str) -> Option<&str> {
    let name = value.strip_prefix("${")?.strip_suffix('}')?;
    let valid = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    valid.then_some(name)
}

/// One file's entries, checked, in file order (their sources are set by the merge).
pub(super) fn parse(
    raw: Vec<Spanned<RawMcpServer>>,
    spans: &Spans<'_>,
) -> Result<Vec<McpServerSpec>, SettingsError> {
    let mut servers: Vec<McpServerSpec> = Vec::new();
    for (index, server) in raw.into_iter().enumerate() {
        let start = server.span().start;
        let spec = mcp_server(index, server.into_inner(), start, spans)?;
        if servers.iter().any(|s| s.name == spec.name) {
            return Err(spans.invalid(
                start,
                format!(
                    "mcp_servers[{index}].name {:?} is used twice in this file",
                    spec.name
                ),
            ));
        }
        servers.push(spec);
    }
    Ok(servers)
}

/// Validates one `[[mcp_servers]]` entry (its source is set by the merge).
fn mcp_server(
    index: usize,
    raw: RawMcpServer,
    start: usize,
    spans: &Spans<'_>,
) -> Result<McpServerSpec, SettingsError> {
    let at = format!("mcp_servers[{index}]");
    let name = raw.name.get_ref().trim();
    if !valid_mcp_server_name(name) {
        return Err(spans.invalid(
            raw.name.span().start,
            format!("{at}.name {name:?} must be lowercase letters, digits, `_` and `-` (no `__`)"),
        ));
    }
    let transport = match (raw.command, raw.url) {
        (Some(command), None) => {
            if command.get_ref().trim().is_empty() {
                return Err(spans.invalid(
                    command.span().start,
                    format!("{at}.command must not be blank"),
                ));
            }
            let mut env = Vec::new();
            for (key, value) in raw.env {
                if key.is_empty() || key.contains('=') || key.contains('\0') {
                    return Err(spans.invalid(
                        value.span().start,
                        format!("{at}.env has an invalid variable name {key:?}"),
                    ));
                }
                env.push((key, value.into_inner()));
            }
            McpTransport::Stdio {
                command: command.into_inner(),
                args: raw.args,
                env,
            }
        }
        (None, Some(url)) => {
            let value = url.get_ref().trim();
            if !(value.starts_with("http://") || value.starts_with("https://")) || value.len() < 9 {
                return Err(spans.invalid(
                    url.span().start,
                    format!("{at}.url must be an http:// or https:// URL, not {value:?}"),
                ));
            }
            if !raw.args.is_empty() || !raw.env.is_empty() {
                return Err(spans.invalid(
                    url.span().start,
                    format!("{at}: `args` and `env` go with `command`, not with `url`"),
                ));
            }
            McpTransport::Http {
                url: value.to_owned(),
            }
        }
        (Some(_), Some(url)) => {
            return Err(spans.invalid(
                url.span().start,
                format!("{at} has both `command` and `url`: give exactly one"),
            ))
        }
        (None, None) => {
            return Err(spans.invalid(
                start,
                format!(
                    "{at} needs `command` (a stdio server) or `url` (a streamable HTTP server)"
                ),
            ))
        }
    };
    let timeout = |key: &str, raw: Option<Spanned<RawTimeout>>, default: Duration| match raw {
        None => Ok(default),
        Some(t) => hook_timeout(t.get_ref()).ok_or_else(|| {
            spans.invalid(
                t.span().start,
                format!(
                    "{at}.{key} must be 1 to 3600 seconds: an integer (30) or a string with a \
                     unit (\"30s\", \"2m\")"
                ),
            )
        }),
    };
    let stdio = matches!(transport, McpTransport::Stdio { .. });
    let only_stdio = |key: &str, start: usize| {
        spans.invalid(
            start,
            format!(
                "{at}.{key} confines a stdio server (`command`); an HTTP server runs elsewhere"
            ),
        )
    };
    let sandbox = match raw.sandbox {
        None => None,
        Some(mode) if !stdio => return Err(only_stdio("sandbox", mode.span().start)),
        Some(mode) => Some(
            mode.get_ref()
                .parse::<SandboxMode>()
                .map_err(|why| spans.invalid(mode.span().start, format!("{at}.sandbox: {why}")))?,
        ),
    };
    let network =
        match raw.network {
            None => None,
            Some(network) if !stdio => return Err(only_stdio("network", network.span().start)),
            Some(network) => Some(network_of(network.get_ref()).map_err(|why| {
                spans.invalid(network.span().start, format!("{at}.network {why}"))
            })?),
        };
    Ok(McpServerSpec {
        name: name.to_owned(),
        transport,
        sandbox,
        network,
        startup_timeout: timeout(
            "startup_timeout",
            raw.startup_timeout,
            DEFAULT_MCP_STARTUP_TIMEOUT,
        )?,
        call_timeout: timeout("call_timeout", raw.call_timeout, DEFAULT_MCP_CALL_TIMEOUT)?,
        source: Source::Default,
    })
}

/// Project entries first, then the user's; a name already taken is the project's.
pub(super) fn merge(layers: &Layers<'_, Vec<McpServerSpec>>) -> Vec<McpServerSpec> {
    let mut merged: Vec<McpServerSpec> = Vec::new();
    for (source, servers) in layers {
        for server in servers.iter() {
            if merged.iter().any(|s| s.name == server.name) {
                continue;
            }
            merged.push(McpServerSpec {
                source: (*source).clone(),
                ..server.clone()
            });
        }
    }
    merged
}

/// Takes a project's servers out: each starts a program or calls a server, so each waits for
/// trust (an entry's environment values go into the digest, never into what is shown).
pub(super) fn split_trust(servers: &mut Vec<McpServerSpec>, items: &mut Vec<TrustItem>) {
    for server in std::mem::take(servers) {
        let (shown, content) = match &server.transport {
            McpTransport::Stdio { command, args, env } => {
                let line = std::iter::once(command.as_str())
                    .chain(args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" ");
                let names: Vec<&str> = env.iter().map(|(name, _)| name.as_str()).collect();
                let with_env = if names.is_empty() {
                    String::new()
                } else {
                    format!(" (environment: {})", names.join(", "))
                };
                let confined = match (server.sandbox, server.network) {
                    (Some(SandboxMode::Off), _) => " unconfined".to_owned(),
                    (_, Some(network)) if network != Network::Off => {
                        format!(" with the network ({})", network.as_str())
                    }
                    _ => String::new(),
                };
                (
                    format!(
                        "runs MCP server {}{confined}: {line}{with_env}",
                        server.name
                    ),
                    format!(
                        "stdio\n{}\n{command}\n{args:?}\n{env:?}\n{:?}\n{:?}",
                        server.name, server.sandbox, server.network
                    ),
                )
            }
            McpTransport::Http { url } => (
                format!("calls MCP server {} at {url}", server.name),
                format!("http\n{}\n{url}", server.name),
            ),
        };
        items.push(needs_trust(TrustKind::McpServer, shown, content));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::section::testing::{load_err, workspace};
    use super::super::{Settings, SettingsErrorKind as Kind, Source};
    use super::*;

    #[test]
    fn mcp_servers_load_with_defaults_and_project_wins_by_name() {
        let dir = workspace(Some(
            "[[mcp_servers]]\nname = \"git-hub\"\ncommand = \"gh-mcp\"\nargs = [\"--stdio\"]\n\
             env = { GITHUB_TOKEN = \"${GITHUB_TOKEN}\", MODE = \"ro\" }\ncall_timeout = \"2m\"\n\
             [[mcp_servers]]\nname = \"web\"\nurl = \"http://127.0.0.1:9/mcp\"\n",
        ));
        let user = dir.path().join("user.toml");
        std::fs::write(
            &user,
            "[[mcp_servers]]\nname = \"web\"\nurl = \"https://example.com/mcp\"\n\
             [[mcp_servers]]\nname = \"mine\"\ncommand = \"x\"\n",
        )
        .unwrap();
        let s = Settings::load(dir.path(), Some(&user)).unwrap();
        let names: Vec<&str> = s.mcp_servers.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["git-hub", "web", "mine"]);
        let github = &s.mcp_servers[0];
        assert_eq!(
            github.transport,
            McpTransport::Stdio {
                command: "gh-mcp".into(),
                args: vec!["--stdio".into()],
                env: vec![
                    ("GITHUB_TOKEN".into(), "${GITHUB_TOKEN}".into()),
                    ("MODE".into(), "ro".into())
                ],
            }
        );
        assert_eq!(github.startup_timeout, DEFAULT_MCP_STARTUP_TIMEOUT);
        assert_eq!(github.call_timeout, Duration::from_secs(120));
        assert_eq!(
            s.mcp_servers[1].transport,
            McpTransport::Http {
                url: "http://127.0.0.1:9/mcp".into()
            }
        );
        assert_eq!(s.mcp_servers[2].source, Source::User(user));
    }

    #[test]
    fn bad_mcp_servers_are_refused_with_file_and_line() {
        for (text, line, needle) in [
            ("[[mcp_servers]]\nname = \"a\"\n", 1, "needs `command`"),
            (
                "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nurl = \"http://h/x\"\n",
                4,
                "both `command` and `url`",
            ),
            ("[[mcp_servers]]\nname = \"A b\"\ncommand = \"x\"\n", 2, "lowercase"),
            ("[[mcp_servers]]\nname = \"a__b\"\ncommand = \"x\"\n", 2, "no `__`"),
            ("[[mcp_servers]]\nname = \"a\"\nurl = \"ftp://h/x\"\n", 3, "http://"),
            (
                "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nstartup_timeout = 0\n",
                4,
                "startup_timeout",
            ),
            (
                "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\n[[mcp_servers]]\nname = \"a\"\ncommand = \"y\"\n",
                4,
                "used twice",
            ),
        ] {
            let err = load_err(text);
            assert_eq!((err.kind, err.line), (Kind::Invalid, Some(line)), "{text}: {err}");
            assert!(err.message.contains(needle), "{text}: {err}");
        }
        let err = load_err("[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nport = 1\n");
        assert_eq!((err.kind, err.line), (Kind::UnknownKey, Some(4)), "{err}");
    }

    #[test]
    fn mcp_env_takes_secrets_only_by_reference() {
        let err = load_err(
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nenv = { GITHUB_TOKEN = \"ghp_literal\" }\n",
        );
        assert_eq!((err.kind, err.line), (Kind::Secret, Some(4)), "{err}");
        assert!(err.message.contains("\"${GITHUB_TOKEN}\""), "{err}");
        assert!(!err.to_string().contains("ghp_literal"));
        let err = load_err("[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\ntoken = \"t\"\n");
        assert_eq!(err.kind, Kind::Secret, "{err}");
        assert_eq!(env_reference("${A_1}"), Some("A_1"));
        for bad in ["$A", "${}", "${1A}", "x${A}", "${A-B}"] {
            assert_eq!(env_reference(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_mcp_servers_own_sandbox_and_network_are_read_for_stdio_only() {
        let dir = workspace(Some(
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nsandbox = \"off\"\nnetwork = \"loopback\"\n",
        ));
        let s = Settings::load(dir.path(), None).unwrap();
        assert_eq!(s.mcp_servers[0].sandbox, Some(SandboxMode::Off));
        assert_eq!(s.mcp_servers[0].network, Some(Network::Loopback));
        let reviewed = Settings::load_reviewed(dir.path(), None).unwrap();
        assert!(
            reviewed.items[0]
                .shown
                .contains("runs MCP server a unconfined: x"),
            "{:?}",
            reviewed.items
        );
        for bad in [
            "[[mcp_servers]]\nname = \"a\"\nurl = \"http://h/mcp\"\nsandbox = \"off\"\n",
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nnetwork = \"wide\"\n",
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nsandbox = \"open\"\n",
        ] {
            assert_eq!(load_err(bad).kind, Kind::Invalid, "{bad}");
        }
    }
}
