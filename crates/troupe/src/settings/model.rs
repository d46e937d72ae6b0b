//! `[model]`: which models answer. The table as written, its checks, the merge (project over
//! user per key; `[model.agents]` per agent name, project over user), and what of it needs trust
//! (`base_url` and `provider`: where the key goes, and which key).
//!
//! `model`, `fallback_model` and `api_version` non-blank; `provider` one of [`PROVIDERS`];
//! `base_url` an `http://` or `https://` URL; `context_window` an integer of at least
//! [`MIN_CONTEXT_WINDOW`] tokens; `[model.agents]` agent name = model name, not blank.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::error::SettingsError;
use super::section::{first, needs_trust, Layers, Spans};
use super::trust::{TrustItem, TrustKind};
use super::{ModelSettings, Sourced};

/// The values `[model] provider` may take (`model::config::Provider` names them the same).
pub const PROVIDERS: [&str; 3] = ["openai", "azure", "anthropic"];
/// The smallest context window a setting may give (as `--context-window`).
pub const MIN_CONTEXT_WINDOW: u32 = 1024;

/// `[model]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawModel {
    provider: Option<Spanned<String>>,
    api_version: Option<Spanned<String>>,
    model: Option<Spanned<String>>,
    base_url: Option<Spanned<String>>,
    fallback_model: Option<Spanned<String>>,
    context_window: Option<Spanned<i64>>,
    script: Option<Spanned<String>>,
    #[serde(default)]
    agents: BTreeMap<String, Spanned<String>>,
}

/// One file's `[model]`, checked.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedModel {
    provider: Option<String>,
    api_version: Option<String>,
    model: Option<String>,
    base_url: Option<String>,
    fallback_model: Option<String>,
    context_window: Option<u32>,
    /// `script`, resolved against the folder of the file that names it.
    script: Option<PathBuf>,
    agents: Vec<(String, String)>,
}

pub(super) fn parse(raw: RawModel, spans: &Spans<'_>) -> Result<ParsedModel, SettingsError> {
    let mut parsed = ParsedModel {
        model: spans.non_blank("model.model", raw.model)?,
        fallback_model: spans.non_blank("model.fallback_model", raw.fallback_model)?,
        api_version: spans.non_blank("model.api_version", raw.api_version)?,
        ..ParsedModel::default()
    };
    if let Some(provider) = raw.provider {
        let value = provider.get_ref().trim();
        if !PROVIDERS.contains(&value) {
            return Err(spans.invalid(
                provider.span().start,
                format!(
                    "`model.provider` must be one of {}, not {value:?}",
                    PROVIDERS.join(", ")
                ),
            ));
        }
        parsed.provider = Some(value.to_owned());
    }
    if let Some(url) = raw.base_url {
        let value = url.get_ref().trim();
        if !(value.starts_with("http://") || value.starts_with("https://")) || value.len() < 9 {
            return Err(spans.invalid(
                url.span().start,
                format!("`model.base_url` must be an http:// or https:// URL, not {value:?}"),
            ));
        }
        parsed.base_url = Some(value.to_owned());
    }
    if let Some(window) = raw.context_window {
        let value = *window.get_ref();
        let tokens = u32::try_from(value)
            .ok()
            .filter(|&t| t >= MIN_CONTEXT_WINDOW)
            .ok_or_else(|| {
                spans.invalid(
                    window.span().start,
                    format!(
                        "`model.context_window` must be a number of tokens from \
                         {MIN_CONTEXT_WINDOW} to {}, not {value}",
                        u32::MAX
                    ),
                )
            })?;
        parsed.context_window = Some(tokens);
    }
    if let Some(script) = raw.script {
        parsed.script = Some(script_path(script, spans)?);
    }
    for (name, model) in raw.agents {
        if model.get_ref().trim().is_empty() {
            return Err(spans.invalid(
                model.span().start,
                format!("`model.agents.{name}` must not be blank"),
            ));
        }
        parsed
            .agents
            .push((name, model.into_inner().trim().to_owned()));
    }
    Ok(parsed)
}

/// `model.script`: a file beside the settings file (or below its folder), named relatively.
fn script_path(script: Spanned<String>, spans: &Spans<'_>) -> Result<PathBuf, SettingsError> {
    let value = script.get_ref().trim();
    let relative = Path::new(value);
    let inside = !value.is_empty()
        && relative.is_relative()
        && relative
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        && relative
            .components()
            .any(|c| matches!(c, Component::Normal(_)));
    if !inside {
        return Err(spans.invalid(
            script.span().start,
            format!(
                "`model.script` must name a file relative to the settings file's folder,                  without `..`, not {value:?}"
            ),
        ));
    }
    let folder = spans.path.parent().unwrap_or(Path::new("."));
    Ok(folder.join(relative))
}

/// Project over user, per key; per-agent models by agent name, project over user.
pub(super) fn merge(layers: &Layers<'_, ParsedModel>) -> ModelSettings {
    let mut agents: BTreeMap<String, Sourced<String>> = BTreeMap::new();
    for (source, model) in layers.iter().rev() {
        for (name, value) in &model.agents {
            agents.insert(
                name.clone(),
                Sourced {
                    value: value.clone(),
                    source: (*source).clone(),
                },
            );
        }
    }
    ModelSettings {
        provider: first(layers, |m| m.provider.clone()),
        api_version: first(layers, |m| m.api_version.clone()),
        model: first(layers, |m| m.model.clone()),
        base_url: first(layers, |m| m.base_url.clone()),
        fallback_model: first(layers, |m| m.fallback_model.clone()),
        context_window: first(layers, |m| m.context_window),
        script: first(layers, |m| m.script.clone()),
        agents: agents.into_iter().collect(),
    }
}

/// Takes out of a project's `[model]` what needs trust: `base_url`, then `provider`, then `script`.
pub(super) fn split_trust(model: &mut ParsedModel, items: &mut Vec<TrustItem>) {
    if let Some(url) = model.base_url.take() {
        items.push(needs_trust(
            TrustKind::ModelServer,
            format!("sends your API key to {url} ([model] base_url)"),
            url,
        ));
    }
    if let Some(provider) = model.provider.take() {
        items.push(needs_trust(
            TrustKind::Provider,
            format!("chooses the provider {provider} ([model] provider)"),
            provider,
        ));
    }
    if let Some(script) = model.script.take() {
        // Not a server and no key, but it decides what every agent's calls are.
        items.push(needs_trust(
            TrustKind::Provider,
            format!(
                "answers every agent from the script {} instead of a model ([model] script)",
                script.display()
            ),
            script.display().to_string(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::files::PROJECT_FILE_NAME;
    use super::super::section::testing::{load_err, workspace};
    use super::super::{Settings, SettingsErrorKind as Kind, Source, Sourced};

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
    fn a_script_is_a_file_beside_the_settings_and_waits_for_trust() {
        let dir = workspace(Some("[model]\nscript = \"troupe.script.json\"\n"));
        let reviewed = Settings::load_reviewed(dir.path(), None).unwrap();
        let script = reviewed.trusted.model.script.unwrap();
        assert_eq!(
            script.value,
            dir.path().join("troupe.script.json"),
            "resolved against the file's folder"
        );
        assert_eq!(reviewed.untrusted.model.script, None);
        assert_eq!(reviewed.items.len(), 1);
        assert!(
            reviewed.items[0].shown.contains("[model] script"),
            "{:?}",
            reviewed.items
        );
        for bad in ["/tmp/s.json", "../s.json", " ", "a/../../s.json"] {
            let err = load_err(&format!("[model]\nscript = \"{bad}\"\n"));
            assert_eq!((err.kind, err.line), (Kind::Invalid, Some(2)), "{bad}");
            assert!(err.message.contains("`model.script`"), "{err}");
        }
    }
}
