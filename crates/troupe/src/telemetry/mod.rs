//! OpenTelemetry traces of a run (SPEC §14, issue 27): off unless the `OTEL_*` variables or
//! `[telemetry]` name an endpoint; then one trace per run — a team's on files, or a shared
//! team's across its hosts — with a span per agent turn, model call and tool call carrying the
//! GenAI semantic-convention attributes and troupe's own, exported over OTLP/HTTP (protobuf).
//!
//! # Layout
//!
//! - `config.rs` — the variables over the settings: [`ExportSettings`], or off.
//! - `ids.rs` — the trace, run-span and message-span ids, derived so that every process of a
//!   run agrees on them without a word on disk ([`RunKey`]).
//! - `export.rs` — the bounded queue and the export task: a slow or absent collector drops
//!   spans, counted, and never slows the run ([`SpanQueue`], [`ExportReport`]).
//! - `trace.rs` — what a run's spans share and how one is ended and queued ([`RunTrace`]).
//! - `attributes.rs` — the attribute names.
//! - `observer.rs` — [`TraceObserver`]: spans from the runners' and the team's reports.
//!
//! **Architecture Invariant:** nothing outside this module and the composition root knows
//! whether traces are on: the observer is put in front of the others at start, or not at all.
//! Contents leave only when asked, through the run's [`Redactor`](crate::secrets::Redactor);
//! the API key never does.

mod attributes;
mod config;
mod export;
mod ids;
mod observer;
mod trace;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::SpanExporter as _;
use opentelemetry_sdk::Resource;

pub use config::{resolve, ExportSettings, TelemetryConfigError, MAX_EXPORT_TIMEOUT, PROTOCOL};
pub use export::{ExportReport, SpanQueue, BATCH_DELAY, CLOSE_BOUND, QUEUE_CAPACITY};
pub use ids::{message_span_id, RunKey};
pub use observer::TraceObserver;
pub use trace::{KeySource, RunTrace, TraceParts};

use crate::error::ErrorCode;
use crate::secrets::Redactor;

/// What the composition root needs to trace a run, besides the run itself.
#[derive(Debug, Clone)]
pub struct TelemetryOptions {
    pub export: ExportSettings,
    /// `gen_ai.provider.name`.
    pub provider: String,
    /// `gen_ai.request.model`.
    pub model: String,
}

/// The exporter could not be built.
#[derive(Debug, thiserror::Error)]
#[error("telemetry: {0}")]
pub struct TelemetryError(String);

impl ErrorCode for TelemetryError {
    fn code(&self) -> &'static str {
        "telemetry_unavailable"
    }
}

/// A run's telemetry: its trace, its queue, and its observer.
pub struct Telemetry {
    trace: Arc<RunTrace>,
    queue: Arc<SpanQueue>,
    observer: Arc<TraceObserver>,
    lead: bool,
    /// Where spans go, for the report.
    pub export: ExportSettings,
}

/// Who this process is in the run it traces.
pub struct RunRole {
    pub key: RunKey,
    /// The lead's process ends the run's span; a worker's spans hang under it.
    pub lead: bool,
    pub team: String,
    pub sandbox: String,
    /// The run's secrets, kept out of captured contents.
    pub redactor: Redactor,
}

impl Telemetry {
    /// Builds the exporter and starts the export task (on the current tokio runtime).
    pub fn start(options: &TelemetryOptions, role: RunRole) -> Result<Self, TelemetryError> {
        let export = &options.export;
        let client = reqwest::Client::builder()
            .timeout(export.timeout)
            .connect_timeout(export.timeout.min(Duration::from_secs(2)))
            .build()
            .map_err(|e| TelemetryError(format!("the HTTP client could not be built: {e}")))?;
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(export.traces_url.clone())
            .with_timeout(export.timeout)
            .build()
            .map_err(|e| TelemetryError(format!("the OTLP exporter could not be built: {e}")))?;
        exporter.set_resource(
            &Resource::builder()
                .with_service_name(export.service_name.clone())
                .with_attribute(opentelemetry::KeyValue::new(
                    "service.version",
                    env!("CARGO_PKG_VERSION"),
                ))
                .build(),
        );
        let queue = Arc::new(SpanQueue::start(exporter, export.timeout));
        let trace = Arc::new(RunTrace::new(TraceParts {
            queue: queue.clone(),
            key: role.key,
            lead: role.lead,
            team: role.team,
            provider: options.provider.clone(),
            model: options.model.clone(),
            sandbox: role.sandbox,
            capture: export.capture_content.then_some(role.redactor),
        }));
        Ok(Self {
            observer: Arc::new(TraceObserver::new(trace.clone())),
            trace,
            queue,
            lead: role.lead,
            export: export.clone(),
        })
    }

    pub fn observer(&self) -> Arc<TraceObserver> {
        self.observer.clone()
    }

    pub fn trace(&self) -> &Arc<RunTrace> {
        &self.trace
    }

    /// Looks the run's key up with `look` at the start of every turn (a worker's: its team's
    /// lead, which changes with each run of the team).
    pub fn follow(
        &self,
        look: impl Fn() -> futures_util::future::BoxFuture<'static, Option<RunKey>>
            + Send
            + Sync
            + 'static,
    ) {
        self.trace.follow(Arc::new(look));
    }

    /// Ends the run's span (a lead's) and exports what is left, waiting at most
    /// [`CLOSE_BOUND`]; what was not exported is counted in the report. Once per run: a
    /// second close only reports.
    pub async fn close(&self, answered: bool) -> ExportReport {
        if self.lead {
            self.trace.end_run(answered);
        }
        self.queue.close(CLOSE_BOUND).await
    }
}

impl ExportReport {
    /// The one line a run prints about its spans when some were not exported.
    pub fn warning(&self, export: &ExportSettings) -> Option<String> {
        if self.dropped == 0 {
            return None;
        }
        Some(format!(
            "telemetry: {} of {} spans were not exported to {} ({}){}",
            self.dropped,
            self.dropped + self.exported,
            export.traces_url,
            export.endpoint_source,
            self.first_error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ))
    }
}
