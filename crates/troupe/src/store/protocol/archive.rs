//! `archive.jsonl`: the append-only home of resolved requests moved out of `state.json`.
//!
//! One resolved [`ProtocolRequest`] as compact JSON per line, `\n`-terminated. Lines are only
//! ever appended, under the protocol lock, in batches by compaction (see `compaction`).
//!
//! **Only an index in memory.** [`ArchiveIndex`] keeps, per archived request, its id, its
//! `created_at_utc` (for the clock-backwards check) and where its line is in the file (byte
//! offset and length): a few dozen bytes whatever the request's content. A read that needs the
//! whole request (`get`, a replay, the cross-check with `state.json`) seeks to the offset and
//! parses that one line again, strictly, and checks it holds the indexed id; `list` streams the
//! file. Catching up reads only the bytes appended since the last read (by this or another
//! process), so a lookup never rescans the file.
//!
//! **Why offsets are safe.** A complete line is immutable once written: the file is only ever
//! appended to, and truncation only ever cuts a torn tail, which lies *after* every indexed line.
//! So an indexed offset keeps pointing at the same bytes for the life of the file. If those bytes
//! changed anyway (edited by hand, a broken disk), the strict re-parse and the id check report
//! `Corrupt`; a file that shrank below what was read is `Corrupt` too.
//!
//! **Torn tail.** A crash in the middle of an append can leave a last line without its `\n`.
//! Readers ignore such a tail (it is not counted as read). A writer, holding the lock, cuts it
//! off before appending: that is safe because compaction replaces `state.json` only after the
//! whole batch is appended and fsynced, so every request of a torn batch is still in
//! `state.json`. A complete line that does not parse, or a pending request, is corruption and is
//! reported, never repaired.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use troupe_wire::strict::parse_json_bytes;
use troupe_wire::{ProtocolRequest, RequestId, UtcTime};

use super::ProtocolError;
use crate::store::read::{open_regular, Links};
use crate::store::{durable, IoError};

/// Where one archived request is: all the index keeps of it (besides its id, the map's key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ArchivedLine {
    /// Its creation time: `create` refuses a clock earlier than the latest one.
    created: UtcTime,
    /// Byte offset of its line in the file.
    offset: u64,
    /// Length of its line, `\n` included.
    len: u64,
}

/// What this process knows of the archive file.
#[derive(Debug)]
pub(super) struct ArchiveIndex {
    path: PathBuf,
    /// Every archived id and where its line is.
    by_id: HashMap<RequestId, ArchivedLine>,
    /// The latest creation time archived: `create` refuses a clock earlier than this.
    max_created: Option<UtcTime>,
    /// Bytes of the file read so far; always just after a `\n` (or 0).
    read_up_to: u64,
    /// Bytes after `read_up_to` that do not end with `\n` yet: a torn tail (or an append in
    /// progress, which cannot happen while we hold the lock).
    torn_tail: bool,
    /// The file read (device, inode): `troupe gc` replaces the archive with one without the
    /// requests past their retention, and a replaced file is read again from its start.
    identity: Option<(u64, u64)>,
}

impl ArchiveIndex {
    pub(super) fn new(path: PathBuf) -> Self {
        Self {
            path,
            by_id: HashMap::new(),
            max_created: None,
            read_up_to: 0,
            torn_tail: false,
            identity: None,
        }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn contains(&self, id: RequestId) -> bool {
        self.by_id.contains_key(&id)
    }

    /// How many requests are archived.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_id.len()
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

    fn open(&self) -> Result<File, ProtocolError> {
        open_regular(&self.path, Links::Refuse)?.ok_or_else(|| {
            self.corrupt(format!(
                "the archive disappeared after {} bytes were read from it",
                self.read_up_to
            ))
        })
    }

    /// Reads the archived request `id` back from its line, or `None` if it is not archived.
    /// The line must parse strictly and hold `id`; anything else is `Corrupt`.
    pub(super) fn read(&self, id: RequestId) -> Result<Option<ProtocolRequest>, ProtocolError> {
        let Some(&at) = self.by_id.get(&id) else {
            return Ok(None);
        };
        let mut file = self.open()?;
        let len = usize::try_from(at.len)
            .map_err(|_| self.corrupt(format!("the line of request {id} is too long to read")))?;
        let mut line = vec![0; len];
        file.seek(SeekFrom::Start(at.offset))
            .and_then(|_| file.read_exact(&mut line))
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    self.corrupt(format!(
                        "the line of request {id} at byte {} is cut short",
                        at.offset
                    ))
                } else {
                    IoError::new("read", &self.path, e).into()
                }
            })?;
        if line.last() != Some(&b'\n') {
            return Err(self.corrupt(format!(
                "the line of request {id} at byte {} no longer ends where it did",
                at.offset
            )));
        }
        let request = self.parse_line(&line, at.offset)?;
        if request.id() != id {
            return Err(self.corrupt(format!(
                "line at byte {} holds request {}, not the archived request {id}",
                at.offset,
                request.id()
            )));
        }
        Ok(Some(request))
    }

    /// Every archived request, in line order, streamed from the file (O(history)). Each line
    /// must be exactly where the index has its id.
    pub(super) fn read_all(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        let mut all = Vec::with_capacity(self.by_id.len());
        if self.read_up_to == 0 {
            return Ok(all);
        }
        let mut reader = BufReader::with_capacity(1 << 16, self.open()?.take(self.read_up_to));
        let mut line = Vec::new();
        let mut offset = 0u64;
        loop {
            line.clear();
            let read = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| IoError::new("read", &self.path, e))?;
            if read == 0 {
                break;
            }
            let request = self.parse_line(&line, offset)?;
            let expected = self.by_id.get(&request.id());
            if expected.map(|at| (at.offset, at.len)) != Some((offset, read as u64)) {
                return Err(self.corrupt(format!(
                    "line at byte {offset} holds request {}, which is not archived there",
                    request.id()
                )));
            }
            offset += read as u64;
            all.push(request);
        }
        if offset != self.read_up_to || all.len() != self.by_id.len() {
            return Err(self.corrupt(format!(
                "{} lines in the first {offset} bytes, but {} requests were archived in {} bytes",
                all.len(),
                self.by_id.len(),
                self.read_up_to
            )));
        }
        Ok(all)
    }

    /// Reads the complete lines appended since the last call and indexes them.
    pub(super) fn catch_up(&mut self) -> Result<(), ProtocolError> {
        let Some(mut file) = open_regular(&self.path, Links::Refuse)? else {
            if self.read_up_to > 0 {
                return Err(self.corrupt(format!(
                    "the archive disappeared after {} bytes were read from it",
                    self.read_up_to
                )));
            }
            self.torn_tail = false;
            return Ok(());
        };
        let meta = file
            .metadata()
            .map_err(|e| IoError::new("inspect", &self.path, e))?;
        let identity = (meta.dev(), meta.ino());
        if self.identity.is_some_and(|known| known != identity) {
            // Replaced by gc (its complete lines are a subset of ours): read it again. The
            // latest creation time stays, so `create` keeps refusing an earlier clock.
            let max_created = self.max_created;
            self.reset();
            self.max_created = max_created;
        }
        self.identity = Some(identity);
        let len = meta.len();
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
        // Index only once every new line is valid, so a corrupt line leaves the index as it was
        // and the error repeats on every call.
        let mut staged: HashMap<RequestId, ArchivedLine> = HashMap::new();
        let mut offset = self.read_up_to;
        for line in fresh[..complete].split_inclusive(|&b| b == b'\n') {
            let request = self.parse_line(line, offset)?;
            let id = request.id();
            let at = Self::locate(&request, offset, line.len());
            if self.by_id.contains_key(&id) || staged.insert(id, at).is_some() {
                return Err(self.corrupt(format!("request {id} is archived twice")));
            }
            offset += line.len() as u64;
        }
        for (id, at) in staged {
            self.insert(id, at);
        }
        self.read_up_to += complete as u64;
        Ok(())
    }

    /// The index entry of `request`'s line, `len` bytes at `offset`.
    fn locate(request: &ProtocolRequest, offset: u64, len: usize) -> ArchivedLine {
        ArchivedLine {
            created: request.created_at_utc(),
            offset,
            len: len as u64,
        }
    }

    fn parse_line(&self, line: &[u8], offset: u64) -> Result<ProtocolRequest, ProtocolError> {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let request = parse_json_bytes(body, "")
            .and_then(ProtocolRequest::from_value)
            .map_err(|e| self.corrupt(format!("line at byte {offset}: {e}")))?;
        if request.is_pending() {
            return Err(self.corrupt(format!(
                "line at byte {offset}: request {} is pending; only resolved requests are archived",
                request.id()
            )));
        }
        Ok(request)
    }

    fn insert(&mut self, id: RequestId, at: ArchivedLine) {
        self.max_created = Some(self.max_created.map_or(at.created, |m| m.max(at.created)));
        self.by_id.insert(id, at);
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

    /// Records lines this process has just appended at the end of what it had read: `bytes`
    /// are exactly [`ArchiveIndex::encode`] of `requests`, one line each.
    pub(super) fn record_appended(&mut self, requests: &[ProtocolRequest], bytes: &[u8]) {
        let mut offset = self.read_up_to;
        for (request, line) in requests.iter().zip(bytes.split_inclusive(|&b| b == b'\n')) {
            let at = Self::locate(request, offset, line.len());
            self.insert(request.id(), at);
            offset += line.len() as u64;
        }
        self.read_up_to += bytes.len() as u64;
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
        assert_eq!(index.len(), 0);
        assert_eq!(index.max_created(), None);
        assert_eq!(index.read_all().unwrap(), Vec::new());
    }

    #[test]
    fn catches_up_with_lines_appended_by_others() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("archive.jsonl");
        let mut index = ArchiveIndex::new(path.clone());
        append_raw(&path, &lines(&[request(2, true), request(1, true)]));
        index.catch_up().unwrap();
        assert_eq!(index.len(), 2);
        assert_eq!(index.max_created(), Some(at(2)));
        append_raw(&path, &lines(&[request(3, true)]));
        index.catch_up().unwrap();
        assert_eq!(index.len(), 3);
        assert_eq!(
            index.read(request(3, true).id()).unwrap(),
            Some(request(3, true))
        );
        assert_eq!(
            index.read(request(1, true).id()).unwrap(),
            Some(request(1, true))
        );
        assert_eq!(index.read(request(4, true).id()).unwrap(), None);
        assert_eq!(
            index.read_all().unwrap(),
            vec![request(2, true), request(1, true), request(3, true)]
        );
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
        assert_eq!(index.len(), 1);
        assert!(index.has_torn_tail());
        assert_eq!(index.read_all().unwrap(), vec![request(1, true)]);
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
            assert_eq!(index.len(), 0);
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

    #[test]
    fn lines_appended_by_this_process_are_read_back_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("archive.jsonl");
        append_raw(&path, &lines(&[request(1, true)]));
        let mut index = ArchiveIndex::new(path.clone());
        index.catch_up().unwrap();
        let batch = [request(2, true), request(3, true)];
        let bytes = lines(&batch);
        append_raw(&path, &bytes);
        index.record_appended(&batch, &bytes);
        assert_eq!(index.len(), 3);
        assert_eq!(index.read(batch[1].id()).unwrap(), Some(batch[1].clone()));
        assert_eq!(index.max_created(), Some(at(3)));
        // Nothing new to read: the recorded lines count as read.
        index.catch_up().unwrap();
        assert_eq!(index.len(), 3);
        assert!(!index.has_torn_tail());
    }

    /// Overwrites the bytes of `request`'s line with `with` (same length).
    fn overwrite_line(path: &Path, request: &ProtocolRequest, with: &[u8]) {
        let bytes = std::fs::read(path).unwrap();
        let line = lines(std::slice::from_ref(request));
        let at = bytes
            .windows(line.len())
            .position(|w| w == line.as_slice())
            .unwrap();
        assert_eq!(with.len(), line.len());
        let mut changed = bytes.clone();
        changed[at..at + line.len()].copy_from_slice(with);
        std::fs::write(path, changed).unwrap();
    }

    #[test]
    fn a_line_changed_after_indexing_is_corrupt_on_read() {
        let same_len_other_id = {
            let line = lines(&[request(2, true)]);
            let text = String::from_utf8(line).unwrap();
            // Another id of the same length: the line parses but names the wrong request.
            text.replace("8000-000000000002", "8000-0000000000ff")
                .into_bytes()
        };
        let garbage = vec![b'x'; lines(&[request(2, true)]).len()];
        let mut no_newline = lines(&[request(2, true)]);
        *no_newline.last_mut().unwrap() = b' ';
        for with in [same_len_other_id, garbage, no_newline] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("archive.jsonl");
            append_raw(
                &path,
                &lines(&[request(1, true), request(2, true), request(3, true)]),
            );
            let mut index = ArchiveIndex::new(path.clone());
            index.catch_up().unwrap();
            overwrite_line(&path, &request(2, true), &with);
            index.catch_up().unwrap();
            let err = index.read(request(2, true).id()).unwrap_err();
            assert_eq!(err.code(), "protocol_state_corrupt", "{err}");
            let err = index.read_all().unwrap_err();
            assert_eq!(err.code(), "protocol_state_corrupt", "{err}");
            // Untouched lines still read.
            assert_eq!(
                index.read(request(3, true).id()).unwrap(),
                Some(request(3, true))
            );
        }
    }

    #[test]
    fn a_line_swapped_with_another_of_the_same_length_is_corrupt_in_list() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("archive.jsonl");
        append_raw(&path, &lines(&[request(1, true), request(2, true)]));
        let mut index = ArchiveIndex::new(path.clone());
        index.catch_up().unwrap();
        // Both lines valid and indexed, but no longer where the index has them.
        std::fs::write(&path, lines(&[request(2, true), request(1, true)])).unwrap();
        assert!(index.read(request(1, true).id()).is_err());
        assert!(index.read_all().is_err());
    }

    #[test]
    fn the_index_keeps_a_few_fixed_size_facts_per_request() {
        // No String, Content or ProtocolRequest: memory stays bounded by the number of
        // requests, not by what they say.
        let per_entry = std::mem::size_of::<(RequestId, ArchivedLine)>();
        assert!(per_entry <= 64, "{per_entry} bytes per archived request");
    }
}
