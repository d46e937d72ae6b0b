//! The built-in scripted scenario of `troupe demo` (SPEC §8): no network, no key.
//!
//! The lead spawns a `writer` teammate; the writer submits a plan and tries to write before it is
//! approved (the plan gate denies it, before the handler runs); the lead approves; the writer
//! writes `NOTES.md` and reports; the lead checks the note with a background job and, once the
//! job has ended, asks the writer to shut down; the writer answers without a
//! model call; the run ends. Each agent's model is a function of its own conversation, so the
//! scenario follows whatever order the runtime delivers events in.
//!
//! Every answer carries a usage, estimated from the sizes of the request and the answer as for a
//! server that reports none ([`crate::model::estimate`], marked `estimated`), under the model
//! name [`MODEL`], which the built-in price table prices at a made-up demo price
//! ([`crate::prices::table`]): after the demo, `troupe usage` and the page show tokens and a cost
//! like a real run's.

use std::sync::Arc;

use serde_json::{json, Value};
use troupe_wire::AgentName;

use crate::bootstrap::ModelChooser;
use crate::model::estimate;
use crate::model::{
    ChatMessage, ModelClient, ModelError, ModelRequest, ModelResponse, ScriptedModel, ToolCall,
};

pub const TEAMMATE: &str = "writer";
pub const NOTES_FILE: &str = "NOTES.md";
/// Every file of the workspace the scenario writes, besides troupe's state under `.troupe/`:
/// the writer's `write_file` calls write [`NOTES_FILE`] and nothing else, and the lead's one
/// command (`wc -l`) only reads. `troupe demo --workspace DIR` refuses a folder that holds any
/// of them, since they may be the person's own. A new write in the scripts belongs here.
pub const WRITES: &[&str] = &[NOTES_FILE];
pub const PROMPT: &str =
    "Have a teammate add a short usage note to NOTES.md, under an approved plan, then shut it down.";

/// The name the demo's answers carry; the built-in price table knows it (a made-up price).
pub const MODEL: &str = "troupe-demo";

/// The demo's models: one scripted function per agent, each answer with its estimated usage.
pub struct DemoModels;

impl ModelChooser for DemoModels {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient> {
        let turn: fn(&ModelRequest) -> Result<ModelResponse, ModelError> = if agent.is_lead() {
            lead_turn
        } else {
            writer_turn
        };
        Arc::new(ScriptedModel::from_fn(move |request: &ModelRequest| {
            turn(request).map(|response| estimate::when_unreported(request, response))
        }))
    }
}

fn call(n: usize, name: &str, arguments: Value) -> ModelResponse {
    ModelResponse::tool_calls(
        vec![ToolCall::new(
            format!("call_{n}"),
            name,
            arguments.to_string(),
        )],
        MODEL,
    )
}

fn text(t: &str) -> ModelResponse {
    ModelResponse::text(t, MODEL)
}

/// Tool calls the agent made so far, by name.
fn calls_named<'a>(messages: &'a [ChatMessage], name: &str) -> Vec<&'a ToolCall> {
    messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Assistant(a) => Some(a.tool_calls.iter()),
            _ => None,
        })
        .flatten()
        .filter(|c| c.name == name)
        .collect()
}

/// The JSON bodies of `[event]` user messages.
fn events(messages: &[ChatMessage]) -> Vec<Value> {
    messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::User { content } => content.strip_prefix("[event] "),
            _ => None,
        })
        .filter_map(|body| serde_json::from_str(body).ok())
        .collect()
}

fn last_is_tool_result(messages: &[ChatMessage]) -> bool {
    matches!(messages.last(), Some(ChatMessage::Tool { .. }))
}

/// The lead's scripted model: its next step, read from its conversation. Public so that tests
/// can drive the same scenario through a real model server.
pub fn lead_turn(request: &ModelRequest) -> Result<ModelResponse, ModelError> {
    let m = &request.messages;
    let n = m.len();
    if last_is_tool_result(m) {
        return Ok(text("Done for now; waiting for the team."));
    }
    if calls_named(m, "spawn_teammate").is_empty() {
        return Ok(call(
            n,
            "spawn_teammate",
            json!({
                "name": TEAMMATE,
                "role": "documentation writer",
                "prompt": format!("Add a short usage note to {NOTES_FILE}. Submit a plan first."),
            }),
        ));
    }
    let events = events(m);
    let reviewed: Vec<String> = calls_named(m, "review_plan")
        .iter()
        .filter_map(|c| serde_json::from_str::<Value>(&c.arguments).ok())
        .filter_map(|a| a["request_id"].as_str().map(str::to_owned))
        .collect();
    let unreviewed = events.iter().find(|e| {
        e["protocol_kind"] == "plan_approval_request"
            && e["request_id"]
                .as_str()
                .is_some_and(|id| !reviewed.iter().any(|r| r == id))
    });
    if let Some(plan) = unreviewed {
        return Ok(call(
            n,
            "review_plan",
            json!({
                "request_id": plan["request_id"],
                "approve": true,
                "feedback": "Looks good; go ahead.",
            }),
        ));
    }
    if events
        .iter()
        .any(|e| e["protocol_kind"] == "shutdown_response")
    {
        return Ok(text(&format!(
            "{TEAMMATE} wrote {NOTES_FILE} under an approved plan and has shut down."
        )));
    }
    let wrote = events.iter().any(|e| {
        e["kind"] == "result"
            && e["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("Wrote"))
    });
    if wrote && calls_named(m, "shell").is_empty() {
        // A check of the note in the background: the lead hears when it ends.
        return Ok(call(
            n,
            "shell",
            json!({"command": format!("wc -l {NOTES_FILE}"), "run_in_background": true}),
        ));
    }
    let checked = events.iter().any(|e| e["kind"] == "job_completed");
    if wrote && checked && calls_named(m, "request_shutdown").is_empty() {
        return Ok(call(n, "request_shutdown", json!({"teammate": TEAMMATE})));
    }
    Ok(text("Waiting for the writer."))
}

/// The writer's scripted model: its next step, read from its conversation. Public so that
/// tests can drive the same scenario through a real model server.
pub fn writer_turn(request: &ModelRequest) -> Result<ModelResponse, ModelError> {
    let m = &request.messages;
    let n = m.len();
    let approved = m.iter().any(
        |msg| matches!(msg, ChatMessage::User { content } if content.starts_with("Plan approved")),
    );
    let writes = calls_named(m, "write_file").len();
    if last_is_tool_result(m) {
        return Ok(
            match (approved, calls_named(m, "submit_plan").len(), writes) {
                (false, 1, 0) => call(
                    n,
                    "write_file",
                    json!({
                        "path": NOTES_FILE,
                        "content": "draft written before approval\n",
                    }),
                ),
                (false, _, _) => text("Plan submitted; waiting for approval before writing."),
                (true, _, _) => text(&format!("Wrote {NOTES_FILE} as planned.")),
            },
        );
    }
    if !approved {
        return Ok(call(
            n,
            "submit_plan",
            json!({
                "plan": format!("1. Write a short usage note to {NOTES_FILE}. 2. Report back."),
            }),
        ));
    }
    Ok(call(
        n,
        "write_file",
        json!({
            "path": NOTES_FILE,
            "content": "# Notes\n\nRun `troupe demo` to watch a lead and a teammate work under a plan gate.\n",
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_model_is_priced_and_its_answers_carry_estimated_usage() {
        assert!(crate::prices::PriceTable::built_in()
            .lookup(MODEL)
            .is_some());
        let request = ModelRequest {
            messages: vec![ChatMessage::User {
                content: PROMPT.to_owned(),
            }],
            ..ModelRequest::default()
        };
        let answered = lead_turn(&request).unwrap();
        assert_eq!(answered.usage, None, "the turn itself counts nothing");
        let usage = estimate::when_unreported(&request, answered).usage.unwrap();
        assert!(usage.estimated && usage.prompt_tokens > 0 && usage.completion_tokens > 0);
    }
}
