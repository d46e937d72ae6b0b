//! A team's lead process: [`build_team`] and the [`Team`] it builds.
//!
//! In dependency order: the run's start (run lock, stores, event stream, what a dead run left
//! half done, the base policy, background jobs: `start::start`); cron; the team runtime with
//! its teammate factory (`factory::team_runtime`); the lead (`lead::lead`); the mailbox watch.
//! [`Team::close`] runs the run's close (`start::close`) in reverse.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::agent::usage::RunUsage;
use crate::agent::Runner;
use crate::cron::store::CronStore;
use crate::cron::{CronRuntime, CronWakeup};
use crate::jobs::{JobCompletion, JobSupervisor};
use crate::store::events::EventLog;
use crate::store::mailbox::MailboxStore;
use crate::store::protocol::ProtocolStore;
use crate::team::watch;
use crate::team::{Driver, ExternalEvents, TeamRuntime};

use super::factory::{team_runtime, Crew};
use super::lead::lead;
use super::options::{BootstrapError, StoreChoice, TeamSettings};
use super::start::{close, end_recording, start, Held, Start};

/// A built team, ready to drive.
pub struct Team {
    pub runtime: TeamRuntime,
    pub lead: Runner,
    pub mailbox: Arc<dyn MailboxStore>,
    pub protocol: Arc<dyn ProtocolStore>,
    /// The team's task board (changes made through it wake the teammates they concern).
    pub board: Arc<dyn crate::store::tasks::TaskBoard>,
    /// How many messages recovery moved back to ready at start.
    pub recovered: usize,
    /// Where the lead's earlier conversation was kept, when this run started a new session.
    pub earlier_session: Option<PathBuf>,
    /// The tokens this run's agents have used.
    pub usage: Arc<RunUsage>,
    /// This run's event stream; the caller records `run_ended` in it once the team is closed.
    pub events: Arc<EventLog>,
    /// This run's traces, when on: the caller closes them once the team is closed
    /// ([`Telemetry::close`](crate::telemetry::Telemetry::close)) and reports what was dropped.
    pub telemetry: Option<Arc<crate::telemetry::Telemetry>>,
    pub cron: CronRuntime,
    pub jobs: Arc<JobSupervisor>,
    job_completions: Option<UnboundedReceiver<JobCompletion>>,
    cron_wakeups: Option<UnboundedReceiver<CronWakeup>>,
    task_returns: Option<UnboundedReceiver<crate::store::tasks::Task>>,
    /// The watch, the MCP servers, a shared team's parts and the run lock.
    held: Held,
    /// How the lead's events are grouped into turns (a replay's models pace them).
    pacing: Option<Arc<dyn crate::team::EventPacing>>,
    /// The run's recording, ended at close with the workspace's final tree.
    recorder: Option<Arc<crate::replay::Recorder>>,
    workspace: PathBuf,
    clock: Arc<dyn crate::clock::Clock>,
    /// `[retention]`: with `auto`, gc runs at close.
    retention: crate::store::retention::Policy,
}

impl Team {
    /// The driver of this team's run; it takes the job and cron event channels (once).
    pub fn driver(&mut self) -> Driver {
        let mut driver = Driver::with_external(
            self.runtime.clone(),
            ExternalEvents {
                jobs: Some(self.jobs.clone()),
                job_completions: self.job_completions.take(),
                cron_wakeups: self.cron_wakeups.take(),
                task_returns: self.task_returns.take(),
            },
        );
        driver.pace_with(self.pacing.clone());
        driver
    }

    /// Where this run's recording is, when it is recorded.
    pub fn recording(&self) -> Option<PathBuf> {
        self.recorder.as_ref().map(|r| r.path())
    }

    /// Closes in reverse dependency order (SPEC §4.4): teammates (workers cancelled at a safe
    /// point, in-flight messages released), then cron, then background jobs (whole process
    /// groups terminated, recorded as cancelled), then the MCP servers (sessions closed, stdio
    /// servers' process groups killed); then the watch and the run lock.
    /// With `[retention] auto`, gc runs last, still under the run lock (the event stream stays
    /// open for the caller's `run_ended`, so its open segment is not rolled here). Once the
    /// team is dropped, the heap the run freed is handed back to the system (`heap.rs`), so a
    /// process that runs run after run stays the size of one.
    pub async fn close(mut self) {
        close(&self.runtime, Some(&self.cron), &self.jobs, &mut self.held).await;
        end_recording(self.recorder.as_ref(), &self.workspace, self.clock.as_ref()).await;
        if self.retention.auto {
            self.held
                .auto_gc(&self.workspace, &self.retention, self.clock.now())
                .await;
        }
        drop(self);
        super::heap::give_back_freed();
    }
}

/// Builds the whole team on a workspace. Fails with `Busy` if another run holds it.
pub async fn build_team(mut settings: TeamSettings) -> Result<Team, BootstrapError> {
    let (start, job_completions) = start(&mut settings, "lead").await?;
    let (cron, cron_wakeups) = open_cron(&start, &settings).await?;
    let crew = team_runtime(&start, &settings, None).await?;
    let Start {
        layout,
        run_lock,
        events,
        telemetry,
        mut stores,
        base_policy,
        jobs,
        requests,
        recorder,
    } = start;
    super::approvals::bind(
        &requests,
        &settings,
        &crew.runtime,
        &events,
        crew.kit.command_hooks(),
    );
    let (lead, earlier_session) =
        lead(&settings, &stores, base_policy, &jobs, &cron, &crew).await?;
    let Crew {
        kit,
        runtime,
        task_returns,
        ..
    } = crew;

    let watch = if settings.watch {
        // The lead's folders exist before the watch starts: the answer to the lead's first
        // permission ask can be the first message it ever gets, and a file written into a
        // folder made after the watch started may be missed by it. (Recovery, here of nothing:
        // the start already recovered every mailbox that existed.)
        stores
            .mailbox
            .recover(&troupe_wire::AgentName::lead())
            .await
            .map_err(crate::team::TeamError::from)?;
        Some(watch::start(&layout, runtime.postman().clone())?)
    } else {
        None
    };
    // A lead whose process runs teammates (a shared team's default) takes over, as a worker
    // does, those whose lease runs out: one still leased at the start by an earlier run that
    // could not free it (killed, its close cut short) would otherwise never run here, and the
    // run would wait for it for ever.
    let takeover =
        matches!(&settings.store, StoreChoice::Postgres(options) if options.local_workers);
    let held = Held::running(
        &runtime,
        stores.pg.take().map(|on| on.parts),
        takeover,
        watch,
        settings.mcp.clone(),
        run_lock,
    )
    .await;
    Ok(Team {
        runtime,
        lead,
        mailbox: stores.mailbox,
        protocol: stores.protocol,
        board: stores.observed_board,
        recovered: stores.recovered,
        earlier_session,
        usage: kit.usage.clone(),
        events,
        telemetry,
        cron,
        jobs,
        job_completions: Some(job_completions),
        cron_wakeups: Some(cron_wakeups),
        task_returns: Some(task_returns),
        held,
        pacing: settings.models.pacing(),
        recorder,
        workspace: settings.workspace.clone(),
        clock: settings.clock.clone(),
        retention: settings.settings.retention.clone(),
    })
}

/// The lead's cron jobs, reporting to the run's event stream and started; their wakeups
/// arrive on the receiver. A shared team's lead keeps its durable jobs in the database:
/// a lead started on another host goes on with them.
async fn open_cron(
    start: &Start,
    settings: &TeamSettings,
) -> Result<(CronRuntime, UnboundedReceiver<CronWakeup>), BootstrapError> {
    let (cron_tx, cron_wakeups) = tokio::sync::mpsc::unbounded_channel();
    let cron_store = match &start.stores.pg {
        Some(on) => CronStore::on(on.parts.cron_document()),
        None => CronStore::new(&start.layout),
    };
    let cron = CronRuntime::open_store(
        cron_store,
        settings.clock.clone(),
        settings.ids.clone(),
        cron_tx,
    )
    .await?;
    cron.report_to(start.events.clone());
    cron.start()?;
    Ok((cron, cron_wakeups))
}
