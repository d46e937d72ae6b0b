//! How long to wait before retrying a model call: exponential backoff with jitter, or the
//! server's `Retry-After` when it sent one.
//!
//! The delays are data (a [`RetryPolicy`]) so that tests can run the real retry loop with
//! millisecond delays, and the computation is a pure function so it can be tested on its own.

use std::time::Duration;

/// When and how often a failed model call is tried again.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts per model, the first one included (so `1` means "never retry"). `0` acts as `1`.
    pub max_attempts: u32,
    /// The delay before the first retry, before jitter.
    pub initial_backoff: Duration,
    /// Each further retry waits this many times longer than the previous one.
    pub multiplier: u32,
    /// The backoff never grows past this (before jitter).
    pub max_backoff: Duration,
    /// The fraction of each backoff that is random, in `0.0..=1.0`: many clients failing together
    /// must not retry in lockstep. `0.0` gives exact, deterministic delays.
    pub jitter: f64,
    /// A server's `Retry-After` is honoured up to this long, so a misbehaving server cannot stall
    /// a run for an hour.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(500),
            multiplier: 2,
            max_backoff: Duration::from_secs(8),
            jitter: 0.5,
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A policy with the same delay before every retry and no jitter (for tests).
    pub fn fixed(max_attempts: u32, delay: Duration) -> Self {
        Self {
            max_attempts,
            initial_backoff: delay,
            multiplier: 1,
            max_backoff: delay,
            jitter: 0.0,
            max_retry_after: delay,
        }
    }

    /// Attempts per model, never less than one.
    pub fn attempts(&self) -> u32 {
        self.max_attempts.max(1)
    }

    /// The delay after failed attempt number `failed_attempt` (1-based).
    ///
    /// `retry_after` is what the server asked for; when present it replaces the backoff (capped at
    /// `max_retry_after`). `random` is a sample in `0.0..1.0` for the jitter.
    pub fn delay_after(
        &self,
        failed_attempt: u32,
        retry_after: Option<Duration>,
        random: f64,
    ) -> Duration {
        if let Some(asked) = retry_after {
            return asked.min(self.max_retry_after);
        }
        let growth = self
            .multiplier
            .max(1)
            .saturating_pow(failed_attempt.saturating_sub(1));
        let backoff = self
            .initial_backoff
            .saturating_mul(growth)
            .min(self.max_backoff);
        let jitter = if self.jitter.is_finite() {
            self.jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let random = if random.is_finite() {
            random.clamp(0.0, 1.0)
        } else {
            0.0
        };
        // The factor stays within 0..=1, so the result never exceeds the backoff.
        let factor = 1.0 - jitter * random;
        if factor >= 1.0 {
            return backoff;
        }
        Duration::try_from_secs_f64(backoff.as_secs_f64() * factor).unwrap_or(backoff)
    }
}

/// A uniform sample in `0.0..1.0` for jitter. The randomness comes from a v4 UUID so that no
/// extra crate is needed for it; its low 53 bits are random.
pub(crate) fn jitter_sample() -> f64 {
    let (_, low) = uuid::Uuid::new_v4().as_u64_pair();
    let mantissa = low & ((1u64 << 53) - 1);
    mantissa as f64 / (1u64 << 53) as f64
}
