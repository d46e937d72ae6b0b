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
