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
use troupe::model::config::{process_env, EffectiveModel, ModelOverrides, Provider, ENV_FILE_NAME};
use troupe::settings::trust::{TrustKind, TrustState, TrustStore};
use troupe::settings::{store_url_shown, McpTransport, Settings, Sourced, PROJECT_FILE_NAME};

use crate::agent_setup::context_window_sourced;
use crate::args::{ModelFlags, StoreFlags};
use crate::error::CliError;
use crate::render;
use crate::store_choice::{effective_store, EffectiveStore};
use crate::trust::Loaded;

pub async fn config(
    workspace: &Path,
    flags: &ModelFlags,
    store_flags: &StoreFlags,
    json: bool,
) -> Result<(), CliError> {
    let loaded = crate::trust::load(workspace, crate::trust::Use::Show)?;
    let waiting = Waiting::of(&loaded);
    let (settings, dotenv) = (&loaded.settings, &loaded.dotenv);
    let env = process_env().map_err(|e| CliError::usage(e.to_string()))?;
    let overrides = ModelOverrides {
        provider: flags.provider,
        model: flags.model.clone(),
        base_url: flags.base_url.clone(),
        fallback_model: flags.fallback_model.clone(),
        ..ModelOverrides::default()
    };
    let effective = EffectiveModel::resolve(&env, dotenv, &overrides, &settings.model)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let context_window = context_window_sourced(flags, settings)?;
    let sandbox_mode = crate::sandboxing::mode(None, settings)?;
    let store = effective_store(store_flags, settings)?;
    // Until the person trusts the workspace, a run counts with the prices without its waiting
    // entries: those are shown as the prices that apply, the waiting ones beside them.
    let applying = if waiting.any() {
        Some(crate::trust::review(workspace, false)?.untrusted.prices)
    } else {
        None
    };
    if json {
        let mut value = to_json(settings, &effective, context_window.as_ref());
        value["trust"] = trust_json(workspace, &loaded);
        value["sandbox"] = sandbox_json(settings, &sandbox_mode);
        value["store"] = store_json(&store);
        value["team"] = team_json(settings);
        value["context"] = context_json(settings);
        value["prices"] = super::config_cost::prices_json(&settings.prices, applying.as_ref());
        value["run"] = super::config_cost::run_json(settings);
        value["approvals"] = super::config_approvals::approvals_json(settings);
        value["tasks"] = super::config_approvals::tasks_json(settings);
        value["retention"] = super::gc::config_json(&settings.retention);
        value["telemetry"] = crate::telemetry::config_json(settings);
        value["mcp_servers"] = mcp_json(settings);
        return render::print_json(&value);
    }
    let mut text = trust_text(workspace, &loaded);
    text.push_str(&to_text(settings, &effective, context_window.as_ref()));
    text.push_str(&sandbox_text(settings, &sandbox_mode));
    text.push_str(&store_text(&store));
    text.push_str(&team_text(settings));
    text.push_str(&context_text(settings));
    text.push_str(&super::config_cost::prices_text(
        &settings.prices,
        applying.as_ref(),
    ));
    text.push_str(&super::config_cost::run_text(settings));
    text.push_str(&super::config_approvals::approvals_text(settings));
    text.push_str(&super::config_approvals::tasks_text(settings));
    text.push_str(&super::gc::config_text(&settings.retention));
    text.push_str(&crate::telemetry::config_text(settings));
    text.push_str(&mcp_text(settings));
    render::print_text(&waiting.mark(&text))
}

/// The values of the text view that wait for trust, found by their rendered lines: each
/// trust-requiring item's value on a line of its section gets ` [waits for trust]`.
struct Waiting {
    /// (section heading, text in the line) of each waiting value.
    marks: Vec<(&'static str, String)>,
}

impl Waiting {
    fn of(loaded: &Loaded) -> Self {
        if loaded.applied && (loaded.by_flag || loaded.state.allows()) {
            return Self { marks: Vec::new() };
        }
        let marks = loaded
            .items
            .iter()
            .map(|item| {
                let section = match item.kind {
                    TrustKind::Hook => "[[hooks]]",
                    TrustKind::McpServer => "[[mcp_servers]]",
                    TrustKind::ModelServer | TrustKind::Provider | TrustKind::ApiKey => "[model]",
                    TrustKind::Store => "[store]",
                    TrustKind::GitRemote => "[team]",
                    TrustKind::Prices => "[prices]",
                    TrustKind::CostLimit => "[run]",
                    TrustKind::ApprovalRoute => "[approvals]",
                    TrustKind::Telemetry => "[telemetry]",
                    TrustKind::Retention => "[retention]",
                    TrustKind::Allow => "[permissions]",
                    TrustKind::SandboxMode | TrustKind::Network | TrustKind::UnconfinedHooks => {
                        "[sandbox]"
                    }
                };
                let needle = match item.kind {
                    TrustKind::Hook => format!("{:?}", hook_command(&item.content)),
                    TrustKind::McpServer => String::new(),
                    TrustKind::ModelServer | TrustKind::Provider | TrustKind::ApiKey
                        if item.file == ENV_FILE_NAME =>
                    {
                        format!("(.env {}", item.content.split('=').next().unwrap_or(""))
                    }
                    TrustKind::ModelServer
                    | TrustKind::Provider
                    | TrustKind::ApiKey
                    | TrustKind::Store
                    | TrustKind::GitRemote => {
                        format!("{:?}   (", item.content)
                    }
                    TrustKind::Allow => format!("allow  {:?}", item.content),
                    TrustKind::SandboxMode => "mode ".to_owned(),
                    TrustKind::Network => "network ".to_owned(),
                    TrustKind::Prices => format!(
                        "{:<16} = ",
                        item.content.split('\n').next().unwrap_or_default()
                    ),
                    TrustKind::UnconfinedHooks => "hooks ".to_owned(),
                    TrustKind::CostLimit => "max_cost ".to_owned(),
                    TrustKind::ApprovalRoute => "route ".to_owned(),
                    TrustKind::Telemetry | TrustKind::Retention => {
                        format!("{} ", item.content.split('=').next().unwrap_or_default())
                    }
                };
                (section, needle)
            })
            .collect();
        Self { marks }
    }

    /// Whether any value waits for trust.
    fn any(&self) -> bool {
        !self.marks.is_empty()
    }

    fn mark(&self, text: &str) -> String {
        if self.marks.is_empty() {
            return text.to_owned();
        }
        let mut section = "";
        let mut out = String::new();
        for line in text.lines() {
            if line.starts_with('[') {
                // A heading may say more after it: `[prices]   (USD per million tokens: …)`.
                section = line.split_whitespace().next().unwrap_or_default();
            }
            out.push_str(line);
            let waits = line.starts_with(' ') || line.starts_with('[') || section.is_empty();
            let from_project = line.contains(PROJECT_FILE_NAME) || line.contains("(.env ");
            if !waits
                && from_project
                && self.marks.iter().any(|(s, needle)| {
                    *s == section && (needle.is_empty() || line.contains(needle.as_str()))
                })
            {
                out.push_str("   [waits for trust]");
            }
            out.push('\n');
        }
        out
    }
}

/// A hook item's command (its content is `event\nmatcher\ncommand\ntimeout`).
fn hook_command(content: &str) -> &str {
    content
        .splitn(3, '\n')
        .nth(2)
        .and_then(|rest| rest.rsplit_once('\n'))
        .map_or("", |(c, _)| c)
}

/// The trust state: whether the workspace's trust-requiring values apply, and each of them.
fn trust_json(workspace: &Path, loaded: &Loaded) -> Value {
    let items: Vec<Value> = loaded
        .items
        .iter()
        .map(|i| json!({"file": i.file, "kind": i.kind.as_str(), "what": i.shown}))
        .collect();
    json!({
        "workspace": workspace.display().to_string(),
        "state": loaded.state.as_str(),
        "by_flag": loaded.by_flag,
        "applies": loaded.by_flag || loaded.state.allows(),
        "items": items,
        "record": TrustStore::user().map(|s| s.path().display().to_string()),
    })
}

fn trust_text(workspace: &Path, loaded: &Loaded) -> String {
    let mut out = String::from("trust:\n");
    let how = match (loaded.by_flag, loaded.state) {
        (_, TrustState::NotNeeded) => "nothing in troupe.toml or .env needs trust".to_owned(),
        (true, _) => "trusted for this command (--trust-workspace / TROUPE_TRUST_WORKSPACE)".into(),
        (false, TrustState::Trusted) => "trusted (troupe trust --revoke to undo)".into(),
        (false, TrustState::Changed) => "changed since you trusted it: the values marked \
             [waits for trust] apply once you trust it again (troupe trust)"
            .into(),
        (false, TrustState::Untrusted) => "not trusted: the values marked [waits for trust] \
             apply once you trust it (troupe trust)"
            .into(),
    };
    out.push_str(&format!("  {}: {how}\n", workspace.display()));
    if loaded.state != TrustState::NotNeeded && !(loaded.by_flag || loaded.state.allows()) {
        for item in &loaded.items {
            out.push_str(&format!("  {:<12} {}\n", item.file, item.shown));
        }
    }
    out.push('\n');
    out
}

/// `[sandbox]`: the mode (`TROUPE_SANDBOX` over the files; `--sandbox` of a run over both), the
/// network, the extra protected paths, whether hooks are confined.
fn sandbox_json(settings: &Settings, mode: &Sourced<troupe::sandbox::Mode>) -> Value {
    let network = crate::sandboxing::network(settings);
    json!({
        "mode": {"value": mode.value.as_str(), "source": mode.source.describe()},
        "network": {"value": network.value.as_str(), "source": network.source.describe()},
        "deny_read": settings.sandbox.deny_read,
        "deny_write": settings.sandbox.deny_write,
        "hooks": settings.sandbox.hooks.as_ref().is_some_and(|h| h.value),
    })
}

/// `[store]`: `url` null when it is the file store, or when it cannot be shown without its
/// password (`source` still says where it is set); `lease_ms` in milliseconds.
/// `[team]`: `isolation` (default `none`) and `remote` (default none: null) with their sources.
fn team_json(settings: &Settings) -> Value {
    let isolation = settings.team.isolation.as_ref();
    let remote = settings.team.remote.as_ref();
    json!({
        "isolation": {
            "value": isolation.map_or("none", |i| i.value.as_str()),
            "source": isolation.map_or_else(|| "default".to_owned(), |i| i.source.describe()),
        },
        "remote": {
            "value": remote.map(|r| r.value.as_str()),
            "source": remote.map_or_else(|| "default".to_owned(), |r| r.source.describe()),
        },
    })
}

/// `[context]`: the files every agent's prompt carries (default: `AGENTS.md`, else
/// `CLAUDE.md`), with their source. Content, not configuration: no trust needed.
fn context_json(settings: &Settings) -> Value {
    match &settings.context.files {
        Some(files) => json!({
            "files": files.value.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
            "source": files.source.describe(),
        }),
        None => json!({"files": ["AGENTS.md"], "fallback": "CLAUDE.md", "source": "default"}),
    }
}

fn context_text(settings: &Settings) -> String {
    let files = match &settings.context.files {
        Some(files) => format!(
            "{:?}   ({})",
            files
                .value
                .iter()
                .map(|f| f.path.as_str())
                .collect::<Vec<_>>(),
            files.source.describe()
        ),
        None => "[\"AGENTS.md\"]   (default; CLAUDE.md when there is none)".to_owned(),
    };
    format!("\n[context]\n{:<16} = {files}\n", "files")
}

fn team_text(settings: &Settings) -> String {
    let isolation = settings.team.isolation.as_ref();
    let remote = match settings.team.remote.as_ref() {
        Some(r) => format!("{:?}   ({})", r.value, r.source.describe()),
        None => "none   (default: branches stay in the clone that made them)".to_owned(),
    };
    format!(
        "\n[team]\n{:<16} = {:?}   ({})\n{:<16} = {remote}\n",
        "isolation",
        isolation.map_or("none", |i| i.value.as_str()),
        isolation.map_or_else(|| "default".to_owned(), |i| i.source.describe()),
        "remote",
    )
}

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
                "sandbox": server.sandbox.map(|m| m.as_str()),
                "network": server.network.map(|n| n.as_str()),
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
        "{:<16} = {:?}   (besides .git, troupe.toml, .env, .troupe/)\n",
        "deny_write", settings.sandbox.deny_write
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
            "script": sourced_json(settings.model.script.as_ref()),
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
    line(
        &mut out,
        "script",
        settings.model.script.as_ref(),
        "(none: a model server answers)",
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
