//! Teammates that pull their own work from the task board (SPEC §12): an idle teammate claims
//! the next task that fits it (its tags, or assigned to it), works on it as its next message,
//! and its answer completes the task and reaches the lead; nothing is taken twice, a gated
//! teammate takes nothing, and an idle team makes no model calls.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::store::tasks::{FileTaskBoard, Task, TaskBoard, TaskStatus};

use super::support::{call, drive, name, say, Convo, Fixture, Models, Reply, TestModel};

/// The tasks on the fixture's board, oldest first.
async fn board(f: &Fixture) -> Vec<Task> {
    FileTaskBoard::new(&f.layout, Arc::new(f.clock.clone()), f.ids.clone())
        .list()
        .await
        .unwrap()
}

/// A teammate that answers its first message with "ready" and each task with "did <subject>".
fn worker(c: &Convo<'_>) -> Reply {
    let last = c.last_user();
    match last.strip_prefix("[task] ") {
        Some(rest) => {
            let subject = rest
                .lines()
                .next()
                .and_then(|l| l.split(" — ").nth(1))
                .unwrap_or("?");
            say(&format!("did {subject}"))
        }
        None => say("ready"),
    }
}

/// The lead spawns `spawns` (name, role, plan_required), then creates `tasks` (subject, tags,
/// assignee), then waits.
fn lead_script(
    spawns: &'static [(&'static str, &'static str, bool)],
    tasks: &'static [(&'static str, &'static [&'static str], Option<&'static str>)],
) -> impl Fn(&Convo<'_>) -> Reply + Send + Sync + 'static {
    move |c| {
        let spawned = c.calls_named("spawn_teammate").len();
        if let Some((teammate, role, plan_required)) = spawns.get(spawned) {
            return call(
                "spawn_teammate",
                json!({"name": teammate, "role": role, "prompt": "Say ready.",
                       "plan_required": plan_required}),
            );
        }
        let created = c.calls_named("create_task").len();
        if let Some((subject, tags, assignee)) = tasks.get(created) {
            let mut args = json!({"subject": subject, "tags": tags});
            if let Some(assignee) = assignee {
                args["assignee"] = json!(assignee);
            }
            return call("create_task", args);
        }
        say("Waiting for the team.")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_teammates_take_the_tasks_that_fit_them_each_exactly_once() {
    let f = Fixture::new();
    let lead = TestModel::new(
        &f.signal,
        lead_script(
            &[
                ("alpha", "rust engineer", false),
                ("beta", "docs writer", false),
            ],
            &[
                ("fix the parser", &["rust"], None),
                ("write the guide", &["docs"], None),
                ("review the guide", &[], Some("beta")),
                ("tidy up", &[], None),
                ("translate", &["french"], None),
            ],
        ),
    );
    let alpha = TestModel::new(&f.signal, worker);
    let beta = TestModel::new(&f.signal, worker);
    let mut team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("alpha", &alpha), ("beta", &beta)],
        ))
        .await;
    drive(&mut team, "Split the work.").await;

    let tasks = board(&f).await;
    let by_subject = |s: &str| tasks.iter().find(|t| t.subject == s).unwrap().clone();
    for (subject, owner) in [
        ("fix the parser", "alpha"),
        ("write the guide", "beta"),
        ("review the guide", "beta"),
    ] {
        let task = by_subject(subject);
        assert_eq!(task.status, TaskStatus::Completed, "{subject}");
        assert_eq!(task.owner, Some(name(owner)), "{subject}");
        assert_eq!(task.lease, None);
    }
    assert_eq!(by_subject("tidy up").status, TaskStatus::Completed);
    // Nobody's role names french: the task waits on the board.
    assert_eq!(by_subject("translate").status, TaskStatus::Pending);

    // Each completed task was worked on once, by its owner, and its result reached the lead.
    let completed = f.events_of("task_completed");
    assert_eq!(completed.len(), 4);
    let mut ids: Vec<&str> = completed
        .iter()
        .map(|e| e.str("task_id").unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4);
    let task_prompts = |model: &TestModel| {
        let last = model.calls();
        (1..=last)
            .flat_map(|n| model.user_texts(n))
            .filter(|t| t.starts_with("[task]"))
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    assert_eq!(task_prompts(&alpha) + task_prompts(&beta), 4);
    // One call for the first message, one per task: nothing while idle.
    assert_eq!(alpha.calls() + beta.calls(), 2 + 4);
    let results: Vec<String> = f
        .events_of("message_sent")
        .into_iter()
        .filter(|e| e.str("to") == Some("lead") && e.str("message_kind") == Some("result"))
        .map(|e| e.str("preview").unwrap().to_owned())
        .filter(|p| p.starts_with("Task "))
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(
        results.iter().all(|r| r.contains("completed")),
        "{results:?}"
    );
    team.close().await;
    // Closing takes nothing and gives nothing back: nothing was held.
    assert!(f.events_of("task_released").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_gated_by_its_plan_takes_nothing_from_the_board() {
    let f = Fixture::new();
    let lead = TestModel::new(
        &f.signal,
        lead_script(&[("gamma", "engineer", true)], &[("anything", &[], None)]),
    );
    let gamma = TestModel::new(&f.signal, worker);
    let mut team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("gamma", &gamma)],
        ))
        .await;
    drive(&mut team, "Go.").await;
    let tasks = board(&f).await;
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].status, TaskStatus::Pending);
    assert!(f.events_of("task_claimed").is_empty());
    // Only its first message reached its model.
    assert_eq!(gamma.calls(), 1);
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_held_when_the_run_closes_goes_back_to_the_board() {
    let f = Fixture::new();
    // The lead claims a task itself and ends its run without completing it.
    let lead = TestModel::new(&f.signal, |c: &Convo<'_>| {
        if c.calls_named("create_task").is_empty() {
            return call("create_task", json!({"subject": "mine"}));
        }
        if c.calls_named("claim_task").is_empty() {
            let created = c.last_tool_result().unwrap();
            let id =
                serde_json::from_str::<serde_json::Value>(created).unwrap()["task"]["id"].clone();
            return call("claim_task", json!({"task_id": id}));
        }
        say("Stopping here.")
    });
    let mut team = f.build(Models::new(&f.signal, &[("lead", &lead)])).await;
    drive(&mut team, "Go.").await;
    assert_eq!(board(&f).await[0].status, TaskStatus::InProgress);
    team.close().await;
    let task = &board(&f).await[0];
    assert_eq!(task.status, TaskStatus::Pending);
    let returned = task.returned.as_ref().unwrap();
    assert_eq!(returned.owner, name("lead"));
    assert_eq!(returned.reason, "released: the run closed");
    assert_eq!(f.events_of("task_released").len(), 1);
}
