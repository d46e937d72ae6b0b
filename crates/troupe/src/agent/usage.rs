//! Counting the tokens a run spends: every model response's usage, per agent, for this run and
//! in `.troupe/usage.jsonl` for later.
//!
//! The runner is handed a [`UsageSink`] and reports each response to it; what a sink does with
//! it is not the runner's concern. [`RunUsage`] appends a record to the workspace's log and keeps
//! this run's sums in memory (the run's closing line, a `--max-tokens` budget) and, given a
//! price table, this run's estimated cost (a `--max-cost` budget); [`NoUsage`] is for callers
//! that count nothing. Recording never fails a turn: a log that cannot be written is a warning,
//! and the in-memory sums still count, so a budget still holds.

use std::collections::BTreeSet;
use std::sync::Mutex;

use troupe_wire::AgentName;

use crate::model::{ModelResponse, Purpose, Usage};
use crate::prices::{Cost, PriceTable};
use crate::store::usage::{UsageLog, UsageRecord};

/// Where a runner reports the usage of each model response.
#[async_trait::async_trait]
pub trait UsageSink: Send + Sync {
    /// Records `response`'s usage for `agent`. A response without usage records nothing.
    async fn record(&self, agent: &AgentName, purpose: Purpose, response: &ModelResponse);
    /// Total tokens (prompt and completion) recorded so far in this run.
    fn run_total(&self) -> u64;
    /// This run's sums per agent, in the order the agents first used the model.
    fn per_agent(&self) -> Vec<(AgentName, Usage)>;
    /// The estimated cost of the calls recorded so far in this run (zero for a sink that prices
    /// nothing).
    fn run_cost(&self) -> Cost {
        Cost::ZERO
    }
}

/// A run's usage: logged to `.troupe/usage.jsonl` and summed per agent in memory. Shared by all
/// the run's agents (it is `Sync`).
pub struct RunUsage {
    run_id: String,
    log: UsageLog,
    /// Per agent in first-use order (the lead first, normally); a handful of entries.
    sums: Mutex<Vec<(AgentName, Usage)>>,
    /// The prices this run's cost is estimated with; none: its cost is not counted.
    prices: Option<PriceTable>,
    spend: Mutex<Spend>,
}

/// What this run's calls are estimated to have cost.
#[derive(Default)]
struct Spend {
    cost: Cost,
    /// The models that answered without a price (counted as 0), each warned about once.
    unpriced: BTreeSet<String>,
}

impl RunUsage {
    pub fn new(run_id: impl Into<String>, log: UsageLog) -> Self {
        Self {
            run_id: run_id.into(),
            log,
            sums: Mutex::new(Vec::new()),
            prices: None,
            spend: Mutex::new(Spend::default()),
        }
    }

    /// Also counts this run's estimated cost with `prices` (for a cost budget). A model with no
    /// price counts 0, with a warning the first time it answers.
    pub fn with_prices(mut self, prices: PriceTable) -> Self {
        self.prices = Some(prices);
        self
    }

    fn add_cost(&self, model: &str, usage: Usage) {
        let Some(prices) = &self.prices else {
            return;
        };
        let found = prices
            .lookup(model)
            .map(|f| f.price.cost_of(&counts(usage)));
        let mut spend = crate::sync::lock(&self.spend);
        match found {
            Some(cost) => spend.cost = spend.cost.plus(cost),
            None => {
                if spend.unpriced.insert(model.to_owned()) {
                    tracing::warn!(
                        model,
                        "model {model:?} has no price: its tokens count 0 toward the run's cost \
                         budget (set [prices.\"{model}\"] in troupe.toml)"
                    );
                }
            }
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }
}

#[async_trait::async_trait]
impl UsageSink for RunUsage {
    async fn record(&self, agent: &AgentName, purpose: Purpose, response: &ModelResponse) {
        let Some(usage) = response.usage else {
            return;
        };
        {
            let mut sums = crate::sync::lock(&self.sums);
            match sums.iter_mut().find(|(name, _)| name == agent) {
                Some((_, sum)) => add(sum, usage),
                None => sums.push((agent.clone(), usage)),
            }
        }
        self.add_cost(&response.model, usage);
        let record = UsageRecord {
            at: self.log.now(),
            run_id: self.run_id.clone(),
            agent: agent.to_string(),
            model: response.model.clone(),
            purpose: purpose.as_str().to_owned(),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.total_tokens,
            cache_read_tokens: usage.cache_read_tokens,
            cache_write_tokens: usage.cache_write_tokens,
            estimated: usage.estimated,
        };
        // The append runs off the async threads; a shared team's copy is awaited.
        if let Err(error) = self.log.append(&record).await {
            tracing::warn!(%agent, %error, "could not record token usage; this run still counts it");
        }
    }

    fn run_total(&self) -> u64 {
        crate::sync::lock(&self.sums)
            .iter()
            .fold(0u64, |total, (_, usage)| {
                total.saturating_add(usage.total_tokens)
            })
    }

    fn per_agent(&self) -> Vec<(AgentName, Usage)> {
        crate::sync::lock(&self.sums).clone()
    }

    fn run_cost(&self) -> Cost {
        crate::sync::lock(&self.spend).cost
    }
}

/// A response's usage as the log counts it.
fn counts(usage: Usage) -> crate::store::usage::TokenCounts {
    crate::store::usage::TokenCounts {
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        total_tokens: usage.total_tokens,
        cache_read_tokens: usage.cache_read_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        estimated_tokens: if usage.estimated {
            usage.total_tokens
        } else {
            0
        },
    }
}

/// A sink that records nothing: every total is zero.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoUsage;

#[async_trait::async_trait]
impl UsageSink for NoUsage {
    async fn record(&self, _agent: &AgentName, _purpose: Purpose, _response: &ModelResponse) {}

    fn run_total(&self) -> u64 {
        0
    }

    fn per_agent(&self) -> Vec<(AgentName, Usage)> {
        Vec::new()
    }
}

fn add(sum: &mut Usage, usage: Usage) {
    sum.prompt_tokens = sum.prompt_tokens.saturating_add(usage.prompt_tokens);
    sum.completion_tokens = sum
        .completion_tokens
        .saturating_add(usage.completion_tokens);
    sum.total_tokens = sum.total_tokens.saturating_add(usage.total_tokens);
    sum.cache_read_tokens = sum
        .cache_read_tokens
        .saturating_add(usage.cache_read_tokens);
    sum.cache_write_tokens = sum
        .cache_write_tokens
        .saturating_add(usage.cache_write_tokens);
    sum.estimated |= usage.estimated;
}

/// The line a run ends with:
/// `tokens: lead 1,234 in / 56 out · writer 300 in / 20 out · total 1,610`
/// (`tokens: none reported` when nothing was counted; `tokens (some estimated): …` when a server
/// reported no usage for some call and troupe estimated it).
pub fn render_closing_line(per_agent: &[(AgentName, Usage)]) -> String {
    if per_agent.is_empty() {
        return "tokens: none reported".to_owned();
    }
    let mut parts: Vec<String> = per_agent
        .iter()
        .map(|(agent, usage)| {
            format!(
                "{agent} {} in / {} out",
                thousands(usage.prompt_tokens),
                thousands(usage.completion_tokens)
            )
        })
        .collect();
    let total = per_agent.iter().fold(0u64, |total, (_, usage)| {
        total.saturating_add(usage.total_tokens)
    });
    parts.push(format!("total {}", thousands(total)));
    let label = if per_agent.iter().any(|(_, usage)| usage.estimated) {
        "tokens (some estimated)"
    } else {
        "tokens"
    };
    format!("{label}: {}", parts.join(" · "))
}

/// `1234567` as `1,234,567`.
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}
