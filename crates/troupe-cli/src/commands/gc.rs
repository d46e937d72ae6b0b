//! `troupe gc [--dry-run] [--json]`: one gc pass over the workspace's state (and a shared
//! team's database) under the settings' `[retention]` (`troupe::gc`). Prints, per kind, what
//! was removed (with `--dry-run`: what would be) and what was kept and why, and the size of
//! `.troupe/` before and after. Safe beside a running team; a pass interrupted midway is
//! finished by the next.

use std::path::Path;

use troupe::clock::{Clock, SystemClock};
use troupe::gc::{collect, Outcome, RunLock};
use troupe::layout::Layout;
use troupe::store::retention::{Kind, Policy};

use crate::args::StoreFlags;
use crate::error::CliError;
use crate::render;

pub async fn gc(
    workspace: &Path,
    dry_run: bool,
    json: bool,
    store: &StoreFlags,
) -> Result<(), CliError> {
    let settings = crate::trust::load(workspace, crate::trust::Use::Read)?.settings;
    let choice = crate::store_choice::store_choice(store, &settings, false)?;
    let shared = crate::store_choice::shared_retention(&choice).await?;
    let layout = Layout::new(workspace);
    let outcome = collect(
        &layout,
        shared,
        &settings.retention,
        SystemClock.now(),
        dry_run,
        RunLock::Probe,
    )
    .await
    .map_err(|e| CliError::coded(&e))?;
    if json {
        render::print_json(&outcome)
    } else {
        render::print_text(&text(&outcome, &settings.retention))
    }
}

/// The report as a table: one line per kind with what went and what stayed.
fn text(outcome: &Outcome, policy: &Policy) -> String {
    let report = &outcome.report;
    let verb = if report.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let mut out = String::new();
    if report.kinds.is_empty() {
        return "nothing under .troupe/ that retention applies to\n".to_owned();
    }
    if let Some(since) = &outcome.live_run_since {
        out.push_str(&format!(
            "a run is live (since {since}): what it uses is kept\n"
        ));
    }
    out.push_str(&format!(
        "{:<12} {:<14} {:<22} kept\n",
        "kind", "rule", verb
    ));
    for kind in Kind::ALL {
        let Some(k) = report.kinds.get(&kind) else {
            continue;
        };
        let kept: Vec<String> = k
            .kept
            .iter()
            .map(|(why, t)| format!("{} {why}", t.items))
            .collect();
        out.push_str(&format!(
            "{:<12} {:<14} {:<22} {}\n",
            kind.as_str(),
            rule_text(policy, kind),
            format!("{} ({})", k.removed.items, render::bytes(k.removed.bytes)),
            if kept.is_empty() {
                "-".to_owned()
            } else {
                kept.join(", ")
            }
        ));
    }
    let total = report.removed_total();
    out.push_str(&format!(
        "\n{verb} {} items ({}); .troupe/ {} → {}\n",
        total.items,
        render::bytes(total.bytes),
        render::bytes(outcome.bytes_before),
        render::bytes(outcome.bytes_after)
    ));
    out
}

/// `[retention]` as `troupe config` shows it: `auto` and each kind's rule.
pub fn config_text(policy: &Policy) -> String {
    let mut out = format!("\n[retention]\n{:<16} = {}\n", "auto", policy.auto);
    for kind in Kind::ALL {
        out.push_str(&format!(
            "{:<16} = {:?}\n",
            kind.as_str(),
            rule_text(policy, kind)
        ));
    }
    out
}

/// `[retention]` as `troupe config --json` shows it: seconds and bytes (`null`: no limit).
pub fn config_json(policy: &Policy) -> serde_json::Value {
    let mut value = serde_json::json!({ "auto": policy.auto });
    for kind in Kind::ALL {
        let rule = policy.rule(kind);
        value[kind.as_str()] = serde_json::json!({
            "age_secs": rule.age.map(|d| d.as_secs()),
            "size_bytes": rule.size,
        });
    }
    value
}

/// `30d`, `1h 500MB`, `never`.
fn rule_text(policy: &Policy, kind: Kind) -> String {
    let rule = policy.rule(kind);
    let age = rule.age.map(|d| {
        let secs = d.as_secs();
        match secs {
            s if s % 86_400 == 0 => format!("{}d", s / 86_400),
            s if s % 3600 == 0 => format!("{}h", s / 3600),
            s if s % 60 == 0 => format!("{}m", s / 60),
            s => format!("{s}s"),
        }
    });
    match (age, rule.size) {
        (None, None) => "never".to_owned(),
        (Some(age), None) => age,
        (None, Some(size)) => render::bytes(size),
        (Some(age), Some(size)) => format!("{age} {}", render::bytes(size)),
    }
}
