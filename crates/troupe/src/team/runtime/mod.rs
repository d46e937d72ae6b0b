//! The teammate runtime: the public [`TeamRuntime`] — spawning, statuses, the lead's event pump,
//! closing — over one private state: the roster, the teammates' loops ([`loops`]: their
//! lifecycle; [`teammate`]: a loop and everything it does to the team), and the postman and
//! protocol runtime it builds itself.
//!
//! **One postman by construction.** [`TeamRuntime::new`] builds the [`Postman`] (with a waker
//! that points back at the runtime, through `Arc::new_cyclic`) and the [`ProtocolRuntime`] on
//! it, so ordinary and protocol messages always go through one mailbox store and wake the same
//! runtime; nothing outside can hand in a mismatched pair.
//!
//! A new message wakes its recipient (the postman calls the waker; messages written by another
//! process are seen through the filesystem watch in [`super::watch`]); the runner and its
//! history outlive the loop, so the next message continues the same conversation.

mod loops;
mod teammate;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use troupe_wire::{AgentName, Isolation, TeammateRecord, TeammateStatus};

use super::board_work::{keep_leases, BoardWork, ExpiredSink};
use super::definitions::AgentDefinition;
use super::error::TeamError;
use super::observer::{TeamObserver, TeamUpdate};
use super::placement::{Claim, Placement};
use super::plan_gate::{GateStart, PlanGateRule};
use super::postman::{Postman, Waker};
use super::protocol::{self as triage, ProtocolRuntime};
use super::roster::Roster;
use crate::agent::transcript::Transcripts;
use crate::agent::Runner;
use crate::clock::Clock;
use crate::ids::IdGenerator;
use crate::layout::Layout;
use crate::store::mailbox::MailboxStore;
use crate::store::protocol::ProtocolStore;
use crate::store::response_ack::{InTurn, ResponseAck};
use crate::sync::lock;
use crate::worktree::Worktrees;
use loops::{Loops, Start};
use teammate::TeammateLoop;

/// Builds a teammate's runner: its model, its tools (with the plan gate in its policy), its
/// system prompt. Chosen by the composition root.
#[async_trait::async_trait]
pub trait TeammateFactory: Send + Sync {
    /// Builds the runner of `teammate` (its name, role, and plan rule come from its record).
    async fn build(&self, team: TeamHandle, teammate: &TeammateRecord)
        -> Result<Runner, TeamError>;

    /// When the plan gate of `teammate` first closes, as the runners this factory builds apply
    /// it. The default: from its first call when it was spawned with `plan_required`.
    fn gate_start(&self, teammate: &TeammateRecord) -> GateStart {
        GateStart::of(teammate.plan_required, false)
    }

    /// The agent definition `name` (`agents/<name>.md`) this factory builds teammates from, if
    /// it has one. The default: none.
    fn definition(&self, _name: &AgentName) -> Option<AgentDefinition> {
        None
    }

    /// The names of all its agent definitions. The default: none.
    fn definition_names(&self) -> Vec<AgentName> {
        Vec::new()
    }

    /// Why the definition file `agents/<name>.md` was skipped, if it was. The default: none.
    fn definition_problem(&self, _name: &str) -> Option<String> {
        None
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

/// What the team runtime is built on: the ports it sends and records through.
pub struct TeamPorts {
    /// The one mailbox store of the team: ordinary and protocol messages alike.
    pub mailbox: Arc<dyn MailboxStore>,
    pub protocol: Arc<dyn ProtocolStore>,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdGenerator>,
    pub observer: Arc<dyn TeamObserver>,
    /// The response window of new protocol requests.
    pub request_ttl: Duration,
    /// Where teammates' conversations are kept.
    pub transcripts: Arc<dyn Transcripts>,
    /// Where teammates run: here ([`Here`](super::placement::Here)), or under leases in a
    /// shared team.
    pub placement: Arc<dyn Placement>,
    /// The teammates' git worktrees (`isolation: "worktree"`): a worktree teammate's changes
    /// are committed on its branch when it finishes a message. `None`: no teammate has one.
    pub worktrees: Option<Arc<Worktrees>>,
}

/// The runtime's state; private: outside code goes through [`TeamRuntime`], a teammate's loop
/// through [`TeammateLoop`]'s methods.
struct TeamInner {
    postman: Arc<Postman>,
    protocol: Arc<ProtocolRuntime>,
    roster: Roster,
    factory: Arc<dyn TeammateFactory>,
    /// Slots, loops and completed messages: the loop lifecycle.
    loops: Loops,
    /// Serialises spawns (two spawns of one name, a spawn and a respawn). Lock order: spawning,
    /// then the loops' slots; the roster is written with neither slots lock held.
    spawning: tokio::sync::Mutex<()>,
    /// Teammates that failed since the driver last looked, with the reason: the lead is told.
    failures: Mutex<Vec<(AgentName, String)>>,
    /// In a shared team: the failed teammates the lead was told of (failures happen in other
    /// processes, so the roster is where they are found).
    failures_told: Mutex<std::collections::HashSet<AgentName>>,
    transcripts: Arc<dyn Transcripts>,
    /// Where teammates run.
    placement: Arc<dyn Placement>,
    /// The teammates' git worktrees, if teammates may have them.
    worktrees: Option<Arc<Worktrees>>,
    /// Signalled on every change the driver may be waiting for.
    changed: Notify,
    /// Cancelled when the runtime closes; loops stop at their next safe point.
    closing: CancellationToken,
    observer: Arc<dyn TeamObserver>,
    /// The task board idle teammates pull work from, once attached ([`TeamRuntime::attach_board`]).
    board: std::sync::OnceLock<Arc<BoardWork>>,
    /// The lease keeper's task, awaited at close.
    keeper: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Counts arrivals in any mailbox (this process's sends, another process's, seen through
    /// the watch or the database's wakeups): a permission ask waits on it for its answer.
    arrivals: tokio::sync::watch::Sender<u64>,
}

/// A weak reference to the team, held by tools (which the team's runners own).
#[derive(Clone)]
pub struct TeamHandle(Weak<TeamInner>);

impl TeamHandle {
    /// The runtime, unless it was dropped (`team_closed`).
    pub fn upgrade(&self) -> Result<TeamRuntime, TeamError> {
        self.0
            .upgrade()
            .map(|inner| TeamRuntime { inner })
            .ok_or(TeamError::Closed)
    }
}

/// The teammate runtime. Cloning shares it.
#[derive(Clone)]
pub struct TeamRuntime {
    inner: Arc<TeamInner>,
}

impl TeamRuntime {
    /// Builds the runtime, its postman (waking this runtime) and its protocol runtime (sending
    /// through that postman), and loads the roster from `team.json`.
    pub async fn new(
        layout: Layout,
        ports: TeamPorts,
        factory: Arc<dyn TeammateFactory>,
    ) -> Result<Self, TeamError> {
        let roster = ports
            .placement
            .open_roster(&layout, ports.clock.clone())
            .await?;
        let inner = Arc::new_cyclic(|weak: &Weak<TeamInner>| {
            let postman = Arc::new(
                Postman::new(
                    ports.mailbox,
                    ports.clock,
                    ports.ids,
                    ports.observer.clone(),
                )
                .with_waker(Arc::new(TeamWaker(weak.clone()))),
            );
            let protocol = Arc::new(ProtocolRuntime::new(
                ports.protocol,
                postman.clone(),
                ports.request_ttl,
            ));
            TeamInner {
                postman,
                protocol,
                roster,
                factory,
                loops: Loops::default(),
                spawning: tokio::sync::Mutex::new(()),
                failures: Mutex::new(Vec::new()),
                failures_told: Mutex::new(std::collections::HashSet::new()),
                transcripts: ports.transcripts,
                placement: ports.placement,
                worktrees: ports.worktrees,
                changed: Notify::new(),
                closing: CancellationToken::new(),
                observer: ports.observer,
                board: std::sync::OnceLock::new(),
                keeper: Mutex::new(None),
                arrivals: tokio::sync::watch::Sender::new(0),
            }
        });
        Ok(Self { inner })
    }

    pub fn handle(&self) -> TeamHandle {
        TeamHandle(Arc::downgrade(&self.inner))
    }

    /// Changes on every arrival in any mailbox of the team (see [`TeamInner::arrivals`]).
    pub fn arrivals(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.arrivals.subscribe()
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

    /// How a protocol response is consumed and its message acked: in one transaction in a
    /// shared team's store, one after the other on files (see `store::response_ack`).
    pub fn response_ack(&self) -> Arc<dyn ResponseAck> {
        match self.inner.placement.response_ack() {
            Some(ack) => ack,
            None => Arc::new(InTurn {
                mailbox: self.mailbox().clone(),
                protocol: self.protocol().store().clone(),
            }),
        }
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        self.inner.postman.clock()
    }

    pub async fn roster(&self) -> Vec<TeammateRecord> {
        self.inner.roster.all().await
    }

    /// The teammates' git worktrees, if teammates may have them.
    pub fn worktrees(&self) -> Option<&Arc<Worktrees>> {
        self.inner.worktrees.as_ref()
    }

    /// Reports `update` to the team's observer (the event stream): what a team tool did.
    pub fn report(&self, update: &TeamUpdate) {
        self.inner.observer.update(update);
    }

    /// The agent definition `name`, if the team's factory has it.
    pub fn definition(&self, name: &AgentName) -> Option<AgentDefinition> {
        self.inner.factory.definition(name)
    }

    /// The names of the agent definitions teammates can be spawned from.
    pub fn definition_names(&self) -> Vec<AgentName> {
        self.inner.factory.definition_names()
    }

    /// Why `agents/<name>.md` was skipped at run start, if it was.
    pub fn definition_problem(&self, name: &str) -> Option<String> {
        self.inner.factory.definition_problem(name)
    }

    pub async fn status_of(&self, name: &AgentName) -> Option<TeammateStatus> {
        self.inner.roster.get(name).await.map(|r| r.status)
    }

    /// The roster record of `name`, if it is a teammate.
    pub async fn record_of(&self, name: &AgentName) -> Option<TeammateRecord> {
        self.inner.roster.get(name).await
    }

    /// Wakes every teammate whose mailbox may hold work (on start, after recovery).
    pub async fn wake_all(&self) {
        // Anything may have arrived: whoever waits on arrivals (a permission ask) looks too.
        self.inner.arrived();
        for record in self.inner.roster.all().await {
            self.inner.clone().wake_teammate(record.name).await;
        }
        self.inner.changed.notify_one();
    }

    /// Looks again at the mailboxes of the agents this process runs — the lead and the
    /// teammates it has runners for — as if each had been woken: a lost wake is made up (see
    /// `store/postgres/notify.rs`). Unlike [`Self::wake_all`], takes over no teammate.
    pub async fn look_again(&self) {
        self.wake(&AgentName::lead());
        for name in self.inner.loops.names() {
            self.inner.clone().wake_teammate(name).await;
        }
    }

    /// Whether any teammate loop is running.
    pub fn any_worker_running(&self) -> bool {
        self.inner.loops.any_running()
    }

    /// Whether any teammate is at work, here or — in a shared team — in another process: a
    /// loop of this process runs, or the roster says one is running, or a teammate that can
    /// still take messages has some waiting or claimed.
    pub async fn any_teammate_busy(&self) -> Result<bool, TeamError> {
        if self.inner.loops.any_running() {
            return Ok(true);
        }
        if !self.inner.placement.spans_processes() {
            return Ok(false);
        }
        self.roster_has_work().await
    }

    /// Whether a teammate has work left by the durable state, wherever it runs: its status
    /// `running`, or messages ready or in processing in its mailbox — what a run that was
    /// stopped left behind. (A loop that only looks at its mailbox at start is no work.)
    pub async fn teammates_have_work(&self) -> Result<bool, TeamError> {
        self.roster_has_work().await
    }

    /// Whether a teammate of the roster is `running` or has messages ready or in processing.
    async fn roster_has_work(&self) -> Result<bool, TeamError> {
        let mailbox = self.mailbox();
        for record in self.inner.roster.all().await {
            match record.status {
                TeammateStatus::Running => return Ok(true),
                TeammateStatus::Shutdown | TeammateStatus::Failed => {}
                TeammateStatus::Idle => {
                    let counts = mailbox.counts(&record.name).await?;
                    if counts.ready + counts.processing > 0 {
                        return Ok(true);
                    }
                }
            }
        }
        Ok(false)
    }

    /// Wakes `agent`: the lead's driver, or a teammate's loop (started here if this process
    /// may run it). What a wakeup from another process calls.
    pub fn wake(&self, agent: &AgentName) {
        self.inner.arrived();
        if agent.is_lead() {
            self.inner.changed.notify_one();
        } else {
            self.inner.wake_teammate_soon(agent);
            // A teammate's change may be what the lead waits for (another process's loop).
            self.inner.changed.notify_one();
        }
    }

    /// Whether other processes run teammates of this team too (a shared team).
    pub fn spans_processes(&self) -> bool {
        self.inner.placement.spans_processes()
    }

    /// Tells the driver to look again (e.g. after a test moved the clock).
    pub fn poke(&self) {
        self.inner.changed.notify_one();
    }

    /// Resolves when something changed since the last call (or a permit is stored).
    pub async fn changed(&self) {
        self.inner.changed.notified().await;
    }

    /// Cancels every loop at its next safe point, waits for them, and releases what they held
    /// (messages, and claims on the task board).
    pub async fn close(&self) {
        self.start_closing();
        loop {
            let handles = self.inner.loops.take_tasks();
            if handles.is_empty() {
                break;
            }
            for handle in handles {
                let _ = handle.await;
            }
        }
        let keeper = lock(&self.inner.keeper).take();
        if let Some(keeper) = keeper {
            let _ = keeper.await;
        }
        if let Some(work) = self.inner.board.get() {
            work.claims().release_all(None, "the run closed").await;
        }
    }

    /// Lets idle teammates pull work from `work`'s board (SPEC §12) and keeps this process's
    /// leases: renewed while held, and expired ones returned (each reported to `expired`,
    /// then the teammates it fits are woken). Once per runtime; later calls are ignored.
    pub fn attach_board(&self, work: Arc<BoardWork>, expired: ExpiredSink) {
        if self.inner.board.set(work.clone()).is_err() {
            return;
        }
        let handle = self.handle();
        let on_expired: ExpiredSink = Arc::new(move |task| {
            let reported = expired(task);
            let team = handle.upgrade();
            Box::pin(async move {
                reported.await;
                if let Ok(team) = team {
                    team.board_changed().await;
                }
            })
        });
        let keeper = tokio::spawn(keep_leases(
            work,
            on_expired,
            self.spans_processes(),
            self.inner.closing.clone(),
        ));
        *lock(&self.inner.keeper) = Some(keeper);
    }

    /// Whether the run should wait for a task held by a claim this process does not hold (left
    /// by a run that died, or worked on elsewhere): its holder completes it, or its lease runs
    /// out and a teammate takes it. Only while some teammate can still take work.
    pub async fn awaiting_tasks(&self) -> bool {
        let Some(work) = self.inner.board.get() else {
            return false;
        };
        let someone_can_work = self.inner.roster.all().await.iter().any(|record| {
            !matches!(
                record.status,
                TeammateStatus::Shutdown | TeammateStatus::Failed
            )
        });
        someone_can_work && work.held_elsewhere().await
    }

    /// The board changed (a task was created, completed, released or returned): wakes every
    /// teammate that some claimable task fits. A running teammate looks again before it idles.
    pub async fn board_changed(&self) {
        let Some(work) = self.inner.board.get() else {
            return;
        };
        work.note_change();
        let roster: Vec<TeammateRecord> = self
            .inner
            .roster
            .all()
            .await
            .into_iter()
            .filter(|record| {
                !matches!(
                    record.status,
                    TeammateStatus::Shutdown | TeammateStatus::Failed
                )
            })
            .collect();
        let agents: Vec<(&AgentName, Vec<String>)> = roster
            .iter()
            .map(|record| (&record.name, self.inner.skills_of(record)))
            .collect();
        for name in work.who_has_work(agents).await {
            self.inner.clone().wake_teammate(name.clone()).await;
        }
    }

    /// Cancels every loop at its next safe point, without waiting (an interrupt does this
    /// first, so that no teammate starts another model call); `close` still waits and releases.
    pub fn start_closing(&self) {
        self.inner.closing.cancel();
    }

    /// Fired when the team starts closing, for what must stop waiting then (a database's
    /// bound on its calls).
    pub fn closing_token(&self) -> CancellationToken {
        self.inner.closing.clone()
    }

    pub fn is_closing(&self) -> bool {
        self.inner.closing.is_cancelled()
    }

    /// Teammates that failed since the last call, with their reasons.
    pub async fn take_failures(&self) -> Vec<(AgentName, String)> {
        let mut failures = std::mem::take(&mut *lock(&self.inner.failures));
        if self.inner.placement.spans_processes() {
            let records = self.inner.roster.all().await;
            let mut told = lock(&self.inner.failures_told);
            for record in records {
                if record.status != TeammateStatus::Failed {
                    told.remove(&record.name);
                    continue;
                }
                if told.insert(record.name.clone())
                    && !failures.iter().any(|(n, _)| n == &record.name)
                {
                    failures.push((
                        record.name.clone(),
                        record
                            .detail
                            .clone()
                            .unwrap_or_else(|| "see troupe status".into()),
                    ));
                }
            }
        }
        failures
    }

    /// Registers a teammate and delivers its first task. The name must be a slug and not
    /// `lead`. A name whose teammate is running or idle is refused (`teammate_exists`); a name
    /// whose teammate shut down or failed is spawned again as a new teammate: the old
    /// conversation is set aside (`<name>.<n>.jsonl`), messages still waiting for the old
    /// teammate are quarantined, and the new role and plan rule are recorded.
    ///
    /// What the `spawn_teammate` tool runs. When the earlier teammate shut down or failed a
    /// moment ago, its loop may still be finishing (acking its last message): this waits for
    /// it rather than refuse.
    pub async fn spawn(
        &self,
        name: &AgentName,
        role: &str,
        prompt: &str,
        plan_required: bool,
    ) -> Result<Spawned, TeamError> {
        self.spawn_defined(name, role, prompt, plan_required, None, Isolation::None)
            .await
    }

    /// [`Self::spawn`] of a teammate built from the agent definition `definition` (recorded in
    /// its roster entry; the factory applies it), working where `isolation` says (recorded too:
    /// the factory makes or reattaches its worktree).
    pub async fn spawn_defined(
        &self,
        name: &AgentName,
        role: &str,
        prompt: &str,
        plan_required: bool,
        definition: Option<AgentName>,
        isolation: Isolation,
    ) -> Result<Spawned, TeamError> {
        check_spawn_arguments(name, role, prompt)?;
        let inner = &self.inner;
        let spawned = loop {
            if inner.closing.is_cancelled() {
                return Err(TeamError::Closed);
            }
            // Registered before looking, so a loop that ends in between still wakes us.
            let ended = inner.loops.ended_signal().notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            match inner
                .try_spawn(name, role, plan_required, definition.clone(), isolation)
                .await?
            {
                Some(spawned) => break spawned,
                None => {
                    tokio::select! {
                        () = ended => {}
                        () = inner.closing.cancelled() => {}
                    }
                }
            }
        };
        inner.deliver_first_task(name, role, prompt).await?;
        Ok(spawned)
    }

    /// [`Self::spawn`] without waiting and without `plan_required`: refuses with
    /// `teammate_state` while an earlier teammate's loop is still finishing.
    pub async fn spawn_teammate(
        &self,
        name: &AgentName,
        role: &str,
        prompt: &str,
    ) -> Result<Spawned, TeamError> {
        check_spawn_arguments(name, role, prompt)?;
        let inner = &self.inner;
        if inner.closing.is_cancelled() {
            return Err(TeamError::Closed);
        }
        let Some(spawned) = inner
            .try_spawn(name, role, false, None, Isolation::None)
            .await?
        else {
            return Err(TeamError::TeammateState {
                name: name.clone(),
                status: "stopping",
                why: "its loop is still finishing; try again".into(),
            });
        };
        inner.deliver_first_task(name, role, prompt).await?;
        Ok(spawned)
    }

    /// Whether `name` may receive a new ordinary message or request.
    pub async fn check_reachable(&self, name: &AgentName) -> Result<TeammateRecord, TeamError> {
        let record = self
            .inner
            .roster
            .get(name)
            .await
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
}

impl TeamInner {
    fn handle(self: &Arc<Self>) -> TeamHandle {
        TeamHandle(Arc::downgrade(self))
    }

    async fn deliver_first_task(
        &self,
        name: &AgentName,
        role: &str,
        prompt: &str,
    ) -> Result<(), TeamError> {
        self.observer.update(&TeamUpdate::Spawned {
            name: name.clone(),
            role: role.to_owned(),
        });
        self.postman
            .send_ordinary(
                &AgentName::lead(),
                name,
                troupe_wire::OrdinaryKind::Task,
                prompt,
            )
            .await?;
        Ok(())
    }

    /// One attempt at [`TeamRuntime::spawn`]; `None` when the old teammate's loop is still
    /// finishing (it shut down or failed a moment ago) and the caller must wait for it.
    ///
    /// Spawns are serialised by the `spawning` lock. The runner is built first; the new slot is
    /// installed (unless the old loop still runs), then the roster changed (awaited, no lock
    /// held): a wake in between finds no runnable teammate of the name and starts nothing, so
    /// no wake can start a loop for the name with the old record, and an old loop can never
    /// touch the new teammate's status or runner. A roster change that fails takes the slot out
    /// again.
    async fn try_spawn(
        self: &Arc<Self>,
        name: &AgentName,
        role: &str,
        plan_required: bool,
        definition: Option<AgentName>,
        isolation: Isolation,
    ) -> Result<Option<Spawned>, TeamError> {
        let _spawning = self.spawning.lock().await;
        let earlier = self.roster.get(name).await;
        if let Some(earlier) = &earlier {
            match earlier.status {
                TeammateStatus::Running | TeammateStatus::Idle => {
                    return Err(TeamError::TeammateExists(name.clone()))
                }
                TeammateStatus::Shutdown | TeammateStatus::Failed => {
                    if self.loops.is_running(name) {
                        return Ok(None);
                    }
                }
            }
        }
        let plan_required = plan_required || self.placement.records_plan_rule();
        let record = TeammateRecord {
            name: name.clone(),
            role: role.to_owned(),
            status: TeammateStatus::Idle,
            detail: None,
            updated_at_utc: self.postman.clock().now(),
            plan_required,
            earlier_plan: self
                .protocol
                .store()
                .latest_plan_of(name)
                .await?
                .map(|plan| plan.id()),
            definition,
            isolation,
        };
        let quarantined = match &earlier {
            Some(earlier) => self.quarantine_leftovers(earlier).await?,
            None => 0,
        };
        let earlier_transcript = self.transcripts.set_aside(name).await?;
        let runner = self.factory.build(self.handle(), &record).await?;
        // The slot first, the roster after (awaited, with no lock held): a wake in between
        // finds no runnable teammate of the name (none yet, or the stopped one) and starts
        // nothing, and once the roster has the teammate its slot is there.
        if self
            .loops
            .install(name, runner, || Ok::<_, TeamError>(true))?
            .is_none()
        {
            return Ok(None);
        }
        let registered = match &earlier {
            Some(_) => self.roster.replace_stopped(record.clone()).await,
            None => self.roster.add(record.clone()).await,
        };
        match registered {
            Ok(true) => {}
            Ok(false) => {
                self.loops.drop_idle(name);
                return Err(TeamError::TeammateExists(name.clone()));
            }
            Err(e) => {
                self.loops.drop_idle(name);
                return Err(e.into());
            }
        }
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
    async fn quarantine_leftovers(&self, earlier: &TeammateRecord) -> Result<usize, TeamError> {
        let mailbox = self.postman.mailbox();
        let reason = format!(
            "left for the earlier teammate {} ({}, role: {}) when a new teammate was spawned \
             under its name",
            earlier.name,
            earlier.status.as_str(),
            earlier.role
        );
        let mut moved = 0;
        while let Some(message) = mailbox.claim(&earlier.name).await? {
            if let Err(e) = triage::quarantine_and_report(
                mailbox.as_ref(),
                self.observer.as_ref(),
                &earlier.name,
                &message,
                &reason,
            )
            .await
            {
                // Back to ready/, where it was: the spawn fails and nothing is lost.
                let _ = mailbox.release(&earlier.name, message.id()).await;
                return Err(e.into());
            }
            moved += 1;
        }
        Ok(moved)
    }

    /// The skills `record` brings to the board: the words of its role and of its agent
    /// definition's name and description.
    fn skills_of(&self, record: &TeammateRecord) -> Vec<String> {
        let definition = record
            .definition
            .as_ref()
            .and_then(|d| self.factory.definition(d));
        let mut texts: Vec<&str> = vec![record.role.as_str()];
        if let Some(definition) = &definition {
            texts.push(definition.name.as_str());
            texts.push(definition.description.as_str());
        }
        crate::store::tasks::skills_of(&texts)
    }

    /// Whether `record`'s plan gate lets it take work from the board now (SPEC §12: the gate
    /// applies before any claim): the same rule that denies its `claim_task`.
    async fn gate_allows_claims(&self, record: &TeammateRecord) -> bool {
        let gate = PlanGateRule::new(self.protocol.store().clone(), self.postman.clock().clone())
            .starting(self.factory.gate_start(record))
            .ignoring(record.earlier_plan);
        let arguments = serde_json::Value::Object(serde_json::Map::new());
        let verdict = crate::permissions::PermissionRule::evaluate(
            &gate,
            &crate::permissions::PermissionRequest {
                agent: &record.name,
                tool: "claim_task",
                effect: crate::permissions::Effect::Write,
                scope: crate::tools::Scope::TroupeState,
                arguments: &arguments,
                sandbox: None,
                preview: None,
                protected: None,
            },
        )
        .await;
        verdict.is_none_or(|v| v.decision != crate::permissions::Decision::Deny)
    }

    /// Marks a teammate failed and queues the reason for the lead.
    async fn fail(&self, name: &AgentName, reason: String) {
        lock(&self.failures).push((name.clone(), reason.clone()));
        self.set_status(name, TeammateStatus::Failed, Some(reason))
            .await;
    }

    async fn set_status(&self, name: &AgentName, status: TeammateStatus, detail: Option<String>) {
        match self.roster.set_status(name, status, detail.clone()).await {
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

    /// Returns to the board the task claims of the teammate `name` that this process just
    /// took over (SPEC §12): its earlier loop died or lost the lease, so the token of each
    /// claim it made died with it, and the tasks would otherwise sit `in_progress` until the
    /// board's lease ran out. Returned rather than carried over: a claim's token stays in the
    /// process that claimed (`HeldClaims`), and a returned task goes the one way an expired
    /// one goes — the board change wakes whom it fits, this teammate first among them.
    async fn return_earlier_claims(&self, name: &AgentName) {
        let Some(work) = self.board.get() else {
            return;
        };
        let reason = format!(
            "{name} was taken over by another worker; the claim of its earlier worker came back \
             to the board"
        );
        for task in work.return_claims_of(name, &reason).await {
            tracing::info!("{name}'s claim on task {} came back to the board", task.id);
        }
    }

    /// Counts an arrival in some mailbox (see [`TeamInner::arrivals`]).
    fn arrived(&self) {
        self.arrivals.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// [`Self::wake_teammate`] from a sync caller (the postman's waker): run here as far as it
    /// goes without waiting — all of it in a team on files, whose roster and placement answer
    /// at once — and finished on a task of its own (awaited at close) when it must wait on a
    /// database.
    fn wake_teammate_soon(self: &Arc<Self>, name: &AgentName) {
        let mut waking = Box::pin(self.clone().wake_teammate(name.clone()));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if std::future::Future::poll(waking.as_mut(), &mut cx).is_ready() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => self.loops.push_task(runtime.spawn(waking)),
            Err(_) => tracing::warn!("{name} could not be woken: no async runtime runs here"),
        }
    }

    async fn wake_teammate(self: Arc<Self>, name: AgentName) {
        let name = &name;
        if self.closing.is_cancelled() {
            return;
        }
        let Some(record) = self.roster.get(name).await else {
            return;
        };
        if matches!(
            record.status,
            TeammateStatus::Shutdown | TeammateStatus::Failed
        ) {
            return;
        }
        match self.placement.claim(name).await {
            Claim::Here => {}
            // Newly here: a runner this process kept from an earlier lease may be stale
            // (another worker ran the teammate meanwhile); the next one is built from the
            // durable transcript.
            Claim::Fresh => {
                self.loops.drop_idle(name);
                self.return_earlier_claims(name).await;
            }
            Claim::Elsewhere => return,
        }
        let runner = match self.loops.start(name) {
            Start::Started(runner) => runner,
            Start::AlreadyRunning => return,
            Start::NoRunner => {
                // A teammate from an earlier run: a fresh runner for the same name, role and
                // plan rule, continuing its transcript — built outside the slots lock.
                match self.factory.build(self.handle(), &record).await {
                    Ok(runner) => self.loops.adopt(name, runner),
                    Err(e) => {
                        self.fail(name, e.to_string()).await;
                        return;
                    }
                }
                match self.loops.start(name) {
                    Start::Started(runner) => runner,
                    Start::AlreadyRunning | Start::NoRunner => return,
                }
            }
        };
        // Not marked running here: the loop marks it once it finds work, so a wake (a
        // takeover look, a board change) that finds nothing changes no status.
        let context = TeammateLoop {
            team: self.clone(),
            name: name.clone(),
        };
        let handle = tokio::spawn(teammate::run(context, runner));
        self.loops.push_task(handle);
    }
}

/// The name must not be `lead`, `user` or `troupe`; role and first task must not be blank.
fn check_spawn_arguments(name: &AgentName, role: &str, prompt: &str) -> Result<(), TeamError> {
    if name.is_lead() {
        return Err(TeamError::TeammateExists(name.clone()));
    }
    if name.is_reserved() {
        return Err(TeamError::Invalid(format!(
            "the name {name} is reserved (user is a person sending messages, troupe the run \
             itself); pick another name"
        )));
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
        inner.arrived();
        if agent.is_lead() {
            inner.changed.notify_one();
        } else {
            inner.wake_teammate_soon(agent);
        }
    }
}
