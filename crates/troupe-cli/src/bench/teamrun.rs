//! The teamrun suite (issue 46): what a lead's and its teammates' prompt caches could reuse over
//! a run with team traffic, and the fixed prompt every call pays for.
//!
//! A lead and `teammates` teammates are built with `bootstrap::build_team` on the files of a
//! temporary workspace, each agent with its own reactive scripted model (`teamrun/model.rs`),
//! and the lead's prompt is driven as `troupe run` drives it. Over `turns` lead model calls the
//! teammates are spawned one by one (spread over the first four fifths of the run), take work
//! and finish it (their statuses go running and idle), submit plans the lead approves, complete
//! board tasks the lead creates, and send messages both ways. The lead's last call cancels the
//! run and the team is closed.
//!
//! Every request an agent's model is called with is recorded (`teamrun/record.rs`, keeping each
//! agent's last request and running sums). Reported per role (`lead`, and `teammates` summed
//! over all teammates), over turn requests: `requests`, `bytes_sent` (Σ `cache_bytes`),
//! `cache_prefix_share` (Σ bytes shared with the same agent's previous request / Σ bytes),
//! `bytes_sent_uncached`, `prefix_breaks` (requests whose shared prefix ended inside the tools
//! or the system message) and `fixed_prompt_bytes` (tools + system message of the role's first
//! request). The runtime's own calls (summaries, memory) are reported apart. The goals of the
//! issue are checked and reported; a missed goal does not fail the suite.

mod model;
mod record;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::bootstrap::build_team;
use troupe::model::ModelClient;
use troupe::store::tasks::TaskStatus;
use troupe::sync::lock;
use troupe::team::{ModelChooser, TeamObserver, TeamUpdate};
use troupe::wire::{AgentName, MailboxMessage, OrdinaryKind, ProtocolMessageKind, TeammateStatus};

use crate::result::BenchResult;
use crate::team::bench_settings;
use model::{Script, TeamrunModels};
use record::RoleTally;

/// The goals of issue 46.
const SHARE_GOAL: f64 = 0.95;
const TEAMMATE_FIXED_PROMPT_GOAL: usize = 10_240;
/// Failures listed in the report; the rest are counted.
const FAILURES_LISTED: usize = 20;

/// What the team did, as its updates tell it.
#[derive(Default)]
struct Traffic {
    spawned: AtomicU64,
    running: AtomicU64,
    idle: AtomicU64,
    lead_messages: AtomicU64,
    teammate_messages: AtomicU64,
    results: AtomicU64,
    plan_requests: AtomicU64,
    plan_responses: AtomicU64,
    /// What went wrong: failed teammates, quarantined messages.
    failures: Mutex<Vec<String>>,
}

impl Traffic {
    fn failed(&self, what: String) {
        lock(&self.failures).push(what);
    }
}

impl TeamObserver for Traffic {
    fn update(&self, update: &TeamUpdate) {
        let count = |n: &AtomicU64| {
            n.fetch_add(1, Ordering::Relaxed);
        };
        match update {
            TeamUpdate::Spawned { .. } => count(&self.spawned),
            TeamUpdate::Status {
                name,
                status,
                detail,
            } => match status {
                TeammateStatus::Running => count(&self.running),
                TeammateStatus::Idle => count(&self.idle),
                other => self.failed(format!(
                    "{name} {}: {}",
                    other.as_str(),
                    detail.as_deref().unwrap_or("")
                )),
            },
            TeamUpdate::Sent(MailboxMessage::Ordinary(m)) => match m.kind {
                OrdinaryKind::Message if m.sender.is_lead() => count(&self.lead_messages),
                OrdinaryKind::Message => count(&self.teammate_messages),
                OrdinaryKind::Result => count(&self.results),
                OrdinaryKind::Task => {}
            },
            TeamUpdate::Sent(MailboxMessage::Protocol(p)) => match p.kind() {
                ProtocolMessageKind::PlanApprovalRequest => count(&self.plan_requests),
                ProtocolMessageKind::PlanApprovalResponse => count(&self.plan_responses),
                _ => {}
            },
            TeamUpdate::Quarantined {
                agent,
                message,
                reason,
            } => self.failed(format!("{agent}: {message} quarantined: {reason}")),
            TeamUpdate::Expired(request) => {
                self.failed(format!("request {} expired", request.id()));
            }
            _ => {}
        }
    }
}

pub fn run(dir: &Path, turns: usize, teammates: usize, latency_ms: u64) -> BenchResult<Value> {
    let workspace = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let root = std::fs::canonicalize(workspace.path()).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let names: Vec<AgentName> = (0..teammates)
        .map(|i| AgentName::parse(&format!("mate-{i}")).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let latency = Duration::from_millis(latency_ms);
    let stop = CancellationToken::new();
    let script = Script::new(turns, names, latency, stop.clone());
    let traffic = Arc::new(Traffic::default());
    let models = TeamrunModels(script.clone());
    let lead: Arc<dyn ModelClient> = models.model_for(&AgentName::lead());
    let mut settings = bench_settings(&root, lead, traffic.clone(), 16);
    settings.models = Arc::new(models);
    // Every lead call may wait for the model and each of its events for a teammate's.
    let limit = Duration::from_secs(120) + latency * (turns as u32).saturating_mul(8);

    let start = Instant::now();
    let (driven, board) = runtime.block_on(async {
        let mut team = build_team(settings).await.map_err(|e| e.to_string())?;
        let mut driver = team.driver();
        let driven = tokio::time::timeout(
            limit,
            driver.run(&mut team.lead, "teamrun: start the team", &stop),
        )
        .await;
        let board = team.board.list().await;
        drop(driver);
        team.close().await;
        Ok::<_, String>((driven, board))
    })?;
    let wall = start.elapsed();

    let counts = script.lead_counts();
    match driven {
        Ok(Ok(_)) if counts.turns < turns => traffic.failed(format!(
            "the team went quiet after {} of {turns} lead turns",
            counts.turns
        )),
        Ok(Ok(_)) => {}
        Ok(Err(e)) => traffic.failed(format!("the run failed: {e}")),
        Err(_) => traffic.failed(format!("the run did not end within {limit:?}")),
    }
    if script.tool_errors() > 0 {
        traffic.failed(format!(
            "{} tool calls answered an error",
            script.tool_errors()
        ));
    }
    let (tasks_completed, tasks_open) = match board {
        Ok(tasks) => {
            let done = tasks
                .iter()
                .filter(|t| t.status == TaskStatus::Completed)
                .count();
            (done, tasks.len() - done)
        }
        Err(e) => {
            traffic.failed(format!("the board could not be listed: {e}"));
            (0, 0)
        }
    };
    let (lead_tally, mate_tally) = script.recorder().snapshot();
    let failures = std::mem::take(&mut *lock(&traffic.failures));
    let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
    Ok(report(&Report {
        turns,
        teammates,
        latency_ms,
        wall,
        spawn_every: script.spawn_every(),
        lead: lead_tally,
        teammates_tally: mate_tally,
        fields: json!({
            "lead_turns": counts.turns,
            "spawns": load(&traffic.spawned),
            "status_changes": {"running": load(&traffic.running), "idle": load(&traffic.idle)},
            "plans": {
                "submitted": load(&traffic.plan_requests),
                "reviewed": script.reviews(),
                "answered": load(&traffic.plan_responses),
            },
            "board_tasks": {
                "created": counts.board_tasks,
                "completed": tasks_completed,
                "open_at_end": tasks_open,
            },
            "messages": {
                "lead_to_teammates": load(&traffic.lead_messages),
                "teammates_to_lead": load(&traffic.teammate_messages),
                "results_to_lead": load(&traffic.results),
            },
        }),
        failures,
    }))
}

/// Everything the report is made of.
struct Report {
    turns: usize,
    teammates: usize,
    latency_ms: u64,
    wall: Duration,
    spawn_every: usize,
    lead: RoleTally,
    teammates_tally: RoleTally,
    /// The traffic's counts, merged in as they are.
    fields: Value,
    failures: Vec<String>,
}

fn role(tally: &RoleTally) -> Value {
    json!({
        "requests": tally.requests,
        "bytes_sent": tally.bytes_sent,
        "cache_prefix_share": tally.share(),
        "bytes_sent_uncached": tally.uncached(),
        "prefix_breaks": tally.prefix_breaks,
        "fixed_prompt_bytes": tally.fixed,
        "side_requests": tally.side,
    })
}

fn goal(name: &str, target: &str, value: Value, met: bool) -> Value {
    json!({"goal": name, "target": target, "value": value, "met": met})
}

/// The suite's JSON object.
fn report(r: &Report) -> Value {
    let teammate_fixed = r.teammates_tally.fixed.map(|f| f.total);
    let goals = [
        goal(
            "lead cache_prefix_share",
            "≥ 0.95",
            json!(r.lead.share()),
            r.lead.share() >= SHARE_GOAL,
        ),
        goal(
            "teammates cache_prefix_share",
            "≥ 0.95",
            json!(r.teammates_tally.share()),
            r.teammates_tally.share() >= SHARE_GOAL,
        ),
        goal(
            "teammate fixed_prompt_bytes",
            "< 10240",
            json!(teammate_fixed),
            teammate_fixed.is_some_and(|b| b < TEAMMATE_FIXED_PROMPT_GOAL),
        ),
    ];
    let mut out = json!({
        "suite": "teamrun",
        "store": "files",
        "turns": r.turns,
        "teammate_count": r.teammates,
        "latency_ms": r.latency_ms,
        "spawn_every_lead_turns": r.spawn_every,
        "wall_ms": r.wall.as_millis() as u64,
        "lead": role(&r.lead),
        "teammates": role(&r.teammates_tally),
    });
    if let (Some(out), Some(fields)) = (out.as_object_mut(), r.fields.as_object()) {
        for (key, value) in fields {
            out.insert(key.clone(), value.clone());
        }
        out.insert(
            "failed".to_owned(),
            json!({
                "count": r.failures.len(),
                "first": r.failures.iter().take(FAILURES_LISTED).collect::<Vec<_>>(),
            }),
        );
        out.insert("goals".to_owned(), json!(goals));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use record::FixedPrompt;

    #[test]
    fn the_report_checks_the_goals_on_the_tallies() {
        let fixed = |tools_bytes, system_bytes| FixedPrompt {
            tools_bytes,
            system_bytes,
            total: tools_bytes + system_bytes,
        };
        let lead = RoleTally {
            requests: 10,
            bytes_sent: 1000,
            shared: 800,
            prefix_breaks: 7,
            fixed: Some(fixed(9000, 9000)),
            side: Default::default(),
        };
        let teammates = RoleTally {
            requests: 20,
            bytes_sent: 1000,
            shared: 960,
            prefix_breaks: 0,
            fixed: Some(fixed(6000, 4000)),
            side: Default::default(),
        };
        let value = report(&Report {
            turns: 10,
            teammates: 2,
            latency_ms: 0,
            wall: Duration::from_millis(1500),
            spawn_every: 4,
            lead,
            teammates_tally: teammates,
            fields: json!({"lead_turns": 10}),
            failures: vec!["one".to_owned()],
        });
        assert_eq!(value["lead"]["cache_prefix_share"], json!(0.8));
        assert_eq!(value["lead"]["bytes_sent_uncached"], json!(200));
        assert_eq!(value["lead"]["prefix_breaks"], json!(7));
        assert_eq!(
            value["lead"]["fixed_prompt_bytes"],
            json!({"tools_bytes": 9000, "system_bytes": 9000, "total": 18000})
        );
        assert_eq!(value["teammates"]["cache_prefix_share"], json!(0.96));
        assert_eq!(value["lead_turns"], json!(10));
        assert_eq!(value["wall_ms"], json!(1500));
        assert_eq!(value["failed"], json!({"count": 1, "first": ["one"]}));
        let met: Vec<&Value> = value["goals"]
            .as_array()
            .map(|g| g.iter().map(|g| &g["met"]).collect())
            .unwrap_or_default();
        assert_eq!(met, vec![&json!(false), &json!(true), &json!(true)]);
    }
}
