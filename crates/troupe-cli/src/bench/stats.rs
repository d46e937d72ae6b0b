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

fn rusage() -> Option<libc::rusage> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a full rusage into the pointer it is given.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    // SAFETY: rc == 0 means the struct was filled.
    (rc == 0).then(|| unsafe { usage.assume_init() })
}

/// Peak resident set size of this process, in bytes.
pub fn peak_rss_bytes() -> u64 {
    // Linux reports ru_maxrss in KiB.
    rusage().map_or(0, |u| u64::try_from(u.ru_maxrss).unwrap_or(0) * 1024)
}

/// CPU time (user + system) this process has used, in seconds.
pub fn cpu_seconds() -> f64 {
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    rusage().map_or(0.0, |u| secs(u.ru_utime) + secs(u.ru_stime))
}

/// Rounds to two decimals for readable JSON.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
