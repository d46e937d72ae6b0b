//! troupe's one reading of a duration ([`parse_duration`]): settings files, flags and
//! environment variables alike. A settings file may also give a number of seconds; every section
//! with a duration (a hook's timeout, an MCP server's, the store's lease) reads it here and
//! checks only its own range.

use std::time::Duration;

use serde::Deserialize;

/// A duration as a settings file writes it: `30` or `"30s"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawTimeout {
    Seconds(i64),
    Text(String),
}

/// An integer of seconds (`30`) or a string [`parse_duration`] reads (`"30s"`, `"2m"`,
/// `"1h30m"`, and parts of a second only when `millis`); the caller checks the range.
pub(super) fn duration_of(raw: &RawTimeout, millis: bool) -> Option<Duration> {
    match raw {
        RawTimeout::Seconds(secs) => u64::try_from(*secs).ok().map(Duration::from_secs),
        RawTimeout::Text(text) => parse_duration(text).filter(|d| millis || d.subsec_nanos() == 0),
    }
}

/// troupe's one reading of a duration, for settings files, flags and variables alike: plain
/// seconds (`90`), or humantime's units, compound forms too (`90s`, `5m`, `1h30m`, `1h 30m`,
/// `1.5h`, `250ms`); never zero.
pub fn parse_duration(raw: &str) -> Option<Duration> {
    let raw = raw.trim();
    let parsed = if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) {
        raw.parse().ok().map(Duration::from_secs)
    } else {
        humantime::parse_duration(raw).ok()
    };
    parsed.filter(|d| !d.is_zero())
}
