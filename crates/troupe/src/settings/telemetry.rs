//! `[telemetry]`: where a run's OpenTelemetry traces go when the standard `OTEL_*` variables do
//! not say (they win, key by key: [`crate::telemetry::config`] lays them on top).
//!
//! ```toml
//! [telemetry]
//! endpoint = "http://127.0.0.1:4318"   # the OTLP/HTTP base URL; /v1/traces is appended
//! service_name = "troupe"              # default "troupe"
//! capture_content = false              # message and tool contents on spans (redacted)
//! ```
//!
//! There is no `headers` key: headers usually carry a collector's token, and a settings file
//! may be committed; they come from `OTEL_EXPORTER_OTLP_HEADERS` only.
//!
//! **Trust.** A workspace's own `endpoint` decides where a person's traces (prompts' shapes,
//! agent and tool names, with `capture_content` their contents) are sent: it **needs trust**,
//! and so does its `capture_content = true` (it sends more to whatever endpoint is in force).
//! Untrusted, the person's own config and variables apply.
//!
//! Project over user, per key.

use serde::Deserialize;
use toml::Spanned;

use super::error::SettingsError;
use super::section::{first, needs_trust, Layers, Spans};
use super::trust::{TrustItem, TrustKind};
use super::Sourced;

/// The longest service name accepted.
const MAX_SERVICE_NAME_CHARS: usize = 200;

/// `[telemetry]`, merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// `endpoint`: an `http://` or `https://` base URL of an OTLP/HTTP receiver.
    pub endpoint: Option<Sourced<String>>,
    /// `service_name`: the `service.name` of the exported resource.
    pub service_name: Option<Sourced<String>>,
    /// `capture_content`: message and tool contents on spans (redacted), default off.
    pub capture_content: Option<Sourced<bool>>,
}

/// `[telemetry]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    endpoint: Option<Spanned<String>>,
    service_name: Option<Spanned<String>>,
    capture_content: Option<bool>,
}

/// One file's `[telemetry]`, checked.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedTelemetry {
    endpoint: Option<String>,
    service_name: Option<String>,
    capture_content: Option<bool>,
}

pub(super) fn parse(
    raw: RawTelemetry,
    spans: &Spans<'_>,
) -> Result<ParsedTelemetry, SettingsError> {
    let mut parsed = ParsedTelemetry {
        capture_content: raw.capture_content,
        ..ParsedTelemetry::default()
    };
    if let Some(endpoint) = raw.endpoint {
        let at = endpoint.span().start;
        let url = endpoint.get_ref().trim();
        check_endpoint(url)
            .map_err(|why| spans.invalid(at, format!("telemetry.endpoint {why}")))?;
        parsed.endpoint = Some(url.to_owned());
    }
    if let Some(name) = spans.non_blank("telemetry.service_name", raw.service_name)? {
        if name.chars().count() > MAX_SERVICE_NAME_CHARS {
            return Err(spans.invalid(
                0,
                format!(
                    "`telemetry.service_name` is longer than {MAX_SERVICE_NAME_CHARS} characters"
                ),
            ));
        }
        parsed.service_name = Some(name);
    }
    Ok(parsed)
}

/// An OTLP/HTTP endpoint as troupe accepts it: an `http://` or `https://` URL with a host and
/// without credentials in it (a settings file may be committed).
pub fn check_endpoint(url: &str) -> Result<(), String> {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return Err(format!(
            "{url:?} is not an http:// or https:// URL (OTLP over HTTP is the only protocol)"
        ));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return Err(format!("{url:?} has no host"));
    }
    if authority.contains('@') {
        return Err(format!(
            "{url:?} holds credentials; put a collector's token in OTEL_EXPORTER_OTLP_HEADERS"
        ));
    }
    if url.chars().any(char::is_whitespace) {
        return Err(format!("{url:?} holds spaces"));
    }
    Ok(())
}

/// A workspace's own `endpoint`, and its `capture_content = true`, wait for trust.
pub(super) fn split_trust(telemetry: &mut ParsedTelemetry, items: &mut Vec<TrustItem>) {
    if let Some(endpoint) = telemetry.endpoint.take() {
        items.push(needs_trust(
            TrustKind::Telemetry,
            format!("sends the run's traces to {endpoint} ([telemetry] endpoint)"),
            format!("endpoint={endpoint}"),
        ));
    }
    if telemetry.capture_content == Some(true) {
        telemetry.capture_content = None;
        items.push(needs_trust(
            TrustKind::Telemetry,
            "puts message and tool contents on exported spans ([telemetry] capture_content)"
                .to_owned(),
            "capture_content=true".to_owned(),
        ));
    }
}

/// Project over user, per key.
pub(super) fn merge(layers: &Layers<'_, ParsedTelemetry>) -> TelemetrySettings {
    TelemetrySettings {
        endpoint: first(layers, |t| t.endpoint.clone()),
        service_name: first(layers, |t| t.service_name.clone()),
        capture_content: first(layers, |t| t.capture_content),
    }
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::{load_err, workspace};
    use super::super::Settings;
    use super::*;

    #[test]
    fn the_telemetry_section_loads_and_refuses_bad_values() {
        let dir = workspace(None);
        let user = dir.path().join("user.toml");
        std::fs::write(
            &user,
            "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\nservice_name = \"me\"\ncapture_content = true\n",
        )
        .unwrap();
        let settings = Settings::load(dir.path(), Some(&user)).unwrap();
        assert_eq!(
            settings.telemetry.endpoint.unwrap().value,
            "http://127.0.0.1:4318"
        );
        assert_eq!(settings.telemetry.service_name.unwrap().value, "me");
        assert!(settings.telemetry.capture_content.unwrap().value);
        for (bad, says) in [
            ("endpoint = \"grpc://x:4317\"", "http:// or https://"),
            ("endpoint = \"http://\"", "no host"),
            ("endpoint = \"https://u:p@x\"", "credentials"),
            ("service_name = \" \"", "must not be blank"),
            ("headers = \"a=b\"", "unknown key `headers`"),
        ] {
            let err = load_err(&format!("[telemetry]\n{bad}\n"));
            assert!(err.to_string().contains(says), "{bad}: {err}");
            assert!(err.to_string().contains(":2"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_workspace_s_endpoint_and_contents_wait_for_trust() {
        let dir = workspace(Some(
            "[telemetry]\nendpoint = \"https://collector.example\"\ncapture_content = true\nservice_name = \"proj\"\n",
        ));
        let reviewed = Settings::load_reviewed(dir.path(), None).unwrap();
        let waiting: Vec<_> = reviewed
            .items
            .iter()
            .filter(|i| i.kind == TrustKind::Telemetry)
            .map(|i| i.content.as_str())
            .collect();
        assert_eq!(
            waiting,
            ["endpoint=https://collector.example", "capture_content=true"]
        );
        assert_eq!(reviewed.untrusted.telemetry.endpoint, None);
        assert_eq!(reviewed.untrusted.telemetry.capture_content, None);
        // A name only labels the traces: it applies at once.
        assert_eq!(
            reviewed.untrusted.telemetry.service_name.unwrap().value,
            "proj"
        );
        assert_eq!(
            reviewed.trusted.telemetry.endpoint.unwrap().value,
            "https://collector.example"
        );
        assert!(reviewed.trusted.telemetry.capture_content.unwrap().value);
    }
}
