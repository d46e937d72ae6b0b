//! The run's start and close, one each for a team's lead and a worker of a shared team.
//!
//! [`start`] is the prologue both run: the workspace's run lock; the shared team joined
//! (when the stores are in PostgreSQL); the event stream (`observe.rs`), which the run's
//! observers and approvals then report into; the stores, with what a dead run left claimed put
//! back; what that run left half done finished (recorded answers delivered, orphan jobs
//! settled); the base permission policy; the background jobs. [`close`] is the close both run,
//! in reverse: teammates, cron (a lead's), background jobs, MCP servers, the mailbox watch, the
//! shared team's wakeups and registration; the run lock goes last, with the run.

use std::sync::Arc;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::agent::transcript::{FileTranscripts, Transcripts};
use crate::clock::Clock;
use crate::cron::CronRuntime;
use crate::jobs::{JobCompletion, JobSupervisor};
use crate::layout::Layout;
use crate::mcp::McpServers;
use crate::permissions::{JsonlAuditSink, PermissionPolicy};
use crate::store::events::observed::{ObservedMailbox, ObservedProtocol, ObservedResponseAck};
use crate::store::events::observed_board::ObservedBoard;
use crate::store::events::EventLog;
use crate::store::lock::LockGuard;
use crate::store::mailbox::{FileMailboxStore, MailboxStore};
use crate::store::postgres::PgResponseAck;
use crate::store::protocol::{JsonProtocolStore, ProtocolStore};
use crate::store::response_ack::ResponseAck;
use crate::store::tasks::{FileTaskBoard, HeldClaims, TaskBoard};
use crate::store::IoError;
use crate::team::watch::MailboxWatch;
use crate::team::{Postman, ProtocolRuntime, TeamRuntime};
use crate::telemetry::Telemetry;

use super::observe::open_events;
use super::options::{BootstrapError, StoreChoice, TeamSettings};
use super::shared::{self, PgParts, WakeGuard};

/// What a run has opened before its team runtime is built: the same for a lead and a worker.
pub(super) struct Start {
    pub(super) layout: Layout,
    pub(super) run_lock: LockGuard,
    /// This run's event stream.
    pub(super) events: Arc<EventLog>,
    /// This run's traces, when on; the caller closes them after the team.
    pub(super) telemetry: Option<Arc<Telemetry>>,
    pub(super) stores: Stores,
    /// The base policy; each teammate's adds its own plan gate.
    pub(super) base_policy: PermissionPolicy,
    pub(super) jobs: Arc<JobSupervisor>,
    /// The run's approval provider as durable requests, bound once the team is built.
    pub(super) requests: Arc<crate::approvals::RequestedApproval>,
    /// This run's recording of its model calls (a lead's, on files), ended at close.
    pub(super) recorder: Option<Arc<crate::replay::Recorder>>,
}

/// The prologue of a run on `settings`, as `role` (`lead`, `worker`) of its team: the run
/// lock (`Busy` when another run holds it), the shared team joined, the event stream
/// (`settings`' observers and approvals now report into it), the stores, what a dead run left
/// half done, the base policy and the background jobs, whose completions arrive on the receiver.
pub(super) async fn start(
    settings: &mut TeamSettings,
    role: &str,
) -> Result<(Start, UnboundedReceiver<JobCompletion>), BootstrapError> {
    let layout = Layout::new(&settings.workspace);
    let run_lock = super::run_lock::take_run_lock(&layout, settings.clock.as_ref())?;
    roll_large_events(&layout, &run_lock);
    let pg = open_shared(settings, role).await?;
    let requests = super::approvals::wrap(settings, role);
    let (events, telemetry) = open_events(&layout, settings, pg.as_ref(), role).await?;
    let recorder = if role == "lead" {
        let copy = shared::copies::recordings(pg.as_ref().map(|p| &p.store));
        record(&layout, settings, &events, copy).await
    } else {
        None
    };
    let stores = open_stores(&layout, settings, &events, pg).await?;
    finish_earlier_run(&layout, settings, &stores).await?;
    let base_policy = PermissionPolicy::from_settings(
        &settings.settings.rules,
        &settings.workspace,
        settings.approval.clone(),
        stores.audit.clone(),
    );
    let (jobs, job_completions) = job_supervisor(&layout, settings, &events, &stores);
    let start = Start {
        layout,
        run_lock,
        events,
        telemetry,
        stores,
        base_policy,
        jobs,
        requests,
        recorder,
    };
    Ok((start, job_completions))
}

/// Starts the run's recording and puts it between the team and its models: its start line
/// (prompt, settings digest, git starting point) now. A recording that cannot be started is
/// said once and the run goes on without it.
async fn record(
    layout: &Layout,
    settings: &mut TeamSettings,
    events: &EventLog,
    copy: crate::store::team_copy::CopyTo<crate::store::recordings::RecordingLine>,
) -> Option<Arc<crate::replay::Recorder>> {
    use crate::replay::{record, start_point, Recorder, RecordingModels};
    let workspace = std::fs::canonicalize(&settings.workspace)
        .unwrap_or_else(|_| settings.workspace.clone())
        .to_string_lossy()
        .into_owned();
    let start = record::Start {
        version: record::VERSION,
        run: events.run_id().to_owned(),
        at: settings.clock.now().to_string(),
        prompt: settings.events.prompt.clone(),
        workspace,
        settings: start_point::settings_digest(&settings.workspace),
        git: start_point::git_start(&settings.workspace),
    };
    match Recorder::open(layout, start, settings.redactor.clone(), copy).await {
        Ok(recorder) => {
            settings.models = Arc::new(RecordingModels {
                inner: settings.models.clone(),
                recorder: recorder.clone(),
            });
            Some(recorder)
        }
        Err(e) => {
            tracing::warn!(error = %e, "the run is not recorded");
            None
        }
    }
}

/// Ends the run's recording with the digest of the workspace's files (on the blocking pool).
pub(super) async fn end_recording(
    recorder: Option<&Arc<crate::replay::Recorder>>,
    settings_workspace: &std::path::Path,
    clock: &dyn Clock,
) {
    let Some(recorder) = recorder else {
        return;
    };
    let root = settings_workspace.to_owned();
    let tree = crate::sync::offload("digesting the workspace", move || {
        crate::replay::start_point::tree_digest(&root)
    })
    .await
    .ok()
    .flatten();
    recorder
        .finish(crate::replay::record::End {
            at: clock.now().to_string(),
            files: tree.as_ref().map_or(0, |(_, files)| *files),
            tree: tree.map(|(digest, _)| digest),
        })
        .await;
}

/// The stores of a run, opened once; recovery has put claimed messages back to `ready/`.
pub(super) struct Stores {
    pub(super) mailbox: Arc<dyn MailboxStore>,
    pub(super) protocol: Arc<dyn ProtocolStore>,
    pub(super) audit: Arc<JsonlAuditSink>,
    /// The board as reported to the event stream; the team listens to it for changes.
    pub(super) observed_board: Arc<ObservedBoard>,
    /// The claims this process holds on the board, with their tokens.
    pub(super) claims: Arc<HeldClaims>,
    /// How long a claim lasts unless renewed.
    pub(super) task_lease: std::time::Duration,
    /// How many messages recovery moved back to ready.
    pub(super) recovered: usize,
    pub(super) transcripts: Arc<dyn Transcripts>,
    /// The database parts of a shared team.
    pub(super) pg: Option<OnDatabase>,
}

impl Stores {
    /// Where teammates run: here, or — in a team across processes — under leases, in this
    /// process only if it runs teammates (`local_workers` overrides the settings: a worker
    /// always does).
    pub(super) fn placement(
        &self,
        settings: &TeamSettings,
        local_workers: Option<bool>,
    ) -> Arc<dyn crate::team::Placement> {
        let (StoreChoice::Postgres(options), Some(on)) = (&settings.store, &self.pg) else {
            return Arc::new(crate::team::Here);
        };
        Arc::new(crate::team::UnderLease {
            roster: on.parts.roster.clone(),
            local_workers: local_workers.unwrap_or(options.local_workers),
            require_plans: settings.require_plans,
            response_ack: on.response_ack.clone(),
        })
    }
}

/// What a shared team's run holds of its database besides its stores.
pub(super) struct OnDatabase {
    pub(super) parts: PgParts,
    /// The one-transaction consume + ack (reporting to the event stream).
    pub(super) response_ack: Arc<dyn ResponseAck>,
}

/// Joins the shared team of `settings` as `role` (`lead`, `worker`), if the team is one.
async fn open_shared(
    settings: &TeamSettings,
    role: &str,
) -> Result<Option<PgParts>, BootstrapError> {
    match &settings.store {
        StoreChoice::Files => Ok(None),
        StoreChoice::Postgres(options) => Ok(Some(shared::open(options, role).await?)),
    }
}

/// Opens the stores (on `pg` for a shared team); messages a dead run left in `processing/` go
/// back to `ready/`. The mailbox and the protocol store report their transitions to `events`.
async fn open_stores(
    layout: &Layout,
    settings: &TeamSettings,
    events: &Arc<EventLog>,
    pg: Option<PgParts>,
) -> Result<Stores, BootstrapError> {
    type Opened = (
        Arc<dyn MailboxStore>,
        Arc<dyn ProtocolStore>,
        Arc<dyn TaskBoard>,
        Arc<dyn Transcripts>,
        Option<OnDatabase>,
    );
    let (clock, ids) = (settings.clock.clone(), settings.ids.clone());
    let task_lease = task_lease(settings);
    let (mailbox, protocol, board, transcripts, pg): Opened = match pg {
        None => (
            Arc::new(FileMailboxStore::new(layout, clock.clone())),
            Arc::new(JsonProtocolStore::open(layout, clock.clone(), ids.clone())?),
            Arc::new(FileTaskBoard::new(layout, clock, ids).with_lease(task_lease)),
            Arc::new(FileTranscripts(layout.clone())),
            None,
        ),
        Some(parts) => {
            let mailbox = Arc::new(parts.mailbox(clock.clone()));
            let protocol = Arc::new(parts.protocol(clock.clone(), ids.clone()));
            let response_ack: Arc<dyn ResponseAck> = Arc::new(ObservedResponseAck::new(
                Arc::new(PgResponseAck::new(
                    parts.store.clone(),
                    mailbox.clone(),
                    protocol.clone(),
                )),
                events.clone(),
            ));
            (
                mailbox,
                protocol,
                Arc::new(parts.board(clock, ids).with_lease(task_lease)),
                parts.transcripts(),
                Some(OnDatabase {
                    parts,
                    response_ack,
                }),
            )
        }
    };
    // With files, the run lock says nobody else works on the mailboxes; in a database only
    // expired leases are released (see `PgMailboxStore::recover`).
    let mut recovered = 0;
    for agent in mailbox.agents().await? {
        recovered += mailbox.recover(&agent).await?.released.len();
    }
    let observed_board = Arc::new(ObservedBoard::new(board, events.clone()));
    let board: Arc<dyn TaskBoard> = observed_board.clone();
    Ok(Stores {
        claims: Arc::new(HeldClaims::new(board)),
        observed_board,
        task_lease,
        mailbox: Arc::new(ObservedMailbox::new(mailbox, events.clone())),
        protocol: Arc::new(ObservedProtocol::new(protocol, events.clone())),
        audit: Arc::new(
            JsonlAuditSink::open(layout, settings.clock.clone())?
                .with_copy(shared::copies::audit(pg.as_ref().map(|on| &on.parts.store))),
        ),
        recovered,
        transcripts,
        pg,
    })
}

/// How long a claim on the task board lasts unless renewed (SPEC §12).
fn task_lease(settings: &TeamSettings) -> std::time::Duration {
    settings.settings.tasks.lease
}

/// The open segment of the event stream past this is closed at a run's start.
const ROLL_EVENTS_ABOVE: u64 = 64 * 1024 * 1024;

/// Closes the event stream's open segment when it has grown large, before this run appends
/// to it (under the run lock, so no one else does): a stream of any age stays cheap to open
/// and follow, and `troupe gc` can drop its old parts. Nothing is removed here; a failure is
/// reported and the run goes on with the open segment as it is.
fn roll_large_events(layout: &Layout, run_lock: &LockGuard) {
    let large = std::fs::symlink_metadata(layout.events_log())
        .is_ok_and(|m| m.is_file() && m.len() > ROLL_EVENTS_ABOVE);
    if large {
        if let Err(e) = crate::store::events::segments::roll(layout, run_lock) {
            tracing::warn!("closing the event stream's open segment: {e}");
        }
    }
}

/// What a dead run left half done: answers recorded but not delivered are delivered (before any
/// worker runs: this postman wakes nobody), jobs still marked running are settled.
async fn finish_earlier_run(
    layout: &Layout,
    settings: &TeamSettings,
    stores: &Stores,
) -> Result<(), BootstrapError> {
    let postman = Arc::new(Postman::new(
        stores.mailbox.clone(),
        settings.clock.clone(),
        settings.ids.clone(),
        settings.team_observer.clone(),
    ));
    ProtocolRuntime::new(stores.protocol.clone(), postman, settings.request_ttl)
        .deliver_recorded_answers()
        .await?;
    // A run that died while staging an artifact left its temp file; nobody else removes it.
    let stale = crate::sync::blocking(|| crate::store::artifacts::remove_stale_temps(layout));
    if stale > 0 {
        tracing::info!("removed {stale} staged artifact file(s) an earlier process left");
    }
    let copy = shared::copies::jobs(stores.pg.as_ref().map(|on| &on.parts.store));
    let orphans = crate::jobs::orphans::settle_orphans(layout, &copy, settings.clock.now())
        .await
        .map_err(|e| {
            IoError::new(
                "settle",
                &layout.jobs_dir(),
                std::io::Error::other(e.to_string()),
            )
        })?;
    if !orphans.is_empty() {
        tracing::warn!(
            "{} background job(s) of an earlier run were still marked running",
            orphans.len()
        );
    }
    Ok(())
}

/// The background jobs of a process, reporting to its event stream; their completions arrive
/// on the receiver.
fn job_supervisor(
    layout: &Layout,
    settings: &TeamSettings,
    events: &Arc<EventLog>,
    stores: &Stores,
) -> (Arc<JobSupervisor>, UnboundedReceiver<JobCompletion>) {
    let (job_tx, job_completions) = tokio::sync::mpsc::unbounded_channel();
    let jobs = Arc::new(
        JobSupervisor::new(
            layout.clone(),
            settings.clock.clone(),
            settings.ids.clone(),
            job_tx,
        )
        .with_copy(shared::copies::jobs(
            stores.pg.as_ref().map(|on| &on.parts.store),
        ))
        .with_artifact_copy(shared::copies::artifacts(
            stores.pg.as_ref().map(|on| &on.parts.store),
        ))
        .with_redactor(settings.redactor.clone())
        .with_events(events.clone()),
    );
    (jobs, job_completions)
}

/// What a running lead or worker holds until it is closed, besides its team runtime and
/// background jobs (which its callers see).
pub(super) struct Held {
    watch: Option<MailboxWatch>,
    mcp: Arc<McpServers>,
    /// A shared team's database parts and its wakeups from other processes.
    shared: Option<(PgParts, WakeGuard)>,
    /// The shared team's store, kept past the close (which leaves the team): the gc of
    /// `[retention] auto` prunes the team's tables after it.
    shared_store: Option<crate::store::postgres::PgStore>,
    _run_lock: LockGuard,
}

impl Held {
    /// Sets `runtime` going: a shared team's wakeups from other processes are forwarded
    /// to it (with `takeover` — a worker, or a lead that runs teammates — the look for teammates
    /// whose lease ran out), then
    /// every agent is woken for what is already waiting.
    pub(super) async fn running(
        runtime: &TeamRuntime,
        pg: Option<PgParts>,
        takeover: bool,
        watch: Option<MailboxWatch>,
        mcp: Arc<McpServers>,
        run_lock: LockGuard,
    ) -> Self {
        let shared_store = pg.as_ref().map(|parts| parts.store.clone());
        let shared = pg.map(|parts| {
            let wakeups = parts.wakeups(runtime, takeover);
            // Once the team starts closing (Ctrl-C, SIGTERM, the run's end), its store calls
            // are bounded: a server that stopped answering never holds the close for long.
            let (closing, store) = (runtime.closing_token(), parts.store.clone());
            tokio::spawn(async move {
                closing.cancelled().await;
                store.closing();
            });
            (parts, wakeups)
        });
        runtime.wake_all().await;
        Self {
            watch,
            mcp,
            shared,
            shared_store,
            _run_lock: run_lock,
        }
    }

    /// `[retention] auto`: one gc pass at the run's close, under the run lock this run still
    /// holds. A failure is reported on the tracing output; the run's outcome stands.
    pub(super) async fn auto_gc(
        &self,
        workspace: &std::path::Path,
        policy: &crate::store::retention::Policy,
        now: troupe_wire::UtcTime,
    ) {
        let layout = Layout::new(workspace);
        let lock = crate::gc::RunLock::Held(&self._run_lock);
        // A shared team's lead prunes the team's tables too (in bounded batches). The close
        // has left the team by now (its parts are gone), so the store kept for this.
        let shared: std::sync::Arc<dyn crate::store::retention::Prune> = match &self.shared_store {
            Some(store) => std::sync::Arc::new(crate::store::postgres::retention::PgState::new(
                store.clone(),
            )),
            None => std::sync::Arc::new(crate::store::retention::NoSharedState),
        };
        match crate::gc::collect(&layout, shared, policy, now, false, lock).await {
            Ok(outcome) => {
                let removed = outcome.report.removed_total();
                tracing::info!(
                    items = removed.items,
                    bytes = removed.bytes,
                    "retention: gc at the run's close"
                );
            }
            Err(e) => tracing::warn!("retention: gc at the run's close failed: {e}"),
        }
    }
}

/// Closes a run in reverse dependency order (SPEC §4.4): teammates (workers cancelled at a safe
/// point, in-flight messages released; in a shared team their leases freed), then `cron`
/// (a lead's), then background jobs (whole process groups terminated, recorded as cancelled),
/// then the merged, clean worktrees of shut-down teammates, then the MCP servers (sessions closed, stdio servers' process groups killed); then the watch
/// and the shared team's wakeups, and this process leaves the team's workers. The run
/// lock is released when `held` is dropped, with the run. On a shared team every store
/// call of the close gets at most `CLOSING_WAIT` (3 s): a database that stopped answering
/// delays the close by about that much, and what could not be written is recovered by leases.
pub(super) async fn close(
    runtime: &TeamRuntime,
    cron: Option<&CronRuntime>,
    jobs: &JobSupervisor,
    held: &mut Held,
) {
    if let Some((parts, _)) = &held.shared {
        parts.store.closing();
    }
    runtime.close().await;
    if let Some(cron) = cron {
        cron.close().await;
    }
    jobs.close().await;
    // Nothing runs in the worktrees any more: those of shut-down teammates go if merged and
    // clean (git may take a moment: off the async threads).
    if let Some(worktrees) = runtime.worktrees() {
        let roster = runtime.roster().await;
        crate::sync::blocking(|| {
            crate::team::isolation::remove_finished_worktrees(worktrees, &roster)
        });
    }
    held.mcp.stop().await;
    held.watch.take();
    if let Some((parts, wakeups)) = held.shared.take() {
        drop(wakeups);
        parts.leave().await;
    }
}
