//! Cron: expressions and DST, the runtime (`fire_due`, the timer task), `cron.json`, the
//! `schedule_cron` tool through the dispatcher, and the read-only listing.

mod dispatch;
mod runtime;
mod schedule;
mod store;
mod timer;

use std::path::Path;
use std::sync::Arc;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use troupe::clock::{Clock, ManualClock};
use troupe::cron::{CronRuntime, CronWakeup, ScheduleRequest};
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::wire::UtcTime;

pub fn at(raw: &str) -> UtcTime {
    UtcTime::parse(raw).unwrap()
}

pub fn request(cron: &str, timezone: &str, recurring: bool, durable: bool) -> ScheduleRequest {
    ScheduleRequest {
        cron: cron.to_owned(),
        prompt: format!("wake up for {cron}"),
        timezone: timezone.to_owned(),
        recurring,
        durable,
    }
}

/// A runtime over `workspace` with the given clock and sequential ids (prefix `prefix`).
pub async fn open_runtime(
    workspace: &Path,
    clock: Arc<dyn Clock>,
    prefix: u16,
) -> (CronRuntime, UnboundedReceiver<CronWakeup>) {
    let (tx, rx) = unbounded_channel();
    let runtime = CronRuntime::open(
        &Layout::new(workspace),
        clock,
        Arc::new(SequentialIds::with_prefix(prefix)),
        tx,
    )
    .await
    .unwrap();
    (runtime, rx)
}

pub async fn manual_runtime(
    workspace: &Path,
    start: &str,
) -> (CronRuntime, UnboundedReceiver<CronWakeup>, ManualClock) {
    let clock = ManualClock::new(at(start));
    let (runtime, rx) = open_runtime(workspace, Arc::new(clock.clone()), 0).await;
    (runtime, rx, clock)
}

/// Everything waiting in the channel now.
pub fn drain(rx: &mut UnboundedReceiver<CronWakeup>) -> Vec<CronWakeup> {
    let mut out = Vec::new();
    while let Ok(w) = rx.try_recv() {
        out.push(w);
    }
    out
}
