//! Teammates gated from their first call (SPEC §6): `spawn_teammate` with `plan_required: true`,
//! or every teammate of a run that requires plans. Such a teammate's write is denied before any
//! plan (the handler never runs, the denial is audited), allowed once a plan of its is approved;
//! the rule is kept in `team.json` and applies again in a later run; the system prompts say
//! exactly which rule applies.

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::model::ChatMessage;
use troupe::wire::TeamRoster;

use super::support::{
    call, drive, plan_request_events, say, Convo, Fixture, Models, Reply, TestModel,
};

/// The lead: spawns `writer` with `spawn` arguments, approves each new plan, else says text.
fn approving_lead(spawn: Value) -> impl Fn(&Convo<'_>) -> Reply + Send + Sync {
    move |c| {
        if c.last_is_tool_result() {
            return say("Waiting.");
        }
        if c.calls_named("spawn_teammate").is_empty() {
            return call("spawn_teammate", spawn.clone());
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
}

/// The writer: tries to write `early.txt` at once, then submits a plan; once the plan is
/// approved, writes `NOTES.md`.
fn eager_writer(c: &Convo<'_>) -> Reply {
    let approved = c
        .user_texts()
        .iter()
        .any(|t| t.starts_with("Plan approved"));
    if approved {
        return match c.last_is_tool_result() {
            true => say("Written."),
            false => call(
                "write_file",
                json!({"path": "NOTES.md", "content": "approved"}),
            ),
        };
    }
    if c.calls_named("write_file").is_empty() {
        return call(
            "write_file",
            json!({"path": "early.txt", "content": "too early"}),
        );
    }
    if c.calls_named("submit_plan").is_empty() {
        return call("submit_plan", json!({"plan": "Write NOTES.md."}));
    }
    say("Submitted.")
}

/// The tool results a conversation received, in order.
fn tool_results(messages: &[ChatMessage]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

fn system_prompt(model: &TestModel, call: usize) -> String {
    match &model.requests()[call - 1].messages[0] {
        ChatMessage::System { content } => content.clone(),
        other => panic!("not a system prompt: {other:?}"),
    }
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

fn roster(f: &Fixture) -> Value {
    let bytes = std::fs::read(f.layout.team_file()).unwrap();
    TeamRoster::from_json_bytes(&bytes).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

const GATED_FROM_START: &str = "write_file, edit_file, shell, claim_task and complete_task are \
     denied until the lead approves a plan of yours, so start by submitting your plan with \
     submit_plan; until then you can only read and search files, look at the task board, \
     message and submit plans.";
const GATED_AT_FIRST_PLAN: &str = "You may work without a plan. Once you submit a plan with \
     submit_plan, write_file, edit_file, shell, claim_task and complete_task are denied until \
     the lead approves it.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_required_teammate_is_denied_before_any_plan_and_allowed_after_approval() {
    let f = Fixture::new();
    let lead = TestModel::new(
        &f.signal,
        approving_lead(json!({"name": "writer", "role": "writer",
                               "prompt": "Write NOTES.md.", "plan_required": true})),
    );
    let writer = TestModel::new(&f.signal, eager_writer);
    let mut team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    drive(&mut team, "Have a writer write NOTES.md.").await;

    // The early write never ran; the approved one did.
    assert!(!f.workspace.join("early.txt").exists());
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("NOTES.md")).unwrap(),
        "approved"
    );
    let first_result = &tool_results(&writer.requests()[1].messages)[0];
    assert_eq!(
        first_result,
        "Error [permission_denied]: write_file was denied (plan_gate): no plan approved yet; \
         submit_plan first (this teammate was spawned with plan_required: write_file is blocked \
         until the lead approves a plan of yours)"
    );
    assert_eq!(
        audit_of(&f, "writer"),
        [
            entry("write_file", "deny", "plan_gate"),
            entry("submit_plan", "allow", "default"),
            entry("write_file", "allow", "default+approval:auto"),
        ]
    );
    // The spawn result says what applies; team.json keeps the teammate's rule.
    let spawned: Value =
        serde_json::from_str(&tool_results(&lead.requests()[1].messages)[0]).unwrap();
    assert_eq!(spawned["plan_required"], true);
    assert_eq!(
        spawned["gated"],
        "from its first call until you approve a plan of its"
    );
    assert_eq!(roster(&f)["teammates"][0]["plan_required"], true);
    assert_eq!(roster(&f)["teammates"][0]["earlier_plan"], Value::Null);
    // The teammate was told it is gated from the start, and why.
    let prompt = system_prompt(&writer, 1);
    assert!(
        prompt.contains(
            "You are gated from your first tool call (this teammate was spawned with \
             plan_required): "
        ),
        "{prompt}"
    );
    assert!(prompt.contains(GATED_FROM_START), "{prompt}");
    assert!(!prompt.contains("You may work without a plan"), "{prompt}");
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_plan_required_a_teammate_is_gated_only_once_it_submits_a_plan() {
    let f = Fixture::new();
    let lead = TestModel::new(
        &f.signal,
        approving_lead(json!({"name": "writer", "role": "writer", "prompt": "Write."})),
    );
    let writer = TestModel::new(&f.signal, eager_writer);
    let mut team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    drive(&mut team, "Have a writer write.").await;

    assert!(f.workspace.join("early.txt").exists(), "no plan, no gate");
    assert_eq!(
        audit_of(&f, "writer")[0],
        entry("write_file", "allow", "default+approval:auto")
    );
    assert_eq!(roster(&f)["teammates"][0]["plan_required"], false);
    let spawned: Value =
        serde_json::from_str(&tool_results(&lead.requests()[1].messages)[0]).unwrap();
    assert_eq!(spawned["plan_required"], false);
    assert_eq!(
        spawned["gated"],
        "only once it submits a plan, until you approve it"
    );
    let prompt = system_prompt(&writer, 1);
    assert!(prompt.contains(GATED_AT_FIRST_PLAN), "{prompt}");
    assert!(
        !prompt.contains("gated from your first tool call"),
        "{prompt}"
    );
    // The lead is told both rules, since this run does not require plans.
    let lead_prompt = system_prompt(&lead, 1);
    assert!(
        lead_prompt.contains(
            "A teammate spawned with plan_required: true is gated from its first tool call — it \
             can only read and search files, look at the task board, message and submit_plan (no \
             writes, commands or claims) until you approve a plan of its with review_plan. Any \
             other teammate is gated only once it submits a plan, until you approve it."
        ),
        "{lead_prompt}"
    );
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_requires_plans_gates_every_teammate_from_its_first_call() {
    let f = Fixture::new();
    let lead = TestModel::new(
        &f.signal,
        approving_lead(json!({"name": "writer", "role": "writer", "prompt": "Write NOTES.md."})),
    );
    let writer = TestModel::new(&f.signal, eager_writer);
    let mut settings = f.settings(Models::new(
        &f.signal,
        &[("lead", &lead), ("writer", &writer)],
    ));
    settings.require_plans = true;
    let mut team = troupe::bootstrap::build_team(settings).await.unwrap();
    drive(&mut team, "Have a writer write NOTES.md.").await;

    assert!(!f.workspace.join("early.txt").exists());
    assert!(f.workspace.join("NOTES.md").exists());
    let first_result = &tool_results(&writer.requests()[1].messages)[0];
    assert!(
        first_result.contains(
            "no plan approved yet; submit_plan first (this run requires a plan of every \
             teammate (--require-plans)"
        ),
        "{first_result}"
    );
    assert_eq!(
        audit_of(&f, "writer"),
        [
            entry("write_file", "deny", "plan_gate"),
            entry("submit_plan", "allow", "default"),
            entry("write_file", "allow", "default+approval:auto"),
        ]
    );
    // The run's rule is not the teammate's own: team.json records what the lead asked.
    assert_eq!(roster(&f)["teammates"][0]["plan_required"], false);
    // The spawn result says the teammate is gated from the start, though not by its own rule.
    let spawned: Value =
        serde_json::from_str(&tool_results(&lead.requests()[1].messages)[0]).unwrap();
    assert_eq!(spawned["plan_required"], false);
    assert_eq!(
        spawned["gated"],
        "from its first call until you approve a plan of its"
    );
    let prompt = system_prompt(&writer, 1);
    assert!(
        prompt.contains(
            "You are gated from your first tool call (this run requires a plan of every \
             teammate (--require-plans)): "
        ),
        "{prompt}"
    );
    assert!(prompt.contains(GATED_FROM_START), "{prompt}");
    let lead_prompt = system_prompt(&lead, 1);
    assert!(
        lead_prompt.contains(
            "This run requires plans: every teammate is gated from its first tool call — it can \
             only read and search files, look at the task board, message and submit_plan (no \
             writes, commands or claims) until you approve a plan of its with review_plan"
        ),
        "{lead_prompt}"
    );
    assert!(!lead_prompt.contains("Any other teammate"), "{lead_prompt}");
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_required_survives_into_the_next_run() {
    let f = Fixture::new();
    // Run 1: the writer is spawned with plan_required and only answers.
    let lead = TestModel::new(&f.signal, |c| match c.last_is_tool_result() {
        true => say("Spawned."),
        false if c.calls_named("spawn_teammate").is_empty() => call(
            "spawn_teammate",
            json!({"name": "writer", "role": "writer", "prompt": "Stand by.",
                   "plan_required": true}),
        ),
        false => say("Noted."),
    });
    let writer = TestModel::new(&f.signal, |_| say("Ready."));
    let mut team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    drive(&mut team, "Spawn a writer.").await;
    team.close().await;
    assert_eq!(roster(&f)["teammates"][0]["plan_required"], true);

    // Run 2: a new process, a new runner for the same writer; it is still gated.
    let lead = TestModel::new(&f.signal, |c| match c.last_is_tool_result() {
        true => say("Sent."),
        false if c.calls_named("send_message").is_empty() => call(
            "send_message",
            json!({"to": "writer", "content": "Write NOTES.md now."}),
        ),
        false => say("Noted."),
    });
    let writer = TestModel::new(&f.signal, |c| match c.last_tool_result() {
        Some(result) => say(result),
        None => call("write_file", json!({"path": "NOTES.md", "content": "x"})),
    });
    let mut team = f
        .build(Models::new(
            &f.signal,
            &[("lead", &lead), ("writer", &writer)],
        ))
        .await;
    drive(&mut team, "Tell the writer to write.").await;
    assert!(!f.workspace.join("NOTES.md").exists());
    let denial = &tool_results(&writer.requests()[1].messages)[0];
    assert!(
        denial.contains("no plan approved yet; submit_plan first"),
        "{denial}"
    );
    let prompt = system_prompt(&writer, 1);
    assert!(prompt.contains(GATED_FROM_START), "{prompt}");
    team.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_teammate_offers_plan_required_as_an_optional_boolean() {
    let f = Fixture::new();
    let lead = TestModel::new(&f.signal, |_| say("ok"));
    let mut team = f.build(Models::new(&f.signal, &[("lead", &lead)])).await;
    drive(&mut team, "hello").await;
    let spawn = lead.requests()[0]
        .tools
        .iter()
        .find(|t| t.name == "spawn_teammate")
        .unwrap()
        .parameters
        .clone();
    assert_eq!(spawn["additionalProperties"], false);
    // SPEC §4: name, role and prompt; `plan_required` and `agent` are optional.
    assert_eq!(spawn["required"], json!(["name", "role", "prompt"]));
    assert_eq!(spawn["properties"]["plan_required"]["type"], "boolean");
    assert_eq!(spawn["properties"]["role"]["type"], "string");
    assert_eq!(spawn["properties"]["agent"]["type"], "string");
    team.close().await;
}

/// The gate rule on its own: when it starts, what it says before any plan of the teammate's
/// own, and that a predecessor's plan (`earlier_plan`) counts as no plan.
#[tokio::test]
async fn the_gate_rule_by_start_and_latest_plan() {
    use std::sync::Arc;
    use troupe::clock::{Clock, ManualClock};
    use troupe::ids::SequentialIds;
    use troupe::layout::Layout;
    use troupe::permissions::{Decision, PermissionRequest, PermissionRule};
    use troupe::store::protocol::{JsonProtocolStore, NewRequest, ProtocolStore, DEFAULT_TTL};
    use troupe::team::{GateStart, PlanGateRule};
    use troupe::tools::{Effect, Scope};
    use troupe::wire::{AgentName, Content, RequestId, RequestKind};

    enum Latest {
        None,
        /// A pending plan recorded as the earlier teammate's.
        Earlier,
        Pending,
        Expired,
    }
    let writer = AgentName::parse("writer").unwrap();
    let args = json!({});
    let call = |tool: &'static str, effect: Effect| PermissionRequest {
        agent: &writer,
        tool,
        effect,
        scope: Scope::World,
        arguments: &args,
        sandbox: None,
        preview: None,
        protected: None,
    };
    let starts = [
        GateStart::AtFirstPlan,
        GateStart::PlanRequired,
        GateStart::RunRequiresPlans,
    ];
    for start in starts {
        for latest in [
            Latest::None,
            Latest::Earlier,
            Latest::Pending,
            Latest::Expired,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let clock = ManualClock::at_spec_epoch();
            let shared: Arc<dyn Clock> = Arc::new(clock.clone());
            let store = Arc::new(
                JsonProtocolStore::open(
                    &Layout::new(dir.path()),
                    shared.clone(),
                    Arc::new(SequentialIds::new()),
                )
                .unwrap(),
            );
            let mut earlier: Option<RequestId> = None;
            let mut own: Option<RequestId> = None;
            if !matches!(latest, Latest::None) {
                let plan = store
                    .create(NewRequest {
                        kind: RequestKind::PlanApproval,
                        sender: writer.clone(),
                        target: AgentName::lead(),
                        content: Content::parse("a plan").unwrap(),
                        ttl: DEFAULT_TTL,
                    })
                    .await
                    .unwrap();
                match latest {
                    Latest::Earlier => earlier = Some(plan.id()),
                    _ => own = Some(plan.id()),
                }
            }
            if matches!(latest, Latest::Expired) {
                clock.advance_millis(DEFAULT_TTL.as_millis() as i64);
            }
            let gate = PlanGateRule::new(store, shared)
                .starting(start)
                .ignoring(earlier);
            // What a gated teammate keeps, whatever the state.
            for (tool, effect) in [
                ("read_file", Effect::Read),
                ("send_message", Effect::External),
                ("submit_plan", Effect::External),
            ] {
                assert_eq!(gate.evaluate(&call(tool, effect)).await, None, "{tool}");
            }
            let verdict = gate.evaluate(&call("write_file", Effect::Write)).await;
            match (own, &latest) {
                (None, _) if start == GateStart::AtFirstPlan => assert_eq!(verdict, None),
                (None, _) => {
                    let verdict = verdict.unwrap();
                    assert_eq!(verdict.decision, Decision::Deny);
                    assert_eq!(verdict.rule, "plan_gate");
                    assert_eq!(
                        verdict.reason,
                        format!(
                            "no plan approved yet; submit_plan first ({}: write_file is blocked \
                             until the lead approves a plan of yours)",
                            start.cause()
                        )
                    );
                }
                (Some(id), latest) => {
                    let verdict = verdict.unwrap();
                    assert_eq!(verdict.decision, Decision::Deny);
                    let status = match latest {
                        Latest::Expired => "expired",
                        _ => "pending",
                    };
                    assert!(
                        verdict
                            .reason
                            .starts_with(&format!("plan request {id} is {status}: ")),
                        "{}",
                        verdict.reason
                    );
                }
            }
        }
    }
}
