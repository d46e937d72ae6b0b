//! The realwork suite's scripted models: one per agent, each deciding its next step from the
//! tail of its conversation (as `soak/model.rs` does), answering after a fixed latency, and
//! recording every call ([`Call`]) for the report.
//!
//! - **A worker's task** (a teammate's `[task]`, or each task of the solo lead): `read_file
//!   src/lib.rs`, `write_file` the module, `write_file` its tests, for a changelog task
//!   `edit_file CHANGELOG.md`, then the finishing call: a teammate answers (troupe completes the
//!   task and commits its worktree), the solo lead runs `git add -A && git commit`. Four model
//!   calls per task, five for a changelog task, in both runs.
//! - **The team's lead**: on the person's prompt, one answer that creates every task
//!   (`create_task`, the changelog tasks assigned to two different teammates) and spawns the
//!   teammates (`isolation: "worktree"`); then "Noted." to each batch of events until every
//!   task's result has arrived; then `merge_teammate` for each teammate in one answer; for each
//!   branch that conflicted: `git merge` it in its shell and print the conflicted files, then
//!   write each as the union of both sides and commit (`git commit --no-edit`) in one answer;
//!   then its final answer.
//! - **The solo lead**: every task in turn, as above, then its final answer.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use troupe::model::{ChatMessage, ModelClient, ModelError, ModelRequest, ModelResponse, ToolCall};
use troupe::sync::lock;
use troupe::team::ModelChooser;
use troupe::wire::AgentName;

use crate::scripted::side_answer;

use super::measure::{coordination, team_tool_definitions, Call, Fixed};
use super::source::{by_subject, union_of_conflict, Module, CHANGELOG};

/// The model name on every answer.
const MODEL: &str = "realwork";
/// Around each conflicted file the lead prints: the line before it (then the path) and after.
const FILE_START: &str = "----- file: ";
const FILE_END: &str = "----- end of file";

/// Which run the models script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Team,
    Solo,
}

/// Merges as the lead saw their results.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeResults {
    pub clean: usize,
    /// The teammates whose branch conflicted.
    pub conflicted: Vec<String>,
    /// Calls that neither merged nor reported a conflict (an error).
    pub failed: usize,
}

/// What every agent's model shares: the script's inputs and what was recorded.
pub struct Script {
    mode: Mode,
    latency: Duration,
    modules: Vec<Module>,
    teammates: Vec<AgentName>,
    /// Numbers tool calls, unique over the run.
    next: AtomicU64,
    calls: Mutex<Vec<Call>>,
    merges: Mutex<MergeResults>,
}

impl Script {
    pub fn new(
        mode: Mode,
        latency: Duration,
        modules: Vec<Module>,
        teammates: Vec<AgentName>,
    ) -> Arc<Self> {
        Arc::new(Self {
            mode,
            latency,
            modules,
            teammates,
            next: AtomicU64::new(1),
            calls: Mutex::new(Vec::new()),
            merges: Mutex::new(MergeResults::default()),
        })
    }

    pub fn calls(&self) -> Vec<Call> {
        lock(&self.calls).clone()
    }

    pub fn merges(&self) -> MergeResults {
        lock(&self.merges).clone()
    }

    fn id(&self) -> String {
        format!("call_{}", self.next.fetch_add(1, Ordering::Relaxed))
    }

    fn calls_of(&self, calls: impl IntoIterator<Item = (&'static str, Value)>) -> ModelResponse {
        let calls = calls
            .into_iter()
            .map(|(tool, args)| ToolCall::new(self.id(), tool, args.to_string()))
            .collect();
        ModelResponse::tool_calls(calls, MODEL)
    }

    fn call(&self, tool: &'static str, args: Value) -> ModelResponse {
        self.calls_of([(tool, args)])
    }
}

/// Every agent gets its own view of the shared script.
pub struct Models(pub Arc<Script>);

impl ModelChooser for Models {
    fn model_for(&self, agent: &AgentName) -> Arc<dyn ModelClient> {
        Arc::new(AgentModel {
            agent: agent.clone(),
            script: self.0.clone(),
        })
    }
}

struct AgentModel {
    agent: AgentName,
    script: Arc<Script>,
}

#[async_trait::async_trait]
impl ModelClient for AgentModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        // Measured before the call's interval starts: the bench's own work counts against the
        // runtime, never for it.
        let turn = request.purpose.is_turn();
        let bytes = troupe::agent::context::sent_bytes(&request.messages, &request.tools);
        let coordination = coordination(request, self.agent.is_lead());
        let team_tool_definitions = team_tool_definitions(request);
        let fixed = Fixed::of(request);
        let start = Instant::now();
        tokio::time::sleep(self.script.latency).await;
        let response = if !turn {
            ModelResponse::text(
                side_answer(request.purpose, "Build the crate's modules."),
                MODEL,
            )
        } else if !self.agent.is_lead() {
            teammate(&self.script, &request.messages)
        } else if self.script.mode == Mode::Solo {
            solo(&self.script, &request.messages)
        } else {
            lead(&self.script, &request.messages)
        };
        let end = Instant::now();
        lock(&self.script.calls).push(Call {
            agent: self.agent.to_string(),
            start,
            end,
            turn,
            bytes,
            coordination,
            team_tool_definitions,
            fixed,
        });
        Ok(response)
    }
}

/// The tool calls of the last assistant message.
fn last_calls(messages: &[ChatMessage]) -> &[ToolCall] {
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ChatMessage::Assistant(a) => Some(a.tool_calls.as_slice()),
            _ => None,
        })
        .unwrap_or(&[])
}

/// Every tool call made so far.
fn all_calls(messages: &[ChatMessage]) -> impl Iterator<Item = &ToolCall> {
    messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Assistant(a) => Some(a.tool_calls.iter()),
            _ => None,
        })
        .flatten()
}

/// The result of the call with `id`.
fn result_of<'a>(messages: &'a [ChatMessage], id: &str) -> Option<&'a str> {
    messages.iter().rev().find_map(|m| match m {
        ChatMessage::Tool {
            tool_call_id,
            content,
        } if tool_call_id == id => Some(content.as_str()),
        _ => None,
    })
}

fn arg(call: &ToolCall, key: &str) -> Option<String> {
    serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .and_then(|v| v[key].as_str().map(str::to_owned))
}

/// A worker's next step on `module`, after its last call (`None`: the task's first call).
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Read,
    WriteCode,
    WriteTests,
    EditChangelog,
    Finish,
}

fn next_step(module: &Module, last: Option<&ToolCall>) -> Step {
    let Some(last) = last else {
        return Step::Read;
    };
    match last.name.as_str() {
        "read_file" => Step::WriteCode,
        "write_file" if arg(last, "path").as_deref() == Some(&module.path()) => Step::WriteTests,
        "write_file" if module.changelog => Step::EditChangelog,
        _ => Step::Finish,
    }
}

/// The tool call of a worker's step (not `Finish`, which differs by run).
fn work(script: &Script, module: &Module, step: &Step) -> Option<ModelResponse> {
    Some(match step {
        Step::Read => script.call("read_file", json!({"path": "src/lib.rs"})),
        Step::WriteCode => script.call(
            "write_file",
            json!({"path": module.path(), "content": module.source}),
        ),
        Step::WriteTests => script.call(
            "write_file",
            json!({"path": module.tests_path(), "content": module.tests}),
        ),
        Step::EditChangelog => {
            let (old, new) = module.changelog_edit();
            script.call(
                "edit_file",
                json!({"path": CHANGELOG, "old_text": old, "new_text": new}),
            )
        }
        Step::Finish => return None,
    })
}

/// A teammate: its spawn prompt answered; a `[task]` worked through.
fn teammate(script: &Script, messages: &[ChatMessage]) -> ModelResponse {
    let task = messages.iter().rev().find_map(|m| match m {
        ChatMessage::User { content } => content.strip_prefix("[task] "),
        _ => None,
    });
    let module = task
        .and_then(|t| t.split_once(" — "))
        .and_then(|(_, rest)| by_subject(&script.modules, rest.lines().next().unwrap_or("")));
    let (last_is_task, last_call) = match messages.last() {
        Some(ChatMessage::User { content }) => (content.starts_with("[task] "), None),
        Some(ChatMessage::Tool { .. }) => (false, last_calls(messages).first()),
        _ => (false, None),
    };
    let Some(module) = module.filter(|_| last_is_task || last_call.is_some()) else {
        return ModelResponse::text("Ready.", MODEL);
    };
    let step = next_step(module, last_call);
    work(script, module, &step).unwrap_or_else(|| {
        ModelResponse::text(
            format!(
                "Wrote {} and its tests in {}.",
                module.path(),
                module.tests_path()
            ),
            MODEL,
        )
    })
}

/// The solo lead: every task in turn in its own checkout, each finished by a commit.
fn solo(script: &Script, messages: &[ChatMessage]) -> ModelResponse {
    let committed = all_calls(messages)
        .filter(|c| c.name == "shell" && arg(c, "command").is_some_and(|c| c.contains("commit")))
        .count();
    let last = match messages.last() {
        Some(ChatMessage::Tool { .. }) => last_calls(messages).first(),
        _ => None,
    };
    // After a commit, the next task starts with its first step.
    let last = last.filter(|c| c.name != "shell");
    let Some(module) = script.modules.get(committed) else {
        return ModelResponse::text("All modules written and committed.", MODEL);
    };
    let step = next_step(module, last);
    work(script, module, &step).unwrap_or_else(|| {
        script.call(
            "shell",
            json!({"command": format!("git add -A && git commit -q -m '{}'", module.subject())}),
        )
    })
}

/// The team's lead (see the module docs).
fn lead(script: &Script, messages: &[ChatMessage]) -> ModelResponse {
    if matches!(messages.last(), Some(ChatMessage::Tool { .. })) {
        let calls = last_calls(messages);
        return match calls.first().map(|c| c.name.as_str()) {
            Some("merge_teammate") => {
                let mut seen = MergeResults::default();
                for call in calls {
                    let result = result_of(messages, &call.id)
                        .and_then(|r| serde_json::from_str::<Value>(r).ok())
                        .unwrap_or(Value::Null);
                    match (result["merged"].as_bool(), arg(call, "name")) {
                        (Some(true), _) => seen.clean += 1,
                        (Some(false), Some(name)) => seen.conflicted.push(name),
                        _ => seen.failed += 1,
                    }
                }
                *lock(&script.merges) = seen;
                resolve_next(script, messages)
            }
            Some("shell") => write_union(script, messages, &calls[0]),
            Some("write_file") => resolve_next(script, messages),
            _ => ModelResponse::text("Waiting for the team's results.", MODEL),
        };
    }
    if !all_calls(messages).any(|c| c.name == "create_task") {
        return setup(script);
    }
    if !all_calls(messages).any(|c| c.name == "merge_teammate")
        && completed_tasks(messages) >= script.modules.len()
    {
        return script.calls_of(
            script
                .teammates
                .iter()
                .map(|mate| ("merge_teammate", json!({"name": mate.as_str()}))),
        );
    }
    ModelResponse::text("Noted.", MODEL)
}

/// The lead's first answer: every task on the board, then the teammates.
fn setup(script: &Script) -> ModelResponse {
    let mut changelog_tasks = 0;
    let tasks = script.modules.iter().map(|module| {
        let mut args = json!({"subject": module.subject(), "description": module.description()});
        if module.changelog && !script.teammates.is_empty() {
            // Two different teammates, so that their branches meet at the merge.
            let mate = &script.teammates[changelog_tasks % script.teammates.len()];
            args["assignee"] = json!(mate.as_str());
            changelog_tasks += 1;
        }
        ("create_task", args)
    });
    let spawns = script.teammates.iter().map(|mate| {
        (
            "spawn_teammate",
            json!({"name": mate.as_str(), "role": "Rust developer",
                   "prompt": "Take the crate's module tasks from the board.",
                   "isolation": "worktree"}),
        )
    });
    let all: Vec<(&'static str, Value)> = tasks.chain(spawns).collect();
    script.calls_of(all)
}

/// The distinct tasks whose completed result reached the lead.
fn completed_tasks(messages: &[ChatMessage]) -> usize {
    let mut done: HashSet<String> = HashSet::new();
    for message in messages {
        let ChatMessage::User { content } = message else {
            continue;
        };
        let Some(event) = content
            .strip_prefix("[event] ")
            .and_then(|body| serde_json::from_str::<Value>(body).ok())
        else {
            continue;
        };
        let text = event["content"].as_str().unwrap_or("");
        if let Some(rest) = text.strip_prefix("Task ") {
            let first_line = rest.lines().next().unwrap_or("");
            if first_line.ends_with(") completed.") {
                if let Some(id) = rest.split_whitespace().next() {
                    done.insert(id.to_owned());
                }
            }
        }
    }
    done.len()
}

/// The next conflicted branch the lead has not merged by hand: `git merge` it and print the
/// conflicted files; none left: the final answer.
fn resolve_next(script: &Script, messages: &[ChatMessage]) -> ModelResponse {
    let tried: Vec<String> = all_calls(messages)
        .filter(|c| c.name == "shell")
        .filter_map(|c| arg(c, "command"))
        .collect();
    let conflicted = lock(&script.merges).conflicted.clone();
    let next = conflicted.iter().find(|name| {
        let merge = format!("git merge --no-edit troupe/{name}");
        !tried.iter().any(|c| c.contains(&merge))
    });
    let Some(name) = next else {
        return ModelResponse::text("Every branch is merged.", MODEL);
    };
    let files = conflict_files(messages, name);
    let mut command = format!("git merge --no-edit troupe/{name}");
    for file in &files {
        command.push_str(&format!(
            "; echo '{FILE_START}{file}'; cat -- '{file}'; echo '{FILE_END}'"
        ));
    }
    script.call("shell", json!({"command": command}))
}

/// The files `merge_teammate` named as conflicting for `name`.
fn conflict_files(messages: &[ChatMessage], name: &str) -> Vec<String> {
    all_calls(messages)
        .filter(|c| c.name == "merge_teammate" && arg(c, "name").as_deref() == Some(name))
        .filter_map(|c| result_of(messages, &c.id))
        .filter_map(|r| serde_json::from_str::<Value>(r).ok())
        .filter_map(|v| v["conflicts"].as_array().cloned())
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_owned))
        .collect()
}

/// After the hand merge: each conflicted file written as the union of both sides, then the
/// merge committed.
fn write_union(script: &Script, messages: &[ChatMessage], shell: &ToolCall) -> ModelResponse {
    let output = result_of(messages, &shell.id).unwrap_or("");
    let printed = printed_files(output);
    let mut calls: Vec<(&'static str, Value)> = Vec::new();
    let mut paths = Vec::new();
    for (path, text) in &printed {
        match union_of_conflict(text) {
            Some(union) => {
                calls.push(("write_file", json!({"path": path, "content": union})));
                paths.push(format!("'{path}'"));
            }
            None => {
                return ModelResponse::text(format!("I could not resolve {path}."), MODEL);
            }
        }
    }
    if calls.is_empty() {
        return ModelResponse::text("The hand merge printed no conflicted file.", MODEL);
    }
    calls.push((
        "shell",
        json!({"command": format!("git add -- {} && git commit -q --no-edit", paths.join(" "))}),
    ));
    script.calls_of(calls)
}

/// The files a shell output printed between [`FILE_START`] and [`FILE_END`].
fn printed_files(output: &str) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in output.split_inclusive('\n') {
        if let Some(path) = line.strip_prefix(FILE_START) {
            current = Some((path.trim_end().to_owned(), String::new()));
        } else if line.trim_end() == FILE_END {
            files.extend(current.take());
        } else if let Some((_, text)) = current.as_mut() {
            text.push_str(line);
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe::model::AssistantMessage;

    fn name(raw: &str) -> AgentName {
        AgentName::parse(raw).unwrap()
    }

    fn calls_of(response: &ModelResponse) -> Vec<(String, Value)> {
        response
            .message
            .tool_calls
            .iter()
            .map(|c| (c.name.clone(), serde_json::from_str(&c.arguments).unwrap()))
            .collect()
    }

    #[test]
    fn printed_files_are_found_between_their_markers() {
        let output = format!(
            "CONFLICT (content): Merge conflict in CHANGELOG.md\n{FILE_START}CHANGELOG.md\n\
             <<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n{FILE_END}\n[exit code: 0]"
        );
        assert_eq!(
            printed_files(&output),
            vec![(
                "CHANGELOG.md".to_owned(),
                "<<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n".to_owned()
            )]
        );
    }

    #[test]
    fn a_teammate_works_a_changelog_task_in_five_calls() {
        let modules = super::super::source::modules(2);
        let script = Script::new(Mode::Team, Duration::ZERO, modules.clone(), vec![name("m")]);
        let mut messages = vec![ChatMessage::user(format!(
            "[task] 00000000-0000-0000-0000-000000000000 — {}\n{}",
            modules[0].subject(),
            modules[0].description()
        ))];
        let mut tools = Vec::new();
        loop {
            let response = teammate(&script, &messages);
            let calls = response.message.tool_calls.clone();
            if calls.is_empty() {
                break;
            }
            tools.push(calls[0].name.clone());
            messages.push(ChatMessage::Assistant(AssistantMessage::tool_calls(
                calls.clone(),
            )));
            messages.push(ChatMessage::tool_result(calls[0].id.clone(), "ok"));
        }
        assert_eq!(
            tools,
            ["read_file", "write_file", "write_file", "edit_file"]
        );
        let first = calls_of(&setup(&script));
        assert_eq!(first.len(), 3);
        assert_eq!(first[0].1["assignee"], "m");
        assert_eq!(first[2].0, "spawn_teammate");
    }
}
