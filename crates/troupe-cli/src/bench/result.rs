//! What a suite returns: its figures, or one line saying why it failed. In a module of its own
//! so that the suites, which `main` runs, need nothing of `main`.

/// Every suite's failure is one line.
pub type BenchResult<T> = Result<T, String>;

/// Puts `context` before a failure's line.
pub fn fail(context: &str) -> impl Fn(String) -> String + '_ {
    move |e| format!("{context}: {e}")
}

/// Runs `future` on a fresh current-thread runtime: the store ports are async, the suites are
/// not. One per suite (or per worker process), around all of its store calls.
pub fn block_on<F: std::future::Future>(future: F) -> BenchResult<F::Output> {
    Ok(runtime()?.block_on(future))
}

/// A current-thread runtime for a suite that times single store calls between waits of its
/// own (each call is `runtime.block_on(call)`).
pub fn runtime() -> BenchResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("start the async runtime: {e}"))
}
