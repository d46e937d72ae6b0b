//! `JsonProtocolStore`: the [`ProtocolStore`] port on `state.json` + `archive.jsonl`.
//!
//! Every operation, reads included, runs under this instance's (async) mutex and then the
//! cross-process lock on `.protocol.lock`, and starts by re-reading both files (see [`Cache::refresh`]): the
//! files are the truth, the in-memory copies only save re-parsing. Of the archive only an index
//! is in memory; archived requests are read back from their lines, under the same locks. Writes validate the new
//! snapshot, then replace `state.json` atomically through the [`ProtocolFiles`] seam; the cache
//! is updated only after the write succeeded, so a failed write leaves the old bytes *and* the
//! old state.
//!
//! The port is async; the disk work (the file lock, reads, writes) runs in `sync::blocking`.
//!
//! `answer` is the one operation that writes outside the protocol folder: it awaits the caller's
//! `deliver` (a mailbox send) while holding both locks, so that "no answer yet" and the sending
//! are one step for every thread and process. Lock order is always protocol lock → mailbox,
//! never the reverse: no mailbox operation calls into this store.

use std::sync::Arc;

use tokio::sync::{Mutex, MutexGuard};

use troupe_wire::{
    AgentName, ProtocolMessage, ProtocolRequest, ProtocolSnapshot, RequestId, RequestKind, UtcTime,
    WireError,
};

use super::answers::AnswerRecords;
use super::archive::ArchiveIndex;
use super::compaction::{self, COMPACT_ABOVE};
use super::files::{DurableFiles, ProtocolFiles};
use super::rules::{self, AnswerCheck, Decision};
use super::state::StateFile;
use super::{Consumed, Deliver, Delivery, NewRequest, ProtocolError, ProtocolStore};
use crate::clock::Clock;
use crate::ids::IdGenerator;
use crate::layout::Layout;
use crate::store::durable;
use crate::store::lock::{lock_exclusive, LockGuard};
use crate::sync::blocking;

pub struct JsonProtocolStore {
    /// Where `state.json`, `archive.jsonl` and `.protocol.lock` live.
    layout: Layout,
    /// "Now" for creation, resolution and the response window.
    clock: Arc<dyn Clock>,
    /// Where new request ids come from.
    ids: Arc<dyn IdGenerator>,
    /// The write seam (durable in production; tests make it fail).
    files: Arc<dyn ProtocolFiles>,
    /// `answers/`: the one answer sent to each request (read and written under the locks).
    answers: AnswerRecords,
    /// Serialises this instance's threads and tasks and keeps the last good read of both files.
    /// Async, because `answer` holds it while it awaits the delivery.
    cache: Mutex<Held>,
}

/// The cache, and whether an operation panicked while holding it (the async mutex does not
/// poison itself).
#[derive(Debug)]
struct Held {
    cache: Cache,
    poisoned: bool,
}

/// Both locks, held until this drops: the instance's mutex, then `.protocol.lock`.
struct Session<'a> {
    held: MutexGuard<'a, Held>,
    _lock: LockGuard,
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.held.poisoned = true;
        }
    }
}

/// What `answer` does once its checks ran under the locks.
enum AnswerStep {
    /// Deliver the response (its answer is recorded).
    Deliver,
    /// Refuse, after making sure the recorded answer (if any) reached its mailbox.
    Refuse {
        finish: Option<ProtocolMessage>,
        refused: ProtocolError,
    },
}

impl std::fmt::Debug for JsonProtocolStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonProtocolStore")
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

/// What this instance last read of the two files.
#[derive(Debug)]
struct Cache {
    state: StateFile,
    archive: ArchiveIndex,
}

/// Where a request was found.
enum Found {
    /// In `state.json`, at this index of the array.
    State(usize),
    Archive,
}

impl Cache {
    /// Brings both files up to date and checks what ties them: a request found in both must be
    /// the same in both (a crash between the archive append and the state replace leaves such
    /// copies; differing copies are corruption).
    fn refresh(&mut self) -> Result<(), ProtocolError> {
        self.state.reload()?;
        self.archive.catch_up()?;
        // Copies in both files exist only after a crash, until the next compaction drops them
        // from state.json, so this reads archive lines back only in that rare window.
        for request in self.state.requests() {
            if !self.archive.contains(request.id()) {
                continue;
            }
            if let Some(archived) = self.archive.read(request.id())? {
                if &archived != request {
                    return Err(ProtocolError::Corrupt {
                        path: self.archive.path().display().to_string(),
                        why: format!(
                            "request {} differs between state.json and the archive",
                            request.id()
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    fn reset(&mut self) {
        self.state.reset();
        self.archive.reset();
    }

    /// Looks `id` up in `state.json` (whose copy wins), then reads it back from the archive.
    fn find(&self, id: RequestId) -> Result<Option<(Found, ProtocolRequest)>, ProtocolError> {
        if let Some(i) = self.state.requests().iter().position(|r| r.id() == id) {
            return Ok(self
                .state
                .requests()
                .get(i)
                .map(|r| (Found::State(i), r.clone())));
        }
        Ok(self.archive.read(id)?.map(|r| (Found::Archive, r)))
    }

    fn get(&self, id: RequestId) -> Result<(Found, ProtocolRequest), ProtocolError> {
        self.find(id)?.ok_or(ProtocolError::NotFound(id))
    }

    /// The latest creation time over every request, archived ones included.
    fn latest_created(&self) -> Option<UtcTime> {
        let in_state = self.state.requests().last().map(|r| r.created_at_utc());
        in_state.max(self.archive.max_created())
    }
}

impl JsonProtocolStore {
    /// Opens the store of `layout`'s workspace, creating `.troupe/protocol/` if missing. A
    /// missing `state.json` is an empty store (the file appears with the first write). Both
    /// files are read and checked now, so a corrupt store fails here.
    pub fn open(
        layout: &Layout,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
    ) -> Result<Self, ProtocolError> {
        Self::open_with_files(layout, clock, ids, Arc::new(DurableFiles))
    }

    /// [`JsonProtocolStore::open`] with another write seam (tests inject failing writes).
    pub fn open_with_files(
        layout: &Layout,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        files: Arc<dyn ProtocolFiles>,
    ) -> Result<Self, ProtocolError> {
        durable::ensure_real_dir(&layout.protocol_dir())?;
        let mut store = Self {
            layout: layout.clone(),
            clock,
            ids,
            files,
            answers: AnswerRecords::new(layout.protocol_answers_dir()),
            cache: Mutex::new(Held {
                cache: Cache {
                    state: StateFile::new(layout.protocol_state()),
                    archive: ArchiveIndex::new(layout.protocol_archive()),
                },
                poisoned: false,
            }),
        };
        // Nobody else has the store yet: its mutex is not needed.
        let _lock = lock_exclusive(&store.layout.protocol_lock())?;
        store.cache.get_mut().cache.refresh()?;
        Ok(store)
    }

    /// Takes the mutex, then the file lock, then re-reads the files. Both locks are held until
    /// the returned session drops.
    async fn session(&self) -> Result<Session<'_>, ProtocolError> {
        let mut held = self.cache.lock().await;
        if held.poisoned {
            // A panic mid-operation may have left the cache half-updated; the files are the
            // truth, so forget the cache and read them again.
            held.cache.reset();
            held.poisoned = false;
        }
        let mut session = blocking(|| -> Result<_, ProtocolError> {
            let lock = lock_exclusive(&self.layout.protocol_lock())?;
            Ok(Session { held, _lock: lock })
        })?;
        blocking(|| session.held.cache.refresh())?;
        Ok(session)
    }

    /// Writes `next` as the new `state.json`, compacting when due. Called under both locks,
    /// after `refresh`, so `cache.state` is what is on disk.
    fn commit(&self, cache: &mut Cache, next: Vec<ProtocolRequest>) -> Result<(), ProtocolError> {
        let archive = &cache.archive;
        let plan = compaction::plan(cache.state.requests(), COMPACT_ABOVE, |id| {
            archive.contains(id)
        });
        let kept = match plan {
            None => next,
            Some(plan) => match self.append_to_archive(&mut cache.archive, plan.append) {
                // Moved requests are resolved, so `next` holds them unchanged.
                Ok(()) => next
                    .into_iter()
                    .filter(|r| !plan.moved.contains(&r.id()))
                    .collect(),
                Err(e) => {
                    // Compaction is an optimisation: the write must not fail because of it.
                    tracing::warn!(error = %e, "protocol archive append failed; not compacting");
                    next
                }
            },
        };
        let snapshot = ProtocolSnapshot::new(kept)?;
        let bytes = snapshot.to_json_bytes();
        self.files
            .replace_state(&self.layout.protocol_state(), &bytes)?;
        cache.state.written(bytes, snapshot.into_requests());
        Ok(())
    }

    /// Appends a batch to the archive and fsyncs it; only then may `state.json` drop the batch.
    fn append_to_archive(
        &self,
        archive: &mut ArchiveIndex,
        batch: Vec<ProtocolRequest>,
    ) -> Result<(), ProtocolError> {
        if batch.is_empty() {
            return Ok(());
        }
        archive.cut_torn_tail()?;
        let bytes = ArchiveIndex::encode(&batch)?;
        if let Err(e) = self.files.append_archive(archive.path(), &bytes) {
            // Best effort: cut a partial append off now; if this fails too, the next writer
            // cuts the torn tail, and complete lines are harmless copies of state requests.
            archive.roll_back_append();
            return Err(e.into());
        }
        archive.record_appended(&batch, &bytes);
        Ok(())
    }

    /// Calls `deliver`, turning its failure into `Undelivered` (the answer stays recorded).
    async fn deliver(
        &self,
        deliver: Deliver<'_>,
        answer: &ProtocolMessage,
    ) -> Result<Delivery, ProtocolError> {
        deliver
            .deliver(answer)
            .await
            .map_err(|cause| ProtocolError::Undelivered {
                id: answer.request_id(),
                cause,
            })
    }

    /// Before refusing a second answer: makes sure the recorded one reached its mailbox (a
    /// process that died between record and delivery left it undelivered).
    async fn finish_recorded(&self, deliver: Deliver<'_>, recorded: &ProtocolMessage) {
        match deliver.deliver(recorded).await {
            Ok(Delivery::AlreadyThere) => {}
            Ok(Delivery::Sent) => tracing::warn!(
                request = %recorded.request_id(),
                message_id = %recorded.id(),
                "delivered a recorded answer whose delivery had been interrupted"
            ),
            Err(cause) => tracing::warn!(
                request = %recorded.request_id(),
                message_id = %recorded.id(),
                cause,
                "a recorded answer is still undelivered"
            ),
        }
    }

    fn new_request(
        &self,
        new: NewRequest,
        now: UtcTime,
        id: RequestId,
    ) -> Result<ProtocolRequest, ProtocolError> {
        let expires = now.checked_add(new.ttl).ok_or_else(|| {
            WireError::new(format!("ttl {:?} puts the expiry out of range", new.ttl))
        })?;
        Ok(ProtocolRequest::new_pending(
            id,
            new.kind,
            new.sender,
            new.target,
            new.content,
            now,
            expires,
        )?)
    }
}

// The port's operations, synchronous, under both locks (`cache` is the session's).
impl JsonProtocolStore {
    fn create_locked(
        &self,
        cache: &mut Cache,
        new: NewRequest,
    ) -> Result<ProtocolRequest, ProtocolError> {
        // Read under the lock: two processes creating at once get times in lock order.
        let now = self.clock.now();
        if let Some(latest) = cache.latest_created() {
            if now < latest {
                return Err(ProtocolError::ClockBackwards { now, latest });
            }
        }
        let id = self.ids.request_id();
        if let Some((_, existing)) = cache.find(id)? {
            return Err(ProtocolError::State {
                id,
                status: existing.status_at(now).as_str().to_owned(),
                why: "the id generator returned an id that is already registered".to_owned(),
            });
        }
        let request = self.new_request(new, now, id)?;
        let mut next = cache.state.requests().to_vec();
        next.push(request.clone());
        self.commit(cache, next)?;
        Ok(request)
    }

    fn get_locked(
        &self,
        cache: &Cache,
        id: RequestId,
    ) -> Result<Option<ProtocolRequest>, ProtocolError> {
        Ok(cache.find(id)?.map(|(_, r)| r))
    }

    fn list_locked(&self, cache: &Cache) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        let state = cache.state.requests();
        Ok(compaction::merged_in_creation_order(
            cache.archive.read_all()?,
            state,
            |id| state.iter().any(|r| r.id() == id),
        ))
    }

    fn pending_locked(&self, cache: &Cache) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        // Pending requests are never archived: state.json holds all of them.
        Ok(cache
            .state
            .requests()
            .iter()
            .filter(|r| r.is_pending())
            .cloned()
            .collect())
    }

    fn latest_plan_of_locked(
        &self,
        cache: &Cache,
        sender: &AgentName,
    ) -> Result<Option<ProtocolRequest>, ProtocolError> {
        // Each sender's latest plan is never archived, so state.json's array order decides.
        Ok(cache
            .state
            .requests()
            .iter()
            .rev()
            .find(|r| r.kind() == RequestKind::PlanApproval && r.sender() == sender)
            .cloned())
    }

    fn validate_request_locked(
        &self,
        cache: &Cache,
        message: &ProtocolMessage,
    ) -> Result<ProtocolRequest, ProtocolError> {
        let (_, request) = cache.get(message.request_id())?;
        rules::check_request_message(&request, message, self.clock.now())?;
        Ok(request)
    }

    fn validate_response_locked(
        &self,
        cache: &Cache,
        message: &ProtocolMessage,
    ) -> Result<Consumed, ProtocolError> {
        let (_, request) = cache.get(message.request_id())?;
        rules::would_consume(request, message, self.clock.now())
    }

    fn consume_response_locked(
        &self,
        cache: &mut Cache,
        message: &ProtocolMessage,
    ) -> Result<Consumed, ProtocolError> {
        let (found, request) = cache.get(message.request_id())?;
        match rules::decide_response(&request, message, self.clock.now())? {
            Decision::Replay => Ok(Consumed {
                request,
                replayed: true,
            }),
            Decision::Apply(resolved) => {
                let Found::State(index) = found else {
                    return Err(ProtocolError::Corrupt {
                        path: self.layout.protocol_archive().display().to_string(),
                        why: format!("request {} is archived but pending", request.id()),
                    });
                };
                let mut next = cache.state.requests().to_vec();
                if let Some(slot) = next.get_mut(index) {
                    *slot = resolved.clone();
                }
                self.commit(cache, next)?;
                Ok(Consumed {
                    request: resolved,
                    replayed: false,
                })
            }
        }
    }

    /// `answer`'s checks and its record, under the locks: what to deliver, if anything.
    fn answer_step(
        &self,
        cache: &Cache,
        response: &ProtocolMessage,
    ) -> Result<AnswerStep, ProtocolError> {
        let (_, request) = cache.get(response.request_id())?;
        let recorded = self.answers.read(&request)?;
        match rules::check_answer(&request, response, recorded.as_ref(), self.clock.now()) {
            Ok(AnswerCheck::New) => {
                if self.answers.create(self.files.as_ref(), response)? {
                    return Ok(AnswerStep::Deliver);
                }
                // A record appeared without the lock (not troupe's doing): it is the answer.
                let now = self.clock.now();
                Ok(match self.answers.read(&request)? {
                    Some(recorded) => AnswerStep::Refuse {
                        refused: rules::answered_by(&request, &recorded),
                        finish: Some(recorded),
                    },
                    None => AnswerStep::Refuse {
                        finish: None,
                        refused: ProtocolError::State {
                            id: request.id(),
                            status: request.status_at(now).as_str().to_owned(),
                            why: "its answer record changed while this answer was being recorded"
                                .to_owned(),
                        },
                    },
                })
            }
            Ok(AnswerCheck::Again) => Ok(AnswerStep::Deliver),
            Err(refused) => Ok(AnswerStep::Refuse {
                finish: match (&refused, recorded) {
                    (ProtocolError::Answered { .. }, Some(recorded)) => Some(recorded),
                    _ => None,
                },
                refused,
            }),
        }
    }

    fn recorded_answer_locked(
        &self,
        cache: &Cache,
        id: RequestId,
    ) -> Result<Option<ProtocolMessage>, ProtocolError> {
        let Some((_, request)) = cache.find(id)? else {
            return Err(ProtocolError::NotFound(id));
        };
        self.answers.read(&request)
    }
}

#[async_trait::async_trait]
impl ProtocolStore for JsonProtocolStore {
    async fn create(&self, new: NewRequest) -> Result<ProtocolRequest, ProtocolError> {
        let mut session = self.session().await?;
        blocking(|| self.create_locked(&mut session.held.cache, new))
    }

    async fn get(&self, id: RequestId) -> Result<Option<ProtocolRequest>, ProtocolError> {
        let session = self.session().await?;
        blocking(|| self.get_locked(&session.held.cache, id))
    }

    async fn list(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        let session = self.session().await?;
        blocking(|| self.list_locked(&session.held.cache))
    }

    async fn pending(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        let session = self.session().await?;
        blocking(|| self.pending_locked(&session.held.cache))
    }

    async fn latest_plan_of(
        &self,
        sender: &AgentName,
    ) -> Result<Option<ProtocolRequest>, ProtocolError> {
        let session = self.session().await?;
        blocking(|| self.latest_plan_of_locked(&session.held.cache, sender))
    }

    async fn validate_request(
        &self,
        message: &ProtocolMessage,
    ) -> Result<ProtocolRequest, ProtocolError> {
        let session = self.session().await?;
        blocking(|| self.validate_request_locked(&session.held.cache, message))
    }

    async fn validate_response(
        &self,
        message: &ProtocolMessage,
    ) -> Result<Consumed, ProtocolError> {
        let session = self.session().await?;
        blocking(|| self.validate_response_locked(&session.held.cache, message))
    }

    async fn consume_response(&self, message: &ProtocolMessage) -> Result<Consumed, ProtocolError> {
        let mut session = self.session().await?;
        blocking(|| self.consume_response_locked(&mut session.held.cache, message))
    }

    async fn answer(
        &self,
        response: &ProtocolMessage,
        deliver: Deliver<'_>,
    ) -> Result<Delivery, ProtocolError> {
        // Both locks stay held until the delivery returned.
        let session = self.session().await?;
        match blocking(|| self.answer_step(&session.held.cache, response))? {
            AnswerStep::Deliver => self.deliver(deliver, response).await,
            AnswerStep::Refuse { finish, refused } => {
                if let Some(recorded) = finish {
                    self.finish_recorded(deliver, &recorded).await;
                }
                Err(refused)
            }
        }
    }

    async fn deliver_recorded_answers(
        &self,
        deliver: Deliver<'_>,
    ) -> Result<Vec<ProtocolMessage>, ProtocolError> {
        let session = self.session().await?;
        let mut delivered = Vec::new();
        // Pending requests are never archived: state.json holds all of them.
        let pending: Vec<ProtocolRequest> = (session.held.cache.state.requests().iter())
            .filter(|r| r.is_pending())
            .cloned()
            .collect();
        for request in &pending {
            if let Some(answer) = blocking(|| self.answers.read(request))? {
                if self.deliver(deliver, &answer).await? == Delivery::Sent {
                    delivered.push(answer);
                }
            }
        }
        Ok(delivered)
    }

    async fn recorded_answer(
        &self,
        id: RequestId,
    ) -> Result<Option<ProtocolMessage>, ProtocolError> {
        let session = self.session().await?;
        blocking(|| self.recorded_answer_locked(&session.held.cache, id))
    }
}
