//! `troupe config`'s `[approvals]` section: how long a permission request waits, who answers a
//! teammate's ask, and what an ask does without a terminal.

use serde_json::{json, Value};
use troupe::settings::Settings;

/// What `no_terminal` says when no file sets it: the command decides.
const NO_TERMINAL_DEFAULT: &str = "default: troupe run denies, troupe worker waits";

pub fn approvals_json(settings: &Settings) -> Value {
    let section = &settings.approvals;
    json!({
        "ttl_secs": section.ttl.as_secs(),
        "route": section.route.as_str(),
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
        "\n[approvals]\n{:<16} = {:?}\n{:<16} = {:?}\n{:<16} = {no_terminal}\n",
        "ttl",
        humantime::format_duration(section.ttl).to_string(),
        "route",
        section.route.as_str(),
        "no_terminal",
    )
}
