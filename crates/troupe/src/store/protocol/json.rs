//! `JsonProtocolStore`: the [`ProtocolStore`] port on `state.json` + `archive.jsonl`.
//!
//! Every operation, reads included, runs under this instance's mutex and then the cross-process
//! lock on `.protocol.lock`, and starts by re-reading both files (see [`Cache::refresh`]): the
//! files are the truth, the in-memory copies only save re-parsing. Of the archive only an index
//! is in memory; archived requests are read back from their lines, under the same locks. Writes validate the new
//! snapshot, then replace `state.json` atomically through the [`ProtocolFiles`] seam; the cache
//! is updated only after the write succeeded, so a failed write leaves the old bytes *and* the
//! old state.
//!
//! `answer` is the one operation that writes outside the protocol folder: it calls the caller's
//! `deliver` (a mailbox send) while holding both locks, so that "no answer yet" and the sending
//! are one step for every thread and process. Lock order is always protocol lock → mailbox,
//! never the reverse: no mailbox operation calls into this store.

use std::sync::{Arc, Mutex, MutexGuard};

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
    /// Serialises this instance's threads and keeps the last good read of both files.
    cache: Mutex<Cache>,
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
        let store = Self {
            layout: layout.clone(),
            clock,
            ids,
            files,
            answers: AnswerRecords::new(layout.protocol_answers_dir()),
            cache: Mutex::new(Cache {
                state: StateFile::new(layout.protocol_state()),
                archive: ArchiveIndex::new(layout.protocol_archive()),
            }),
        };
        drop(store.session()?);
        Ok(store)
    }

    /// Takes the mutex, then the file lock, then re-reads the files. Both locks are held until
    /// the returned guards drop.
    fn session(&self) -> Result<(MutexGuard<'_, Cache>, LockGuard), ProtocolError> {
        let mut cache = self.cache.lock().unwrap_or_else(|poisoned| {
            // A panic mid-operation may have left the cache half-updated; the files are the
            // truth, so forget the cache and read them again.
            let mut cache = poisoned.into_inner();
            cache.reset();
            cache
        });
        self.cache.clear_poison();
        let lock = lock_exclusive(&self.layout.protocol_lock())?;
        cache.refresh()?;
        Ok((cache, lock))
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
    fn deliver(
        &self,
        deliver: Deliver<'_>,
        answer: &ProtocolMessage,
    ) -> Result<Delivery, ProtocolError> {
        deliver(answer).map_err(|cause| ProtocolError::Undelivered {
            id: answer.request_id(),
            cause,
        })
    }

    /// Before refusing a second answer: makes sure the recorded one reached its mailbox (a
    /// process that died between record and delivery left it undelivered).
    fn finish_recorded(&self, deliver: Deliver<'_>, recorded: &ProtocolMessage) {
        match deliver(recorded) {
            Ok(Delivery::AlreadyThere) => {}
            Ok(Delivery::Sent) => tracing::warn!(
                request = %recorded.request_id(),
                message = %recorded.id(),
                "delivered a recorded answer whose delivery had been interrupted"
            ),
            Err(cause) => tracing::warn!(
                request = %recorded.request_id(),
                message = %recorded.id(),
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

impl ProtocolStore for JsonProtocolStore {
    fn create(&self, new: NewRequest) -> Result<ProtocolRequest, ProtocolError> {
        let (mut cache, _lock) = self.session()?;
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
        self.commit(&mut cache, next)?;
        Ok(request)
    }

    fn get(&self, id: RequestId) -> Result<Option<ProtocolRequest>, ProtocolError> {
        let (cache, _lock) = self.session()?;
        Ok(cache.find(id)?.map(|(_, r)| r))
    }

    fn list(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        let (cache, _lock) = self.session()?;
        let state = cache.state.requests();
        Ok(compaction::merged_in_creation_order(
            cache.archive.read_all()?,
            state,
            |id| state.iter().any(|r| r.id() == id),
        ))
    }

    fn pending(&self) -> Result<Vec<ProtocolRequest>, ProtocolError> {
        let (cache, _lock) = self.session()?;
        // Pending requests are never archived: state.json holds all of them.
        Ok(cache
            .state
            .requests()
            .iter()
            .filter(|r| r.is_pending())
            .cloned()
            .collect())
    }

    fn latest_plan_of(&self, sender: &AgentName) -> Result<Option<ProtocolRequest>, ProtocolError> {
        let (cache, _lock) = self.session()?;
        // Each sender's latest plan is never archived, so state.json's array order decides.
        Ok(cache
            .state
            .requests()
            .iter()
            .rev()
            .find(|r| r.kind() == RequestKind::PlanApproval && r.sender() == sender)
            .cloned())
    }

    fn validate_request(
        &self,
        message: &ProtocolMessage,
    ) -> Result<ProtocolRequest, ProtocolError> {
        let (cache, _lock) = self.session()?;
        let (_, request) = cache.get(message.request_id())?;
        rules::check_request_message(&request, message, self.clock.now())?;
        Ok(request)
    }

    fn validate_response(&self, message: &ProtocolMessage) -> Result<Consumed, ProtocolError> {
        let (cache, _lock) = self.session()?;
        let (_, request) = cache.get(message.request_id())?;
        rules::would_consume(request, message, self.clock.now())
    }

    fn consume_response(&self, message: &ProtocolMessage) -> Result<Consumed, ProtocolError> {
        let (mut cache, _lock) = self.session()?;
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
                self.commit(&mut cache, next)?;
                Ok(Consumed {
                    request: resolved,
                    replayed: false,
                })
            }
        }
    }

    fn answer(
        &self,
        response: &ProtocolMessage,
        deliver: Deliver<'_>,
    ) -> Result<Delivery, ProtocolError> {
        let (cache, _lock) = self.session()?;
        let (_, request) = cache.get(response.request_id())?;
        let recorded = self.answers.read(&request)?;
        match rules::check_answer(&request, response, recorded.as_ref(), self.clock.now()) {
            Ok(AnswerCheck::New) => {
                if self.answers.create(self.files.as_ref(), response)? {
                    return self.deliver(deliver, response);
                }
                // A record appeared without the lock (not troupe's doing): it is the answer.
                let now = self.clock.now();
                Err(match self.answers.read(&request)? {
                    Some(recorded) => {
                        self.finish_recorded(deliver, &recorded);
                        rules::answered_by(&request, &recorded)
                    }
                    None => ProtocolError::State {
                        id: request.id(),
                        status: request.status_at(now).as_str().to_owned(),
                        why: "its answer record changed while this answer was being recorded"
                            .to_owned(),
                    },
                })
            }
            Ok(AnswerCheck::Again) => self.deliver(deliver, response),
            Err(refused) => {
                if let (ProtocolError::Answered { .. }, Some(recorded)) = (&refused, &recorded) {
                    self.finish_recorded(deliver, recorded);
                }
                Err(refused)
            }
        }
    }

    fn deliver_recorded_answers(
        &self,
        deliver: Deliver<'_>,
    ) -> Result<Vec<ProtocolMessage>, ProtocolError> {
        let (cache, _lock) = self.session()?;
        let mut delivered = Vec::new();
        // Pending requests are never archived: state.json holds all of them.
        for request in cache.state.requests().iter().filter(|r| r.is_pending()) {
            if let Some(answer) = self.answers.read(request)? {
                if self.deliver(deliver, &answer)? == Delivery::Sent {
                    delivered.push(answer);
                }
            }
        }
        Ok(delivered)
    }

    fn recorded_answer(&self, id: RequestId) -> Result<Option<ProtocolMessage>, ProtocolError> {
        let (cache, _lock) = self.session()?;
        let Some((_, request)) = cache.find(id)? else {
            return Err(ProtocolError::NotFound(id));
        };
        self.answers.read(&request)
    }
}
