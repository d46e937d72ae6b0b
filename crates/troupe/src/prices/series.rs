//! Cost over time: what a team's model calls are estimated to have cost so far, cumulative, per
//! agent and in total, at a bounded number of points however long the run — the page's chart
//! (`troupe serve`).
//!
//! A [`CostSeries`] folds usage records one at a time, in the order they were appended. It keeps
//! the records summed per agent, model and day ([`UsageBuckets`], the input of
//! [`UsageReport`](super::report::UsageReport)), so the per-agent costs shown beside the chart
//! are computed from the very sums the chart's last point is: the last point's total is the sum
//! of the agents' costs, exactly (costs are integers).
//!
//! Time is cut into equal slots from the first record on, one point per slot that had a record
//! (its cumulative costs after the slot's last record). When there would be more than
//! `max_points` points, the slots double in width and each pair of points becomes one (the later
//! one: the costs are cumulative). A record stamped before one already folded (another process's
//! clock, a shared team's order) counts at the latest time seen, so the series never goes back.
//! Tokens of a model with no price count nowhere in the series; such models are named.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use troupe_wire::UtcTime;

use super::{Cost, PriceTable};
use crate::store::usage::{BucketKey, UsageBuckets, UsageRecord};

/// How wide a slot is before any doubling: one second.
const FIRST_SLOT_MS: i64 = 1000;

/// One point of the series: the cumulative estimated costs at `at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Point {
    /// The time of the last record folded into this point.
    pub at: UtcTime,
    /// Every agent's cost so far, in USD (micro-dollars in JSON); agents with no priced tokens
    /// yet are absent.
    pub agents: BTreeMap<String, Cost>,
    /// The sum of `agents`.
    #[serde(rename = "total_usd")]
    pub total: Cost,
    /// The slot this point stands for (from the first record's slot), at the current width.
    #[serde(skip)]
    slot: i64,
}

/// The fold: usage summed per bucket, and the points of cost over time.
#[derive(Debug, Clone)]
pub struct CostSeries {
    prices: PriceTable,
    /// The most points kept (at least 2).
    max_points: usize,
    /// Every record folded, summed per agent, model and day: what per-agent costs are made of.
    buckets: UsageBuckets,
    /// Each agent's cost now, kept so that a record costs one agent's sum, not the whole team's.
    agents: BTreeMap<String, Cost>,
    /// The models that answered with no price.
    unpriced: BTreeSet<String>,
    /// The start of the first slot (unix milliseconds); none before the first record.
    start_ms: Option<i64>,
    /// The width of a slot now, in milliseconds.
    slot_ms: i64,
    /// The latest record time seen (unix milliseconds): a late record counts here.
    latest_ms: i64,
    points: Vec<Point>,
}

impl CostSeries {
    /// An empty series pricing tokens with `prices`, keeping at most `max_points` points (2 when
    /// given less).
    pub fn new(prices: PriceTable, max_points: usize) -> Self {
        Self {
            prices,
            max_points: max_points.max(2),
            buckets: UsageBuckets::default(),
            agents: BTreeMap::new(),
            unpriced: BTreeSet::new(),
            start_ms: None,
            slot_ms: FIRST_SLOT_MS,
            latest_ms: i64::MIN,
            points: Vec::new(),
        }
    }

    /// Folds one record, stamped `at` (its `at` field, parsed by the caller, who reports one
    /// that does not parse).
    pub fn add(&mut self, record: &UsageRecord, at: UtcTime) {
        let key = BucketKey {
            agent: record.agent.clone(),
            model: record.model.clone(),
            day: record.at.get(..10).unwrap_or_default().to_owned(),
        };
        self.buckets.add(key, record.counts());
        if self.prices.lookup(&record.model).is_none() {
            self.unpriced.insert(record.model.clone());
            return;
        }
        let cost: Cost = self
            .buckets
            .buckets
            .iter()
            .filter(|(key, _)| key.agent == record.agent)
            .filter_map(|(key, counts)| {
                let found = self.prices.lookup(&key.model)?;
                Some(found.price.cost_of(counts))
            })
            .sum();
        self.agents.insert(record.agent.clone(), cost);
        let (at_ms, at) = if at.unix_millis() < self.latest_ms {
            let latest = self.points.last().map_or(at, |p| p.at);
            (self.latest_ms, latest)
        } else {
            (at.unix_millis(), at)
        };
        self.latest_ms = at_ms;
        let start = *self
            .start_ms
            .get_or_insert(at_ms - at_ms.rem_euclid(FIRST_SLOT_MS));
        let slot = (at_ms - start) / self.slot_ms;
        let point = Point {
            at,
            agents: self.agents.clone(),
            total: self.agents.values().copied().sum(),
            slot,
        };
        match self.points.last_mut() {
            Some(last) if last.slot == slot => *last = point,
            _ => self.points.push(point),
        }
        while self.points.len() > self.max_points {
            self.widen();
        }
    }

    /// Doubles the slots' width, merging each pair of points into the later one.
    fn widen(&mut self) {
        self.slot_ms = self.slot_ms.saturating_mul(2);
        let mut merged: Vec<Point> = Vec::with_capacity(self.points.len());
        for mut point in self.points.drain(..) {
            point.slot /= 2;
            match merged.last_mut() {
                Some(last) if last.slot == point.slot => *last = point,
                _ => merged.push(point),
            }
        }
        self.points = merged;
    }

    /// Every record folded so far, summed per agent, model and day.
    pub fn buckets(&self) -> &UsageBuckets {
        &self.buckets
    }

    /// The points, oldest first.
    pub fn points(&self) -> &[Point] {
        &self.points
    }

    /// The width of a slot now, in milliseconds.
    pub fn slot_ms(&self) -> i64 {
        self.slot_ms
    }

    /// The models whose tokens have no price, by name.
    pub fn unpriced_models(&self) -> impl Iterator<Item = &str> {
        self.unpriced.iter().map(String::as_str)
    }

    /// The total so far: the last point's; none before any priced record.
    pub fn total(&self) -> Option<Cost> {
        self.points.last().map(|p| p.total)
    }
}

#[cfg(test)]
mod tests;
