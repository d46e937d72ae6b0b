//! Model configuration: precedence (flags > process env > `<workspace>/.env` > defaults), missing
//! variables named, invalid values refused. The process environment is injected as a map.

use std::collections::HashMap;
use std::time::Duration;

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::model::config::{ApiKey, ConfigError, ModelConfig, ModelOverrides, DEFAULT_BASE_URL};
use troupe::model::RetryPolicy;

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn workspace_with_dotenv(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), text).unwrap();
    dir
}

fn load(
    process: &[(&str, &str)],
    dotenv: &str,
    overrides: &ModelOverrides,
) -> Result<ModelConfig, ConfigError> {
    let workspace = workspace_with_dotenv(dotenv);
    ModelConfig::load_with_env(&env(process), workspace.path(), overrides)
}

#[test]
fn defaults_apply_to_everything_but_key_and_model() {
    let config = load(
        &[("OPENAI_API_KEY", "sk-env"), ("OPENAI_MODEL", "gpt-env")],
        "",
        &ModelOverrides::default(),
    )
    .unwrap();

    assert_eq!(
        config,
        ModelConfig {
            provider: troupe::model::config::Provider::OpenAi,
            api_version: None,
            max_tokens: None,
            thinking_budget: None,
            api_key: ApiKey::new("sk-env"),
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: "gpt-env".to_owned(),
            fallback_model: None,
            timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
            overload_fallback_after: 2,
            deadline: Duration::from_secs(600),
        }
    );
    assert_eq!(DEFAULT_BASE_URL, "https://api.openai.com/v1");
    assert_eq!(config.retry.max_attempts, 3);
}

#[test]
fn process_env_wins_over_dotenv_and_dotenv_fills_the_rest() {
    let config = load(
        &[
            ("OPENAI_MODEL", "gpt-env"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:1/v1"),
        ],
        "# local settings\nOPENAI_API_KEY=sk-dotenv\nexport OPENAI_MODEL=\"gpt-dotenv\"\n\
         OPENAI_BASE_URL=http://dotenv.invalid/v1\nOPENAI_FALLBACK_MODEL='gpt-small'\n\
         TROUPE_MODEL_TIMEOUT_SECS=30\nTROUPE_MODEL_MAX_ATTEMPTS=5\n",
        &ModelOverrides::default(),
    )
    .unwrap();

    assert_eq!(config.api_key.expose(), "sk-dotenv");
    assert_eq!(config.model, "gpt-env");
    assert_eq!(config.base_url, "http://127.0.0.1:1/v1");
    assert_eq!(config.fallback_model.as_deref(), Some("gpt-small"));
    assert_eq!(config.timeout, Duration::from_secs(30));
    assert_eq!(config.retry.max_attempts, 5);
}

#[test]
fn overrides_win_over_env_and_dotenv() {
    let overrides = ModelOverrides {
        provider: None,
        api_key: Some("sk-flag".to_owned()),
        base_url: Some("http://flag.invalid/v1/".to_owned()),
        model: Some("gpt-flag".to_owned()),
        fallback_model: Some("gpt-flag-small".to_owned()),
        timeout: Some(Duration::from_secs(7)),
        max_attempts: Some(1),
    };
    let both = "OPENAI_API_KEY=sk-x\nOPENAI_MODEL=gpt-x\nOPENAI_BASE_URL=http://x.invalid\n\
                OPENAI_FALLBACK_MODEL=gpt-y\nTROUPE_MODEL_TIMEOUT_SECS=9\nTROUPE_MODEL_MAX_ATTEMPTS=9\n";
    let process: Vec<(&str, &str)> = both
        .lines()
        .map(|line| line.split_once('=').unwrap())
        .collect();

    let config = load(&process, both, &overrides).unwrap();

    assert_eq!(config.api_key.expose(), "sk-flag");
    assert_eq!(config.model, "gpt-flag");
    assert_eq!(config.base_url, "http://flag.invalid/v1/");
    assert_eq!(config.fallback_model.as_deref(), Some("gpt-flag-small"));
    assert_eq!(config.timeout, Duration::from_secs(7));
    assert_eq!(config.retry.max_attempts, 1);
}

#[test]
fn blank_values_count_as_unset_at_every_level() {
    let config = load(
        &[
            ("OPENAI_API_KEY", "  "),
            ("OPENAI_MODEL", ""),
            ("OPENAI_FALLBACK_MODEL", ""),
        ],
        "OPENAI_API_KEY=sk-dotenv\nOPENAI_MODEL=gpt-dotenv\n",
        &ModelOverrides {
            model: Some(String::new()),
            ..ModelOverrides::default()
        },
    )
    .unwrap();

    assert_eq!(config.api_key.expose(), "sk-dotenv");
    assert_eq!(config.model, "gpt-dotenv");
    assert_eq!(config.fallback_model, None);
}

#[test]
fn missing_variables_are_all_named() {
    let error = load(&[], "", &ModelOverrides::default()).unwrap_err();
    assert_eq!(error.code(), "config_missing");
    assert_eq!(
        error.to_string(),
        "missing model configuration: OPENAI_API_KEY, OPENAI_MODEL (set in the environment or in <workspace>/.env)"
    );

    let only_model = load(
        &[("OPENAI_API_KEY", "sk-secret")],
        "",
        &ModelOverrides::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&only_model, ConfigError::Missing { names } if names == &["OPENAI_MODEL"]),
        "{only_model:?}"
    );
    assert!(!only_model.to_string().contains("sk-secret"));

    let only_key = load(&[], "OPENAI_MODEL=gpt-dotenv\n", &ModelOverrides::default()).unwrap_err();
    assert!(
        matches!(&only_key, ConfigError::Missing { names } if names == &["OPENAI_API_KEY"]),
        "{only_key:?}"
    );
}

#[test]
fn missing_workspace_dotenv_is_fine() {
    let workspace = tempfile::tempdir().unwrap();
    let config = ModelConfig::load_with_env(
        &env(&[("OPENAI_API_KEY", "sk"), ("OPENAI_MODEL", "m")]),
        workspace.path(),
        &ModelOverrides::default(),
    )
    .unwrap();
    assert_eq!(config.model, "m");
}

#[test]
fn invalid_values_are_refused_naming_the_variable() {
    let base = [("OPENAI_API_KEY", "sk"), ("OPENAI_MODEL", "m")];
    for (name, value) in [
        ("TROUPE_MODEL_TIMEOUT_SECS", "0"),
        ("TROUPE_MODEL_TIMEOUT_SECS", "soon"),
        ("TROUPE_MODEL_MAX_ATTEMPTS", "0"),
        ("TROUPE_MODEL_MAX_ATTEMPTS", "-1"),
        ("TROUPE_MODEL_MAX_ATTEMPTS", "99999999999"),
        ("OPENAI_BASE_URL", "api.openai.com/v1"),
        ("OPENAI_API_KEY", "sk-with space"),
        ("OPENAI_API_KEY", "sk-naïve"),
        ("OPENAI_BASE_URL", "ftp://example.com/v1"),
    ] {
        let mut process: Vec<_> = base.iter().filter(|(n, _)| *n != name).copied().collect();
        process.push((name, value));
        let error = load(&process, "", &ModelOverrides::default()).unwrap_err();
        assert_eq!(error.code(), "config_invalid", "{name}={value}");
        assert!(
            error.to_string().starts_with(&format!("invalid {name}: ")),
            "{error}"
        );
        assert!(!error.to_string().contains("sk-"), "leaks the key: {error}");
    }
}

#[test]
fn unparsable_dotenv_is_an_error_naming_the_file() {
    let workspace = workspace_with_dotenv("OPENAI_MODEL='unterminated\n");
    let error = ModelConfig::load_with_env(
        &env(&[("OPENAI_API_KEY", "sk")]),
        workspace.path(),
        &ModelOverrides::default(),
    )
    .unwrap_err();
    assert_eq!(error.code(), "config_env_file");
    assert!(error.to_string().contains(".env"), "{error}");
}

#[test]
fn loading_dotenv_does_not_change_the_process_environment() {
    let before = std::env::var_os("TROUPE_MODEL_MAX_ATTEMPTS");
    let config = load(
        &[("OPENAI_API_KEY", "sk"), ("OPENAI_MODEL", "m")],
        "TROUPE_MODEL_MAX_ATTEMPTS=4\n",
        &ModelOverrides::default(),
    )
    .unwrap();
    assert_eq!(config.retry.max_attempts, 4);
    assert_eq!(std::env::var_os("TROUPE_MODEL_MAX_ATTEMPTS"), before);
}

#[test]
fn debug_of_a_config_hides_the_key() {
    let config = ModelConfig::new("sk-very-secret", "m");
    let debug = format!("{config:?}");
    assert!(!debug.contains("sk-very-secret"), "{debug}");
    assert!(debug.contains("ApiKey([redacted])"), "{debug}");
}

#[test]
fn a_dotenv_that_is_not_a_regular_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    crate::jobs::make_fifo(&dir.path().join(".env"));
    let workspace = dir.path().to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let loaded = ModelConfig::load_with_env(
            &env(&[("OPENAI_API_KEY", "sk-0123456789"), ("OPENAI_MODEL", "m")]),
            &workspace,
            &ModelOverrides::default(),
        );
        let _ = tx.send(loaded);
    });
    let error = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("reading a FIFO .env blocked")
        .unwrap_err();
    assert_eq!(error.code(), "config_env_file");
    assert!(error.to_string().contains(".env"), "{error}");
    assert!(error.to_string().contains("a FIFO"), "{error}");
}

#[test]
fn the_redactor_of_a_config_removes_its_key() {
    let config = ModelConfig::new("sk-very-secret", "m");
    assert_eq!(
        config.redactor().redact("key=sk-very-secret."),
        "key=[redacted]."
    );
    // A placeholder key (local servers ignore it) is not worth blotting out of every result.
    assert!(ModelConfig::new("ollama", "m").redactor().is_empty());
}

#[test]
fn overload_threshold_and_deadline_come_from_env_or_dotenv() {
    let config = load(
        &[("TROUPE_MODEL_DEADLINE_SECS", "90")],
        "OPENAI_API_KEY=sk\nOPENAI_MODEL=m\nTROUPE_MODEL_OVERLOAD_FALLBACK_AFTER=4\n\
         TROUPE_MODEL_DEADLINE_SECS=30\n",
        &ModelOverrides::default(),
    )
    .unwrap();

    assert_eq!(config.overload_fallback_after, 4);
    assert_eq!(config.deadline, Duration::from_secs(90));
    assert!(troupe::model::config::VARIABLES.contains(&"TROUPE_MODEL_OVERLOAD_FALLBACK_AFTER"));
    assert!(troupe::model::config::VARIABLES.contains(&"TROUPE_MODEL_DEADLINE_SECS"));
}

#[test]
fn zero_or_garbage_overload_threshold_and_deadline_are_refused() {
    for (name, value) in [
        ("TROUPE_MODEL_OVERLOAD_FALLBACK_AFTER", "0"),
        ("TROUPE_MODEL_OVERLOAD_FALLBACK_AFTER", "two"),
        ("TROUPE_MODEL_DEADLINE_SECS", "0"),
        ("TROUPE_MODEL_DEADLINE_SECS", "-5"),
    ] {
        let error = load(
            &[
                ("OPENAI_API_KEY", "sk"),
                ("OPENAI_MODEL", "m"),
                (name, value),
            ],
            "",
            &ModelOverrides::default(),
        )
        .unwrap_err();
        assert_eq!(error.code(), "config_invalid", "{name}={value}");
        assert!(error.to_string().contains(name), "{error}");
    }
}

/// The settings files' `[model]` values come after flags, environment and `.env`, before the
/// defaults; the key never comes from them.
#[test]
fn settings_come_between_dotenv_and_the_defaults() {
    use troupe::settings::{ModelSettings, Source, Sourced};
    let project = |value: &str| {
        Some(Sourced {
            value: value.to_owned(),
            source: Source::Project("/ws/troupe.toml".into()),
        })
    };
    let settings = ModelSettings {
        model: project("m-toml"),
        base_url: project("http://127.0.0.1:9/v1"),
        fallback_model: project("fb-toml"),
        ..ModelSettings::default()
    };
    let resolve = |process: &[(&str, &str)], dotenv: &[(&str, &str)], flags: &ModelOverrides| {
        ModelConfig::resolve_layers(&env(process), &env(dotenv), flags, &settings)
    };
    let key = [("OPENAI_API_KEY", "sk-env")];
    let c = resolve(&key, &[], &ModelOverrides::default()).unwrap();
    assert_eq!(
        (
            c.model.as_str(),
            c.base_url.as_str(),
            c.fallback_model.as_deref()
        ),
        ("m-toml", "http://127.0.0.1:9/v1", Some("fb-toml"))
    );
    let c = resolve(
        &key,
        &[("OPENAI_MODEL", "m-dotenv")],
        &ModelOverrides::default(),
    )
    .unwrap();
    assert_eq!(c.model, "m-dotenv");
    let c = resolve(
        &[("OPENAI_API_KEY", "sk-env"), ("OPENAI_MODEL", "m-env")],
        &[("OPENAI_MODEL", "m-dotenv")],
        &ModelOverrides::default(),
    )
    .unwrap();
    assert_eq!(c.model, "m-env");
    let flags = ModelOverrides {
        model: Some("m-flag".into()),
        ..ModelOverrides::default()
    };
    assert_eq!(
        resolve(
            &[("OPENAI_MODEL", "m-env"), ("OPENAI_API_KEY", "k")],
            &[],
            &flags
        )
        .unwrap()
        .model,
        "m-flag"
    );
    // Settings hold no key: the model alone is enough only because the settings' base URL is
    // on loopback (a local server needs no key)…
    let c = resolve(&[], &[], &ModelOverrides::default()).unwrap();
    assert_eq!(c.api_key, ApiKey::new(""));
    // …anywhere else a key must be set in env or .env.
    let remote = ModelOverrides {
        base_url: Some("https://models.example.com/v1".to_owned()),
        ..ModelOverrides::default()
    };
    let err = resolve(&[], &[], &remote).unwrap_err();
    assert_eq!(err.to_string(), "missing model configuration: OPENAI_API_KEY (set in the environment or in <workspace>/.env)");
    // Blank settings values fall through to the defaults like blank variables.
    let blank = ModelSettings::default();
    let c = ModelConfig::resolve_layers(
        &env(&[("OPENAI_API_KEY", "k"), ("OPENAI_MODEL", "m")]),
        &env(&[]),
        &ModelOverrides::default(),
        &blank,
    )
    .unwrap();
    assert_eq!(c.base_url, DEFAULT_BASE_URL);
}

#[test]
fn the_key_is_optional_only_for_a_base_url_on_loopback() {
    for base_url in [
        "http://127.0.0.1:11434/v1",
        "http://localhost:8080/v1",
        "http://LOCALHOST/v1",
        "http://[::1]:8000/v1",
        "http://127.0.0.2/v1",
    ] {
        let config = load(
            &[("OPENAI_MODEL", "llama"), ("OPENAI_BASE_URL", base_url)],
            "",
            &ModelOverrides::default(),
        )
        .unwrap_or_else(|e| panic!("{base_url}: {e}"));
        assert_eq!(config.api_key, ApiKey::new(""), "{base_url}");
    }
    // A key set anywhere is still used on loopback.
    let config = load(
        &[
            ("OPENAI_MODEL", "llama"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
        ],
        "OPENAI_API_KEY=sk-local\n",
        &ModelOverrides::default(),
    )
    .unwrap();
    assert_eq!(config.api_key, ApiKey::new("sk-local"));
    // Anywhere else (a name that merely starts like loopback too) it is required.
    for base_url in [
        "https://api.openai.com/v1",
        "http://localhost.example.com/v1",
        "http://10.0.0.1/v1",
    ] {
        let error = load(
            &[("OPENAI_MODEL", "gpt"), ("OPENAI_BASE_URL", base_url)],
            "",
            &ModelOverrides::default(),
        )
        .unwrap_err();
        assert_eq!(error.code(), "config_missing", "{base_url}");
        assert!(
            matches!(&error, ConfigError::Missing { names } if names == &["OPENAI_API_KEY"]),
            "{error:?}"
        );
    }
}

// ---------------------------------------------------------------- providers

fn resolve_with(
    process: &[(&str, &str)],
    dotenv: &[(&str, &str)],
    flags: &ModelOverrides,
    settings: &troupe::settings::ModelSettings,
) -> Result<ModelConfig, ConfigError> {
    ModelConfig::resolve_layers(&env(process), &env(dotenv), flags, settings)
}

fn effective(
    process: &[(&str, &str)],
    dotenv: &[(&str, &str)],
    flags: &ModelOverrides,
    settings: &troupe::settings::ModelSettings,
) -> troupe::model::config::EffectiveModel {
    troupe::model::config::EffectiveModel::resolve(&env(process), &env(dotenv), flags, settings)
        .unwrap()
}

fn project(value: &str) -> Option<troupe::settings::Sourced<String>> {
    Some(troupe::settings::Sourced {
        value: value.to_owned(),
        source: troupe::settings::Source::Project("/ws/troupe.toml".into()),
    })
}

#[test]
fn an_anthropic_key_without_openai_settings_infers_anthropic() {
    use troupe::model::config::{Provider, INFERRED_ANTHROPIC};
    use troupe::settings::{ModelSettings, Source};
    let none = ModelSettings::default();
    let flags = ModelOverrides::default();
    let anthropic = [
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("ANTHROPIC_MODEL", "claude-env"),
    ];
    // In the environment or in .env alike.
    for (process, dotenv) in [(&anthropic[..], &[][..]), (&[][..], &anthropic[..])] {
        let c = resolve_with(process, dotenv, &flags, &none).unwrap();
        assert_eq!(c.provider, Provider::Anthropic);
        assert_eq!(c.api_key.expose(), "sk-ant");
        assert_eq!(c.model, "claude-env");
        assert_eq!(c.base_url, "https://api.anthropic.com");
        assert_eq!(c.api_version, None);
        assert_eq!(
            effective(process, dotenv, &flags, &none).provider.source,
            Source::Inferred(INFERRED_ANTHROPIC.to_owned())
        );
    }
    // Any OpenAI setting, in either place, keeps OpenAI.
    for openai in ["OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"] {
        for in_dotenv in [false, true] {
            let setting = [(openai, "x")];
            let (process, dotenv): (Vec<_>, Vec<_>) = if in_dotenv {
                (anthropic.to_vec(), setting.to_vec())
            } else {
                ([&anthropic[..], &setting[..]].concat(), vec![])
            };
            let e = effective(&process, &dotenv, &flags, &none);
            assert_eq!(
                e.provider.value,
                Provider::OpenAi,
                "{openai} in .env: {in_dotenv}"
            );
            assert_eq!(e.provider.source, Source::Default);
        }
    }
    // A blank Anthropic key infers nothing.
    let e = effective(&[("ANTHROPIC_API_KEY", " ")], &[], &flags, &none);
    assert_eq!(e.provider.value, Provider::OpenAi);
    // Nothing at all: OpenAI, and the OpenAI variables are the ones missing.
    let err = resolve_with(&[], &[], &flags, &none).unwrap_err();
    assert_eq!(
        err.to_string(),
        "missing model configuration: OPENAI_API_KEY, OPENAI_MODEL (set in the environment or in <workspace>/.env)"
    );
}

#[test]
fn the_provider_comes_from_the_flag_then_env_then_dotenv_then_settings() {
    use troupe::model::config::Provider;
    use troupe::settings::{ModelSettings, Source};
    let settings = ModelSettings {
        provider: project("azure"),
        ..ModelSettings::default()
    };
    let flag = ModelOverrides {
        provider: Some(Provider::Anthropic),
        ..ModelOverrides::default()
    };
    let none = ModelOverrides::default();
    let env_openai = [("TROUPE_PROVIDER", "openai")];
    let dotenv_anthropic = [("TROUPE_PROVIDER", "anthropic")];
    // All 16 combinations of flag, env, .env, settings.
    for mask in 0u32..16 {
        let has = |bit: u32| mask & (1 << bit) != 0;
        let flags = if has(0) { &flag } else { &none };
        let process: &[(&str, &str)] = if has(1) { &env_openai } else { &[] };
        let dotenv: &[(&str, &str)] = if has(2) { &dotenv_anthropic } else { &[] };
        let settings = if has(3) {
            settings.clone()
        } else {
            ModelSettings::default()
        };
        let e = effective(process, dotenv, flags, &settings);
        let expected = if has(0) {
            (Provider::Anthropic, Source::Flag("--provider".into()))
        } else if has(1) {
            (Provider::OpenAi, Source::Env("TROUPE_PROVIDER".into()))
        } else if has(2) {
            (
                Provider::Anthropic,
                Source::DotEnv("TROUPE_PROVIDER".into()),
            )
        } else if has(3) {
            (Provider::Azure, Source::Project("/ws/troupe.toml".into()))
        } else {
            (Provider::OpenAi, Source::Default)
        };
        assert_eq!(
            (e.provider.value, e.provider.source),
            expected,
            "mask {mask:04b}"
        );
    }
    // An explicit provider beats inference.
    let e = effective(
        &[("ANTHROPIC_API_KEY", "k"), ("TROUPE_PROVIDER", "openai")],
        &[],
        &none,
        &ModelSettings::default(),
    );
    assert_eq!(e.provider.value, Provider::OpenAi);
    // A name that is not a provider is refused, naming the variable.
    let err = resolve_with(
        &[("TROUPE_PROVIDER", "gemini")],
        &[],
        &none,
        &ModelSettings::default(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "config_invalid");
    assert!(err.to_string().contains("TROUPE_PROVIDER"), "{err}");
    assert!(
        err.to_string().contains("openai, azure or anthropic"),
        "{err}"
    );
}

#[test]
fn anthropic_takes_its_own_variables_and_the_shared_flags_and_settings() {
    use troupe::model::config::Provider;
    use troupe::settings::ModelSettings;
    let settings = ModelSettings {
        provider: project("anthropic"),
        model: project("claude-toml"),
        base_url: project("http://127.0.0.1:7"),
        ..ModelSettings::default()
    };
    let none = ModelOverrides::default();
    // OPENAI_* values are not Anthropic's.
    let c = resolve_with(
        &[
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("OPENAI_API_KEY", "sk-openai"),
            ("OPENAI_MODEL", "gpt-x"),
            ("OPENAI_BASE_URL", "http://openai.invalid/v1"),
        ],
        &[],
        &none,
        &settings,
    )
    .unwrap();
    assert_eq!(
        (
            c.provider,
            c.api_key.expose(),
            c.model.as_str(),
            c.base_url.as_str()
        ),
        (
            Provider::Anthropic,
            "sk-ant",
            "claude-toml",
            "http://127.0.0.1:7"
        )
    );
    let c = resolve_with(
        &[
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("ANTHROPIC_MODEL", "claude-env"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:8"),
            ("TROUPE_MODEL_MAX_TOKENS", "4096"),
            ("TROUPE_THINKING_BUDGET", "2048"),
        ],
        &[],
        &none,
        &settings,
    )
    .unwrap();
    assert_eq!(
        (
            c.model.as_str(),
            c.base_url.as_str(),
            c.max_tokens,
            c.thinking_budget
        ),
        ("claude-env", "http://127.0.0.1:8", Some(4096), Some(2048))
    );
    let flags = ModelOverrides {
        model: Some("claude-flag".into()),
        base_url: Some("http://127.0.0.1:9".into()),
        ..ModelOverrides::default()
    };
    let c = resolve_with(
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-api03-Qw8Er4Ty2Ui6Op0"),
            ("ANTHROPIC_MODEL", "claude-env"),
        ],
        &[],
        &flags,
        &settings,
    )
    .unwrap();
    assert_eq!(
        (c.model.as_str(), c.base_url.as_str()),
        ("claude-flag", "http://127.0.0.1:9")
    );
    // The config's redactor holds the Anthropic key.
    let shown = c
        .redactor()
        .redact("the key is sk-ant-api03-Qw8Er4Ty2Ui6Op0!");
    assert!(!shown.contains("Qw8Er4Ty2Ui6Op0"), "{shown}");
    assert!(shown.starts_with("the key is "), "{shown}");
    // Missing: the Anthropic names.
    let err = resolve_with(
        &[("OPENAI_API_KEY", "sk"), ("OPENAI_MODEL", "gpt")],
        &[],
        &ModelOverrides {
            provider: Some(Provider::Anthropic),
            ..ModelOverrides::default()
        },
        &ModelSettings::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "missing model configuration: ANTHROPIC_API_KEY, ANTHROPIC_MODEL (set in the environment or in <workspace>/.env)"
    );
    // Garbage token limits are refused, naming the variable.
    for (name, value) in [
        ("TROUPE_MODEL_MAX_TOKENS", "0"),
        ("TROUPE_THINKING_BUDGET", "lots"),
    ] {
        let err = resolve_with(
            &[
                ("ANTHROPIC_API_KEY", "k"),
                ("ANTHROPIC_MODEL", "c"),
                (name, value),
            ],
            &[],
            &none,
            &ModelSettings::default(),
        )
        .unwrap_err();
        assert_eq!(err.code(), "config_invalid");
        assert!(err.to_string().contains(name), "{err}");
    }
}

#[test]
fn azure_needs_a_key_an_endpoint_and_an_api_version() {
    use troupe::model::config::Provider;
    use troupe::settings::{ModelSettings, Source};
    let azure = ModelOverrides {
        provider: Some(Provider::Azure),
        ..ModelOverrides::default()
    };
    let none = ModelSettings::default();
    let err = resolve_with(&[], &[], &azure, &none).unwrap_err();
    assert_eq!(err.code(), "config_missing");
    assert_eq!(
        err.to_string(),
        "missing model configuration: AZURE_OPENAI_API_KEY, OPENAI_MODEL, AZURE_OPENAI_ENDPOINT, \
         OPENAI_API_VERSION (set in the environment or in <workspace>/.env)"
    );
    // Only the api-version missing: it alone is named.
    let err = resolve_with(
        &[
            ("AZURE_OPENAI_API_KEY", "azk"),
            ("OPENAI_MODEL", "gpt-deploy"),
            ("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com"),
        ],
        &[],
        &azure,
        &none,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("missing model configuration: OPENAI_API_VERSION ("),
        "{err}"
    );
    // The Azure names win over the OpenAI ones, even from .env over the environment.
    let c = resolve_with(
        &[
            ("OPENAI_API_KEY", "sk-openai"),
            ("OPENAI_BASE_URL", "https://other.invalid/v1"),
            ("OPENAI_MODEL", "gpt-deploy"),
            ("AZURE_OPENAI_API_VERSION", "2024-10-21"),
        ],
        &[
            ("AZURE_OPENAI_API_KEY", "azk"),
            ("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com"),
            ("OPENAI_API_VERSION", "2025-01-01-preview"),
        ],
        &azure,
        &none,
    )
    .unwrap();
    assert_eq!(
        (
            c.provider,
            c.api_key.expose(),
            c.base_url.as_str(),
            c.api_version.as_deref()
        ),
        (
            Provider::Azure,
            "azk",
            "https://res.openai.azure.com",
            Some("2025-01-01-preview")
        )
    );
    // Falling back to OPENAI_API_KEY, OPENAI_BASE_URL and the settings' api_version.
    let settings = ModelSettings {
        provider: project("azure"),
        api_version: project("2024-06-01"),
        ..ModelSettings::default()
    };
    let c = resolve_with(
        &[
            ("OPENAI_API_KEY", "sk-openai"),
            ("OPENAI_BASE_URL", "https://res2.openai.azure.com"),
            ("OPENAI_MODEL", "gpt-deploy"),
        ],
        &[],
        &ModelOverrides::default(),
        &settings,
    )
    .unwrap();
    assert_eq!(
        (
            c.api_key.expose(),
            c.base_url.as_str(),
            c.api_version.as_deref()
        ),
        (
            "sk-openai",
            "https://res2.openai.azure.com",
            Some("2024-06-01")
        )
    );
    let e = effective(&[], &[], &ModelOverrides::default(), &settings);
    assert_eq!(
        e.api_version.map(|s| s.source),
        Some(Source::Project("/ws/troupe.toml".into()))
    );
    assert_eq!(e.base_url, None, "Azure has no default endpoint");
}
