//! Keeping troupe's own credentials out of everything an agent, a file or a terminal can see.
//!
//! # Layout
//!
//! - [`redact`]: the [`Redactor`], which replaces every secret it holds with `[redacted]` and
//!   tells a caller that cuts text where to cut without splitting a secret.
//! - [`environment`]: takes the credential variables out of the process environment at start,
//!   bytes included, so that no command troupe runs can read them from `/proc/<pid>/environ`.
//!
//! **Architecture Invariant:** the composition root builds one [`Redactor`] from the model
//! configuration and gives it to every dispatcher and to the job supervisor; every tool result
//! and every job's output is redacted before it reaches the model, a transcript, the audit, an
//! event or any file under `.troupe/`. Text that is cut (a server's error, a capped output, a
//! file read in part) is redacted *before* it is cut, or cut where no secret straddles the cut.

pub mod environment;
pub mod redact;

pub use redact::{Redactor, MIN_SECRET_LEN, REDACTED};

/// A redactor for the credentials [`environment::take_from_environment`] took at start (none
/// when it did not run): what a run removes even without a model configuration.
pub fn process_redactor() -> Redactor {
    Redactor::new(environment::taken_values().filter_map(std::ffi::OsStr::to_str))
}
