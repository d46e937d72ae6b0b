//! The backoff computation of `RetryPolicy`, on its own (the loop is tested in `openai`).

use std::time::Duration;

use pretty_assertions::assert_eq;
use troupe::model::RetryPolicy;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn policy(jitter: f64) -> RetryPolicy {
    RetryPolicy {
        max_attempts: 5,
        initial_backoff: ms(100),
        multiplier: 2,
        max_backoff: ms(300),
        jitter,
        max_retry_after: ms(1_000),
    }
}

#[test]
fn default_policy_makes_three_attempts() {
    let default = RetryPolicy::default();
    assert_eq!(default.attempts(), 3);
    assert!(
        default.jitter > 0.0,
        "default retries must not run in lockstep"
    );
}

#[test]
fn backoff_grows_exponentially_and_is_capped() {
    let p = policy(0.0);
    let delays: Vec<_> = (1..=4).map(|n| p.delay_after(n, None, 0.5)).collect();
    assert_eq!(delays, vec![ms(100), ms(200), ms(300), ms(300)]);
}

#[test]
fn jitter_shortens_the_backoff_by_at_most_its_fraction() {
    let p = policy(0.5);
    assert_eq!(p.delay_after(1, None, 0.0), ms(100));
    assert_eq!(p.delay_after(1, None, 0.5), ms(75));
    let near_one = p.delay_after(1, None, 0.999_999);
    assert!(near_one >= ms(50) && near_one < ms(51), "{near_one:?}");
}

#[test]
fn retry_after_replaces_the_backoff_and_is_capped() {
    let p = policy(0.5);
    assert_eq!(p.delay_after(1, Some(ms(700)), 0.9), ms(700));
    assert_eq!(
        p.delay_after(3, Some(Duration::from_secs(3600)), 0.9),
        ms(1_000)
    );
    assert_eq!(p.delay_after(1, Some(Duration::ZERO), 0.9), Duration::ZERO);
}

#[test]
fn zero_attempts_means_one_and_huge_inputs_do_not_panic() {
    let mut p = policy(f64::NAN);
    p.max_attempts = 0;
    assert_eq!(p.attempts(), 1);
    p.max_backoff = Duration::MAX;
    p.multiplier = u32::MAX;
    let delay = p.delay_after(u32::MAX, None, f64::INFINITY);
    // The growth factor saturates at u32::MAX instead of overflowing.
    assert_eq!(delay, ms(100) * u32::MAX);
}

#[test]
fn fixed_policy_waits_the_same_every_time() {
    let p = RetryPolicy::fixed(4, ms(1));
    assert_eq!(p.attempts(), 4);
    for n in 1..4 {
        assert_eq!(p.delay_after(n, None, 0.7), ms(1));
    }
}
