//! The answer records: `.troupe/protocol/answers/<request-id>.json` holds the one answer sent to a
//! request — the full response message, byte for byte the file that goes into the recipient's
//! mailbox.
//!
//! # Why a record file
//!
//! "No answer sent yet" and the sending must be one step across processes (SPEC §6, "Answers are
//! single"). The mailbox alone cannot say it cheaply: a response is found there only by parsing
//! every file of the recipient's four folders, which grow with every message the agent ever got,
//! and that scan would run under the protocol lock that every plan-gate check also takes. A
//! record named by the request id answers in one `open`, and `state.json`'s request objects —
//! whose key set is contracted (SPEC §5) — stay as they are.
//!
//! # Crash safety
//!
//! The store creates the record no-clobber (temp file, fsync, link, folder fsync) and only then
//! delivers the message, both under its locks. So a record without its message exists only if a
//! process died (or a mailbox write failed) in between, and the record holds everything needed
//! to finish: the next answer attempt delivers the recorded message before it refuses, and a run
//! delivers the recorded answers of pending requests at start.
//!
//! **Only a gone writer's answer is finished by someone else.** The writer holds `.protocol.lock`
//! from before its record exists until its delivery returned, and the kernel releases the lock
//! if the writer dies; a finisher works under the same lock. So whoever finds a record without
//! its message has the lock, and its writer therefore finished (a mailbox write that failed,
//! reported as `Undelivered`) or is dead — never one still delivering. (The PostgreSQL store
//! delivers after its commit, and keeps the same rule with a per-request delivery lock.) Mailbox `send` refuses a second
//! file with the same message id in any folder, so finishing twice delivers once. A message
//! without its record cannot exist. A record is never changed, and removed only by the very
//! write that failed to create it (before any delivery).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use troupe_wire::{MailboxMessage, ProtocolMessage, ProtocolRequest, RequestId};

use super::files::ProtocolFiles;
use super::rules;
use super::ProtocolError;
use crate::store::durable;
use crate::store::mailbox::MAX_MESSAGE_BYTES;
use crate::store::read::{read_regular, Links};
use crate::store::IoError;

/// The `answers/` folder of one workspace.
#[derive(Debug)]
pub(super) struct AnswerRecords {
    dir: PathBuf,
}

impl AnswerRecords {
    pub(super) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn path(&self, id: RequestId) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    fn corrupt(path: &Path, why: impl Into<String>) -> ProtocolError {
        ProtocolError::Corrupt {
            path: path.display().to_string(),
            why: why.into(),
        }
    }

    /// Whether the folder exists, refusing a symlink or a non-folder in its place.
    fn folder_exists(&self) -> Result<bool, ProtocolError> {
        match fs::symlink_metadata(&self.dir) {
            Ok(meta) if meta.file_type().is_symlink() || !meta.is_dir() => Err(Self::corrupt(
                &self.dir,
                "is a symbolic link or not a folder; troupe refuses it",
            )),
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(IoError::new("inspect folder", &self.dir, e).into()),
        }
    }

    /// The answer recorded for `request`, checked strictly against it (a record that does not
    /// parse, or does not answer this request, is corruption). `None` when there is none.
    pub(super) fn read(
        &self,
        request: &ProtocolRequest,
    ) -> Result<Option<ProtocolMessage>, ProtocolError> {
        if !self.folder_exists()? {
            return Ok(None);
        }
        let path = self.path(request.id());
        let Some(bytes) = read_regular(&path, Links::Refuse, MAX_MESSAGE_BYTES)? else {
            return Ok(None);
        };
        let message = match MailboxMessage::from_json_bytes(&bytes) {
            Ok(MailboxMessage::Protocol(message)) => message,
            Ok(MailboxMessage::Ordinary(_)) => {
                return Err(Self::corrupt(
                    &path,
                    "holds an ordinary message, not an answer",
                ))
            }
            Err(e) => return Err(Self::corrupt(&path, format!("not an answer record: {e}"))),
        };
        rules::check_recorded(request, &message)
            .map_err(|e| Self::corrupt(&path, e.to_string()))?;
        Ok(Some(message))
    }

    /// Records `answer` as the answer to its request. `Ok(false)` when a record exists already
    /// (nothing was written). On any other failure nothing is left behind, as far as possible.
    pub(super) fn create(
        &self,
        files: &dyn ProtocolFiles,
        answer: &ProtocolMessage,
    ) -> Result<bool, ProtocolError> {
        durable::ensure_real_dir(&self.dir)?;
        let path = self.path(answer.request_id());
        let bytes = MailboxMessage::Protocol(answer.clone()).to_json_bytes();
        match files.create_answer(&path, &bytes) {
            Ok(()) => Ok(true),
            Err(e) if e.source.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => {
                // The record may have been linked into place before the failure (a folder fsync
                // that failed). Undelivered, it must not stand: remove it; if that fails too, the
                // next answer attempt or the next start delivers it, which is still one answer.
                if fs::symlink_metadata(&path).is_ok() {
                    let _ = fs::remove_file(&path);
                }
                Err(e.into())
            }
        }
    }
}
