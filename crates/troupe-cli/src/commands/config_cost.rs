//! `troupe config`'s cost sections: `[prices]` (each model's price over the built-in table, with
//! the file it came from, and a workspace's price that waits for trust beside the one that
//! applies) and `[run]` (`max_cost`, which `--max-cost` decides over).

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};
use troupe::prices::{Price, Rate};
use troupe::settings::{PriceSettings, Settings, Sourced};

/// `{"gpt-4.1": {"input": 2.0, "output": 8.0, "cache_read": 0.5, "cache_write": 0.0,
/// "source": "…"}}`: USD per million tokens, the price that applies. A workspace's entry that
/// waits for trust is beside it under `waits_for_trust` (its rates and `source`); the price that
/// applies meanwhile is the person's own or the built-in table's (`"source": "built-in table"`).
pub fn prices_json(shown: &PriceSettings, applying: Option<&PriceSettings>) -> Value {
    let models: Map<String, Value> = rows(shown, applying)
        .into_iter()
        .map(|row| {
            let mut entry = match &row.applies {
                Some((price, source)) => priced(price, source),
                None => json!({}),
            };
            if let Some(waiting) = row.waiting {
                entry["waits_for_trust"] = priced(&waiting.value, &waiting.source.describe());
            }
            (row.name.to_owned(), entry)
        })
        .collect();
    Value::Object(models)
}

fn priced(price: &Price, source: &str) -> Value {
    let mut entry = json!(price);
    entry["source"] = json!(source);
    entry
}

/// One model of `[prices]`: the price that applies (and where it comes from), and the
/// workspace's entry that waits for trust, if one does.
struct Row<'a> {
    name: &'a str,
    applies: Option<(Price, String)>,
    waiting: Option<&'a Sourced<Price>>,
}

/// The models of `shown` (the settings with the workspace's values, as `troupe config` loads
/// them). `applying`: the settings without the values that wait for trust, when trust does not
/// apply; an entry of `shown` that is not in them waits, and the price that applies meanwhile is
/// found as a run finds it — the person's own entry, else the built-in table's.
fn rows<'a>(shown: &'a PriceSettings, applying: Option<&'a PriceSettings>) -> Vec<Row<'a>> {
    let Some(applying) = applying else {
        return shown
            .models
            .iter()
            .map(|(name, price)| Row {
                name,
                applies: Some((price.value, price.source.describe())),
                waiting: None,
            })
            .collect();
    };
    let table = applying.table();
    let names: BTreeSet<&String> = shown.models.keys().chain(applying.models.keys()).collect();
    names
        .into_iter()
        .map(|name| {
            let applies = applying.models.get(name);
            match shown.models.get(name) {
                Some(entry) if applies != Some(entry) => Row {
                    name,
                    applies: table.lookup(name).map(|found| {
                        let source = applying
                            .models
                            .get(found.name)
                            .map_or_else(|| BUILT_IN.to_owned(), |p| p.source.describe());
                        (found.price, source)
                    }),
                    waiting: Some(entry),
                },
                _ => Row {
                    name,
                    applies: applies.map(|p| (p.value, p.source.describe())),
                    waiting: None,
                },
            }
        })
        .collect()
}

/// Where a price comes from when no settings file sets it.
const BUILT_IN: &str = "built-in table";

/// `{"max_cost": {"value": 5.0, "source": "…"}}` (both null when no file sets it), USD.
pub fn run_json(settings: &Settings) -> Value {
    let max_cost = settings.run.max_cost.as_ref();
    json!({"max_cost": {
        "value": max_cost.map(|c| c.value),
        "source": max_cost.map(|c| c.source.describe()),
    }})
}

/// One line per model with the price that applies; a workspace's entry that waits for trust on
/// the line after it (`troupe config` marks it `[waits for trust]`).
pub fn prices_text(shown: &PriceSettings, applying: Option<&PriceSettings>) -> String {
    let mut out =
        "\n[prices]   (USD per million tokens: input / output / cache read / cache write)\n"
            .to_owned();
    if shown.models.is_empty() {
        out.push_str("(none: the built-in table)\n");
    }
    for row in rows(shown, applying) {
        if let Some((price, source)) = &row.applies {
            out.push_str(&format!(
                "{:<16} = {}   ({source})\n",
                row.name,
                rates(price)
            ));
        }
        if let Some(waiting) = row.waiting {
            out.push_str(&format!(
                "{:<16} = {}   ({})\n",
                row.name,
                rates(&waiting.value),
                waiting.source.describe()
            ));
        }
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
