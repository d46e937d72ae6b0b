//! `FileMailboxStore` against real folders (SPEC §3): transitions, bad input, concurrency with
//! threads and processes, and a model-based property test.

#[path = "mailbox/bad_input.rs"]
mod bad_input;
#[path = "mailbox/bench.rs"]
mod bench;
#[path = "mailbox/concurrency.rs"]
mod concurrency;
#[path = "mailbox/model.rs"]
mod model;
#[path = "mailbox/transitions.rs"]
mod transitions;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use tempfile::TempDir;
use troupe::clock::ManualClock;
use troupe::ids::{IdGenerator, SequentialIds};
use troupe::layout::Layout;
use troupe::store::mailbox::{FileMailboxStore, MailboxState};
use troupe::wire::{
    AgentName, Content, MailboxMessage, MessageId, OrdinaryKind, OrdinaryMessage, UtcTime,
};

pub fn agent(name: &str) -> AgentName {
    AgentName::parse(name).unwrap()
}

/// The SPEC's example instant plus `offset_ms`.
pub fn at(offset_ms: i64) -> UtcTime {
    UtcTime::from_unix_millis(1_785_398_400_000 + offset_ms).unwrap()
}

/// An ordinary message from the lead.
pub fn message(id: MessageId, to: &str, created_at: UtcTime, content: &str) -> MailboxMessage {
    MailboxMessage::Ordinary(OrdinaryMessage {
        id,
        sender: agent("lead"),
        recipient: agent(to),
        kind: OrdinaryKind::Message,
        content: Content::parse(content).unwrap(),
        created_at_utc: created_at,
    })
}

/// Runs `f` to completion on a current-thread runtime of its own: for a thread of a test that
/// races real threads, or a proptest case.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// A workspace in a temp folder with a manual clock and sequential ids.
pub struct Fixture {
    pub dir: TempDir,
    pub layout: Layout,
    pub clock: ManualClock,
    pub ids: SequentialIds,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        Self {
            dir,
            layout,
            clock: ManualClock::at_spec_epoch(),
            ids: SequentialIds::new(),
        }
    }

    pub fn store(&self) -> FileMailboxStore {
        FileMailboxStore::new(&self.layout, Arc::new(self.clock.clone()))
    }

    /// A fresh message to `to`, created `offset_ms` after the epoch.
    pub fn msg(&self, to: &str, offset_ms: i64) -> MailboxMessage {
        message(self.ids.message_id(), to, at(offset_ms), "hello")
    }

    pub fn folder(&self, who: &str, state: MailboxState) -> PathBuf {
        self.layout.mailbox_dir(&agent(who)).join(state.as_str())
    }

    /// The names in one folder, temp files included (so a leftover would show).
    pub fn names(&self, who: &str, state: MailboxState) -> BTreeSet<OsString> {
        match std::fs::read_dir(self.folder(who, state)) {
            Ok(entries) => entries.map(|e| e.unwrap().file_name()).collect(),
            Err(_) => BTreeSet::new(),
        }
    }

    /// The message ids in one folder, by file name.
    pub fn ids_in(&self, who: &str, state: MailboxState) -> BTreeSet<String> {
        self.names(who, state)
            .into_iter()
            .map(|n| {
                let n = n.into_string().unwrap();
                n.strip_suffix(".json").unwrap().to_owned()
            })
            .collect()
    }

    /// The parsed lines of the agent's quarantine journal.
    pub fn journal(&self, who: &str) -> Vec<serde_json::Value> {
        let path = self
            .layout
            .mailbox_dir(&agent(who))
            .join("quarantine.jsonl");
        match std::fs::read_to_string(path) {
            Ok(text) => text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}
