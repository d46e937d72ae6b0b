//! `GET /api/state`: the team at a glance — every agent (the lead first) with its status, tokens
//! and estimated cost, the pending plan requests, and the last event's `seq`.
//!
//! Built from the read-only `Inspector` (roster, usage totals, pending requests) and, for the
//! model each agent uses, the `model_call_finished` events of the server's [`EventCache`].

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{json, Value};
use troupe::bootstrap::StoreChoice;
use troupe::error::ErrorCode;
use troupe::layout::Layout;
use troupe::store::events::read::last_seq;
use troupe::wire::RequestStatus;

use super::cache::EventCache;
use super::price;

/// Why the state could not be read: a message with its stable code.
pub struct StateError {
    pub code: &'static str,
    pub message: String,
}

pub fn state(
    layout: &Layout,
    team: &StoreChoice,
    cache: &Mutex<EventCache>,
) -> Result<Value, StateError> {
    let report = troupe::bootstrap::inspector_with(layout.workspace(), team)
        .map_err(|e| StateError {
            code: e.code(),
            message: e.to_string(),
        })?
        .status()
        .map_err(|e| StateError {
            code: e.code(),
            message: e.to_string(),
        })?;
    let (models, cached_last) = {
        let mut cache = cache.lock().map_err(|_| StateError {
            code: "internal",
            message: "the event cache is poisoned".to_owned(),
        })?;
        cache.refresh().map_err(|e| StateError {
            code: e.code,
            message: e.message,
        })?;
        (cache.models().clone(), cache.last_seq())
    };
    let last = match team {
        StoreChoice::Files => last_seq(&layout.events_log()).map_err(|e| StateError {
            code: "storage_error",
            message: e.to_string(),
        })?,
        // The shared stream's positions are the cache's, read just now.
        StoreChoice::Postgres(_) => cached_last,
    };
    let lead_status = if report.run.active { "running" } else { "idle" };
    let mut agents = vec![agent("lead", "lead", lead_status, &report.usage, &models)];
    for teammate in &report.teammates {
        agents.push(agent(
            teammate.name.as_str(),
            &teammate.role,
            teammate.status.as_str(),
            &report.usage,
            &models,
        ));
    }
    let pending_plans: Vec<Value> = report
        .pending_requests
        .iter()
        // Answered but not yet read by its teammate (the answer is recorded in `answers/`
        // until then) is no longer waiting for a person.
        .filter(|r| {
            r.kind == "plan_approval"
                && r.status == RequestStatus::Pending
                && r.resolution.is_none()
                && !answer_recorded(layout, &r.id)
        })
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
    Ok(json!({
        "workspace": report.workspace,
        "run_active": report.run.active,
        "agents": agents,
        "pending_plans": pending_plans,
        "last_seq": last,
        "cost_note": "estimate from list prices per million tokens; null for unknown models",
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
    usage: &troupe::store::usage::UsageTotals,
    models: &BTreeMap<String, String>,
) -> Value {
    let counts = usage.agents.get(name).copied().unwrap_or_default();
    let model = models.get(name);
    let cost =
        model.and_then(|m| price::estimate(m, counts.prompt_tokens, counts.completion_tokens));
    json!({
        "name": name,
        "role": role,
        "status": status,
        "model": model,
        "tokens_in": counts.prompt_tokens,
        "tokens_out": counts.completion_tokens,
        "cost_usd": cost,
    })
}
