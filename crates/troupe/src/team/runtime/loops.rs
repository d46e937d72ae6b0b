//! The teammates' loops' lifecycle, owned by one private type: which teammates have a runner,
//! which have a loop running, which wakes arrived while one ran, the tasks to wait for at close,
//! and the messages a loop finished whose ack failed.
//!
//! **Loops are tasks that end.** A teammate's loop claims one message at a time; when there is
//! nothing to claim it asks [`Loops::try_idle`] and its task ends — no polling, no sleep. A wake
//! that arrives while the loop runs is remembered (`wake_pending`), and `try_idle` refuses once
//! for it, so the loop looks at the mailbox again: nothing is stranded.
//!
//! Only this type changes a slot, and it never builds a runner: a runner is built by the caller
//! *before* the slots lock is taken and handed in ([`Loops::install`], [`Loops::adopt`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use troupe_wire::{AgentName, MessageId};

use crate::agent::Runner;
use crate::sync::lock;

/// A teammate's runner, shared between the loops that run it one after another.
pub(super) type SharedRunner = Arc<tokio::sync::Mutex<Runner>>;

/// A teammate's runner and loop state.
struct Slot {
    runner: SharedRunner,
    /// A loop task is running for this teammate.
    running: bool,
    /// A wake arrived while the loop ran: it must look at the mailbox again before idling.
    wake_pending: bool,
}

impl Slot {
    fn new(runner: Runner) -> Self {
        Self {
            runner: Arc::new(tokio::sync::Mutex::new(runner)),
            running: false,
            wake_pending: false,
        }
    }
}

/// What [`Loops::start`] found.
pub(super) enum Start {
    /// No loop ran: one must be spawned with this runner (the slot counts as running now).
    Started(SharedRunner),
    /// A loop runs; the wake is remembered for it.
    AlreadyRunning,
    /// The teammate has no runner in this process yet (a teammate of an earlier run).
    NoRunner,
}

#[derive(Default)]
pub(super) struct Loops {
    slots: Mutex<HashMap<AgentName, Slot>>,
    /// The loops, for `close` to wait on.
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Messages a teammate finished (result sent) whose ack failed: on redelivery they are only
    /// acked, never run through the model again.
    completed: Mutex<HashSet<MessageId>>,
    /// Signalled (to every waiter) whenever a loop ends: a respawn waits for the loop of a
    /// teammate that just shut down or failed to finish its last steps.
    ended: Notify,
}

impl Loops {
    /// Marks `name`'s loop running and hands out its runner, unless one runs already (then
    /// the wake is remembered) or the teammate has no runner yet.
    pub(super) fn start(&self, name: &AgentName) -> Start {
        let mut slots = lock(&self.slots);
        let Some(slot) = slots.get_mut(name) else {
            return Start::NoRunner;
        };
        if slot.running {
            slot.wake_pending = true;
            return Start::AlreadyRunning;
        }
        slot.running = true;
        slot.wake_pending = false;
        Start::Started(slot.runner.clone())
    }

    /// Gives a teammate of an earlier run its runner, unless another wake gave it one meanwhile
    /// (then `runner` is dropped unused).
    pub(super) fn adopt(&self, name: &AgentName, runner: Runner) {
        lock(&self.slots)
            .entry(name.clone())
            .or_insert_with(|| Slot::new(runner));
    }

    /// Installs the runner of a newly spawned teammate, replacing an earlier teammate's slot, and
    /// runs `register` (the roster change) under the slots lock, so no wake can start a loop
    /// between the two. Returns `Ok(None)` when a loop of the name is running (the caller
    /// waits for it), else what `register` returned; the slot is installed only if it is
    /// `Ok(true)`.
    pub(super) fn install<E>(
        &self,
        name: &AgentName,
        runner: Runner,
        register: impl FnOnce() -> Result<bool, E>,
    ) -> Result<Option<bool>, E> {
        let mut slots = lock(&self.slots);
        if slots.get(name).is_some_and(|slot| slot.running) {
            return Ok(None);
        }
        let registered = register()?;
        if registered {
            slots.insert(name.clone(), Slot::new(runner));
        }
        Ok(Some(registered))
    }

    /// Forgets the runner of `name` unless its loop runs (a lease taken anew: the runner's
    /// history may be stale); the next start builds one from the transcript.
    pub(super) fn drop_idle(&self, name: &AgentName) {
        let mut slots = lock(&self.slots);
        if slots.get(name).is_some_and(|slot| !slot.running) {
            slots.remove(name);
        }
    }

    /// Whether a loop of `name` is running.
    /// The teammates with a runner in this process.
    pub(super) fn names(&self) -> Vec<AgentName> {
        lock(&self.slots).keys().cloned().collect()
    }

    pub(super) fn is_running(&self, name: &AgentName) -> bool {
        lock(&self.slots).get(name).is_some_and(|slot| slot.running)
    }

    /// Whether any teammate loop is running.
    pub(super) fn any_running(&self) -> bool {
        lock(&self.slots).values().any(|slot| slot.running)
    }

    /// Called by a loop that found nothing to claim: true when it goes idle (its slot stops
    /// counting as running), false when a wake came in meanwhile and it must look again (never
    /// when `closing`).
    pub(super) fn try_idle(&self, name: &AgentName, closing: bool) -> bool {
        let mut slots = lock(&self.slots);
        let Some(slot) = slots.get_mut(name) else {
            return true;
        };
        if slot.wake_pending && !closing {
            slot.wake_pending = false;
            return false;
        }
        slot.running = false;
        true
    }

    /// Called when a loop ends for any other reason (shutdown, failure, close).
    pub(super) fn ended(&self, name: &AgentName) {
        if let Some(slot) = lock(&self.slots).get_mut(name) {
            slot.running = false;
            slot.wake_pending = false;
        }
        self.ended.notify_waiters();
    }

    /// Resolves at the next [`Self::ended`] after it was enabled.
    pub(super) fn ended_signal(&self) -> &Notify {
        &self.ended
    }

    pub(super) fn push_task(&self, handle: JoinHandle<()>) {
        let mut tasks = lock(&self.tasks);
        tasks.retain(|h| !h.is_finished());
        tasks.push(handle);
    }

    /// The tasks started so far, taken (close waits on them, then looks again).
    pub(super) fn take_tasks(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *lock(&self.tasks))
    }

    pub(super) fn is_completed(&self, message: MessageId) -> bool {
        lock(&self.completed).contains(&message)
    }

    pub(super) fn mark_completed(&self, message: MessageId) {
        lock(&self.completed).insert(message);
    }
}
