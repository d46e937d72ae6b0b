//! The team suite, with scripted models (model time excluded): a shutdown round trip (request →
//! teammate shut down → request approved at the lead) and a plan round trip (teammate submits →
//! lead reviews → response consumed by the teammate), the CPU used by 32 idle teammates over
//! 5 s, and the peak RSS with 32 teammates.

use std::path::Path;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::runtime::Handle;
use troupe::agent::NullObserver;
use troupe::bootstrap::{build_team, SameModel, Team, TeamSettings};
use troupe::clock::SystemClock;
use troupe::ids::RandomIds;
use troupe::model::{ModelResponse, ScriptedModel};
use troupe::permissions::AutoApproval;
use troupe::team::{TeamObserver, TeamUpdate};
use troupe::wire::{AgentName, MailboxMessage, ProtocolMessageKind, RequestKind, TeammateStatus};

use crate::result::BenchResult;
use crate::stats::{cpu_seconds, p50_us, peak_rss_bytes, round2};

/// Forwards every team update to the benchmark thread.
struct Updates(Mutex<Sender<TeamUpdate>>);

impl TeamObserver for Updates {
    fn update(&self, update: &TeamUpdate) {
        if let Ok(tx) = self.0.lock() {
            let _ = tx.send(update.clone());
        }
    }
}

fn wait_for(
    rx: &Receiver<TeamUpdate>,
    what: &str,
    mut done: impl FnMut(&TeamUpdate) -> bool,
) -> BenchResult<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(update) if done(&update) => return Ok(()),
            Ok(_) => {}
            Err(_) => return Err(format!("timed out waiting for {what}")),
        }
    }
}

fn is_status(update: &TeamUpdate, who: &AgentName, status: TeammateStatus) -> bool {
    matches!(update, TeamUpdate::Status { name, status: s, .. } if name == who && *s == status)
}

pub fn run(dir: &Path, rounds: usize) -> BenchResult<Value> {
    let workspace = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (tx, rx) = channel();
    let model = ScriptedModel::from_fn(|_| Ok(ModelResponse::text("ok", "bench")));
    let settings = bench_settings(
        workspace.path(),
        Arc::new(model),
        Arc::new(Updates(Mutex::new(tx))),
        4,
    );
    let _guard = runtime.enter();
    let rt = runtime.handle();
    let team = rt
        .block_on(build_team(settings))
        .map_err(|e| e.to_string())?;

    // 32 teammates, each idle after its first task.
    let names: Vec<AgentName> = (0..32)
        .map(|i| AgentName::parse(&format!("mate-{i}")).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    for name in &names {
        rt.block_on(team.runtime.spawn_teammate(name, "benchmark", "say ok"))
            .map_err(|e| e.to_string())?;
        wait_for(&rx, "a teammate to go idle", |u| {
            is_status(u, name, TeammateStatus::Idle)
        })?;
    }
    drain_lead(rt, &team)?;

    let cpu_before = cpu_seconds();
    std::thread::sleep(Duration::from_secs(5));
    let idle_cpu = cpu_seconds() - cpu_before;
    let rss_32 = peak_rss_bytes();

    let plan_samples = plan_round_trips(rt, &team, &rx, &names, rounds)?;
    let shutdown_samples = shutdown_round_trips(rt, &team, &rx, &names)?;
    runtime.block_on(team.close());
    let (mut plan, mut shutdown) = (plan_samples, shutdown_samples);
    Ok(json!({
        "suite": "team",
        "teammates": names.len(),
        "plan_rounds": plan.len(),
        "shutdown_rounds": shutdown.len(),
        "plan_round_trip_ms_p50": round2(p50_us(&mut plan) / 1000.0),
        "shutdown_round_trip_ms_p50": round2(p50_us(&mut shutdown) / 1000.0),
        "idle_cpu_s_32": (idle_cpu * 10_000.0).round() / 10_000.0,
        "peak_rss_bytes_32": rss_32,
    }))
}

/// A team on `workspace` whose agents all use `model`, approving everything, its sandbox off,
/// its updates to `observer`: the settings every team suite starts from.
pub fn bench_settings(
    workspace: &Path,
    model: Arc<dyn troupe::model::ModelClient>,
    observer: Arc<dyn TeamObserver>,
    max_turns: usize,
) -> TeamSettings {
    TeamSettings {
        workspace: workspace.to_path_buf(),
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
        models: Arc::new(SameModel(model)),
        approval: Arc::new(AutoApproval),
        run_observer: Arc::new(NullObserver),
        team_observer: observer,
        max_turns,
        request_ttl: Duration::from_secs(300),
        shell_timeout: Duration::from_secs(10),
        watch: false,
        require_plans: false,
        redactor: troupe::secrets::Redactor::default(),
        long_lived: Default::default(),
        events: Default::default(),
        settings: Default::default(),
        sandbox: troupe::bootstrap::SandboxOptions::off(workspace),
        mcp: Default::default(),
        store: Default::default(),
    }
}

/// Acks everything in the lead's mailbox (the teammates' results), as the driver would. The
/// store calls run on the team's runtime (`rt`), called from this thread.
fn drain_lead(rt: &Handle, team: &Team) -> BenchResult<()> {
    let lead = AgentName::lead();
    while let Some(m) = rt
        .block_on(team.mailbox.claim(&lead))
        .map_err(|e| e.to_string())?
    {
        rt.block_on(team.mailbox.ack(&lead, &m))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Claims the lead's messages until one of `kind` arrives; acks the others.
fn lead_claim(
    rt: &Handle,
    team: &Team,
    rx: &Receiver<TeamUpdate>,
    kind: ProtocolMessageKind,
) -> BenchResult<MailboxMessage> {
    let lead = AgentName::lead();
    loop {
        while let Some(m) = rt
            .block_on(team.mailbox.claim(&lead))
            .map_err(|e| e.to_string())?
        {
            if matches!(&m, MailboxMessage::Protocol(p) if p.kind() == kind) {
                return Ok(m);
            }
            rt.block_on(team.mailbox.ack(&lead, &m))
                .map_err(|e| e.to_string())?;
        }
        wait_for(
            rx,
            "a message for the lead",
            |u| matches!(u, TeamUpdate::Sent(m) if m.recipient().is_lead()),
        )?;
    }
}

fn plan_round_trips(
    rt: &Handle,
    team: &Team,
    rx: &Receiver<TeamUpdate>,
    names: &[AgentName],
    rounds: usize,
) -> BenchResult<Vec<Duration>> {
    let protocol = team.runtime.protocol();
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let mate = &names[i % names.len()];
        let start = Instant::now();
        // The teammate's submit_plan, then the lead's event handling and review_plan.
        let request = rt
            .block_on(protocol.open(
                RequestKind::PlanApproval,
                mate,
                &AgentName::lead(),
                "plan: benchmark",
            ))
            .map_err(|e| e.to_string())?;
        let message = lead_claim(rt, team, rx, ProtocolMessageKind::PlanApprovalRequest)?;
        rt.block_on(team.mailbox.ack(&AgentName::lead(), &message))
            .map_err(|e| e.to_string())?;
        let statuses = troupe::wire::TeamRoster {
            version: troupe::wire::TeamRoster::VERSION,
            teammates: rt.block_on(team.runtime.roster()),
        };
        rt.block_on(protocol.review_plan(&AgentName::lead(), request.id(), true, None, &statuses))
            .map_err(|e| e.to_string())?;
        // Done when the teammate has consumed the response.
        let id = request.id();
        wait_for(
            rx,
            "the plan response to be consumed",
            |u| matches!(u, TeamUpdate::Resolved(r) if r.id() == id),
        )?;
        samples.push(start.elapsed());
        wait_for(rx, "the teammate to go idle", |u| {
            is_status(u, mate, TeammateStatus::Idle)
        })?;
        drain_lead(rt, team)?;
    }
    Ok(samples)
}

fn shutdown_round_trips(
    rt: &Handle,
    team: &Team,
    rx: &Receiver<TeamUpdate>,
    names: &[AgentName],
) -> BenchResult<Vec<Duration>> {
    let protocol = team.runtime.protocol();
    let mut samples = Vec::with_capacity(names.len());
    for mate in names {
        let start = Instant::now();
        rt.block_on(protocol.open(
            RequestKind::Shutdown,
            &AgentName::lead(),
            mate,
            "Please shut down.",
        ))
        .map_err(|e| e.to_string())?;
        let message = lead_claim(rt, team, rx, ProtocolMessageKind::ShutdownResponse)?;
        let MailboxMessage::Protocol(response) = &message else {
            return Err("expected a protocol message".into());
        };
        rt.block_on(team.protocol.consume_response(response))
            .map_err(|e| e.to_string())?;
        rt.block_on(team.mailbox.ack(&AgentName::lead(), &message))
            .map_err(|e| e.to_string())?;
        samples.push(start.elapsed());
    }
    Ok(samples)
}
