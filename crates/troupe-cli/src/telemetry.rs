//! The run's traces as the command line sets them up: the `OTEL_*` variables over the settings'
//! `[telemetry]` (`troupe::telemetry::resolve`), and the one line said at the end when spans
//! were dropped.

use troupe::settings::Settings;
use troupe::telemetry::{ExportReport, Telemetry, TelemetryOptions};

/// The run's telemetry options, or none when traces are off. A setting that cannot be used is
/// said once on stderr and the run goes on without traces: a person's `OTEL_*` variables are
/// often set for other programs, and traces never decide whether a run works.
pub fn options(settings: &Settings, provider: &str, model: &str) -> Option<TelemetryOptions> {
    let env = |name: &str| std::env::var(name).ok();
    match troupe::telemetry::resolve(&env, &settings.telemetry) {
        Ok(export) => export.map(|export| TelemetryOptions {
            export,
            provider: provider.to_owned(),
            model: model.to_owned(),
        }),
        Err(e) => {
            // The error may quote a settings file's `[telemetry]` value: shown, never obeyed.
            let line = format!("troupe: {e}; this run exports no traces");
            eprintln!("{}", troupe::terminal_text::for_terminal(&line));
            None
        }
    }
}

/// Closes `telemetry` (bounded, see `troupe::telemetry::CLOSE_BOUND`) and returns the one
/// line to say when spans were dropped.
pub async fn close(telemetry: Option<&Telemetry>, answered: bool) -> Option<String> {
    let telemetry = telemetry?;
    let report: ExportReport = telemetry.close(answered).await;
    report
        .warning(&telemetry.export)
        .map(|warning| format!("troupe: {warning}"))
}

/// What `troupe config` says of traces: the effective endpoint, service name and contents
/// flag with where each came from (header values are never shown).
struct Shown {
    endpoint: (Option<String>, String),
    service_name: (String, String),
    capture_content: (bool, String),
    problem: Option<String>,
}

fn shown(settings: &Settings) -> Shown {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let table = &settings.telemetry;
    let resolved = troupe::telemetry::resolve(&env, table);
    let (endpoint, problem) = match &resolved {
        Ok(Some(export)) => (
            (
                Some(export.traces_url.clone()),
                export.endpoint_source.clone(),
            ),
            None,
        ),
        Ok(None) => ((None, "default: traces off".to_owned()), None),
        Err(e) => ((None, "not usable".to_owned()), Some(e.to_string())),
    };
    let service_name = match (env("OTEL_SERVICE_NAME"), &table.service_name) {
        (Some(name), _) => (name, "OTEL_SERVICE_NAME".to_owned()),
        (None, Some(name)) => (name.value.clone(), name.source.describe()),
        (None, None) => ("troupe".to_owned(), "default".to_owned()),
    };
    let capture_content = match &resolved {
        Ok(Some(export)) if env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT").is_some() => {
            (
                export.capture_content,
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT".to_owned(),
            )
        }
        _ => match &table.capture_content {
            Some(capture) => (capture.value, capture.source.describe()),
            None => (false, "default".to_owned()),
        },
    };
    Shown {
        endpoint,
        service_name,
        capture_content,
        problem,
    }
}

/// `[telemetry]` for `troupe config --json`.
pub fn config_json(settings: &Settings) -> serde_json::Value {
    let shown = shown(settings);
    serde_json::json!({
        "endpoint": {"value": shown.endpoint.0, "source": shown.endpoint.1},
        "protocol": troupe::telemetry::PROTOCOL,
        "service_name": {"value": shown.service_name.0, "source": shown.service_name.1},
        "capture_content": {"value": shown.capture_content.0, "source": shown.capture_content.1},
        "problem": shown.problem,
    })
}

/// `[telemetry]` for `troupe config`.
pub fn config_text(settings: &Settings) -> String {
    let shown = shown(settings);
    let mut out = String::from("\n[telemetry]\n");
    match &shown.endpoint.0 {
        Some(url) => out.push_str(&format!(
            "{:<16} = {url:?}   ({}; OTLP {})\n",
            "endpoint",
            shown.endpoint.1,
            troupe::telemetry::PROTOCOL
        )),
        None => out.push_str(&format!(
            "{:<16} = none   ({})\n",
            "endpoint", shown.endpoint.1
        )),
    }
    out.push_str(&format!(
        "{:<16} = {:?}   ({})\n",
        "service_name", shown.service_name.0, shown.service_name.1
    ));
    out.push_str(&format!(
        "{:<16} = {}   ({})\n",
        "capture_content", shown.capture_content.0, shown.capture_content.1
    ));
    if let Some(problem) = shown.problem {
        out.push_str(&format!("(not used: {problem})\n"));
    }
    out
}
