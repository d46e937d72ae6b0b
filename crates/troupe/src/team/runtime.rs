//! The teammate runtime: spawning, one worker per teammate, statuses, the lead's event pump,
//! quiescence, and closing.
//!
//! **Workers are tasks that end.** A teammate's worker claims one message at a time; when there is
//! nothing to claim it marks the teammate idle and its task ends — no polling, no sleep. A new
//! message wakes it (the postman calls [`Waker::wake`]; messages written by another process are
//! seen through the filesystem watch in [`super::watch`]). The runner and its history outlive the
//! worker, so the next message continues the same conversation.
//!
//! The wake/idle race is closed by `wake_pending`: a wake that arrives while a worker runs is
//! remembered, and a worker that found its mailbox empty re-checks it before going idle.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use troupe_wire::{AgentName, MessageId, TeammateRecord, TeammateStatus};

use super::error::TeamError;
use super::observer::{TeamObserver, TeamUpdate};
use super::plan_gate::GateStart;
use super::postman::{Postman, Waker};
use super::protocol::ProtocolRuntime;
use super::roster::Roster;
use super::worker;
use crate::agent::{transcript, Runner};
use crate::clock::Clock;
use crate::layout::Layout;
use crate::store::mailbox::MailboxStore;

/// Builds a teammate's runner: its model, its tools (with the plan gate in its policy), its
/// system prompt. Chosen by the composition root.
pub trait TeammateFactory: Send + Sync {
    /// Builds the runner of `teammate` (its name, role, and plan rule come from its record).
    fn build(&self, team: TeamHandle, teammate: &TeammateRecord) -> Result<Runner, TeamError>;

    /// When the plan gate of `teammate` first closes, as the runners this factory builds apply
    /// it. The default: from its first call when it was spawned with `plan_required`.
    fn gate_start(&self, teammate: &TeammateRecord) -> GateStart {
        GateStart::of(teammate.plan_required, false)
    }
}

/// What `spawn_teammate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawned {
    /// When the new teammate's plan gate first closes.
    pub gate: GateStart,
    /// The status of the earlier teammate with this name that the new one replaced, if any.
    pub replaced: Option<TeammateStatus>,
    /// Where the conversation of an earlier teammate with this name was set aside.
    pub earlier_transcript: Option<PathBuf>,
    /// Messages left in the mailbox for an earlier teammate with this name, now in quarantine.
    pub quarantined: usize,
}

/// A teammate's runner and worker state.
struct Slot {
    runner: Arc<tokio::sync::Mutex<Runner>>,
    /// A worker task is running for this teammate.
    running: bool,
    /// A wake arrived while the worker ran: it must look at the mailbox again before idling.
    wake_pending: bool,
}

pub struct TeamInner {
    layout: Layout,
    pub(crate) postman: Arc<Postman>,
    pub(crate) protocol: Arc<ProtocolRuntime>,
    pub(crate) roster: Roster,
    factory: Arc<dyn TeammateFactory>,
    slots: Mutex<HashMap<AgentName, Slot>>,
    /// Messages a teammate finished (result sent) whose ack failed: on redelivery they are only
    /// acked, never run through the model again.
    pub(crate) completed: Mutex<HashSet<MessageId>>,
    /// Teammates that failed since the driver last looked, with the reason: the lead is told.
    pub(crate) failures: Mutex<Vec<(AgentName, String)>>,
    /// Signalled on every change the driver may be waiting for.
    pub(crate) changed: Notify,
    /// Signalled (to every waiter) whenever a worker ends: a respawn waits for the worker of a
    /// teammate that just shut down or failed to finish its last steps.
    worker_ended: Notify,
    /// Cancelled when the runtime closes; workers stop at their next safe point.
    pub(crate) closing: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    pub(crate) observer: Arc<dyn TeamObserver>,
}

/// A weak reference to the team, held by tools (which the team's runners own).
#[derive(Clone)]
pub struct TeamHandle(Weak<TeamInner>);

impl TeamHandle {
    pub fn upgrade(&self) -> Result<Arc<TeamInner>, TeamError> {
        self.0.upgrade().ok_or(TeamError::Closed)
    }
}

/// The teammate runtime. Cloning shares it.
#[derive(Clone)]
pub struct TeamRuntime {
    inner: Arc<TeamInner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    crate::sync::lock(m)
}

impl TeamRuntime {
    pub fn new(
        layout: Layout,
        postman: Arc<Postman>,
        protocol: Arc<ProtocolRuntime>,
        factory: Arc<dyn TeammateFactory>,
    ) -> Result<Self, TeamError> {
        if !Arc::ptr_eq(protocol.postman(), &postman) {
            return Err(TeamError::Invalid(
                "the protocol runtime must share the team runtime's postman and mailbox store"
                    .into(),
            ));
        }
        let roster = Roster::load(&layout, postman.clock().clone())?;
        let observer = postman.observer().clone();
        let inner = Arc::new(TeamInner {
            layout,
            postman,
            protocol,
            roster,
            factory,
            slots: Mutex::new(HashMap::new()),
            completed: Mutex::new(HashSet::new()),
            failures: Mutex::new(Vec::new()),
            changed: Notify::new(),
            worker_ended: Notify::new(),
            closing: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
            observer,
        });
        inner
            .postman
            .set_waker(Arc::new(TeamWaker(Arc::downgrade(&inner))));
        Ok(Self { inner })
    }

    pub fn handle(&self) -> TeamHandle {
        TeamHandle(Arc::downgrade(&self.inner))
    }

    pub fn inner(&self) -> &Arc<TeamInner> {
        &self.inner
    }

    pub fn postman(&self) -> &Arc<Postman> {
        &self.inner.postman
    }

    pub fn protocol(&self) -> &Arc<ProtocolRuntime> {
        &self.inner.protocol
    }

    pub fn mailbox(&self) -> &Arc<dyn MailboxStore> {
        self.inner.postman.mailbox()
    }

    pub fn roster(&self) -> Vec<TeammateRecord> {
        self.inner.roster.all()
    }

    pub fn status_of(&self, name: &AgentName) -> Option<TeammateStatus> {
        self.inner.roster.get(name).map(|r| r.status)
    }

    /// Wakes every teammate whose mailbox may hold work (on start, after recovery).
    pub fn wake_all(&self) {
        for record in self.inner.roster.all() {
            self.inner.wake_teammate(&record.name);
        }
        self.inner.changed.notify_one();
    }

    /// Whether any teammate worker is running.
    pub fn any_worker_running(&self) -> bool {
        lock(&self.inner.slots).values().any(|s| s.running)
    }

    /// Tells the driver to look again (e.g. after a test moved the clock).
    pub fn poke(&self) {
        self.inner.changed.notify_one();
    }

    /// Resolves when something changed since the last call (or a permit is stored).
    pub async fn changed(&self) {
        self.inner.changed.notified().await;
    }

    /// Cancels every worker at its next safe point, waits for them, and releases what they held.
    pub async fn close(&self) {
        self.start_closing();
        loop {
            let handles: Vec<JoinHandle<()>> = std::mem::take(&mut *lock(&self.inner.tasks));
            if handles.is_empty() {
                break;
            }
            for handle in handles {
                let _ = handle.await;
            }
        }
    }

    /// Cancels every worker at its next safe point, without waiting (an interrupt does this
    /// first, so that no teammate starts another model call); `close` still waits and releases.
    pub fn start_closing(&self) {
        self.inner.closing.cancel();
    }

    pub fn is_closing(&self) -> bool {
        self.inner.closing.is_cancelled()
    }

    /// Teammates that failed since the last call, with their reasons.
    pub fn take_failures(&self) -> Vec<(AgentName, String)> {
        std::mem::take(&mut *lock(&self.inner.failures))
    }
}

impl TeamInner {
    pub fn handle(self: &Arc<Self>) -> TeamHandle {
        TeamHandle(Arc::downgrade(self))
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        self.postman.clock()
    }

    /// Registers a teammate and delivers its first task. The name must be a slug and not
    /// `lead`. A name whose teammate is running or idle is refused (`teammate_exists`); a name
    /// whose teammate shut down or failed is spawned again as a new teammate: the old
    /// conversation is set aside (`<name>.<n>.jsonl`), messages still waiting for the old
    /// teammate are quarantined, and the new role and plan rule are recorded.
    ///
    /// What the `spawn_teammate` tool runs. When the earlier teammate shut down or failed a
    /// moment ago, its worker may still be finishing (acking its last message): this waits for
    /// it rather than refuse.
    pub async fn spawn(
        self: &Arc<Self>,
        name: &AgentName,
        role: &str,
        prompt: &str,
        plan_required: bool,
    ) -> Result<Spawned, TeamError> {
        check_spawn_arguments(name, role, prompt)?;
        let spawned = loop {
            if self.closing.is_cancelled() {
                return Err(TeamError::Closed);
            }
            // Registered before looking, so a worker that ends in between still wakes us.
            let ended = self.worker_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            match self.try_spawn(name, role, plan_required)? {
                Some(spawned) => break spawned,
                None => {
                    tokio::select! {
                        () = ended => {}
                        () = self.closing.cancelled() => {}
                    }
                }
            }
        };
        self.deliver_first_task(name, role, prompt)?;
        Ok(spawned)
    }

    /// [`Self::spawn`] without waiting and without `plan_required`: refuses with
    /// `teammate_state` while an earlier teammate's worker is still finishing.
    pub fn spawn_teammate(
        self: &Arc<Self>,
        name: &AgentName,
        role: &str,
        prompt: &str,
    ) -> Result<Spawned, TeamError> {
        check_spawn_arguments(name, role, prompt)?;
        if self.closing.is_cancelled() {
            return Err(TeamError::Closed);
        }
        let Some(spawned) = self.try_spawn(name, role, false)? else {
            return Err(TeamError::TeammateState {
                name: name.clone(),
                status: "stopping",
                why: "its worker is still finishing; try again".into(),
            });
        };
        self.deliver_first_task(name, role, prompt)?;
        Ok(spawned)
    }

    fn deliver_first_task(
        &self,
        name: &AgentName,
        role: &str,
        prompt: &str,
    ) -> Result<(), TeamError> {
        self.observer.update(&TeamUpdate::Spawned {
            name: name.clone(),
            role: role.to_owned(),
        });
        self.postman.send_ordinary(
            &AgentName::lead(),
            name,
            troupe_wire::OrdinaryKind::Task,
            prompt,
        )?;
        Ok(())
    }

    /// One attempt at [`Self::spawn`]; `None` when the old teammate's worker is still
    /// finishing (it shut down or failed a moment ago) and the caller must wait for it.
    ///
    /// Runs under the slots lock, so no worker can start for the name meanwhile and two spawns
    /// of one name are serialised. Lock order: slots, then the roster's lock (never the reverse).
    fn try_spawn(
        self: &Arc<Self>,
        name: &AgentName,
        role: &str,
        plan_required: bool,
    ) -> Result<Option<Spawned>, TeamError> {
        let mut slots = lock(&self.slots);
        let earlier = self.roster.get(name);
        if let Some(earlier) = &earlier {
            match earlier.status {
                TeammateStatus::Running | TeammateStatus::Idle => {
                    return Err(TeamError::TeammateExists(name.clone()))
                }
                TeammateStatus::Shutdown | TeammateStatus::Failed => {
                    if slots.get(name).is_some_and(|slot| slot.running) {
                        return Ok(None);
                    }
                }
            }
        }
        let record = TeammateRecord {
            name: name.clone(),
            role: role.to_owned(),
            status: TeammateStatus::Idle,
            detail: None,
            updated_at_utc: self.clock().now(),
            plan_required,
            earlier_plan: self
                .protocol
                .store()
                .latest_plan_of(name)?
                .map(|plan| plan.id()),
        };
        let quarantined = match &earlier {
            Some(earlier) => self.quarantine_leftovers(earlier)?,
            None => 0,
        };
        let earlier_transcript = transcript::set_aside(&self.layout.transcript(name))?;
        let runner = self.factory.build(self.handle(), &record)?;
        let registered = match &earlier {
            Some(_) => self.roster.replace_stopped(record.clone())?,
            None => self.roster.add(record.clone())?,
        };
        if !registered {
            return Err(TeamError::TeammateExists(name.clone()));
        }
        slots.insert(
            name.clone(),
            Slot {
                runner: Arc::new(tokio::sync::Mutex::new(runner)),
                running: false,
                wake_pending: false,
            },
        );
        Ok(Some(Spawned {
            gate: self.factory.gate_start(&record),
            replaced: earlier.map(|e| e.status),
            earlier_transcript,
            quarantined,
        }))
    }

    /// Moves the messages still waiting in the mailbox of a teammate that shut down or failed to
    /// quarantine (never deleted; `troupe mailbox NAME --state quarantine` shows them with the
    /// reason): they were meant for that teammate, not for the new one spawned under its name.
    fn quarantine_leftovers(&self, earlier: &TeammateRecord) -> Result<usize, TeamError> {
        let mailbox = self.postman.mailbox();
        let reason = format!(
            "left for the earlier teammate {} ({}, role: {}) when a new teammate was spawned \
             under its name",
            earlier.name,
            earlier.status.as_str(),
            earlier.role
        );
        let mut moved = 0;
        while let Some(message) = mailbox.claim(&earlier.name)? {
            if let Err(e) = mailbox.quarantine(&earlier.name, message.id(), &reason) {
                // Back to ready/, where it was: the spawn fails and nothing is lost.
                let _ = mailbox.release(&earlier.name, message.id());
                return Err(e.into());
            }
            self.observer.update(&TeamUpdate::Quarantined {
                agent: earlier.name.clone(),
                message: message.id().to_string(),
                reason: reason.clone(),
            });
            moved += 1;
        }
        Ok(moved)
    }

    /// Whether `name` may receive a new ordinary message or request.
    pub fn check_reachable(&self, name: &AgentName) -> Result<TeammateRecord, TeamError> {
        let record = self
            .roster
            .get(name)
            .ok_or_else(|| TeamError::TeammateNotFound(name.clone()))?;
        match record.status {
            TeammateStatus::Shutdown => Err(TeamError::TeammateState {
                name: name.clone(),
                status: "shutdown",
                why: "it takes no more messages".into(),
            }),
            TeammateStatus::Failed => Err(TeamError::TeammateState {
                name: name.clone(),
                status: "failed",
                why: record
                    .detail
                    .clone()
                    .unwrap_or_else(|| "see troupe status".into()),
            }),
            _ => Ok(record),
        }
    }

    /// Marks a teammate failed and queues the reason for the lead.
    pub(crate) fn fail(&self, name: &AgentName, reason: String) {
        lock(&self.failures).push((name.clone(), reason.clone()));
        self.set_status(name, TeammateStatus::Failed, Some(reason));
    }

    pub(crate) fn set_status(
        &self,
        name: &AgentName,
        status: TeammateStatus,
        detail: Option<String>,
    ) {
        match self.roster.set_status(name, status, detail.clone()) {
            Ok(Some(previous)) if previous != status => {
                self.observer.update(&TeamUpdate::Status {
                    name: name.clone(),
                    status,
                    detail,
                });
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("could not write team.json: {e}"),
        }
        self.changed.notify_one();
    }

    /// Starts a worker for `name` unless one runs (then it will look again before idling).
    pub(crate) fn wake_teammate(self: &Arc<Self>, name: &AgentName) {
        if self.closing.is_cancelled() {
            return;
        }
        let Some(record) = self.roster.get(name) else {
            return;
        };
        if matches!(
            record.status,
            TeammateStatus::Shutdown | TeammateStatus::Failed
        ) {
            return;
        }
        let runner = {
            let mut slots = lock(&self.slots);
            if !slots.contains_key(name) {
                // A teammate from an earlier run: a fresh runner for the same name, role and
                // plan rule, continuing its transcript.
                match self.factory.build(self.handle(), &record) {
                    Ok(runner) => {
                        slots.insert(
                            name.clone(),
                            Slot {
                                runner: Arc::new(tokio::sync::Mutex::new(runner)),
                                running: false,
                                wake_pending: false,
                            },
                        );
                    }
                    Err(e) => {
                        drop(slots);
                        self.fail(name, e.to_string());
                        return;
                    }
                }
            }
            let Some(slot) = slots.get_mut(name) else {
                return;
            };
            if slot.running {
                slot.wake_pending = true;
                return;
            }
            slot.running = true;
            slot.wake_pending = false;
            slot.runner.clone()
        };
        self.set_status(name, TeammateStatus::Running, None);
        let inner = self.clone();
        let name = name.clone();
        let handle = tokio::spawn(async move {
            worker::run(inner.clone(), name.clone(), runner).await;
        });
        let mut tasks = lock(&self.tasks);
        tasks.retain(|h| !h.is_finished());
        tasks.push(handle);
    }

    /// Called by a worker that found nothing to claim: goes idle unless a wake came in.
    pub(crate) fn try_finish_worker(&self, name: &AgentName) -> bool {
        let mut slots = lock(&self.slots);
        let Some(slot) = slots.get_mut(name) else {
            return true;
        };
        if slot.wake_pending && !self.closing.is_cancelled() {
            slot.wake_pending = false;
            return false;
        }
        slot.running = false;
        true
    }

    /// Called when a worker ends for any other reason (shutdown, failure, close).
    pub(crate) fn worker_ended(&self, name: &AgentName) {
        if let Some(slot) = lock(&self.slots).get_mut(name) {
            slot.running = false;
            slot.wake_pending = false;
        }
        self.worker_ended.notify_waiters();
        self.changed.notify_one();
    }
}

/// The name must not be `lead`; role and first task must not be blank.
fn check_spawn_arguments(name: &AgentName, role: &str, prompt: &str) -> Result<(), TeamError> {
    if name.is_lead() {
        return Err(TeamError::TeammateExists(name.clone()));
    }
    if role.trim().is_empty() {
        return Err(TeamError::Invalid("role must not be blank".into()));
    }
    if prompt.trim().is_empty() {
        return Err(TeamError::Invalid("prompt must not be blank".into()));
    }
    Ok(())
}

/// The postman's waker: weak, because the team owns the postman.
struct TeamWaker(Weak<TeamInner>);

impl Waker for TeamWaker {
    fn wake(&self, agent: &AgentName) {
        let Some(inner) = self.0.upgrade() else {
            return;
        };
        if agent.is_lead() {
            inner.changed.notify_one();
        } else {
            inner.wake_teammate(agent);
        }
    }
}
