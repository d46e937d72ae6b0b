//! What a repetition's run did, read from its `--json` event stream (one event per line; see
//! `docs/events.md`): the tools called, the tokens of its model calls, how it ended.

use std::collections::BTreeSet;

use serde_json::Value;

/// What the event stream says.
#[derive(Debug, Default, Clone)]
pub struct Observed {
    /// Every tool any agent started.
    pub tools: BTreeSet<String>,
    /// `tokens_in + tokens_out` over every `model_call_finished`.
    pub tokens: u64,
    /// `run_ended`'s `outcome`, if the stream got that far.
    pub outcome: Option<String>,
    /// `run_ended`'s `error`, if any.
    pub error: Option<String>,
}

/// Reads the stream; lines that are not events (or not JSON) are skipped.
pub fn observe(stdout: &str) -> Observed {
    let mut observed = Observed::default();
    for line in stdout.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let text = |key: &str| event.get(key).and_then(Value::as_str).map(str::to_owned);
        let number = |key: &str| event.get(key).and_then(Value::as_u64).unwrap_or(0);
        match event.get("kind").and_then(Value::as_str) {
            Some("tool_started") => {
                if let Some(tool) = text("tool") {
                    observed.tools.insert(tool);
                }
            }
            Some("model_call_finished") => {
                observed.tokens = observed
                    .tokens
                    .saturating_add(number("tokens_in"))
                    .saturating_add(number("tokens_out"));
            }
            Some("run_ended") => {
                observed.outcome = text("outcome");
                observed.error = text("error");
            }
            _ => {}
        }
    }
    observed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_tokens_and_the_end() {
        let stream = [
            r#"{"kind":"tool_started","tool":"write_file"}"#,
            "not json",
            r#"{"kind":"model_call_finished","tokens_in":10,"tokens_out":5}"#,
            r#"{"kind":"model_call_finished","tokens_in":1}"#,
            r#"{"kind":"run_ended","exit_code":0,"outcome":"done"}"#,
        ]
        .join("\n");
        let observed = observe(&stream);
        assert!(observed.tools.contains("write_file"));
        assert_eq!(observed.tokens, 16);
        assert_eq!(observed.outcome.as_deref(), Some("done"));
    }
}
