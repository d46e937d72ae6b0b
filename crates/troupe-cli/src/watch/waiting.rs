//! The view's loop runs on a thread of tokio's blocking pool (`troupe::sync::offload`), not on
//! the runtime's own threads: it draws, and sleeps on its channel between wakeups. The store
//! reads, answers and messages it makes are async; it waits for each on the command's one
//! runtime, through the handle taken when the view was opened.

use std::future::Future;

use tokio::runtime::Handle;

/// The command's runtime, as the view's thread reaches it.
#[derive(Debug, Clone)]
pub struct Runtime(Handle);

impl Runtime {
    /// The runtime of the async code calling this (the view is opened by async code).
    pub fn current() -> Self {
        Self(Handle::current())
    }

    /// Starts `future` on the runtime, not waiting for it (a session's prompt, driven while the
    /// view goes on).
    pub fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.0.spawn(future));
    }

    /// Runs `future` on the runtime to its end, this thread waiting. Only from a thread that is
    /// not one of the runtime's (tokio refuses it there).
    pub fn wait<F: Future>(&self, future: F) -> F::Output {
        self.0.block_on(future)
    }
}
