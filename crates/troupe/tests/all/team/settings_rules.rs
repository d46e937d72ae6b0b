//! Settings rules in a built team (SPEC §7): an allow entry from `Settings.rules` lets the lead,
//! a teammate and the `task` subagent write under `docs/` without asking, even with a provider
//! that refuses everything; a deny entry stops the lead; the audit names the entries.

use std::path::PathBuf;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::permissions::DenyApproval;
use troupe::settings::{RuleEntry, RuleList, Settings, Source};

use super::support::{call, drive, say, Convo, Fixture, Models, Reply, TestModel};

const SUBAGENT_TASK: &str = "Write docs/sub.md.";

fn lead(c: &Convo<'_>) -> Reply {
    if c.user_texts().iter().any(|t| t.contains(SUBAGENT_TASK)) {
        // The `task` subagent runs on the lead's model.
        return if c.calls_named("write_file").is_empty() {
            call(
                "write_file",
                json!({"path": "docs/sub.md", "content": "sub"}),
            )
        } else {
            say("sub done")
        };
    }
    if c.calls_named("spawn_teammate").is_empty() {
        return call(
            "spawn_teammate",
            json!({"name": "writer", "role": "writer", "prompt": "Write docs/writer.md."}),
        );
    }
    if c.calls_named("task").is_empty() {
        return call("task", json!({"description": SUBAGENT_TASK}));
    }
    if c.calls_named("write_file").is_empty() {
        return call(
            "write_file",
            json!({"path": "./docs/lead.md", "content": "lead"}),
        );
    }
    if c.calls_named("read_file").is_empty() {
        return call("read_file", json!({"path": "docs/../.env"}));
    }
    say("All done.")
}

fn writer(c: &Convo<'_>) -> Reply {
    if c.calls_named("write_file").is_empty() {
        return call(
            "write_file",
            json!({"path": "docs/writer.md", "content": "writer"}),
        );
    }
    say("written")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_rules_apply_to_the_lead_teammates_and_the_subagent() {
    let f = Fixture::new();
    std::fs::write(f.workspace.join(".env"), "SECRET=1\n").unwrap();
    let lead = TestModel::new(&f.signal, lead);
    let writer = TestModel::new(&f.signal, writer);
    let mut settings = f.settings(Models::new(
        &f.signal,
        &[("lead", &lead), ("writer", &writer)],
    ));
    settings.approval = Arc::new(DenyApproval);
    let entry = |list, index, text: &str| RuleEntry {
        list,
        text: text.to_owned(),
        source: Source::Project(PathBuf::from("troupe.toml")),
        index,
        line: index + 1,
    };
    settings.settings = Settings {
        rules: vec![
            entry(RuleList::Allow, 0, "write_file(docs/**)"),
            entry(RuleList::Deny, 0, "read_file(.env)"),
        ],
        ..Settings::default()
    };
    let mut team = troupe::bootstrap::build_team(settings).await.unwrap();
    let outcome = drive(&mut team, "Write the docs.").await;
    assert_eq!(outcome.answer, "All done.");
    for file in ["docs/lead.md", "docs/writer.md", "docs/sub.md"] {
        assert!(f.workspace.join(file).is_file(), "{file}");
    }

    let decisions: Vec<(String, String, String, String)> = f
        .audit()
        .iter()
        .filter(|line| ["write_file", "read_file"].contains(&line["tool"].as_str().unwrap()))
        .map(|line| {
            let s = |key: &str| line[key].as_str().unwrap().to_owned();
            (s("agent"), s("tool"), s("decision"), s("rule"))
        })
        .collect();
    let allowed = "troupe.toml allow[0] \"write_file(docs/**)\"";
    let mut writes: Vec<_> = decisions
        .iter()
        .filter(|d| d.1 == "write_file")
        .map(|d| (d.2.as_str(), d.3.as_str()))
        .collect();
    writes.dedup();
    assert_eq!(writes, [("allow", allowed)], "{decisions:#?}");
    assert_eq!(decisions.iter().filter(|d| d.1 == "write_file").count(), 3);
    assert!(decisions
        .iter()
        .any(|d| d.0 == "writer" && d.1 == "write_file"));
    assert!(decisions.contains(&(
        "lead".to_owned(),
        "read_file".to_owned(),
        "deny".to_owned(),
        "troupe.toml deny[0] \"read_file(.env)\"".to_owned()
    )));
    team.close().await;
}
