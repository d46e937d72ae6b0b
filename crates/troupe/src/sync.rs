//! Poison-tolerant locking, and the crossing from async code to blocking work, written once.
//!
//! # Blocking work from async code
//!
//! Two functions, and nothing else in the runtime crate, move blocking work off the async
//! threads (`tests/all/blocking_rule.rs` checks it: no other file names `spawn_blocking`,
//! `block_in_place` or `tokio::fs`, and [`blocking`] has a fixed list of callers):
//! - [`blocking`]: in place, for a file adapter's short locked section inside an async method
//!   (a store port's file adapter, an audit or job record, a transcript line). Nothing can stop
//!   waiting for it half-way, and it costs no thread hop.
//! - [`offload`]: on tokio's blocking pool, for work that may take a while — a tool's walk or
//!   read, git. The caller may stop waiting (a cancelled tool call); the work still runs to
//!   its end.
//!
//! # Locks
//!
//! troupe's std mutexes guard plain data (slots, caches, record lists) that every writer leaves
//! consistent between statements, so a panic in another holder does not make the data wrong;
//! refusing the lock afterwards would only turn one failure into many. Every std mutex in the
//! runtime is taken through [`lock`].

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, taking the guard even when an earlier holder panicked.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `f`, which may block on a lock or the disk (a store call), off the async worker
/// threads: on a multi-threaded runtime through [`tokio::task::block_in_place`] (the scheduler
/// hands this thread's other tasks to another thread first); elsewhere (a current-thread
/// runtime, as in tests, or no runtime) in place, where nothing else waits on this thread's
/// scheduler in the meantime that could run elsewhere.
///
/// The file adapters of the async store ports run their locked sections through it, once per
/// port call (ARCHITECTURE, "Async store ports").
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Work handed to [`offload`] that did not come back: it panicked, or the runtime shut down
/// under it. Shown as `<what> stopped: <why>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    what: String,
    why: String,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} stopped: {}", self.what, self.why)
    }
}

impl std::error::Error for Stopped {}

/// Runs `f` — disk or git work that may take a while — on tokio's blocking pool and awaits its
/// result. `what` names the work in the error if it never returns (see [`Stopped`]).
pub async fn offload<R: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<R, Stopped> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Stopped {
        what: what.to_owned(),
        why: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_taken() {
        let mutex = std::sync::Arc::new(Mutex::new(1));
        let held = mutex.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.lock();
            panic!("poison it");
        })
        .join();
        assert!(mutex.is_poisoned());
        *lock(&mutex) += 1;
        assert_eq!(*lock(&mutex), 2);
    }

    #[test]
    fn blocking_runs_in_place_without_a_runtime() {
        assert_eq!(blocking(|| 7), 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn blocking_runs_in_place_on_a_current_thread_runtime() {
        assert_eq!(blocking(|| 7), 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn offload_runs_off_the_async_thread_and_returns_the_result() {
        let caller = std::thread::current().id();
        let ran_on = offload("test", std::thread::current).await.unwrap().id();
        assert_ne!(ran_on, caller);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn offloaded_work_that_panics_is_reported_as_stopped() {
        let stopped = offload("the walk", || -> u8 { panic!("boom") })
            .await
            .unwrap_err();
        assert!(
            stopped.to_string().starts_with("the walk stopped: "),
            "{stopped}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_leaves_the_async_threads_on_a_multi_thread_runtime() {
        // Another task keeps running while this one blocks.
        let (tx, rx) = std::sync::mpsc::channel();
        let other = tokio::spawn(async move {
            let _ = tx.send(());
        });
        let got = blocking(|| rx.recv_timeout(std::time::Duration::from_secs(5)));
        assert!(got.is_ok());
        other.await.unwrap();
    }
}
