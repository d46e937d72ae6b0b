//! The live page on a stream of a million events, in headless Chromium: it opens on the latest
//! events, scrolling back loads older ones by `seq` (the rows in view stay in view), a filter
//! searches the whole history, and `troupe serve` stays small while doing it (its resident
//! memory, from `/proc`, under 100 MiB).
//!
//! The stream is written directly, in the format `EventLog` writes (docs/events.md), so that
//! making it takes a second, not minutes.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::browser::{open_page, serve, skipped};

const N: u64 = 1_000_000;
/// The page's page of events (`PAGE` in app.js).
const PAGE: u64 = 500;
/// Long enough for a debug build to index a million lines on a busy machine.
const READY: Duration = Duration::from_secs(180);

fn write_stream(ws: &Path) {
    let dir = ws.join(".troupe");
    std::fs::create_dir_all(&dir).unwrap();
    let file = std::fs::File::create(dir.join("events.jsonl")).unwrap();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let agents = ["lead", "alice", "bob"];
    for seq in 1..=N {
        let agent = agents[usize::try_from(seq % 3).unwrap()];
        if seq.is_multiple_of(7) {
            writeln!(
                out,
                r#"{{"seq":{seq},"at":"2026-07-30T08:00:00.000Z","run_id":"r","agent":"{agent}","kind":"tool_finished","tool":"read_file","duration_ms":3,"outcome":"ok","preview":"reading part {seq}"}}"#
            )
        } else {
            writeln!(
                out,
                r#"{{"seq":{seq},"at":"2026-07-30T08:00:00.000Z","run_id":"r","agent":"{agent}","kind":"assistant_text","text":"Step {seq} of the work."}}"#
            )
        }
        .unwrap();
    }
    out.flush().unwrap();
}

/// The `seq`s of the timeline's rows, top to bottom.
const ROWS: &str =
    "Array.from(document.querySelectorAll('#timeline .event')).map(e => Number(e.dataset.seq))";

fn seqs(value: &Value) -> Vec<u64> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

/// `VmRSS` and `VmHWM` of a process, in bytes.
fn memory_of(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[test]
fn a_million_events_open_on_the_latest_and_scrolling_back_loads_older_ones() {
    if skipped() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    write_stream(&ws);
    let (server, url) = serve(&ws);
    let mut page = open_page();
    page.navigate(&url).unwrap();
    page.wait_for("document.body.dataset.ready === '1'", READY)
        .unwrap();

    // It opens on the latest page of events, scrolled to the end.
    let rows = seqs(&page.evaluate(ROWS).unwrap());
    assert_eq!(rows, (N - PAGE + 1..=N).collect::<Vec<_>>());
    let at_end = page
        .evaluate(
            "(() => { const t = document.getElementById('timeline');
               return t.scrollTop + t.clientHeight >= t.scrollHeight - 4 && t.scrollTop > 0; })()",
        )
        .unwrap();
    assert_eq!(at_end, json!(true), "the latest events are in view");

    // Scrolling to the top of what is loaded loads the page before it, above, by seq.
    let top_row = "document.querySelector('#timeline .event')";
    page.evaluate(&format!(
        "window.__wasTop = {top_row}.dataset.seq; document.getElementById('timeline').scrollTop = 0"
    ))
    .unwrap();
    page.wait_for(
        &format!(
            "Number(document.body.dataset.firstSeq) <= {}",
            N - 2 * PAGE + 1
        ),
        Duration::from_secs(60),
    )
    .unwrap();
    let rows = seqs(&page.evaluate(ROWS).unwrap());
    let first = rows[0];
    assert!(first <= N - 2 * PAGE + 1, "{first}");
    assert_eq!(
        rows,
        (first..=N).collect::<Vec<_>>(),
        "in order, none missing"
    );
    // The row that was at the top is still in view: the older rows went above it.
    let kept = page
        .evaluate(
            "(() => { const t = document.getElementById('timeline').getBoundingClientRect();
               const row = '#timeline .event[data-seq=\"' + window.__wasTop + '\"]';
               const r = document.querySelector(row).getBoundingClientRect();
               return r.bottom > t.top && r.top < t.bottom; })()",
        )
        .unwrap();
    assert_eq!(kept, json!(true));

    // A filter searches the whole history, a page at a time, back to the stream's start.
    page.evaluate(
        "document.getElementById('filter-kind').value = 'tool_finished';
         document.getElementById('filter-text').value = 'PART 9876';
         document.getElementById('filter').requestSubmit()",
    )
    .unwrap();
    page.wait_for(
        "document.body.dataset.filter && JSON.parse(document.body.dataset.filter).q === 'PART 9876' \
         && document.getElementById('older') \
         && document.getElementById('older').textContent === 'start of the stream'",
        Duration::from_secs(120),
    )
    .unwrap();
    let expected: Vec<u64> = (1..=N)
        .filter(|n| n.is_multiple_of(7) && n.to_string().starts_with("9876"))
        .collect();
    assert_eq!(seqs(&page.evaluate(ROWS).unwrap()), expected);

    let (rss, hwm) = memory_of(server.0.id());
    eprintln!("troupe serve: VmRSS {rss} bytes, VmHWM {hwm} bytes");
    assert!(
        hwm < 100 * 1024 * 1024,
        "troupe serve grew to {hwm} bytes on a million events"
    );
}
