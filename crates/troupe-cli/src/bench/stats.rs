//! Small statistics helpers: medians and rates.

use std::time::Duration;

/// The median of the durations, in microseconds.
pub fn p50_us(samples: &mut [Duration]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

/// Operations per second over a span.
pub fn per_second(ops: usize, span: Duration) -> f64 {
    let secs = span.as_secs_f64();
    if secs <= 0.0 {
        0.0
    } else {
        ops as f64 / secs
    }
}

/// Peak resident set size of this process, in bytes.
pub fn peak_rss_bytes() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a full rusage into the pointer it is given.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return 0;
    }
    // SAFETY: rc == 0 means the struct was filled.
    let usage = unsafe { usage.assume_init() };
    // Linux reports ru_maxrss in KiB.
    u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024
}

/// Rounds to two decimals for readable JSON.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
