//! A team's small whole documents (the lead's durable cron jobs are the document `cron`): the
//! port for where a distributed team keeps them, read whole and changed by one read-modify-write
//! under the team's lock — the counterpart of a file replaced under a lock file. The caller
//! parses and checks the text.

use super::BackendError;

/// A change: the current text (none yet) → the new text, or why not (nothing is written).
pub type Change = Box<dyn FnOnce(Option<String>) -> Result<String, String> + Send>;

/// One named document of a team. Async: the database is awaited.
#[async_trait::async_trait]
pub trait TeamDocument: Send + Sync {
    /// Where it is, for messages.
    fn place(&self) -> String;
    /// Its text, if it was ever written.
    async fn read(&self) -> Result<Option<String>, BackendError>;
    /// Applies `change` to the current text atomically under the team's lock: `Ok(Err(why))`
    /// when the change refused (nothing written).
    async fn update(&self, change: Change) -> Result<Result<(), String>, BackendError>;
}
