//! A small built-in price table, for the web view's cost **estimate**: USD per million tokens in
//! (prompt) and out (completion), list prices of known OpenAI models. Not a bill: cached-input
//! discounts, batch prices and price changes are not known here. An unknown model has no price.

/// (model, USD per million input tokens, USD per million output tokens).
const PRICES: &[(&str, f64, f64)] = &[
    ("gpt-4o", 2.50, 10.00),
    ("gpt-4o-mini", 0.15, 0.60),
    ("gpt-4.1", 2.00, 8.00),
    ("gpt-4.1-mini", 0.40, 1.60),
    ("gpt-4.1-nano", 0.10, 0.40),
    ("gpt-5", 1.25, 10.00),
    ("gpt-5-mini", 0.25, 2.00),
    ("gpt-5-nano", 0.05, 0.40),
    ("o1", 15.00, 60.00),
    ("o3", 2.00, 8.00),
    ("o3-mini", 1.10, 4.40),
    ("o4-mini", 1.10, 4.40),
    ("gpt-4-turbo", 10.00, 30.00),
    ("gpt-3.5-turbo", 0.50, 1.50),
];

/// The price of `model`: its name exactly, after dropping a provider prefix (`openai/`) and a
/// date suffix (`-2024-08-06`).
pub fn price(model: &str) -> Option<(f64, f64)> {
    let name = model.rsplit('/').next().unwrap_or(model);
    let name = strip_date(name);
    PRICES
        .iter()
        .find(|(known, _, _)| *known == name)
        .map(|&(_, input, output)| (input, output))
}

/// The estimated cost in USD of `tokens_in` + `tokens_out` tokens of `model`.
pub fn estimate(model: &str, tokens_in: u64, tokens_out: u64) -> Option<f64> {
    let (input, output) = price(model)?;
    // Token counts are far below 2^52: the conversion is exact.
    #[allow(clippy::cast_precision_loss)]
    let cost = (tokens_in as f64 * input + tokens_out as f64 * output) / 1_000_000.0;
    Some(cost)
}

fn strip_date(name: &str) -> &str {
    // `-YYYY-MM-DD`: 11 bytes.
    if name.len() > 11 {
        let (head, tail) = name.split_at(name.len() - 11);
        let b = tail.as_bytes();
        let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
        if b[0] == b'-'
            && b[5] == b'-'
            && b[8] == b'-'
            && digits(1..5)
            && digits(6..8)
            && digits(9..11)
        {
            return head;
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_models_have_a_price_and_unknown_ones_none() {
        assert_eq!(price("gpt-4o-mini"), Some((0.15, 0.60)));
        assert_eq!(price("gpt-4o-2024-08-06"), Some((2.50, 10.00)));
        assert_eq!(price("openai/gpt-4.1-mini"), Some((0.40, 1.60)));
        assert_eq!(price("scripted"), None);
        assert_eq!(price("gpt-4o-mini-x"), None);
        let cost = estimate("gpt-4o-mini", 1_000_000, 1_000_000).unwrap();
        assert!((cost - 0.75).abs() < 1e-9);
    }
}
