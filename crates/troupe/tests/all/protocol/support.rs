//! Shared fixture and builders for the protocol store tests.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use troupe::clock::ManualClock;
use troupe::error::ErrorCode;
use troupe::ids::{IdGenerator, SequentialIds};
use troupe::layout::Layout;
use troupe::store::protocol::{
    JsonProtocolStore, NewRequest, ProtocolError, ProtocolFiles, ProtocolStore, DEFAULT_TTL,
};
use troupe::store::IoError;
use troupe::store::{durable, journal};
use troupe::wire::message::Envelope;
use troupe::wire::{
    AgentName, Content, MessageId, ProtocolMessage, ProtocolRequest, RequestKind, UtcTime,
};

/// A temp workspace with a manual clock and deterministic ids.
pub struct Fixture {
    /// Kept alive for the fixture's lifetime: dropping it deletes the workspace.
    _dir: tempfile::TempDir,
    pub layout: Layout,
    pub clock: ManualClock,
    pub ids: Arc<SequentialIds>,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        Self {
            _dir: dir,
            layout,
            clock: ManualClock::at_spec_epoch(),
            ids: Arc::new(SequentialIds::new()),
        }
    }

    pub fn store(&self) -> JsonProtocolStore {
        self.try_store().unwrap()
    }

    pub fn try_store(&self) -> Result<JsonProtocolStore, ProtocolError> {
        JsonProtocolStore::open(&self.layout, Arc::new(self.clock.clone()), self.ids.clone())
    }

    pub fn store_with_ids(&self, ids: Arc<dyn IdGenerator>) -> JsonProtocolStore {
        JsonProtocolStore::open(&self.layout, Arc::new(self.clock.clone()), ids).unwrap()
    }

    pub fn store_with_files(&self, files: Arc<dyn ProtocolFiles>) -> JsonProtocolStore {
        JsonProtocolStore::open_with_files(
            &self.layout,
            Arc::new(self.clock.clone()),
            self.ids.clone(),
            files,
        )
        .unwrap()
    }

    pub fn state_path(&self) -> PathBuf {
        self.layout.protocol_state()
    }

    pub fn archive_path(&self) -> PathBuf {
        self.layout.protocol_archive()
    }

    pub fn state_bytes(&self) -> Option<Vec<u8>> {
        std::fs::read(self.state_path()).ok()
    }

    pub fn archive_bytes(&self) -> Option<Vec<u8>> {
        std::fs::read(self.archive_path()).ok()
    }

    /// The requests in `state.json` (as JSON values).
    pub fn state_requests(&self) -> Vec<serde_json::Value> {
        let bytes = self.state_bytes().unwrap_or_default();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        value["requests"].as_array().cloned().unwrap_or_default()
    }

    /// The archive's lines, parsed.
    pub fn archive_lines(&self) -> Vec<ProtocolRequest> {
        let bytes = self.archive_bytes().unwrap_or_default();
        bytes
            .split_inclusive(|&b| b == b'\n')
            .map(|line| serde_json::from_slice(line).unwrap())
            .collect()
    }

    pub fn now(&self) -> UtcTime {
        troupe::clock::Clock::now(&self.clock)
    }
}

pub fn name(raw: &str) -> AgentName {
    AgentName::parse(raw).unwrap()
}

pub fn content(raw: &str) -> Content {
    Content::parse(raw).unwrap()
}

/// Message ids from a range the fixture's `SequentialIds` never reaches.
pub fn mid(n: u64) -> MessageId {
    MessageId::parse(&format!("00000000-0000-4000-9000-{n:012x}")).unwrap()
}

pub fn shutdown_of(target: &str) -> NewRequest {
    NewRequest {
        kind: RequestKind::Shutdown,
        sender: name("lead"),
        target: name(target),
        content: content("please stop"),
        ttl: DEFAULT_TTL,
    }
}

pub fn plan_of(sender: &str) -> NewRequest {
    NewRequest {
        kind: RequestKind::PlanApproval,
        sender: name(sender),
        target: name("lead"),
        content: content("my plan"),
        ttl: DEFAULT_TTL,
    }
}

pub fn with_ttl(mut new: NewRequest, ttl: Duration) -> NewRequest {
    new.ttl = ttl;
    new
}

fn envelope(id: MessageId, from: &AgentName, to: &AgentName, text: &str) -> Envelope {
    Envelope {
        id,
        sender: from.clone(),
        recipient: to.clone(),
        content: content(text),
        created_at_utc: UtcTime::from_unix_millis(1_785_398_400_000).unwrap(),
    }
}

/// The matching response: from the target to the sender, of the paired kind.
pub fn answer(request: &ProtocolRequest, id: MessageId, approved: bool) -> ProtocolMessage {
    response(
        request,
        id,
        request.kind().response_message_kind(),
        request.target(),
        request.sender(),
        approved,
    )
}

pub fn response(
    request: &ProtocolRequest,
    id: MessageId,
    kind: troupe::wire::ProtocolMessageKind,
    from: &AgentName,
    to: &AgentName,
    approved: bool,
) -> ProtocolMessage {
    let text = if approved { "Approved" } else { "Rejected" };
    ProtocolMessage::response(envelope(id, from, to, text), kind, request.id(), approved).unwrap()
}

/// The `*_request` message announcing `request`.
pub fn announce(request: &ProtocolRequest, id: MessageId) -> ProtocolMessage {
    ProtocolMessage::request(
        envelope(
            id,
            request.sender(),
            request.target(),
            request.content().as_str(),
        ),
        request.kind().request_message_kind(),
        request.id(),
    )
    .unwrap()
}

pub fn code<T>(result: &Result<T, ProtocolError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

/// Creates and resolves `n` shutdown requests (approved by `mid(base + i)`), one ms apart.
pub async fn resolve_many(
    fx: &Fixture,
    store: &JsonProtocolStore,
    n: u64,
    base: u64,
) -> Vec<ProtocolRequest> {
    let mut resolved = Vec::new();
    for i in 0..n {
        fx.clock.advance_millis(1);
        let request = store.create(shutdown_of("alice")).await.unwrap();
        resolved.push(
            store
                .consume_response(&answer(&request, mid(base + i), true))
                .await
                .unwrap()
                .request,
        );
    }
    resolved
}

/// A write seam that fails on demand (tests run as root, so permissions cannot make it fail).
#[derive(Default)]
pub struct FailingFiles {
    pub fail_replace: AtomicBool,
    pub fail_append: AtomicBool,
    pub fail_answer: AtomicBool,
    pub replaces: AtomicUsize,
    pub appends: AtomicUsize,
}

impl FailingFiles {
    fn refused(path: &std::path::Path) -> IoError {
        IoError::new("write", path, std::io::Error::other("injected failure"))
    }
}

impl ProtocolFiles for FailingFiles {
    fn replace_state(&self, path: &std::path::Path, bytes: &[u8]) -> Result<(), IoError> {
        if self.fail_replace.load(Ordering::SeqCst) {
            return Err(Self::refused(path));
        }
        self.replaces.fetch_add(1, Ordering::SeqCst);
        durable::replace(path, bytes)
    }

    fn append_archive(&self, path: &std::path::Path, bytes: &[u8]) -> Result<(), IoError> {
        if self.fail_append.load(Ordering::SeqCst) {
            // Leave half a batch behind, as a crash or a full disk would.
            let _ = journal::append(path, &bytes[..bytes.len() / 2]);
            return Err(Self::refused(path));
        }
        self.appends.fetch_add(1, Ordering::SeqCst);
        journal::append(path, bytes)
    }

    fn create_answer(&self, path: &std::path::Path, bytes: &[u8]) -> Result<(), IoError> {
        if self.fail_answer.load(Ordering::SeqCst) {
            // As a failed folder fsync would: the file is in place, the call fails.
            durable::create_new(path, bytes)?;
            return Err(Self::refused(path));
        }
        durable::create_new(path, bytes)
    }
}
