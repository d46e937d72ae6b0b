//! `troupe config`'s cost sections: `[prices]` (each model's price over the built-in table, with
//! the file it came from) and `[run]` (`max_cost`, which `--max-cost` decides over).

use serde_json::{json, Map, Value};
use troupe::prices::{Price, Rate};
use troupe::settings::Settings;

/// `{"gpt-4.1": {"input": 2.0, "output": 8.0, "cache_read": 0.5, "cache_write": 0.0,
/// "source": "…"}}`: USD per million tokens.
pub fn prices_json(settings: &Settings) -> Value {
    let models: Map<String, Value> = settings
        .prices
        .models
        .iter()
        .map(|(name, price)| {
            let mut entry = json!(price.value);
            entry["source"] = json!(price.source.describe());
            (name.clone(), entry)
        })
        .collect();
    Value::Object(models)
}

/// `{"max_cost": {"value": 5.0, "source": "…"}}` (both null when no file sets it), USD.
pub fn run_json(settings: &Settings) -> Value {
    let max_cost = settings.run.max_cost.as_ref();
    json!({"max_cost": {
        "value": max_cost.map(|c| c.value),
        "source": max_cost.map(|c| c.source.describe()),
    }})
}

pub fn prices_text(settings: &Settings) -> String {
    let mut out =
        "\n[prices]   (USD per million tokens: input / output / cache read / cache write)\n"
            .to_owned();
    if settings.prices.models.is_empty() {
        out.push_str("(none: the built-in table)\n");
    }
    for (name, price) in &settings.prices.models {
        out.push_str(&format!(
            "{:<16} = {}   ({})\n",
            name,
            rates(&price.value),
            price.source.describe()
        ));
    }
    out
}

pub fn run_text(settings: &Settings) -> String {
    match &settings.run.max_cost {
        Some(cost) => format!(
            "\n[run]\n{:<16} = {}   ({})\n",
            "max_cost",
            cost.value.text(),
            cost.source.describe()
        ),
        None => format!("\n[run]\n{:<16} = none   (default)\n", "max_cost"),
    }
}

fn rates(price: &Price) -> String {
    let usd = |rate: Rate| rate.usd().to_string();
    format!(
        "{} / {} / {} / {}",
        usd(price.input),
        usd(price.output),
        usd(price.cache_read),
        usd(price.cache_write)
    )
}
