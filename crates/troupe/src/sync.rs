//! Poison-tolerant locking, written once.
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
