use pretty_assertions::assert_eq;

use super::*;
use crate::prices::report::{GroupBy, UsageReport};

/// 08:00:00 on 2026-07-30 plus `seconds`, as the log writes it.
fn time(seconds: i64) -> UtcTime {
    let start = UtcTime::parse("2026-07-30T08:00:00.000Z").unwrap();
    UtcTime::from_unix_millis(start.unix_millis() + seconds * 1000).unwrap()
}

fn record(agent: &str, model: &str, prompt: u64, completion: u64, seconds: i64) -> UsageRecord {
    UsageRecord {
        at: time(seconds).to_string(),
        run_id: "r".into(),
        agent: agent.into(),
        model: model.into(),
        purpose: "turn".into(),
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        estimated: false,
    }
}

fn fold(max_points: usize, records: &[UsageRecord]) -> CostSeries {
    let mut series = CostSeries::new(PriceTable::built_in(), max_points);
    for r in records {
        series.add(r, UtcTime::parse(&r.at).unwrap());
    }
    series
}

fn usd(v: f64) -> Cost {
    Cost::from_usd(v).unwrap()
}

#[test]
fn the_points_stay_bounded_however_many_records() {
    let records: Vec<UsageRecord> = (0..10_000)
        .map(|i| record(["lead", "writer"][(i % 2) as usize], "gpt-4.1", 1000, 10, i))
        .collect();
    let series = fold(50, &records);
    let n = series.points().len();
    // Each doubling halves the points: never more than the bound, never fewer than half.
    assert!((25..=50).contains(&n), "{n} points");
    assert_eq!(series.slot_ms(), 256_000);
    // The last point still ends at the last record.
    assert_eq!(series.points().last().unwrap().at, time(9_999));
}

/// A point as compared: its time, its total and each agent's cost.
type Shown = (UtcTime, Cost, Vec<(String, Cost)>);

#[test]
fn one_point_per_slot_while_under_the_bound() {
    let series = fold(
        10,
        &[
            record("lead", "gpt-4.1", 1_000_000, 0, 0),
            record("lead", "gpt-4.1", 0, 0, 0),
            record("writer", "gpt-4.1", 0, 1_000_000, 60),
            record("lead", "gpt-4.1", 500_000, 0, 120),
        ],
    );
    let shown: Vec<Shown> = series
        .points()
        .iter()
        .map(|p| (p.at, p.total, p.agents.clone().into_iter().collect()))
        .collect();
    assert_eq!(
        shown,
        vec![
            (time(0), usd(2.0), vec![("lead".into(), usd(2.0))]),
            (
                time(60),
                usd(10.0),
                vec![("lead".into(), usd(2.0)), ("writer".into(), usd(8.0))]
            ),
            (
                time(120),
                usd(11.0),
                vec![("lead".into(), usd(3.0)), ("writer".into(), usd(8.0))]
            ),
        ]
    );
}

#[test]
fn the_series_is_cumulative_and_never_goes_back_in_time() {
    let mut records: Vec<UsageRecord> = (0..500)
        .map(|i: i64| record("lead", "gpt-4.1-mini", 7_000 + i as u64, 300, i * 3))
        .collect();
    // Another process's clock is behind: its record counts at the latest time seen.
    records.push(record("writer", "gpt-4.1", 1000, 1000, 5));
    let series = fold(40, &records);
    let points = series.points();
    for pair in points.windows(2) {
        assert!(pair[0].at <= pair[1].at, "{pair:?}");
        assert!(pair[0].total <= pair[1].total, "{pair:?}");
        for (agent, cost) in &pair[0].agents {
            assert!(pair[1].agents.get(agent).is_some_and(|c| c >= cost));
        }
    }
    assert_eq!(points.last().unwrap().at, time(499 * 3));
    assert!(points.last().unwrap().agents.contains_key("writer"));
}

#[test]
fn the_last_total_is_the_sum_of_the_agents_costs_troupe_usage_shows() {
    let records: Vec<UsageRecord> = (0..3_000)
        .map(|i| {
            let (agent, model) = [
                ("lead", "gpt-4.1"),
                ("writer", "gpt-4.1-2025-04-14"),
                ("writer", "gpt-4.1-mini"),
                ("reviewer", "claude-sonnet-4-5"),
            ][(i % 4) as usize];
            // Across two UTC days, so that an agent's cost is several buckets'.
            record(agent, model, 1_234 + i as u64, 77, i * 60)
        })
        .collect();
    let series = fold(64, &records);
    let report = UsageReport::new(series.buckets(), GroupBy::Agent, &PriceTable::built_in());
    let per_agent: BTreeMap<String, Cost> = report
        .groups
        .iter()
        .map(|g| (g.key.clone(), g.line.cost.unwrap()))
        .collect();
    let last = series.points().last().unwrap();
    assert_eq!(last.agents, per_agent);
    assert_eq!(series.total(), report.total.cost);
    assert_eq!(Some(last.total), Some(per_agent.values().copied().sum()));
}

#[test]
fn a_model_with_no_price_counts_nowhere_and_is_named() {
    let series = fold(
        10,
        &[
            record("lead", "gpt-4.1", 1_000_000, 0, 0),
            record("lead", "local", 5, 5, 10),
            record("helper", "local", 7, 3, 20),
        ],
    );
    assert_eq!(series.points().len(), 1);
    assert_eq!(series.total(), Some(usd(2.0)));
    assert_eq!(series.unpriced_models().collect::<Vec<_>>(), ["local"]);
    let report = UsageReport::new(series.buckets(), GroupBy::Agent, &PriceTable::built_in());
    let helper = report.groups.iter().find(|g| g.key == "helper").unwrap();
    assert_eq!(helper.line.cost, None);
    assert!(!series.points()[0].agents.contains_key("helper"));
}

#[test]
fn no_priced_record_no_points() {
    let series = fold(10, &[record("lead", "local", 5, 5, 0)]);
    assert_eq!(series.points(), &[]);
    assert_eq!(series.total(), None);
}
