//! Every kind of event, with its fields, built in one place (SPEC §10). Renderers match on the
//! `KIND` names; tools reading `events.jsonl` see the fields documented here.
//!
//! | kind | agent | fields |
//! |---|---|---|
//! | `run_started` | `troupe` | `prompt` (preview), `workspace`, `model`, `sandbox` (mode, mechanism, network); `continued: true` for `run --continue` (empty `prompt`) |
//! | `run_ended` | `troupe` | `exit_code`, `outcome` (`done`, `failed`, `interrupted`, `budget`, `stopped`: a worker told to stop), `answer`? , `error`?, `nothing_to_continue: true` (`run --continue` found nothing) |
//! | `model_call_started` | agent | `call` (number in the turn), `purpose` (`turn`, `summary`, …) |
//! | `model_retry` | agent | `model`, `attempt` (the failed one), `error`, `delay_ms` |
//! | `model_fallback` | agent | `from`, `to`, `error` |
//! | `model_call_finished` | agent | `model`, `latency_ms`, `tokens_in`, `tokens_out`, `tokens_cached`?, `tokens_cache_write`?, `finish_reason`, `attempts`, `fallback_used` |
//! | `model_call_failed` | agent | `error`, `code`, `latency_ms` |
//! | `assistant_text` | agent | `text` |
//! | `tool_started` | agent | `call_id`, `tool`, `args_digest` (sha-256 of the arguments, 16 hex), `preview` |
//! | `tool_finished` | agent | `call_id`, `tool`, `duration_ms`, `outcome` (`ok`, `error`, `denied`), `rule`?, `denial_reason`?, `preview` |
//! | `message_sent` | sender | `message_id`, `from`, `to`, `message_kind`, `request_id`?, `approved`?, `preview` |
//! | `message_claimed` / `message_acked` / `message_released` | owner | `message_id` |
//! | `message_quarantined` | owner | `message_id`, `reason` |
//! | `request_created` | sender | `request_id`, `protocol`, `from`, `to`, `expires_at` |
//! | `request_answered` | answerer | `request_id`, `protocol`, `approved`, `status` |
//! | `request_consumed` | receiver | `request_id`, `protocol`, `message_id` |
//! | `request_expired` | sender | `request_id`, `protocol`, `from`, `to` |
//! | `approval_asked` | agent | `tool`, `preview`, `reason`, `provider` |
//! | `approval_answered` | agent | `tool`, `allowed`, `reason`, `provider` |
//! | `permission_requested` | agent | `request_id`, `tool`, `summary`, `to` (`user` or `lead`), `expires_at` |
//! | `permission_answered` | agent | `request_id`, `tool`, `approved`, `choice`, `by`, `reason` |
//! | `permission_expired` | agent | `request_id`, `tool` |
//! | `compaction` | agent | `trigger`, `how` (`summary`, `dropped`), `messages_before`, `messages_after`, `bytes_before`, `bytes_after` |
//! | `job_started` | agent | `job_id`, `command` |
//! | `job_ended` | agent | `job_id`, `command`, `status`, `exit_code`? |
//! | `cron_fired` | `lead` | `job_id`, `scheduled_for`, `prompt` |
//! | `teammate_spawned` | teammate | `role` |
//! | `teammate_status` | teammate | `status`, `detail`? |
//! | `user_message` | recipient | `message_id`, `text` |
//! | `task_created` | `lead` | `task_id`, `subject`, `status`, `tags`?, `assignee`?, `blocked_by` |
//! | `task_claimed` | claimer | `task_id`, `subject`, `status`, `owner`, `lease_expires_at`? |
//! | `task_completed` | owner | `task_id`, `subject`, `status`, `owner` |
//! | `task_lease_expired` | previous owner | `task_id`, `subject`, `status`, `previous_owner`, `reason` |
//! | `task_released` | previous owner | `task_id`, `subject`, `status`, `previous_owner`, `reason` |
//! | `teammate_merged` | teammate | `branch`, `commit` (the lead's `HEAD` after), `fast_forward` |
//! | `merge_conflict` | teammate | `branch`, `files` (the conflicting paths; the merge was aborted) |
//!
//! The four `request_*` kinds are written for shutdown and plan requests; a permission request
//! has its own three `permission_*` kinds, written by the call that waits on it.

use serde_json::{json, Map, Value};

pub const RUN_STARTED: &str = "run_started";
pub const RUN_ENDED: &str = "run_ended";
pub const MODEL_CALL_STARTED: &str = "model_call_started";
pub const MODEL_RETRY: &str = "model_retry";
pub const MODEL_FALLBACK: &str = "model_fallback";
pub const MODEL_CALL_FINISHED: &str = "model_call_finished";
pub const MODEL_CALL_FAILED: &str = "model_call_failed";
pub const ASSISTANT_TEXT: &str = "assistant_text";
pub const TOOL_STARTED: &str = "tool_started";
pub const TOOL_FINISHED: &str = "tool_finished";
pub const MESSAGE_SENT: &str = "message_sent";
pub const MESSAGE_CLAIMED: &str = "message_claimed";
pub const MESSAGE_ACKED: &str = "message_acked";
pub const MESSAGE_RELEASED: &str = "message_released";
pub const MESSAGE_QUARANTINED: &str = "message_quarantined";
pub const REQUEST_CREATED: &str = "request_created";
pub const REQUEST_ANSWERED: &str = "request_answered";
pub const REQUEST_CONSUMED: &str = "request_consumed";
pub const REQUEST_EXPIRED: &str = "request_expired";
pub const APPROVAL_ASKED: &str = "approval_asked";
pub const APPROVAL_ANSWERED: &str = "approval_answered";
pub const PERMISSION_REQUESTED: &str = "permission_requested";
pub const PERMISSION_ANSWERED: &str = "permission_answered";
pub const PERMISSION_EXPIRED: &str = "permission_expired";
pub const COMPACTION: &str = "compaction";
pub const JOB_STARTED: &str = "job_started";
pub const JOB_ENDED: &str = "job_ended";
pub const CRON_FIRED: &str = "cron_fired";
pub const TEAMMATE_SPAWNED: &str = "teammate_spawned";
pub const TEAMMATE_STATUS: &str = "teammate_status";
pub const USER_MESSAGE: &str = "user_message";
pub const TASK_CREATED: &str = "task_created";
pub const TASK_CLAIMED: &str = "task_claimed";
pub const TASK_COMPLETED: &str = "task_completed";
pub const TASK_LEASE_EXPIRED: &str = "task_lease_expired";
pub const TASK_RELEASED: &str = "task_released";
pub const TEAMMATE_MERGED: &str = "teammate_merged";
pub const MERGE_CONFLICT: &str = "merge_conflict";

/// Every kind above, in the order of the table.
pub const ALL: [&str; 38] = [
    RUN_STARTED,
    RUN_ENDED,
    MODEL_CALL_STARTED,
    MODEL_RETRY,
    MODEL_FALLBACK,
    MODEL_CALL_FINISHED,
    MODEL_CALL_FAILED,
    ASSISTANT_TEXT,
    TOOL_STARTED,
    TOOL_FINISHED,
    MESSAGE_SENT,
    MESSAGE_CLAIMED,
    MESSAGE_ACKED,
    MESSAGE_RELEASED,
    MESSAGE_QUARANTINED,
    REQUEST_CREATED,
    REQUEST_ANSWERED,
    REQUEST_CONSUMED,
    REQUEST_EXPIRED,
    APPROVAL_ASKED,
    APPROVAL_ANSWERED,
    PERMISSION_REQUESTED,
    PERMISSION_ANSWERED,
    PERMISSION_EXPIRED,
    COMPACTION,
    JOB_STARTED,
    JOB_ENDED,
    CRON_FIRED,
    TEAMMATE_SPAWNED,
    TEAMMATE_STATUS,
    USER_MESSAGE,
    TASK_CREATED,
    TASK_CLAIMED,
    TASK_COMPLETED,
    TASK_LEASE_EXPIRED,
    TASK_RELEASED,
    TEAMMATE_MERGED,
    MERGE_CONFLICT,
];

/// How much of a long text (a prompt, a tool result, message content) an event carries.
pub const PREVIEW_CHARS: usize = 200;

/// `text` cut to [`PREVIEW_CHARS`] characters (with `…` when cut).
pub fn preview(text: &str) -> String {
    cut(text, PREVIEW_CHARS)
}

/// `text` cut to `max` characters (with `…` when cut).
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The first 16 hex digits of the SHA-256 of `text`: tells equal arguments apart without
/// carrying them.
pub fn digest(text: &str) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(text.as_bytes());
    hash.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The fields of `value`, a JSON object literal (`json!({...})`); anything else gives none.
pub fn fields(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// `json!` with `null` fields left out.
pub fn compact(value: Value) -> Map<String, Value> {
    let mut map = fields(value);
    map.retain(|_, v| !v.is_null());
    map
}

pub fn tool_started(call_id: &str, tool: &str, arguments: &str) -> Map<String, Value> {
    fields(json!({
        "call_id": call_id,
        "tool": tool,
        "args_digest": digest(arguments),
        "preview": preview(arguments),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_cut_on_characters_not_bytes() {
        let long = "é".repeat(300);
        let p = preview(&long);
        assert_eq!(p.chars().count(), PREVIEW_CHARS + 1);
        assert!(p.ends_with('…'));
        assert_eq!(preview("short"), "short");
    }

    #[test]
    fn the_table_lists_every_kind_once() {
        let mut seen = std::collections::HashSet::new();
        for kind in ALL {
            assert!(seen.insert(kind), "{kind} twice");
        }
    }

    #[test]
    fn every_kind_defined_here_is_in_the_list() {
        // The list the page's kind filter and `troupe log --kind` offer: a kind added above
        // without it would be missing there.
        let source = include_str!("kinds.rs");
        let source = source.split("#[cfg(test)]").next().unwrap_or("");
        let defined: Vec<&str> = source
            .lines()
            .filter(|line| line.starts_with("pub const ") && line.contains(": &str = \""))
            .filter_map(|line| line.split('"').nth(1))
            .collect();
        assert_eq!(defined.len(), ALL.len(), "{defined:?}");
        for kind in defined {
            assert!(ALL.contains(&kind), "{kind} is not in ALL");
        }
    }

    #[test]
    fn events_are_emitted_with_the_kinds_defined_here() {
        // A kind spelled as a literal at an `emit` would be a kind no list knows.
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut pending = vec![src];
        let mut literal = Vec::new();
        while let Some(folder) = pending.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    pending.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let whole = std::fs::read_to_string(&path).unwrap();
                let text = whole.split("#[cfg(test)]").next().unwrap_or("");
                for (at, _) in text.match_indices(".emit(") {
                    // The second argument: up to the second comma at the call's own depth.
                    let args = &text[at + ".emit(".len()..];
                    let mut depth = 0usize;
                    let mut commas = 0;
                    let mut kind = String::new();
                    for c in args.chars() {
                        match c {
                            '(' | '[' | '{' => depth += 1,
                            ')' | ']' | '}' if depth == 0 => break,
                            ')' | ']' | '}' => depth -= 1,
                            ',' if depth == 0 => {
                                commas += 1;
                                if commas == 2 {
                                    break;
                                }
                                continue;
                            }
                            _ => {}
                        }
                        if commas == 1 {
                            kind.push(c);
                        }
                    }
                    if kind.trim().starts_with('"') {
                        literal.push(format!("{}: {}", path.display(), kind.trim()));
                    }
                }
            }
        }
        assert!(literal.is_empty(), "kinds as literals: {literal:?}");
    }

    #[test]
    fn digests_tell_arguments_apart() {
        assert_eq!(digest("{}").len(), 16);
        assert_ne!(digest(r#"{"a":1}"#), digest(r#"{"a":2}"#));
    }
}
