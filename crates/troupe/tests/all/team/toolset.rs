//! The lead's own toolset inside a running team: background job completions and cron wakeups
//! reach the lead as events (through a Chat Completions server on 127.0.0.1), the subagent
//! cannot reach team tools, and closing the team kills a running job's whole process group.

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::bootstrap::{SameModel, LEAD_TOOLS};
use troupe::model::config::ModelConfig;
use troupe::model::{OpenAiClient, RetryPolicy};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::support::{call, drive, say, Convo, Fixture, Models, Reply, TestModel};

/// A Chat Completions server whose answers come from `script(conversation)`.
struct Scripted(Box<dyn Fn(&Convo<'_>) -> Reply + Send + Sync>);

impl Respond for Scripted {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let c = Convo(body["messages"].as_array().unwrap());
        let message = match (self.0)(&c) {
            Reply::Text(text) => json!({"role": "assistant", "content": text}),
            Reply::Call(tool, args) => json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": c.next_call_id(), "type": "function",
                 "function": {"name": tool, "arguments": args.to_string()}}]}),
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }))
    }
}

async fn model_server(
    script: impl Fn(&Convo<'_>) -> Reply + Send + Sync + 'static,
) -> (MockServer, Arc<SameModel>) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Scripted(Box::new(script)))
        .mount(&server)
        .await;
    let config = ModelConfig {
        base_url: format!("{}/v1", server.uri()),
        retry: RetryPolicy::fixed(1, Duration::from_millis(1)),
        ..ModelConfig::new("sk-test", "gpt-test")
    };
    let client = Arc::new(OpenAiClient::new(&config).unwrap());
    (server, Arc::new(SameModel(client)))
}

async fn lead_bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap())
        .filter(|b| {
            b["messages"][0]["content"]
                .as_str()
                .unwrap()
                .starts_with("You are lead")
        })
        .collect()
}

#[tokio::test]
async fn the_lead_is_offered_its_tools_in_contract_order() {
    let (server, models) = model_server(|_| say("ok")).await;
    let fx = Fixture::new();
    let mut team = fx.build(models).await;
    drive(&mut team, "hello").await;
    let body = &lead_bodies(&server).await[0];
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, LEAD_TOOLS);
    // SPEC §4.1, written out: the constant itself must be the contract (the first 18, then
    // wave 3's grep and merge_teammate, and review_permission of §13).
    assert_eq!(
        LEAD_TOOLS,
        [
            "shell",
            "read_file",
            "write_file",
            "edit_file",
            "glob",
            "todo_write",
            "task",
            "load_skill",
            "create_task",
            "get_task",
            "list_tasks",
            "claim_task",
            "complete_task",
            "schedule_cron",
            "spawn_teammate",
            "send_message",
            "request_shutdown",
            "review_plan",
            "grep",
            "merge_teammate",
            "review_permission",
        ]
    );
    team.close().await;
}

#[tokio::test]
async fn the_lead_s_system_prompt_lists_the_workspace_skills() {
    let (server, models) = model_server(|_| say("ok")).await;
    let fx = Fixture::new();
    let skill = fx.workspace.join("skills/release-notes");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: release-notes\ndescription: Write release notes from the git log\n---\n# How\n",
    )
    .unwrap();
    let mut team = fx.build(models).await;
    drive(&mut team, "hello").await;
    let system = lead_bodies(&server).await[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("Skills you can load with load_skill"),
        "{system}"
    );
    assert!(
        system.contains("release-notes: Write release notes from the git log"),
        "{system}"
    );
    team.close().await;
}

#[tokio::test]
async fn a_background_job_completion_reaches_the_lead_as_an_event() {
    let (server, models) = model_server(|c| {
        if let Some(done) = c.events().iter().find(|e| e["kind"] == "job_completed") {
            return say(&format!(
                "job {} exited {}",
                done["status"], done["exit_code"]
            ));
        }
        if c.last_is_tool_result() {
            return say("started; waiting for it");
        }
        call(
            "shell",
            json!({"command": "echo built-ok; exit 3", "run_in_background": true}),
        )
    })
    .await;
    let fx = Fixture::new();
    let mut team = fx.build(models).await;
    let outcome = drive(&mut team, "build in the background").await;
    // The run stayed alive while the job ran, and ended after the event turn.
    assert_eq!(outcome.answer, "job \"failed\" exited 3");
    let bodies = lead_bodies(&server).await;
    let last = Convo(bodies.last().unwrap()["messages"].as_array().unwrap());
    let events = last.events();
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event["kind"], "job_completed");
    assert_eq!(event["started_by"], "lead");
    assert_eq!(event["exit_code"], 3);
    assert!(
        event["output_tail"].as_str().unwrap().contains("built-ok"),
        "{event}"
    );
    // The shell call returned at once with the job id, before the job ended.
    let first_result = Convo(bodies[1]["messages"].as_array().unwrap())
        .last_tool_result()
        .unwrap()
        .to_owned();
    assert!(
        first_result.contains(event["job_id"].as_str().unwrap()),
        "{first_result}"
    );
    assert!(team.jobs.is_idle());
    team.close().await;
}

#[tokio::test]
async fn a_cron_wakeup_reaches_the_lead_as_an_event() {
    let (server, models) = model_server(|c| {
        if let Some(wake) = c.events().iter().find(|e| e["kind"] == "cron_wakeup") {
            return say(&format!("woke up: {}", wake["content"].as_str().unwrap()));
        }
        if c.last_is_tool_result() {
            return say("scheduled");
        }
        call(
            "schedule_cron",
            json!({"cron": "0 9 * * *", "prompt": "check the nightly build", "timezone": "Europe/Berlin",
                   "recurring": false, "durable": false}),
        )
    })
    .await;
    let fx = Fixture::new();
    let mut team = fx.build(models).await;
    let mut driver = team.driver();
    let cancel = CancellationToken::new();
    let first = driver
        .run(&mut team.lead, "schedule the check", &cancel)
        .await
        .unwrap();
    assert_eq!(first.answer, "scheduled");
    // The manual clock reaches the job's time; the cron runtime fires it into the team.
    fx.clock.advance_millis(24 * 3600 * 1000);
    let fired = team.cron.fire_due(fx.now()).await;
    assert_eq!(fired.len(), 1);
    let second = driver
        .run(&mut team.lead, "anything new?", &cancel)
        .await
        .unwrap();
    assert_eq!(second.answer, "woke up: check the nightly build");
    let bodies = lead_bodies(&server).await;
    let events = Convo(bodies.last().unwrap()["messages"].as_array().unwrap()).events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["kind"], "cron_wakeup");
    assert_eq!(events[0]["job_id"], json!(fired[0].job_id));
    team.close().await;
}

#[tokio::test]
async fn a_subagent_cannot_reach_team_tools() {
    let fx = Fixture::new();
    let lead = TestModel::new(&fx.signal, |c| {
        if c.system().starts_with("You are a subagent") {
            // The subagent tries to spawn a teammate, then reports what happened.
            return match c.last_tool_result() {
                Some(result) => say(&format!("subagent saw: {result}")),
                None => call(
                    "spawn_teammate",
                    json!({"name": "rogue", "role": "x", "prompt": "y"}),
                ),
            };
        }
        match c.last_tool_result() {
            Some(result) => say(result),
            None => call("task", json!({"description": "spawn a helper for me"})),
        }
    });
    let models = Models::new(&fx.signal, &[("lead", &lead)]);
    let mut team = fx.build(models).await;
    let outcome = drive(&mut team, "delegate").await;
    assert!(
        outcome
            .answer
            .starts_with("subagent saw: Error [unknown_tool]"),
        "{}",
        outcome.answer
    );
    assert!(
        team.runtime.roster().await.is_empty(),
        "no teammate was spawned"
    );
    // The subagent was offered the base tools only.
    let sub = lead
        .requests()
        .into_iter()
        .find(|r| matches!(&r.messages[0], troupe::model::ChatMessage::System { content } if content.starts_with("You are a subagent")))
        .unwrap();
    let names: Vec<&str> = sub.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["shell", "read_file", "write_file", "edit_file", "glob"]
    );
    team.close().await;
}

#[tokio::test]
async fn closing_the_team_kills_a_running_jobs_whole_process_group() {
    let fx = Fixture::new();
    let lead = TestModel::new(&fx.signal, |c| match c.last_tool_result() {
        Some(_) => say("started"),
        None => call(
            "shell",
            json!({"command": "sleep 1000 & echo $! > grandchild.pid; echo go > ready.fifo; wait",
                   "run_in_background": true}),
        ),
    });
    let models = Models::new(&fx.signal, &[("lead", &lead)]);
    let mut team = fx.build(models).await;
    let mut driver = team.driver();
    let cancel = CancellationToken::new();
    // The job writes to a FIFO once its grandchild runs; reading it is the test's signal.
    let fifo = fx.workspace.join("ready.fifo");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a valid, NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let stop = cancel.clone();
    let watcher = tokio::task::spawn_blocking(move || {
        let said = std::fs::read_to_string(&fifo).unwrap();
        assert_eq!(said, "go\n");
        // The run stays alive while the job runs; cancel it now that the grandchild exists.
        stop.cancel();
    });
    let outcome = driver
        .run(&mut team.lead, "start a server", &cancel)
        .await
        .unwrap();
    watcher.await.unwrap();
    assert!(outcome.cancelled);
    assert_eq!(team.jobs.running_count(), 1);
    let pid = crate::tools::shell::read_pid(&fx.workspace.join("grandchild.pid"));
    team.close().await;
    assert!(
        crate::tools::shell::process_exits_within(pid, Duration::from_secs(5)),
        "grandchild {pid} survived"
    );
    let records: Vec<Value> = std::fs::read_dir(fx.workspace.join(".troupe/jobs"))
        .unwrap()
        .map(|e| serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
        .collect();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["status"], "cancelled", "{}", records[0]);
}

#[tokio::test]
async fn a_job_left_running_by_a_dead_run_is_recorded_cancelled_at_start() {
    use troupe::jobs::record::{read_all, write, JobId, JobRecord, JobState};
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.layout.jobs_dir()).unwrap();
    let orphan = JobRecord {
        id: JobId::parse("00000000-0000-4000-8000-00000000beef").unwrap(),
        agent: troupe::wire::AgentName::lead(),
        command: "make serve".to_owned(),
        started_at_utc: fx.now(),
        state: JobState::Running,
    };
    write(&fx.layout, &orphan).unwrap();
    let (_server, models) = model_server(|_| say("ok")).await;
    let team = fx.build(models).await;
    let records = read_all(&fx.layout).unwrap();
    assert_eq!(records.len(), 1);
    match &records[0].state {
        JobState::Finished { end, exit_code, .. } => {
            assert_eq!(*end, troupe::jobs::JobEnd::Cancelled);
            assert_eq!(*exit_code, None);
        }
        JobState::Running => panic!("still running: {:?}", records[0]),
    }
    assert!(team.jobs.is_idle());
    team.close().await;
}
