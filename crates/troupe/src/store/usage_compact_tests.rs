//! Usage compaction ([`super::compact`]): every total and bucket the log gives is the same
//! before and after, over random logs.

use std::path::Path;

use proptest::prelude::*;
use troupe_wire::UtcTime;

use super::{compact, read_buckets};
use crate::store::usage::{read_totals, UsageRecord};

fn day_start(day: u32) -> UtcTime {
    UtcTime::parse(&format!("2026-07-{day:02}T00:00:00.000Z")).unwrap()
}

fn arb_record() -> impl Strategy<Value = UsageRecord> {
    (
        (10u32..16, 0u32..24, 0u32..60),
        prop::sample::select(vec!["r1", "r2", "r3"]),
        prop::sample::select(vec!["lead", "alice"]),
        prop::sample::select(vec!["m1", "m2"]),
        prop::sample::select(vec!["turn", "summary"]),
        (0u64..5_000, 0u64..5_000, 0u64..100, 0u64..100),
        any::<bool>(),
    )
        .prop_map(
            |((day, hour, minute), run, agent, model, purpose, (p, c, r, w), estimated)| {
                UsageRecord {
                    at: format!("2026-07-{day:02}T{hour:02}:{minute:02}:00.000Z"),
                    run_id: run.into(),
                    agent: agent.into(),
                    model: model.into(),
                    purpose: purpose.into(),
                    prompt_tokens: p,
                    completion_tokens: c,
                    total_tokens: p + c,
                    cache_read_tokens: r,
                    cache_write_tokens: w,
                    estimated,
                }
            },
        )
}

fn write_log(path: &Path, records: &[UsageRecord]) {
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r).unwrap());
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// Everything a reader prints: totals, buckets, and buckets since each day boundary.
fn readings(path: &Path) -> Vec<String> {
    let mut out = vec![format!("{:?}", read_totals(path).unwrap())];
    out.push(format!("{:?}", read_buckets(path, None).unwrap()));
    for day in 9..18 {
        out.push(format!(
            "{:?}",
            read_buckets(path, Some(day_start(day))).unwrap()
        ));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn totals_and_buckets_are_the_same_after_compaction(
        records in prop::collection::vec(arb_record(), 0..60),
        cut_day in 9u32..18,
        cut_hour in 0u32..24,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("usage.jsonl");
        write_log(&path, &records);
        let before = readings(&path);
        let bytes = std::fs::read(&path).unwrap();
        let cut = UtcTime::parse(&format!("2026-07-{cut_day:02}T{cut_hour:02}:00:00.000Z")).unwrap();

        let dry = compact(&path, cut, true).unwrap();
        prop_assert_eq!(std::fs::read(&path).unwrap(), bytes.clone(), "a dry run changes nothing");

        let done = compact(&path, cut, false).unwrap();
        prop_assert_eq!(dry, done);
        let after = std::fs::read(&path).unwrap();
        prop_assert_eq!(bytes.len() as u64 - done.bytes_removed, after.len() as u64);
        let lines = after.iter().filter(|b| **b == b'\n').count() as u64;
        prop_assert_eq!(lines, done.lines_before - done.lines_removed);
        prop_assert_eq!(readings(&path), before.clone());

        let again = compact(&path, cut, false).unwrap();
        prop_assert_eq!(again.lines_removed, 0, "a second compaction finds nothing more");
        prop_assert_eq!(readings(&path), before);
    }
}

#[test]
fn old_lines_become_per_day_totals_first_then_the_kept_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("usage.jsonl");
    let line = |at: &str, run: &str, p: u64| {
        format!(
            r#"{{"at":"{at}","run_id":"{run}","agent":"lead","model":"m","purpose":"turn","prompt_tokens":{p},"completion_tokens":1,"total_tokens":{}}}"#,
            p + 1
        )
    };
    let text = [
        line("2026-07-10T08:00:00.000Z", "a", 10),
        line("2026-07-10T09:00:00.000Z", "b", 20),
        line("2026-07-10T10:00:00.000Z", "a", 30),
        line("2026-07-12T08:00:00.000Z", "b", 40),
        line("2026-07-10T11:00:00.000Z", "a", 50),
    ]
    .join("\n")
        + "\n";
    std::fs::write(&path, &text).unwrap();
    let done = compact(&path, day_start(11), false).unwrap();
    assert_eq!(done.lines_before, 5);
    assert_eq!(done.lines_removed, 1);
    assert_eq!(done.totals_written, 2);
    let expected = [
        line("2026-07-10T09:00:00.000Z", "b", 20),
        r#"{"at":"2026-07-10T10:00:00.000Z","run_id":"a","agent":"lead","model":"m","purpose":"turn","prompt_tokens":40,"completion_tokens":2,"total_tokens":42,"calls":2}"#.to_owned(),
        line("2026-07-12T08:00:00.000Z", "b", 40),
        line("2026-07-10T11:00:00.000Z", "a", 50),
    ]
    .join("\n")
        + "\n";
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
}

#[test]
fn an_append_waiting_for_the_compaction_lands_in_the_new_log() {
    let dir = tempfile::tempdir().unwrap();
    let layout = crate::layout::Layout::new(dir.path());
    std::fs::create_dir_all(layout.state_dir()).unwrap();
    let path = layout.usage_log();
    let record = |at: &str| UsageRecord {
        at: at.into(),
        run_id: "r".into(),
        agent: "lead".into(),
        model: "m".into(),
        purpose: "turn".into(),
        prompt_tokens: 1,
        completion_tokens: 1,
        total_tokens: 2,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        estimated: false,
    };
    let old: Vec<_> = (0..50)
        .map(|_| record("2026-07-10T08:00:00.000Z"))
        .collect();
    write_log(&path, &old);
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let layout = layout.clone();
            let new = record("2026-07-20T08:00:00.000Z");
            std::thread::spawn(move || {
                let clock = std::sync::Arc::new(crate::clock::ManualClock::new(day_start(20)));
                let log = crate::store::usage::UsageLog::open(&layout, clock);
                for _ in 0..50 {
                    log.append_line(&new).unwrap();
                }
            })
        })
        .collect();
    for _ in 0..20 {
        compact(&path, day_start(15), false).unwrap();
    }
    for w in writers {
        w.join().unwrap();
    }
    compact(&path, day_start(15), false).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 201, "the 50 old lines became one");
    assert!(
        text.lines().next().unwrap().contains(r#""calls":50"#),
        "{text}"
    );
    let totals = read_totals(&path).unwrap();
    assert_eq!(
        totals.total.prompt_tokens, 250,
        "no line lost: 50 old + 200 appended"
    );
}

#[test]
fn a_follower_of_the_log_starts_again_when_compaction_replaced_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("usage.jsonl");
    let record = |at: &str| UsageRecord {
        at: at.into(),
        run_id: "r".into(),
        agent: "lead".into(),
        model: "m".into(),
        purpose: "turn".into(),
        prompt_tokens: 5,
        completion_tokens: 0,
        total_tokens: 5,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        estimated: false,
    };
    let old: Vec<_> = (0..4).map(|_| record("2026-07-10T08:00:00.000Z")).collect();
    write_log(&path, &old);
    let (mut offset, mut file) = (0, None);
    let mut seen = 0;
    let whole =
        crate::store::usage::for_each_record_after(&path, &mut offset, &mut file, |r, _| {
            seen += r.prompt_tokens
        });
    assert!(whole.unwrap());
    assert_eq!(seen, 20);
    // Compacted and appended to until it is longer than the follower's offset again.
    compact(&path, day_start(15), false).unwrap();
    for _ in 0..4 {
        let mut line = serde_json::to_vec(&record("2026-07-20T08:00:00.000Z")).unwrap();
        line.push(b'\n');
        crate::store::journal::append(&path, &line).unwrap();
    }
    assert!(std::fs::metadata(&path).unwrap().len() > offset);
    let whole =
        crate::store::usage::for_each_record_after(&path, &mut offset, &mut file, |_, _| {
            panic!("a replaced log is not read on from the old offset")
        });
    assert!(!whole.unwrap(), "replaced: start again");
}
