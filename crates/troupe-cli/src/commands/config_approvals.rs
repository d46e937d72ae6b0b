//! `troupe config`'s sections on how a team settles things: `[approvals]` (how long a
//! permission request waits, who answers a teammate's ask, and what an ask does without a
//! terminal) and `[tasks]` (how long a claim on the task board lasts). Each value with where it
//! came from, like every other section.

use std::time::Duration;

use serde_json::{json, Value};
use troupe::settings::{Settings, Source};

/// What `no_terminal` says when no file sets it: the command decides.
const NO_TERMINAL_DEFAULT: &str = "default: troupe run denies, troupe worker waits";

/// `ttl_secs` and `route` as `{"value", "source"}`, like `no_terminal`.
pub fn approvals_json(settings: &Settings) -> Value {
    let section = &settings.approvals;
    json!({
        "ttl_secs": {"value": section.ttl.as_secs(), "source": section.ttl_source.describe()},
        "route": {"value": section.route.as_str(), "source": section.route_source.describe()},
        "no_terminal": {
            "value": section.no_terminal.as_ref().map(|n| n.value.as_str()),
            "source": section
                .no_terminal
                .as_ref()
                .map_or_else(|| "default".to_owned(), |n| n.source.describe()),
        },
    })
}

pub fn approvals_text(settings: &Settings) -> String {
    let section = &settings.approvals;
    let no_terminal = match &section.no_terminal {
        Some(n) => format!("{:?}   ({})", n.value.as_str(), n.source.describe()),
        None => format!("unset   ({NO_TERMINAL_DEFAULT})"),
    };
    format!(
        "\n[approvals]\n{}{}{:<16} = {no_terminal}\n",
        duration_line("ttl", section.ttl, &section.ttl_source),
        value_line("route", section.route.as_str(), &section.route_source),
        "no_terminal",
    )
}

/// `{"lease_ms": {"value": 300000, "source": "default"}}`, like `[store]`'s lease.
pub fn tasks_json(settings: &Settings) -> Value {
    let tasks = &settings.tasks;
    json!({"lease_ms": {
        "value": u64::try_from(tasks.lease.as_millis()).unwrap_or(u64::MAX),
        "source": tasks.lease_source.describe(),
    }})
}

pub fn tasks_text(settings: &Settings) -> String {
    let tasks = &settings.tasks;
    format!(
        "\n[tasks]\n{}",
        duration_line("lease", tasks.lease, &tasks.lease_source)
    )
}

/// `ttl              = "10m"   (default)`.
fn duration_line(key: &str, value: Duration, source: &Source) -> String {
    value_line(key, &humantime::format_duration(value).to_string(), source)
}

fn value_line(key: &str, value: &str, source: &Source) -> String {
    format!("{key:<16} = {value:?}   ({})\n", source.describe())
}
