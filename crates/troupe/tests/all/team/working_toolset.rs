//! A teammate's working toolset (SPEC §4.1, §12): it is offered `edit_file`, `glob`, `grep` and
//! the board tools after its first five, works on the lead's own board, is narrowed by its agent
//! definition, and while a plan of its is pending the plan gate denies its edits and claims
//! before any handler runs, leaving it its reads.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::bootstrap::{LEAD_TOOLS, TEAMMATE_TOOLS};
use troupe::model::ChatMessage;
use troupe::store::tasks::{FileTaskBoard, Task, TaskBoard};

use super::support::{
    call, drive, plan_request_events, say, Convo, Fixture, Models, Reply, TestModel,
};

/// The lead: creates one task, spawns `dev` with `spawn`, then waits; told of anything else, it
/// says so.
fn board_lead(spawn: Value) -> impl Fn(&Convo<'_>) -> Reply + Send + Sync {
    move |c| {
        if c.calls_named("create_task").is_empty() {
            return call(
                "create_task",
                json!({"subject": "Rename old_name to new_name"}),
            );
        }
        if c.calls_named("spawn_teammate").is_empty() {
            return call("spawn_teammate", spawn.clone());
        }
        if c.last_is_tool_result() {
            return say("Waiting.");
        }
        say("Noted.")
    }
}

/// A teammate that makes the calls `steps` gives for the results it has so far (the task id
/// taken from its `list_tasks` result once it has one), then answers "Done.".
fn scripted_teammate(
    steps: fn(task_id: &str) -> Vec<(&'static str, Value)>,
) -> impl Fn(&Convo<'_>) -> Reply + Send + Sync {
    move |c| {
        let results = tool_results_of(c);
        let task_id = results
            .iter()
            .find_map(|r| {
                serde_json::from_str::<Value>(r).ok()?["tasks"][0]["id"]
                    .as_str()
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        match steps(&task_id).into_iter().nth(results.len()) {
            Some((tool, args)) => call(tool, args),
            None => say("Done."),
        }
    }
}

fn tool_results_of(c: &Convo<'_>) -> Vec<String> {
    c.0.iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

/// The tool results of the teammate's last model request.
fn last_results(model: &TestModel) -> Vec<String> {
    let request = model.requests().pop().unwrap();
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

fn offered_tools(model: &TestModel) -> Vec<String> {
    model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

async fn only_task(f: &Fixture) -> Task {
    let board = FileTaskBoard::new(&f.layout, Arc::new(f.clock.clone()), f.ids.clone());
    let mut tasks = board.list().await.unwrap();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    tasks.remove(0)
}

/// `(tool, decision, rule)` of every audit line of `agent`.
fn audit_of(f: &Fixture, agent: &str) -> Vec<(String, String, String)> {
    f.audit()
        .iter()
        .filter(|line| line["agent"] == agent)
        .map(|line| {
            let s = |key: &str| line[key].as_str().unwrap().to_owned();
            (s("tool"), s("decision"), s("rule"))
        })
        .collect()
}

fn entry(tool: &str, decision: &str, rule: &str) -> (String, String, String) {
    (tool.to_owned(), decision.to_owned(), rule.to_owned())
}

fn workspace_with_code(f: &Fixture) {
    std::fs::create_dir_all(f.workspace.join("src")).unwrap();
    std::fs::create_dir_all(f.workspace.join("target")).unwrap();
    std::fs::write(f.workspace.join("src/lib.rs"), "fn old_name() {}\n").unwrap();
    std::fs::write(f.workspace.join("target/gen.rs"), "fn old_name() {}\n").unwrap();
    std::fs::write(f.workspace.join(".gitignore"), "target/\n").unwrap();
}

#[test]
fn the_tool_lists_are_the_contract() {
    // SPEC §4.1, written out: the teammate's first five, then wave 3's working toolset; the
    // lead's eighteen, then grep and merge_teammate, and review_permission (§13).
    assert_eq!(
        TEAMMATE_TOOLS,
        [
            "shell",
            "read_file",
            "write_file",
            "send_message",
            "submit_plan",
            "edit_file",
            "glob",
            "grep",
            "list_tasks",
            "get_task",
            "claim_task",
            "complete_task",
        ]
    );
    assert_eq!(LEAD_TOOLS.len(), 21);
    assert_eq!(
        LEAD_TOOLS[18..],
        ["grep", "merge_teammate", "review_permission"]
    );
    assert!(
        !TEAMMATE_TOOLS.contains(&"create_task"),
        "creating tasks stays with the lead"
    );
}

fn rename_steps(task_id: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("grep", json!({"pattern": "old_name"})),
        ("list_tasks", json!({})),
        ("claim_task", json!({"task_id": task_id})),
        (
            "edit_file",
            json!({"path": "src/lib.rs", "old_text": "old_name", "new_text": "new_name"}),
        ),
        ("grep", json!({"pattern": "\\w+_name", "glob": "*.rs"})),
        ("glob", json!({"pattern": "src/*.rs"})),
        ("complete_task", json!({"task_id": task_id})),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_searches_edits_and_works_the_lead_s_board() {
    let f = Fixture::new();
    workspace_with_code(&f);
    let lead = TestModel::new(
        &f.signal,
        board_lead(json!({"name": "dev", "role": "developer", "prompt": "Do the rename task."})),
    );
    let dev = TestModel::new(&f.signal, scripted_teammate(rename_steps));
    let mut team = f
        .build(Models::new(&f.signal, &[("lead", &lead), ("dev", &dev)]))
        .await;
    drive(&mut team, "Get the rename done.").await;
    team.close().await;

    assert_eq!(offered_tools(&dev), TEAMMATE_TOOLS);
    let results = last_results(&dev);
    assert_eq!(results.len(), 7, "{results:#?}");
    // grep honours .gitignore (target/ is not searched).
    assert_eq!(results[0], "src/lib.rs:1:fn old_name() {}");
    assert!(!results[2].starts_with("Error"), "{}", results[2]);
    assert_eq!(results[3], "Edited src/lib.rs: replaced 1 occurrence");
    assert_eq!(results[4], "src/lib.rs:1:fn new_name() {}");
    assert_eq!(results[5], "src/lib.rs");
    assert!(!results[6].starts_with("Error"), "{}", results[6]);
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("src/lib.rs")).unwrap(),
        "fn new_name() {}\n"
    );
    // The task the lead created, claimed and completed by the teammate: one board.
    let task = only_task(&f).await;
    assert_eq!(task.status.as_str(), "completed");
    assert_eq!(task.owner.as_ref().map(|o| o.as_str()), Some("dev"));
    // The teammate was told about the board.
    let system = match &dev.requests()[0].messages[0] {
        ChatMessage::System { content } => content.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        system.contains("The team's task board is the lead's"),
        "{system}"
    );
}

fn gated_steps(task_id: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("submit_plan", json!({"plan": "Rename old_name."})),
        ("list_tasks", json!({})),
        ("get_task", json!({"task_id": task_id})),
        ("grep", json!({"pattern": "old_name"})),
        ("glob", json!({"pattern": "src/*.rs"})),
        (
            "edit_file",
            json!({"path": "src/lib.rs", "old_text": "old_name", "new_text": "new_name"}),
        ),
        ("claim_task", json!({"task_id": task_id})),
        ("complete_task", json!({"task_id": task_id})),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_a_plan_is_pending_the_gate_denies_edits_and_claims_but_not_reads() {
    let f = Fixture::new();
    workspace_with_code(&f);
    // The lead leaves the plan pending until the teammate's answer is in (every call it made
    // was made under the pending plan), then rejects it so that the run can end.
    let spawn = json!({"name": "dev", "role": "developer", "prompt": "Do the rename task."});
    let lead = TestModel::new(&f.signal, move |c| {
        let answered = c.events().iter().any(|e| e["kind"] == "result");
        let plans = plan_request_events(c);
        if answered && c.calls_named("review_plan").is_empty() && !c.last_is_tool_result() {
            return call(
                "review_plan",
                json!({"request_id": plans[0]["request_id"], "approve": false,
                       "feedback": "Not now."}),
            );
        }
        board_lead(spawn.clone())(c)
    });
    let dev = TestModel::new(&f.signal, scripted_teammate(gated_steps));
    let mut team = f
        .build(Models::new(&f.signal, &[("lead", &lead), ("dev", &dev)]))
        .await;
    drive(&mut team, "Get the rename done.").await;
    team.close().await;

    assert_eq!(
        audit_of(&f, "dev"),
        [
            entry("submit_plan", "allow", "default"),
            entry("list_tasks", "allow", "default"),
            entry("get_task", "allow", "default"),
            entry("grep", "allow", "default"),
            entry("glob", "allow", "default"),
            entry("edit_file", "deny", "plan_gate"),
            entry("claim_task", "deny", "plan_gate"),
            entry("complete_task", "deny", "plan_gate"),
        ]
    );
    let results = last_results(&dev);
    assert_eq!(results.len(), 8, "{results:#?}");
    assert_eq!(results[3], "src/lib.rs:1:fn old_name() {}");
    for (result, tool) in results[5..]
        .iter()
        .zip(["edit_file", "claim_task", "complete_task"])
    {
        assert!(
            result.starts_with(&format!(
                "Error [permission_denied]: {tool} was denied (plan_gate): plan request "
            )) && result.contains("is pending"),
            "{result}"
        );
    }
    // No handler ran: the file and the task are as they were.
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("src/lib.rs")).unwrap(),
        "fn old_name() {}\n"
    );
    let task = only_task(&f).await;
    assert_eq!((task.status.as_str(), task.owner), ("pending", None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_definition_narrows_the_working_toolset() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.workspace.join("agents")).unwrap();
    std::fs::write(
        f.workspace.join("agents/searcher.md"),
        "---\nname: searcher\ndescription: Finds things\ntools: [list_tasks, grep, glob]\n---\n",
    )
    .unwrap();
    // Creating tasks is not a teammate tool: a definition naming it is skipped.
    std::fs::write(
        f.workspace.join("agents/boss.md"),
        "---\nname: boss\ndescription: Hands out work\ntools: [create_task]\n---\n",
    )
    .unwrap();
    let lead = TestModel::new(&f.signal, |c| match c.calls_named("spawn_teammate").len() {
        0 => call(
            "spawn_teammate",
            json!({"name": "finder", "role": "finds", "prompt": "Find.", "agent": "searcher"}),
        ),
        1 => call(
            "spawn_teammate",
            json!({"name": "chief", "role": "hands out", "prompt": "Plan.", "agent": "boss"}),
        ),
        _ if c.last_is_tool_result() => say("Waiting."),
        _ => say("Noted."),
    });
    let finder = TestModel::new(&f.signal, |_| say("Found."));
    let mut team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("finder", &finder)],
        ))
        .await;
    drive(&mut team, "Find things.").await;
    team.close().await;

    // In TEAMMATE_TOOLS order: the always-granted ones and the definition's.
    assert_eq!(
        offered_tools(&finder),
        ["send_message", "submit_plan", "glob", "grep", "list_tasks"]
    );
    // Without claim_task it is not told about claiming tasks.
    let system = match &finder.requests()[0].messages[0] {
        ChatMessage::System { content } => content.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        !system.contains("The team's task board is the lead's"),
        "{system}"
    );
    let refused = lead.requests()[2]
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        refused.contains("agents/boss.md was skipped")
            && refused.contains("unknown tool \"create_task\""),
        "{refused}"
    );
}
