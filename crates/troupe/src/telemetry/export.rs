//! The bounded way out of a run's spans: a queue the run only ever `try_send`s into, and one
//! task that sends batches to the exporter, each under a timeout. A collector that is down or
//! slow costs the run nothing but the spans it drops: a full queue drops the new span, a failed
//! or timed-out batch is dropped whole, and [`SpanQueue::close`] waits at most its bound.
//! Every span accepted and not confirmed exported counts as dropped; the count is reported once,
//! by whoever closes the queue.
//!
//! The SDK's `BatchSpanProcessor` is not used: it drops silently (its count is only logged
//! internally) and runs its own thread that blocks on exports; here the export runs on the
//! run's tokio runtime and every drop is counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How many finished spans may wait for export; past it new spans are dropped.
pub const QUEUE_CAPACITY: usize = 2048;
/// The most spans one export request carries.
pub const MAX_BATCH: usize = 512;
/// How long the exporter waits for more spans before it sends a batch that is not full.
pub const BATCH_DELAY: Duration = Duration::from_millis(200);
/// The most a run's end waits for its last spans to be exported.
pub const CLOSE_BOUND: Duration = Duration::from_secs(2);

/// What became of a run's spans, once the queue is closed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    pub exported: u64,
    pub dropped: u64,
    /// Why the first batch that failed failed, if one did.
    pub first_error: Option<String>,
}

#[derive(Default)]
struct Counts {
    accepted: AtomicU64,
    full: AtomicU64,
    exported: AtomicU64,
    first_error: Mutex<Option<String>>,
}

/// The run's span queue; cheap to share.
pub struct SpanQueue {
    sender: Mutex<Option<mpsc::Sender<SpanData>>>,
    counts: Arc<Counts>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl SpanQueue {
    /// Starts the export task on the current tokio runtime.
    pub fn start<E: SpanExporter + 'static>(exporter: E, timeout: Duration) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE_CAPACITY);
        let counts = Arc::new(Counts::default());
        let task = tokio::spawn(export_loop(exporter, receiver, counts.clone(), timeout));
        Self {
            sender: Mutex::new(Some(sender)),
            counts,
            task: Mutex::new(Some(task)),
        }
    }

    /// Queues a finished span, or counts it dropped when the queue is full (or closed). Never
    /// waits.
    pub fn push(&self, span: SpanData) {
        let sent = match crate::sync::lock(&self.sender).as_ref() {
            Some(sender) => sender.try_send(span).is_ok(),
            None => false,
        };
        if sent {
            self.counts.accepted.fetch_add(1, Ordering::Relaxed);
        } else {
            self.counts.full.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Stops taking spans and exports what is queued, waiting at most `bound`; what is not
    /// exported by then is dropped. A second close reports the same counts and waits for nothing.
    pub async fn close(&self, bound: Duration) -> ExportReport {
        drop(crate::sync::lock(&self.sender).take());
        let task = crate::sync::lock(&self.task).take();
        if let Some(mut task) = task {
            if tokio::time::timeout(bound, &mut task).await.is_err() {
                task.abort();
            }
        }
        let counts = &self.counts;
        let accepted = counts.accepted.load(Ordering::Relaxed);
        let exported = counts.exported.load(Ordering::Relaxed);
        ExportReport {
            exported,
            dropped: counts.full.load(Ordering::Relaxed) + accepted.saturating_sub(exported),
            first_error: crate::sync::lock(&counts.first_error).clone(),
        }
    }
}

/// The exporter's error as a person reads it. The OTLP HTTP exporter writes its transport
/// error as a Rust debug dump (`Operation failed: reqwest::Error { kind: Request, url: …,
/// source: … Os { …, message: "Connection refused" } }`): of such a dump only the innermost
/// message is kept (`the request failed: Connection refused`), else its first quoted words
/// that are not the address.
fn readable(error: &str) -> String {
    let dump = [" { ", "Error(", "Error {"]
        .iter()
        .any(|marker| error.contains(marker));
    if !dump {
        return error.to_owned();
    }
    const MESSAGE: &str = "message: \"";
    let innermost = error
        .rfind(MESSAGE)
        .and_then(|at| error[at + MESSAGE.len()..].split('"').next());
    // The quoted words of the dump, the address it was sent to left out.
    let first_quoted = || {
        error
            .split('"')
            .skip(1)
            .step_by(2)
            .find(|words| !words.starts_with("http"))
    };
    let cause = innermost
        .or_else(first_quoted)
        .filter(|words| !words.trim().is_empty());
    match cause {
        Some(cause) => format!("the request failed: {cause}"),
        None => "the request failed".to_owned(),
    }
}

async fn export_loop<E: SpanExporter>(
    exporter: E,
    mut receiver: mpsc::Receiver<SpanData>,
    counts: Arc<Counts>,
    timeout: Duration,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = receiver.recv().await {
        batch.push(first);
        // Gather what comes within the delay (or until the queue closes), up to a full batch.
        let deadline = tokio::time::Instant::now() + BATCH_DELAY;
        while batch.len() < MAX_BATCH {
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(span)) => batch.push(span),
                Ok(None) | Err(_) => break,
            }
        }
        let spans = std::mem::replace(&mut batch, Vec::with_capacity(MAX_BATCH));
        let count = spans.len() as u64;
        let error = match tokio::time::timeout(timeout, exporter.export(spans)).await {
            Ok(Ok(())) => {
                counts.exported.fetch_add(count, Ordering::Relaxed);
                continue;
            }
            Ok(Err(e)) => {
                let raw = e.to_string();
                tracing::debug!("telemetry: the exporter failed: {raw}");
                readable(&raw)
            }
            Err(_) => format!("no answer within {} ms", timeout.as_millis()),
        };
        let mut first = crate::sync::lock(&counts.first_error);
        if first.is_none() {
            tracing::debug!("telemetry: a batch of {count} spans was not exported: {error}");
            *first = Some(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::time::SystemTime;

    use opentelemetry::trace::{SpanContext, SpanKind, Status};
    use opentelemetry::InstrumentationScope;
    use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    use super::*;

    #[test]
    fn an_exporters_debug_dump_is_read_as_its_innermost_message() {
        let dump = "Operation failed: reqwest::Error { kind: Request, url: \"http://127.0.0.1:9/v1/traces\", \
                    source: hyper_util::client::legacy::Error(Connect, ConnectError(\"tcp connect error\", \
                    127.0.0.1:9, Os { code: 111, kind: ConnectionRefused, message: \"Connection refused\" })) }";
        assert_eq!(readable(dump), "the request failed: Connection refused");
        assert_eq!(
            readable("Operation failed: hyper::Error(Io, \"broken pipe\")"),
            "the request failed: broken pipe"
        );
        assert_eq!(
            readable("Operation failed: Error { }"),
            "the request failed"
        );
        assert_eq!(
            readable("Operation failed: collector answered 503"),
            "Operation failed: collector answered 503"
        );
    }

    /// Records what it exports; fails or hangs when told.
    #[derive(Debug, Clone, Default)]
    struct Recording {
        spans: Arc<Mutex<Vec<String>>>,
        fail: bool,
        hang: bool,
    }

    impl SpanExporter for Recording {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            if self.hang {
                std::future::pending::<()>().await;
            }
            if self.fail {
                return Err(OTelSdkError::InternalFailure("connection refused".into()));
            }
            let names = batch.into_iter().map(|s| s.name.into_owned());
            self.spans.lock().unwrap().extend(names);
            Ok(())
        }
    }

    fn span(name: &'static str) -> SpanData {
        SpanData {
            span_context: SpanContext::empty_context(),
            parent_span_id: opentelemetry::trace::SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Borrowed(name),
            start_time: SystemTime::now(),
            end_time: SystemTime::now(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: InstrumentationScope::builder("test").build(),
        }
    }

    #[tokio::test]
    async fn every_span_is_exported_by_close() {
        let exporter = Recording::default();
        let queue = SpanQueue::start(exporter.clone(), Duration::from_secs(1));
        queue.push(span("a"));
        queue.push(span("b"));
        let report = queue.close(Duration::from_secs(5)).await;
        assert_eq!(
            report,
            ExportReport {
                exported: 2,
                dropped: 0,
                first_error: None
            }
        );
        assert_eq!(*exporter.spans.lock().unwrap(), ["a", "b"]);
        // Closed: a late span is counted, not kept.
        queue.push(span("late"));
        assert_eq!(queue.close(Duration::ZERO).await.dropped, 1);
    }

    #[tokio::test]
    async fn a_failing_collector_drops_and_counts_every_span() {
        let exporter = Recording {
            fail: true,
            ..Recording::default()
        };
        let queue = SpanQueue::start(exporter, Duration::from_secs(1));
        for _ in 0..3 {
            queue.push(span("x"));
        }
        let report = queue.close(Duration::from_secs(5)).await;
        assert_eq!(report.exported, 0);
        assert_eq!(report.dropped, 3);
        assert!(report.first_error.unwrap().contains("connection refused"));
    }

    #[tokio::test]
    async fn a_silent_collector_holds_the_close_no_longer_than_its_bound_and_a_full_queue_drops() {
        let exporter = Recording {
            hang: true,
            ..Recording::default()
        };
        let queue = SpanQueue::start(exporter, Duration::from_secs(60));
        for _ in 0..(QUEUE_CAPACITY + MAX_BATCH + 10) {
            queue.push(span("x"));
        }
        let bound = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let report = queue.close(bound).await;
        let took = started.elapsed();
        assert!(
            took >= bound && took < bound + Duration::from_secs(2),
            "{took:?}"
        );
        assert_eq!(report.exported, 0);
        assert_eq!(report.dropped, (QUEUE_CAPACITY + MAX_BATCH + 10) as u64);
    }
}
