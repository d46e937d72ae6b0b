//! How a command that runs no team reaches the async store ports: one small current-thread
//! runtime for the call. The ports never need the caller's runtime to outlive the call (a
//! PostgreSQL store's connections live on the store's own runtime), so a runtime per call is
//! safe; a command that makes many calls wraps them in one `block_on`.
//!
//! Never called from inside a runtime (that panics): async code awaits the ports directly.

use std::future::Future;

use crate::error::CliError;

/// Runs `future` to completion on a fresh current-thread runtime.
pub fn block_on<F: Future>(future: F) -> Result<F::Output, CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            CliError::failed(format!("start the async runtime: {e}")).with_code("io_error")
        })?;
    Ok(runtime.block_on(future))
}
