//! Prices and costs as integers, so that a sum of many small calls never drifts.
//!
//! A [`Rate`] is a price in **micro-dollars per million tokens** (a settings file's `2.5` USD is
//! `2_500_000`): the conversion from the decimal a person writes is the only rounding, to the
//! nearest millionth of a dollar per million tokens. One token at one micro-dollar per million
//! costs one pico-dollar (10⁻¹² USD), so a [`Cost`] is kept in **pico-dollars**: tokens × rate
//! is exact, and sums are exact. A cost is rounded only when shown — to the micro-dollar in
//! JSON (`cost_usd`), to four decimals in text.

use serde::{Serialize, Serializer};

use crate::store::usage::TokenCounts;

/// The most a settings file may give as a price per million tokens, or as a budget (USD): far
/// above any real price, far below where the integers could overflow.
pub const MAX_USD: f64 = 1_000_000.0;

/// A price per million tokens, in micro-dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rate(u64);

impl Rate {
    /// `usd` per million tokens, rounded to the micro-dollar; `None` unless it is finite and from
    /// 0 to [`MAX_USD`].
    pub fn from_usd_per_million(usd: f64) -> Option<Self> {
        if !usd.is_finite() || !(0.0..=MAX_USD).contains(&usd) {
            return None;
        }
        // In range: at most 10^12, exact in both types.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let micros = (usd * 1e6).round() as u64;
        Some(Self(micros))
    }

    /// Micro-dollars per million tokens.
    pub fn micro_usd(self) -> u64 {
        self.0
    }

    /// USD per million tokens (for showing the rate).
    #[allow(clippy::cast_precision_loss)]
    pub fn usd(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// What `tokens` cost at this rate, exactly.
    pub fn cost(self, tokens: u64) -> Cost {
        Cost(u128::from(tokens) * u128::from(self.0))
    }
}

/// A model's four rates: prompt tokens not involving the cache, completion tokens, prompt tokens
/// read from the provider's cache, and prompt tokens written to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Price {
    pub input: Rate,
    pub output: Rate,
    pub cache_read: Rate,
    pub cache_write: Rate,
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.usd())
    }
}

impl Price {
    /// A price from USD per million tokens; `None` if any rate is out of range (see
    /// [`Rate::from_usd_per_million`]).
    pub fn from_usd_per_million(
        input: f64,
        output: f64,
        cache_read: f64,
        cache_write: f64,
    ) -> Option<Self> {
        Some(Self {
            input: Rate::from_usd_per_million(input)?,
            output: Rate::from_usd_per_million(output)?,
            cache_read: Rate::from_usd_per_million(cache_read)?,
            cache_write: Rate::from_usd_per_million(cache_write)?,
        })
    }

    /// What `counts` cost. The prompt tokens count every input token, those read from and
    /// written to the cache included (`UsageRecord`), so the input rate applies to the rest of
    /// them only; a hand-edited line whose cache counts exceed its prompt counts none at the
    /// input rate.
    pub fn cost_of(&self, counts: &TokenCounts) -> Cost {
        let uncached = counts
            .prompt_tokens
            .saturating_sub(counts.cache_read_tokens)
            .saturating_sub(counts.cache_write_tokens);
        self.input
            .cost(uncached)
            .plus(self.cache_read.cost(counts.cache_read_tokens))
            .plus(self.cache_write.cost(counts.cache_write_tokens))
            .plus(self.output.cost(counts.completion_tokens))
    }
}

/// An amount of US dollars, in pico-dollars. Serialised as USD rounded to the micro-dollar.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost(u128);

impl Cost {
    pub const ZERO: Cost = Cost(0);

    /// `usd`, rounded to the pico-dollar; `None` unless it is finite and from 0 to [`MAX_USD`].
    pub fn from_usd(usd: f64) -> Option<Self> {
        if !usd.is_finite() || !(0.0..=MAX_USD).contains(&usd) {
            return None;
        }
        // In range: at most 10^18.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let picos = (usd * 1e12).round() as u128;
        Some(Self(picos))
    }

    pub fn picodollars(self) -> u128 {
        self.0
    }

    /// The sum, saturating (a hand-edited log with absurd counts must not panic a reader).
    pub fn plus(self, other: Cost) -> Cost {
        Cost(self.0.saturating_add(other.0))
    }

    /// Whole micro-dollars, rounded half up.
    pub fn micro_usd(self) -> u128 {
        self.0.saturating_add(500_000) / 1_000_000
    }

    /// USD rounded to the micro-dollar, as JSON shows it.
    #[allow(clippy::cast_precision_loss)]
    pub fn usd(self) -> f64 {
        self.micro_usd() as f64 / 1e6
    }

    /// `$0.0123`: USD rounded half up to four decimals, as text shows it; a cost that is not
    /// zero but rounds to it is `<$0.0001`.
    pub fn text(self) -> String {
        let hundred_micros = self.0.saturating_add(50_000_000) / 100_000_000;
        if hundred_micros == 0 && self.0 > 0 {
            return "<$0.0001".to_owned();
        }
        format!(
            "${}.{:04}",
            hundred_micros / 10_000,
            hundred_micros % 10_000
        )
    }
}

impl std::iter::Sum for Cost {
    fn sum<I: Iterator<Item = Cost>>(iter: I) -> Cost {
        iter.fold(Cost::ZERO, Cost::plus)
    }
}

impl Serialize for Cost {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.usd())
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn counts(prompt: u64, completion: u64, read: u64, write: u64) -> TokenCounts {
        TokenCounts {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            cache_read_tokens: read,
            cache_write_tokens: write,
            estimated_tokens: 0,
        }
    }

    #[test]
    fn rates_are_micro_dollars_per_million_rounded_once() {
        assert_eq!(
            Rate::from_usd_per_million(2.5).unwrap().micro_usd(),
            2_500_000
        );
        // 1.001 * 1e6 is 1000999.9999999999 in f64: rounded, not truncated.
        assert_eq!(
            Rate::from_usd_per_million(1.001).unwrap().micro_usd(),
            1_001_000
        );
        assert_eq!(
            Rate::from_usd_per_million(0.075).unwrap().micro_usd(),
            75_000
        );
        assert_eq!(Rate::from_usd_per_million(0.0).unwrap().micro_usd(), 0);
        assert_eq!(
            Rate::from_usd_per_million(0.000_000_4).unwrap().micro_usd(),
            0
        );
        for bad in [-0.01, f64::NAN, f64::INFINITY, MAX_USD * 2.0] {
            assert_eq!(Rate::from_usd_per_million(bad), None, "{bad}");
        }
    }

    #[test]
    fn each_kind_of_token_costs_its_own_rate() {
        // Claude Sonnet: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million.
        let price = Price::from_usd_per_million(3.0, 15.0, 0.30, 3.75).unwrap();
        // 10,000 prompt tokens of which 6,000 read from and 1,000 written to the cache:
        // 3,000 × $3 + 6,000 × $0.30 + 1,000 × $3.75 + 500 × $15 (per million)
        // = $0.009 + $0.0018 + $0.00375 + $0.0075 = $0.02205.
        let cost = price.cost_of(&counts(10_000, 500, 6_000, 1_000));
        assert_eq!(cost.picodollars(), 22_050_000_000);
        assert_eq!(cost.micro_usd(), 22_050);
        assert_eq!(cost.text(), "$0.0221");
        // Cache counts above the prompt's (a hand-edited line): nothing at the input rate.
        let odd = price.cost_of(&counts(10, 0, 20, 0));
        assert_eq!(odd, Rate::from_usd_per_million(0.30).unwrap().cost(20));
    }

    #[test]
    fn sums_of_many_small_calls_are_exact() {
        // $0.15 per million: one token is 0.15 micro-dollars, which rounding per call would lose.
        let price = Price::from_usd_per_million(0.15, 0.60, 0.075, 0.15).unwrap();
        let one: Cost = (0..1_000_000)
            .map(|_| price.cost_of(&counts(1, 0, 0, 0)))
            .sum();
        assert_eq!(one, Cost::from_usd(0.15).unwrap());
        assert_eq!(one.usd(), 0.15);
    }

    #[test]
    fn costs_show_rounded_half_up() {
        let usd = |v: f64| Cost::from_usd(v).unwrap();
        assert_eq!(usd(0.0).text(), "$0.0000");
        assert_eq!(usd(0.000_04).text(), "<$0.0001");
        assert_eq!(usd(0.000_05).text(), "$0.0001");
        assert_eq!(usd(12.345_649).text(), "$12.3456");
        assert_eq!(usd(0.000_000_5).micro_usd(), 1);
        assert_eq!(usd(0.000_000_4).micro_usd(), 0);
        assert_eq!(
            serde_json::to_string(&usd(1.234_567_8)).unwrap(),
            "1.234568"
        );
        // 4.35 * 1e12 is 4349999999999.9995 in f64: rounded, not truncated.
        assert_eq!(usd(4.35).picodollars(), 4_350_000_000_000);
        assert_eq!(Cost::from_usd(-1.0), None);
        assert_eq!(Cost::from_usd(f64::NAN), None);
    }
}
