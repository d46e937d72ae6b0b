//! The protocol suite: create+consume round trips on an empty store and on a store holding
//! `history` resolved requests, and the latest-plan lookup the plan gate makes on every call.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use troupe::clock::{Clock, SystemClock};
use troupe::ids::{IdGenerator, RandomIds};
use troupe::layout::Layout;
use troupe::store::protocol::{JsonProtocolStore, NewRequest, ProtocolStore, DEFAULT_TTL};
use troupe::wire::message::Envelope;
use troupe::wire::{AgentName, Content, ProtocolMessage, RequestKind};

use crate::result::{block_on, BenchResult};
use crate::stats::{p50_us, round2};

fn name(s: &str) -> BenchResult<AgentName> {
    AgentName::parse(s).map_err(|e| e.to_string())
}

/// One plan round trip: the teammate registers a plan, the lead's response is consumed.
pub async fn round_trip(
    store: &dyn ProtocolStore,
    clock: &dyn Clock,
    teammate: &AgentName,
) -> BenchResult<()> {
    let lead = AgentName::lead();
    let request = store
        .create(NewRequest {
            kind: RequestKind::PlanApproval,
            sender: teammate.clone(),
            target: lead.clone(),
            content: Content::parse("plan: benchmark").map_err(|e| e.to_string())?,
            ttl: DEFAULT_TTL,
        })
        .await
        .map_err(|e| format!("create: {e}"))?;
    let response = ProtocolMessage::response(
        Envelope {
            id: RandomIds.message_id(),
            sender: lead,
            recipient: teammate.clone(),
            content: Content::parse("Approved").map_err(|e| e.to_string())?,
            created_at_utc: clock.now(),
        },
        RequestKind::PlanApproval.response_message_kind(),
        request.id(),
        true,
    )
    .map_err(|e| e.to_string())?;
    store
        .consume_response(&response)
        .await
        .map_err(|e| format!("consume: {e}"))?;
    Ok(())
}

/// Round trips on the two stores, alternated so that both see the same disk weather.
async fn measure_alternating(
    empty: &dyn ProtocolStore,
    full: &dyn ProtocolStore,
    clock: &dyn Clock,
    rounds: usize,
) -> BenchResult<(f64, f64)> {
    let teammate = name("alice")?;
    let (mut on_empty, mut on_full) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        for (store, samples) in [(empty, &mut on_empty), (full, &mut on_full)] {
            let start = Instant::now();
            round_trip(store, clock, &teammate).await?;
            samples.push(start.elapsed());
        }
    }
    Ok((p50_us(&mut on_empty), p50_us(&mut on_full)))
}

pub fn run(dir: &Path, history: usize, rounds: usize) -> BenchResult<Value> {
    block_on(run_async(dir, history, rounds))?
}

async fn run_async(dir: &Path, history: usize, rounds: usize) -> BenchResult<Value> {
    let disk = crate::disk::durable_writes_per_s(dir, Duration::from_secs(2))?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let open = |path: &Path| {
        JsonProtocolStore::open(&Layout::new(path), clock.clone(), Arc::new(RandomIds))
            .map_err(|e| format!("open store: {e}"))
    };

    // Fill the history with resolved plans from 16 teammates (the gate's lookups then have
    // several senders to tell apart).
    let full_ws = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let full = open(full_ws.path())?;
    let teammates: Vec<AgentName> = (0..16)
        .map(|i| name(&format!("mate-{i}")))
        .collect::<Result<_, _>>()?;
    let fill_start = Instant::now();
    for i in 0..history {
        round_trip(&full, clock.as_ref(), &teammates[i % teammates.len()]).await?;
    }
    let fill_span = fill_start.elapsed();
    // Measure on fresh instances, as a restarted runtime would have.
    let full = open(full_ws.path())?;
    let empty_ws = tempfile::tempdir_in(dir).map_err(|e| e.to_string())?;
    let empty = open(empty_ws.path())?;
    let (empty_p50, history_p50) =
        measure_alternating(&empty, &full, clock.as_ref(), rounds).await?;

    let mut lookups = Vec::with_capacity(2000);
    for i in 0..2000 {
        let who = &teammates[i % teammates.len()];
        let start = Instant::now();
        let latest = full
            .latest_plan_of(who)
            .await
            .map_err(|e| format!("latest plan: {e}"))?;
        lookups.push(start.elapsed());
        if latest.is_none() && history >= teammates.len() {
            return Err(format!("latest plan of {who} not found"));
        }
    }
    let listed = full.list().await.map_err(|e| format!("list: {e}"))?.len();
    if listed != history + rounds {
        return Err(format!(
            "store lists {listed} requests, expected {}",
            history + rounds
        ));
    }
    Ok(json!({
        "suite": "protocol",
        "history": history,
        "rounds": rounds,
        "disk_durable_writes_per_s": round2(disk),
        "round_trip_us_p50_empty": round2(empty_p50),
        "round_trip_us_p50_history": round2(history_p50),
        "history_vs_empty": round2(history_p50 / empty_p50),
        "latest_plan_us_p50": round2(p50_us(&mut lookups)),
        "history_fill_s": round2(fill_span.as_secs_f64()),
    }))
}
