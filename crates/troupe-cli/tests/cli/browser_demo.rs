//! The page of `troupe serve` and `troupe timeline --html` on the workspace `troupe demo` leaves,
//! in headless Chromium: the header says the run ended (not `live`), and `live` again when a
//! next run starts on the workspace (its events appended to the stream as a run writes them);
//! the agent cards show a role only where it is more than the name; the lead's status is known
//! in the exported timeline too; the demo's tokens and cost show. Screenshots go to
//! `target/browser-artifacts/` (`serve-demo.png`, `timeline-demo.png`).

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::browser::{artifacts, open_page, serve, skipped};
use super::support::{demo_workspace, troupe_in};

const WAIT: Duration = Duration::from_secs(30);

/// Every agent card: its name, its role (null when none is shown) and its status.
const CARDS: &str = r#"[...document.querySelectorAll('#agents .agent')].map(a => ({
    agent: a.dataset.agent,
    name: a.querySelector('.name').textContent,
    role: a.querySelector('.role') && a.querySelector('.role').textContent,
    status: a.querySelector('.status').textContent,
}))"#;

/// The header's indicator and the run state the page keeps.
const HEADER: &str = r#"({
    text: document.getElementById('connection').textContent,
    run: document.body.dataset.run,
})"#;

/// Appends one event of the workspace's run `run_id` (agent `troupe`) to its stream, after `seq`.
fn append_run_event(ws: &Path, seq: u64, run_id: &str, kind: &str, fields: Value) {
    let mut event = json!({"seq": seq, "at": "2026-07-30T09:00:00.000Z", "run_id": run_id,
                           "agent": "troupe", "kind": kind});
    for (k, v) in fields.as_object().unwrap() {
        event[k] = v.clone();
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(ws.join(".troupe/events.jsonl"))
        .unwrap();
    writeln!(f, "{event}").unwrap();
}

fn last_seq(ws: &Path) -> u64 {
    let events =
        troupe::store::events::read::read_all(&troupe::layout::Layout::new(ws).events_log())
            .unwrap();
    events.last().unwrap().seq
}

#[test]
fn after_the_demo_the_page_says_the_run_ended_and_live_when_another_starts() {
    if skipped() {
        return;
    }
    let (_dir, ws) = demo_workspace();
    let (_server, url) = serve(&ws);
    let mut page = open_page();
    page.navigate(&url).unwrap();
    page.wait_for(
        "document.body.dataset.ready === '1' && document.body.dataset.run === 'ended'
         && document.getElementById('connection').className === 'ended'
         && document.querySelector('#cost-chart svg')",
        WAIT,
    )
    .unwrap_or_else(|e| panic!("{e}: {:?}", page.evaluate(HEADER)));
    assert_eq!(
        page.evaluate(HEADER).unwrap(),
        json!({"text": "run ended (done)", "run": "ended"})
    );
    // The lead's card says `lead` once; the writer's role is more than its name.
    assert_eq!(page.evaluate(CARDS).unwrap(), demo_cards());
    // The demo's calls have tokens and a (made-up) price: a cost for each agent and a chart.
    let cost = page
        .evaluate(
            r#"({
                total: document.getElementById('cost-total').textContent,
                unpriced: document.getElementById('cost-unpriced').hidden,
                agents: [...document.querySelectorAll('#agents .agent .cost')].map(c => c.textContent),
                tokens: [...document.querySelectorAll('#agents .agent .tokens')].map(c => c.textContent),
            })"#,
        )
        .unwrap();
    assert!(
        cost["total"].as_str().unwrap().starts_with("~$0.0"),
        "{cost}"
    );
    assert_eq!(cost["unpriced"], true, "{cost}");
    for shown in cost["agents"].as_array().unwrap() {
        let shown = shown.as_str().unwrap();
        assert!(
            shown.starts_with("~$0.0") && !shown.ends_with('*'),
            "{cost}"
        );
    }
    for shown in cost["tokens"].as_array().unwrap() {
        assert!(!shown.as_str().unwrap().starts_with("0 in"), "{cost}");
    }
    page.screenshot(&artifacts().join("serve-demo.png"))
        .unwrap();

    // A next run on the workspace: live while it goes on, then ended again, with its outcome.
    let seq = last_seq(&ws);
    append_run_event(
        &ws,
        seq + 1,
        "next-run",
        "run_started",
        json!({"prompt": "again", "workspace": ws.to_str().unwrap(), "model": "troupe-demo"}),
    );
    page.wait_for("document.body.dataset.run === 'running'", WAIT)
        .unwrap_or_else(|e| panic!("{e}: {:?}", page.evaluate(HEADER)));
    assert_eq!(
        page.evaluate(HEADER).unwrap(),
        json!({"text": "live", "run": "running"})
    );
    append_run_event(
        &ws,
        seq + 2,
        "next-run",
        "run_ended",
        json!({"exit_code": 1, "outcome": "failed", "error": "it broke"}),
    );
    page.wait_for("document.body.dataset.run === 'ended'", WAIT)
        .unwrap_or_else(|e| panic!("{e}: {:?}", page.evaluate(HEADER)));
    assert_eq!(
        page.evaluate(HEADER).unwrap(),
        json!({"text": "run ended (failed)", "run": "ended"})
    );
}

#[test]
fn the_exported_timeline_of_the_demo_shows_the_leads_status_and_each_role_once() {
    if skipped() {
        return;
    }
    let (_dir, ws) = demo_workspace();
    let html = ws.join("timeline.html");
    let exported = troupe_in(&ws, &["timeline", "--html", html.to_str().unwrap()]);
    assert_eq!(exported.code, 0, "{exported:#?}");
    let mut page = open_page();
    page.navigate(&format!("file://{}", html.display()))
        .unwrap();
    page.wait_for(
        "document.body.dataset.ready === '1' && document.querySelector('#agents .agent[data-agent=\"writer\"]')",
        WAIT,
    )
    .unwrap();
    assert_eq!(page.evaluate(CARDS).unwrap(), demo_cards());
    // Every badge has its word: none is an empty box.
    let widths = page
        .evaluate(
            "[...document.querySelectorAll('#agents .status')].map(s => s.getBoundingClientRect().width > 10)",
        )
        .unwrap();
    assert_eq!(widths, json!([true, true]));
    page.screenshot(&artifacts().join("timeline-demo.png"))
        .unwrap();
}

/// The demo's cards after its run: the lead's says `lead` once, the writer's role is more than
/// its name.
fn demo_cards() -> Value {
    json!([
        {"agent": "lead", "name": "lead", "role": null, "status": "idle"},
        {"agent": "writer", "name": "writer documentation writer",
         "role": "documentation writer", "status": "shutdown"},
    ])
}
