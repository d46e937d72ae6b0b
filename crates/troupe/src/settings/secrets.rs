//! The first pass over a settings file, on its untyped tree, before any section reads it: a key
//! that looks like a secret (`api_key`, `key`, `token`, `password`, `secret`, anywhere) is
//! refused with a hint — secrets stay in the environment or `.env` — rather than as an unknown
//! key. The one exception is an MCP server's `env`, where a secret-looking variable may name a
//! `${NAME}` reference ([`super::mcp`]).

use std::path::Path;

use super::error::{SettingsError, SettingsErrorKind as Kind};
use super::mcp::env_reference;
use super::section::line_of;

const SECRET_HINT: &str =
    "secrets stay in the environment or .env (OPENAI_API_KEY), not in troupe.toml";

/// Whether a key names a secret: a part (split at `_`, `-`, `.`) is `key`, `token`, `password`,
/// `secret`… (`api_key`, `OPENAI_API_KEY`, `auth-token`, `client_secret`).
pub fn looks_secret(key: &str) -> bool {
    const WORDS: [&str; 8] = [
        "key",
        "apikey",
        "token",
        "password",
        "passwd",
        "secret",
        "credential",
        "credentials",
    ];
    key.to_ascii_lowercase()
        .split(['_', '-', '.'])
        .any(|part| WORDS.contains(&part))
}

/// Refuses the first secret-looking key of `table` (and of the tables within it).
pub(super) fn check_secrets(
    path: &Path,
    text: &str,
    table: &toml::de::DeTable<'_>,
) -> Result<(), SettingsError> {
    for (key, value) in table {
        if key.get_ref() == "mcp_servers" {
            if let toml::de::DeValue::Array(servers) = value.get_ref() {
                for server in servers {
                    check_mcp_server_secrets(path, text, server.get_ref())?;
                }
                continue;
            }
        }
        if looks_secret(key.get_ref()) {
            return Err(SettingsError::new(
                Kind::Secret,
                path,
                Some(line_of(text, key.span().start)),
                format!("`{}` looks like a secret: {SECRET_HINT}", key.get_ref()),
            ));
        }
        check_secret_value(path, text, value.get_ref())?;
    }
    Ok(())
}

/// One `[[mcp_servers]]` table: like any table, except that its `env` may name a
/// secret-looking variable whose value is a `${NAME}` reference (see the module docs).
fn check_mcp_server_secrets(
    path: &Path,
    text: &str,
    server: &toml::de::DeValue<'_>,
) -> Result<(), SettingsError> {
    let toml::de::DeValue::Table(table) = server else {
        return check_secret_value(path, text, server);
    };
    for (key, value) in table {
        if key.get_ref() != "env" {
            if looks_secret(key.get_ref()) {
                return Err(SettingsError::new(
                    Kind::Secret,
                    path,
                    Some(line_of(text, key.span().start)),
                    format!("`{}` looks like a secret: {SECRET_HINT}", key.get_ref()),
                ));
            }
            check_secret_value(path, text, value.get_ref())?;
            continue;
        }
        let toml::de::DeValue::Table(env) = value.get_ref() else {
            continue;
        };
        for (name, value) in env {
            let referenced = matches!(
                value.get_ref(),
                toml::de::DeValue::String(s) if env_reference(s).is_some()
            );
            if looks_secret(name.get_ref()) && !referenced {
                return Err(SettingsError::new(
                    Kind::Secret,
                    path,
                    Some(line_of(text, name.span().start)),
                    format!(
                        "`{}` looks like a secret: write `{} = \"${{{}}}\"` to take it from \
                         troupe's environment when the server starts; {SECRET_HINT}",
                        name.get_ref(),
                        name.get_ref(),
                        name.get_ref()
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_secret_value(
    path: &Path,
    text: &str,
    value: &toml::de::DeValue<'_>,
) -> Result<(), SettingsError> {
    match value {
        toml::de::DeValue::Table(table) => check_secrets(path, text, table),
        toml::de::DeValue::Array(items) => {
            for item in items {
                check_secret_value(path, text, item.get_ref())?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::load_err;
    use super::super::SettingsErrorKind as Kind;

    #[test]
    fn secrets_are_refused_with_a_hint() {
        for text in [
            "[model]\napi_key = \"sk-1\"\n",
            "token = \"t\"\n",
            "[model]\nmodel = \"m\"\n[model.agents]\nOPENAI_API_KEY = \"sk\"\n",
            "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\npassword = \"p\"\n",
            "secret = 1\n",
            "key = \"k\"\n",
        ] {
            let err = load_err(text);
            assert_eq!(err.kind, Kind::Secret, "{text}: {err}");
            assert!(
                err.message
                    .contains("secrets stay in the environment or .env (OPENAI_API_KEY)"),
                "{err}"
            );
            assert!(err.line.is_some());
            assert!(!err.to_string().contains("sk-1"));
        }
    }
}
