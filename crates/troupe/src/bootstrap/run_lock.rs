//! The workspace's run lock, taken at a run's start: one run at a time on a workspace.
//!
//! Another run holding it makes the start fail at once with `Busy`, naming the holder.
//! `troupe gc` holds it too, for a moment: to close the event stream's open segment when no run
//! is live (`gc::ROLLING`, written as the holder). A run starting then waits for that roll,
//! up to [`GC_PATIENCE`], instead of saying the workspace is busy.

use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::layout::Layout;
use crate::store::durable;
use crate::store::lock::{try_lock_exclusive, LockGuard};

use super::options::BootstrapError;

/// How long a starting run waits for `troupe gc`'s roll of the event stream (compressing a
/// segment of 64 MiB takes a second or two).
pub(super) const GC_PATIENCE: Duration = Duration::from_secs(30);
/// How often the lock is tried again meanwhile.
const RETRY: Duration = Duration::from_millis(20);

/// Takes the workspace's run lock and writes who holds it; `Busy` when another run has it.
pub(super) fn take_run_lock(
    layout: &Layout,
    clock: &dyn Clock,
) -> Result<LockGuard, BootstrapError> {
    take_waiting_for_gc(layout, clock, GC_PATIENCE, &|| {})
}

/// [`take_run_lock`], waiting at most `patience` while gc holds the lock; `on_wait` is called
/// once when the wait begins.
fn take_waiting_for_gc(
    layout: &Layout,
    clock: &dyn Clock,
    patience: Duration,
    on_wait: &dyn Fn(),
) -> Result<LockGuard, BootstrapError> {
    durable::ensure_real_dir(&layout.state_dir())?;
    let began = Instant::now();
    let mut waiting = false;
    let mut run_lock = loop {
        match try_lock_exclusive(&layout.run_lock())? {
            Ok(guard) => break guard,
            Err(holder) if crate::gc::is_rolling(&holder) && began.elapsed() < patience => {
                if !waiting {
                    waiting = true;
                    tracing::info!("waiting for troupe gc to close the event stream's segment");
                    on_wait();
                }
                std::thread::sleep(RETRY);
            }
            Err(holder) => {
                let holder = if holder.is_empty() {
                    "unknown holder".to_owned()
                } else {
                    holder
                };
                return Err(BootstrapError::Busy { holder });
            }
        }
    };
    run_lock.write_holder(&format!("pid {} since {}", std::process::id(), clock.now()))?;
    Ok(run_lock)
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::clock::SystemClock;

    fn workspace() -> (tempfile::TempDir, Layout) {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        std::fs::create_dir_all(layout.state_dir()).unwrap();
        (dir, layout)
    }

    fn held_by(layout: &Layout, holder: &str) -> LockGuard {
        let mut guard = try_lock_exclusive(&layout.run_lock()).unwrap().unwrap();
        guard.write_holder(holder).unwrap();
        guard
    }

    #[test]
    fn a_run_starting_while_gc_rolls_the_events_waits_and_then_runs() {
        let (_dir, layout) = workspace();
        let gc = held_by(&layout, &crate::gc::rolling_holder());
        let (waits, waiting) = mpsc::channel();
        let starter = {
            let layout = layout.clone();
            std::thread::spawn(move || {
                let on_wait = move || waits.send(()).unwrap();
                take_waiting_for_gc(&layout, &SystemClock, GC_PATIENCE, &on_wait).map(|_| ())
            })
        };
        // The starter found gc holding the lock and waits; gc's roll ends.
        waiting
            .recv_timeout(Duration::from_secs(60))
            .expect("the start waits for gc instead of failing");
        drop(gc);
        starter
            .join()
            .unwrap()
            .expect("the run starts once gc is done");
    }

    #[test]
    fn a_run_holding_the_lock_makes_the_start_busy_at_once() {
        let (_dir, layout) = workspace();
        let _run = held_by(&layout, "pid 42 since 2026-12-07T00:00:00Z");
        let waited = std::cell::Cell::new(false);
        let err = take_waiting_for_gc(&layout, &SystemClock, GC_PATIENCE, &|| waited.set(true))
            .err()
            .unwrap();
        assert!(!waited.get());
        assert!(matches!(err, BootstrapError::Busy { holder } if holder.contains("pid 42")));
    }

    #[test]
    fn a_gc_that_holds_the_lock_past_the_patience_makes_the_start_busy_naming_it() {
        let (_dir, layout) = workspace();
        let _gc = held_by(&layout, &crate::gc::rolling_holder());
        let err = take_waiting_for_gc(&layout, &SystemClock, Duration::ZERO, &|| {})
            .err()
            .unwrap();
        assert!(
            matches!(err, BootstrapError::Busy { holder } if holder.starts_with(crate::gc::ROLLING))
        );
    }
}
