//! Reading one mailbox file safely: its name must be `<message-id>.json`, it must be a regular
//! file (a symlink is never followed), no larger than [`MAX_MESSAGE_BYTES`] (a larger file is not
//! read whole), and its bytes must parse strictly into a message for this mailbox.

use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use troupe_wire::{AgentName, MailboxMessage, MessageId};

use super::MAX_MESSAGE_BYTES;
use crate::store::durable::TEMP_PREFIX;

/// What a file turned out to be.
#[derive(Debug)]
pub(super) enum Inspection<T> {
    Valid(T),
    /// Not a message this mailbox accepts; the reason is recorded when it is quarantined.
    Invalid(String),
    /// The file disappeared before it could be read (another claimer moved it).
    Gone,
}

const SUFFIX: &str = ".json";

/// The file name of a message: `<id>.json`.
pub(super) fn file_name_of(id: MessageId) -> String {
    format!("{id}{SUFFIX}")
}

/// A temp file of [`crate::store::durable`]: ignored by every reader, never quarantined.
pub(super) fn is_temp(name: &OsStr) -> bool {
    name.as_bytes().first() == Some(&(TEMP_PREFIX as u8))
}

/// The id a file name stands for, when it is exactly `<canonical uuid>.json`.
pub(super) fn id_from_file_name(name: &OsStr) -> Option<MessageId> {
    let stem = name.to_str()?.strip_suffix(SUFFIX)?;
    MessageId::parse(stem).ok()
}

/// Reads the bytes of `path` without following a symlink and without reading more than
/// [`MAX_MESSAGE_BYTES`].
pub(super) fn read_bounded(path: &Path) -> io::Result<Inspection<Vec<u8>>> {
    // O_NONBLOCK keeps a FIFO planted in a mailbox from blocking the open; it changes nothing
    // for regular files.
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) => return refusal(e, "open"),
    };
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(e) => return refusal(e, "inspect"),
    };
    if !meta.is_file() {
        return Ok(Inspection::Invalid("not a regular file".to_owned()));
    }
    if meta.len() > MAX_MESSAGE_BYTES {
        return Ok(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    if let Err(e) = file.take(MAX_MESSAGE_BYTES + 1).read_to_end(&mut bytes) {
        return refusal(e, "read");
    }
    if bytes.len() as u64 > MAX_MESSAGE_BYTES {
        // It grew after the size check; still refuse it without reading further.
        return Ok(too_large(bytes.len() as u64));
    }
    Ok(Inspection::Valid(bytes))
}

fn too_large(len: u64) -> Inspection<Vec<u8>> {
    Inspection::Invalid(format!(
        "file is {len} bytes or more, larger than the {MAX_MESSAGE_BYTES} bytes a message may have"
    ))
}

/// Sorts an I/O failure into "gone", "this file is unusable" and "the storage is failing".
fn refusal<T>(e: io::Error, action: &str) -> io::Result<Inspection<T>> {
    match e.raw_os_error() {
        _ if e.kind() == io::ErrorKind::NotFound => Ok(Inspection::Gone),
        Some(libc::ELOOP) => Ok(Inspection::Invalid(
            "a symbolic link, not a regular file (not followed)".to_owned(),
        )),
        Some(libc::EACCES | libc::EPERM | libc::ENXIO | libc::ENODEV | libc::EISDIR) => Ok(
            Inspection::Invalid(format!("cannot {action} the file: {e}")),
        ),
        _ => Err(e),
    }
}

/// Reads and parses `dir/name`, the bytes only (used for listing quarantine, where names may carry
/// a collision suffix).
pub(super) fn read_message(path: &Path) -> io::Result<Inspection<MailboxMessage>> {
    Ok(match read_bounded(path)? {
        Inspection::Valid(bytes) => match MailboxMessage::from_json_bytes(&bytes) {
            Ok(message) => Inspection::Valid(message),
            Err(e) => Inspection::Invalid(format!("does not parse: {e}")),
        },
        Inspection::Invalid(why) => Inspection::Invalid(why),
        Inspection::Gone => Inspection::Gone,
    })
}

/// Checks `dir/name` as strictly as a message of `agent`'s `ready/` or `processing/` must be:
/// name `<id>.json`, a regular file within the size limit, strict parse, `id` equal to the name,
/// `recipient` equal to `agent`.
pub(super) fn inspect_message(
    dir: &Path,
    name: &OsStr,
    agent: &AgentName,
) -> io::Result<Inspection<MailboxMessage>> {
    let Some(name_id) = id_from_file_name(name) else {
        let why = if name.to_str().is_none() {
            "file name is not valid UTF-8 (expected <message-id>.json)".to_owned()
        } else {
            "file name is not <message-id>.json with a canonical UUID v4/v7".to_owned()
        };
        return Ok(Inspection::Invalid(why));
    };
    let message = match read_message(&dir.join(name))? {
        Inspection::Valid(message) => message,
        other => return Ok(other),
    };
    if message.id() != name_id {
        return Ok(Inspection::Invalid(format!(
            "file name {} differs from the message id {}",
            name.to_string_lossy(),
            message.id()
        )));
    }
    if message.recipient() != agent {
        return Ok(Inspection::Invalid(format!(
            "recipient {} differs from the mailbox {agent}",
            message.recipient()
        )));
    }
    Ok(Inspection::Valid(message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::fs;

    #[test]
    fn file_names_must_be_canonical_ids() {
        let id = "0b7e3c1a-2f4d-4c6e-9a8b-1c2d3e4f5a6b";
        assert!(id_from_file_name(OsStr::new(&format!("{id}.json"))).is_some());
        for bad in [
            id.to_owned(),
            format!("{id}.json.1"),
            format!("{}.json", id.to_uppercase()),
            "..json".to_owned(),
            "x.json".to_owned(),
        ] {
            assert!(id_from_file_name(OsStr::new(&bad)).is_none(), "{bad}");
        }
        let non_utf8: OsString =
            std::os::unix::ffi::OsStringExt::from_vec(vec![0xff, b'.', b'j', b's', b'o', b'n']);
        assert!(id_from_file_name(&non_utf8).is_none());
    }

    #[test]
    fn temp_names_start_with_a_dot() {
        assert!(is_temp(OsStr::new(".x.json.tmp-1-2")));
        assert!(!is_temp(OsStr::new("x.json")));
    }

    #[test]
    fn oversized_files_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let file = fs::File::create(&path).unwrap();
        file.set_len(MAX_MESSAGE_BYTES + 1).unwrap();
        assert!(matches!(
            read_bounded(&path).unwrap(),
            Inspection::Invalid(why) if why.contains("larger")
        ));
        file.set_len(MAX_MESSAGE_BYTES).unwrap();
        assert!(matches!(read_bounded(&path).unwrap(), Inspection::Valid(b) if b.len() == 1 << 20));
    }

    #[test]
    fn symlinks_and_fifos_are_refused_and_missing_files_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, b"{}").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(
            read_bounded(&link).unwrap(),
            Inspection::Invalid(why) if why.contains("symbolic link")
        ));
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            read_bounded(&fifo).unwrap(),
            Inspection::Invalid(why) if why.contains("regular")
        ));
        assert!(matches!(
            read_bounded(&dir.path().join("missing")).unwrap(),
            Inspection::Gone
        ));
    }
}
