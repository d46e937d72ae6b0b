//! Bookkeeping tools (SPEC §7): tools that only change troupe's own state — `todo_write`, the
//! task board, `schedule_cron` — are allowed by the default rule without asking, in the lead's
//! real tool set; `write_file` still asks. The approval provider here refuses and records every
//! question, so a bookkeeping call that asked would fail.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::permissions::{ApprovalAnswer, ApprovalProvider, ApprovalRequest};

use super::support::{call, drive, say, Convo, Fixture, Models, Reply, TestModel};

/// Refuses everything it is asked, remembering the tool of each question.
#[derive(Default)]
struct RefuseAndRecord(Mutex<Vec<String>>);

#[async_trait]
impl ApprovalProvider for RefuseAndRecord {
    fn name(&self) -> &'static str {
        "refuse"
    }

    async fn approve(&self, request: &ApprovalRequest<'_>) -> ApprovalAnswer {
        self.0.lock().unwrap().push(request.tool.to_owned());
        ApprovalAnswer::deny("refused by the test")
    }
}

/// The task id in the last tool result (`{"task": {"id": …}}`); null when the call failed.
fn task_id(c: &Convo<'_>) -> Value {
    let result: Value =
        serde_json::from_str(c.last_tool_result().unwrap_or("")).unwrap_or(Value::Null);
    result["task"]["id"].clone()
}

/// The lead calls each bookkeeping tool once, then `write_file`, then answers with the results.
fn bookkeeping_lead(c: &Convo<'_>) -> Reply {
    let done = |tool: &str| c.calls_named(tool).len();
    if done("todo_write") == 0 {
        return call(
            "todo_write",
            json!({"todos": [{"content": "plan the release", "status": "in_progress"}]}),
        );
    }
    if done("create_task") == 0 {
        return call("create_task", json!({"subject": "write the notes"}));
    }
    if done("claim_task") == 0 {
        return call("claim_task", json!({"task_id": task_id(c)}));
    }
    if done("complete_task") == 0 {
        return call("complete_task", json!({"task_id": task_id(c)}));
    }
    if done("schedule_cron") == 0 {
        return call(
            "schedule_cron",
            json!({"cron": "0 9 * * *", "prompt": "check the build", "timezone": "UTC",
                   "recurring": false, "durable": true}),
        );
    }
    if done("write_file") == 0 {
        return call("write_file", json!({"path": "NOTES.md", "content": "x"}));
    }
    say(c.last_tool_result().unwrap_or(""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookkeeping_tools_are_allowed_without_asking_and_write_file_still_asks() {
    let f = Fixture::new();
    let approval = Arc::new(RefuseAndRecord::default());
    let lead = TestModel::new(&f.signal, bookkeeping_lead);
    let mut settings = f.settings(Models::new(&f.signal, &[("lead", &lead)]));
    settings.approval = approval.clone();
    let mut team = troupe::bootstrap::build_team(settings).await.unwrap();
    let outcome = drive(&mut team, "Organise the release.").await;

    // Only write_file reached the approval provider, which refused it.
    assert_eq!(*approval.0.lock().unwrap(), ["write_file"]);
    assert!(
        outcome.answer.starts_with("Error [permission_denied]"),
        "{}",
        outcome.answer
    );
    assert!(!f.workspace.join("NOTES.md").exists());

    // Every bookkeeping call ran: the task is completed, the cron job is stored.
    let board = troupe::store::tasks::FileTaskBoard::new(
        &f.layout,
        Arc::new(f.clock.clone()),
        f.ids.clone(),
    );
    use troupe::store::tasks::TaskBoard;
    let tasks = board.list().await.unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].status.as_str(), "completed");
    assert!(f.layout.cron_file().is_file());

    let decisions: Vec<(String, String, String, String)> = f
        .audit()
        .iter()
        .map(|line| {
            let s = |key: &str| line[key].as_str().unwrap().to_owned();
            (s("tool"), s("decision"), s("rule"), s("reason"))
        })
        .collect();
    let bookkeeping = |tool: &str| {
        (
            tool.to_owned(),
            "allow".to_owned(),
            "default".to_owned(),
            "bookkeeping tools are allowed: they change only troupe's own state".to_owned(),
        )
    };
    assert_eq!(
        decisions,
        [
            bookkeeping("todo_write"),
            bookkeeping("create_task"),
            bookkeeping("claim_task"),
            bookkeeping("complete_task"),
            bookkeeping("schedule_cron"),
            (
                "write_file".to_owned(),
                "deny".to_owned(),
                "default+approval:refuse".to_owned(),
                "refused by the test".to_owned(),
            ),
        ]
    );
    team.close().await;
}
