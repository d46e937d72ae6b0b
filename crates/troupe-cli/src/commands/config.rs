//! `troupe config [--json]`: the effective settings and where each value came from (SPEC §11),
//! and the loading of the settings files that `troupe run` and `troupe compact` do first.
//!
//! Precedence of the model values: flags > environment > `.env` > `troupe.toml` > the user's
//! `config.toml` > defaults. Rules are listed per list, project entries before user entries;
//! hooks project then user. `[store]` (where a team's stores are): `TROUPE_STORE_URL`,
//! `TROUPE_TEAM`, `TROUPE_LEASE` > `troupe.toml` > `config.toml` > defaults, as a command without
//! `--store` would use them. Reads only: creates no state (no `.troupe/`). The API key is never
//! shown, only where it is set; a store URL's password neither (`***` in its place).

use std::path::Path;

use serde_json::{json, Map, Value};
use troupe::model::config::{
    process_env, read_env_file, EffectiveModel, ModelOverrides, Provider, ENV_FILE_NAME,
};
use troupe::settings::{store_url_shown, user_config_path, McpTransport, Settings, Sourced};

use super::run::context_window_sourced;
use super::store::{effective_store, EffectiveStore};
use super::CliError;
use crate::args::{ModelFlags, StoreFlags};
use crate::render;

/// The workspace's `troupe.toml` and the user's `config.toml`, validated; a bad file is a usage
/// error (exit 2) naming the file and line.
pub fn load_settings(workspace: &Path) -> Result<Settings, CliError> {
    Settings::load(workspace, user_config_path().as_deref())
        .map_err(|e| CliError::Usage(format!("{e} [{}]", e.code())))
}

pub fn config(workspace: &Path, flags: &ModelFlags, json: bool) -> Result<(), CliError> {
    let settings = load_settings(workspace)?;
    let env = process_env().map_err(|e| CliError::Usage(e.to_string()))?;
    let dotenv = read_env_file(&workspace.join(ENV_FILE_NAME)).map_err(|e| CliError::failed(&e))?;
    let overrides = ModelOverrides {
        provider: flags.provider,
        model: flags.model.clone(),
        base_url: flags.base_url.clone(),
        fallback_model: flags.fallback_model.clone(),
        ..ModelOverrides::default()
    };
    let effective = EffectiveModel::resolve(&env, &dotenv, &overrides, &settings.model)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let context_window = context_window_sourced(flags, &settings)?;
    let sandbox_mode = crate::sandboxing::mode(None, &settings)?;
    let store = effective_store(&StoreFlags::default(), &settings)?;
    if json {
        let mut value = to_json(&settings, &effective, context_window.as_ref());
        value["sandbox"] = sandbox_json(&settings, &sandbox_mode);
        value["store"] = store_json(&store);
        value["mcp_servers"] = mcp_json(&settings);
        return render::print_json(&value);
    }
    let mut text = to_text(&settings, &effective, context_window.as_ref());
    text.push_str(&sandbox_text(&settings, &sandbox_mode));
    text.push_str(&store_text(&store));
    text.push_str(&mcp_text(&settings));
    render::print_text(&text)
}

/// `[sandbox]`: the mode (`TROUPE_SANDBOX` over the files; `--sandbox` of a run over both), the
/// network, the extra protected paths, whether hooks are confined.
fn sandbox_json(settings: &Settings, mode: &Sourced<troupe::sandbox::Mode>) -> Value {
    let network = crate::sandboxing::network(settings);
    json!({
        "mode": {"value": mode.value.as_str(), "source": mode.source.describe()},
        "network": {"value": network.value.as_str(), "source": network.source.describe()},
        "deny_read": settings.sandbox.deny_read,
        "hooks": settings.sandbox.hooks.as_ref().is_some_and(|h| h.value),
    })
}

/// `[store]`: `url` null when it is the file store, or when it cannot be shown without its
/// password (`source` still says where it is set); `lease_ms` in milliseconds.
fn store_json(store: &EffectiveStore) -> Value {
    let url = match &store.url {
        Some(url) => json!({"value": store_url_shown(&url.value), "source": url.source.describe()}),
        None => json!({"value": null, "source": null}),
    };
    json!({
        "url": url,
        "team": sourced_json(Some(&store.team)),
        "lease_ms": {
            "value": u64::try_from(store.lease.value.as_millis()).unwrap_or(u64::MAX),
            "source": store.lease.source.describe(),
        },
    })
}

fn store_text(store: &EffectiveStore) -> String {
    let mut out = String::from("\n[store]\n");
    match &store.url {
        Some(url) => {
            let shown = match store_url_shown(&url.value) {
                Some(shown) => format!("= {shown:?}"),
                None => "  (set, not shown: it may hold a password)".into(),
            };
            out.push_str(&format!(
                "{:<16} {shown}   ({})\n",
                "url",
                url.source.describe()
            ));
        }
        None => out.push_str(&format!(
            "{:<16}   (not set: the file store under .troupe/)\n",
            "url"
        )),
    }
    out.push_str(&format!(
        "{:<16} = {:?}   ({})\n",
        "team",
        store.team.value,
        store.team.source.describe()
    ));
    out.push_str(&format!(
        "{:<16} = {:?}   ({})\n",
        "lease",
        humantime::format_duration(store.lease.value).to_string(),
        store.lease.source.describe()
    ));
    out
}

/// `[[mcp_servers]]` as configured (`troupe mcp list` starts them to show their tools). The
/// values of `env` are not shown: only their names.
fn mcp_json(settings: &Settings) -> Value {
    let servers: Vec<Value> = settings
        .mcp_servers
        .iter()
        .map(|server| {
            let transport = match &server.transport {
                McpTransport::Stdio { command, args, env } => json!({
                    "kind": "stdio", "command": command, "args": args,
                    "env": env.iter().map(|(name, _)| name).collect::<Vec<_>>(),
                }),
                McpTransport::Http { url } => json!({"kind": "http", "url": url}),
            };
            json!({
                "name": server.name,
                "transport": transport,
                "startup_timeout_secs": server.startup_timeout.as_secs(),
                "call_timeout_secs": server.call_timeout.as_secs(),
                "source": server.source.describe(),
            })
        })
        .collect();
    Value::Array(servers)
}

fn mcp_text(settings: &Settings) -> String {
    let mut out = String::from("\n[[mcp_servers]]\n");
    if settings.mcp_servers.is_empty() {
        out.push_str("  (none)\n");
    }
    for server in &settings.mcp_servers {
        let what = match &server.transport {
            McpTransport::Stdio { command, args, .. } => format!("{command} {}", args.join(" "))
                .trim_end()
                .to_owned(),
            McpTransport::Http { url } => url.clone(),
        };
        out.push_str(&format!(
            "{:<16} {what:?}   ({})\n",
            server.name,
            server.source.describe()
        ));
    }
    out
}

fn sandbox_text(settings: &Settings, mode: &Sourced<troupe::sandbox::Mode>) -> String {
    let network = crate::sandboxing::network(settings);
    let mut out = String::from("\n[sandbox]\n");
    out.push_str(&format!(
        "{:<16} = {:?}   ({})\n",
        "mode",
        mode.value.as_str(),
        mode.source.describe()
    ));
    out.push_str(&format!(
        "{:<16} = {:?}   ({})\n",
        "network",
        network.value.as_str(),
        network.source.describe()
    ));
    out.push_str(&format!(
        "{:<16} = {:?}   (besides ~/.ssh, ~/.aws, ~/.gnupg, ~/.config/gcloud, .env)\n",
        "deny_read", settings.sandbox.deny_read
    ));
    out.push_str(&format!(
        "{:<16} = {}\n",
        "hooks",
        settings.sandbox.hooks.as_ref().is_some_and(|h| h.value)
    ));
    out
}

fn sourced_json<T: serde::Serialize>(value: Option<&Sourced<T>>) -> Value {
    match value {
        Some(s) => json!({"value": s.value, "source": s.source.describe()}),
        None => json!({"value": null, "source": null}),
    }
}

fn to_json(
    settings: &Settings,
    effective: &EffectiveModel,
    context_window: Option<&Sourced<u32>>,
) -> Value {
    let agents: Map<String, Value> = settings
        .model
        .agents
        .iter()
        .map(|(name, model)| (name.clone(), sourced_json(Some(model))))
        .collect();
    let rules: Vec<Value> = settings
        .rules
        .iter()
        .map(|r| {
            json!({"list": r.list.as_str(), "text": r.text, "source": r.source.describe(), "index": r.index})
        })
        .collect();
    let hooks: Vec<Value> = settings
        .hooks
        .iter()
        .map(|h| {
            json!({
                "event": h.event.as_str(), "matcher": h.matcher, "command": h.command,
                "timeout_secs": h.timeout.as_secs(), "source": h.source.describe(), "index": h.index,
            })
        })
        .collect();
    json!({
        "model": {
            "provider": {
                "value": effective.provider.value.as_str(),
                "source": effective.provider.source.describe(),
            },
            "model": sourced_json(effective.model.as_ref()),
            "base_url": sourced_json(effective.base_url.as_ref()),
            "api_version": sourced_json(effective.api_version.as_ref()),
            "fallback_model": sourced_json(effective.fallback_model.as_ref()),
            "context_window": sourced_json(context_window),
            "agents": agents,
            "api_key": {
                "set": effective.api_key_source.is_some(),
                "source": effective.api_key_source.as_ref().map(|s| s.describe()),
            },
        },
        "rules": rules,
        "hooks": hooks,
        "files": settings.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
    })
}

fn to_text(
    settings: &Settings,
    effective: &EffectiveModel,
    context_window: Option<&Sourced<u32>>,
) -> String {
    fn line<T: std::fmt::Debug>(
        out: &mut String,
        key: &str,
        value: Option<&Sourced<T>>,
        none: &str,
    ) {
        let text = match value {
            Some(s) => format!("{key:<16} = {:?}   ({})", s.value, s.source.describe()),
            None => format!("{key:<16}   {none}"),
        };
        out.push_str(text.trim_end());
        out.push('\n');
    }
    let mut out = String::new();
    out.push_str("files read:\n");
    if settings.files.is_empty() {
        out.push_str("  (none: no troupe.toml, no user config.toml)\n");
    }
    for file in &settings.files {
        out.push_str(&format!("  {}\n", file.display()));
    }
    out.push_str("\n[model]\n");
    let provider = effective.provider.value;
    line(
        &mut out,
        "provider",
        Some(&Sourced {
            value: provider.as_str(),
            source: effective.provider.source.clone(),
        }),
        "",
    );
    line(
        &mut out,
        "model",
        effective.model.as_ref(),
        &format!(
            "(not set: set {} or model in troupe.toml)",
            provider.model_var()
        ),
    );
    line(
        &mut out,
        "base_url",
        effective.base_url.as_ref(),
        "(not set: set AZURE_OPENAI_ENDPOINT or base_url in troupe.toml)",
    );
    if provider == Provider::Azure {
        line(
            &mut out,
            "api_version",
            effective.api_version.as_ref(),
            "(not set: set OPENAI_API_VERSION or api_version in troupe.toml)",
        );
    }
    line(
        &mut out,
        "fallback_model",
        effective.fallback_model.as_ref(),
        "(none)",
    );
    line(
        &mut out,
        "context_window",
        context_window,
        "(the built-in table for the model)",
    );
    match &effective.api_key_source {
        Some(source) => out.push_str(&format!(
            "{:<16}   (set)   ({})\n",
            "api_key",
            source.describe()
        )),
        None => out.push_str(&format!(
            "{:<16}   (not set: {} in the environment or .env)\n",
            "api_key",
            provider.api_key_vars().join(" or ")
        )),
    }
    for (name, model) in &settings.model.agents {
        line(&mut out, &format!("agents.{name}"), Some(model), "");
    }
    out.push_str("\n[permissions]\n");
    if settings.rules.is_empty() {
        out.push_str("  (no rules: the default policy decides)\n");
    }
    for rule in &settings.rules {
        out.push_str(&format!(
            "{:<6} {:?}   ({} {}[{}])\n",
            rule.list.as_str(),
            rule.text,
            rule.source.describe(),
            rule.list.as_str(),
            rule.index
        ));
    }
    out.push_str("\n[[hooks]]\n");
    if settings.hooks.is_empty() {
        out.push_str("  (none)\n");
    }
    for hook in &settings.hooks {
        out.push_str(&format!(
            "{:<16} {:<12} {:?}   timeout {}s   ({} hooks[{}])\n",
            hook.event.as_str(),
            hook.matcher.as_deref().unwrap_or("*"),
            hook.command,
            hook.timeout.as_secs(),
            hook.source.describe(),
            hook.index
        ));
    }
    out
}
