//! The soak's samples and the goals checked on them (issue 45).
//!
//! - RSS: the last sample at most 10% above the baseline sample's (minute 5; in a soak shorter
//!   than 10 minutes, its middle minute), so start-up growth does not count.
//! - fds: the last sample at most the baseline's + [`FD_SLACK`].
//! - threads: the last sample at most the baseline's + the runtime's blocking threads, which
//!   come and go with the work of the last seconds (see `BLOCKING_THREADS`).
//! - round trips: p99 of the last 10 minutes at most 1.2× the first 10's (in a soak shorter
//!   than 20 minutes, of its halves).
//! - with retention: the state's size at the end at most 10% above the first sample taken
//!   past the retention window.

use std::time::Duration;

use serde::Serialize;

use super::probe::Process;
use crate::stats::round2;

/// Open files a sample may show above the baseline. A sample waits for what a close lets go
/// of in the background (the watch's thread with its 3 descriptors, a database store's
/// connections); this allows for one such shutdown slower than that wait.
pub const FD_SLACK: u64 = 3;

/// One minute's sample.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub minute: u64,
    pub elapsed_s: f64,
    /// Cycles ended so far.
    pub cycles: u64,
    /// Cycles ended since the sample before (a cycle that grows slower shows here).
    pub cycles_in_minute: u64,
    pub rss_bytes: u64,
    pub fds: u64,
    pub threads: u64,
    /// The state's size: `.troupe/`, or the PostgreSQL schema's tables.
    pub state_bytes: u64,
    /// Bytes under `.troupe/` (the same as `state_bytes` on files).
    pub workspace_bytes: u64,
    pub round_trips: usize,
    pub round_trip_ms_p50: f64,
    pub round_trip_ms_p99: f64,
}

impl Sample {
    pub fn take(
        minute: u64,
        elapsed: Duration,
        cycles: u64,
        process: Process,
        state_bytes: u64,
        workspace_bytes: u64,
        round_trips: &mut [u32],
    ) -> Self {
        Self {
            minute,
            elapsed_s: round2(elapsed.as_secs_f64()),
            cycles,
            cycles_in_minute: cycles,
            rss_bytes: process.rss_bytes,
            fds: process.fds,
            threads: process.threads,
            state_bytes,
            workspace_bytes,
            round_trips: round_trips.len(),
            round_trip_ms_p50: percentile_ms(round_trips, 50.0),
            round_trip_ms_p99: percentile_ms(round_trips, 99.0),
        }
    }

    /// The progress line.
    pub fn line(&self, minutes: u64) -> String {
        format!(
            "minute {}/{minutes}: {} cycles ({} in the minute), rss {:.1} MiB, {} fds, {} threads, state {:.2} MiB, \
             round trip p50 {} ms p99 {} ms ({})",
            self.minute,
            self.cycles,
            self.cycles_in_minute,
            self.rss_bytes as f64 / 1_048_576.0,
            self.fds,
            self.threads,
            self.state_bytes as f64 / 1_048_576.0,
            self.round_trip_ms_p50,
            self.round_trip_ms_p99,
            self.round_trips,
        )
    }
}

/// The `p`-th percentile (nearest rank) of microseconds, in ms; sorts them.
fn percentile_ms(micros: &mut [u32], p: f64) -> f64 {
    if micros.is_empty() {
        return 0.0;
    }
    micros.sort_unstable();
    let rank = (p / 100.0 * micros.len() as f64).ceil() as usize;
    round2(f64::from(micros[rank.clamp(1, micros.len()) - 1]) / 1000.0)
}

/// One goal: what was compared, and whether it held (`None`: not measurable in this soak).
#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    pub name: &'static str,
    pub ok: Option<bool>,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Goals {
    /// The minute the growth goals start from.
    pub baseline_minute: u64,
    /// The minutes each round-trip window spans.
    pub window_minutes: u64,
    pub checked: Vec<Goal>,
}

impl Goals {
    pub fn check(
        samples: &[Sample],
        round_trips: &[Vec<u32>],
        retention: Option<Duration>,
        thread_slack: u64,
    ) -> Self {
        let minutes = samples.len() as u64;
        let baseline_minute = if minutes >= 10 {
            5
        } else {
            minutes.div_ceil(2)
        };
        let window_minutes = if minutes >= 20 { 10 } else { minutes / 2 };
        let mut checked = Vec::new();
        let base = samples.get(baseline_minute.saturating_sub(1) as usize);
        match (base, samples.last()) {
            (Some(base), Some(last)) => {
                checked.push(within(
                    "rss",
                    base.rss_bytes,
                    last.rss_bytes,
                    base.rss_bytes as f64 * 1.10,
                    "≤ +10%",
                ));
                checked.push(within(
                    "fds",
                    base.fds,
                    last.fds,
                    (base.fds + FD_SLACK) as f64,
                    &format!("≤ +{FD_SLACK}"),
                ));
                checked.push(within(
                    "threads",
                    base.threads,
                    last.threads,
                    (base.threads + thread_slack) as f64,
                    &format!("≤ +{thread_slack} (the runtime's blocking threads)"),
                ));
            }
            _ => checked.push(unmeasured("growth", "no samples")),
        }
        checked.push(round_trip_goal(round_trips, window_minutes));
        if let Some(window) = retention {
            checked.push(state_goal(samples, window));
        }
        Self {
            baseline_minute,
            window_minutes,
            checked,
        }
    }

    /// The goals missed, one line each.
    pub fn missed(&self) -> Vec<String> {
        self.checked
            .iter()
            .filter(|g| g.ok == Some(false))
            .map(|g| format!("{}: {}", g.name, g.detail))
            .collect()
    }
}

fn within(name: &'static str, base: u64, last: u64, limit: f64, rule: &str) -> Goal {
    Goal {
        name,
        ok: Some(last as f64 <= limit),
        detail: format!("baseline {base}, last {last} ({rule})"),
    }
}

fn unmeasured(name: &'static str, why: &str) -> Goal {
    Goal {
        name,
        ok: None,
        detail: why.to_owned(),
    }
}

fn round_trip_goal(round_trips: &[Vec<u32>], window: u64) -> Goal {
    let window = window as usize;
    if window == 0 || round_trips.len() < 2 {
        return unmeasured("round_trip_p99", "fewer than two minutes");
    }
    let mut first: Vec<u32> = round_trips[..window].concat();
    let mut last: Vec<u32> = round_trips[round_trips.len() - window..].concat();
    if first.is_empty() || last.is_empty() {
        return unmeasured("round_trip_p99", "no round trips in a window");
    }
    let (p_first, p_last) = (
        percentile_ms(&mut first, 99.0),
        percentile_ms(&mut last, 99.0),
    );
    Goal {
        name: "round_trip_p99",
        ok: Some(p_last <= p_first * 1.2),
        detail: format!(
            "first {window} min p99 {p_first} ms, last {window} min p99 {p_last} ms (≤ 1.2×)"
        ),
    }
}

fn state_goal(samples: &[Sample], window: Duration) -> Goal {
    let after = samples.iter().find(|s| s.elapsed_s >= window.as_secs_f64());
    match (after, samples.last()) {
        (Some(first), Some(last)) if first.minute < last.minute => Goal {
            name: "state_flat",
            ok: Some(last.state_bytes as f64 <= first.state_bytes as f64 * 1.10),
            detail: format!(
                "minute {} (first past the {} s window) {} bytes, last {} bytes (≤ +10%)",
                first.minute,
                window.as_secs(),
                first.state_bytes,
                last.state_bytes
            ),
        },
        _ => unmeasured(
            "state_flat",
            "fewer than two samples past the retention window",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(minute: u64, rss_bytes: u64, fds: u64, threads: u64, state_bytes: u64) -> Sample {
        let process = Process {
            rss_bytes,
            fds,
            threads,
        };
        Sample::take(
            minute,
            Duration::from_secs(minute * 60),
            minute * 10,
            process,
            state_bytes,
            state_bytes,
            &mut [1_000, 2_000],
        )
    }

    fn verdicts(goals: &Goals) -> Vec<(&'static str, Option<bool>)> {
        goals.checked.iter().map(|g| (g.name, g.ok)).collect()
    }

    #[test]
    fn a_flat_soak_meets_every_goal_from_minute_five() {
        // Start-up growth before minute 5 does not count.
        let samples: Vec<Sample> = (1..=20)
            .map(|m| sample(m, if m < 5 { 50 } else { 100 }, 12, 20, 1_000))
            .collect();
        let trips = vec![vec![1_000u32, 1_100]; 20];
        let goals = Goals::check(&samples, &trips, Some(Duration::from_secs(120)), 16);
        assert_eq!((goals.baseline_minute, goals.window_minutes), (5, 10));
        assert_eq!(
            verdicts(&goals),
            vec![
                ("rss", Some(true)),
                ("fds", Some(true)),
                ("threads", Some(true)),
                ("round_trip_p99", Some(true)),
                ("state_flat", Some(true)),
            ]
        );
        assert!(goals.missed().is_empty());
    }

    #[test]
    fn growth_past_the_limits_is_missed() {
        let samples = vec![
            sample(1, 100, 12, 20, 1_000),
            sample(2, 100, 12, 20, 1_000),
            sample(3, 111, 16, 37, 1_200),
            sample(4, 111, 16, 37, 1_200),
        ];
        let trips = vec![vec![1_000], vec![1_000], vec![1_300], vec![1_300]];
        let goals = Goals::check(&samples, &trips, Some(Duration::from_secs(60)), 16);
        // Shorter than 10 minutes: the middle minute is the baseline, the halves the windows.
        assert_eq!((goals.baseline_minute, goals.window_minutes), (2, 2));
        assert_eq!(
            verdicts(&goals),
            vec![
                ("rss", Some(false)),
                ("fds", Some(false)),
                ("threads", Some(false)),
                ("round_trip_p99", Some(false)),
                ("state_flat", Some(false)),
            ]
        );
        assert_eq!(goals.missed().len(), 5);
    }

    #[test]
    fn one_minute_measures_no_trend() {
        let goals = Goals::check(&[sample(1, 100, 12, 20, 1_000)], &[vec![1_000]], None, 16);
        assert_eq!(
            verdicts(&goals),
            vec![
                ("rss", Some(true)),
                ("fds", Some(true)),
                ("threads", Some(true)),
                ("round_trip_p99", None),
            ]
        );
    }
}
