//! What a `troupe_run` did to the workspace, for its result: the paths its agents wrote or
//! edited (`write_file`, `edit_file` calls that succeeded) and the calls that were denied, with
//! why. Seen by the run's observer as each tool call finishes (not `git status`: the workspace
//! need not be a repository, and changes made before the run are not the run's).

use std::collections::BTreeSet;
use std::sync::Mutex;

use troupe::agent::RunObserver;
use troupe::model::ToolCall;
use troupe::tools::ToolOutcome;
use troupe::wire::AgentName;

/// The tools that write a file named by their `path` argument.
const WRITING_TOOLS: [&str; 2] = ["write_file", "edit_file"];

/// A call the rules or a person denied.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Denied {
    pub agent: String,
    pub tool: String,
    /// The call in one line (`write_file: out.txt`, `shell: cargo test`).
    pub call: String,
    pub rule: String,
    pub reason: String,
}

/// Collects a run's changes as its tool calls finish.
#[derive(Default)]
pub struct Changes {
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    files: BTreeSet<String>,
    denied: Vec<Denied>,
}

impl Changes {
    /// The paths written or edited, sorted, and the denied calls in order.
    pub fn take(&self) -> (Vec<String>, Vec<Denied>) {
        let seen = std::mem::take(&mut *troupe::sync::lock(&self.seen));
        (seen.files.into_iter().collect(), seen.denied)
    }
}

impl RunObserver for Changes {
    fn tool_finished(&self, agent: &AgentName, call: &ToolCall, outcome: &ToolOutcome) {
        let arguments: serde_json::Value =
            serde_json::from_str(&call.arguments).unwrap_or_default();
        let path = arguments.get("path").and_then(serde_json::Value::as_str);
        let mut seen = troupe::sync::lock(&self.seen);
        match &outcome.decision {
            Some(decision) if !decision.allowed => {
                let call_line = match (call.name.as_str(), arguments.get("command")) {
                    ("shell", Some(serde_json::Value::String(command))) => {
                        format!("shell: {command}")
                    }
                    (tool, _) => match path {
                        Some(path) => format!("{tool}: {path}"),
                        None => tool.to_owned(),
                    },
                };
                seen.denied.push(Denied {
                    agent: agent.to_string(),
                    tool: call.name.clone(),
                    call: troupe::store::events::kinds::cut(&call_line, 200),
                    rule: decision.rule.clone(),
                    reason: decision.reason.clone(),
                });
            }
            _ if outcome.is_error => {}
            _ => {
                if let Some(path) = path.filter(|_| WRITING_TOOLS.contains(&call.name.as_str())) {
                    seen.files.insert(path.to_owned());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use troupe::permissions::{Decision, PermissionDecision};

    use super::*;

    fn finished(changes: &Changes, name: &str, arguments: &str, outcome: ToolOutcome) {
        let call = ToolCall::new("call-1", name, arguments);
        changes.tool_finished(&AgentName::lead(), &call, &outcome);
    }

    fn outcome(is_error: bool, decision: Option<PermissionDecision>) -> ToolOutcome {
        ToolOutcome {
            content: String::new(),
            is_error,
            decision,
        }
    }

    fn decision(allowed: bool) -> PermissionDecision {
        PermissionDecision {
            allowed,
            rules_said: Decision::Ask,
            rule: "default+approval:mcp".to_owned(),
            reason: if allowed { "yes" } else { "not this one" }.to_owned(),
        }
    }

    #[test]
    fn written_paths_and_denied_calls_are_the_runs_changes() {
        let changes = Changes::default();
        finished(
            &changes,
            "write_file",
            r#"{"path":"b.txt","content":"x"}"#,
            outcome(false, Some(decision(true))),
        );
        finished(
            &changes,
            "edit_file",
            r#"{"path":"a.txt","old":"x","new":"y"}"#,
            outcome(false, None),
        );
        finished(
            &changes,
            "write_file",
            r#"{"path":"b.txt","content":"again"}"#,
            outcome(false, None),
        );
        // Failed, read-only, or denied: no change.
        finished(
            &changes,
            "edit_file",
            r#"{"path":"c.txt"}"#,
            outcome(true, None),
        );
        finished(
            &changes,
            "read_file",
            r#"{"path":"d.txt"}"#,
            outcome(false, None),
        );
        finished(
            &changes,
            "write_file",
            r#"{"path":"e.txt"}"#,
            outcome(false, Some(decision(false))),
        );
        finished(
            &changes,
            "shell",
            r#"{"command":"rm -rf /"}"#,
            outcome(true, Some(decision(false))),
        );

        let (files, denied) = changes.take();
        assert_eq!(files, ["a.txt", "b.txt"]);
        let calls: Vec<(&str, &str, &str)> = denied
            .iter()
            .map(|d| (d.tool.as_str(), d.call.as_str(), d.reason.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("write_file", "write_file: e.txt", "not this one"),
                ("shell", "shell: rm -rf /", "not this one"),
            ]
        );
        assert_eq!(changes.take(), (Vec::new(), Vec::new()), "taken once");
    }
}
