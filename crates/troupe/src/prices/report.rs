//! `troupe usage`'s numbers: usage summed per agent, model and day ([`UsageBuckets`]) grouped
//! by one of them, each group with its tokens and its estimated cost, and the total.
//!
//! A group's cost is the sum of its buckets' costs, each at its own model's price. Tokens of a
//! model with no price count in the tokens but not in the cost: such a group names those models
//! (`unpriced_models`), and its cost is `None` ("no price") when none of its tokens had a price.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Cost, PriceTable};
use crate::store::usage::{BucketKey, TokenCounts, UsageBuckets};

/// What the groups of a report are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    #[default]
    Agent,
    Model,
    /// The UTC day (`YYYY-MM-DD`).
    Day,
}

impl GroupBy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Model => "model",
            Self::Day => "day",
        }
    }

    fn key(self, bucket: &BucketKey) -> &str {
        match self {
            Self::Agent => &bucket.agent,
            Self::Model => &bucket.model,
            Self::Day => &bucket.day,
        }
    }
}

impl std::str::FromStr for GroupBy {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        match raw {
            "agent" => Ok(Self::Agent),
            "model" => Ok(Self::Model),
            "day" => Ok(Self::Day),
            other => Err(format!("expected agent, model or day, not {other:?}")),
        }
    }
}

/// One group's (or the total's) tokens and estimated cost.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Line {
    #[serde(flatten)]
    pub tokens: TokenCounts,
    /// The cost of its priced tokens, in USD (micro-dollars in JSON); `None` when none had a
    /// price.
    #[serde(rename = "cost_usd")]
    pub cost: Option<Cost>,
    /// The models of its tokens that have no price, by name.
    pub unpriced_models: Vec<String>,
}

impl Line {
    fn add(&mut self, counts: TokenCounts, cost: Option<Cost>, model: &str) {
        self.tokens.add(counts);
        match cost {
            Some(cost) => self.cost = Some(self.cost.unwrap_or_default().plus(cost)),
            None => {
                if !self.unpriced_models.iter().any(|m| m == model) {
                    self.unpriced_models.push(model.to_owned());
                    self.unpriced_models.sort();
                }
            }
        }
    }
}

/// A group: its key (an agent, a model or a day) and its line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    pub key: String,
    #[serde(flatten)]
    pub line: Line,
}

/// Usage grouped by [`GroupBy`], in key order, with the total.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsageReport {
    pub by: GroupBy,
    pub groups: Vec<Group>,
    pub total: Line,
}

impl UsageReport {
    pub fn new(buckets: &UsageBuckets, by: GroupBy, prices: &PriceTable) -> Self {
        let mut groups: BTreeMap<&str, Line> = BTreeMap::new();
        let mut total = Line::default();
        for (bucket, counts) in &buckets.buckets {
            let cost = prices
                .lookup(&bucket.model)
                .map(|found| found.price.cost_of(counts));
            groups
                .entry(by.key(bucket))
                .or_default()
                .add(*counts, cost, &bucket.model);
            total.add(*counts, cost, &bucket.model);
        }
        Self {
            by,
            groups: groups
                .into_iter()
                .map(|(key, line)| Group {
                    key: key.to_owned(),
                    line,
                })
                .collect(),
            total,
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::prices::Price;

    fn counts(prompt: u64, completion: u64) -> TokenCounts {
        TokenCounts {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            ..TokenCounts::default()
        }
    }

    fn buckets() -> UsageBuckets {
        let mut buckets = UsageBuckets::default();
        let mut add = |agent: &str, model: &str, day: &str, c| {
            buckets.add(
                BucketKey {
                    agent: agent.into(),
                    model: model.into(),
                    day: day.into(),
                },
                c,
            )
        };
        add("lead", "gpt-4.1", "2026-07-30", counts(1_000_000, 0));
        add("lead", "local", "2026-07-31", counts(5, 5));
        add(
            "writer",
            "gpt-4.1-2025-04-14",
            "2026-07-31",
            counts(0, 1_000_000),
        );
        add(
            "writer",
            "gpt-4.1-mini",
            "2026-07-31",
            counts(1_000_000, 1_000_000),
        );
        add("reviewer", "local", "2026-07-31", counts(7, 3));
        buckets
    }

    fn usd(v: f64) -> Option<Cost> {
        Cost::from_usd(v)
    }

    fn summary(report: &UsageReport) -> Vec<(String, u64, Option<Cost>, Vec<String>)> {
        report
            .groups
            .iter()
            .map(|g| {
                (
                    g.key.clone(),
                    g.line.tokens.total_tokens,
                    g.line.cost,
                    g.line.unpriced_models.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn each_bucket_costs_its_own_models_price_and_groups_add_them() {
        let table = PriceTable::built_in();
        let by_agent = UsageReport::new(&buckets(), GroupBy::Agent, &table);
        // lead: 1M in at $2 (and 10 tokens of a model with no price); writer: 1M out at $8
        // (the dated snapshot) + gpt-4.1-mini's $0.40 + $1.60.
        assert_eq!(
            summary(&by_agent),
            [
                ("lead".into(), 1_000_010, usd(2.0), vec!["local".into()]),
                ("reviewer".into(), 10, None, vec!["local".into()]),
                ("writer".into(), 3_000_000, usd(10.0), vec![]),
            ]
        );
        assert_eq!(by_agent.total.cost, usd(12.0));
        assert_eq!(by_agent.total.tokens.total_tokens, 4_000_020);
        assert_eq!(by_agent.total.unpriced_models, ["local"]);

        let by_model = UsageReport::new(&buckets(), GroupBy::Model, &table);
        assert_eq!(
            summary(&by_model),
            [
                ("gpt-4.1".into(), 1_000_000, usd(2.0), vec![]),
                ("gpt-4.1-2025-04-14".into(), 1_000_000, usd(8.0), vec![]),
                ("gpt-4.1-mini".into(), 2_000_000, usd(2.0), vec![]),
                ("local".into(), 20, None, vec!["local".into()]),
            ]
        );
        let by_day = UsageReport::new(&buckets(), GroupBy::Day, &table);
        assert_eq!(
            summary(&by_day),
            [
                ("2026-07-30".into(), 1_000_000, usd(2.0), vec![]),
                (
                    "2026-07-31".into(),
                    3_000_020,
                    usd(10.0),
                    vec!["local".into()]
                ),
            ]
        );
    }

    #[test]
    fn a_price_from_the_settings_prices_a_model_the_table_does_not_know() {
        let local = Price::from_usd_per_million(1_000_000.0, 0.0, 0.0, 0.0).unwrap();
        let table = PriceTable::with_overrides([("local", local)]);
        let report = UsageReport::new(&buckets(), GroupBy::Agent, &table);
        assert_eq!(report.groups[1].line.cost, usd(7.0));
        assert!(report.total.unpriced_models.is_empty());
        assert_eq!(report.total.cost, usd(12.0 + 12.0));
    }

    #[test]
    fn the_json_shape_is_stable() {
        let report = UsageReport::new(&buckets(), GroupBy::Day, &PriceTable::built_in());
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json["groups"][0],
            serde_json::json!({
                "key": "2026-07-30", "prompt_tokens": 1_000_000, "completion_tokens": 0,
                "total_tokens": 1_000_000, "cache_read_tokens": 0, "cache_write_tokens": 0,
                "cost_usd": 2.0, "unpriced_models": []
            })
        );
        assert_eq!(json["by"], "day");
    }
}
