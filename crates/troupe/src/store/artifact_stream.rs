//! A stream of output bytes (a command's, as its pipes are read) kept as an artifact, so a
//! result cut for the conversation can still be read whole (issue 23).
//!
//! The stream holds bytes in memory only until they pass a threshold (the output cap: a small
//! output makes no file); from then on each chunk is written to an [`ArtifactDraft`] as it
//! arrives, and only the few bytes a secret could straddle stay in memory. At most `limit`
//! bytes of output are kept ([`ARTIFACT_LIMIT_BYTES`] by default); the rest is counted, not
//! kept, so the caller can say how much was dropped.
//!
//! What is written is redacted like a tool result: every secret of the [`Redactor`] becomes
//! `[redacted]`. A chunk is written only up to a cut no secret straddles
//! ([`Redactor::cut_end`], with [`Redactor::margin`] bytes of look-ahead), so a secret split
//! across two reads is still seen whole. The bytes are otherwise kept as printed (not
//! converted to UTF-8).
//!
//! Each chunk is written when it is pushed, on the reading task: one pipe read's worth into the
//! page cache, no fsync. The one `sync_all` is in [`ArtifactStream::finish`] (async: it runs
//! off the async threads, then the team's copy is taken); until then the file has a temp name
//! nobody reads ([`super::durable::StagedFile`]), so writing it unsynced loses nothing a crash
//! could expose.

use super::artifacts::{ArtifactDraft, ArtifactRef, ArtifactStore};
use crate::secrets::Redactor;

/// The most output bytes one artifact keeps (64 MiB): room for any log a model could use, far
/// below what would fill a disk when a command prints without end.
pub const ARTIFACT_LIMIT_BYTES: u64 = 64 << 20;

/// Output being kept as an artifact.
pub struct ArtifactStream {
    /// Where the artifact is created once the output passes `threshold`.
    store: ArtifactStore,
    /// Output up to this many bytes stays in memory only.
    threshold: usize,
    /// The most output bytes the artifact keeps.
    limit: u64,
    /// The secrets that must not land in the file.
    redactor: Redactor,
    /// Output bytes not written yet: before the file exists, all of them; after, those a secret
    /// could straddle (at most the redactor's margin and one chunk).
    pending: Vec<u8>,
    /// Output bytes written to the file (redacted), all before `pending`.
    written: u64,
    /// Output bytes pushed in all.
    total: u64,
    /// The most bytes `pending` held after a push (for tests and benchmarks: the memory used).
    peak_pending: usize,
    state: State,
}

enum State {
    /// Under the threshold: no file yet.
    InMemory,
    /// Writing each chunk as it comes.
    Writing(ArtifactDraft),
    /// The limit is reached: the rest is only counted.
    Full(ArtifactDraft),
    /// The file could not be created or written: the rest is only counted.
    Failed(String),
}

/// What became of a stream.
#[derive(Debug)]
pub enum StreamEnd {
    /// The output never passed the threshold: no artifact.
    Small,
    /// The artifact holds the first `kept` of `total` output bytes (redacted).
    Kept {
        artifact: ArtifactRef,
        kept: u64,
        total: u64,
    },
    /// No artifact could be kept, for `reason`.
    Lost { reason: String, total: u64 },
}

impl ArtifactStream {
    /// A stream into `store` that makes a file once more than `threshold` bytes came, keeping
    /// at most [`ARTIFACT_LIMIT_BYTES`].
    pub fn new(store: ArtifactStore, threshold: usize, redactor: Redactor) -> Self {
        Self {
            store,
            threshold,
            limit: ARTIFACT_LIMIT_BYTES,
            redactor,
            pending: Vec::new(),
            written: 0,
            total: 0,
            peak_pending: 0,
            state: State::InMemory,
        }
    }

    /// Another limit (tests use small ones).
    pub fn with_limit(mut self, limit: u64) -> Self {
        self.limit = limit;
        self
    }

    /// The most output bytes held in memory after any push so far.
    pub fn peak_pending(&self) -> usize {
        self.peak_pending
    }

    /// Takes the next bytes of output.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if matches!(self.state, State::Full(_) | State::Failed(_)) {
            return;
        }
        // Past the limit, only the look-ahead a secret at the limit needs is held.
        let room = (self.limit + self.margin()).saturating_sub(self.written + self.held());
        let take = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        self.pending.extend_from_slice(&bytes[..take]);
        if matches!(self.state, State::InMemory) && self.total > self.threshold as u64 {
            self.start();
        }
        self.flush(false);
        self.peak_pending = self.peak_pending.max(self.pending.len());
    }

    /// Writes what is left and places the artifact (the one `sync_all`, off the async threads).
    pub async fn finish(mut self) -> StreamEnd {
        self.flush(true);
        let total = self.total;
        match std::mem::replace(&mut self.state, State::InMemory) {
            State::InMemory => StreamEnd::Small,
            State::Writing(draft) | State::Full(draft) => match draft.finish().await {
                Ok(artifact) => StreamEnd::Kept {
                    artifact,
                    kept: self.written,
                    total,
                },
                Err(e) => StreamEnd::Lost {
                    reason: e.to_string(),
                    total,
                },
            },
            State::Failed(reason) => StreamEnd::Lost { reason, total },
        }
    }

    fn margin(&self) -> u64 {
        self.redactor.margin() as u64
    }

    fn held(&self) -> u64 {
        self.pending.len() as u64
    }

    /// Creates the file.
    fn start(&mut self) {
        self.state = match self.store.draft() {
            Ok(draft) => State::Writing(draft),
            Err(e) => self.fail(e.to_string()),
        };
    }

    /// Writes the pending bytes up to the limit and, unless `last`, short of the look-ahead a
    /// secret straddling the end needs; the cut moves back off any secret it would split.
    fn flush(&mut self, last: bool) {
        let State::Writing(draft) = &mut self.state else {
            return;
        };
        let room = usize::try_from(self.limit - self.written).unwrap_or(usize::MAX);
        let mut end = self.pending.len().min(room);
        if !last {
            end = end.min(self.pending.len().saturating_sub(self.redactor.margin()));
        }
        let end = self.redactor.cut_end(&self.pending, end);
        if let Err(e) = draft.write(&self.redactor.redact_bytes(&self.pending[..end])) {
            self.state = self.fail(e.to_string());
            return;
        }
        self.written += end as u64;
        self.pending.drain(..end);
        // With the look-ahead past the limit in hand, the cut above was the last one.
        if self.written + self.held() >= self.limit + self.margin() {
            self.pending = Vec::new();
            if let State::Writing(draft) = std::mem::replace(&mut self.state, State::InMemory) {
                self.state = State::Full(draft);
            }
        }
    }

    /// Gives up the file (its draft is removed when dropped); the rest is only counted.
    fn fail(&mut self, reason: String) -> State {
        self.pending = Vec::new();
        self.written = 0;
        State::Failed(reason)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use troupe_wire::AgentName;

    use super::*;
    use crate::ids::SequentialIds;
    use crate::layout::Layout;

    const KEY: &str = "sk-live-0123456789abcdef";

    fn store(dir: &std::path::Path) -> ArtifactStore {
        ArtifactStore::new(
            &Layout::new(dir),
            &AgentName::lead(),
            Arc::new(SequentialIds::new()),
        )
    }

    fn read_kept(end: StreamEnd, dir: &std::path::Path) -> (Vec<u8>, u64, u64) {
        match end {
            StreamEnd::Kept {
                artifact,
                kept,
                total,
            } => {
                let bytes = std::fs::read(dir.join(&artifact.relative_path)).unwrap();
                assert_eq!(bytes.len(), artifact.bytes);
                (bytes, kept, total)
            }
            other => panic!("{other:?}"),
        }
    }

    /// Every file under `.troupe/artifacts/lead`, names starting with `.` too.
    fn files(dir: &std::path::Path) -> usize {
        let folder = Layout::new(dir).artifacts_dir(&AgentName::lead());
        std::fs::read_dir(folder).map_or(0, |entries| entries.count())
    }

    #[tokio::test]
    async fn a_small_output_makes_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut stream = ArtifactStream::new(store(dir.path()), 10, Redactor::default());
        stream.push(b"0123456789");
        assert!(matches!(stream.finish().await, StreamEnd::Small));
        assert_eq!(files(dir.path()), 0);
    }

    #[tokio::test]
    async fn a_large_output_is_kept_whole_and_memory_stays_at_the_threshold() {
        let dir = tempfile::tempdir().unwrap();
        let mut stream = ArtifactStream::new(store(dir.path()), 1_000, Redactor::new([KEY]));
        let mut all = Vec::new();
        for i in 0..2_000u32 {
            let chunk = format!("line {i}\n").repeat(30);
            stream.push(chunk.as_bytes());
            all.extend_from_slice(chunk.as_bytes());
        }
        assert!(
            stream.peak_pending() <= 1_000 + 30 * 10,
            "{}",
            stream.peak_pending()
        );
        let (bytes, kept, total) = read_kept(stream.finish().await, dir.path());
        assert_eq!((kept, total), (all.len() as u64, all.len() as u64));
        assert_eq!(bytes, all);
        assert_eq!(files(dir.path()), 1);
    }

    #[tokio::test]
    async fn a_secret_split_between_two_chunks_is_redacted() {
        let text = format!("{}{KEY}{}{KEY}.", "a".repeat(40), "b".repeat(30));
        let want = format!("{}[redacted]{}[redacted].", "a".repeat(40), "b".repeat(30));
        for threshold in [0, 20, 50] {
            for split in 0..=text.len() {
                for limit in [ARTIFACT_LIMIT_BYTES, text.len() as u64] {
                    let dir = tempfile::tempdir().unwrap();
                    let mut stream =
                        ArtifactStream::new(store(dir.path()), threshold, Redactor::new([KEY]))
                            .with_limit(limit);
                    stream.push(&text.as_bytes()[..split]);
                    stream.push(&text.as_bytes()[split..]);
                    let (bytes, kept, _) = read_kept(stream.finish().await, dir.path());
                    assert_eq!(String::from_utf8(bytes).unwrap(), want, "{split}");
                    assert_eq!(kept, text.len() as u64);
                }
            }
        }
    }

    #[tokio::test]
    async fn past_the_limit_nothing_more_is_kept_and_no_secret_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut stream =
            ArtifactStream::new(store(dir.path()), 5, Redactor::default()).with_limit(100);
        for _ in 0..1_000 {
            stream.push(b"0123456789");
        }
        assert!(stream.peak_pending() <= 100);
        let (bytes, kept, total) = read_kept(stream.finish().await, dir.path());
        assert_eq!((bytes.len(), kept, total), (100, 100, 10_000));
        // A key across the limit is left out whole, and the kept count says so.
        for at in 90..=100 {
            let dir = tempfile::tempdir().unwrap();
            let mut stream =
                ArtifactStream::new(store(dir.path()), 5, Redactor::new([KEY])).with_limit(100);
            let text = format!("{}{KEY}{}", "a".repeat(at), "b".repeat(200));
            for chunk in text.as_bytes().chunks(7) {
                stream.push(chunk);
            }
            let (bytes, kept, total) = read_kept(stream.finish().await, dir.path());
            let expected = if at + KEY.len() <= 100 { 100 } else { at };
            assert_eq!(kept, expected as u64, "{at}");
            assert_eq!(total, text.len() as u64);
            assert!(!String::from_utf8(bytes).unwrap().contains("sk-"), "{at}");
        }
    }
}
