//! The injectable clock (SPEC §2).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use troupe_wire::UtcTime;

/// Where "now" comes from. Stores and runtimes take one so tests control time.
pub trait Clock: Send + Sync {
    fn now(&self) -> UtcTime;
}

/// The system clock, truncated to milliseconds.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UtcTime {
        UtcTime::from_datetime(chrono::Utc::now())
    }
}

/// A clock that moves only when told to. Cloning shares the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    millis: Arc<AtomicI64>,
}

impl ManualClock {
    pub fn new(start: UtcTime) -> Self {
        Self {
            millis: Arc::new(AtomicI64::new(start.unix_millis())),
        }
    }

    /// A clock at `2026-07-30T08:00:00.000Z`, the SPEC's example instant.
    pub fn at_spec_epoch() -> Self {
        Self {
            millis: Arc::new(AtomicI64::new(1_785_398_400_000)),
        }
    }

    pub fn set(&self, at: UtcTime) {
        self.millis.store(at.unix_millis(), Ordering::SeqCst);
    }

    /// Moves the clock by `millis` (negative moves it backwards).
    pub fn advance_millis(&self, millis: i64) {
        self.millis.fetch_add(millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UtcTime {
        let millis = self.millis.load(Ordering::SeqCst);
        // The range of UtcTime covers every i64 millisecond a test can reach by small steps.
        UtcTime::from_unix_millis(millis).unwrap_or_else(|_| SystemClock.now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::at_spec_epoch();
        assert_eq!(clock.now().to_string(), "2026-07-30T08:00:00.000Z");
        clock.advance_millis(1500);
        assert_eq!(clock.now().to_string(), "2026-07-30T08:00:01.500Z");
        clock.advance_millis(-2000);
        assert_eq!(clock.now().to_string(), "2026-07-30T07:59:59.500Z");
    }
}
