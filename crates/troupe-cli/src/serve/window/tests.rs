use super::*;
use pretty_assertions::assert_eq;
use troupe::layout::Layout;

/// A workspace whose stream holds `n` events: agents take turns (lead, alice, bob), every
/// tenth a `model_call_finished` naming a model, the rest `assistant_text` saying `step <seq>`.
fn workspace(n: u64) -> (tempfile::TempDir, Layout) {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    std::fs::create_dir_all(layout.state_dir()).unwrap();
    let mut text = String::new();
    for seq in 1..=n {
        text.push_str(&line(seq));
    }
    std::fs::write(layout.events_log(), text).unwrap();
    (dir, layout)
}

fn line(seq: u64) -> String {
    let agent = ["lead", "alice", "bob"][usize::try_from(seq % 3).unwrap()];
    if seq.is_multiple_of(10) {
        format!(
            r#"{{"seq":{seq},"at":"2026-07-30T08:00:00.000Z","run_id":"r","agent":"{agent}","kind":"model_call_finished","model":"m-{seq}"}}"#
        ) + "\n"
    } else {
        format!(
            r#"{{"seq":{seq},"at":"2026-07-30T08:00:00.000Z","run_id":"r","agent":"{agent}","kind":"assistant_text","text":"Step {seq}"}}"#
        ) + "\n"
    }
}

fn seqs(events: &[Served]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

async fn window_of(layout: &Layout) -> EventWindow {
    let view = troupe::bootstrap::TeamView::open(layout.workspace(), &Default::default())
        .await
        .unwrap();
    let mut window = EventWindow::new(History::new(view.events()));
    window.refresh().await.unwrap();
    window
}

#[tokio::test]
async fn the_window_holds_only_the_latest_events() {
    let (_dir, layout) = workspace(5_000);
    let window = window_of(&layout).await;
    assert_eq!(window.held(), WINDOW);
    assert_eq!(window.last_seq(), 5_000);
    assert!(
        layout.events_index().is_file(),
        "the server writes the index"
    );
}

#[tokio::test]
async fn new_events_join_the_window_and_push_the_oldest_out() {
    let (_dir, layout) = workspace(WINDOW as u64);
    let mut window = window_of(&layout).await;
    let more: String = (WINDOW as u64 + 1..=WINDOW as u64 + 5).map(line).collect();
    let mut text = std::fs::read_to_string(layout.events_log()).unwrap();
    text.push_str(&more);
    std::fs::write(layout.events_log(), text).unwrap();
    window.refresh().await.unwrap();
    assert_eq!(window.held(), WINDOW);
    assert_eq!(window.last_seq(), WINDOW as u64 + 5);
    let tail = window.after(WINDOW as u64 + 2, 10).await.unwrap();
    assert_eq!(seqs(&tail), [2003, 2004, 2005]);
}

#[tokio::test]
async fn older_events_come_by_seq_from_the_history() {
    let (_dir, layout) = workspace(10_000);
    let mut window = window_of(&layout).await;
    let latest = window
        .before(u64::MAX, 3, &Filter::default(), 1000)
        .await
        .unwrap();
    assert_eq!(seqs(&latest.events), [9_998, 9_999, 10_000]);
    assert_eq!(latest.next_before, Some(9_998));
    // Far below the window: read through the index.
    let old = window
        .before(101, 4, &Filter::default(), 1000)
        .await
        .unwrap();
    assert_eq!(seqs(&old.events), [97, 98, 99, 100]);
    assert_eq!(old.next_before, Some(97));
    let first = window
        .before(3, 10, &Filter::default(), 1000)
        .await
        .unwrap();
    assert_eq!(seqs(&first.events), [1, 2]);
    assert_eq!(first.next_before, None, "the stream's start");
    assert_eq!(
        first.events[0].json,
        line(1).trim_end(),
        "each event is its line"
    );
    let forward = window.after(4_000, 3).await.unwrap();
    assert_eq!(seqs(&forward), [4_001, 4_002, 4_003]);
}

#[tokio::test]
async fn filters_search_back_through_the_history() {
    let (_dir, layout) = workspace(10_000);
    let mut window = window_of(&layout).await;
    let by_kind = Filter::new(None, Some("model_call_finished".into()), None);
    let page = window.before(u64::MAX, 3, &by_kind, 100_000).await.unwrap();
    assert_eq!(seqs(&page.events), [9_980, 9_990, 10_000]);
    assert_eq!(page.next_before, Some(9_980));
    let bob_models = Filter::new(Some("bob".into()), Some("model_call_finished".into()), None);
    let page = window.before(9_980, 2, &bob_models, 100_000).await.unwrap();
    assert_eq!(seqs(&page.events), [9_920, 9_950]);
    let text = Filter::new(None, None, Some("STEP 123".into()));
    let page = window.before(u64::MAX, 100, &text, 100_000).await.unwrap();
    assert_eq!(
        seqs(&page.events),
        [123, 1_231, 1_232, 1_233, 1_234, 1_235, 1_236, 1_237, 1_238, 1_239]
    );
    assert_eq!(page.next_before, None);
    // A search bounded by `scan` says where to go on.
    let page = window.before(u64::MAX, 100, &text, 3_000).await.unwrap();
    assert!(page.events.is_empty());
    assert_eq!(
        page.next_before,
        Some(6_001),
        "below 6,001 is not searched yet"
    );
}

#[tokio::test]
async fn the_last_model_of_each_agent_is_folded_without_keeping_the_stream() {
    let (_dir, layout) = workspace(10_000);
    let mut extra = std::fs::read_to_string(layout.events_log()).unwrap();
    // Only one `carol` event, far below the window.
    extra = extra.replacen(
        r#""agent":"lead","kind":"model_call_finished","model":"m-30""#,
        r#""agent":"carol","kind":"model_call_finished","model":"old-model""#,
        1,
    );
    std::fs::write(layout.events_log(), extra).unwrap();
    let mut window = window_of(&layout).await;
    let models = window
        .models(&["lead", "alice", "bob", "carol"])
        .await
        .unwrap()
        .clone();
    assert_eq!(models["lead"], "m-9990");
    assert_eq!(models["alice"], "m-10000");
    assert_eq!(models["bob"], "m-9980");
    assert_eq!(models["carol"], "old-model");
    assert_eq!(window.held(), WINDOW);
}

/// What the page reads of a window: the latest events, older pages, a page forwards, a
/// filtered search back, the last models.
async fn pages(window: &mut EventWindow) -> Vec<Vec<u64>> {
    let all = Filter::default();
    let by_kind = Filter::new(None, Some("model_call_finished".into()), None);
    let mut out = Vec::new();
    for (before, limit, filter) in [
        (u64::MAX, 3, &all),
        (101, 4, &all),
        (3, 10, &all),
        (7_001, 2_500, &all),
        (u64::MAX, 5, &by_kind),
        (2_000, 7, &by_kind),
    ] {
        let page = window.before(before, limit, filter, 100_000).await.unwrap();
        out.push(seqs(&page.events));
        out.push(page.next_before.into_iter().collect());
    }
    out.push(seqs(&window.after(4_000, 3).await.unwrap()));
    out.push(seqs(&window.after(9_990, 30).await.unwrap()));
    let models = window.models(&["lead", "alice", "bob"]).await.unwrap();
    out.push(models.values().map(|m| m[2..].parse().unwrap()).collect());
    out
}

/// Rolls the workspace's open segment as gc does (holding the run lock), into closed
/// segments of at most 8 MiB each.
fn roll(layout: &Layout) {
    let lock = troupe::store::lock::lock_exclusive(&layout.run_lock()).unwrap();
    let made = troupe::store::events::segments::roll(layout, &lock).unwrap();
    assert!(!made.is_empty());
}

#[tokio::test]
async fn the_page_reads_the_same_across_closed_segments() {
    let (_dir, layout) = workspace(10_000);
    let mut live = window_of(&layout).await;
    let before = pages(&mut live).await;
    roll(&layout);
    assert_eq!(std::fs::read_to_string(layout.events_log()).unwrap(), "");
    let mut fresh = window_of(&layout).await;
    assert_eq!(fresh.last_seq(), 10_000);
    assert_eq!(fresh.held(), WINDOW);
    assert_eq!(
        pages(&mut fresh).await,
        before,
        "a server started after the roll"
    );
    assert_eq!(pages(&mut live).await, before, "a server running across it");
    // New events after the roll reach the running server's window, once each.
    let more: String = (10_001..=10_005).map(line).collect();
    std::fs::write(layout.events_log(), more).unwrap();
    live.refresh().await.unwrap();
    assert_eq!(live.last_seq(), 10_005);
    let tail = live.after(9_998, 100).await.unwrap();
    assert_eq!(seqs(&tail), (9_999..=10_005).collect::<Vec<_>>());
    let tail = fresh.after(9_998, 100).await.unwrap();
    assert_eq!(seqs(&tail), [9_999, 10_000], "not refreshed yet");
    fresh.refresh().await.unwrap();
    assert_eq!(fresh.last_seq(), 10_005);
}
