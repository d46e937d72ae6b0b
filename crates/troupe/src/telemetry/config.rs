//! Whether a run exports traces, and where: the standard `OTEL_*` variables laid over the
//! settings' `[telemetry]` table, key by key, as the OpenTelemetry specification says
//! (variables win over configuration files).
//!
//! | what | variables, first set wins | `[telemetry]` | default |
//! |---|---|---|---|
//! | on/off | `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off | | off |
//! | endpoint | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as is), `OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/traces`) | `endpoint` (+ `/v1/traces`) | none: off |
//! | protocol | `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, `OTEL_EXPORTER_OTLP_PROTOCOL` | | `http/protobuf` (the only one) |
//! | service | `OTEL_SERVICE_NAME` | `service_name` | `troupe` |
//! | contents | `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` (`true`/`false`) | `capture_content` | off |
//! | timeout | `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, `OTEL_EXPORTER_OTLP_TIMEOUT` (ms) | | 10 s |
//!
//! Headers (`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TRACES_HEADERS`) are read by the
//! exporter itself and never shown.

use std::time::Duration;

use crate::error::ErrorCode;
use crate::settings::{check_endpoint, TelemetrySettings};

/// The longest a batch export may take, whatever the variables say: a slow collector must not
/// hold spans (and the end of a run) for long.
pub const MAX_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The one protocol troupe speaks.
pub const PROTOCOL: &str = "http/protobuf";
const DEFAULT_SERVICE_NAME: &str = "troupe";
const TRACES_PATH: &str = "/v1/traces";

/// Where and how a run exports its traces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSettings {
    /// The full OTLP/HTTP traces URL.
    pub traces_url: String,
    /// Which variable or file said it (for messages).
    pub endpoint_source: String,
    pub service_name: String,
    /// Message and tool contents on spans (redacted).
    pub capture_content: bool,
    /// The most one batch export may take.
    pub timeout: Duration,
}

/// A telemetry setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TelemetryConfigError(pub String);

impl ErrorCode for TelemetryConfigError {
    fn code(&self) -> &'static str {
        "telemetry_config_invalid"
    }
}

/// The export `env` and `settings` ask for, or `None` when traces are off.
pub fn resolve(
    env: &dyn Fn(&str) -> Option<String>,
    settings: &TelemetrySettings,
) -> Result<Option<ExportSettings>, TelemetryConfigError> {
    let var = |name: &str| {
        env(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    if let Some(exporter) = var("OTEL_TRACES_EXPORTER") {
        if exporter.eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        if !exporter.split(',').any(|e| e.trim() == "otlp") {
            return Err(TelemetryConfigError(format!(
                "OTEL_TRACES_EXPORTER={exporter:?}: troupe exports traces with otlp only (or none)"
            )));
        }
    }
    let (traces_url, endpoint_source) = if let Some(url) = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    {
        (url, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT".to_owned())
    } else if let Some(base) = var("OTEL_EXPORTER_OTLP_ENDPOINT") {
        (with_path(&base), "OTEL_EXPORTER_OTLP_ENDPOINT".to_owned())
    } else if let Some(endpoint) = &settings.endpoint {
        (with_path(&endpoint.value), endpoint.source.describe())
    } else {
        return Ok(None);
    };
    check_endpoint(&traces_url)
        .map_err(|why| TelemetryConfigError(format!("{endpoint_source}: {why}")))?;
    let protocol_var = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]
    .into_iter()
    .find_map(|name| var(name).map(|value| (name, value)));
    if let Some((name, protocol)) = protocol_var {
        if protocol != PROTOCOL {
            return Err(TelemetryConfigError(format!(
                "{name}={protocol:?}: troupe exports OTLP over HTTP with protobuf only \
                 ({PROTOCOL}); point it at the receiver's HTTP port (often 4318)"
            )));
        }
    }
    let service_name = var("OTEL_SERVICE_NAME")
        .or_else(|| settings.service_name.as_ref().map(|s| s.value.clone()))
        .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned());
    let capture_content = match var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") {
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        Some(v) if v.eq_ignore_ascii_case("false") => false,
        Some(v) => {
            return Err(TelemetryConfigError(format!(
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT={v:?} is neither true nor false"
            )))
        }
        None => settings.capture_content.as_ref().is_some_and(|c| c.value),
    };
    let timeout = [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .into_iter()
    .find_map(|name| var(name).map(|value| (name, value)))
    .map(|(name, value)| {
        value
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| TelemetryConfigError(format!("{name}={value:?} is not milliseconds")))
    })
    .transpose()?
    .unwrap_or(MAX_EXPORT_TIMEOUT)
    .min(MAX_EXPORT_TIMEOUT);
    Ok(Some(ExportSettings {
        traces_url,
        endpoint_source,
        service_name,
        capture_content,
        timeout,
    }))
}

/// A base URL with the traces path appended, as the specification says for the generic
/// endpoint.
fn with_path(base: &str) -> String {
    format!("{}{TRACES_PATH}", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::settings::{Source, Sourced};

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn table(endpoint: &str, capture: bool) -> TelemetrySettings {
        let source = Source::User(std::path::PathBuf::from(
            "/home/me/.config/troupe/config.toml",
        ));
        TelemetrySettings {
            endpoint: Some(Sourced {
                value: endpoint.to_owned(),
                source: source.clone(),
            }),
            service_name: Some(Sourced {
                value: "from-table".to_owned(),
                source: source.clone(),
            }),
            capture_content: Some(Sourced {
                value: capture,
                source,
            }),
        }
    }

    #[test]
    fn off_unless_an_endpoint_is_given_and_off_when_disabled() {
        let none = TelemetrySettings::default();
        assert_eq!(resolve(&env_of(&[]), &none), Ok(None));
        let with = table("http://127.0.0.1:4318", false);
        assert!(resolve(&env_of(&[]), &with).unwrap().is_some());
        for off in [
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert_eq!(resolve(&env_of(&[off]), &with), Ok(None), "{off:?}");
        }
    }

    #[test]
    fn variables_win_over_the_table_key_by_key() {
        let settings = table("http://table:4318/", true);
        let from_table = resolve(&env_of(&[]), &settings).unwrap().unwrap();
        assert_eq!(
            from_table,
            ExportSettings {
                traces_url: "http://table:4318/v1/traces".to_owned(),
                endpoint_source: settings.endpoint.as_ref().unwrap().source.describe(),
                service_name: "from-table".to_owned(),
                capture_content: true,
                timeout: MAX_EXPORT_TIMEOUT,
            }
        );
        let env = env_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://env:4318"),
            ("OTEL_SERVICE_NAME", "from-env"),
            (
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                "false",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "1500"),
        ]);
        let from_env = resolve(&env, &settings).unwrap().unwrap();
        assert_eq!(from_env.traces_url, "https://env:4318/v1/traces");
        assert_eq!(from_env.endpoint_source, "OTEL_EXPORTER_OTLP_ENDPOINT");
        assert_eq!(from_env.service_name, "from-env");
        assert!(!from_env.capture_content);
        assert_eq!(from_env.timeout, Duration::from_millis(1500));
        // The traces variable is used as it is, and wins over the generic one.
        let env = env_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://env:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://traces:9/custom",
            ),
        ]);
        let traces = resolve(&env, &settings).unwrap().unwrap();
        assert_eq!(traces.traces_url, "http://traces:9/custom");
        // A timeout past the bound is cut to it.
        let env = env_of(&[("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "600000")]);
        assert_eq!(
            resolve(&env, &settings).unwrap().unwrap().timeout,
            MAX_EXPORT_TIMEOUT
        );
    }

    #[test]
    fn what_cannot_be_exported_is_refused_naming_the_variable() {
        let settings = table("http://127.0.0.1:4318", false);
        for (pair, says) in [
            (
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ),
            (("OTEL_TRACES_EXPORTER", "zipkin"), "OTEL_TRACES_EXPORTER"),
            (
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318"),
                "OTEL_EXPORTER_OTLP_ENDPOINT",
            ),
            (
                ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "yes"),
                "neither true nor false",
            ),
            (("OTEL_EXPORTER_OTLP_TIMEOUT", "5s"), "not milliseconds"),
        ] {
            let err = resolve(&env_of(&[pair]), &settings).unwrap_err();
            assert!(err.to_string().contains(says), "{pair:?}: {err}");
            assert_eq!(err.code(), "telemetry_config_invalid");
        }
        let ok = env_of(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]);
        assert!(resolve(&ok, &settings).unwrap().is_some());
    }
}
