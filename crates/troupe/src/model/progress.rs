//! What happens inside one model call before it answers — retries, the switch to the fallback
//! model, the answer's text as it streams — reported as it happens, to whoever made the call.
//!
//! The client is shared by every agent and knows nothing of them; the caller (an agent's runner)
//! runs the call inside [`observed`], and the client [`report`]s to the sink of the task it runs
//! in (a tokio task-local, like a tracing span). Outside [`observed`], reports go nowhere.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// One step of a call that did not answer at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallProgress {
    /// Attempt `attempt` of `model` failed with `error`; the next starts after `delay`.
    Retrying {
        model: String,
        attempt: u32,
        error: String,
        delay: Duration,
    },
    /// `from` failed for good with `error`; `to` is asked instead.
    FallingBack {
        from: String,
        to: String,
        error: String,
    },
    /// A piece of an agent turn's answer text, as the model streams it (the whole answer still
    /// comes as the call's response). An attempt that fails after some text is retried from
    /// the start, so a reader may see a piece again.
    Text(String),
}

/// Receives the progress of the calls made inside [`observed`].
pub trait ProgressSink: Send + Sync {
    fn progress(&self, progress: &CallProgress);
}

tokio::task_local! {
    static SINK: Arc<dyn ProgressSink>;
}

/// Runs `call` with `sink` receiving its progress reports.
pub async fn observed<F: Future>(sink: Arc<dyn ProgressSink>, call: F) -> F::Output {
    SINK.scope(sink, call).await
}

/// Reports `progress` to the sink of the current call, if any.
pub fn report(progress: CallProgress) {
    let _ = SINK.try_with(|sink| sink.progress(&progress));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Seen(Mutex<Vec<CallProgress>>);
    impl ProgressSink for Seen {
        fn progress(&self, progress: &CallProgress) {
            self.0.lock().unwrap().push(progress.clone());
        }
    }

    #[tokio::test]
    async fn reports_reach_the_sink_of_their_call_only() {
        let step = CallProgress::FallingBack {
            from: "a".into(),
            to: "b".into(),
            error: "e".into(),
        };
        report(step.clone()); // outside any call: nowhere, no panic
        let seen = Arc::new(Seen::default());
        observed(seen.clone(), async { report(step.clone()) }).await;
        assert_eq!(seen.0.lock().unwrap().as_slice(), [step]);
    }
}
