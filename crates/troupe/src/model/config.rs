//! Model configuration (SPEC §8): which server, key and model the OpenAI client uses.
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

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use crate::error::ErrorCode;
use crate::model::RetryPolicy;
use crate::secrets::{self, environment, Redactor};
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

/// Every variable this module reads, in the order they are documented.
pub const VARIABLES: [&str; 8] = [
    API_KEY_VAR,
    BASE_URL_VAR,
    MODEL_VAR,
    FALLBACK_MODEL_VAR,
    TIMEOUT_VAR,
    MAX_ATTEMPTS_VAR,
    OVERLOAD_FALLBACK_AFTER_VAR,
    DEADLINE_VAR,
];

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
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

/// Everything a model client needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// The wire format and endpoint conventions of the server.
    pub provider: Provider,
    /// Azure's `api-version` query value (required for [`Provider::Azure`]).
    pub api_version: Option<String>,
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
            pick_sourced(env, dotenv, flag, "", name, None).map(|s| s.value)
        };
        let effective = EffectiveModel::resolve(env, dotenv, overrides, settings);
        // A server on this machine (Ollama, llama.cpp) needs no key: none set means none sent.
        let api_key = pick(&overrides.api_key, API_KEY_VAR)
            .or_else(|| is_loopback(&effective.base_url.value).then(String::new));
        let model = effective.model.map(|s| s.value);
        let (api_key, model) = match (api_key, model) {
            (Some(api_key), Some(model)) => (api_key, model),
            (api_key, model) => {
                let names = [
                    (API_KEY_VAR, api_key.is_none()),
                    (MODEL_VAR, model.is_none()),
                ]
                .into_iter()
                .filter_map(|(name, missing)| missing.then_some(name))
                .collect();
                return Err(ConfigError::Missing { names });
            }
        };
        // Checked here because reqwest would only fail at send time, with a vague "builder error".
        if !api_key.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(ConfigError::Invalid {
                name: API_KEY_VAR,
                reason: "the key contains spaces or characters not allowed in an HTTP header"
                    .to_owned(),
            });
        }
        let base_url = effective.base_url.value;
        check_base_url(&base_url)?;
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
        Ok(Self {
            provider: Provider::OpenAi,
            api_version: None,
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
    pub model: Option<Sourced<String>>,
    pub base_url: Sourced<String>,
    pub fallback_model: Option<Sourced<String>>,
    /// Where the API key is set, if anywhere (the key is not kept).
    pub api_key_source: Option<Source>,
}

impl EffectiveModel {
    pub fn resolve(
        env: &HashMap<String, String>,
        dotenv: &HashMap<String, String>,
        overrides: &ModelOverrides,
        settings: &ModelSettings,
    ) -> Self {
        Self {
            model: pick_sourced(
                env,
                dotenv,
                &overrides.model,
                "--model",
                MODEL_VAR,
                settings.model.as_ref(),
            ),
            base_url: pick_sourced(
                env,
                dotenv,
                &overrides.base_url,
                "--base-url",
                BASE_URL_VAR,
                settings.base_url.as_ref(),
            )
            .unwrap_or_else(|| Sourced {
                value: DEFAULT_BASE_URL.to_owned(),
                source: Source::Default,
            }),
            fallback_model: pick_sourced(
                env,
                dotenv,
                &overrides.fallback_model,
                "--fallback-model",
                FALLBACK_MODEL_VAR,
                settings.fallback_model.as_ref(),
            ),
            api_key_source: pick_sourced(env, dotenv, &overrides.api_key, "", API_KEY_VAR, None)
                .map(|s| s.source),
        }
    }
}

/// The first non-blank of: the flag, the variable in the environment, in `.env`, the setting.
fn pick_sourced(
    env: &HashMap<String, String>,
    dotenv: &HashMap<String, String>,
    flag: &Option<String>,
    flag_name: &str,
    var: &str,
    setting: Option<&Sourced<String>>,
) -> Option<Sourced<String>> {
    let candidates = [
        flag.as_ref()
            .map(|v| (v, Source::Flag(flag_name.to_owned()))),
        env.get(var).map(|v| (v, Source::Env(var.to_owned()))),
        dotenv.get(var).map(|v| (v, Source::DotEnv(var.to_owned()))),
        setting.map(|s| (&s.value, s.source.clone())),
    ];
    candidates
        .into_iter()
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

/// A `.env` file larger than this is refused (it holds a handful of variables).
pub const MAX_ENV_FILE_BYTES: u64 = 1024 * 1024;

/// The variables of a `.env` file (dotenvy's syntax); a missing file is an empty map. Only a
/// regular file is read (a symlink to one is followed): a FIFO or device is refused at once
/// rather than blocking the start of a run.
pub fn read_env_file(path: &Path) -> Result<HashMap<String, String>, ConfigError> {
    let env_file_error = |reason: String| ConfigError::EnvFile {
        path: path.display().to_string(),
        reason,
    };
    let bytes = match read_regular(path, Links::Follow, MAX_ENV_FILE_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(HashMap::new()),
        Err(err) => return Err(env_file_error(err.source.to_string())),
    };
    let mut vars = HashMap::new();
    for entry in dotenvy::from_read_iter(bytes.as_slice()) {
        let (name, value) = entry.map_err(|err| env_file_error(err.to_string()))?;
        vars.insert(name, value);
    }
    Ok(vars)
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

fn check_base_url(raw: &str) -> Result<(), ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid {
        name: BASE_URL_VAR,
        reason,
    };
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
