//! Transcripts: each agent's conversation, appended to `.troupe/transcripts/<agent>.jsonl` as it
//! grows, so that a later run continues the same conversation instead of forgetting it.
//!
//! One line per history entry: `{"key": null | "<idempotency key>", "message": <ChatMessage>,
//! "origin": "runtime" | "person" | "input" | "summary"}` (`origin` is absent in lines written
//! before it existed; it is then derived: a keyed user message is an input, an unkeyed one a
//! person's words, anything else the runtime's). The keys come back with the messages, so an
//! input redelivered after a restart (a message a dead run left in `processing/`) is recognised
//! and not appended twice.
//!
//! **Compaction boundaries.** When a summary compaction replaces the history, a boundary line
//! `{"compaction": {"kind": "summary" | "dropped" | "new_session", "replaced": N}}` is appended,
//! followed by the whole new history (the summary and the kept recent exchanges, copied). A load
//! keeps the messages after the last boundary only — so the next run continues from the
//! compacted conversation — while the text before it stays in the file for people, and the keys
//! of every line, before or after, are still known.
//!
//! **Cleared results.** When micro-compaction clears a batch of old tool results from what is
//! sent (see `context::micro`), a line `{"micro_compaction": {"cleared_results": N}}` records
//! how many clearable results are now sent cleared. The originals stay in the file; a load
//! takes the last such line after the last boundary (a boundary resets it to 0), so the next run
//! sends the very bytes the last one did and the provider's prompt cache keeps hitting.
//!
//! Loading is forgiving where a crash can leave a trace and strict elsewhere: a last line without
//! its `\n` (an interrupted append) is ignored, and cut off before the next append (see
//! `store::journal`); a tool call whose result never made it to the file is answered with
//! `Error [cancelled]` so the history can be sent to a model again; any other unreadable line
//! (a duplicate key included) is an error naming the file and line. A transcript that is not a
//! regular file (a FIFO, a symlink) is refused without blocking.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use troupe_wire::{strict, AgentName};

use crate::error::tool_error_text;
use crate::layout::Layout;
use crate::model::ChatMessage;
use crate::store::{durable, journal, IoError};

/// Where a history's entries go as they are appended.
#[async_trait::async_trait]
pub trait TranscriptSink: Send + Sync {
    async fn append(
        &self,
        key: Option<&str>,
        message: &ChatMessage,
        origin: Origin,
    ) -> Result<(), IoError>;

    /// Records that the history was replaced (a compaction): what follows is the whole history.
    async fn boundary(&self, boundary: &Boundary) -> Result<(), IoError>;

    /// Records that the first `cleared.cleared_results` clearable tool results are now sent
    /// cleared (a micro-compaction batch).
    async fn micro_compaction(&self, cleared: &MicroCompaction) -> Result<(), IoError>;
}

/// Who put a message in the history. Compaction keeps a person's words verbatim (SPEC §9), so
/// it must know which messages they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The runtime: the system prompt, the model's answers, tool results, continuation prompts.
    Runtime,
    /// A person: the prompt of a run, a message a person sent.
    Person,
    /// An input from elsewhere: an event, another agent's message.
    Input,
    /// A compaction's summary (or its note that older messages were dropped).
    Summary,
    /// A note of the living prompt (what changed in the team, the requests, the memory): kept
    /// in memory only, never written to a transcript, dropped by compaction (which rebuilds
    /// the system prompt whole). See `agent::prompt`.
    Note,
}

impl Origin {
    /// The origin of a line written before origins were recorded.
    pub fn derived(key: Option<&str>, message: &ChatMessage) -> Self {
        match (message, key) {
            (ChatMessage::User { .. }, Some(_)) => Self::Input,
            (ChatMessage::User { .. }, None) => Self::Person,
            _ => Self::Runtime,
        }
    }
}

/// A compaction boundary (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Boundary {
    pub kind: BoundaryKind,
    /// How many messages the history had before it was replaced.
    pub replaced: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundaryKind {
    /// Older history replaced by a model's summary.
    Summary,
    /// Older history dropped with a note (the summary failed).
    Dropped,
}

/// A micro-compaction batch (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MicroCompaction {
    /// How many clearable tool results, counted from the start of the history after the last
    /// boundary, are sent cleared.
    pub cleared_results: usize,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MicroCompactionLine {
    micro_compaction: MicroCompaction,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    key: Option<String>,
    message: ChatMessage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    origin: Option<Origin>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BoundaryLine {
    compaction: Boundary,
}

/// One line of the file: an entry, or a boundary.
#[derive(Deserialize)]
#[serde(untagged)]
enum AnyLine {
    Entry(Line),
    Boundary(BoundaryLine),
    MicroCompaction(MicroCompactionLine),
}

/// A transcript file (appends are fsynced: a message the model saw is not forgotten).
pub struct FileTranscript {
    path: PathBuf,
}

/// What a transcript held: the messages after its last compaction boundary (with their origins),
/// and the keys of every line.
#[derive(Debug, Default)]
pub struct Loaded {
    pub messages: Vec<ChatMessage>,
    pub origins: Vec<Origin>,
    pub keys: HashSet<String>,
    /// How many compaction boundaries the file holds.
    pub boundaries: usize,
    /// The last of them, if any.
    pub last_boundary: Option<Boundary>,
    /// How many clearable tool results are sent cleared (the last micro-compaction line after
    /// the last boundary; 0 when there is none).
    pub cleared_results: usize,
}

impl FileTranscript {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the transcript; a missing file is an empty one.
    pub fn load(&self) -> Result<Loaded, IoError> {
        let Some(complete) = journal::read_complete(&self.path)? else {
            return Ok(Loaded::default());
        };
        parse(&complete).map_err(|e| IoError::new("read", &self.path, std::io::Error::other(e)))
    }
}

/// A transcript that can be read back as well as appended to: what a runner continues from.
#[async_trait::async_trait]
pub trait Transcript: TranscriptSink {
    async fn load(&self) -> Result<Loaded, IoError>;
}

#[async_trait::async_trait]
impl Transcript for FileTranscript {
    async fn load(&self) -> Result<Loaded, IoError> {
        crate::sync::blocking(|| FileTranscript::load(self))
    }
}

/// Complete transcript lines (each ending in `\n`) as a history; the error names the line.
pub fn parse(complete: &[u8]) -> Result<Loaded, String> {
    let mut loaded = Loaded::default();
    for (n, line) in complete.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let parsed: AnyLine = strict::from_json_bytes(line, "").map_err(|e| {
            format!(
                "line {}: not a transcript entry or compaction boundary ({e})",
                n + 1
            )
        })?;
        match parsed {
            AnyLine::Entry(entry) => {
                let origin = entry
                    .origin
                    .unwrap_or_else(|| Origin::derived(entry.key.as_deref(), &entry.message));
                if let Some(key) = entry.key {
                    loaded.keys.insert(key);
                }
                loaded.messages.push(entry.message);
                loaded.origins.push(origin);
            }
            AnyLine::Boundary(line) => {
                loaded.messages.clear();
                loaded.origins.clear();
                loaded.boundaries += 1;
                loaded.last_boundary = Some(line.compaction);
                loaded.cleared_results = 0;
            }
            AnyLine::MicroCompaction(line) => {
                loaded.cleared_results = line.micro_compaction.cleared_results;
            }
        }
    }
    answer_dangling_calls(&mut loaded.messages, &mut loaded.origins);
    Ok(loaded)
}

/// The lines of a transcript kept somewhere else than a file (a database): appended one at a
/// time, read back whole.
#[async_trait::async_trait]
pub trait TranscriptLines: Send + Sync {
    /// Appends one line (no `\n`), durably.
    async fn append_line(&self, line: &[u8]) -> Result<(), String>;
    /// Every line of the current conversation, each followed by `\n`.
    async fn read_lines(&self) -> Result<Vec<u8>, String>;
    /// Where it is, for errors.
    fn describe(&self) -> String;
}

/// A transcript on [`TranscriptLines`]: the same lines and rules as [`FileTranscript`].
pub struct LinesTranscript<L>(pub L);

impl<L: TranscriptLines> LinesTranscript<L> {
    fn error(&self, action: &'static str, e: String) -> IoError {
        IoError::new(
            action,
            std::path::Path::new(&self.0.describe()),
            std::io::Error::other(e),
        )
    }

    async fn write(&self, line: &(impl Serialize + Sync)) -> Result<(), IoError> {
        let bytes = serde_json::to_vec(line).map_err(|e| self.error("encode", e.to_string()))?;
        self.0
            .append_line(&bytes)
            .await
            .map_err(|e| self.error("append", e))
    }
}

#[async_trait::async_trait]
impl<L: TranscriptLines> TranscriptSink for LinesTranscript<L> {
    async fn append(
        &self,
        key: Option<&str>,
        message: &ChatMessage,
        origin: Origin,
    ) -> Result<(), IoError> {
        self.write(&Line {
            key: key.map(str::to_owned),
            message: message.clone(),
            origin: Some(origin),
        })
        .await
    }

    async fn boundary(&self, boundary: &Boundary) -> Result<(), IoError> {
        self.write(&BoundaryLine {
            compaction: boundary.clone(),
        })
        .await
    }

    async fn micro_compaction(&self, cleared: &MicroCompaction) -> Result<(), IoError> {
        self.write(&MicroCompactionLine {
            micro_compaction: *cleared,
        })
        .await
    }
}

#[async_trait::async_trait]
impl<L: TranscriptLines> Transcript for LinesTranscript<L> {
    async fn load(&self) -> Result<Loaded, IoError> {
        let bytes = self
            .0
            .read_lines()
            .await
            .map_err(|e| self.error("read", e))?;
        parse(&bytes).map_err(|e| self.error("read", e))
    }
}

impl FileTranscript {
    fn append_line(&self, line: &impl Serialize) -> Result<(), IoError> {
        let mut bytes = serde_json::to_vec(line)
            .map_err(|e| IoError::new("encode", &self.path, std::io::Error::other(e)))?;
        bytes.push(b'\n');
        if let Some(dir) = self.path.parent() {
            durable::ensure_real_dir(dir)?;
        }
        journal::append(&self.path, &bytes)
    }
}

/// An append takes the file's lock and fsyncs: off the async threads.
#[async_trait::async_trait]
impl TranscriptSink for FileTranscript {
    async fn append(
        &self,
        key: Option<&str>,
        message: &ChatMessage,
        origin: Origin,
    ) -> Result<(), IoError> {
        let line = Line {
            key: key.map(str::to_owned),
            message: message.clone(),
            origin: Some(origin),
        };
        crate::sync::blocking(|| self.append_line(&line))
    }

    async fn boundary(&self, boundary: &Boundary) -> Result<(), IoError> {
        let line = BoundaryLine {
            compaction: boundary.clone(),
        };
        crate::sync::blocking(|| self.append_line(&line))
    }

    async fn micro_compaction(&self, cleared: &MicroCompaction) -> Result<(), IoError> {
        let line = MicroCompactionLine {
            micro_compaction: *cleared,
        };
        crate::sync::blocking(|| self.append_line(&line))
    }
}

/// Where every agent's transcript is kept: files under `.troupe/transcripts/`, or a database.
/// Opening one touches nothing; reading, appending and setting aside are async (a file's work
/// runs off the async threads, a database's awaits its pool).
#[async_trait::async_trait]
pub trait Transcripts: Send + Sync {
    /// The transcript of `agent`.
    fn open(&self, agent: &AgentName) -> Arc<dyn Transcript>;
    /// Sets `agent`'s conversation aside (kept, never deleted) so that it starts a fresh one;
    /// where it went, or `None` when there was none.
    async fn set_aside(&self, agent: &AgentName) -> Result<Option<PathBuf>, IoError>;
}

/// Transcripts as files: `.troupe/transcripts/<agent>.jsonl`.
pub struct FileTranscripts(pub Layout);

#[async_trait::async_trait]
impl Transcripts for FileTranscripts {
    fn open(&self, agent: &AgentName) -> Arc<dyn Transcript> {
        Arc::new(FileTranscript::new(self.0.transcript(agent)))
    }

    async fn set_aside(&self, agent: &AgentName) -> Result<Option<PathBuf>, IoError> {
        crate::sync::blocking(|| set_aside(&self.0.transcript(agent)))
    }
}

/// Moves the transcript at `path` (`<dir>/<agent>.jsonl`) aside to `<dir>/<agent>.<n>.jsonl`,
/// with `n` one past the highest taken (`next_earlier_number`), so that the agent starts a
/// fresh conversation while the old one is kept. Never overwrites: the move fails rather than replace a file, and is
/// fsynced. Returns where it went, or `None` when there was no transcript. Agent names have no
/// dots, so a set-aside file can never be another agent's transcript.
pub fn set_aside(path: &Path) -> Result<Option<PathBuf>, IoError> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(IoError::new("inspect", path, e)),
    }
    let (Some(dir), Some(stem)) = (path.parent(), path.file_stem()) else {
        return Err(IoError::new(
            "set aside",
            path,
            std::io::Error::other("not a transcript path"),
        ));
    };
    durable::ensure_real_dir(dir)?;
    let stem = stem.to_string_lossy();
    let first = crate::store::retention::files::next_earlier_number(dir, &stem)?;
    for n in first..=u64::MAX {
        let target = dir.join(format!("{stem}.{n}.jsonl"));
        match crate::store::moves::rename_noreplace(path, &target) {
            Ok(()) => {
                durable::fsync_dir(dir)?;
                return Ok(Some(target));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(IoError::new("set aside", path, e)),
        }
    }
    Err(IoError::new(
        "set aside",
        path,
        std::io::Error::other("no free name"),
    ))
}

/// Every tool call of an assistant message must be followed by its result before the next
/// non-tool message; a crash between the two leaves calls unanswered. Answer them as cancelled.
fn answer_dangling_calls(messages: &mut Vec<ChatMessage>, origins: &mut Vec<Origin>) {
    let mut repaired = Vec::with_capacity(messages.len());
    let mut repaired_origins = Vec::with_capacity(origins.len());
    let mut open: Vec<String> = Vec::new();
    let close =
        |open: &mut Vec<String>, out: &mut Vec<ChatMessage>, out_origins: &mut Vec<Origin>| {
            for id in open.drain(..) {
                let text = tool_error_text(
                    "cancelled",
                    "troupe stopped before this tool call's result was recorded",
                );
                out.push(ChatMessage::tool_result(id, text));
                out_origins.push(Origin::Runtime);
            }
        };
    for (message, origin) in messages.drain(..).zip(origins.drain(..)) {
        match &message {
            ChatMessage::Tool { tool_call_id, .. } => {
                open.retain(|id| id != tool_call_id);
            }
            other => {
                close(&mut open, &mut repaired, &mut repaired_origins);
                if let ChatMessage::Assistant(a) = other {
                    open.extend(a.tool_calls.iter().map(|c| c.id.clone()));
                }
            }
        }
        repaired.push(message);
        repaired_origins.push(origin);
    }
    close(&mut open, &mut repaired, &mut repaired_origins);
    *messages = repaired;
    *origins = repaired_origins;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AssistantMessage, ToolCall};

    #[tokio::test]
    async fn round_trips_keys_and_messages_and_ignores_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let t = FileTranscript::new(dir.path().join("t/lead.jsonl"));
        t.append(None, &ChatMessage::system("sys"), Origin::Runtime)
            .await
            .unwrap();
        t.append(Some("m-1"), &ChatMessage::user("event"), Origin::Input)
            .await
            .unwrap();
        let mut bytes = std::fs::read(t.path()).unwrap();
        bytes.extend_from_slice(b"{\"key\":null,\"mess");
        std::fs::write(t.path(), bytes).unwrap();
        let loaded = t.load().unwrap();
        assert_eq!(
            loaded.messages,
            vec![ChatMessage::system("sys"), ChatMessage::user("event")]
        );
        assert!(loaded.keys.contains("m-1"));
    }

    #[tokio::test]
    async fn unanswered_tool_calls_are_answered_as_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        let t = FileTranscript::new(dir.path().join("lead.jsonl"));
        let calls = vec![
            ToolCall::new("a", "glob", "{}"),
            ToolCall::new("b", "glob", "{}"),
        ];
        t.append(None, &ChatMessage::user("go"), Origin::Person)
            .await
            .unwrap();
        t.append(
            None,
            &ChatMessage::Assistant(AssistantMessage::tool_calls(calls)),
            Origin::Runtime,
        )
        .await
        .unwrap();
        t.append(None, &ChatMessage::tool_result("a", "ok"), Origin::Runtime)
            .await
            .unwrap();
        let loaded = t.load().unwrap();
        assert_eq!(loaded.messages.len(), 4);
        match &loaded.messages[3] {
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => {
                assert_eq!(tool_call_id, "b");
                assert!(content.starts_with("Error [cancelled]"), "{content}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn set_aside_numbers_old_transcripts_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("writer.jsonl");
        assert_eq!(set_aside(&path).unwrap(), None);
        // A file squatting on `.1` is kept; the transcript goes to the next free number.
        std::fs::write(dir.path().join("writer.1.jsonl"), b"squatter").unwrap();
        for (content, n) in [(&b"first"[..], 2), (&b"second"[..], 3)] {
            std::fs::write(&path, content).unwrap();
            let moved = set_aside(&path).unwrap().unwrap();
            assert_eq!(moved, dir.path().join(format!("writer.{n}.jsonl")));
            assert_eq!(std::fs::read(&moved).unwrap(), content);
            assert!(!path.exists());
        }
        assert_eq!(
            std::fs::read(dir.path().join("writer.1.jsonl")).unwrap(),
            b"squatter"
        );
        // gc removed the oldest: the next number is still one past the highest kept, and
        // another agent's numbers (`writer2`) do not count.
        std::fs::remove_file(dir.path().join("writer.1.jsonl")).unwrap();
        std::fs::remove_file(dir.path().join("writer.2.jsonl")).unwrap();
        std::fs::write(dir.path().join("writer2.9.jsonl"), b"another agent").unwrap();
        std::fs::write(&path, b"third").unwrap();
        assert_eq!(
            set_aside(&path).unwrap().unwrap(),
            dir.path().join("writer.4.jsonl")
        );
        // A planted file with the highest number there is: a clear error, the transcript
        // where it was, no overflow.
        std::fs::write(dir.path().join(format!("writer.{}.jsonl", u64::MAX)), b"x").unwrap();
        std::fs::write(&path, b"fourth").unwrap();
        let err = set_aside(&path).unwrap_err();
        assert!(err.to_string().contains("no free name"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"fourth");
    }

    #[tokio::test]
    async fn a_load_continues_from_the_last_boundary_and_keeps_every_key() {
        let dir = tempfile::tempdir().unwrap();
        let t = FileTranscript::new(dir.path().join("lead.jsonl"));
        t.append(None, &ChatMessage::system("sys"), Origin::Runtime)
            .await
            .unwrap();
        t.append(None, &ChatMessage::user("old prompt"), Origin::Person)
            .await
            .unwrap();
        t.append(Some("m-1"), &ChatMessage::user("old event"), Origin::Input)
            .await
            .unwrap();
        for n in 1..=2 {
            t.boundary(&Boundary {
                kind: BoundaryKind::Summary,
                replaced: n,
            })
            .await
            .unwrap();
            t.append(
                None,
                &ChatMessage::user(format!("summary {n}")),
                Origin::Summary,
            )
            .await
            .unwrap();
        }
        t.append(Some("m-2"), &ChatMessage::user("new event"), Origin::Input)
            .await
            .unwrap();
        let loaded = t.load().unwrap();
        assert_eq!(
            loaded.messages,
            vec![
                ChatMessage::user("summary 2"),
                ChatMessage::user("new event")
            ]
        );
        assert_eq!(loaded.origins, vec![Origin::Summary, Origin::Input]);
        assert!(loaded.keys.contains("m-1") && loaded.keys.contains("m-2"));
        assert_eq!(loaded.boundaries, 2);
        // The text before the boundaries stays in the file for people.
        let text = std::fs::read_to_string(t.path()).unwrap();
        assert!(text.contains("old prompt"));
    }

    #[tokio::test]
    async fn a_load_takes_the_last_micro_compaction_after_the_last_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let t = FileTranscript::new(dir.path().join("lead.jsonl"));
        let cleared = |n| MicroCompaction { cleared_results: n };
        t.append(None, &ChatMessage::user("go"), Origin::Person)
            .await
            .unwrap();
        t.micro_compaction(&cleared(2)).await.unwrap();
        t.micro_compaction(&cleared(5)).await.unwrap();
        assert_eq!(t.load().unwrap().cleared_results, 5);
        t.boundary(&Boundary {
            kind: BoundaryKind::Summary,
            replaced: 3,
        })
        .await
        .unwrap();
        assert_eq!(t.load().unwrap().cleared_results, 0, "a boundary resets it");
        t.micro_compaction(&cleared(1)).await.unwrap();
        let loaded = t.load().unwrap();
        assert_eq!(loaded.cleared_results, 1);
        assert!(
            loaded.messages.is_empty(),
            "a micro-compaction line is no message"
        );
    }

    #[test]
    fn lines_without_an_origin_get_a_derived_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lead.jsonl");
        std::fs::write(
            &path,
            concat!(
                "{\"key\":null,\"message\":{\"role\":\"user\",\"content\":\"prompt\"}}\n",
                "{\"key\":\"m\",\"message\":{\"role\":\"user\",\"content\":\"event\"}}\n",
                "{\"key\":null,\"message\":{\"role\":\"assistant\",\"content\":\"ok\"}}\n",
            ),
        )
        .unwrap();
        let loaded = FileTranscript::new(&path).load().unwrap();
        assert_eq!(
            loaded.origins,
            vec![Origin::Person, Origin::Input, Origin::Runtime]
        );
    }

    #[test]
    fn a_line_mixing_an_entry_and_a_boundary_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lead.jsonl");
        std::fs::write(
            &path,
            b"{\"key\":null,\"message\":{\"role\":\"user\",\"content\":\"x\"},\"compaction\":{\"kind\":\"summary\",\"replaced\":1}}\n",
        )
        .unwrap();
        let err = FileTranscript::new(&path).load().unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn a_corrupt_line_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lead.jsonl");
        std::fs::write(
            &path,
            b"{\"key\":null,\"message\":{\"role\":\"user\",\"content\":\"x\"}}\nnot json\n",
        )
        .unwrap();
        let err = FileTranscript::new(&path).load().unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }
}
