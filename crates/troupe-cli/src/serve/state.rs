//! `GET /api/state`: the team at a glance — every agent (the lead first) with its status, tokens
//! and estimated cost, the plan and permission requests waiting for an answer, and the last
//! event's `seq`.
//!
//! Built from the served team's read-only `Inspector` (roster, pending requests; opened once, so a
//! shared team's page does not connect to its database at every look), the fold of the usage records
//! ([`CostFold`]: tokens, costs and `cost_series`, the cost over time) and, for the model each
//! agent uses, the fold of `model_call_finished` events kept by the server's [`EventWindow`]. An
//! agent's cost is `troupe usage`'s: each model's tokens at that model's price (`troupe::prices`,
//! with the settings' `[prices]`); `null` when none of its tokens has a price. The series' last
//! total is the sum of the agents' costs (the same sums).

use std::collections::BTreeMap;

use serde_json::{json, Value};
use troupe::bootstrap::TeamView;
use troupe::error::ErrorCode;
use troupe::inspect::RequestView;
use troupe::layout::Layout;
use troupe::wire::{RequestKind, RequestStatus};

use troupe::prices::report::{GroupBy, Line, UsageReport};
use troupe::prices::PriceTable;

use super::cost::CostFold;
use super::permissions;
use super::window::EventWindow;

/// Why the state could not be read: a message with its stable code.
pub struct StateError {
    pub code: &'static str,
    pub message: String,
}

pub async fn state(
    layout: &Layout,
    view: &TeamView,
    window: &tokio::sync::Mutex<EventWindow>,
    cost: &tokio::sync::Mutex<CostFold>,
    prices: &PriceTable,
) -> Result<Value, StateError> {
    let failed = |e: troupe::inspect::InspectError| StateError {
        code: e.code(),
        message: e.to_string(),
    };
    let report = view.inspector().status().await.map_err(failed)?;
    let (usage, cost_series) = {
        let mut cost = cost.lock().await;
        cost.refresh().await.map_err(|e| StateError {
            code: e.code,
            message: e.message,
        })?;
        (
            UsageReport::new(cost.series().buckets(), GroupBy::Agent, prices),
            cost.json(),
        )
    };
    let usage: BTreeMap<String, Line> = usage
        .groups
        .into_iter()
        .map(|group| (group.key, group.line))
        .collect();
    let models = {
        let mut window = window.lock().await;
        let read = |e: super::history::ReadError| StateError {
            code: e.code,
            message: e.message,
        };
        window.refresh().await.map_err(read)?;
        let mut names = vec!["lead"];
        names.extend(report.teammates.iter().map(|t| t.name.as_str()));
        window.models(&names).await.map_err(read)?.clone()
    };
    let last = view.events().last().await.map_err(|e| StateError {
        code: e.code(),
        message: e.to_string(),
    })?;
    let lead_status = if report.run.active { "running" } else { "idle" };
    let mut agents = vec![agent("lead", "lead", lead_status, &usage, &models)];
    for teammate in &report.teammates {
        agents.push(agent(
            teammate.name.as_str(),
            &teammate.role,
            teammate.status.as_str(),
            &usage,
            &models,
        ));
    }
    // Answered but not yet read by its agent (the answer is recorded in `answers/` until then)
    // is no longer waiting for a person; nor is a request past its window.
    let waiting: Vec<&RequestView> = report
        .pending_requests
        .iter()
        .filter(|r| {
            r.status == RequestStatus::Pending
                && r.resolution.is_none()
                && !answer_recorded(layout, &r.id)
        })
        .collect();
    let pending_plans: Vec<Value> = waiting
        .iter()
        .filter(|r| r.kind == RequestKind::PlanApproval.as_str())
        .map(|r| {
            json!({
                "request_id": r.id,
                "from": r.sender,
                "to": r.target,
                "plan": r.content,
                "created_at": r.created_at_utc,
                "expires_at": r.expires_at_utc,
            })
        })
        .collect();
    let pending_permissions: Vec<Value> = waiting
        .iter()
        .filter(|r| r.kind == RequestKind::Permission.as_str())
        .map(|r| permissions::view(r))
        .collect();
    Ok(json!({
        "workspace": report.workspace,
        "run_active": report.run.active,
        "agents": agents,
        "pending_plans": pending_plans,
        "pending_permissions": pending_permissions,
        "last_seq": last,
        "cost_series": cost_series,
        "cost_note": "estimate from list prices per million tokens (troupe usage); \
                      null when no model of the agent has a price",
    }))
}

/// Whether an answer to request `id` is recorded (`.troupe/protocol/answers/<id>.json`).
fn answer_recorded(layout: &Layout, id: &str) -> bool {
    layout
        .protocol_answers_dir()
        .join(format!("{id}.json"))
        .symlink_metadata()
        .is_ok()
}

fn agent(
    name: &str,
    role: &str,
    status: &str,
    usage: &BTreeMap<String, Line>,
    models: &BTreeMap<String, String>,
) -> Value {
    let line = usage.get(name).cloned().unwrap_or_default();
    json!({
        "name": name,
        "role": role,
        "status": status,
        "model": models.get(name),
        "tokens_in": line.tokens.prompt_tokens,
        "tokens_out": line.tokens.completion_tokens,
        "cost_usd": line.cost,
        "unpriced_models": line.unpriced_models,
    })
}
