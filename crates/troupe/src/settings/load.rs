//! Reading `troupe.toml` (project) and the user's `config.toml`, validating them into
//! [`Settings`], and merging them: project > user > defaults (flags and the environment are laid
//! on top by the CLI, see `model::config`).
//!
//! - A missing file is no settings; a file that is not a regular file (FIFO, socket, device,
//!   folder) or is over [`MAX_SETTINGS_FILE_BYTES`] is refused without blocking or reading it.
//!   The project file is opened with `O_NOFOLLOW` (a symlink is refused: the workspace may come
//!   from anyone); the user file may be a symlink (dotfile managers link it), it is the user's.
//! - Unknown keys, malformed TOML (duplicate keys included) and bad values are errors naming the
//!   file and line. A key that looks like a secret (`api_key`, `key`, `token`, `password`,
//!   `secret`, anywhere) is refused with a hint: secrets stay in the environment or `.env`.
//! - `[permissions]` entries are `name` or `name(arg)`: name `[a-z0-9_]+`, a non-empty argument,
//!   the `)` last. `[[hooks]]`: `event` one of `PreToolUse`, `PostToolUse`, `UserPromptSubmit`,
//!   `Stop`; a non-blank `command`; `timeout` 1 to 3600 seconds, an integer (`30`) or a string
//!   with units (`"30s"`, `"2m"`, `"1h"`, `"1m30s"`: `parse_duration`, the one reading of durations flags and variables use too), default 60 s. `[model]`: `model` and
//!   `fallback_model` and `api_version` non-blank, `provider` one of `openai`, `azure`,
//!   `anthropic`, `base_url` an `http://` or `https://` URL, `context_window` an
//!   integer of at least 1024 tokens; `[model.agents]` agent name = model name.
//! - Rules: project entries before user entries within each list, `index` the entry's position
//!   in its own file's list. Hooks: project then user. Model values: project over user; per-agent
//!   models by agent name, project over user.
//! - `[sandbox]`: `mode` one of `workspace-write`, `read-only`, `off`; `network` `true`, `false`
//!   or `"loopback"`; `deny_read` a list of non-blank paths (absolute, `~/…` or relative to the
//!   workspace); `hooks` a boolean (confine hook commands too). `mode`, `network` and `hooks`:
//!   project over user; `deny_read`: both files' entries, project first.
//! - `[store]`: where a team's stores are when no flag or environment variable says. `url` a
//!   PostgreSQL URL (`postgres://…` or `postgresql://…`) that carries no password: one in the
//!   user part, a `password` parameter or a key/value string is refused as a secret, without
//!   echoing it (the whole URL goes in `TROUPE_STORE_URL` instead); `team` 1 to 200 characters,
//!   not blank; `lease` like a hook's timeout, or in milliseconds (`"500ms"`), 300 ms to 1 h.
//!   Project over user, per key.
//! - `[[mcp_servers]]`: `name` (`[a-z0-9_-]+`, unique in its file) and exactly one of `command`
//!   (with optional `args`, a list of strings, and `env`, a table of strings) or `url` (`http://`
//!   or `https://`); `startup_timeout` (default 10 s) and `call_timeout` (default 60 s) like a
//!   hook's timeout; for a stdio server `sandbox` (a mode, default the run's) and `network`
//!   (like `[sandbox] network`, default off). Project entries first, then the user's; a name in both is the project's.
//! - Secrets in `mcp_servers.env`: a server often needs a token. A secret-looking variable name
//!   (`GITHUB_TOKEN`) is accepted there only when its value is a reference to troupe's own
//!   environment, exactly `"${NAME}"`, expanded when the server starts; a literal value under a
//!   secret-looking name is refused like any other secret. So the file names the variable, the
//!   value stays in the environment.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::error::{SettingsError, SettingsErrorKind as Kind};
use super::trust::{TrustItem, TrustKind};
use super::{
    HookEvent, HookSpec, McpServerSpec, McpTransport, ModelSettings, RuleEntry, RuleList, Settings,
    Source, Sourced, DEFAULT_HOOK_TIMEOUT, DEFAULT_MCP_CALL_TIMEOUT, DEFAULT_MCP_STARTUP_TIMEOUT,
};
use super::{SandboxSettings, StoreSettings};
use crate::sandbox::{Mode as SandboxMode, Network};
use crate::store::is_postgres_url;
use crate::store::read::{open_regular, Links};

/// The project settings file, at the workspace root.
pub const PROJECT_FILE_NAME: &str = "troupe.toml";
/// A settings file larger than this is refused (they hold a screenful of keys).
pub const MAX_SETTINGS_FILE_BYTES: u64 = 1024 * 1024;
/// The longest a hook may be given.
pub const MAX_HOOK_TIMEOUT: Duration = Duration::from_secs(3600);
/// The values `[model] provider` may take (`model::config::Provider` names them the same).
pub const PROVIDERS: [&str; 3] = ["openai", "azure", "anthropic"];
/// The smallest context window a setting may give (as `--context-window`).
pub const MIN_CONTEXT_WINDOW: u32 = 1024;
/// The longest team key, in characters (as `--team`).
pub const MAX_TEAM_CHARS: usize = 200;
/// The shortest teammate lease (as `TROUPE_LEASE`): a heartbeat every third of it has to keep up.
pub const MIN_STORE_LEASE: Duration = Duration::from_millis(300);
/// The longest lease a settings file may give: a takeover waits that long for a dead worker.
pub const MAX_STORE_LEASE: Duration = Duration::from_secs(3600);

const SECRET_HINT: &str =
    "secrets stay in the environment or .env (OPENAI_API_KEY), not in troupe.toml";
/// Why `[store] url` may not carry a password. PostgreSQL's `PGPASSWORD` and `~/.pgpass` are not
/// named: tokio-postgres reads neither, so troupe's only place for the password is the URL.
const STORE_PASSWORD_HINT: &str = "`store.url` carries a password: a password never goes in a \
     settings file, which may be committed; give the whole URL in TROUPE_STORE_URL instead (troupe \
     takes it out of its environment at start, so no command an agent runs sees it)";
/// What `[store] url` must look like.
const STORE_URL_FORM: &str = "a PostgreSQL URL (postgres://user@host:port/database)";

/// `$XDG_CONFIG_HOME/troupe/config.toml`, else `$HOME/.config/troupe/config.toml`; none when
/// neither variable is set to an absolute path.
pub fn user_config_path() -> Option<PathBuf> {
    user_config_path_from(
        std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

fn user_config_path_from(xdg: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    let base = match xdg.filter(|p| p.is_absolute()) {
        Some(xdg) => xdg,
        None => home.filter(|p| p.is_absolute())?.join(".config"),
    };
    Some(base.join("troupe").join("config.toml"))
}

/// A workspace's settings read once, both ways: with its own trust-requiring values and without
/// them (see [`super::trust`]).
#[derive(Debug, Clone)]
pub struct Reviewed {
    /// Every value of both files: what applies once the workspace is trusted.
    pub trusted: Settings,
    /// The project file's trust-requiring values left out (the user's own still apply, in their
    /// place where both set one): what applies to an untrusted workspace.
    pub untrusted: Settings,
    /// The project file's trust-requiring values, in file order.
    pub items: Vec<TrustItem>,
}

impl Settings {
    /// Reads `<workspace>/troupe.toml` and `user_config` (when given), validates and merges them.
    pub fn load(workspace: &Path, user_config: Option<&Path>) -> Result<Settings, SettingsError> {
        Ok(Self::load_reviewed(workspace, user_config)?.trusted)
    }

    /// [`Settings::load`], with the project file's trust-requiring values set apart.
    pub fn load_reviewed(
        workspace: &Path,
        user_config: Option<&Path>,
    ) -> Result<Reviewed, SettingsError> {
        let project_path = workspace.join(PROJECT_FILE_NAME);
        let mut layers: Vec<(PathBuf, Source, ParsedFile)> = Vec::new();
        let mut items = Vec::new();
        let mut tightened = None;
        if let Some(text) = read_file(&project_path, false)? {
            let file = parse(&project_path, &text)?;
            let (tight, found) = split_trust(file.clone());
            items = found;
            tightened = Some(tight);
            layers.push((project_path.clone(), Source::Project(project_path), file));
        }
        if let Some(path) = user_config {
            if let Some(text) = read_file(path, true)? {
                let file = parse(path, &text)?;
                layers.push((path.to_path_buf(), Source::User(path.to_path_buf()), file));
            }
        }
        let mut untrusted_layers = layers.clone();
        if let Some(mut tight) = tightened {
            // The project's mode may tighten the user's, not loosen it: `workspace-write` (the
            // default) over a user's `read-only` needs trust too.
            let user_mode = untrusted_layers.get(1).and_then(|(_, _, f)| f.sandbox_mode);
            if let (Some(project), Some(user)) = (tight.sandbox_mode, user_mode) {
                if strictness(user) > strictness(project) {
                    tight.sandbox_mode = None;
                    items.push(TrustItem::new(
                        PROJECT_FILE_NAME,
                        TrustKind::SandboxMode,
                        format!(
                            "runs commands under {} instead of your {} ([sandbox] mode)",
                            project.as_str(),
                            user.as_str()
                        ),
                        project.as_str().into(),
                    ));
                }
            }
            if let Some(first) = untrusted_layers.first_mut() {
                first.2 = tight;
            }
        }
        Ok(Reviewed {
            trusted: merge(layers),
            untrusted: merge(untrusted_layers),
            items,
        })
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

/// Takes a project file's trust-requiring values out of it: the file that is left may only
/// tighten, and each value taken is one [`TrustItem`] (file order within each kind).
fn split_trust(mut file: ParsedFile) -> (ParsedFile, Vec<TrustItem>) {
    let item = |kind, shown: String, content: String| {
        TrustItem::new(PROJECT_FILE_NAME, kind, shown, content)
    };
    let mut items = Vec::new();
    for hook in std::mem::take(&mut file.hooks) {
        let matcher = hook.matcher.as_deref().unwrap_or("*");
        items.push(item(
            TrustKind::Hook,
            format!(
                "runs hook {} ({matcher}): {}",
                hook.event.as_str(),
                hook.command
            ),
            format!(
                "{}\n{matcher}\n{}\n{}",
                hook.event.as_str(),
                hook.command,
                hook.timeout.as_millis()
            ),
        ));
    }
    for server in std::mem::take(&mut file.mcp_servers) {
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
        items.push(item(TrustKind::McpServer, shown, content));
    }
    if file.sandbox_hooks == Some(false) {
        file.sandbox_hooks = None;
        items.push(item(
            TrustKind::UnconfinedHooks,
            "runs hook commands unconfined ([sandbox] hooks = false)".into(),
            "false".into(),
        ));
    }
    if let Some(url) = file.base_url.take() {
        items.push(item(
            TrustKind::ModelServer,
            format!("sends your API key to {url} ([model] base_url)"),
            url,
        ));
    }
    if let Some(provider) = file.provider.take() {
        items.push(item(
            TrustKind::Provider,
            format!("chooses the provider {provider} ([model] provider)"),
            provider,
        ));
    }
    if let Some(url) = file.store_url.take() {
        items.push(item(
            TrustKind::Store,
            format!("keeps the team's state in {url} ([store] url)"),
            url,
        ));
    }
    for rule in std::mem::take(&mut file.allow) {
        items.push(item(
            TrustKind::Allow,
            format!("allows {rule} without asking ([permissions] allow)"),
            rule,
        ));
    }
    if file.sandbox_mode == Some(SandboxMode::Off) {
        file.sandbox_mode = None;
        items.push(item(
            TrustKind::SandboxMode,
            "runs commands unconfined ([sandbox] mode = \"off\")".into(),
            "off".into(),
        ));
    }
    if let Some(network) = file.sandbox_network.filter(|n| *n != Network::Off) {
        file.sandbox_network = None;
        items.push(item(
            TrustKind::Network,
            format!(
                "gives commands the network: {} ([sandbox] network)",
                network.as_str()
            ),
            network.as_str().into(),
        ));
    }
    (file, items)
}

/// Merges parsed files, highest precedence first.
fn merge(layers: Vec<(PathBuf, Source, ParsedFile)>) -> Settings {
    fn first<T: Clone>(
        layers: &[(PathBuf, Source, ParsedFile)],
        get: impl Fn(&ParsedFile) -> Option<T>,
    ) -> Option<Sourced<T>> {
        layers.iter().find_map(|(_, source, file)| {
            get(file).map(|value| Sourced {
                value,
                source: source.clone(),
            })
        })
    }
    let mut agents: BTreeMap<String, Sourced<String>> = BTreeMap::new();
    for (_, source, file) in layers.iter().rev() {
        for (name, model) in &file.agents {
            agents.insert(
                name.clone(),
                Sourced {
                    value: model.clone(),
                    source: source.clone(),
                },
            );
        }
    }
    let model = ModelSettings {
        provider: first(&layers, |f| f.provider.clone()),
        api_version: first(&layers, |f| f.api_version.clone()),
        model: first(&layers, |f| f.model.clone()),
        base_url: first(&layers, |f| f.base_url.clone()),
        fallback_model: first(&layers, |f| f.fallback_model.clone()),
        context_window: first(&layers, |f| f.context_window),
        agents: agents.into_iter().collect(),
    };
    let mut rules = Vec::new();
    for list in [RuleList::Deny, RuleList::Ask, RuleList::Allow] {
        for (_, source, file) in &layers {
            let entries = match list {
                RuleList::Deny => &file.deny,
                RuleList::Ask => &file.ask,
                RuleList::Allow => &file.allow,
            };
            rules.extend(entries.iter().enumerate().map(|(index, text)| RuleEntry {
                list,
                text: text.clone(),
                source: source.clone(),
                index,
            }));
        }
    }
    let mut hooks = Vec::new();
    for (_, source, file) in &layers {
        hooks.extend(file.hooks.iter().enumerate().map(|(index, hook)| HookSpec {
            event: hook.event,
            matcher: hook.matcher.clone(),
            command: hook.command.clone(),
            timeout: hook.timeout,
            source: source.clone(),
            index,
        }));
    }
    let mut deny_read = Vec::new();
    for (_, _, file) in &layers {
        deny_read.extend(file.sandbox_deny_read.iter().cloned());
    }
    let sandbox = SandboxSettings {
        mode: first(&layers, |f| f.sandbox_mode),
        network: first(&layers, |f| f.sandbox_network),
        deny_read,
        hooks: first(&layers, |f| f.sandbox_hooks),
    };
    let store = StoreSettings {
        url: first(&layers, |f| f.store_url.clone()),
        team: first(&layers, |f| f.store_team.clone()),
        lease: first(&layers, |f| f.store_lease),
    };
    let mut mcp_servers: Vec<McpServerSpec> = Vec::new();
    for (_, source, file) in &layers {
        for server in &file.mcp_servers {
            if mcp_servers.iter().any(|s| s.name == server.name) {
                continue;
            }
            mcp_servers.push(McpServerSpec {
                source: source.clone(),
                ..server.clone()
            });
        }
    }
    Settings {
        model,
        rules,
        hooks,
        sandbox,
        store,
        mcp_servers,
        files: layers.into_iter().map(|(path, _, _)| path).collect(),
    }
}

/// One file, validated.
#[derive(Debug, Default, Clone)]
struct ParsedFile {
    provider: Option<String>,
    api_version: Option<String>,
    model: Option<String>,
    base_url: Option<String>,
    fallback_model: Option<String>,
    context_window: Option<u32>,
    agents: Vec<(String, String)>,
    deny: Vec<String>,
    ask: Vec<String>,
    allow: Vec<String>,
    hooks: Vec<ParsedHook>,
    sandbox_mode: Option<SandboxMode>,
    sandbox_network: Option<Network>,
    sandbox_deny_read: Vec<String>,
    sandbox_hooks: Option<bool>,
    store_url: Option<String>,
    store_team: Option<String>,
    store_lease: Option<Duration>,
    mcp_servers: Vec<McpServerSpec>,
}

#[derive(Debug, Clone)]
struct ParsedHook {
    event: HookEvent,
    matcher: Option<String>,
    command: String,
    timeout: Duration,
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
    mcp_servers: Vec<Spanned<RawMcpServer>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStore {
    url: Option<Spanned<String>>,
    team: Option<Spanned<String>>,
    lease: Option<Spanned<RawTimeout>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMcpServer {
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

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    mode: Option<Spanned<String>>,
    network: Option<Spanned<RawNetwork>>,
    #[serde(default)]
    deny_read: Vec<Spanned<String>>,
    hooks: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawNetwork {
    Flag(bool),
    Text(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    provider: Option<Spanned<String>>,
    api_version: Option<Spanned<String>>,
    model: Option<Spanned<String>>,
    base_url: Option<Spanned<String>>,
    fallback_model: Option<Spanned<String>>,
    context_window: Option<Spanned<i64>>,
    #[serde(default)]
    agents: BTreeMap<String, Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPermissions {
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    ask: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHook {
    event: Spanned<String>,
    matcher: Option<Spanned<String>>,
    command: Spanned<String>,
    timeout: Option<Spanned<RawTimeout>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawTimeout {
    Seconds(i64),
    Text(String),
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .unwrap_or(text)
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// Validates one file's text.
fn parse(path: &Path, text: &str) -> Result<ParsedFile, SettingsError> {
    let at = |offset: usize| Some(line_of(text, offset));
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
        let message = err.message().trim().to_owned();
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
    let invalid = |offset: usize, message: String| {
        SettingsError::new(Kind::Invalid, path, at(offset), message)
    };
    let non_blank =
        |key: &str, value: Option<Spanned<String>>| -> Result<Option<String>, SettingsError> {
            match value {
                Some(v) if v.get_ref().trim().is_empty() => Err(invalid(
                    v.span().start,
                    format!("`{key}` must not be blank"),
                )),
                Some(v) => Ok(Some(v.into_inner().trim().to_owned())),
                None => Ok(None),
            }
        };
    let mut file = ParsedFile {
        model: non_blank("model.model", raw.model.model)?,
        fallback_model: non_blank("model.fallback_model", raw.model.fallback_model)?,
        api_version: non_blank("model.api_version", raw.model.api_version)?,
        ..ParsedFile::default()
    };
    if let Some(provider) = raw.model.provider {
        let value = provider.get_ref().trim();
        if !PROVIDERS.contains(&value) {
            return Err(invalid(
                provider.span().start,
                format!(
                    "`model.provider` must be one of {}, not {value:?}",
                    PROVIDERS.join(", ")
                ),
            ));
        }
        file.provider = Some(value.to_owned());
    }
    if let Some(url) = raw.model.base_url {
        let value = url.get_ref().trim();
        if !(value.starts_with("http://") || value.starts_with("https://")) || value.len() < 9 {
            return Err(invalid(
                url.span().start,
                format!("`model.base_url` must be an http:// or https:// URL, not {value:?}"),
            ));
        }
        file.base_url = Some(value.to_owned());
    }
    if let Some(window) = raw.model.context_window {
        let value = *window.get_ref();
        let tokens = u32::try_from(value)
            .ok()
            .filter(|&t| t >= MIN_CONTEXT_WINDOW)
            .ok_or_else(|| {
                invalid(
                    window.span().start,
                    format!(
                        "`model.context_window` must be a number of tokens from \
                         {MIN_CONTEXT_WINDOW} to {}, not {value}",
                        u32::MAX
                    ),
                )
            })?;
        file.context_window = Some(tokens);
    }
    for (name, model) in raw.model.agents {
        if model.get_ref().trim().is_empty() {
            return Err(invalid(
                model.span().start,
                format!("`model.agents.{name}` must not be blank"),
            ));
        }
        file.agents
            .push((name, model.into_inner().trim().to_owned()));
    }
    for (list, entries, out) in [
        ("allow", raw.permissions.allow, &mut file.allow),
        ("ask", raw.permissions.ask, &mut file.ask),
        ("deny", raw.permissions.deny, &mut file.deny),
    ] {
        for (index, entry) in entries.into_iter().enumerate() {
            check_rule(entry.get_ref()).map_err(|why| {
                invalid(
                    entry.span().start,
                    format!("permissions.{list}[{index}] {:?}: {why}", entry.get_ref()),
                )
            })?;
            out.push(entry.into_inner());
        }
    }
    for (index, hook) in raw.hooks.into_iter().enumerate() {
        let hook = hook.into_inner();
        let event = match hook.event.get_ref().as_str() {
            "PreToolUse" => HookEvent::PreToolUse,
            "PostToolUse" => HookEvent::PostToolUse,
            "UserPromptSubmit" => HookEvent::UserPromptSubmit,
            "Stop" => HookEvent::Stop,
            other => {
                return Err(invalid(
                    hook.event.span().start,
                    format!(
                        "hooks[{index}].event {other:?} is not one of PreToolUse, PostToolUse, \
                         UserPromptSubmit, Stop"
                    ),
                ))
            }
        };
        if hook.command.get_ref().trim().is_empty() {
            return Err(invalid(
                hook.command.span().start,
                format!("hooks[{index}].command must not be blank"),
            ));
        }
        let matcher = match hook.matcher {
            Some(m) if m.get_ref().trim().is_empty() => {
                return Err(invalid(
                    m.span().start,
                    format!(
                    "hooks[{index}].matcher must not be blank (leave it out to match every call)"
                ),
                ))
            }
            Some(m) => {
                check_rule(m.get_ref()).map_err(|why| {
                    invalid(
                        m.span().start,
                        format!("hooks[{index}].matcher {:?}: {why}", m.get_ref()),
                    )
                })?;
                Some(m.into_inner())
            }
            None => None,
        };
        let timeout = match hook.timeout {
            None => DEFAULT_HOOK_TIMEOUT,
            Some(t) => hook_timeout(t.get_ref()).ok_or_else(|| {
                invalid(
                    t.span().start,
                    format!(
                        "hooks[{index}].timeout must be 1 to 3600 seconds: an integer (30) or \
                         a string with a unit (\"30s\", \"2m\")"
                    ),
                )
            })?,
        };
        file.hooks.push(ParsedHook {
            event,
            matcher,
            command: hook.command.into_inner(),
            timeout,
        });
    }
    if let Some(mode) = raw.sandbox.mode {
        file.sandbox_mode = Some(
            mode.get_ref()
                .parse::<SandboxMode>()
                .map_err(|why| invalid(mode.span().start, format!("sandbox.mode: {why}")))?,
        );
    }
    if let Some(network) = raw.sandbox.network {
        file.sandbox_network = Some(
            network_of(network.get_ref())
                .map_err(|why| invalid(network.span().start, format!("sandbox.network {why}")))?,
        );
    }
    for (index, path) in raw.sandbox.deny_read.into_iter().enumerate() {
        if path.get_ref().trim().is_empty() {
            return Err(invalid(
                path.span().start,
                format!("sandbox.deny_read[{index}] must not be blank"),
            ));
        }
        file.sandbox_deny_read.push(path.into_inner());
    }
    file.sandbox_hooks = raw.sandbox.hooks;
    if let Some(url) = raw.store.url {
        file.store_url =
            Some(store_url(url.get_ref()).map_err(|(kind, why)| {
                SettingsError::new(kind, path, at(url.span().start), why)
            })?);
    }
    if let Some(team) = raw.store.team {
        let value = team.get_ref().trim();
        if value.is_empty() || value.chars().count() > MAX_TEAM_CHARS {
            return Err(invalid(
                team.span().start,
                format!("`store.team` must be 1 to {MAX_TEAM_CHARS} characters, not blank"),
            ));
        }
        file.store_team = Some(value.to_owned());
    }
    if let Some(lease) = raw.store.lease {
        file.store_lease = Some(
            duration_of(lease.get_ref(), true)
                .filter(|l| (MIN_STORE_LEASE..=MAX_STORE_LEASE).contains(l))
                .ok_or_else(|| {
                    invalid(
                        lease.span().start,
                        format!("`store.lease` must be {LEASE_FORM}"),
                    )
                })?,
        );
    }
    for (index, server) in raw.mcp_servers.into_iter().enumerate() {
        let start = server.span().start;
        let spec = mcp_server(index, server.into_inner(), start, &invalid)?;
        if file.mcp_servers.iter().any(|s| s.name == spec.name) {
            return Err(invalid(
                start,
                format!(
                    "mcp_servers[{index}].name {:?} is used twice in this file",
                    spec.name
                ),
            ));
        }
        file.mcp_servers.push(spec);
    }
    Ok(file)
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

/// Validates one `[[mcp_servers]]` entry (its source is set by the merge).
fn mcp_server(
    index: usize,
    raw: RawMcpServer,
    start: usize,
    invalid: &dyn Fn(usize, String) -> SettingsError,
) -> Result<McpServerSpec, SettingsError> {
    let at = format!("mcp_servers[{index}]");
    let name = raw.name.get_ref().trim();
    if !valid_mcp_server_name(name) {
        return Err(invalid(
            raw.name.span().start,
            format!("{at}.name {name:?} must be lowercase letters, digits, `_` and `-` (no `__`)"),
        ));
    }
    let transport = match (raw.command, raw.url) {
        (Some(command), None) => {
            if command.get_ref().trim().is_empty() {
                return Err(invalid(
                    command.span().start,
                    format!("{at}.command must not be blank"),
                ));
            }
            let mut env = Vec::new();
            for (key, value) in raw.env {
                if key.is_empty() || key.contains('=') || key.contains('\0') {
                    return Err(invalid(
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
                return Err(invalid(
                    url.span().start,
                    format!("{at}.url must be an http:// or https:// URL, not {value:?}"),
                ));
            }
            if !raw.args.is_empty() || !raw.env.is_empty() {
                return Err(invalid(
                    url.span().start,
                    format!("{at}: `args` and `env` go with `command`, not with `url`"),
                ));
            }
            McpTransport::Http {
                url: value.to_owned(),
            }
        }
        (Some(_), Some(url)) => {
            return Err(invalid(
                url.span().start,
                format!("{at} has both `command` and `url`: give exactly one"),
            ))
        }
        (None, None) => {
            return Err(invalid(
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
            invalid(
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
        invalid(
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
                .map_err(|why| invalid(mode.span().start, format!("{at}.sandbox: {why}")))?,
        ),
    };
    let network = match raw.network {
        None => None,
        Some(network) if !stdio => return Err(only_stdio("network", network.span().start)),
        Some(network) => Some(
            network_of(network.get_ref())
                .map_err(|why| invalid(network.span().start, format!("{at}.network {why}")))?,
        ),
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

/// `true`, `false` or `"loopback"`.
fn network_of(raw: &RawNetwork) -> Result<Network, String> {
    match raw {
        RawNetwork::Flag(true) => Ok(Network::On),
        RawNetwork::Flag(false) => Ok(Network::Off),
        RawNetwork::Text(t) if t == "loopback" => Ok(Network::Loopback),
        RawNetwork::Text(t) => Err(format!("must be true, false or \"loopback\", not {t:?}")),
    }
}

/// Whether `value` is exactly a reference to an environment variable, `${NAME}`; its name.
pub fn env_reference(value: &str) -> Option<&str> {
    let name = value.strip_prefix("${")?.strip_suffix('}')?;
    let valid = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    valid.then_some(name)
}

/// The key of serde's "unknown field `x`, expected …" message.
fn unknown_key(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

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

fn check_secrets(
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

/// A rule entry or matcher: `name` or `name(arg)`, name `[a-z0-9_]+`, arg non-empty, `)` last.
pub fn check_rule(text: &str) -> Result<(), String> {
    let (name, arg) = match text.find('(') {
        Some(open) => {
            let Some(arg) = text[open + 1..].strip_suffix(')') else {
                return Err("the argument must end with `)` at the end of the entry".into());
            };
            (&text[..open], Some(arg))
        }
        None => (text, None),
    };
    if name.is_empty() {
        return Err("the tool name is missing".into());
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(format!(
            "the tool name {name:?} must be lowercase letters, digits and `_`"
        ));
    }
    if let Some(arg) = arg {
        if arg.trim().is_empty() {
            return Err("the argument in `( )` must not be empty (leave out the parentheses to match every call)".into());
        }
    }
    Ok(())
}

/// `30` or `"30s"` / `"2m"` / `"1h"`, 1 to 3600 seconds.
fn hook_timeout(raw: &RawTimeout) -> Option<Duration> {
    duration_of(raw, false)
        .filter(|timeout| (Duration::from_secs(1)..=MAX_HOOK_TIMEOUT).contains(timeout))
}

/// An integer of seconds (`30`) or a string [`parse_duration`] reads (`"30s"`, `"2m"`,
/// `"1h30m"`, and parts of a second only when `millis`); the caller checks the range.
fn duration_of(raw: &RawTimeout, millis: bool) -> Option<Duration> {
    match raw {
        RawTimeout::Seconds(secs) => u64::try_from(*secs).ok().map(Duration::from_secs),
        RawTimeout::Text(text) => parse_duration(text).filter(|d| millis || d.subsec_nanos() == 0),
    }
}

/// troupe's one reading of a duration, for settings files, flags and variables alike: plain
/// seconds (`90`), or humantime's units, compound forms too (`90s`, `5m`, `1h30m`, `1h 30m`,
/// `1.5h`, `250ms`); never zero.
pub fn parse_duration(raw: &str) -> Option<Duration> {
    let raw = raw.trim();
    let parsed = if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) {
        raw.parse().ok().map(Duration::from_secs)
    } else {
        humantime::parse_duration(raw).ok()
    };
    parsed.filter(|d| !d.is_zero())
}

/// What a lease may be, said the same way for `[store] lease` and `TROUPE_LEASE`.
pub const LEASE_FORM: &str = "300ms to 1h: an integer of seconds (10) or a duration with units \
     (\"500ms\", \"10s\", \"2m\", \"1h30m\")";

/// A lease within [`MIN_STORE_LEASE`]..=[`MAX_STORE_LEASE`], read by [`parse_duration`].
pub fn parse_lease(raw: &str) -> Option<Duration> {
    parse_duration(raw).filter(|l| (MIN_STORE_LEASE..=MAX_STORE_LEASE).contains(l))
}

/// Checks `[store] url` (see the module docs): the URL, trimmed, or why not. The password check
/// comes first and uses PostgreSQL's own parsing, so that every way of writing one (the user
/// part, `?password=`, a key/value string) is caught; no message repeats the value.
fn store_url(raw: &str) -> Result<String, (Kind, String)> {
    let url = raw.trim();
    if url.is_empty() {
        return Err((Kind::Invalid, "`store.url` must not be blank".into()));
    }
    match url.parse::<tokio_postgres::Config>() {
        Ok(config) if config.get_password().is_some() => {
            Err((Kind::Secret, STORE_PASSWORD_HINT.into()))
        }
        Ok(_) if is_postgres_url(url) => Ok(url.to_owned()),
        Err(e) if is_postgres_url(url) => Err((
            Kind::Invalid,
            format!("`store.url` must be {STORE_URL_FORM}: {e}"),
        )),
        Ok(_) | Err(_) => Err((
            Kind::Invalid,
            format!("`store.url` must be {STORE_URL_FORM}"),
        )),
    }
}

/// A store URL as `troupe config` may print it (from any source: `TROUPE_STORE_URL` may carry a
/// password): the password of the user part or of a `password=` parameter replaced by `***`.
/// None when it cannot be shown safely (not parseable, a percent-encoded parameter name, a
/// key/value string with a password).
pub fn store_url_shown(url: &str) -> Option<String> {
    let password_of = |url: &str| {
        url.parse::<tokio_postgres::Config>()
            .map(|c| c.get_password().map(<[u8]>::to_vec))
    };
    match password_of(url) {
        Ok(None) => return Some(url.to_owned()),
        Ok(Some(_)) if is_postgres_url(url) => {}
        Ok(Some(_)) | Err(_) => return None,
    }
    let (scheme, rest) = url.split_once("://")?;
    // As tokio-postgres reads it: the credentials end at the first `@`, the password starts
    // after their first `:`.
    let (credentials, rest) = match rest.split_once('@') {
        Some((credentials, rest)) => match credentials.split_once(':') {
            Some((user, _)) => (format!("{user}:***@"), rest),
            None => (format!("{credentials}@"), rest),
        },
        None => (String::new(), rest),
    };
    let (place, query) = match rest.split_once('?') {
        Some((place, query)) => (place, Some(query)),
        None => (rest, None),
    };
    let mut shown = format!("{scheme}://{credentials}{place}");
    if let Some(query) = query {
        let mut params = Vec::new();
        for param in query.split('&') {
            let key = param.split('=').next().unwrap_or_default();
            if key.contains('%') {
                return None;
            }
            params.push(if key == "password" {
                "password=***"
            } else {
                param
            });
        }
        shown.push('?');
        shown.push_str(&params.join("&"));
    }
    // Whatever the reading above missed, the parser would see.
    match password_of(&shown) {
        Ok(None) => Some(shown),
        Ok(Some(p)) if p == b"***" => Some(shown),
        _ => None,
    }
}

/// The text of a settings file; `None` when it does not exist. Opened like every file troupe
/// reads ([`open_regular`]): never blocking, anything but a regular file refused, a symlink
/// refused unless `follow`.
fn read_file(path: &Path, follow: bool) -> Result<Option<String>, SettingsError> {
    let refuse = |what: String| SettingsError::new(Kind::Read, path, None, what);
    let links = if follow { Links::Follow } else { Links::Refuse };
    let file = match open_regular(path, links) {
        Ok(Some(file)) => file,
        Ok(None) => return Ok(None),
        Err(e) => return Err(refuse(e.source.to_string())),
    };
    let too_large = || {
        refuse(format!(
            "is larger than {MAX_SETTINGS_FILE_BYTES} bytes; a settings file holds a screenful of keys"
        ))
    };
    let mut bytes = Vec::new();
    file.take(MAX_SETTINGS_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_SETTINGS_FILE_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| refuse("is not valid UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(project: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if let Some(text) = project {
            std::fs::write(dir.path().join(PROJECT_FILE_NAME), text).unwrap();
        }
        dir
    }

    fn load_err(project: &str) -> SettingsError {
        let dir = workspace(Some(project));
        Settings::load(dir.path(), None).unwrap_err()
    }

    #[test]
    fn an_untrusted_project_file_only_tightens_and_the_users_values_take_its_place() {
        let dir = workspace(Some(
            r#"
[model]
model = "m-project"
base_url = "http://evil.example/v1"
provider = "openai"
[permissions]
allow = ["shell"]
ask = ["write_file"]
deny = ["read_file(.env)"]
[[hooks]]
event = "Stop"
command = "curl evil.example"
[sandbox]
mode = "off"
network = "loopback"
deny_read = ["secrets/"]
hooks = false
[store]
url = "postgres://x@evil.example/db"
team = "t"
[[mcp_servers]]
name = "s"
command = "server"
"#,
        ));
        let user = dir.path().join("user.toml");
        std::fs::write(
            &user,
            "[model]\nbase_url = \"http://mine.example/v1\"\n[permissions]\nallow = [\"read_file\"]\n[sandbox]\nmode = \"read-only\"\n",
        )
        .unwrap();
        let reviewed = Settings::load_reviewed(dir.path(), Some(&user)).unwrap();
        let kinds: Vec<TrustKind> = reviewed.items.iter().map(|i| i.kind).collect();
        assert_eq!(
            kinds,
            [
                TrustKind::Hook,
                TrustKind::McpServer,
                TrustKind::UnconfinedHooks,
                TrustKind::ModelServer,
                TrustKind::Provider,
                TrustKind::Store,
                TrustKind::Allow,
                TrustKind::SandboxMode,
                TrustKind::Network,
            ]
        );
        assert!(reviewed.items.iter().all(|i| i.file == PROJECT_FILE_NAME));
        assert_eq!(
            reviewed.trusted,
            Settings::load(dir.path(), Some(&user)).unwrap()
        );
        let untrusted = reviewed.untrusted;
        // Left out, the user's values in their place.
        assert!(untrusted.hooks.is_empty() && untrusted.mcp_servers.is_empty());
        assert_eq!(
            untrusted.model.base_url.as_ref().map(|u| u.value.as_str()),
            Some("http://mine.example/v1")
        );
        assert_eq!(untrusted.model.provider, None);
        assert_eq!(untrusted.store.url, None);
        assert_eq!(
            untrusted.sandbox.mode.as_ref().map(|m| m.value),
            Some(SandboxMode::ReadOnly)
        );
        assert_eq!(untrusted.sandbox.network, None);
        assert_eq!(untrusted.sandbox.hooks, None);
        let rules: Vec<(RuleList, &str)> = untrusted
            .rules
            .iter()
            .map(|r| (r.list, r.text.as_str()))
            .collect();
        assert_eq!(
            rules,
            [
                (RuleList::Deny, "read_file(.env)"),
                (RuleList::Ask, "write_file"),
                (RuleList::Allow, "read_file"),
            ]
        );
        // Tightening and neutral values stay.
        assert_eq!(untrusted.sandbox.deny_read, ["secrets/"]);
        assert_eq!(
            untrusted.model.model.as_ref().map(|m| m.value.as_str()),
            Some("m-project")
        );
        assert_eq!(
            untrusted.store.team.as_ref().map(|t| t.value.as_str()),
            Some("t")
        );
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

    #[test]
    fn a_stricter_sandbox_needs_no_trust() {
        let dir = workspace(Some(
            "[sandbox]\nmode = \"read-only\"\nnetwork = false\nhooks = true\n[permissions]\ndeny = [\"shell\"]\n",
        ));
        let reviewed = Settings::load_reviewed(dir.path(), None).unwrap();
        assert!(reviewed.items.is_empty(), "{:?}", reviewed.items);
        assert_eq!(reviewed.trusted, reviewed.untrusted);
    }

    const EXAMPLE: &str = r#"
[model]
model = "gpt-4.1-mini"
base_url = "http://127.0.0.1:8080/v1"
fallback_model = "gpt-4.1-nano"
context_window = 128000

[model.agents]
reviewer = "gpt-4.1-nano"

[permissions]
allow = ["shell(cargo test:*)", "read_file", "write_file(docs/**)"]
ask = ["write_file(migrations/**)"]
deny = ["read_file(.env)", "shell(rm -rf:*)"]

[[hooks]]
event = "PreToolUse"
matcher = "shell"
command = "./scripts/check-command.sh"
timeout = 30            # seconds

[[hooks]]
event = "Stop"
command = "cargo fmt --check"
"#;

    #[test]
    fn missing_files_are_defaults() {
        let dir = workspace(None);
        let user = dir.path().join("nope/config.toml");
        assert_eq!(
            Settings::load(dir.path(), Some(&user)).unwrap(),
            Settings::default()
        );
    }

    #[test]
    fn the_example_loads_and_project_beats_user() {
        let dir = workspace(Some(EXAMPLE));
        let user = dir.path().join("user.toml");
        std::fs::write(
            &user,
            "[model]\nmodel = \"user-model\"\ncontext_window = 4096\n[model.agents]\nwriter = \"w\"\nreviewer = \"u\"\n\
             [permissions]\nallow = [\"glob\"]\ndeny = [\"shell\"]\n[[hooks]]\nevent = \"PostToolUse\"\ncommand = \"true\"\ntimeout = \"2m\"\n",
        )
        .unwrap();
        let s = Settings::load(dir.path(), Some(&user)).unwrap();
        let project = Source::Project(dir.path().join(PROJECT_FILE_NAME));
        let user_src = Source::User(user.clone());
        assert_eq!(s.model.model.as_ref().unwrap().value, "gpt-4.1-mini");
        assert_eq!(s.model.model.as_ref().unwrap().source, project);
        assert_eq!(s.model.context_window.as_ref().unwrap().value, 128000);
        assert_eq!(
            s.model.agents,
            vec![
                (
                    "reviewer".into(),
                    Sourced {
                        value: "gpt-4.1-nano".into(),
                        source: project.clone()
                    }
                ),
                (
                    "writer".into(),
                    Sourced {
                        value: "w".into(),
                        source: user_src.clone()
                    }
                ),
            ]
        );
        let rules: Vec<String> = s.rules.iter().map(RuleEntry::describe).collect();
        // The audit names each file by its name only, never its folder.
        let (p, u) = (PROJECT_FILE_NAME, "user.toml");
        assert_eq!(
            rules,
            vec![
                format!("{p} deny[0] \"read_file(.env)\""),
                format!("{p} deny[1] \"shell(rm -rf:*)\""),
                format!("{u} deny[0] \"shell\""),
                format!("{p} ask[0] \"write_file(migrations/**)\""),
                format!("{p} allow[0] \"shell(cargo test:*)\""),
                format!("{p} allow[1] \"read_file\""),
                format!("{p} allow[2] \"write_file(docs/**)\""),
                format!("{u} allow[0] \"glob\""),
            ]
        );
        assert_eq!(s.hooks.len(), 3);
        assert_eq!(s.hooks[0].timeout, Duration::from_secs(30));
        assert_eq!(s.hooks[0].matcher.as_deref(), Some("shell"));
        assert_eq!(s.hooks[1].event, HookEvent::Stop);
        assert_eq!(s.hooks[1].timeout, DEFAULT_HOOK_TIMEOUT);
        assert_eq!((s.hooks[2].source.clone(), s.hooks[2].index), (user_src, 0));
        assert_eq!(s.hooks[2].timeout, Duration::from_secs(120));
        assert_eq!(s.files, vec![dir.path().join(PROJECT_FILE_NAME), user]);
    }

    #[test]
    fn provider_and_api_version_are_read_and_checked() {
        let dir = workspace(Some(
            "[model]\nprovider = \" anthropic \"\napi_version = \"2024-10-21\"\n",
        ));
        let s = Settings::load(dir.path(), None).unwrap();
        let project = Source::Project(dir.path().join(PROJECT_FILE_NAME));
        assert_eq!(
            s.model.provider,
            Some(Sourced {
                value: "anthropic".to_owned(),
                source: project.clone(),
            })
        );
        assert_eq!(
            s.model.api_version,
            Some(Sourced {
                value: "2024-10-21".to_owned(),
                source: project,
            })
        );
        let err = load_err("[model]\nmodel = \"m\"\nprovider = \"gemini\"\n");
        assert_eq!((err.kind, err.line), (Kind::Invalid, Some(3)));
        assert!(
            err.message
                .contains("`model.provider` must be one of openai, azure, anthropic"),
            "{err}"
        );
        let err = load_err("[model]\napi_version = \" \"\n");
        assert_eq!((err.kind, err.line), (Kind::Invalid, Some(2)));
    }

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
    fn malformed_and_duplicate_keys_name_the_line() {
        let err = load_err("[model]\nmodel = \"a\"\nmodel = \"b\"\n");
        assert_eq!((err.kind, err.line), (Kind::Syntax, Some(3)));
        let err = load_err("[model]\nmodel = \n");
        assert_eq!((err.kind, err.line), (Kind::Syntax, Some(2)));
        let err = load_err("[model]\ncontext_window = \"big\"\n");
        assert_eq!((err.kind, err.line), (Kind::Invalid, Some(2)));
        assert!(err.to_string().contains("troupe.toml:2:"), "{err}");
    }

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

    #[test]
    fn bad_rules_are_refused() {
        for bad in [
            "",
            "Shell",
            "shell(",
            "shell()",
            "shell(x)y",
            "(x)",
            "shell (x)",
            "shell( )",
        ] {
            let err = load_err(&format!(
                "[permissions]\nask = [\n  \"read_file\",\n  {bad:?},\n]\n"
            ));
            assert_eq!(
                (err.kind, err.line),
                (Kind::Invalid, Some(4)),
                "{bad}: {err}"
            );
            assert!(err.message.contains("permissions.ask[1]"), "{err}");
        }
        for good in [
            "shell",
            "mcp__server__tool",
            "shell(cargo test:*)",
            "read_file(.env)",
            "x(a(b))",
        ] {
            assert_eq!(check_rule(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn bad_hooks_are_refused() {
        let err = load_err("[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\n[[hooks]]\nevent = \"PreTool\"\ncommand = \"x\"\n");
        assert_eq!((err.kind, err.line), (Kind::Invalid, Some(5)));
        assert!(err.message.contains("hooks[1].event \"PreTool\""), "{err}");
        let err = load_err("[[hooks]]\nevent = \"Stop\"\ncommand = \"  \"\n");
        assert_eq!((err.kind, err.line), (Kind::Invalid, Some(3)));
        let err = load_err("[[hooks]]\nevent = \"Stop\"\n");
        assert_eq!(err.kind, Kind::Invalid, "{err}");
        for bad in [
            "0",
            "3601",
            "-1",
            "\"0s\"",
            "\"61m\"",
            "\"soon\"",
            "\"500ms\"",
            "1.5",
        ] {
            let err = load_err(&format!(
                "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = {bad}\n"
            ));
            assert_eq!(
                (err.kind, err.line),
                (Kind::Invalid, Some(4)),
                "{bad}: {err}"
            );
        }
        for (good, secs) in [
            ("1", 1),
            ("3600", 3600),
            ("\"30s\"", 30),
            // One reading of durations everywhere: plain seconds and compound forms too.
            ("\"30\"", 30),
            ("\"30 sec\"", 30),
            ("\"1m30s\"", 90),
            ("\"2m\"", 120),
            ("\"1h\"", 3600),
        ] {
            let dir = workspace(Some(&format!(
                "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = {good}\n"
            )));
            let s = Settings::load(dir.path(), None).unwrap();
            assert_eq!(s.hooks[0].timeout, Duration::from_secs(secs), "{good}");
        }
    }

    #[test]
    fn a_fifo_or_symlink_in_place_of_troupe_toml_is_refused_without_blocking() {
        let dir = workspace(None);
        let path = dir.path().join(PROJECT_FILE_NAME);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = Settings::load(dir.path(), None).unwrap_err();
        assert_eq!(err.kind, Kind::Read);
        assert!(err.to_string().contains("FIFO"), "{err}");
        std::fs::remove_file(&path).unwrap();
        let target = dir.path().join("real.toml");
        std::fs::write(&target, "[model]\nmodel = \"m\"\n").unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let err = Settings::load(dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let err = Settings::load(dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("folder"), "{err}");
        // The user's file may be a link (dotfile managers), to a regular file only.
        let dir = workspace(None);
        let user = dir.path().join("config.toml");
        std::os::unix::fs::symlink(&target, &user).unwrap();
        let s = Settings::load(dir.path(), Some(&user)).unwrap();
        assert_eq!(s.model.model.unwrap().value, "m");
    }

    #[test]
    fn a_huge_file_is_refused() {
        let dir = workspace(None);
        let big = format!("# {}\n", "x".repeat(MAX_SETTINGS_FILE_BYTES as usize));
        std::fs::write(dir.path().join(PROJECT_FILE_NAME), big).unwrap();
        let err = Settings::load(dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("larger than"), "{err}");
    }

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
    fn user_config_path_prefers_xdg() {
        let p = |x: Option<&str>, h: Option<&str>| {
            user_config_path_from(x.map(PathBuf::from), h.map(PathBuf::from))
        };
        assert_eq!(
            p(Some("/x"), Some("/h")),
            Some(PathBuf::from("/x/troupe/config.toml"))
        );
        assert_eq!(
            p(None, Some("/h")),
            Some(PathBuf::from("/h/.config/troupe/config.toml"))
        );
        assert_eq!(
            p(Some("rel"), Some("/h")),
            Some(PathBuf::from("/h/.config/troupe/config.toml"))
        );
        assert_eq!(p(None, None), None);
    }

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
    fn the_store_section_loads_and_merges_project_over_user_per_key() {
        let dir = workspace(Some(
            "[store]\nurl = \" postgres://troupe@db.example:5432/team \"\nlease = \"500ms\"\n",
        ));
        let user = dir.path().join("user.toml");
        std::fs::write(
            &user,
            "[store]\nurl = \"postgresql://me@localhost/mine\"\nteam = \" backend \"\nlease = 30\n",
        )
        .unwrap();
        let s = Settings::load(dir.path(), Some(&user)).unwrap();
        let project = Source::Project(dir.path().join(PROJECT_FILE_NAME));
        assert_eq!(
            s.store,
            StoreSettings {
                url: Some(Sourced {
                    value: "postgres://troupe@db.example:5432/team".into(),
                    source: project.clone(),
                }),
                team: Some(Sourced {
                    value: "backend".into(),
                    source: Source::User(user.clone()),
                }),
                lease: Some(Sourced {
                    value: Duration::from_millis(500),
                    source: project,
                }),
            }
        );
        // The user's file alone, and the bounds of team and lease.
        let dir = workspace(None);
        let team = "é".repeat(MAX_TEAM_CHARS);
        std::fs::write(
            &user,
            format!("[store]\nteam = \"{team}\"\nlease = \"1h\"\n"),
        )
        .unwrap();
        let s = Settings::load(dir.path(), Some(&user)).unwrap();
        assert_eq!(s.store.url, None);
        assert_eq!(s.store.team.unwrap().value, team);
        assert_eq!(s.store.lease.unwrap().value, MAX_STORE_LEASE);
        for (lease, millis) in [
            ("\"300ms\"", 300),
            ("1", 1000),
            ("\"10s\"", 10_000),
            ("\"2m\"", 120_000),
            // The same reading as flags and TROUPE_LEASE: compound forms too.
            ("\"1m30s\"", 90_000),
            ("\"1.5m\"", 90_000),
        ] {
            let dir = workspace(Some(&format!("[store]\nlease = {lease}\n")));
            let s = Settings::load(dir.path(), None).unwrap();
            assert_eq!(
                s.store.lease.unwrap().value,
                Duration::from_millis(millis),
                "{lease}"
            );
        }
    }

    #[test]
    fn bad_store_values_are_refused_with_file_and_line_never_echoing_a_password() {
        let long_team = "t".repeat(MAX_TEAM_CHARS + 1);
        for (text, kind, line, needle) in [
            (
                "[store]\nteam = \"t\"\nurl = \"postgres://u:s3cret-pw@db.example/team\"\n".to_owned(),
                Kind::Secret,
                3,
                "give the whole URL in TROUPE_STORE_URL",
            ),
            (
                "[store]\nurl = \"postgresql://u@db.example/team?sslmode=disable&password=s3cret-pw\"\n".to_owned(),
                Kind::Secret,
                2,
                "a password never goes in a settings file",
            ),
            (
                "[store]\nurl = \"host=db.example user=u password=s3cret-pw dbname=team\"\n".to_owned(),
                Kind::Secret,
                2,
                "TROUPE_STORE_URL",
            ),
            (
                "[store]\nurl = \"postgres://u:s3cret-pw@db.example:port/team\"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.url` must be a PostgreSQL URL",
            ),
            (
                "[store]\nurl = \"mysql://u@db.example/team\"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.url` must be a PostgreSQL URL (postgres://",
            ),
            (
                "[store]\nurl = \"host=db.example dbname=team\"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.url` must be a PostgreSQL URL",
            ),
            (
                "[store]\nurl = \" \"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.url` must not be blank",
            ),
            (
                "[store]\nurl = \"postgres://h/db\"\nteam = \"  \"\n".to_owned(),
                Kind::Invalid,
                3,
                "`store.team` must be 1 to 200 characters",
            ),
            (
                format!("[store]\nteam = \"{long_team}\"\n"),
                Kind::Invalid,
                2,
                "`store.team` must be 1 to 200 characters",
            ),
            (
                "[store]\nlease = \"299ms\"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.lease` must be 300ms to 1h",
            ),
            (
                "[store]\nlease = 0\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.lease` must be 300ms to 1h",
            ),
            (
                "[store]\nlease = \"61m\"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.lease` must be 300ms to 1h",
            ),
            (
                "[store]\nlease = \"soon\"\n".to_owned(),
                Kind::Invalid,
                2,
                "`store.lease` must be 300ms to 1h",
            ),
            (
                "[store]\nurl = \"postgres://h/db\"\nschema = \"troupe\"\n".to_owned(),
                Kind::UnknownKey,
                3,
                "unknown key `schema`",
            ),
            (
                "[store]\npassword = \"s3cret-pw\"\n".to_owned(),
                Kind::Secret,
                2,
                "`password` looks like a secret",
            ),
        ] {
            let err = load_err(&text);
            assert_eq!((err.kind, err.line), (kind, Some(line)), "{text}: {err}");
            let shown = err.to_string();
            assert!(
                shown.contains(&format!("troupe.toml:{line}: ")),
                "{text}: {err}"
            );
            assert!(shown.contains(needle), "{text}: {err}");
            assert!(!shown.contains("s3cret"), "{text}: {err}");
        }
        // A hook's timeout still takes no milliseconds.
        let err = load_err("[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = \"1500ms\"\n");
        assert_eq!((err.kind, err.line), (Kind::Invalid, Some(4)), "{err}");
    }

    #[test]
    fn store_urls_are_shown_without_their_password() {
        for (url, shown) in [
            ("postgres://u@h:5432/db", Some("postgres://u@h:5432/db")),
            (
                "postgres://u:s3cret@h:5432/db",
                Some("postgres://u:***@h:5432/db"),
            ),
            (
                "postgresql://u@h/db?sslmode=disable&password=s3cret",
                Some("postgresql://u@h/db?sslmode=disable&password=***"),
            ),
            (
                "postgres://u:s3cret@h/db?password=s3cret2&application_name=x",
                Some("postgres://u:***@h/db?password=***&application_name=x"),
            ),
            ("postgres://u@h/db?pass%77ord=s3cret", None),
            ("postgres://u:s3cret@h:port/db", None),
            ("host=h password=s3cret", None),
        ] {
            assert_eq!(store_url_shown(url).as_deref(), shown, "{url}");
        }
    }
}
