//! The prices troupe ships: list prices of common OpenAI and Anthropic models, in USD per
//! million tokens, as the providers' pricing pages gave them in November 2025 (the standard tier:
//! not batch, flex or priority; Anthropic's cache writes at the 5-minute rate; Claude Sonnet's
//! long-context surcharge above 200K input tokens is not applied). Prices change: a person
//! whose bill differs sets `[prices]` in the settings, which wins over this table.
//!
//! OpenAI does not charge for writing its prompt cache (its responses report no cache writes),
//! so its models' `cache_write` is the input price; a model without a cache discount has
//! `cache_read` at the input price too.
//!
//! One entry is no provider's: `troupe-demo`, the name the scripted model of `troupe demo`
//! answers under, at a made-up price (nobody bills it) so that the demo's usage shows a cost as
//! a real run's would.

use super::Price;

/// (model, input, output, cache read, cache write), USD per million tokens. Names are the
/// providers' undated ones: a dated snapshot finds its entry by the rule in the module docs.
const PRICES: &[(&str, f64, f64, f64, f64)] = &[
    // OpenAI
    ("gpt-5.1", 1.25, 10.00, 0.125, 1.25),
    ("gpt-5", 1.25, 10.00, 0.125, 1.25),
    ("gpt-5-mini", 0.25, 2.00, 0.025, 0.25),
    ("gpt-5-nano", 0.05, 0.40, 0.005, 0.05),
    ("gpt-4.1", 2.00, 8.00, 0.50, 2.00),
    ("gpt-4.1-mini", 0.40, 1.60, 0.10, 0.40),
    ("gpt-4.1-nano", 0.10, 0.40, 0.025, 0.10),
    ("gpt-4o", 2.50, 10.00, 1.25, 2.50),
    ("gpt-4o-mini", 0.15, 0.60, 0.075, 0.15),
    ("o1", 15.00, 60.00, 7.50, 15.00),
    ("o3", 2.00, 8.00, 0.50, 2.00),
    ("o3-mini", 1.10, 4.40, 0.55, 1.10),
    ("o4-mini", 1.10, 4.40, 0.275, 1.10),
    ("gpt-4-turbo", 10.00, 30.00, 10.00, 10.00),
    ("gpt-3.5-turbo", 0.50, 1.50, 0.50, 0.50),
    // Anthropic
    ("claude-opus-4-5", 5.00, 25.00, 0.50, 6.25),
    ("claude-opus-4-1", 15.00, 75.00, 1.50, 18.75),
    ("claude-opus-4", 15.00, 75.00, 1.50, 18.75),
    ("claude-opus-4-0", 15.00, 75.00, 1.50, 18.75),
    ("claude-sonnet-4-5", 3.00, 15.00, 0.30, 3.75),
    ("claude-sonnet-4", 3.00, 15.00, 0.30, 3.75),
    ("claude-sonnet-4-0", 3.00, 15.00, 0.30, 3.75),
    ("claude-3-7-sonnet", 3.00, 15.00, 0.30, 3.75),
    ("claude-3-5-sonnet", 3.00, 15.00, 0.30, 3.75),
    ("claude-haiku-4-5", 1.00, 5.00, 0.10, 1.25),
    ("claude-3-5-haiku", 0.80, 4.00, 0.08, 1.00),
    ("claude-3-haiku", 0.25, 1.25, 0.03, 0.30),
    ("claude-3-opus", 15.00, 75.00, 1.50, 18.75),
    // Not a real model: `troupe demo`'s scripted one, at a made-up price (see the module docs).
    ("troupe-demo", 1.00, 4.00, 1.00, 1.00),
];

/// The built-in price of exactly `name`.
pub fn built_in(name: &str) -> Option<Price> {
    PRICES
        .iter()
        .find(|(model, ..)| *model == name)
        .and_then(|&(_, input, output, read, write)| {
            Price::from_usd_per_million(input, output, read, write)
        })
}

/// Every built-in entry, in table order (for documentation and tests).
pub fn entries() -> impl Iterator<Item = (&'static str, Price)> {
    PRICES
        .iter()
        .filter_map(|&(model, input, output, read, write)| {
            Price::from_usd_per_million(input, output, read, write).map(|p| (model, p))
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn the_demo_model_has_its_made_up_price() {
        let price = built_in("troupe-demo").unwrap();
        assert_eq!(
            Some(price),
            Price::from_usd_per_million(1.00, 4.00, 1.00, 1.00)
        );
    }

    #[test]
    fn every_entry_is_valid_unique_and_cheaper_to_read_from_cache() {
        assert_eq!(entries().count(), PRICES.len());
        let names: BTreeSet<&str> = PRICES.iter().map(|(name, ..)| *name).collect();
        assert_eq!(names.len(), PRICES.len(), "a model is listed twice");
        for (name, price) in entries() {
            assert!(price.cache_read <= price.input, "{name}");
            assert!(price.input <= price.output, "{name}");
            assert_eq!(
                super::super::strip_snapshot(name),
                name,
                "{name} looks dated"
            );
        }
    }
}
