//! One run's trace as this process sees it: its ids, what every span of it carries (team,
//! provider, sandbox), and how a finished span is made and queued.

use std::borrow::Cow;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use opentelemetry::trace::{Link, SpanContext, SpanId, SpanKind, Status, TraceId};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

use super::export::SpanQueue;
use super::ids::{random_span_id, RunKey};
use crate::secrets::Redactor;

/// What a run's spans share.
pub struct RunTrace {
    queue: Arc<SpanQueue>,
    /// The run's key; a worker's changes when its team's lead does (a new run).
    key: RwLock<RunKey>,
    /// Whether this process runs the lead (its turns' parent, the run's span, is local).
    lead: bool,
    scope: InstrumentationScope,
    /// `troupe.team`: the team's key (a shared team's) or the workspace's folder name.
    pub team: String,
    /// `gen_ai.provider.name`: `openai`, `anthropic`, … as the model configuration says.
    pub provider: String,
    /// `gen_ai.request.model`: the configured model.
    pub model: String,
    /// `troupe.sandbox.mode`: how the commands agents run are confined.
    pub sandbox: String,
    /// Set when contents are captured: what no exported content may hold (the API key).
    pub capture: Option<Redactor>,
    /// When the run started (the run's span).
    started: SystemTime,
    /// Where a worker finds its run's key again at each turn (its team's lead may change).
    key_source: RwLock<Option<KeySource>>,
}

/// Finds the run's key now (a store call: run off the async threads).
pub type KeySource =
    Arc<dyn Fn() -> futures_util::future::BoxFuture<'static, Option<RunKey>> + Send + Sync>;

/// A span under way: ended by [`RunTrace::end`].
#[derive(Debug, Clone)]
pub struct OpenSpan {
    pub id: SpanId,
    pub parent: SpanId,
    pub parent_is_remote: bool,
    pub name: String,
    pub kind: SpanKind,
    pub start: SystemTime,
    pub attributes: Vec<KeyValue>,
    pub links: Vec<Link>,
}

impl OpenSpan {
    pub fn context(&self, trace_id: TraceId) -> SpanContext {
        super::ids::remote(trace_id, self.id)
    }
}

/// What a [`RunTrace`] is made of.
pub struct TraceParts {
    pub queue: Arc<SpanQueue>,
    pub key: RunKey,
    pub lead: bool,
    pub team: String,
    pub provider: String,
    pub model: String,
    pub sandbox: String,
    pub capture: Option<Redactor>,
}

impl RunTrace {
    pub fn new(parts: TraceParts) -> Self {
        Self {
            queue: parts.queue,
            key: RwLock::new(parts.key),
            lead: parts.lead,
            scope: InstrumentationScope::builder("troupe")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            team: parts.team,
            provider: parts.provider,
            model: parts.model,
            sandbox: parts.sandbox,
            capture: parts.capture,
            started: SystemTime::now(),
            key_source: RwLock::new(None),
        }
    }

    /// Looks the run's key up with `source` at every turn from now on.
    pub fn follow(&self, source: KeySource) {
        match self.key_source.write() {
            Ok(mut held) => *held = Some(source),
            Err(poisoned) => *poisoned.into_inner() = Some(source),
        }
    }

    /// A turn starts: the key as its source says now, if it has one and it answers.
    pub async fn refresh_key(&self) {
        let source = match self.key_source.read() {
            Ok(held) => held.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let Some(look) = source else {
            return;
        };
        if let Some(key) = look().await {
            self.set_key(key);
        }
    }

    pub fn key(&self) -> RunKey {
        match self.key.read() {
            Ok(key) => key.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The run's key changed (a worker's team has a new lead).
    pub fn set_key(&self, key: RunKey) {
        match self.key.write() {
            Ok(mut held) => *held = key,
            Err(poisoned) => *poisoned.into_inner() = key,
        }
    }

    pub fn trace_id(&self) -> TraceId {
        self.key().trace_id()
    }

    /// A span starting now under `parent` (the run's span when none).
    pub fn open(&self, name: String, kind: SpanKind, parent: Option<SpanId>) -> OpenSpan {
        let (parent, parent_is_remote) = match parent {
            Some(parent) => (parent, false),
            None => (self.key().root_span_id(), !self.lead),
        };
        OpenSpan {
            id: random_span_id(),
            parent,
            parent_is_remote,
            name,
            kind,
            start: SystemTime::now(),
            attributes: Vec::new(),
            links: Vec::new(),
        }
    }

    /// Ends `span` now with `status` and queues it for export.
    pub fn end(&self, span: OpenSpan, status: Status) {
        let span_context = span.context(self.trace_id());
        let mut links = SpanLinks::default();
        links.links = span.links;
        self.queue.push(SpanData {
            span_context,
            parent_span_id: span.parent,
            parent_span_is_remote: span.parent_is_remote,
            span_kind: span.kind,
            name: Cow::Owned(span.name),
            start_time: span.start,
            end_time: SystemTime::now(),
            attributes: span.attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links,
            status,
            instrumentation_scope: self.scope.clone(),
        });
    }

    /// Queues the run's own span (the lead's, at the run's end): from the start to now.
    pub fn end_run(&self, answered: bool) {
        let key = self.key();
        let span = OpenSpan {
            id: key.root_span_id(),
            parent: SpanId::INVALID,
            parent_is_remote: false,
            name: "invoke_agent troupe".to_owned(),
            kind: SpanKind::Internal,
            start: self.started,
            attributes: vec![
                KeyValue::new(super::attributes::OPERATION, "invoke_agent"),
                KeyValue::new(super::attributes::AGENT_NAME, "troupe"),
                KeyValue::new(super::attributes::TEAM, self.team.clone()),
                KeyValue::new(super::attributes::PROVIDER, self.provider.clone()),
                KeyValue::new(super::attributes::REQUEST_MODEL, self.model.clone()),
                KeyValue::new(super::attributes::SANDBOX, self.sandbox.clone()),
            ],
            links: Vec::new(),
        };
        let status = if answered {
            Status::Ok
        } else {
            Status::error("the run ended without a final answer")
        };
        self.end(span, status);
    }

    /// `text` as captured content (redacted), or `None` when contents are not captured.
    pub fn content(&self, text: &str) -> Option<String> {
        self.capture
            .as_ref()
            .map(|redactor| redactor.redact(text).into_owned())
    }
}

#[cfg(test)]
impl RunTrace {
    /// The queue, for tests that flush it.
    pub fn queue_for_tests(&self) -> &SpanQueue {
        &self.queue
    }
}
