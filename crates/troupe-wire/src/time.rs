//! UTC instants with millisecond precision, written `2026-07-30T08:00:00.000Z` (SPEC §2).

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, TimeZone, Timelike, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::WireError;

const FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.3fZ";

/// A UTC instant truncated to whole milliseconds, so that what is written reads back equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UtcTime(DateTime<Utc>);

impl UtcTime {
    /// Truncates to milliseconds.
    pub fn from_datetime(at: DateTime<Utc>) -> Self {
        let millis = at.timestamp_subsec_millis();
        let truncated = at.with_nanosecond(millis * 1_000_000).unwrap_or(at);
        Self(truncated)
    }

    pub fn from_unix_millis(millis: i64) -> Result<Self, WireError> {
        Utc.timestamp_millis_opt(millis)
            .single()
            .map(Self)
            .ok_or_else(|| WireError::new(format!("time {millis} ms is out of range")))
    }

    pub fn unix_millis(&self) -> i64 {
        self.0.timestamp_millis()
    }

    pub fn as_datetime(&self) -> DateTime<Utc> {
        self.0
    }

    /// Strict: exactly `YYYY-MM-DDTHH:MM:SS.mmmZ`, nothing else.
    pub fn parse(raw: &str) -> Result<Self, WireError> {
        let refuse = || {
            WireError::new(format!(
                "invalid time {raw:?}: expected UTC RFC 3339 with milliseconds and Z, \
                 e.g. 2026-07-30T08:00:00.000Z"
            ))
        };
        let b = raw.as_bytes();
        if b.len() != 24 || b[19] != b'.' || b[23] != b'Z' {
            return Err(refuse());
        }
        let naive = NaiveDateTime::parse_from_str(raw, FORMAT).map_err(|_| refuse())?;
        let parsed = Self(naive.and_utc());
        if parsed.to_string() != raw {
            return Err(refuse());
        }
        Ok(parsed)
    }

    pub fn checked_add(&self, span: Duration) -> Option<Self> {
        let span = chrono::Duration::from_std(span).ok()?;
        self.0.checked_add_signed(span).map(Self::from_datetime)
    }

    /// Milliseconds from `earlier` to `self` (negative when `self` is earlier).
    pub fn millis_since(&self, earlier: UtcTime) -> i64 {
        self.unix_millis() - earlier.unix_millis()
    }
}

impl fmt::Display for UtcTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.format(FORMAT))
    }
}

impl std::str::FromStr for UtcTime {
    type Err = WireError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for UtcTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for UtcTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_one_format() {
        let t = UtcTime::parse("2026-07-30T08:00:00.000Z");
        assert_eq!(
            t.map(|t| t.to_string()).ok().as_deref(),
            Some("2026-07-30T08:00:00.000Z")
        );
    }

    #[test]
    fn refuses_other_formats() {
        for bad in [
            "2026-07-30T08:00:00Z",
            "2026-07-30T08:00:00.000000Z",
            "2026-07-30T08:00:00.000+00:00",
            "2026-07-30 08:00:00.000Z",
            "2026-07-30T08:00:00.000z",
            "2026-13-30T08:00:00.000Z",
            "2026-02-30T08:00:00.000Z",
            "",
        ] {
            assert!(UtcTime::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn truncates_to_millis() {
        let at = Utc.timestamp_opt(1_700_000_000, 123_456_789).single();
        let t = at.map(UtcTime::from_datetime);
        assert_eq!(t.map(|t| t.unix_millis()), Some(1_700_000_000_123));
    }
}
