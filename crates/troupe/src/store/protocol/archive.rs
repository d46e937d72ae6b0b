//! `archive.jsonl`: the append-only home of resolved requests moved out of `state.json`.
//!
//! One resolved [`ProtocolRequest`] as compact JSON per line, `\n`-terminated. Lines are only
//! ever appended, under the protocol lock, in batches by compaction (see `compaction`).
//!
//! [`ArchiveIndex`] keeps every archived request in memory, keyed by id, with the largest
//! `created_at_utc` seen, and remembers how many bytes it has read. Catching up reads only the
//! bytes appended since (by this or another process), so a lookup never rescans the file.
//!
//! **Torn tail.** A crash in the middle of an append can leave a last line without its `\n`.
//! Readers ignore such a tail (it is not counted as read). A writer, holding the lock, cuts it
//! off before appending: that is safe because compaction replaces `state.json` only after the
//! whole batch is appended and fsynced, so every request of a torn batch is still in
//! `state.json`. A complete line that does not parse, or a pending request, is corruption and is
//! reported, never repaired.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use troupe_wire::{ProtocolRequest, RequestId, UtcTime};

use super::ProtocolError;
use crate::store::{durable, IoError};

/// What this process knows of the archive file.
#[derive(Debug)]
pub(super) struct ArchiveIndex {
    path: PathBuf,
    /// Archived requests in line order (the order compaction appended them).
    entries: Vec<ProtocolRequest>,
    /// Position of each id in `entries`: lookups without rescanning.
    by_id: HashMap<RequestId, usize>,
    /// The latest creation time archived: `create` refuses a clock earlier than this.
    max_created: Option<UtcTime>,
    /// Bytes of the file read so far; always just after a `\n` (or 0).
    read_up_to: u64,
    /// Bytes after `read_up_to` that do not end with `\n` yet: a torn tail (or an append in
    /// progress, which cannot happen while we hold the lock).
    torn_tail: bool,
}

impl ArchiveIndex {
    pub(super) fn new(path: PathBuf) -> Self {
        Self {
            path,
            entries: Vec::new(),
            by_id: HashMap::new(),
            max_created: None,
            read_up_to: 0,
            torn_tail: false,
        }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn get(&self, id: RequestId) -> Option<&ProtocolRequest> {
        self.by_id.get(&id).and_then(|&i| self.entries.get(i))
    }

    pub(super) fn contains(&self, id: RequestId) -> bool {
        self.by_id.contains_key(&id)
    }

    pub(super) fn entries(&self) -> &[ProtocolRequest] {
        &self.entries
    }

    pub(super) fn max_created(&self) -> Option<UtcTime> {
        self.max_created
    }

    fn corrupt(&self, why: String) -> ProtocolError {
        ProtocolError::Corrupt {
            path: self.path.display().to_string(),
            why,
        }
    }

    /// Reads the complete lines appended since the last call and indexes them.
    pub(super) fn catch_up(&mut self) -> Result<(), ProtocolError> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if self.read_up_to > 0 {
                    return Err(self.corrupt(format!(
                        "the archive disappeared after {} bytes were read from it",
                        self.read_up_to
                    )));
                }
                self.torn_tail = false;
                return Ok(());
            }
            Err(e) => return Err(IoError::new("open", &self.path, e).into()),
        };
        let len = file
            .metadata()
            .map_err(|e| IoError::new("inspect", &self.path, e))?
            .len();
        if len < self.read_up_to {
            return Err(self.corrupt(format!(
                "the archive shrank to {len} bytes after {} bytes were read from it",
                self.read_up_to
            )));
        }
        if len == self.read_up_to {
            self.torn_tail = false;
            return Ok(());
        }
        let mut fresh = Vec::new();
        file.seek(SeekFrom::Start(self.read_up_to))
            .and_then(|_| file.read_to_end(&mut fresh))
            .map_err(|e| IoError::new("read", &self.path, e))?;
        let complete = match fresh.iter().rposition(|&b| b == b'\n') {
            Some(last_newline) => last_newline + 1,
            None => 0,
        };
        self.torn_tail = complete < fresh.len();
        let mut parsed = Vec::new();
        let mut offset = self.read_up_to;
        for line in fresh[..complete].split_inclusive(|&b| b == b'\n') {
            let request = self.parse_line(line, offset)?;
            offset += line.len() as u64;
            parsed.push(request);
        }
        // Index only once every new line is valid, so a corrupt line leaves the index as it was
        // and the error repeats on every call.
        let mut staged: HashMap<RequestId, usize> = HashMap::new();
        for (i, request) in parsed.iter().enumerate() {
            if self.by_id.contains_key(&request.id()) || staged.insert(request.id(), i).is_some() {
                return Err(self.corrupt(format!("request {} is archived twice", request.id())));
            }
        }
        for request in parsed {
            self.insert(request);
        }
        self.read_up_to += complete as u64;
        Ok(())
    }

    fn parse_line(&self, line: &[u8], offset: u64) -> Result<ProtocolRequest, ProtocolError> {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let request: ProtocolRequest = serde_json::from_slice(body)
            .map_err(|e| self.corrupt(format!("line at byte {offset}: {e}")))?;
        if request.is_pending() {
            return Err(self.corrupt(format!(
                "line at byte {offset}: request {} is pending; only resolved requests are archived",
                request.id()
            )));
        }
        Ok(request)
    }

    fn insert(&mut self, request: ProtocolRequest) {
        let created = request.created_at_utc();
        self.max_created = Some(self.max_created.map_or(created, |m| m.max(created)));
        self.by_id.insert(request.id(), self.entries.len());
        self.entries.push(request);
    }

    /// Cuts a torn tail off the file. Only under the protocol lock (see the module docs).
    pub(super) fn cut_torn_tail(&mut self) -> Result<(), ProtocolError> {
        if self.torn_tail {
            tracing::warn!(
                path = %self.path.display(),
                at = self.read_up_to,
                "cutting the torn last line of the protocol archive (left by an interrupted append)"
            );
            durable::truncate(&self.path, self.read_up_to)?;
            self.torn_tail = false;
        }
        Ok(())
    }

    /// After a failed append: cuts whatever part of it reached the file. Best effort (see the
    /// module docs for why leftovers are harmless).
    pub(super) fn roll_back_append(&mut self) {
        let grew = std::fs::metadata(&self.path).is_ok_and(|m| m.len() > self.read_up_to);
        if grew && durable::truncate(&self.path, self.read_up_to).is_err() {
            self.torn_tail = true;
        }
    }

    /// Records lines this process has just appended (their bytes are exactly `appended`).
    pub(super) fn record_appended(&mut self, requests: Vec<ProtocolRequest>, appended: u64) {
        for request in requests {
            self.insert(request);
        }
        self.read_up_to += appended;
    }

    /// The bytes of `requests` as archive lines.
    pub(super) fn encode(requests: &[ProtocolRequest]) -> Result<Vec<u8>, ProtocolError> {
        let mut bytes = Vec::with_capacity(requests.len() * 512);
        for request in requests {
            serde_json::to_writer(&mut bytes, request).map_err(|e| ProtocolError::Corrupt {
                path: String::from("<archive line being written>"),
                why: e.to_string(),
            })?;
            bytes.push(b'\n');
        }
        Ok(bytes)
    }

    /// Forgets everything, so the next `catch_up` reads the whole file again.
    pub(super) fn reset(&mut self) {
        *self = Self::new(std::mem::take(&mut self.path));
    }

    /// Whether a torn tail was seen by the last `catch_up`.
    #[cfg(test)]
    pub(super) fn has_torn_tail(&self) -> bool {
        self.torn_tail
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::error::ErrorCode;
    use std::io::Write;
    use troupe_wire::{AgentName, Content, MessageId, RequestKind, Resolution};

    fn at(ms: i64) -> UtcTime {
        UtcTime::from_unix_millis(1_785_398_400_000 + ms).unwrap()
    }

    fn request(n: u32, resolved: bool) -> ProtocolRequest {
        let pending = ProtocolRequest::new_pending(
            RequestId::parse(&format!("00000000-0000-4000-8000-{n:012x}")).unwrap(),
            RequestKind::Shutdown,
            AgentName::parse("lead").unwrap(),
            AgentName::parse("alice").unwrap(),
            Content::parse("stop").unwrap(),
            at(i64::from(n)),
            at(i64::from(n) + 1000),
        )
        .unwrap();
        if !resolved {
            return pending;
        }
        pending
            .resolved(Resolution {
                message_id: MessageId::parse(&format!("00000000-0000-4000-9000-{n:012x}")).unwrap(),
                approved: true,
                content: Content::parse("ok").unwrap(),
                resolved_at_utc: at(i64::from(n)),
            })
            .unwrap()
    }

    fn append_raw(path: &Path, bytes: &[u8]) {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
    }

    fn lines(requests: &[ProtocolRequest]) -> Vec<u8> {
        ArchiveIndex::encode(requests).unwrap()
    }

    #[test]
    fn missing_file_is_an_empty_archive() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = ArchiveIndex::new(dir.path().join("archive.jsonl"));
        index.catch_up().unwrap();
        assert!(index.entries().is_empty());
        assert_eq!(index.max_created(), None);
    }

    #[test]
    fn catches_up_with_lines_appended_by_others() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("archive.jsonl");
        let mut index = ArchiveIndex::new(path.clone());
        append_raw(&path, &lines(&[request(2, true), request(1, true)]));
        index.catch_up().unwrap();
        assert_eq!(index.entries().len(), 2);
        assert_eq!(index.max_created(), Some(at(2)));
        append_raw(&path, &lines(&[request(3, true)]));
        index.catch_up().unwrap();
        assert_eq!(index.entries().len(), 3);
        assert_eq!(index.get(request(3, true).id()), Some(&request(3, true)));
        assert_eq!(index.max_created(), Some(at(3)));
    }

    #[test]
    fn a_torn_tail_is_ignored_then_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("archive.jsonl");
        let full = lines(&[request(1, true)]);
        let torn = lines(&[request(2, true)]);
        append_raw(&path, &full);
        append_raw(&path, &torn[..torn.len() / 2]);
        let mut index = ArchiveIndex::new(path.clone());
        index.catch_up().unwrap();
        assert_eq!(index.entries().len(), 1);
        assert!(index.has_torn_tail());
        index.cut_torn_tail().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), full);
        index.catch_up().unwrap();
        assert!(!index.has_torn_tail());
    }

    #[test]
    fn refuses_bad_lines_and_keeps_refusing() {
        let bad_cases: Vec<Vec<u8>> = vec![
            b"not json\n".to_vec(),
            b"\n".to_vec(),
            lines(&[request(1, false)]),
            lines(&[request(1, true), request(1, true)]),
        ];
        for bad in bad_cases {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("archive.jsonl");
            append_raw(&path, &bad);
            let mut index = ArchiveIndex::new(path.clone());
            let first = index.catch_up().unwrap_err();
            assert_eq!(first.code(), "protocol_state_corrupt", "{first}");
            assert!(index.catch_up().is_err(), "the error must repeat");
            assert!(index.entries().is_empty());
        }
    }

    #[test]
    fn an_id_archived_again_later_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("archive.jsonl");
        append_raw(&path, &lines(&[request(1, true)]));
        let mut index = ArchiveIndex::new(path.clone());
        index.catch_up().unwrap();
        append_raw(&path, &lines(&[request(1, true)]));
        assert!(index.catch_up().is_err());
    }

    #[test]
    fn a_shrunk_or_vanished_archive_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("archive.jsonl");
        append_raw(&path, &lines(&[request(1, true), request(2, true)]));
        let mut index = ArchiveIndex::new(path.clone());
        index.catch_up().unwrap();
        std::fs::write(&path, lines(&[request(1, true)])).unwrap();
        assert!(index.catch_up().is_err());
        std::fs::remove_file(&path).unwrap();
        assert!(index.catch_up().is_err());
    }
}
