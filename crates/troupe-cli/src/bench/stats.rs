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

/// The `p`-th percentile (0–100, nearest rank) of the durations, in microseconds; sorts them.
pub fn percentile_us(samples: &mut [Duration], p: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    let rank = (p.clamp(0.0, 100.0) / 100.0 * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1].as_secs_f64() * 1e6
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut samples: Vec<Duration> = (1..=100).rev().map(Duration::from_micros).collect();
        assert_eq!(percentile_us(&mut samples, 50.0).round(), 50.0);
        assert_eq!(percentile_us(&mut samples, 90.0).round(), 90.0);
        assert_eq!(percentile_us(&mut samples, 99.0).round(), 99.0);
        assert_eq!(percentile_us(&mut samples, 100.0).round(), 100.0);
        assert_eq!(percentile_us(&mut samples, 0.0).round(), 1.0);
        let mut one = vec![Duration::from_micros(7)];
        assert_eq!(percentile_us(&mut one, 99.0).round(), 7.0);
        assert_eq!(percentile_us(&mut [], 50.0), 0.0);
    }
}
