//! One event in words, one line: what the terminal, `troupe log` and `troupe timeline` print.
//! Colours, stamps and the agent column are the caller's; this is only the text.

use troupe::store::events::kinds;
use troupe::wire::Event;

/// Flattens whitespace and cuts `text` to `max` characters.
pub fn short(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    kinds::cut(&flat, max)
}

/// The event's request id as a person types it (the short id: `troupe approve`, `deny` and
/// `review` take it); the text as it is when it is no request id.
fn request(event: &Event) -> String {
    let raw = event.str("request_id").unwrap_or("");
    troupe::wire::RequestId::parse(raw).map_or_else(|_| raw.to_owned(), |id| id.short())
}

/// The event's description without its agent, e.g. `tool shell {"command":"ls"} → ok: …`.
pub fn describe(event: &Event) -> String {
    let s = |key: &str| event.str(key).unwrap_or("");
    let n = |key: &str| event.u64(key).unwrap_or(0);
    match event.kind.as_str() {
        kinds::RUN_STARTED if event.fields.get("continued") == Some(&true.into()) => {
            "run started: continuing what an earlier run left".to_owned()
        }
        kinds::RUN_STARTED => format!("run started: {}", short(s("prompt"), 80)),
        kinds::RUN_ENDED => match event.str("error") {
            Some(error) => format!(
                "run ended ({}, exit {}): {}",
                s("outcome"),
                n("exit_code"),
                short(error, 100)
            ),
            None => format!("run ended ({}, exit {})", s("outcome"), n("exit_code")),
        },
        kinds::MODEL_CALL_STARTED => format!("model call {} started", n("call")),
        kinds::MODEL_RETRY => format!(
            "model {} failed (attempt {}), retrying in {} ms: {}",
            s("model"),
            n("attempt"),
            n("delay_ms"),
            short(s("error"), 90)
        ),
        kinds::MODEL_FALLBACK => format!(
            "model {} failed, falling back to {}: {}",
            s("from"),
            s("to"),
            short(s("error"), 80)
        ),
        kinds::MODEL_CALL_FINISHED => {
            let tokens = match (event.u64("tokens_in"), event.u64("tokens_out")) {
                (Some(i), Some(o)) => format!(", {i} in / {o} out tokens"),
                _ => String::new(),
            };
            let retries = match n("attempts") {
                0 | 1 => String::new(),
                a => format!(", {a} attempts"),
            };
            let fallback = if event.fields.get("fallback_used") == Some(&true.into()) {
                ", fallback"
            } else {
                ""
            };
            format!(
                "model {} answered in {} ms ({}{tokens}{retries}{fallback})",
                s("model"),
                n("latency_ms"),
                s("finish_reason")
            )
        }
        kinds::MODEL_CALL_FAILED => format!(
            "model call failed [{}]: {}",
            s("code"),
            short(s("error"), 110)
        ),
        kinds::ASSISTANT_TEXT => format!("says: {}", short(s("text"), 160)),
        kinds::TOOL_STARTED => format!("tool {} {}", s("tool"), short(s("preview"), 70)),
        kinds::TOOL_FINISHED => match s("outcome") {
            "denied" => format!(
                "tool {} DENIED ({}): {}",
                s("tool"),
                s("rule"),
                short(s("denial_reason"), 100)
            ),
            "error" => format!(
                "tool {} failed after {} ms: {}",
                s("tool"),
                n("duration_ms"),
                short(s("preview"), 100)
            ),
            _ => format!(
                "tool {} ok in {} ms: {}",
                s("tool"),
                n("duration_ms"),
                short(s("preview"), 80)
            ),
        },
        kinds::MESSAGE_SENT => {
            let verdict = match event.fields.get("approved").and_then(|v| v.as_bool()) {
                Some(true) => " approved",
                Some(false) => " rejected",
                None => "",
            };
            format!(
                "{} → {} [{}{verdict}] \"{}\"",
                s("from"),
                s("to"),
                s("message_kind"),
                short(s("preview"), 60)
            )
        }
        kinds::MESSAGE_CLAIMED => format!("claimed message {} from {}", s("message_id"), s("from")),
        kinds::MESSAGE_ACKED => format!("acked message {}", s("message_id")),
        kinds::MESSAGE_RELEASED => format!("released message {} to ready/", s("message_id")),
        kinds::MESSAGE_QUARANTINED => format!(
            "quarantined message {}: {}",
            s("message_id"),
            short(s("reason"), 90)
        ),
        kinds::REQUEST_CREATED => format!(
            "{} request {} → {} ({})",
            s("protocol"),
            s("from"),
            s("to"),
            request(event)
        ),
        kinds::REQUEST_ANSWERED => format!(
            "answered {} request {}: {}",
            s("protocol"),
            request(event),
            approved_word(event)
        ),
        kinds::REQUEST_CONSUMED => format!(
            "{} request {} is now {}",
            s("protocol"),
            request(event),
            s("status")
        ),
        kinds::REQUEST_EXPIRED => format!(
            "{} request {} ({} → {}) expired without an answer",
            s("protocol"),
            request(event),
            s("from"),
            s("to")
        ),
        kinds::APPROVAL_ASKED => format!(
            "asks approval for {} {}",
            s("tool"),
            short(s("preview"), 70)
        ),
        kinds::APPROVAL_ANSWERED => format!(
            "approval for {}: {}{}",
            s("tool"),
            if event.fields.get("allowed") == Some(&true.into()) {
                "allowed"
            } else {
                "denied"
            },
            match event.str("reason") {
                Some(r) if !r.is_empty() => format!(" ({})", short(r, 80)),
                _ => String::new(),
            }
        ),
        kinds::PERMISSION_REQUESTED => format!(
            "waits for approval of {} (permission request {}; answer with troupe approve or troupe deny)",
            short(s("summary"), 90),
            request(event)
        ),
        kinds::PERMISSION_ANSWERED => format!(
            "permission request {} {} by {}",
            request(event),
            if event.fields.get("approved") == Some(&true.into()) {
                "approved"
            } else {
                "denied"
            },
            s("by")
        ),
        kinds::PERMISSION_EXPIRED => format!(
            "permission request {} for {} expired unanswered: denied",
            request(event),
            s("tool")
        ),
        kinds::COMPACTION => format!(
            "context compacted ({}, {}): {} messages → {}, {} KB → {} KB",
            s("trigger"),
            s("how"),
            n("messages_before"),
            n("messages_after"),
            n("bytes_before") / 1024,
            n("bytes_after") / 1024
        ),
        kinds::JOB_STARTED => format!("job {} started: {}", s("job_id"), short(s("command"), 80)),
        kinds::JOB_ENDED => format!(
            "job {} ended {}{}",
            s("job_id"),
            s("status"),
            event
                .u64("exit_code")
                .map(|c| format!(" (exit {c})"))
                .unwrap_or_default()
        ),
        kinds::CRON_FIRED => format!("cron job {} fired: {}", s("job_id"), short(s("prompt"), 80)),
        kinds::TEAMMATE_SPAWNED => format!("spawned ({})", short(s("role"), 80)),
        kinds::TEAMMATE_STATUS => match event.str("detail") {
            Some(d) => format!("is {} ({})", s("status"), short(d, 100)),
            None => format!("is {}", s("status")),
        },
        kinds::USER_MESSAGE => format!("message from user: \"{}\"", short(s("text"), 120)),
        kinds::TASK_CREATED => {
            let mut text = format!(
                "task created: {} ({})",
                short(s("subject"), 80),
                s("task_id")
            );
            if let Some(assignee) = event.str("assignee") {
                text.push_str(&format!(" for {assignee}"));
            }
            if let Some(tags) = event.fields.get("tags").and_then(|t| t.as_array()) {
                let tags: Vec<&str> = tags.iter().filter_map(|t| t.as_str()).collect();
                text.push_str(&format!(" [{}]", tags.join(", ")));
            }
            text
        }
        kinds::TASK_CLAIMED => format!(
            "claimed task {} ({}), lease until {}",
            short(s("subject"), 80),
            s("task_id"),
            event.str("lease_expires_at").unwrap_or("-")
        ),
        kinds::TASK_COMPLETED => {
            format!(
                "completed task {} ({})",
                short(s("subject"), 80),
                s("task_id")
            )
        }
        kinds::TASK_LEASE_EXPIRED => format!(
            "task {} ({}) back on the board: {}",
            short(s("subject"), 80),
            s("task_id"),
            short(s("reason"), 80)
        ),
        kinds::TASK_RELEASED => format!(
            "gave task {} ({}) back: {}",
            short(s("subject"), 80),
            s("task_id"),
            short(s("reason"), 80)
        ),
        kinds::TEAMMATE_MERGED => format!(
            "{} merged into the lead's checkout ({}, {})",
            s("branch"),
            if event.fields.get("fast_forward").and_then(|v| v.as_bool()) == Some(true) {
                "fast-forward"
            } else {
                "merge commit"
            },
            short(s("commit"), 12)
        ),
        kinds::MERGE_CONFLICT => format!(
            "{} conflicts with the lead's checkout in {} (merge aborted, nothing changed)",
            s("branch"),
            event
                .fields
                .get("files")
                .and_then(|v| v.as_array())
                .map(|files| files
                    .iter()
                    .filter_map(|f| f.as_str())
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        ),
        other => format!(
            "{other} {}",
            short(
                &serde_json::Value::Object(event.fields.clone()).to_string(),
                120
            )
        ),
    }
}

fn approved_word(event: &Event) -> &'static str {
    match event.fields.get("approved").and_then(|v| v.as_bool()) {
        Some(true) => "approved",
        Some(false) => "rejected",
        None => "answered",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str, fields: serde_json::Value) -> Event {
        Event {
            seq: 1,
            at: troupe::wire::UtcTime::parse("2026-07-30T08:00:00.000Z").unwrap(),
            run_id: "r".into(),
            agent: "lead".into(),
            kind: kind.into(),
            fields: fields.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn every_kind_has_words_of_its_own() {
        for kind in kinds::ALL {
            let text = describe(&event(kind, json!({})));
            assert!(!text.starts_with(kind), "{kind} falls through: {text}");
        }
        assert!(describe(&event("new_kind", json!({"x": 1}))).starts_with("new_kind"));
    }

    #[test]
    fn a_denial_shows_its_rule_and_reason() {
        let text = describe(&event(
            kinds::TOOL_FINISHED,
            json!({"tool": "write_file", "outcome": "denied", "rule": "plan_gate", "denial_reason": "plan pending"}),
        ));
        assert_eq!(text, "tool write_file DENIED (plan_gate): plan pending");
    }
}
