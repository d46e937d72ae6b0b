//! What model calls cost, as an **estimate** (SPEC §14): a price table that ships with troupe,
//! the settings' `[prices]` laid over it, and exact arithmetic on token counts.
//!
//! - [`table`]: the built-in list prices of common OpenAI and Anthropic models, and where they
//!   come from.
//! - [`cost`]: [`Rate`] (a price per million tokens), [`Price`] (the four rates of a model) and
//!   [`Cost`] (an amount of US dollars): integers, so sums never drift.
//! - [`report`]: usage grouped by agent, model or day with each group's cost (`troupe usage`).
//! - [`series`]: cost over time, cumulative per agent and in total, at a bounded number of
//!   points (the chart of `troupe serve`'s page).
//!
//! # Finding a model's price
//!
//! A model answers under the name its server gives (`gpt-4.1-2025-04-14`,
//! `claude-sonnet-4-5-20250929`). [`PriceTable::lookup`] tries, in order, each of these names
//! and stops at the first one priced — by the settings first, then by the built-in table:
//!
//! 1. the name exactly as recorded;
//! 2. without a provider prefix: everything up to the last `/` (`openai/gpt-4.1` → `gpt-4.1`);
//! 3. then without a snapshot suffix: a date `-YYYY-MM-DD` (OpenAI) or `-YYYYMMDD` (Anthropic),
//!    or `-latest` (`claude-sonnet-4-5-20250929` → `claude-sonnet-4-5`).
//!
//! Nothing else is guessed: `gpt-4.1-mini` is never priced as `gpt-4.1`. A model none of these
//! names finds has no price; reports show its tokens and "no price", and a cost budget counts it
//! as 0 (and says so once).

pub mod cost;
pub mod report;
pub mod series;
pub mod table;

use std::collections::BTreeMap;

pub use cost::{Cost, Price, Rate, MAX_USD};

/// The prices troupe estimates with: the built-in table, with the settings' entries over it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriceTable {
    /// The settings' `[prices]`, by model name; they win over the built-in table at every step
    /// of the lookup.
    overrides: BTreeMap<String, Price>,
}

/// A model's price and the name it was found under (`gpt-4.1` for `gpt-4.1-2025-04-14`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found<'a> {
    pub name: &'a str,
    pub price: Price,
}

impl PriceTable {
    /// The built-in table alone.
    pub fn built_in() -> Self {
        Self::default()
    }

    /// The built-in table with `overrides` (model name → price) over it.
    pub fn with_overrides<'a>(overrides: impl IntoIterator<Item = (&'a str, Price)>) -> Self {
        Self {
            overrides: overrides
                .into_iter()
                .map(|(name, price)| (name.to_owned(), price))
                .collect(),
        }
    }

    /// The price of `model`, by the rule in the module docs; `None` when it has none.
    pub fn lookup<'m>(&self, model: &'m str) -> Option<Found<'m>> {
        candidates(model).find_map(|name| {
            let price = self
                .overrides
                .get(name)
                .copied()
                .or_else(|| table::built_in(name))?;
            Some(Found { name, price })
        })
    }
}

/// The names [`PriceTable::lookup`] tries for `model`, in order (each at most once).
fn candidates(model: &str) -> impl Iterator<Item = &str> {
    let bare = model.rsplit('/').next().unwrap_or(model);
    let undated = strip_snapshot(bare);
    let mut names = vec![model];
    for name in [bare, undated] {
        if names.last() != Some(&name) {
            names.push(name);
        }
    }
    names.into_iter()
}

/// `name` without a trailing `-YYYY-MM-DD`, `-YYYYMMDD` or `-latest`.
fn strip_snapshot(name: &str) -> &str {
    if let Some(head) = name.strip_suffix("-latest") {
        return head;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // `-YYYYMMDD`: 9 bytes.
    if let Some((head, tail)) = name.rsplit_once('-') {
        if tail.len() == 8 && digits(tail) && !head.is_empty() {
            return head;
        }
    }
    // `-YYYY-MM-DD`: three dash-separated groups of 4, 2 and 2 digits.
    let mut parts = name.rsplitn(4, '-');
    if let (Some(day), Some(month), Some(year), Some(head)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    {
        if day.len() == 2
            && month.len() == 2
            && year.len() == 4
            && digits(day)
            && digits(month)
            && digits(year)
            && !head.is_empty()
        {
            return head;
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn found(table: &PriceTable, model: &str) -> Option<(String, Price)> {
        table
            .lookup(model)
            .map(|found| (found.name.to_owned(), found.price))
    }

    fn price(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Price {
        Price::from_usd_per_million(input, output, cache_read, cache_write).unwrap()
    }

    #[test]
    fn exact_names_then_without_provider_then_without_snapshot() {
        let table = PriceTable::built_in();
        let sonnet = price(3.0, 15.0, 0.30, 3.75);
        let gpt = price(2.0, 8.0, 0.50, 2.0);
        assert_eq!(
            found(&table, "claude-sonnet-4-5"),
            Some(("claude-sonnet-4-5".into(), sonnet))
        );
        assert_eq!(
            found(&table, "claude-sonnet-4-5-20250929"),
            Some(("claude-sonnet-4-5".into(), sonnet))
        );
        assert_eq!(
            found(&table, "gpt-4.1-2025-04-14"),
            Some(("gpt-4.1".into(), gpt))
        );
        assert_eq!(
            found(&table, "openai/gpt-4.1"),
            Some(("gpt-4.1".into(), gpt))
        );
        assert_eq!(
            found(&table, "anthropic/claude-3-7-sonnet-latest"),
            Some(("claude-3-7-sonnet".into(), sonnet))
        );
    }

    #[test]
    fn nothing_else_is_guessed() {
        let table = PriceTable::built_in();
        for model in [
            "scripted",
            "gpt-4.1-mini-x",
            "gpt-4.1-20250414x",
            "gpt-4.1-2025-4-14",
            "-20250929",
            "",
            "llama3:8b",
        ] {
            assert_eq!(found(&table, model), None, "{model}");
        }
        // A smaller model is its own entry, never its bigger sibling's.
        assert_eq!(
            found(&table, "gpt-4.1-mini").map(|(name, _)| name),
            Some("gpt-4.1-mini".to_owned())
        );
    }

    #[test]
    fn settings_win_at_every_step_and_price_new_models() {
        let mine = price(1.0, 2.0, 0.0, 0.0);
        let table = PriceTable::with_overrides([("gpt-4.1", mine), ("my-model", mine)]);
        assert_eq!(
            found(&table, "gpt-4.1-2025-04-14"),
            Some(("gpt-4.1".into(), mine))
        );
        assert_eq!(
            found(&table, "vllm/my-model"),
            Some(("my-model".into(), mine))
        );
        // An exact built-in name still beats an override of a name found later.
        let dated = PriceTable::with_overrides([("gpt-4.1-2025-04-14", mine)]);
        assert_eq!(
            found(&dated, "gpt-4.1").map(|(_, p)| p),
            Some(price(2.0, 8.0, 0.5, 2.0))
        );
        assert_eq!(
            found(&dated, "gpt-4.1-2025-04-14").map(|(_, p)| p),
            Some(mine)
        );
    }
}
