//! The page's cost-over-time chart in headless Chromium: a workspace whose usage log and event
//! stream the test writes (as a run writes them: the usage record, then its
//! `model_call_finished` event) shows one point per priced call, the total in the label and in
//! the chart's accessible name, and the models with no price named; a call appended while the
//! page is open adds a point and raises the total, live. A screenshot goes to
//! `target/browser-artifacts/serve-cost.png`.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::browser::{artifacts, open_page, serve, skipped};

const WAIT: Duration = Duration::from_secs(30);

/// Appends one model call, priced or not, at `minute` past 08:00: its usage record, then its
/// event with `seq`.
fn call(ws: &Path, seq: u64, minute: u32, agent: &str, model: &str, prompt: u64, out: u64) {
    let at = format!("2026-07-30T08:{minute:02}:00.000Z");
    let append = |file: &str, line: Value| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(ws.join(".troupe").join(file))
            .unwrap();
        writeln!(f, "{line}").unwrap();
    };
    append(
        "usage.jsonl",
        json!({"at": at, "run_id": "r", "agent": agent, "model": model, "purpose": "turn",
               "prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}),
    );
    append(
        "events.jsonl",
        json!({"seq": seq, "at": at, "run_id": "r", "agent": agent,
               "kind": "model_call_finished", "model": model, "latency_ms": 5,
               "tokens_in": prompt, "tokens_out": out, "finish_reason": "stop",
               "attempts": 1, "fallback_used": false}),
    );
}

/// What the chart shows: its points, the total label, and its accessible name and title.
const SHOWN: &str = r#"(() => {
    const svg = document.querySelector('#cost-chart svg');
    return svg && {
        points: svg.querySelectorAll('.point').length,
        total: document.getElementById('cost-total').textContent,
        label: svg.getAttribute('aria-label'),
        title: svg.querySelector(':scope > title').textContent,
        unpriced: document.getElementById('cost-unpriced').textContent,
    };
})()"#;

#[test]
fn the_cost_chart_shows_each_priced_call_and_grows_live() {
    if skipped() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(ws.join(".troupe")).unwrap();
    // gpt-4.1: $2 per million prompt tokens, $8 per million completion tokens.
    call(&ws, 1, 0, "lead", "gpt-4.1", 1_000_000, 0);
    call(&ws, 2, 1, "lead", "gpt-4.1", 0, 125_000);
    call(&ws, 3, 2, "lead", "local-llm", 5, 5);
    call(&ws, 4, 3, "lead", "gpt-4.1", 500_000, 0);
    let (_server, url) = serve(&ws);

    let mut page = open_page();
    page.navigate(&url).unwrap();
    page.wait_for(
        "document.body.dataset.ready === '1' && document.querySelector('#cost-chart svg')",
        WAIT,
    )
    .unwrap();
    let shown = page.evaluate(SHOWN).unwrap();
    let said = "Estimated cost over time: ~$4.0000 in total at 08:03:00 UTC, 3 points; \
                no price for local-llm";
    assert_eq!(
        shown,
        json!({
            "points": 3,
            "total": "~$4.0000",
            "label": said,
            "title": said,
            "unpriced": "no price for local-llm: their tokens are not counted",
        })
    );
    // The axes say what they measure.
    let labels = page
        .evaluate(
            "[...document.querySelectorAll('#cost-chart .axis-label')].map(t => t.textContent)",
        )
        .unwrap();
    assert_eq!(labels, json!(["USD", "time (UTC)"]));

    // A call made while the page is open: one more point, a higher total.
    call(&ws, 5, 4, "lead", "gpt-4.1", 0, 250_000);
    page.wait_for(
        "document.querySelectorAll('#cost-chart svg .point').length === 4",
        WAIT,
    )
    .unwrap_or_else(|e| panic!("the chart did not grow: {e}; {:?}", page.evaluate(SHOWN)));
    let shown = page.evaluate(SHOWN).unwrap();
    assert_eq!(shown["total"], "~$6.0000");
    assert!(
        shown["label"]
            .as_str()
            .unwrap()
            .contains("~$6.0000 in total at 08:04:00 UTC, 4 points"),
        "{shown}"
    );
    page.screenshot(&artifacts().join("serve-cost.png"))
        .unwrap();
}
