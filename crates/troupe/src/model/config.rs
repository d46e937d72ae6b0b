//! Model configuration (SPEC §8): which provider, server, key and model a client uses.
//!
//! Each setting is taken from the first place that has a non-blank value:
//! explicit overrides (CLI flags) → the process environment → `<workspace>/.env` → the settings
//! files (`troupe.toml`, then the user's `config.toml`: `[model]` `model`, `base_url`,
//! `fallback_model`) → the default. The API key comes only from flags, the environment and `.env`.
//! The `.env` file is read with dotenvy's parser into a map; the process environment is never
//! modified, so a key in `.env` never reaches the environment of troupe or of the commands it
//! runs. The environment is passed in as a map, so tests never touch the real one. A credential
//! that `secrets::environment` took out of the environment at start still counts as set there.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `OPENAI_API_KEY` | bearer token | required, except for a base URL on loopback |
//! | `OPENAI_MODEL` | model name | required |
//! | `OPENAI_BASE_URL` | API root, with or without trailing `/` | `https://api.openai.com/v1` |
//! | `OPENAI_FALLBACK_MODEL` | model tried when the primary fails (see `model::openai`) | none |
//! | `TROUPE_MODEL_TIMEOUT_SECS` | idle timeout of a request (headers, then between chunks), seconds | 120 |
//! | `TROUPE_MODEL_MAX_ATTEMPTS` | attempts per model, first included | 3 |
//! | `TROUPE_MODEL_OVERLOAD_FALLBACK_AFTER` | overloads (429/503/529) in a row before the fallback takes over | 2 |
//! | `TROUPE_MODEL_DEADLINE_SECS` | total time of one model call: attempts, backoffs and fallback | 600 |
//! | `TROUPE_PROVIDER` | `openai`, `azure` or `anthropic` (also `--provider`, `[model] provider`) | inferred |
//! | `ANTHROPIC_API_KEY` | Anthropic's `x-api-key` | required for Anthropic |
//! | `ANTHROPIC_MODEL` | Anthropic model name (instead of `OPENAI_MODEL`) | required for Anthropic |
//! | `ANTHROPIC_BASE_URL` | Anthropic API root | `https://api.anthropic.com` |
//! | `AZURE_OPENAI_API_KEY` | Azure's `api-key` (else `OPENAI_API_KEY`) | required for Azure |
//! | `AZURE_OPENAI_ENDPOINT` | Azure resource endpoint (else `OPENAI_BASE_URL`) | required for Azure |
//! | `OPENAI_API_VERSION`, `AZURE_OPENAI_API_VERSION` | Azure's `api-version` (also `[model] api_version`) | required for Azure |
//! | `TROUPE_MODEL_MAX_TOKENS` | the answer's token limit (Anthropic's required `max_tokens`) | 8192 for Anthropic |
//! | `TROUPE_THINKING_BUDGET` | Anthropic extended thinking's `budget_tokens`; thinking is off without it | off |
//!
//! **Provider.** `--provider`, then `TROUPE_PROVIDER` (environment, `.env`), then `[model]
//! provider`; else inferred: Anthropic when `ANTHROPIC_API_KEY` is set (environment or `.env`)
//! and none of `OPENAI_API_KEY`, `OPENAI_BASE_URL`, `OPENAI_MODEL` is, OpenAI otherwise. The
//! provider decides which variables name the key, model and base URL (the table above); the
//! flags and the settings files' `model` and `base_url` apply to whichever it is. Where a value
//! has two variables (Azure's key, endpoint and api-version), the first variable is looked for in
//! the environment and `.env` before the second: the provider-specific name wins.
//!
//! **Trust.** A workspace's `.env` comes with the workspace: until the person trusts it, its
//! variables that choose the server or the provider ([`TRUST_REQUIRING_VARS`]), and those that
//! would change the provider or key the person's own environment and settings chose
//! ([`split_dotenv_trust_against`]), are left out.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use crate::error::ErrorCode;
use crate::model::RetryPolicy;
use crate::secrets::{self, environment, Redactor};
use crate::settings::trust::{TrustItem, TrustKind};
use crate::settings::{ModelSettings, Source, Sourced};
use crate::store::read::{read_regular, Links};

pub const API_KEY_VAR: &str = "OPENAI_API_KEY";
pub const BASE_URL_VAR: &str = "OPENAI_BASE_URL";
pub const MODEL_VAR: &str = "OPENAI_MODEL";
pub const FALLBACK_MODEL_VAR: &str = "OPENAI_FALLBACK_MODEL";
pub const TIMEOUT_VAR: &str = "TROUPE_MODEL_TIMEOUT_SECS";
pub const MAX_ATTEMPTS_VAR: &str = "TROUPE_MODEL_MAX_ATTEMPTS";
pub const OVERLOAD_FALLBACK_AFTER_VAR: &str = "TROUPE_MODEL_OVERLOAD_FALLBACK_AFTER";
pub const DEADLINE_VAR: &str = "TROUPE_MODEL_DEADLINE_SECS";
pub const PROVIDER_VAR: &str = "TROUPE_PROVIDER";
pub const ANTHROPIC_API_KEY_VAR: &str = "ANTHROPIC_API_KEY";
pub const ANTHROPIC_MODEL_VAR: &str = "ANTHROPIC_MODEL";
pub const ANTHROPIC_BASE_URL_VAR: &str = "ANTHROPIC_BASE_URL";
pub const AZURE_API_KEY_VAR: &str = "AZURE_OPENAI_API_KEY";
pub const AZURE_ENDPOINT_VAR: &str = "AZURE_OPENAI_ENDPOINT";
pub const API_VERSION_VAR: &str = "OPENAI_API_VERSION";
pub const AZURE_API_VERSION_VAR: &str = "AZURE_OPENAI_API_VERSION";
pub const MAX_TOKENS_VAR: &str = "TROUPE_MODEL_MAX_TOKENS";
pub const THINKING_BUDGET_VAR: &str = "TROUPE_THINKING_BUDGET";

/// Every variable this module reads, in the order they are documented.
pub const VARIABLES: [&str; 18] = [
    API_KEY_VAR,
    BASE_URL_VAR,
    MODEL_VAR,
    FALLBACK_MODEL_VAR,
    TIMEOUT_VAR,
    MAX_ATTEMPTS_VAR,
    OVERLOAD_FALLBACK_AFTER_VAR,
    DEADLINE_VAR,
    PROVIDER_VAR,
    ANTHROPIC_API_KEY_VAR,
    ANTHROPIC_MODEL_VAR,
    ANTHROPIC_BASE_URL_VAR,
    AZURE_API_KEY_VAR,
    AZURE_ENDPOINT_VAR,
    API_VERSION_VAR,
    AZURE_API_VERSION_VAR,
    MAX_TOKENS_VAR,
    THINKING_BUDGET_VAR,
];

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Anthropic's API root (the same as `model::anthropic::DEFAULT_BASE_URL`, which sits above
/// this module).
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
pub const DEFAULT_OVERLOAD_FALLBACK_AFTER: u32 = 2;
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);

/// The workspace file read after the process environment.
pub const ENV_FILE_NAME: &str = ".env";

/// An API key; empty for a server on loopback that needs none (then no credential header is
/// sent). Its `Debug` never shows it, so configs and clients can be logged safely.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// Which wire format and endpoint conventions a model server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Provider {
    /// OpenAI Chat Completions, or any compatible server (`{base_url}/chat/completions`,
    /// `Authorization: Bearer`).
    #[default]
    OpenAi,
    /// Azure OpenAI: deployment URLs (`{base_url}/openai/deployments/{model}/chat/completions`),
    /// an `api-key` header and an `api-version` query ([`ModelConfig::api_version`]).
    Azure,
    /// Anthropic Messages, native (`{base_url}/v1/messages`, `x-api-key`).
    Anthropic,
}

impl Provider {
    pub const ALL: [Provider; 3] = [Provider::OpenAi, Provider::Azure, Provider::Anthropic];

    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Azure => "azure",
            Provider::Anthropic => "anthropic",
        }
    }
}

impl std::str::FromStr for Provider {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Provider::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| format!("unknown provider {s:?}: expected openai, azure or anthropic"))
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Provider {
    /// The variables that hold this provider's API key, preferred first.
    pub fn api_key_vars(self) -> &'static [&'static str] {
        match self {
            Provider::OpenAi => &[API_KEY_VAR],
            Provider::Azure => &[AZURE_API_KEY_VAR, API_KEY_VAR],
            Provider::Anthropic => &[ANTHROPIC_API_KEY_VAR],
        }
    }

    /// The variable that names this provider's model (Azure's is its deployment).
    pub fn model_var(self) -> &'static str {
        match self {
            Provider::OpenAi | Provider::Azure => MODEL_VAR,
            Provider::Anthropic => ANTHROPIC_MODEL_VAR,
        }
    }

    /// The variables that hold this provider's API root, preferred first.
    pub fn base_url_vars(self) -> &'static [&'static str] {
        match self {
            Provider::OpenAi => &[BASE_URL_VAR],
            Provider::Azure => &[AZURE_ENDPOINT_VAR, BASE_URL_VAR],
            Provider::Anthropic => &[ANTHROPIC_BASE_URL_VAR],
        }
    }

    /// The API root when none is set; Azure has none (each resource has its own endpoint).
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Provider::OpenAi => Some(DEFAULT_BASE_URL),
            Provider::Azure => None,
            Provider::Anthropic => Some(ANTHROPIC_DEFAULT_BASE_URL),
        }
    }
}

/// The variables that hold Azure's `api-version`, preferred first.
pub const API_VERSION_VARS: [&str; 2] = [API_VERSION_VAR, AZURE_API_VERSION_VAR];

/// Why inference picks Anthropic, as `troupe config` shows it.
pub const INFERRED_ANTHROPIC: &str =
    "ANTHROPIC_API_KEY set, none of OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL";

/// Everything a model client needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// The wire format and endpoint conventions of the server.
    pub provider: Provider,
    /// Azure's `api-version` query value (required for [`Provider::Azure`]).
    pub api_version: Option<String>,
    /// The answer's token limit, when configured (Anthropic requires one and defaults it).
    pub max_tokens: Option<u32>,
    /// Anthropic extended thinking's budget, when on.
    pub thinking_budget: Option<u32>,
    pub api_key: ApiKey,
    pub base_url: String,
    pub model: String,
    pub fallback_model: Option<String>,
    /// The idle timeout of an attempt: for the response headers, then between any two chunks of
    /// the body (a streamed answer may take longer in total, as long as it keeps coming; the
    /// whole call is bounded by [`deadline`](Self::deadline)).
    pub timeout: Duration,
    pub retry: RetryPolicy,
    /// After this many overloads (HTTP 429, 503, 529) of the primary in a row, its remaining
    /// attempts are skipped and the fallback is asked at once: an overloaded server tends to stay
    /// overloaded for longer than a backoff. Without a fallback the attempts go on. `0` acts as `1`.
    pub overload_fallback_after: u32,
    /// The whole call — every attempt, the backoffs between them and the fallback — ends within
    /// this, so one turn cannot hang on a struggling server for `attempts × timeout × 2`.
    pub deadline: Duration,
}

/// Values given explicitly (CLI flags); each one that is set beats the environment and `.env`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelOverrides {
    pub provider: Option<Provider>,
    pub api_key: Option<String>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub fallback_model: Option<String>,
    pub timeout: Option<Duration>,
    pub max_attempts: Option<u32>,
}

/// Why the model configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Required variables that are unset (or blank) everywhere.
    #[error("missing model configuration: {} (set in the environment or in <workspace>/.env)", .names.join(", "))]
    Missing { names: Vec<&'static str> },
    #[error("invalid {name}: {reason}")]
    Invalid { name: &'static str, reason: String },
    #[error("cannot read {path}: {reason}")]
    EnvFile { path: String, reason: String },
}

impl ErrorCode for ConfigError {
    fn code(&self) -> &'static str {
        match self {
            Self::Missing { .. } => "config_missing",
            Self::Invalid { .. } => "config_invalid",
            Self::EnvFile { .. } => "config_env_file",
        }
    }
}

impl ModelConfig {
    /// A config with the defaults for everything but the key and model.
    pub fn new(api_key: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            provider: Provider::OpenAi,
            api_version: None,
            max_tokens: None,
            thinking_budget: None,
            api_key: ApiKey::new(api_key),
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: model.into(),
            fallback_model: None,
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            overload_fallback_after: DEFAULT_OVERLOAD_FALLBACK_AFTER,
            deadline: DEFAULT_DEADLINE,
        }
    }

    /// What must never be shown: this configuration's key, and every credential taken from the
    /// environment at start.
    pub fn redactor(&self) -> Redactor {
        secrets::process_redactor().with_secrets([self.api_key.expose()])
    }

    /// Loads from the real process environment and `<workspace>/.env`.
    pub fn load(workspace: &Path, overrides: &ModelOverrides) -> Result<Self, ConfigError> {
        Self::load_with_env(&process_env()?, workspace, overrides)
    }

    /// Loads with `env` standing in for the process environment.
    pub fn load_with_env(
        env: &HashMap<String, String>,
        workspace: &Path,
        overrides: &ModelOverrides,
    ) -> Result<Self, ConfigError> {
        Self::load_layers(env, workspace, overrides, &ModelSettings::default())
    }

    /// Loads with `env` standing in for the process environment, and the settings files' model
    /// values below the environment and `.env`.
    pub fn load_layers(
        env: &HashMap<String, String>,
        workspace: &Path,
        overrides: &ModelOverrides,
        settings: &ModelSettings,
    ) -> Result<Self, ConfigError> {
        let dotenv = read_env_file(&workspace.join(ENV_FILE_NAME))?;
        Self::resolve_layers(env, &dotenv, overrides, settings)
    }

    /// Combines the three sources; no I/O.
    pub fn resolve(
        env: &HashMap<String, String>,
        dotenv: &HashMap<String, String>,
        overrides: &ModelOverrides,
    ) -> Result<Self, ConfigError> {
        Self::resolve_layers(env, dotenv, overrides, &ModelSettings::default())
    }

    /// Combines flags, environment, `.env` and the settings files' model values; no I/O.
    pub fn resolve_layers(
        env: &HashMap<String, String>,
        dotenv: &HashMap<String, String>,
        overrides: &ModelOverrides,
        settings: &ModelSettings,
    ) -> Result<Self, ConfigError> {
        let pick = |flag: &Option<String>, name: &str| -> Option<String> {
            pick_sourced(env, dotenv, flag, "", &[name], None).map(|s| s.value)
        };
        let effective = EffectiveModel::resolve(env, dotenv, overrides, settings)?;
        let provider = effective.provider.value;
        let api_key = pick_sourced(
            env,
            dotenv,
            &overrides.api_key,
            "",
            provider.api_key_vars(),
            None,
        )
        .map(|s| s.value)
        // A server on this machine (Ollama, llama.cpp) needs no key: none set means none sent.
        .or_else(|| {
            effective
                .base_url
                .as_ref()
                .is_some_and(|url| is_loopback(&url.value))
                .then(String::new)
        });
        let model = effective.model.map(|s| s.value);
        let base_url = effective.base_url.map(|s| s.value);
        let api_version = effective.api_version.map(|s| s.value);
        let (api_key, model, base_url) = match (api_key, model, base_url, provider, &api_version) {
            (
                Some(api_key),
                Some(model),
                Some(base_url),
                Provider::OpenAi | Provider::Anthropic,
                _,
            )
            | (Some(api_key), Some(model), Some(base_url), Provider::Azure, Some(_)) => {
                (api_key, model, base_url)
            }
            (api_key, model, base_url, provider, api_version) => {
                let names = [
                    (provider.api_key_vars()[0], api_key.is_none()),
                    (provider.model_var(), model.is_none()),
                    (provider.base_url_vars()[0], base_url.is_none()),
                    (
                        API_VERSION_VAR,
                        provider == Provider::Azure && api_version.is_none(),
                    ),
                ]
                .into_iter()
                .filter_map(|(name, missing)| missing.then_some(name))
                .collect();
                return Err(ConfigError::Missing { names });
            }
        };
        let key_var = provider.api_key_vars()[0];
        // Checked here because reqwest would only fail at send time, with a vague "builder error".
        if !api_key.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(ConfigError::Invalid {
                name: key_var,
                reason: "the key contains spaces or characters not allowed in an HTTP header"
                    .to_owned(),
            });
        }
        check_base_url(provider.base_url_vars()[0], &base_url)?;
        let timeout = match overrides.timeout {
            Some(timeout) => timeout,
            None => match pick(&None, TIMEOUT_VAR) {
                Some(raw) => Duration::from_secs(positive(TIMEOUT_VAR, &raw)?),
                None => DEFAULT_TIMEOUT,
            },
        };
        if timeout.is_zero() {
            return Err(ConfigError::Invalid {
                name: TIMEOUT_VAR,
                reason: "the timeout must be more than zero".to_owned(),
            });
        }
        let max_attempts = match overrides.max_attempts {
            Some(attempts) => attempts,
            None => match pick(&None, MAX_ATTEMPTS_VAR) {
                Some(raw) => {
                    let attempts = positive(MAX_ATTEMPTS_VAR, &raw)?;
                    u32::try_from(attempts).map_err(|_| ConfigError::Invalid {
                        name: MAX_ATTEMPTS_VAR,
                        reason: format!("`{raw}` is too large"),
                    })?
                }
                None => RetryPolicy::default().max_attempts,
            },
        };
        let overload_fallback_after = match pick(&None, OVERLOAD_FALLBACK_AFTER_VAR) {
            Some(raw) => {
                u32::try_from(positive(OVERLOAD_FALLBACK_AFTER_VAR, &raw)?).map_err(|_| {
                    ConfigError::Invalid {
                        name: OVERLOAD_FALLBACK_AFTER_VAR,
                        reason: format!("`{raw}` is too large"),
                    }
                })?
            }
            None => DEFAULT_OVERLOAD_FALLBACK_AFTER,
        };
        let deadline = match pick(&None, DEADLINE_VAR) {
            Some(raw) => Duration::from_secs(positive(DEADLINE_VAR, &raw)?),
            None => DEFAULT_DEADLINE,
        };
        let max_tokens = match pick(&None, MAX_TOKENS_VAR) {
            Some(raw) => Some(positive_u32(MAX_TOKENS_VAR, &raw)?),
            None => None,
        };
        let thinking_budget = match pick(&None, THINKING_BUDGET_VAR) {
            Some(raw) => Some(positive_u32(THINKING_BUDGET_VAR, &raw)?),
            None => None,
        };
        Ok(Self {
            provider,
            api_version,
            max_tokens,
            thinking_budget,
            api_key: ApiKey::new(api_key),
            base_url,
            model,
            fallback_model: effective.fallback_model.map(|s| s.value),
            timeout,
            retry: RetryPolicy {
                max_attempts: max_attempts.max(1),
                ..RetryPolicy::default()
            },
            overload_fallback_after,
            deadline,
        })
    }
}

/// The model values and where each came from (for `troupe config`): flags, then the
/// environment, `.env`, the settings files, the default. Never the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveModel {
    /// The provider, and where it was set or why it was inferred.
    pub provider: Sourced<Provider>,
    pub model: Option<Sourced<String>>,
    /// `None` only for Azure without an endpoint.
    pub base_url: Option<Sourced<String>>,
    pub fallback_model: Option<Sourced<String>>,
    /// Azure's `api-version` (looked up for Azure only).
    pub api_version: Option<Sourced<String>>,
    /// Where the provider's API key is set, if anywhere (the key is not kept).
    pub api_key_source: Option<Source>,
}

impl EffectiveModel {
    /// Fails only on a provider name that is not one.
    pub fn resolve(
        env: &HashMap<String, String>,
        dotenv: &HashMap<String, String>,
        overrides: &ModelOverrides,
        settings: &ModelSettings,
    ) -> Result<Self, ConfigError> {
        let provider = resolve_provider(env, dotenv, overrides, settings)?;
        let kind = provider.value;
        let base_url = pick_sourced(
            env,
            dotenv,
            &overrides.base_url,
            "--base-url",
            kind.base_url_vars(),
            settings.base_url.as_ref(),
        )
        .or_else(|| {
            kind.default_base_url().map(|url| Sourced {
                value: url.to_owned(),
                source: Source::Default,
            })
        });
        let api_version = match kind {
            Provider::Azure => pick_sourced(
                env,
                dotenv,
                &None,
                "",
                &API_VERSION_VARS,
                settings.api_version.as_ref(),
            ),
            Provider::OpenAi | Provider::Anthropic => None,
        };
        Ok(Self {
            model: pick_sourced(
                env,
                dotenv,
                &overrides.model,
                "--model",
                &[kind.model_var()],
                settings.model.as_ref(),
            ),
            base_url,
            fallback_model: pick_sourced(
                env,
                dotenv,
                &overrides.fallback_model,
                "--fallback-model",
                &[FALLBACK_MODEL_VAR],
                settings.fallback_model.as_ref(),
            ),
            api_version,
            api_key_source: pick_sourced(
                env,
                dotenv,
                &overrides.api_key,
                "",
                kind.api_key_vars(),
                None,
            )
            .map(|s| s.source),
            provider,
        })
    }
}

/// `--provider`, `TROUPE_PROVIDER` (environment, `.env`), `[model] provider`, else inferred.
fn resolve_provider(
    env: &HashMap<String, String>,
    dotenv: &HashMap<String, String>,
    overrides: &ModelOverrides,
    settings: &ModelSettings,
) -> Result<Sourced<Provider>, ConfigError> {
    if let Some(provider) = overrides.provider {
        return Ok(Sourced {
            value: provider,
            source: Source::Flag("--provider".to_owned()),
        });
    }
    if let Some(named) = pick_sourced(
        env,
        dotenv,
        &None,
        "",
        &[PROVIDER_VAR],
        settings.provider.as_ref(),
    ) {
        let value = named
            .value
            .parse::<Provider>()
            .map_err(|reason| ConfigError::Invalid {
                name: PROVIDER_VAR,
                reason,
            })?;
        return Ok(Sourced {
            value,
            source: named.source,
        });
    }
    let set = |var: &str| {
        [env, dotenv]
            .iter()
            .any(|vars| vars.get(var).is_some_and(|value| !value.trim().is_empty()))
    };
    let openai_settings = [API_KEY_VAR, BASE_URL_VAR, MODEL_VAR].into_iter().any(set);
    Ok(if set(ANTHROPIC_API_KEY_VAR) && !openai_settings {
        Sourced {
            value: Provider::Anthropic,
            source: Source::Inferred(INFERRED_ANTHROPIC.to_owned()),
        }
    } else {
        Sourced {
            value: Provider::OpenAi,
            source: Source::Default,
        }
    })
}

/// The first non-blank of: the flag, each variable (preferred first) in the environment then in
/// `.env`, the setting.
fn pick_sourced(
    env: &HashMap<String, String>,
    dotenv: &HashMap<String, String>,
    flag: &Option<String>,
    flag_name: &str,
    vars: &[&str],
    setting: Option<&Sourced<String>>,
) -> Option<Sourced<String>> {
    let flag = flag
        .as_ref()
        .map(|v| (v, Source::Flag(flag_name.to_owned())));
    let variables = vars.iter().flat_map(|var| {
        [
            env.get(*var).map(|v| (v, Source::Env((*var).to_owned()))),
            dotenv
                .get(*var)
                .map(|v| (v, Source::DotEnv((*var).to_owned()))),
        ]
    });
    let setting = setting.map(|s| (&s.value, s.source.clone()));
    std::iter::once(flag)
        .chain(variables)
        .chain(std::iter::once(setting))
        .flatten()
        .map(|(value, source)| (value.trim(), source))
        .find(|(value, _)| !value.is_empty())
        .map(|(value, source)| Sourced {
            value: value.to_owned(),
            source,
        })
}

/// The variables this module reads, from the real process environment (a credential taken out
/// of it at start counts as still there).
pub fn process_env() -> Result<HashMap<String, String>, ConfigError> {
    let mut env = HashMap::new();
    for name in VARIABLES {
        let value = std::env::var_os(name)
            .or_else(|| environment::taken(name).map(std::ffi::OsStr::to_os_string));
        let Some(value) = value else {
            continue;
        };
        let value = value.into_string().map_err(|_| ConfigError::Invalid {
            name,
            reason: "the value is not valid UTF-8".to_owned(),
        })?;
        env.insert(name.to_owned(), value);
    }
    Ok(env)
}

/// The `.env` variables that choose the server the key goes to or the provider: a workspace's
/// `.env` sets them only once the person trusts the workspace (`settings::trust`).
pub const TRUST_REQUIRING_VARS: [&str; 4] = [
    BASE_URL_VAR,
    ANTHROPIC_BASE_URL_VAR,
    AZURE_ENDPOINT_VAR,
    PROVIDER_VAR,
];

/// Takes the trust-requiring variables ([`TRUST_REQUIRING_VARS`]) out of a workspace's `.env`
/// variables: what is left applies untrusted; each non-blank one taken is a [`TrustItem`].
pub fn split_dotenv_trust(
    mut vars: HashMap<String, String>,
) -> (HashMap<String, String>, Vec<TrustItem>) {
    let mut items = Vec::new();
    for name in TRUST_REQUIRING_VARS {
        let Some(value) = vars.remove(name) else {
            continue;
        };
        let value = value.trim().to_owned();
        if value.is_empty() {
            continue;
        }
        let shown = if name == PROVIDER_VAR {
            format!("chooses the provider {value} ({name})")
        } else {
            format!("sends your API key to {value} ({name})")
        };
        let kind = if name == PROVIDER_VAR {
            TrustKind::Provider
        } else {
            TrustKind::ModelServer
        };
        items.push(TrustItem::new(
            ENV_FILE_NAME,
            kind,
            shown,
            format!("{name}={value}"),
        ));
    }
    (vars, items)
}

/// [`split_dotenv_trust`], and what else of an untrusted `.env` would change which provider or
/// key is used from what the person's own environment `env` and settings (`settings`: the
/// user's, and the workspace's tightening values) decide:
///
/// - when they choose the provider — named, or inferred from the person's own variables (their
///   `ANTHROPIC_API_KEY`) — the `.env` variables that would infer another one (`OPENAI_API_KEY`,
///   `OPENAI_MODEL`, `ANTHROPIC_API_KEY`) wait for trust;
/// - when they hold a key for that provider, a `.env` key that would be sent instead (Azure's
///   `AZURE_OPENAI_API_KEY` over the person's `OPENAI_API_KEY`) waits for trust.
///
/// When the person's own settings choose no provider and hold no key, a `.env` key (and the
/// provider it infers) applies untrusted: that is the usual "my key is in `.env`". Flags are not
/// known here: a `--provider` that makes a waiting variable moot still finds it waiting.
pub fn split_dotenv_trust_against(
    vars: HashMap<String, String>,
    env: &HashMap<String, String>,
    settings: &ModelSettings,
) -> (HashMap<String, String>, Vec<TrustItem>) {
    let (mut left, mut items) = split_dotenv_trust(vars);
    let none = HashMap::new();
    let no_flags = ModelOverrides::default();
    // A provider name that is not one fails the run later, whatever the `.env` holds.
    let Ok(own) = resolve_provider(env, &none, &no_flags, settings) else {
        return (left, items);
    };
    let set = |vars: &HashMap<String, String>, name: &str| {
        vars.get(name).is_some_and(|value| !value.trim().is_empty())
    };
    let mut provider = own.value;
    match resolve_provider(env, &left, &no_flags, settings) {
        Ok(with) if with.value != own.value && own.source != Source::Default => {
            for name in [API_KEY_VAR, MODEL_VAR, ANTHROPIC_API_KEY_VAR] {
                if set(env, name) || !set(&left, name) {
                    continue;
                }
                let value = left.remove(name).unwrap_or_default();
                items.push(TrustItem::new(
                    ENV_FILE_NAME,
                    TrustKind::Provider,
                    format!(
                        "chooses the provider {} instead of your {} ({name})",
                        with.value, own.value
                    ),
                    format!("{name}={}", fingerprint(value.trim())),
                ));
            }
        }
        Ok(with) => provider = with.value,
        Err(_) => {}
    }
    let key_vars = provider.api_key_vars();
    let own_key = pick_sourced(env, &none, &None, "", key_vars, None);
    let with_key = pick_sourced(env, &left, &None, "", key_vars, None);
    if let (Some(_), Some(with_key)) = (own_key, with_key) {
        if let Source::DotEnv(name) = with_key.source {
            left.remove(&name);
            items.push(TrustItem::new(
                ENV_FILE_NAME,
                TrustKind::ApiKey,
                format!("sends the API key in .env ({name}) instead of yours"),
                format!("{name}={}", fingerprint(&with_key.value)),
            ));
        }
    }
    (left, items)
}

/// `sha256:<hex>` of a value: what a trust item holds of a key, never the key itself.
fn fingerprint(value: &str) -> String {
    use sha2::{Digest, Sha256};
    let hex: String = Sha256::digest(value.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// A `.env` file larger than this is refused (it holds a handful of variables).
pub const MAX_ENV_FILE_BYTES: u64 = 1024 * 1024;

/// The variables of a `.env` file (dotenvy's syntax); a missing file is an empty map.
///
/// The file comes with the workspace, so it is read with care: only a regular file (a FIFO or
/// device is refused at once rather than blocking the start of a run); a symlink only when it
/// points to a file inside the workspace (the folder `path` is in) — a `.env` linked to
/// `/proc/self/environ` or a file in the person's home is refused, naming the link. A line that
/// does not parse is named by its number, never quoted: it may hold a secret (dotenvy's own
/// message quotes the whole line).
pub fn read_env_file(path: &Path) -> Result<HashMap<String, String>, ConfigError> {
    let env_file_error = |reason: String| ConfigError::EnvFile {
        path: path.display().to_string(),
        reason,
    };
    let Some(target) = env_file_target(path).map_err(env_file_error)? else {
        return Ok(HashMap::new());
    };
    let bytes = match read_regular(&target, Links::Refuse, MAX_ENV_FILE_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(HashMap::new()),
        Err(err) => return Err(env_file_error(err.source.to_string())),
    };
    let mut vars = HashMap::new();
    for entry in dotenvy::from_read_iter(bytes.as_slice()) {
        let (name, value) = entry.map_err(|err| env_file_error(parse_error(&bytes, &err)))?;
        vars.insert(name, value);
    }
    Ok(vars)
}

/// The file to read for the `.env` at `path`: itself, or where its symlink points when that is
/// inside the workspace; `None` when there is none (a link to nothing counts as none).
fn env_file_target(path: &Path) -> Result<Option<std::path::PathBuf>, String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot inspect it: {e}")),
    };
    if !meta.file_type().is_symlink() {
        return Ok(Some(path.to_path_buf()));
    }
    let target = match std::fs::canonicalize(path) {
        Ok(target) => target,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("is a symbolic link that cannot be followed: {e}")),
    };
    let workspace = path
        .parent()
        .map(std::fs::canonicalize)
        .transpose()
        .map_err(|e| format!("cannot resolve the workspace of this symbolic link: {e}"))?;
    match workspace {
        Some(workspace) if target.starts_with(&workspace) => Ok(Some(target)),
        _ => Err(format!(
            "is a symbolic link out of the workspace (to {}); troupe reads a workspace's .env \
             only from a file inside the workspace",
            target.display()
        )),
    }
}

/// What was wrong with a `.env`, without any of its content: the number of the line that did
/// not parse, or that the file is not text.
fn parse_error(text: &[u8], err: &dotenvy::Error) -> String {
    match err {
        dotenvy::Error::LineParse(line, _) => {
            // dotenvy gives the line's text, not its number: found again in the file, where a
            // line starts with it.
            let number = std::str::from_utf8(text).ok().and_then(|text| {
                let at = text
                    .match_indices(line.as_str())
                    .map(|(at, _)| at)
                    .find(|&at| at == 0 || text[..at].ends_with('\n'))
                    .or_else(|| text.find(line.as_str()))?;
                Some(text[..at].bytes().filter(|&b| b == b'\n').count() + 1)
            });
            match number {
                Some(number) => format!(
                    "line {number} is not a `NAME=value` line dotenv syntax allows (its \
                     content is not shown: it may hold a secret)"
                ),
                None => "a line is not a `NAME=value` line dotenv syntax allows (its content is \
                         not shown: it may hold a secret)"
                    .to_owned(),
            }
        }
        dotenvy::Error::Io(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            "is not valid UTF-8 text".to_owned()
        }
        dotenvy::Error::Io(e) => format!("cannot be read ({})", e.kind()),
        _ => "cannot be parsed (its content is not shown: it may hold a secret)".to_owned(),
    }
}

/// Whether `base_url` names this machine (`localhost`, `127.0.0.1` and the rest of
/// `127.0.0.0/8`, `::1`): a server there may be run without a key.
pub fn is_loopback(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn check_base_url(name: &'static str, raw: &str) -> Result<(), ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid { name, reason };
    let url = reqwest::Url::parse(raw).map_err(|err| invalid(format!("`{raw}`: {err}")))?;
    match url.scheme() {
        "http" | "https" => Ok(()),
        other => Err(invalid(format!(
            "`{raw}`: the scheme must be http or https, not {other}"
        ))),
    }
}

fn positive(name: &'static str, raw: &str) -> Result<u64, ConfigError> {
    match raw.parse::<u64>() {
        Ok(value) if value > 0 => Ok(value),
        _ => Err(ConfigError::Invalid {
            name,
            reason: format!("`{raw}` is not a whole number greater than zero"),
        }),
    }
}

fn positive_u32(name: &'static str, raw: &str) -> Result<u32, ConfigError> {
    u32::try_from(positive(name, raw)?).map_err(|_| ConfigError::Invalid {
        name,
        reason: format!("`{raw}` is too large"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dotenv_out_of_the_workspace_or_with_a_bad_line_is_refused_without_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ws = root.join("ws");
        std::fs::create_dir(&ws).unwrap();
        let path = ws.join(ENV_FILE_NAME);
        std::os::unix::fs::symlink("/proc/self/environ", &path).unwrap();
        let err = read_env_file(&path).unwrap_err().to_string();
        assert!(err.contains("symbolic link out of the workspace"), "{err}");
        assert!(!err.contains("PATH="), "{err}");
        std::fs::remove_file(&path).unwrap();
        std::fs::write(ws.join("inner.env"), "OPENAI_MODEL=m\n").unwrap();
        std::os::unix::fs::symlink("inner.env", &path).unwrap();
        assert_eq!(read_env_file(&path).unwrap()[MODEL_VAR], "m");
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("missing.env", &path).unwrap();
        assert!(read_env_file(&path).unwrap().is_empty());
        std::fs::remove_file(&path).unwrap();
        // The bad line is also the tail of a good one: the line that starts with it is named.
        std::fs::write(&path, "A=x y\n\n# c\nx y\nB=2\n").unwrap();
        let err = read_env_file(&path).unwrap_err();
        assert_eq!(err.code(), "config_env_file");
        let err = err.to_string();
        assert!(err.contains("line 4 is not"), "{err}");
        assert!(!err.contains("x y"), "{err}");
        std::fs::write(&path, b"A=\xff\n").unwrap();
        let err = read_env_file(&path).unwrap_err().to_string();
        assert!(err.contains("not valid UTF-8"), "{err}");
    }

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn an_untrusted_dotenv_never_changes_the_provider_or_key_the_person_chose() {
        let settings = ModelSettings::default();
        let resolved = |env: &HashMap<String, String>, dotenv: &HashMap<String, String>| {
            let (left, items) = split_dotenv_trust_against(dotenv.clone(), env, &settings);
            let config = ModelConfig::resolve(env, &left, &ModelOverrides::default());
            let kinds: Vec<(TrustKind, String)> =
                items.iter().map(|i| (i.kind, i.shown.clone())).collect();
            for item in &items {
                assert!(!item.shown.contains("sk-") && !item.content.contains("sk-"));
            }
            (config, kinds)
        };
        // The person's Anthropic, inferred from their key: the .env's OpenAI key and model wait.
        let person = vars(&[
            (ANTHROPIC_API_KEY_VAR, "sk-ant-person"),
            (ANTHROPIC_MODEL_VAR, "claude"),
        ]);
        let attacker = vars(&[(MODEL_VAR, "gpt"), (API_KEY_VAR, "sk-attacker")]);
        let (config, kinds) = resolved(&person, &attacker);
        let config = config.unwrap();
        assert_eq!(config.provider, Provider::Anthropic);
        assert_eq!(config.api_key.expose(), "sk-ant-person");
        let why = "chooses the provider openai instead of your anthropic";
        assert_eq!(
            kinds,
            [
                (TrustKind::Provider, format!("{why} ({API_KEY_VAR})")),
                (TrustKind::Provider, format!("{why} ({MODEL_VAR})")),
            ]
        );
        // Nothing of the person's: the .env's key is "my key is in .env", and applies.
        for dotenv in [
            attacker.clone(),
            vars(&[(ANTHROPIC_API_KEY_VAR, "sk-ant-dotenv")]),
        ] {
            let (config, kinds) = resolved(&HashMap::new(), &dotenv);
            assert!(kinds.is_empty(), "{kinds:?}");
            assert!(config.is_ok() || dotenv.len() == 1);
        }
        // The person chose OpenAI by their model only: a .env key supplies the missing key.
        let (config, kinds) = resolved(
            &vars(&[(MODEL_VAR, "gpt")]),
            &vars(&[(API_KEY_VAR, "sk-dotenv"), (ANTHROPIC_API_KEY_VAR, "sk-x")]),
        );
        assert!(kinds.is_empty(), "{kinds:?}");
        assert_eq!(config.unwrap().api_key.expose(), "sk-dotenv");
        // Azure with the person's OPENAI_API_KEY: the .env's Azure key would be sent instead.
        let azure = vars(&[
            (PROVIDER_VAR, "azure"),
            (API_KEY_VAR, "sk-person"),
            (MODEL_VAR, "deployment"),
            (AZURE_ENDPOINT_VAR, "https://res.example"),
            (API_VERSION_VAR, "2024-10-21"),
        ]);
        let (config, kinds) = resolved(&azure, &vars(&[(AZURE_API_KEY_VAR, "sk-attacker")]));
        assert_eq!(config.unwrap().api_key.expose(), "sk-person");
        assert_eq!(
            kinds,
            [(
                TrustKind::ApiKey,
                format!("sends the API key in .env ({AZURE_API_KEY_VAR}) instead of yours")
            )]
        );
    }

    #[test]
    fn a_dotenv_keeps_its_key_and_model_but_not_the_server_or_provider_untrusted() {
        let vars: HashMap<String, String> = [
            (API_KEY_VAR, "sk-workspace"),
            (MODEL_VAR, "m"),
            (BASE_URL_VAR, "http://evil.example/v1"),
            (ANTHROPIC_BASE_URL_VAR, "  "),
            (AZURE_ENDPOINT_VAR, "https://res.example"),
            (PROVIDER_VAR, "azure"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let (left, items) = split_dotenv_trust(vars);
        let mut kept: Vec<&str> = left.keys().map(String::as_str).collect();
        kept.sort_unstable();
        assert_eq!(kept, [API_KEY_VAR, MODEL_VAR]);
        let taken: Vec<(&str, TrustKind)> = items.iter().map(|i| (i.file, i.kind)).collect();
        assert_eq!(
            taken,
            [
                (ENV_FILE_NAME, TrustKind::ModelServer),
                (ENV_FILE_NAME, TrustKind::ModelServer),
                (ENV_FILE_NAME, TrustKind::Provider),
            ]
        );
        assert_eq!(
            items[0].shown,
            "sends your API key to http://evil.example/v1 (OPENAI_BASE_URL)"
        );
    }
}
