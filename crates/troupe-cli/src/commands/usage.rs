//! `troupe usage`: tokens and their estimated cost per agent, model or day, and in total, from
//! `.troupe/usage.jsonl` read a line at a time (or a shared team's database, `--store`). Prices
//! are the built-in table with the settings' `[prices]` over it (`troupe::prices`); tokens of a
//! model with no price are shown, and their cost as "no price"; tokens troupe estimated for a
//! server that reported none are marked. Reads only; creates nothing.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use troupe::agent::usage::thousands;
use troupe::clock::{Clock, SystemClock};
use troupe::prices::report::{GroupBy, Line, UsageReport};
use troupe::wire::UtcTime;

use crate::args::{UsageArgs, UsageGroup};
use crate::error::CliError;
use crate::input::parse_duration;
use crate::render;

pub async fn usage(workspace: &Path, args: &UsageArgs) -> Result<(), CliError> {
    let since = args
        .since
        .as_deref()
        .map(|raw| parse_duration(raw).and_then(|d| cutoff(SystemClock.now(), d)))
        .transpose()?;
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let choice = crate::store_choice::store_choice(&args.store, &settings, false)?;
    let inspector = troupe::bootstrap::inspector_with(workspace, &choice)
        .await
        .map_err(|e| CliError::coded(&e))?;
    let buckets = inspector
        .usage_buckets(since)
        .await
        .map_err(|e| CliError::coded(&e))?;
    let report = UsageReport::new(&buckets, group_by(args.by), &settings.prices.table());
    if args.json {
        render::print_json(&json!({
            "by": report.by,
            "since": since.map(|at| at.to_string()),
            "groups": report.groups,
            "total": report.total,
        }))
    } else {
        render::print_text(&text(&report, since))
    }
}

/// The table of `troupe usage` (by agent, all time) for the team `choice` names: the session's
/// `/cost`.
pub async fn table(
    workspace: &Path,
    choice: &troupe::bootstrap::StoreChoice,
) -> Result<String, CliError> {
    let report = report_by_agent(workspace, choice, None).await?;
    Ok(text(&report, None))
}

/// The tokens and estimated cost per agent of the team `choice` names, since `since` (all
/// time: `None`): `/cost`'s table, and what a `troupe mcp serve` run spent.
pub async fn report_by_agent(
    workspace: &Path,
    choice: &troupe::bootstrap::StoreChoice,
    since: Option<UtcTime>,
) -> Result<UsageReport, CliError> {
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let inspector = troupe::bootstrap::inspector_with(workspace, choice)
        .await
        .map_err(|e| CliError::coded(&e))?;
    let buckets = inspector
        .usage_buckets(since)
        .await
        .map_err(|e| CliError::coded(&e))?;
    Ok(UsageReport::new(
        &buckets,
        GroupBy::Agent,
        &settings.prices.table(),
    ))
}

fn group_by(group: UsageGroup) -> GroupBy {
    match group {
        UsageGroup::Agent => GroupBy::Agent,
        UsageGroup::Model => GroupBy::Model,
        UsageGroup::Day => GroupBy::Day,
    }
}

/// `now` less `back`: where `--since` starts.
fn cutoff(now: UtcTime, back: Duration) -> Result<UtcTime, CliError> {
    i64::try_from(back.as_millis())
        .ok()
        .and_then(|millis| now.unix_millis().checked_sub(millis))
        .and_then(|millis| UtcTime::from_unix_millis(millis).ok())
        .ok_or_else(|| {
            CliError::usage(format!(
                "--since {back:?} reaches before any time troupe can show"
            ))
        })
}

/// The table: a header, one line per group, the total; then what has no price.
fn text(report: &UsageReport, since: Option<UtcTime>) -> String {
    let mut out = match since {
        Some(at) => format!("usage by {} since {at}\n", report.by.as_str()),
        None => format!("usage by {}\n", report.by.as_str()),
    };
    if report.groups.is_empty() {
        out.push_str("  (none recorded)\n");
        return out;
    }
    let width = report
        .groups
        .iter()
        .map(|g| g.key.chars().count())
        .chain([report.by.as_str().len(), "total".len()])
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "  {:<width$}  {:>12}  {:>12}  {:>12}  {:>12}  {:>10}",
        report.by.as_str(),
        "prompt",
        "completion",
        "cache read",
        "cache write",
        "cost"
    );
    for group in &report.groups {
        line(&mut out, &group.key, &group.line, width);
    }
    line(&mut out, "total", &report.total, width);
    if !report.total.unpriced_models.is_empty() {
        let models = report.total.unpriced_models.join(", ");
        let _ = writeln!(
            out,
            "no price for {models}: their tokens are not in the cost (* marks a partial cost); \
             set [prices.\"MODEL\"] in troupe.toml"
        );
    }
    if report.total.tokens.estimated_tokens > 0 {
        let _ = writeln!(out, "{} (lines marked estimated)", render::ESTIMATED_NOTE);
    }
    out.push_str("costs are estimates from list prices per million tokens\n");
    out
}

fn line(out: &mut String, key: &str, line: &Line, width: usize) {
    let cost = match (line.cost, line.unpriced_models.is_empty()) {
        (None, _) => "no price".to_owned(),
        (Some(cost), true) => cost.text(),
        (Some(cost), false) => format!("{}*", cost.text()),
    };
    let t = &line.tokens;
    // Tokens troupe estimated for a server that reported none.
    let estimated = match t.estimated_tokens {
        0 => "",
        n if n >= t.total_tokens => "  estimated",
        _ => "  partly estimated",
    };
    let _ = writeln!(
        out,
        "  {key:<width$}  {:>12}  {:>12}  {:>12}  {:>12}  {cost:>10}{estimated}",
        thousands(t.prompt_tokens),
        thousands(t.completion_tokens),
        thousands(t.cache_read_tokens),
        thousands(t.cache_write_tokens),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_counts_back_from_now() {
        let now = UtcTime::parse("2026-07-30T08:00:00.000Z").unwrap();
        assert_eq!(
            cutoff(now, Duration::from_secs(90 * 60))
                .unwrap()
                .to_string(),
            "2026-07-30T06:30:00.000Z"
        );
        assert!(cutoff(now, Duration::from_secs(u64::MAX / 2)).is_err());
    }
}
