//! `FileMailboxStore`: the mailbox port on real folders. (Implementation in progress.)

use std::path::PathBuf;
use std::sync::Arc;

use crate::clock::Clock;

/// Mailboxes under `.troupe/mailboxes/<agent>/{ready,processing,done,quarantine}/`.
pub struct FileMailboxStore {
    #[allow(dead_code)]
    root: PathBuf,
    #[allow(dead_code)]
    clock: Arc<dyn Clock>,
}
