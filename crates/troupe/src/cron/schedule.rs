//! Cron expressions and their next fire times: parsing and pure time arithmetic, no I/O.
//!
//! An expression has exactly five fields — minute, hour, day-of-month, month, day-of-week — in
//! the POSIX/Vixie syntax (`*`, lists, ranges, `*/n` and `a-b/n` steps, `JAN`–`DEC`, `SUN`–`SAT`,
//! day-of-week `0`–`7` with both `0` and `7` meaning Sunday; when both day fields are
//! restricted, a day matching either fires, as in Vixie cron). Nicknames such as `@daily`, a
//! seconds field and a year field are refused: the contract (SPEC §4.1) says five fields.
//!
//! Parsing and matching are [`croner`]'s, which follows the Open Cron Pattern Specification.
//! Why `croner` and not `cron`: `cron` wants six or seven fields (seconds first) and numbers
//! weekdays Quartz-style (1 = Sunday), so a standard five-field expression would have to be
//! rewritten field by field and its weekdays renumbered — a silent off-by-one waiting to
//! happen. `croner` reads five-field expressions natively with POSIX weekdays, and documents
//! what happens across daylight-saving changes, which is the part that is easy to get wrong.
//!
//! # Daylight-saving changes
//!
//! Times are matched on the wall clock of the job's zone. Fire times are instants (UTC).
//!
//! - **Spring forward** (a wall-clock hour is skipped): a job at a fixed time inside the gap,
//!   e.g. `30 2 * * *` in `Europe/Berlin` on the last Sunday of March, fires once at the first
//!   valid wall-clock time after the gap, 03:00 local, the same day; it is not skipped. A job
//!   with wildcard or stepped minutes or hours (`*/15 * * * *`) simply has no fires inside the
//!   gap.
//! - **Fall back** (a wall-clock hour repeats): a job at a fixed time inside the repeated hour
//!   fires once, at the first pass; a job with wildcard or stepped minutes or hours fires in
//!   both passes.
//!
//! The next fire after a fire is computed from that fire's exact instant, which is what keeps
//! a fixed-time job from firing again in the second pass of a repeated hour.

use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, Timelike, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use troupe_wire::UtcTime;

use crate::error::ErrorCode;

/// Why an expression or zone was refused, or no fire time exists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "invalid cron expression {expression:?}: {reason} \
         (expected 5 fields: minute hour day-of-month month day-of-week, e.g. \"30 9 * * MON-FRI\")"
    )]
    InvalidExpression { expression: String, reason: String },
    #[error("unknown time zone {0:?}: expected an IANA name such as \"Europe/Berlin\" or \"UTC\"")]
    UnknownTimeZone(String),
    #[error("cron expression {expression:?} in {timezone} never fires after {after}")]
    NoNextFire {
        expression: String,
        timezone: String,
        after: UtcTime,
    },
}

impl ErrorCode for ScheduleError {
    fn code(&self) -> &'static str {
        match self {
            // Both come from what a caller passed in: the model sees them as bad arguments.
            Self::InvalidExpression { .. } | Self::UnknownTimeZone(_) => "invalid_arguments",
            Self::NoNextFire { .. } => "cron_never_fires",
        }
    }
}

/// The field names, in order, for messages.
const FIELDS: [&str; 5] = ["minute", "hour", "day-of-month", "month", "day-of-week"];

/// A parsed five-field expression in one IANA time zone.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    /// As the caller wrote it (trimmed), so listings show what was asked for.
    expression: String,
    cron: Cron,
    zone: Tz,
}

impl PartialEq for CronSchedule {
    fn eq(&self, other: &Self) -> bool {
        self.expression == other.expression && self.zone == other.zone
    }
}

impl Eq for CronSchedule {}

impl CronSchedule {
    /// Parses `expression` (exactly five fields) and `timezone` (an IANA name).
    pub fn parse(expression: &str, timezone: &str) -> Result<Self, ScheduleError> {
        let zone = parse_zone(timezone)?;
        let expression = expression.trim();
        let invalid = |reason: String| ScheduleError::InvalidExpression {
            expression: expression.to_owned(),
            reason,
        };
        let fields: Vec<&str> = expression.split_whitespace().collect();
        if fields.len() != FIELDS.len() {
            return Err(invalid(format!("it has {} fields", fields.len())));
        }
        if let Some((i, _)) = fields.iter().enumerate().find(|(_, f)| f.contains('@')) {
            return Err(invalid(format!("the {} field contains '@'", FIELDS[i])));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(expression)
            .map_err(|e| invalid(e.to_string()))?;
        Ok(Self {
            expression: expression.to_owned(),
            cron,
            zone,
        })
    }

    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The IANA name of the zone, e.g. `Europe/Berlin`.
    pub fn timezone(&self) -> &'static str {
        self.zone.name()
    }

    /// The first fire time strictly after `after`.
    pub fn next_after(&self, after: UtcTime) -> Result<UtcTime, ScheduleError> {
        // Fires fall on whole minutes, so dropping the milliseconds cannot skip one: a fire at
        // the truncated second itself is not after `after` either.
        let start = after
            .as_datetime()
            .with_nanosecond(0)
            .unwrap_or(after.as_datetime())
            .with_timezone(&self.zone);
        self.cron
            .find_next_occurrence(&start, false)
            .map(|next| UtcTime::from_datetime(next.with_timezone(&Utc)))
            .map_err(|_| ScheduleError::NoNextFire {
                expression: self.expression.clone(),
                timezone: self.timezone().to_owned(),
                after,
            })
    }

    /// `at` on the wall clock of the job's zone, RFC 3339 with its offset, e.g.
    /// `2026-03-29T03:00:00.000+02:00`.
    pub fn local_time(&self, at: UtcTime) -> String {
        local_time(at, self.zone)
    }
}

/// Parses an IANA zone name exactly (case matters, as in the tz database).
pub fn parse_zone(name: &str) -> Result<Tz, ScheduleError> {
    Tz::from_str(name).map_err(|_| ScheduleError::UnknownTimeZone(name.to_owned()))
}

fn local_time(at: UtcTime, zone: Tz) -> String {
    let local: DateTime<Tz> = at.as_datetime().with_timezone(&zone);
    local.to_rfc3339_opts(SecondsFormat::Millis, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(raw: &str) -> UtcTime {
        UtcTime::parse(raw).unwrap()
    }

    #[test]
    fn next_after_is_strictly_after_even_within_the_second() {
        let s = CronSchedule::parse("0 8 * * *", "UTC").unwrap();
        assert_eq!(
            s.next_after(at("2026-07-30T08:00:00.000Z")).unwrap(),
            at("2026-07-31T08:00:00.000Z")
        );
        assert_eq!(
            s.next_after(at("2026-07-30T07:59:59.999Z")).unwrap(),
            at("2026-07-30T08:00:00.000Z")
        );
        assert_eq!(
            s.next_after(at("2026-07-30T08:00:00.500Z")).unwrap(),
            at("2026-07-31T08:00:00.000Z")
        );
    }

    #[test]
    fn weekdays_are_posix_numbered() {
        // 2026-07-30 is a Thursday; 0 and 7 are Sunday, 1 is Monday.
        let now = at("2026-07-30T08:00:00.000Z");
        for (dow, expected) in [
            ("0", "2026-08-02T09:00:00.000Z"),
            ("7", "2026-08-02T09:00:00.000Z"),
            ("SUN", "2026-08-02T09:00:00.000Z"),
            ("1", "2026-08-03T09:00:00.000Z"),
            ("4", "2026-07-30T09:00:00.000Z"),
        ] {
            let s = CronSchedule::parse(&format!("0 9 * * {dow}"), "UTC").unwrap();
            assert_eq!(s.next_after(now).unwrap(), at(expected), "{dow}");
        }
    }

    #[test]
    fn local_time_carries_the_offset() {
        let s = CronSchedule::parse("0 8 * * *", "Europe/Berlin").unwrap();
        assert_eq!(
            s.local_time(at("2026-07-30T06:00:00.000Z")),
            "2026-07-30T08:00:00.000+02:00"
        );
    }
}
