//! Expressions, zones and next fire times, across daylight-saving changes.

use pretty_assertions::assert_eq;
use troupe::cron::{CronSchedule, ScheduleError};
use troupe::error::ErrorCode;
use troupe::wire::UtcTime;

use super::at;

/// The first `n` fire times after `start`, each computed from the previous fire.
fn fires(schedule: &CronSchedule, start: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut after: UtcTime = at(start);
    for _ in 0..n {
        after = schedule.next_after(after).unwrap();
        out.push(format!("{after} {}", schedule.local_time(after)));
    }
    out
}

#[test]
fn spring_forward_fires_a_skipped_fixed_time_once_right_after_the_gap() {
    // Europe/Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist that
    // day. The job fires at 03:00 CEST (01:00 UTC), once, and is back to 02:30 the next day.
    let s = CronSchedule::parse("30 2 * * *", "Europe/Berlin").unwrap();
    assert_eq!(
        fires(&s, "2026-03-27T12:00:00.000Z", 3),
        vec![
            "2026-03-28T01:30:00.000Z 2026-03-28T02:30:00.000+01:00",
            "2026-03-29T01:00:00.000Z 2026-03-29T03:00:00.000+02:00",
            "2026-03-30T00:30:00.000Z 2026-03-30T02:30:00.000+02:00",
        ]
    );
}

#[test]
fn spring_forward_gap_has_no_fires_for_stepped_jobs() {
    let s = CronSchedule::parse("*/30 * * * *", "Europe/Berlin").unwrap();
    assert_eq!(
        fires(&s, "2026-03-29T00:15:00.000Z", 3),
        vec![
            "2026-03-29T00:30:00.000Z 2026-03-29T01:30:00.000+01:00",
            "2026-03-29T01:00:00.000Z 2026-03-29T03:00:00.000+02:00",
            "2026-03-29T01:30:00.000Z 2026-03-29T03:30:00.000+02:00",
        ]
    );
}

#[test]
fn fall_back_fires_a_fixed_time_once_at_the_first_pass() {
    // Europe/Berlin, 2026-10-25: 03:00 CEST goes back to 02:00 CET, so 02:30 happens at 00:30
    // UTC and again at 01:30 UTC. The job fires only at the first; the next is the 26th.
    let s = CronSchedule::parse("30 2 * * *", "Europe/Berlin").unwrap();
    assert_eq!(
        fires(&s, "2026-10-24T12:00:00.000Z", 2),
        vec![
            "2026-10-25T00:30:00.000Z 2026-10-25T02:30:00.000+02:00",
            "2026-10-26T01:30:00.000Z 2026-10-26T02:30:00.000+01:00",
        ]
    );
    // Planned from inside the repeated hour (a late fire), the second pass is not a fire either.
    assert_eq!(
        s.next_after(at("2026-10-25T00:45:00.000Z")).unwrap(),
        at("2026-10-26T01:30:00.000Z")
    );
}

#[test]
fn fall_back_repeats_stepped_jobs_in_both_passes() {
    let s = CronSchedule::parse("*/30 * * * *", "Europe/Berlin").unwrap();
    assert_eq!(
        fires(&s, "2026-10-24T23:45:00.000Z", 5),
        vec![
            "2026-10-25T00:00:00.000Z 2026-10-25T02:00:00.000+02:00",
            "2026-10-25T00:30:00.000Z 2026-10-25T02:30:00.000+02:00",
            "2026-10-25T01:00:00.000Z 2026-10-25T02:00:00.000+01:00",
            "2026-10-25T01:30:00.000Z 2026-10-25T02:30:00.000+01:00",
            "2026-10-25T02:00:00.000Z 2026-10-25T03:00:00.000+01:00",
        ]
    );
}

#[test]
fn weekly_expression_keeps_its_wall_clock_time_across_a_dst_change() {
    // 2026-07-30 is a Thursday.
    let monday = CronSchedule::parse("0 9 * * MON", "Europe/Berlin").unwrap();
    assert_eq!(
        fires(&monday, "2026-07-30T08:00:00.000Z", 2),
        vec![
            "2026-08-03T07:00:00.000Z 2026-08-03T09:00:00.000+02:00",
            "2026-08-10T07:00:00.000Z 2026-08-10T09:00:00.000+02:00",
        ]
    );
    let sunday = CronSchedule::parse("0 9 * * 0", "Europe/Berlin").unwrap();
    assert_eq!(
        fires(&sunday, "2026-10-12T00:00:00.000Z", 3),
        vec![
            "2026-10-18T07:00:00.000Z 2026-10-18T09:00:00.000+02:00",
            "2026-10-25T08:00:00.000Z 2026-10-25T09:00:00.000+01:00",
            "2026-11-01T08:00:00.000Z 2026-11-01T09:00:00.000+01:00",
        ]
    );
}

#[test]
fn zones_matter() {
    let now = at("2026-07-30T08:00:00.000Z");
    let utc = CronSchedule::parse("0 9 * * *", "UTC").unwrap();
    let tokyo = CronSchedule::parse("0 9 * * *", "Asia/Tokyo").unwrap();
    let new_york = CronSchedule::parse("0 9 * * *", "America/New_York").unwrap();
    assert_eq!(utc.next_after(now).unwrap(), at("2026-07-30T09:00:00.000Z"));
    assert_eq!(
        tokyo.next_after(now).unwrap(),
        at("2026-07-31T00:00:00.000Z")
    );
    assert_eq!(
        new_york.next_after(now).unwrap(),
        at("2026-07-30T13:00:00.000Z")
    );
    assert_eq!(tokyo.timezone(), "Asia/Tokyo");
}

#[test]
fn invalid_expressions_are_refused_as_invalid_arguments() {
    let cases = [
        ("* * * *", "it has 4 fields"),
        ("0 * * * * *", "it has 6 fields"),
        ("0 0 * * * * 2027", "it has 7 fields"),
        ("", "it has 0 fields"),
        ("@daily", "it has 1 fields"),
        ("@daily * * * *", "the minute field contains '@'"),
        ("60 * * * *", ""),
        ("* 24 * * *", ""),
        ("* * 0 * *", ""),
        ("* * 32 * *", ""),
        ("* * * 13 *", ""),
        ("* * * * 8", ""),
        ("-1 * * * *", ""),
        ("a b c d e", ""),
        ("*/0 * * * *", ""),
    ];
    for (expression, reason) in cases {
        let err = CronSchedule::parse(expression, "UTC").unwrap_err();
        assert_eq!(err.code(), "invalid_arguments", "{expression:?}");
        let message = err.to_string();
        assert!(
            message.starts_with(&format!(
                "invalid cron expression {:?}: ",
                expression.trim()
            )),
            "{message}"
        );
        assert!(message.contains(reason), "{expression:?}: {message}");
        assert!(
            message.contains("minute hour day-of-month month day-of-week"),
            "{message}"
        );
    }
}

#[test]
fn unknown_zones_are_refused_as_invalid_arguments() {
    for zone in [
        "Mars/Olympus",
        "europe/berlin",
        "",
        "Berlin",
        "+02:00",
        "CEST",
    ] {
        let err = CronSchedule::parse("0 9 * * *", zone).unwrap_err();
        assert_eq!(err, ScheduleError::UnknownTimeZone(zone.to_owned()));
        assert_eq!(err.code(), "invalid_arguments");
        assert!(err.to_string().contains("IANA"), "{err}");
    }
}

#[test]
fn accepted_syntax() {
    for expression in [
        "*/15 9-17 * * MON-FRI",
        "0 0 1,15 * *",
        "5-59/10 * * * *",
        "0 12 * JAN,JUL sun",
        "  0 9 * * *  ",
    ] {
        assert!(
            CronSchedule::parse(expression, "UTC").is_ok(),
            "{expression:?}"
        );
    }
}

#[test]
fn an_expression_that_never_matches_has_no_next_fire() {
    let s = CronSchedule::parse("0 0 31 2 *", "UTC").unwrap();
    let err = s.next_after(at("2026-07-30T08:00:00.000Z")).unwrap_err();
    assert_eq!(err.code(), "cron_never_fires");
}
