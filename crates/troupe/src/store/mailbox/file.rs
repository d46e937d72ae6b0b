//! `FileMailboxStore`: the mailbox port on real folders,
//! `.troupe/mailboxes/<agent>/{ready,processing,done,quarantine}/<message-id>.json`.
//!
//! # Moves
//!
//! Every transition is a rename that never replaces its destination (`moves.rs`), so a message
//! can never overwrite another: a name that exists in two folders (a duplicate id) is caught, and
//! the extra copy goes to quarantine. `send` is `durable::create_new` (temp file, fsync, link,
//! folder fsync). `ack`, `release`, `recover` and quarantining fsync both folders after the move.
//! The claim move ready → processing is **not** fsynced: after a crash the file is either still
//! in `ready/` or already in `processing/`, and recovery moves `processing/` back to `ready/`
//! anyway, so either way the message is delivered again (at least once, SPEC §3.2).
//!
//! # Claim without rescanning
//!
//! Each agent has an in-memory [`ReadyIndex`] of the ready messages this instance knows
//! (`(created_at_utc, id)`, no contents), behind a mutex. It is filled by one listing of `ready/`
//! on the first claim; messages sent, released or recovered through this instance are added to
//! it directly. A listing parses only file names the index does not know yet.
//!
//! Messages written by other instances or processes are found by listing again:
//! - when the index is empty (so a claim answers `None` only after looking at the folder), and
//! - when the folder's mtime differs from the one this instance last explained (its own listing,
//!   claims and additions). To keep claim cost flat with a large backlog, these listings are
//!   spread out: at most one per `entries / 256` claims.
//!
//! **Guarantee:** claim order is strict (oldest `created_at_utc`, then id) among the messages
//! known to the instance; a message from another writer is usually noticed at the next claim,
//! and at the latest when the known backlog is empty (mtime granularity can hide a change made
//! in the same clock tick as our own). Nothing is lost or claimed twice whatever the index
//! believes: the folders are the truth, the claim is an atomic rename, and an index entry whose
//! file another claimer took (rename → `NotFound`) is dropped and the next one tried.
//!
//! Invalid files met in `ready/` (and `processing/` on recovery) are quarantined with a reason and
//! skipped; temp files of `durable` (names starting with `.`) are ignored.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use troupe_wire::{AgentName, MailboxMessage, MessageId};

use super::entry::Inspection;
use super::entry::{file_name_of, id_from_file_name, inspect_message, is_temp, read_message};
use super::index::ReadyIndex;
use super::quarantine::{self, JOURNAL_FILE};
use super::{
    AckOutcome, MailboxCounts, MailboxEntry, MailboxError, MailboxState, MailboxStore,
    QuarantineRecord, RecoveryReport, MAX_MESSAGE_BYTES,
};
use crate::clock::Clock;
use crate::layout::Layout;
use crate::store::durable;
use crate::store::moves::rename_noreplace;
use crate::store::IoError;
use crate::sync::blocking;

/// Mailboxes under `.troupe/mailboxes/<agent>/{ready,processing,done,quarantine}/`.
pub struct FileMailboxStore {
    /// `.troupe/mailboxes`.
    root: PathBuf,
    /// Stamps quarantine records.
    clock: Arc<dyn Clock>,
    /// The ready index of each agent this instance has used. An entry exists only once the
    /// agent's folders were created and checked to be real folders (not symlinks).
    agents: Mutex<HashMap<AgentName, Arc<Mutex<ReadyIndex>>>>,
}

/// The paths of one agent's mailbox.
struct Folders {
    base: PathBuf,
    ready: PathBuf,
    processing: PathBuf,
    done: PathBuf,
    quarantine: PathBuf,
}

impl Folders {
    fn of(&self, state: MailboxState) -> &Path {
        match state {
            MailboxState::Ready => &self.ready,
            MailboxState::Processing => &self.processing,
            MailboxState::Done => &self.done,
            MailboxState::Quarantine => &self.quarantine,
        }
    }

    fn journal(&self) -> PathBuf {
        self.base.join(JOURNAL_FILE)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded data is a cache of the folders; a panic elsewhere cannot make it unsafe to use.
    crate::sync::lock(mutex)
}

fn io_error(action: &'static str, path: &Path, e: io::Error) -> MailboxError {
    MailboxError::Io(IoError::new(action, path, e))
}

fn mtime(dir: &Path) -> Option<SystemTime> {
    fs::symlink_metadata(dir).and_then(|m| m.modified()).ok()
}

/// The names in `dir`, temp files left out.
fn names_in(dir: &Path) -> Result<Vec<OsString>, MailboxError> {
    let entries = fs::read_dir(dir).map_err(|e| io_error("list", dir, e))?;
    let mut names = Vec::new();
    for entry in entries {
        let name = entry.map_err(|e| io_error("list", dir, e))?.file_name();
        if !is_temp(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

impl FileMailboxStore {
    /// Cheap: folders are created lazily, per agent, on first use.
    pub fn new(layout: &Layout, clock: Arc<dyn Clock>) -> Self {
        Self {
            root: layout.mailboxes_dir(),
            clock,
            agents: Mutex::new(HashMap::new()),
        }
    }

    fn folders(&self, agent: &AgentName) -> Folders {
        let base = self.root.join(agent.as_str());
        Folders {
            ready: base.join(MailboxState::Ready.as_str()),
            processing: base.join(MailboxState::Processing.as_str()),
            done: base.join(MailboxState::Done.as_str()),
            quarantine: base.join(MailboxState::Quarantine.as_str()),
            base,
        }
    }

    /// The agent's index, creating its folders on first use and refusing symlinked ones.
    fn prepared(&self, agent: &AgentName) -> Result<Arc<Mutex<ReadyIndex>>, MailboxError> {
        let mut agents = lock(&self.agents);
        if let Some(index) = agents.get(agent) {
            return Ok(Arc::clone(index));
        }
        let folders = self.folders(agent);
        let chain = [self.root.as_path(), folders.base.as_path()]
            .into_iter()
            .chain(MailboxState::ALL.iter().map(|s| folders.of(*s)));
        for dir in chain {
            durable::ensure_real_dir(dir).map_err(|e| {
                // ensure_real_dir reports "symlink" and "not a folder" as `Other`.
                if e.source.kind() == io::ErrorKind::Other {
                    MailboxError::InvalidMailbox {
                        agent: agent.clone(),
                        why: e.to_string(),
                    }
                } else {
                    MailboxError::Io(e)
                }
            })?;
        }
        let index = Arc::new(Mutex::new(ReadyIndex::default()));
        agents.insert(agent.clone(), Arc::clone(&index));
        Ok(index)
    }

    /// For read-only calls: the folder of `state` when it exists, refusing symlinks on the way;
    /// `None` when the mailbox (or that folder) was never created.
    fn existing_folder(
        &self,
        agent: &AgentName,
        state: MailboxState,
    ) -> Result<Option<PathBuf>, MailboxError> {
        let folders = self.folders(agent);
        for dir in [
            self.root.as_path(),
            folders.base.as_path(),
            folders.of(state),
        ] {
            match fs::symlink_metadata(dir) {
                Ok(meta) if meta.file_type().is_symlink() || !meta.is_dir() => {
                    return Err(MailboxError::InvalidMailbox {
                        agent: agent.clone(),
                        why: format!(
                            "{} is a symbolic link or not a folder; troupe refuses it",
                            dir.display()
                        ),
                    })
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io_error("inspect folder", dir, e)),
            }
        }
        Ok(Some(folders.of(state).to_path_buf()))
    }

    /// Moves `name` from the `from` folder into quarantine and records why. `None` when the file
    /// was gone already.
    fn quarantine_file(
        &self,
        folders: &Folders,
        from: MailboxState,
        name: &OsStr,
        reason: &str,
    ) -> Result<Option<QuarantineRecord>, MailboxError> {
        let from_dir = folders.of(from);
        let moved = quarantine::move_into(from_dir, name, &folders.quarantine)
            .map_err(|e| io_error("quarantine", &from_dir.join(name), e))?;
        let Some(final_name) = moved else {
            return Ok(None);
        };
        let record = QuarantineRecord {
            file_name: final_name.to_string_lossy().into_owned(),
            from,
            reason: reason.to_owned(),
            at: self.clock.now(),
        };
        let journal = folders.journal();
        quarantine::append_record(&journal, &record).map_err(MailboxError::Io)?;
        tracing::warn!(
            mailbox = %folders.base.display(),
            file = %record.file_name,
            from = %from,
            reason,
            "quarantined a mailbox file"
        );
        Ok(Some(record))
    }

    /// Lists `ready/`, adding valid files the index does not know and quarantining invalid ones.
    fn rescan(
        &self,
        agent: &AgentName,
        folders: &Folders,
        index: &mut ReadyIndex,
    ) -> Result<(), MailboxError> {
        let before = mtime(&folders.ready);
        let names = names_in(&folders.ready)?;
        for name in &names {
            if id_from_file_name(name).is_some_and(|id| index.contains(id)) {
                continue;
            }
            let inspection = inspect_message(&folders.ready, name, agent)
                .map_err(|e| io_error("read", &folders.ready.join(name), e))?;
            match inspection {
                Inspection::Valid(message) => index.insert(message.created_at_utc(), message.id()),
                Inspection::Invalid(reason) => {
                    // A file that cannot even be quarantined must not block the mailbox; the
                    // next listing tries again.
                    if let Err(e) =
                        self.quarantine_file(folders, MailboxState::Ready, name, &reason)
                    {
                        tracing::error!(error = %e, "could not quarantine an invalid mailbox file");
                    }
                }
                Inspection::Gone => {}
            }
        }
        index.scanned(before, names.len());
        Ok(())
    }

    /// Adds a file that this instance just put into `ready/` to the index (or quarantines it if
    /// it turns out invalid).
    fn index_added(
        &self,
        agent: &AgentName,
        folders: &Folders,
        index: &Mutex<ReadyIndex>,
        name: &OsStr,
        before: Option<SystemTime>,
    ) -> Result<(), MailboxError> {
        let after = mtime(&folders.ready);
        let inspection = inspect_message(&folders.ready, name, agent)
            .map_err(|e| io_error("read", &folders.ready.join(name), e))?;
        match inspection {
            Inspection::Valid(message) => {
                let mut index = lock(index);
                index.insert(message.created_at_utc(), message.id());
                index.added(before, after);
            }
            Inspection::Invalid(reason) => {
                self.quarantine_file(folders, MailboxState::Ready, name, &reason)?;
            }
            Inspection::Gone => {}
        }
        Ok(())
    }

    /// The `done/` copy of `id`, when there is one.
    fn done_copy(
        &self,
        folders: &Folders,
        name: &str,
    ) -> Result<Inspection<MailboxMessage>, MailboxError> {
        let path = folders.done.join(name);
        read_message(&path).map_err(|e| io_error("read", &path, e))
    }

    fn sync_move(&self, from: &Path, to: &Path) -> Result<(), MailboxError> {
        durable::fsync_dir(to)?;
        durable::fsync_dir(from)?;
        Ok(())
    }
}

// The port's operations, synchronous: the async port runs each in `sync::blocking`.
impl FileMailboxStore {
    fn send_sync(&self, message: &MailboxMessage) -> Result<(), MailboxError> {
        let agent = message.recipient();
        let id = message.id();
        let bytes = message.to_json_bytes();
        if bytes.len() as u64 > MAX_MESSAGE_BYTES {
            return Err(MailboxError::TooLarge {
                id,
                bytes: bytes.len() as u64,
                max: MAX_MESSAGE_BYTES,
            });
        }
        let index = self.prepared(agent)?;
        let folders = self.folders(agent);
        let name = file_name_of(id);
        // Looked for in the order a message moves (ready → processing → done, or quarantine),
        // so a copy a claimer moves meanwhile is always found where it went. A copy moved back
        // to ready (a release) after the look there is caught by the no-clobber create below.
        // Checking processing first would miss a copy claimed between that check and the
        // create, and write the message a second time.
        for state in MailboxState::ALL {
            if fs::symlink_metadata(folders.of(state).join(&name)).is_ok() {
                return Err(MailboxError::Duplicate {
                    agent: agent.clone(),
                    id,
                    state,
                });
            }
        }
        let before = mtime(&folders.ready);
        match durable::create_new(&folders.ready.join(&name), &bytes) {
            Ok(()) => {}
            Err(e) if e.source.kind() == io::ErrorKind::AlreadyExists => {
                return Err(MailboxError::Duplicate {
                    agent: agent.clone(),
                    id,
                    state: MailboxState::Ready,
                })
            }
            Err(e) => return Err(MailboxError::Io(e)),
        }
        let after = mtime(&folders.ready);
        let mut index = lock(&index);
        // An instance that never claimed for this agent keeps no index for it (senders stay
        // lean); its first claim lists the folder anyway.
        if index.is_scanned() {
            index.insert(message.created_at_utc(), id);
            index.added(before, after);
        }
        Ok(())
    }

    fn claim_sync(&self, agent: &AgentName) -> Result<Option<MailboxMessage>, MailboxError> {
        let index = self.prepared(agent)?;
        let folders = self.folders(agent);
        // Held for the whole claim: claimers of one instance take turns (each claim is a rename
        // and a small read), claimers of different instances race safely on the rename.
        let mut index = lock(&index);
        let mut listed = false;
        if index.wants_rescan(mtime(&folders.ready)) {
            self.rescan(agent, &folders, &mut index)?;
            listed = true;
        }
        loop {
            let Some((created_at, id)) = index.pop_oldest() else {
                if listed {
                    return Ok(None);
                }
                self.rescan(agent, &folders, &mut index)?;
                listed = true;
                continue;
            };
            let name = file_name_of(id);
            let from = folders.ready.join(&name);
            // Not fsynced (see the module doc): a crash leaves the file in ready/ or in
            // processing/, and recovery moves processing/ back to ready/.
            match rename_noreplace(&from, &folders.processing.join(&name)) {
                Ok(()) => {}
                // Another claimer (instance or process) won this one.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    self.quarantine_file(
                        &folders,
                        MailboxState::Ready,
                        OsStr::new(&name),
                        "duplicate: a message with this id is already in processing/",
                    )?;
                    continue;
                }
                Err(e) => {
                    index.insert(created_at, id);
                    return Err(io_error("claim", &from, e));
                }
            }
            index.claimed(mtime(&folders.ready));
            let inspection = inspect_message(&folders.processing, OsStr::new(&name), agent)
                .map_err(|e| io_error("read", &folders.processing.join(&name), e))?;
            match inspection {
                Inspection::Valid(message) => return Ok(Some(message)),
                // The file changed since it was indexed.
                Inspection::Invalid(reason) => {
                    self.quarantine_file(
                        &folders,
                        MailboxState::Processing,
                        OsStr::new(&name),
                        &reason,
                    )?;
                }
                Inspection::Gone => {}
            }
        }
    }

    fn ack_sync(
        &self,
        agent: &AgentName,
        message: &MailboxMessage,
    ) -> Result<AckOutcome, MailboxError> {
        self.prepared(agent)?;
        let folders = self.folders(agent);
        let id = message.id();
        let name = file_name_of(id);
        let from = folders.processing.join(&name);
        match rename_noreplace(&from, &folders.done.join(&name)) {
            Ok(()) => {
                self.sync_move(&folders.processing, &folders.done)?;
                Ok(AckOutcome::Acked)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match self.done_copy(&folders, &name)? {
                    Inspection::Valid(done) if done == *message => Ok(AckOutcome::AlreadyDone),
                    Inspection::Valid(_) | Inspection::Invalid(_) => {
                        Err(MailboxError::AckConflict {
                            agent: agent.clone(),
                            id,
                        })
                    }
                    Inspection::Gone => Err(MailboxError::NotProcessing {
                        agent: agent.clone(),
                        id,
                    }),
                }
            }
            // Both processing/ and done/ hold this id: a duplicate delivery.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                match self.done_copy(&folders, &name)? {
                    Inspection::Valid(done) if done == *message => {
                        self.quarantine_file(
                            &folders,
                            MailboxState::Processing,
                            OsStr::new(&name),
                            "duplicate: an identical message with this id is already done",
                        )?;
                        Ok(AckOutcome::AlreadyDone)
                    }
                    _ => Err(MailboxError::AckConflict {
                        agent: agent.clone(),
                        id,
                    }),
                }
            }
            Err(e) => Err(io_error("ack", &from, e)),
        }
    }

    fn release_sync(&self, agent: &AgentName, id: MessageId) -> Result<(), MailboxError> {
        let index = self.prepared(agent)?;
        let folders = self.folders(agent);
        let name = file_name_of(id);
        let from = folders.processing.join(&name);
        let before = mtime(&folders.ready);
        match rename_noreplace(&from, &folders.ready.join(&name)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(MailboxError::NotProcessing {
                    agent: agent.clone(),
                    id,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(MailboxError::Duplicate {
                    agent: agent.clone(),
                    id,
                    state: MailboxState::Ready,
                })
            }
            Err(e) => return Err(io_error("release", &from, e)),
        }
        self.sync_move(&folders.processing, &folders.ready)?;
        self.index_added(agent, &folders, &index, OsStr::new(&name), before)
    }

    fn quarantine_sync(
        &self,
        agent: &AgentName,
        id: MessageId,
        reason: &str,
    ) -> Result<QuarantineRecord, MailboxError> {
        let index = self.prepared(agent)?;
        let folders = self.folders(agent);
        let name = file_name_of(id);
        for from in [MailboxState::Processing, MailboxState::Ready] {
            if let Some(record) = self.quarantine_file(&folders, from, OsStr::new(&name), reason)? {
                lock(&index).remove(id);
                return Ok(record);
            }
        }
        Err(MailboxError::NotProcessing {
            agent: agent.clone(),
            id,
        })
    }

    fn recover_sync(&self, agent: &AgentName) -> Result<RecoveryReport, MailboxError> {
        let index = self.prepared(agent)?;
        let folders = self.folders(agent);
        let mut index = lock(&index);
        let mut report = RecoveryReport::default();
        let mut names = names_in(&folders.processing)?;
        names.sort();
        let mut moved = false;
        for name in &names {
            let inspection = inspect_message(&folders.processing, name, agent)
                .map_err(|e| io_error("read", &folders.processing.join(name), e))?;
            let message = match inspection {
                Inspection::Valid(message) => message,
                Inspection::Invalid(reason) => {
                    let record =
                        self.quarantine_file(&folders, MailboxState::Processing, name, &reason)?;
                    report.quarantined.extend(record.map(|r| r.file_name));
                    continue;
                }
                Inspection::Gone => continue,
            };
            let from = folders.processing.join(name);
            match rename_noreplace(&from, &folders.ready.join(name)) {
                Ok(()) => {
                    moved = true;
                    index.insert(message.created_at_utc(), message.id());
                    report.released.push(message.id());
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let record = self.quarantine_file(
                        &folders,
                        MailboxState::Processing,
                        name,
                        "duplicate: a message with this id is already in ready/",
                    )?;
                    report.quarantined.extend(record.map(|r| r.file_name));
                }
                Err(e) => return Err(io_error("recover", &from, e)),
            }
        }
        if moved {
            // One pair of folder fsyncs covers every move above.
            self.sync_move(&folders.processing, &folders.ready)?;
        }
        Ok(report)
    }

    fn list_sync(
        &self,
        agent: &AgentName,
        state: MailboxState,
    ) -> Result<Vec<MailboxEntry>, MailboxError> {
        let Some(dir) = self.existing_folder(agent, state)? else {
            return Ok(Vec::new());
        };
        let in_quarantine = state == MailboxState::Quarantine;
        let reasons = if in_quarantine {
            let journal = self.folders(agent).journal();
            quarantine::read_reasons(&journal).map_err(MailboxError::Io)?
        } else {
            HashMap::new()
        };
        let mut messages = Vec::new();
        let mut invalid = Vec::new();
        for name in names_in(&dir)? {
            // Quarantined names may carry a collision suffix, so there only the bytes count.
            let inspection = if in_quarantine {
                read_message(&dir.join(&name))
            } else {
                inspect_message(&dir, &name, agent)
            }
            .map_err(|e| io_error("read", &dir.join(&name), e))?;
            match inspection {
                Inspection::Valid(message) => messages.push(message),
                Inspection::Invalid(_) if in_quarantine => {
                    let file_name = name.to_string_lossy().into_owned();
                    let reason = reasons.get(&file_name).cloned();
                    invalid.push(MailboxEntry::Invalid { file_name, reason });
                }
                // Left for the next claim or recovery to quarantine; a listing changes nothing.
                Inspection::Invalid(_) | Inspection::Gone => {}
            }
        }
        messages.sort_by_key(|m| (m.created_at_utc(), m.id()));
        invalid.sort_by(|a, b| match (a, b) {
            (
                MailboxEntry::Invalid { file_name: a, .. },
                MailboxEntry::Invalid { file_name: b, .. },
            ) => a.cmp(b),
            _ => std::cmp::Ordering::Equal,
        });
        Ok(messages
            .into_iter()
            .map(MailboxEntry::Message)
            .chain(invalid)
            .collect())
    }

    fn counts_sync(&self, agent: &AgentName) -> Result<MailboxCounts, MailboxError> {
        let mut counts = MailboxCounts::default();
        for state in MailboxState::ALL {
            let n = match self.existing_folder(agent, state)? {
                Some(dir) => names_in(&dir)?.len(),
                None => 0,
            };
            match state {
                MailboxState::Ready => counts.ready = n,
                MailboxState::Processing => counts.processing = n,
                MailboxState::Done => counts.done = n,
                MailboxState::Quarantine => counts.quarantine = n,
            }
        }
        Ok(counts)
    }

    fn agents_sync(&self) -> Result<Vec<AgentName>, MailboxError> {
        if fs::symlink_metadata(&self.root).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(io_error(
                "use folder",
                &self.root,
                io::Error::other("it is a symbolic link; troupe refuses symlinked state folders"),
            ));
        }
        let entries = match fs::read_dir(&self.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error("list", &self.root, e)),
        };
        let mut agents = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error("list", &self.root, e))?;
            // `file_type` does not follow symlinks: a symlinked agent folder is not a mailbox.
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            let name = entry.file_name();
            if let (true, Some(Ok(agent))) = (is_dir, name.to_str().map(AgentName::parse)) {
                agents.push(agent);
            }
        }
        agents.sort();
        Ok(agents)
    }
}

#[async_trait::async_trait]
impl MailboxStore for FileMailboxStore {
    async fn send(&self, message: &MailboxMessage) -> Result<(), MailboxError> {
        blocking(|| self.send_sync(message))
    }

    async fn claim(&self, agent: &AgentName) -> Result<Option<MailboxMessage>, MailboxError> {
        blocking(|| self.claim_sync(agent))
    }

    async fn ack(
        &self,
        agent: &AgentName,
        message: &MailboxMessage,
    ) -> Result<AckOutcome, MailboxError> {
        blocking(|| self.ack_sync(agent, message))
    }

    async fn release(&self, agent: &AgentName, id: MessageId) -> Result<(), MailboxError> {
        blocking(|| self.release_sync(agent, id))
    }

    async fn quarantine(
        &self,
        agent: &AgentName,
        id: MessageId,
        reason: &str,
    ) -> Result<QuarantineRecord, MailboxError> {
        blocking(|| self.quarantine_sync(agent, id, reason))
    }

    async fn recover(&self, agent: &AgentName) -> Result<RecoveryReport, MailboxError> {
        blocking(|| self.recover_sync(agent))
    }

    async fn list(
        &self,
        agent: &AgentName,
        state: MailboxState,
    ) -> Result<Vec<MailboxEntry>, MailboxError> {
        blocking(|| self.list_sync(agent, state))
    }

    async fn counts(&self, agent: &AgentName) -> Result<MailboxCounts, MailboxError> {
        blocking(|| self.counts_sync(agent))
    }

    async fn agents(&self) -> Result<Vec<AgentName>, MailboxError> {
        blocking(|| self.agents_sync())
    }
}
