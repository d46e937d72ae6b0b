//! `[prices]`: prices per million tokens (USD) that win over troupe's built-in table
//! ([`crate::prices`]), one table per model name:
//!
//! ```toml
//! [prices."gpt-4.1"]
//! input = 2.0
//! output = 8.0
//! cache_read = 0.5     # optional: the input price when left out
//! cache_write = 0      # optional: the input price when left out
//! ```
//!
//! `input` and `output` are required; every price is a number from 0 to 1,000,000 (an integer
//! is read as a number). A name is matched like the built-in ones (exactly, then without a
//! provider prefix, then without a snapshot suffix). Per model, the project's entry wins whole
//! over the user's.
//!
//! **Trust.** A workspace's own `troupe.toml` may only tighten until the person trusts it, and
//! `--max-cost` counts with these prices: an entry of the project file that prices a model
//! *below* the person's own price for it — their `config.toml`'s entry, else troupe's built-in
//! table (any of the four rates) — **needs trust**; untrusted, the person's price applies. A
//! price for a model neither prices, or one at or above theirs, only makes the estimate
//! stricter and applies at once.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::error::SettingsError;
use super::section::{needs_trust, Layers, Spans};
use super::trust::{TrustItem, TrustKind};
use super::Sourced;
use crate::prices::{Price, PriceTable, Rate, MAX_USD};

/// `[prices]`, merged: each model's price and the file it came from, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriceSettings {
    pub models: BTreeMap<String, Sourced<Price>>,
}

impl PriceSettings {
    /// The built-in table with these prices over it.
    pub fn table(&self) -> PriceTable {
        PriceTable::with_overrides(
            self.models
                .iter()
                .map(|(name, price)| (name.as_str(), price.value)),
        )
    }
}

/// One model's entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrice {
    input: Spanned<f64>,
    output: Spanned<f64>,
    cache_read: Option<Spanned<f64>>,
    cache_write: Option<Spanned<f64>>,
}

/// `[prices]` as written: model name → its entry.
pub(super) type RawPrices = BTreeMap<Spanned<String>, Spanned<RawPrice>>;

/// One file's `[prices]`, checked.
#[derive(Debug, Default, Clone)]
pub(super) struct ParsedPrices {
    models: BTreeMap<String, Price>,
}

pub(super) fn parse(raw: RawPrices, spans: &Spans<'_>) -> Result<ParsedPrices, SettingsError> {
    let mut parsed = ParsedPrices::default();
    for (name, entry) in raw {
        let at = name.span().start;
        let name = name.into_inner();
        if name.trim().is_empty() || name.trim() != name {
            return Err(spans.invalid(
                at,
                format!(
                    "`prices` model name {name:?} must not be blank or start or end with spaces"
                ),
            ));
        }
        let entry = entry.into_inner();
        let rate = |key: &str, value: &Spanned<f64>| {
            Rate::from_usd_per_million(*value.get_ref()).ok_or_else(|| {
                spans.invalid(
                    value.span().start,
                    format!(
                        "`prices.\"{name}\".{key}` must be a number of USD per million tokens \
                         from 0 to {MAX_USD}, not {}",
                        value.get_ref()
                    ),
                )
            })
        };
        let input = rate("input", &entry.input)?;
        let price = Price {
            input,
            output: rate("output", &entry.output)?,
            cache_read: match &entry.cache_read {
                Some(value) => rate("cache_read", value)?,
                None => input,
            },
            cache_write: match &entry.cache_write {
                Some(value) => rate("cache_write", value)?,
                None => input,
            },
        };
        parsed.models.insert(name, price);
    }
    Ok(parsed)
}

/// The project file's entries that price a model below the person's own price — `user`'s entry
/// (their `config.toml`), else the built-in table's — wait for trust (see the module docs); the
/// others stay.
pub(super) fn split_trust(
    prices: &mut ParsedPrices,
    user: Option<&ParsedPrices>,
    items: &mut Vec<TrustItem>,
) {
    let persons = PriceTable::with_overrides(
        user.into_iter()
            .flat_map(|u| u.models.iter())
            .map(|(name, price)| (name.as_str(), *price)),
    );
    prices.models.retain(|name, price| {
        let Some(known) = persons.lookup(name).map(|found| found.price) else {
            return true;
        };
        let lowers = price.input < known.input
            || price.output < known.output
            || price.cache_read < known.cache_read
            || price.cache_write < known.cache_write;
        if lowers {
            items.push(needs_trust(
                TrustKind::Prices,
                format!(
                    "prices {name} below troupe's table or your own price, which --max-cost \
                     counts with"
                ),
                format!(
                    "{name}\n{}/{}/{}/{}",
                    price.input.usd(),
                    price.output.usd(),
                    price.cache_read.usd(),
                    price.cache_write.usd()
                ),
            ));
        }
        !lowers
    });
}

/// Per model, the highest-precedence file's entry, whole.
pub(super) fn merge(layers: &Layers<'_, ParsedPrices>) -> PriceSettings {
    let mut models = BTreeMap::new();
    for (source, section) in layers {
        for (name, price) in &section.models {
            models.entry(name.clone()).or_insert_with(|| Sourced {
                value: *price,
                source: (*source).clone(),
            });
        }
    }
    PriceSettings { models }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::super::section::testing::{load_err, workspace};
    use super::super::{Settings, SettingsErrorKind as Kind, Source};
    use super::*;

    fn price(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Price {
        Price::from_usd_per_million(input, output, cache_read, cache_write).unwrap()
    }

    #[test]
    fn a_workspace_s_price_below_the_table_waits_for_trust_and_others_apply() {
        // gpt-4.1 is 2 / 8 / 0.5 / 2 in the table: a cheaper cache write lowers it.
        let dir = workspace(Some(
            "[prices.\"gpt-4.1\"]\ninput = 2.5\noutput = 8\ncache_read = 0.5\ncache_write = 0\n\
             [prices.\"gpt-4o\"]\ninput = 3\noutput = 12\n\
             [prices.local]\ninput = 0\noutput = 0\n",
        ));
        let user = dir.path().join("user.toml");
        std::fs::write(&user, "[prices.\"gpt-4.1\"]\ninput = 1\noutput = 1\n").unwrap();
        let reviewed = Settings::load_reviewed(dir.path(), Some(&user)).unwrap();
        let waiting: Vec<(&str, &str)> = reviewed
            .items
            .iter()
            .map(|i| (i.kind.as_str(), i.content.as_str()))
            .collect();
        assert_eq!(waiting, [("prices", "gpt-4.1\n2.5/8/0.5/0")]);
        // Untrusted: the person's own gpt-4.1 stands; the stricter and unknown ones apply.
        let untrusted = &reviewed.untrusted.prices.models;
        assert_eq!(untrusted["gpt-4.1"].value, price(1.0, 1.0, 1.0, 1.0));
        assert_eq!(untrusted["gpt-4o"].value, price(3.0, 12.0, 3.0, 3.0));
        assert_eq!(untrusted["local"].value, price(0.0, 0.0, 0.0, 0.0));
        let trusted = &reviewed.trusted.prices.models;
        assert_eq!(trusted["gpt-4.1"].value, price(2.5, 8.0, 0.5, 0.0));
    }

    #[test]
    fn a_workspace_s_price_below_the_person_s_own_waits_for_trust() {
        // "local" is not in the table; the person prices it, and gpt-4.1 above the table.
        let dir = workspace(Some(
            "[prices.local]\ninput = 0\noutput = 0\n\
             [prices.\"gpt-4.1\"]\ninput = 2\noutput = 8\ncache_read = 0.5\ncache_write = 2\n\
             [prices.\"openai/mine-2025-01-01\"]\ninput = 5\noutput = 5\n",
        ));
        let user = dir.path().join("user.toml");
        std::fs::write(
            &user,
            "[prices.local]\ninput = 1\noutput = 2\n[prices.\"gpt-4.1\"]\ninput = 3\noutput = 9\n\
             [prices.mine]\ninput = 4\noutput = 4\n",
        )
        .unwrap();
        let reviewed = Settings::load_reviewed(dir.path(), Some(&user)).unwrap();
        let waiting: Vec<&str> = reviewed
            .items
            .iter()
            .map(|i| i.content.split('\n').next().unwrap())
            .collect();
        assert_eq!(waiting, ["gpt-4.1", "local"]);
        let untrusted = &reviewed.untrusted.prices.models;
        assert_eq!(untrusted["local"].value, price(1.0, 2.0, 1.0, 1.0));
        assert_eq!(untrusted["gpt-4.1"].value, price(3.0, 9.0, 3.0, 3.0));
        // At or above the person's own (matched like any name): applies.
        assert_eq!(
            untrusted["openai/mine-2025-01-01"].value,
            price(5.0, 5.0, 5.0, 5.0)
        );
    }

    #[test]
    fn prices_load_with_defaults_and_project_over_user_per_model() {
        let dir = workspace(Some(
            "[prices.\"gpt-4.1\"]\ninput = 2.5\noutput = 8\ncache_read = 0.5\ncache_write = 0\n\
             [prices]\nlocal = { input = 1, output = 2 }\n",
        ));
        let user = dir.path().join("user.toml");
        std::fs::write(
            &user,
            "[prices.local]\ninput = 9\noutput = 9\n[prices.mine]\ninput = 0.1\noutput = 0.2\n",
        )
        .unwrap();
        let settings = Settings::load(dir.path(), Some(&user)).unwrap();
        let project = Source::Project(dir.path().join("troupe.toml"));
        let got: Vec<(&str, Price, &Source)> = settings
            .prices
            .models
            .iter()
            .map(|(name, p)| (name.as_str(), p.value, &p.source))
            .collect();
        assert_eq!(
            got,
            [
                ("gpt-4.1", price(2.5, 8.0, 0.5, 0.0), &project),
                ("local", price(1.0, 2.0, 1.0, 1.0), &project),
                (
                    "mine",
                    price(0.1, 0.2, 0.1, 0.1),
                    &Source::User(user.clone())
                ),
            ]
        );
        let table = settings.prices.table();
        assert_eq!(
            table.lookup("gpt-4.1-2025-04-14").map(|f| f.price),
            Some(price(2.5, 8.0, 0.5, 0.0))
        );
        assert_eq!(
            Settings::load(dir.path(), None)
                .unwrap()
                .prices
                .models
                .len(),
            2
        );
    }

    #[test]
    fn bad_prices_are_refused_naming_the_line() {
        for (text, line, says) in [
            (
                "[prices.m]\ninput = 1\noutput = -2\n",
                3,
                "`prices.\"m\".output`",
            ),
            (
                "[prices.m]\ninput = nan\noutput = 2\n",
                2,
                "`prices.\"m\".input`",
            ),
            (
                "[prices.m]\ninput = 1\noutput = 2\ncache_read = inf\n",
                4,
                "cache_read",
            ),
            ("[prices.m]\ninput = 1\noutput = 2e7\n", 3, "from 0 to"),
            ("[prices.m]\ninput = 1\noutput = \"2\"\n", 3, "invalid type"),
            (
                "[prices.\" \"]\ninput = 1\noutput = 2\n",
                1,
                "must not be blank",
            ),
        ] {
            let err = load_err(text);
            assert_eq!(
                (err.kind, err.line),
                (Kind::Invalid, Some(line)),
                "{text}: {err}"
            );
            assert!(err.to_string().contains(says), "{text}: {err}");
        }
        let err = load_err("[prices.m]\ninput = 1\n");
        assert!(err.to_string().contains("missing field `output`"), "{err}");
        let err = load_err("[prices.m]\ninput = 1\noutput = 2\ncached = 3\n");
        assert_eq!((err.kind, err.line), (Kind::UnknownKey, Some(4)), "{err}");
    }
}
