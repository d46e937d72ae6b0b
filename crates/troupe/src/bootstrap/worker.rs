//! A worker process of a shared team (`troupe worker`): [`build_worker`] and the
//! [`Worker`] it builds — the run's start and team runtime as a lead's, without cron, the lead
//! or the mailbox watch; it runs the teammates whose leases it holds.

use std::sync::Arc;

use crate::jobs::JobSupervisor;
use crate::store::events::EventLog;
use crate::team::TeamRuntime;

use super::factory::team_runtime;
use super::options::{BootstrapError, StoreChoice, TeamSettings};
use super::start::{close, start, Held, Start};

/// A worker process of a shared team (`troupe worker`): it runs the teammates whose leases it
/// holds, in its own workspace, until it is closed.
pub struct Worker {
    pub runtime: TeamRuntime,
    pub events: Arc<EventLog>,
    /// This worker's traces, when on: the caller closes them once the worker is closed.
    pub telemetry: Option<Arc<crate::telemetry::Telemetry>>,
    /// This worker's id in the team's registry (what `troupe status` shows).
    pub holder: String,
    jobs: Arc<JobSupervisor>,
    /// The MCP servers, the team's database parts and the run lock.
    held: Held,
}

impl Worker {
    /// Stops its teammates at a safe point (their claimed messages released, their leases
    /// freed for other workers), then its background jobs and MCP servers.
    pub async fn close(mut self) {
        close(&self.runtime, None, &self.jobs, &mut self.held).await;
    }
}

/// Builds a worker of the shared team `settings.store` names, on its own workspace (a checkout
/// of the same repository as the lead's): it takes that workspace's run lock, registers in the
/// team's worker registry, and leases teammates as their messages arrive or their earlier
/// worker's leases run out.
pub async fn build_worker(mut settings: TeamSettings) -> Result<Worker, BootstrapError> {
    if !matches!(settings.store, StoreChoice::Postgres(_)) {
        return Err(BootstrapError::Backend(crate::store::BackendError::new(
            "invalid_arguments",
            "troupe worker needs a shared store: --store postgres://… (or TROUPE_STORE_URL, or [store] url in troupe.toml)",
        )));
    }
    let (start, mut job_completions) = start(&mut settings, "worker").await?;
    // A teammate's background job ends in its worker; the lead is not in this process, so
    // completions are only recorded (in the job's record and the event stream).
    tokio::spawn(async move { while job_completions.recv().await.is_some() {} });
    // A worker runs teammates whatever the lead's --no-local-workers says.
    let crew = team_runtime(&start, &settings, Some(true)).await?;
    let Start {
        run_lock,
        events,
        telemetry,
        mut stores,
        jobs,
        requests,
        ..
    } = start;
    super::approvals::bind(
        &requests,
        &settings,
        &crew.runtime,
        &events,
        crew.kit.command_hooks(),
    );
    let runtime = crew.runtime;
    let parts = stores.pg.take().map(|on| on.parts);
    let holder = parts.as_ref().map(|p| p.holder.clone()).unwrap_or_default();
    let held = Held::running(&runtime, parts, true, None, settings.mcp.clone(), run_lock).await;
    Ok(Worker {
        runtime,
        events,
        telemetry,
        holder,
        jobs,
        held,
    })
}
