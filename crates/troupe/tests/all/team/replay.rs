//! Recording a team's run and replaying it (issue 44): a lead, two teammates working in
//! parallel from the task board, a plan approved by the lead, a file written by each — recorded
//! with random ids, then replayed ten times in fresh workspaces with random ids again, every
//! call answered from the recording in its global order: the same requests, the same final
//! tree, ten times out of ten. A change to the project's instructions stops the replay at the
//! first call, with the changed line in the diff.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use troupe::bootstrap::{build_team, ModelChooser};
use troupe::ids::RandomIds;
use troupe::replay::{start_point, Divergence, Mode, PlayOptions, Player, Recording};

use super::support::*;

fn lead(c: &Convo<'_>) -> Reply {
    let setup = [
        (
            "create_task",
            json!({"subject": "Write a.txt", "description": "a line from alpha", "assignee": "alpha"}),
        ),
        (
            "create_task",
            json!({"subject": "Write b.txt", "description": "a line from beta", "assignee": "beta"}),
        ),
        (
            "spawn_teammate",
            json!({"name": "alpha", "role": "writer", "plan_required": true,
                   "prompt": "Submit a plan, then do your board task."}),
        ),
        (
            "spawn_teammate",
            json!({"name": "beta", "role": "writer", "prompt": "Do your board task."}),
        ),
    ];
    let done = c.calls_named("create_task").len() + c.calls_named("spawn_teammate").len();
    if let Some((tool, args)) = setup.get(done) {
        return call(tool, args.clone());
    }
    let reviewed = c.calls_named("review_plan").len();
    if let Some(plan) = plan_request_events(c).get(reviewed) {
        return call(
            "review_plan",
            json!({"request_id": plan["request_id"], "approve": true}),
        );
    }
    say("Noted.")
}

fn alpha(c: &Convo<'_>) -> Reply {
    if c.calls_named("submit_plan").is_empty() {
        return call("submit_plan", json!({"plan": "Write a.txt."}));
    }
    let approved = c
        .user_texts()
        .iter()
        .any(|t| t.starts_with("Plan approved"));
    if !approved || c.last_is_tool_result() {
        return say(if approved {
            "Wrote a.txt."
        } else {
            "Submitted."
        });
    }
    if c.calls_named("write_file").is_empty() {
        return call(
            "write_file",
            json!({"path": "a.txt", "content": "from alpha\n"}),
        );
    }
    say("Already written.")
}

fn beta(c: &Convo<'_>) -> Reply {
    if c.last_is_tool_result() {
        return say("Wrote b.txt.");
    }
    if c.calls_named("write_file").is_empty() {
        return call(
            "write_file",
            json!({"path": "b.txt", "content": "from beta\n"}),
        );
    }
    say("Already written.")
}

const PROMPT: &str = "Have alpha and beta each write their file.";

/// Builds a team on `f` with `models` and random ids, drives `PROMPT` until quiescent or
/// `stop`, closes it; the recording's path.
async fn run(
    f: &Fixture,
    models: Arc<dyn ModelChooser>,
    stop: CancellationToken,
) -> std::path::PathBuf {
    let mut settings = f.settings(models);
    settings.ids = Arc::new(RandomIds);
    settings.events.prompt = PROMPT.to_owned();
    let mut team = build_team(settings).await.unwrap();
    let recording = team.recording().expect("every run on files is recorded");
    let mut driver = team.driver();
    if tokio::time::timeout(WAIT, driver.run(&mut team.lead, PROMPT, &stop))
        .await
        .is_err()
    {
        let log = std::fs::read_to_string(f.workspace.join(".troupe/events.jsonl")).unwrap();
        for line in log.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            eprintln!(
                "{} {} {}",
                v["agent"],
                v["kind"],
                line.chars().take(300).collect::<String>()
            );
        }
        panic!("the run did not end");
    }
    team.close().await;
    recording
}

fn player(recording: &Path, f: &Fixture) -> Arc<Player> {
    Player::new(
        Recording::load(recording).unwrap(),
        PlayOptions {
            mode: Mode::Compare,
            until: None,
            live: None,
            stall: Duration::from_secs(20),
            workspace: f.workspace.to_string_lossy().into_owned(),
            redactor: Default::default(),
        },
    )
}

async fn recorded_team_run() -> (Fixture, std::path::PathBuf) {
    let f = Fixture::new();
    let models = Models::new(
        &f.signal,
        &[
            ("lead", &TestModel::new(&f.signal, lead)),
            ("alpha", &TestModel::new(&f.signal, alpha)),
            ("beta", &TestModel::new(&f.signal, beta)),
        ],
    );
    let recording = run(&f, models, CancellationToken::new()).await;
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("a.txt")).unwrap(),
        "from alpha\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("b.txt")).unwrap(),
        "from beta\n"
    );
    (f, recording)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parallel_team_run_replays_identically_ten_times_out_of_ten() {
    let (recorded, path) = recorded_team_run().await;
    let recording = Recording::load(&path).unwrap();
    let agents: Vec<String> = recording.agents().iter().map(|a| a.to_string()).collect();
    assert_eq!(agents, ["lead", "alpha", "beta"]);
    let reviews = recording
        .calls
        .iter()
        .filter_map(|c| c.answer.as_ref().ok())
        .flat_map(|a| &a.message.tool_calls)
        .filter(|t| t.name == "review_plan")
        .count();
    assert_eq!(reviews, 1, "the lead approved alpha's plan");
    let tree = recording.end.as_ref().and_then(|e| e.tree.clone()).unwrap();
    assert_eq!(
        start_point::tree_digest(&recorded.workspace).unwrap().0,
        tree
    );
    for round in 1..=10 {
        let f = Fixture::new();
        let player = player(&path, &f);
        run(&f, player.models(), player.stop_token()).await;
        let report = player.report();
        assert_eq!(report.divergence, None, "round {round}");
        assert_eq!(report.served, report.total, "round {round}");
        assert_eq!(
            start_point::tree_digest(&f.workspace).unwrap().0,
            tree,
            "round {round}: the final tree"
        );
        // The recorded answer's plan id was translated to this run's: the plan was approved.
        assert_eq!(
            std::fs::read_to_string(f.workspace.join("a.txt")).unwrap(),
            "from alpha\n"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_instruction_stops_the_replay_at_the_first_call_with_the_line_in_the_diff() {
    let (_recorded, path) = recorded_team_run().await;
    let f = Fixture::new();
    std::fs::write(f.workspace.join("AGENTS.md"), "Always answer in French.\n").unwrap();
    let player = player(&path, &f);
    run(&f, player.models(), player.stop_token()).await;
    let report = player.report();
    let Some(Divergence::Request {
        call,
        agent,
        index,
        diff,
        recorded_answer,
    }) = report.divergence
    else {
        panic!("{report:?}");
    };
    assert_eq!((call, agent.as_str(), index), (1, "lead", 1));
    assert!(diff.contains("+Always answer in French."), "{diff}");
    assert!(recorded_answer.contains("create_task"), "{recorded_answer}");
    assert_eq!(report.served, 0);
    assert!(
        !f.workspace.join("a.txt").exists(),
        "nothing ran past the difference"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_never_holds_the_api_key() {
    const KEY: &str = "sk-test-recorded-key-0123456789";
    let f = Fixture::new();
    std::fs::write(f.workspace.join("notes.txt"), format!("the key is {KEY}\n")).unwrap();
    let lead = TestModel::new(&f.signal, |c| {
        if c.calls_named("read_file").is_empty() {
            return call("read_file", json!({"path": "notes.txt"}));
        }
        say(&format!("I saw {KEY} in the notes."))
    });
    let mut settings = f.settings(Models::new(&f.signal, &[("lead", &lead)]));
    settings.redactor = troupe::secrets::Redactor::new([KEY]);
    settings.events.prompt = format!("Read notes.txt; the key is {KEY}");
    let mut team = build_team(settings).await.unwrap();
    let path = team.recording().unwrap();
    drive(&mut team, &format!("Read notes.txt; the key is {KEY}")).await;
    team.close().await;
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(KEY), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
    let recording = Recording::load(&path).unwrap();
    assert_eq!(recording.calls.len(), 2);
}

/// A recording's text, line by line, for the hostile cases.
fn recording_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn refused(text: &str) -> String {
    Recording::parse(text).expect_err("refused")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_recordings_are_refused_clearly() {
    let (_f, path) = recorded_team_run().await;
    let lines = recording_lines(&path);
    let whole = lines.join("\n") + "\n";
    assert!(Recording::parse(&whole).is_ok());
    // A torn last line: the run was killed while writing it.
    let torn = &whole[..whole.len() - 5];
    assert!(refused(torn).contains("is torn"), "{}", refused(torn));
    // A key repeated in one object.
    let doubled = whole.replacen(
        "\"type\":\"start\"",
        "\"type\":\"start\",\"type\":\"start\"",
        1,
    );
    assert!(
        refused(&doubled).contains("duplicate"),
        "{}",
        refused(&doubled)
    );
    // An unknown key.
    let unknown = whole.replacen("\"type\":\"start\"", "\"type\":\"start\",\"extra\":1", 1);
    assert!(refused(&unknown).contains("extra"), "{}", refused(&unknown));
    // An answer for an agent no call spawned.
    let with_ghost = whole.replace("\"agent\":\"beta\"", "\"agent\":\"ghost\"");
    let why = refused(&with_ghost);
    assert!(
        why.contains("agent `ghost`, which no earlier call spawned"),
        "{why}"
    );
    // Not a recording at all.
    assert!(refused("{}\n").contains("line 1"), "{}", refused("{}\n"));
    assert!(refused("").contains("empty"));
    // Two calls with one place in the order.
    let second = lines.iter().position(|l| l.contains("\"seq\":1,")).unwrap();
    let mut clash = lines.clone();
    clash[second] = clash[second].replace("\"seq\":1,", "\"seq\":0,");
    let why = refused(&(clash.join("\n") + "\n"));
    assert!(why.contains("is there twice"), "{why}");
    // A file that is a FIFO is refused, not waited on.
    let fifo = path.with_file_name("fifo.jsonl");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let error = Recording::load(&fifo).unwrap_err().to_string();
    assert!(error.contains("FIFO"), "{error}");
}
