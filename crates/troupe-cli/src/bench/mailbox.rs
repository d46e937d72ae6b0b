//! The mailbox suite: n sends to one mailbox, then claim+ack until it is empty.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use troupe::clock::{Clock, SystemClock};
use troupe::ids::{IdGenerator, RandomIds};
use troupe::layout::Layout;
use troupe::store::mailbox::{FileMailboxStore, MailboxStore};
use troupe::wire::{AgentName, Content, MailboxMessage, OrdinaryKind, OrdinaryMessage};

use crate::result::{block_on, fail, BenchResult};
use crate::stats::{peak_rss_bytes, per_second, round2};

pub fn message(
    ids: &dyn IdGenerator,
    clock: &dyn Clock,
    from: &str,
    to: &str,
    n: usize,
) -> BenchResult<MailboxMessage> {
    let parse = |s: &str| AgentName::parse(s).map_err(|e| e.to_string());
    Ok(MailboxMessage::Ordinary(OrdinaryMessage {
        id: ids.message_id(),
        sender: parse(from)?,
        recipient: parse(to)?,
        kind: OrdinaryKind::Message,
        content: Content::parse(format!("benchmark message {n}")).map_err(|e| e.to_string())?,
        created_at_utc: clock.now(),
    }))
}

pub fn run(dir: &Path, n: usize) -> BenchResult<Value> {
    block_on(run_async(dir, n))?
}

async fn run_async(dir: &Path, n: usize) -> BenchResult<Value> {
    if n < 10 {
        return Err("--n must be at least 10".into());
    }
    // The shared disk's speed drifts: probe it before, between and after the two phases and
    // report the median, so the ratios compare like with like.
    let probe = || crate::disk::durable_writes_per_s(dir, Duration::from_secs(1));
    let mut disk_probes = vec![probe()?];
    let workspace = tempfile::tempdir_in(dir).map_err(|e| format!("workspace: {e}"))?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = FileMailboxStore::new(&Layout::new(workspace.path()), clock.clone());
    let agent = AgentName::parse("bench").map_err(|e| e.to_string())?;

    let start = Instant::now();
    for i in 0..n {
        let msg = message(&RandomIds, clock.as_ref(), "lead", "bench", i)?;
        store
            .send(&msg)
            .await
            .map_err(|e| e.to_string())
            .map_err(fail("send"))?;
    }
    let send_span = start.elapsed();
    disk_probes.push(probe()?);

    // A fresh instance, as a restarted runtime would have: its index is built from disk.
    let store = FileMailboxStore::new(&Layout::new(workspace.path()), clock);
    let mut finished_at = Vec::with_capacity(n);
    let start = Instant::now();
    while let Some(msg) = store
        .claim(&agent)
        .await
        .map_err(|e| e.to_string())
        .map_err(fail("claim"))?
    {
        store
            .ack(&agent, &msg)
            .await
            .map_err(|e| e.to_string())
            .map_err(fail("ack"))?;
        finished_at.push(start.elapsed());
    }
    let drain_span = start.elapsed();
    disk_probes.push(probe()?);
    disk_probes.sort_by(f64::total_cmp);
    let disk = disk_probes[1];
    if finished_at.len() != n {
        return Err(format!("drained {} of {n} messages", finished_at.len()));
    }
    let tenth = n / 10;
    let first = per_second(tenth, finished_at[tenth - 1]);
    let last = per_second(tenth, finished_at[n - 1] - finished_at[n - 1 - tenth]);
    Ok(json!({
        "suite": "mailbox",
        "n": n,
        "disk_durable_writes_per_s": round2(disk),
        "disk_probes_per_s": disk_probes.iter().map(|d| round2(*d)).collect::<Vec<_>>(),
        "sends_per_s": round2(per_second(n, send_span)),
        "claim_ack_per_s": round2(per_second(n, drain_span)),
        "claim_ack_per_s_first_10pct": round2(first),
        "claim_ack_per_s_last_10pct": round2(last),
        "sends_vs_disk": round2(per_second(n, send_span) / disk),
        "claim_ack_vs_disk": round2(per_second(n, drain_span) / disk),
        "last_vs_first_10pct_time": round2(first / last),
        "peak_rss_bytes": peak_rss_bytes(),
    }))
}
