use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::Map;
use troupe_wire::UtcTime;

use super::read::{last_at, Keep, SegmentCache};
use super::roll::roll_bounded;
use super::*;
use crate::clock::{Clock, ManualClock};
use crate::secrets::Redactor;
use crate::store::durable;
use crate::store::events::stream::{EventStream, FileEvents};
use crate::store::events::{read as events_read, EventLog};
use crate::store::lock::{lock_exclusive, LockGuard};
use crate::store::retention::{needed, Kind, Policy, Report, Rule, Sweep, WITHIN_AGE};

const DAY_MS: i64 = 24 * 3600 * 1000;

struct Workspace {
    _dir: tempfile::TempDir,
    layout: Layout,
    clock: Arc<ManualClock>,
}

fn workspace() -> Workspace {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    std::fs::create_dir_all(layout.state_dir()).unwrap();
    Workspace {
        _dir: dir,
        layout,
        clock: Arc::new(ManualClock::at_spec_epoch()),
    }
}

impl Workspace {
    /// A run that records `n` events, a day apart from the run before it.
    fn run(&self, n: usize) -> Vec<u64> {
        let log = EventLog::open(
            &self.layout,
            self.clock.clone(),
            "run".into(),
            Redactor::default(),
        )
        .unwrap();
        let seqs = (0..n)
            .map(|i| {
                let mut fields = Map::new();
                fields.insert(
                    "text".into(),
                    format!("step {i} {}", "x".repeat(i % 50)).into(),
                );
                log.record("lead", "assistant_text", fields).seq
            })
            .collect();
        self.clock.advance_millis(DAY_MS);
        seqs
    }

    fn lock(&self) -> LockGuard {
        lock_exclusive(&self.layout.run_lock()).unwrap()
    }

    fn roll(&self, segment_bytes: usize) -> Vec<SegmentInfo> {
        roll_bounded(&self.layout, &self.lock(), segment_bytes).unwrap()
    }

    fn open_text(&self) -> String {
        std::fs::read_to_string(self.layout.events_log()).unwrap_or_default()
    }

    fn stream(&self) -> FileEvents {
        FileEvents::new(&self.layout)
    }

    /// Every event as a reader of the whole stream returns it: (seq, line).
    async fn read_all(&self) -> Vec<(u64, String)> {
        let mut reader = self.stream().reader(0).await.unwrap();
        drain(&mut reader).await
    }

    /// Every file under `.troupe/` with its bytes.
    fn tree(&self) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![self.layout.state_dir()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    out.insert(path.display().to_string(), std::fs::read(&path).unwrap());
                }
            }
        }
        out
    }
}

async fn drain(
    reader: &mut Box<dyn crate::store::events::stream::EventReader>,
) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    loop {
        let batch = reader.next_batch(300).await.unwrap();
        if batch.is_empty() {
            return out;
        }
        out.extend(batch.into_iter().map(|e| (e.seq, e.to_line())));
    }
}

fn seqs(events: &[(u64, String)]) -> Vec<u64> {
    events.iter().map(|(s, _)| *s).collect()
}

fn sweep(ws: &Workspace, age_days: u64, dry_run: bool) -> Sweep {
    let mut policy = Policy::default();
    policy.set(
        Kind::Events,
        Rule {
            age: Some(Duration::from_secs(age_days * 24 * 3600)),
            size: None,
        },
    );
    Sweep {
        policy,
        now: ws.clock.now(),
        dry_run,
    }
}

#[test]
fn names_hold_first_and_last_in_twenty_digits_and_other_names_are_not_segments() {
    let name = SegmentInfo::name(1, 42);
    assert_eq!(name, "00000000000000000001-00000000000000000042.jsonl.gz");
    assert_eq!(SegmentInfo::parse_name(&name), Some((1, 42)));
    for other in [
        "last-seq",
        "1-42.jsonl.gz",
        "00000000000000000042-00000000000000000001.jsonl.gz",
        "00000000000000000000-00000000000000000001.jsonl.gz",
        ".00000000000000000001-00000000000000000042.jsonl.gz.tmp-1-0",
        "00000000000000000001-00000000000000000042.jsonl",
    ] {
        assert_eq!(SegmentInfo::parse_name(other), None, "{other}");
    }
}

#[tokio::test]
async fn a_roll_closes_the_open_segment_and_seq_continues_after_it() {
    let ws = workspace();
    ws.run(30);
    let before = ws.read_all().await;
    let made = ws.roll(usize::MAX);
    assert_eq!(
        made.iter().map(|s| (s.first, s.last)).collect::<Vec<_>>(),
        [(1, 30)]
    );
    assert_eq!(ws.open_text(), "", "the open segment is emptied");
    assert_eq!(ws.read_all().await, before, "the same events, once each");
    assert_eq!(ws.stream().last().await.unwrap(), 30);
    let at = UtcTime::from_unix_millis(ws.clock.now().unix_millis() - DAY_MS).unwrap();
    assert_eq!(
        last_at(&made[0]).unwrap(),
        Some(at),
        "the header holds the last event's time"
    );
    ws.run(5);
    assert_eq!(seqs(&ws.read_all().await), (1..=35).collect::<Vec<_>>());
    assert!(ws.roll(usize::MAX).len() == 1);
    assert!(ws.roll(usize::MAX).is_empty(), "nothing left to close");
    assert_eq!(seqs(&ws.read_all().await), (1..=35).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_long_open_segment_is_closed_as_several_and_a_torn_tail_is_cut() {
    let ws = workspace();
    ws.run(100);
    let mut text = ws.open_text();
    text.push_str(r#"{"seq":101,"at":"#);
    std::fs::write(ws.layout.events_log(), text).unwrap();
    let made = ws.roll(2000);
    assert!(made.len() > 3, "{made:?}");
    assert_eq!(made.first().map(|s| s.first), Some(1));
    assert_eq!(made.last().map(|s| s.last), Some(100));
    for pair in made.windows(2) {
        assert_eq!(pair[0].last + 1, pair[1].first, "{made:?}");
    }
    assert_eq!(ws.open_text(), "");
    assert_eq!(seqs(&ws.read_all().await), (1..=100).collect::<Vec<_>>());
    assert_eq!(ws.run(1), [101]);
}

#[tokio::test]
async fn reads_by_position_cross_from_closed_segments_into_the_open_one() {
    let ws = workspace();
    ws.run(40);
    ws.roll(1500);
    ws.run(25);
    let all = ws.read_all().await;
    assert_eq!(seqs(&all), (1..=65).collect::<Vec<_>>());
    let stream = ws.stream();
    let lines = |events: Vec<troupe_wire::Event>| {
        events
            .into_iter()
            .map(|e| (e.seq, e.to_line()))
            .collect::<Vec<_>>()
    };
    for (after, limit) in [(0, 10), (5, 50), (38, 5), (39, 100), (64, 10), (65, 3)] {
        let want: Vec<_> = all
            .iter()
            .filter(|(s, _)| *s > after)
            .take(limit)
            .cloned()
            .collect();
        assert_eq!(
            lines(stream.after(after, limit).await.unwrap()),
            want,
            "after {after}"
        );
    }
    for (before, limit) in [(u64::MAX, 30), (41, 3), (40, 100), (12, 5), (1, 5)] {
        let older: Vec<_> = all.iter().filter(|(s, _)| *s < before).cloned().collect();
        let want = older[older.len().saturating_sub(limit)..].to_vec();
        assert_eq!(
            lines(stream.before(before, limit).await.unwrap()),
            want,
            "before {before}"
        );
    }
    let mut reader = stream.reader(50).await.unwrap();
    assert_eq!(
        seqs(&drain(&mut reader).await),
        (51..=65).collect::<Vec<_>>()
    );
    let mut reader = stream.reader(20).await.unwrap();
    assert_eq!(
        seqs(&drain(&mut reader).await),
        (21..=65).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_reader_goes_on_across_a_roll_without_losing_or_repeating() {
    let ws = workspace();
    ws.run(20);
    let stream = ws.stream();
    // The index is open (a server's reader starts at its offset).
    assert_eq!(stream.after(0, 1).await.unwrap().len(), 1);
    let mut reader = stream.reader(0).await.unwrap();
    let mut seen: Vec<u64> = reader
        .next_batch(1)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    ws.run(10);
    ws.roll(700);
    ws.run(5);
    seen.extend(seqs(&drain(&mut reader).await));
    ws.roll(usize::MAX);
    ws.run(3);
    seen.extend(seqs(&drain(&mut reader).await));
    assert_eq!(seen, (1..=38).collect::<Vec<_>>());
}

/// A roll killed between two of its steps loses no event and shows none twice, and the next
/// roll finishes it.
#[tokio::test]
async fn a_roll_killed_between_any_two_steps_is_finished_by_the_next() {
    // Killed after placing its segment, before emptying the open one (and the index).
    let ws = workspace();
    ws.run(12);
    let stream = ws.stream();
    assert_eq!(stream.after(0, 100).await.unwrap().len(), 12, "index built");
    let open = ws.open_text();
    let index = std::fs::read(ws.layout.events_index()).unwrap();
    ws.roll(usize::MAX);
    std::fs::write(ws.layout.events_log(), &open).unwrap();
    std::fs::write(ws.layout.events_index(), &index).unwrap();
    assert_eq!(seqs(&ws.read_all().await), (1..=12).collect::<Vec<_>>());
    let before: Vec<u64> = stream
        .before(u64::MAX, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(before, (1..=12).collect::<Vec<_>>());
    assert_eq!(ws.stream().last().await.unwrap(), 12);
    assert_eq!(
        ws.run(3),
        [13, 14, 15],
        "a run continues after the closed lines"
    );
    assert_eq!(seqs(&ws.read_all().await), (1..=15).collect::<Vec<_>>());
    let made = ws.roll(usize::MAX);
    assert_eq!(
        made.iter().map(|s| (s.first, s.last)).collect::<Vec<_>>(),
        [(13, 15)]
    );
    assert_eq!(ws.open_text(), "");
    assert_eq!(seqs(&ws.read_all().await), (1..=15).collect::<Vec<_>>());

    // Killed while writing its segment: a temp file, ignored, then removed.
    let temp = ws
        .layout
        .events_segments_dir()
        .join(".00000000000000000016-00000000000000000020.jsonl.gz.tmp-1-0");
    std::fs::write(&temp, b"half").unwrap();
    ws.run(5);
    assert_eq!(seqs(&ws.read_all().await), (1..=20).collect::<Vec<_>>());
    ws.roll(usize::MAX);
    assert!(!temp.exists(), "the next roll removes it");

    // Killed after emptying the open segment, before emptying the index: rebuilt.
    ws.run(4);
    let stream = ws.stream();
    assert_eq!(stream.after(20, 100).await.unwrap().len(), 4);
    let index = std::fs::read(ws.layout.events_index()).unwrap();
    ws.roll(usize::MAX);
    std::fs::write(ws.layout.events_index(), &index).unwrap();
    ws.run(2);
    let after: Vec<u64> = ws
        .stream()
        .after(18, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(after, (19..=26).collect::<Vec<_>>());
    assert_eq!(seqs(&ws.read_all().await), (1..=26).collect::<Vec<_>>());
}

#[test]
fn a_roll_needs_this_workspaces_run_lock() {
    let ws = workspace();
    ws.run(3);
    let other = workspace();
    let err = roll(&ws.layout, &other.lock()).unwrap_err();
    assert!(err.to_string().contains("run lock"), "{err}");
    assert!(!ws.layout.events_segments_dir().exists());
}

#[test]
fn a_range_of_a_segment_is_read_from_memory_the_second_time() {
    let ws = workspace();
    ws.run(50);
    let made = ws.roll(usize::MAX);
    let mut cache = SegmentCache::default();
    let first = cache.range(&made[0], 10, 20, Keep::First(3)).unwrap();
    assert_eq!(
        first.iter().map(|l| l.seq).collect::<Vec<_>>(),
        [10, 11, 12]
    );
    std::fs::remove_file(&made[0].path).unwrap();
    let last = cache.range(&made[0], 10, 20, Keep::Last(3)).unwrap();
    assert_eq!(last.iter().map(|l| l.seq).collect::<Vec<_>>(), [17, 18, 19]);
    let mut fresh = SegmentCache::default();
    assert!(
        fresh
            .range(&made[0], 0, 100, Keep::First(5))
            .unwrap()
            .is_empty(),
        "gone: none"
    );
}

#[tokio::test]
async fn a_corrupt_segment_is_an_error_naming_it() {
    let ws = workspace();
    ws.run(5);
    let made = ws.roll(usize::MAX);
    std::fs::write(&made[0].path, b"not gzip").unwrap();
    let mut reader = ws.stream().reader(0).await.unwrap();
    let err = reader.next_batch(1000).await.unwrap_err();
    assert!(err.to_string().contains(&SegmentInfo::name(1, 5)), "{err}");
}

#[test]
fn prune_rolls_then_drops_whole_segments_past_the_age_and_seq_survives() {
    let ws = workspace();
    ws.run(10); // day 0
    {
        let lock = ws.lock();
        roll(&ws.layout, &lock).unwrap();
    }
    ws.run(10); // day 1
    ws.clock.advance_millis(5 * DAY_MS); // now: day 7
    let mut report = Report::new(false);
    let lock = ws.lock();
    prune(&ws.layout, Some(&lock), &sweep(&ws, 6, false), &mut report).unwrap();
    let events = &report.kinds[&Kind::Events];
    assert_eq!(events.removed.items, 1, "{report:?}");
    assert_eq!(events.kept[WITHIN_AGE].items, 1, "{report:?}");
    let left = closed(&ws.layout).unwrap();
    assert_eq!(
        left.segments
            .iter()
            .map(|s| (s.first, s.last))
            .collect::<Vec<_>>(),
        [(11, 20)]
    );
    // Everything past the age: the newest segment goes too, and seq goes on after it.
    let mut report = Report::new(false);
    prune(&ws.layout, Some(&lock), &sweep(&ws, 1, false), &mut report).unwrap();
    drop(lock);
    assert_eq!(report.kinds[&Kind::Events].removed.items, 1, "{report:?}");
    assert!(closed(&ws.layout).unwrap().segments.is_empty());
    assert_eq!(closed_through(&ws.layout).unwrap(), 20);
    assert_eq!(ws.run(2), [21, 22]);
}

#[test]
fn prune_beside_a_live_run_keeps_the_open_segment_and_does_not_roll() {
    let ws = workspace();
    ws.run(10);
    ws.clock.advance_millis(100 * DAY_MS);
    let open = ws.open_text();
    let mut report = Report::new(false);
    prune(&ws.layout, None, &sweep(&ws, 1, false), &mut report).unwrap();
    assert_eq!(ws.open_text(), open);
    let events = &report.kinds[&Kind::Events];
    assert_eq!(events.removed.items, 0);
    assert_eq!(events.kept[needed::OPEN_SEGMENT].bytes, open.len() as u64);
}

#[test]
fn a_dry_run_changes_nothing_on_disk_and_says_what_would_go() {
    let ws = workspace();
    ws.run(10);
    {
        let lock = ws.lock();
        roll(&ws.layout, &lock).unwrap();
    }
    ws.run(10);
    ws.clock.advance_millis(100 * DAY_MS);
    let before = ws.tree();
    let mut report = Report::new(true);
    let lock = ws.lock();
    prune(&ws.layout, Some(&lock), &sweep(&ws, 1, true), &mut report).unwrap();
    assert_eq!(ws.tree(), before);
    assert_eq!(report.kinds[&Kind::Events].removed.items, 2, "{report:?}");
    let mut report = Report::new(false);
    prune(&ws.layout, Some(&lock), &sweep(&ws, 1, false), &mut report).unwrap();
    assert_eq!(report.kinds[&Kind::Events].removed.items, 2, "{report:?}");
    assert_eq!(events_read::last_seq(&ws.layout.events_log()).unwrap(), 0);
}

/// gc removes segments oldest first after recording the last `seq`: killed between two
/// removals, the stream left reads whole from where it starts, and the next gc finishes.
#[tokio::test]
async fn a_gc_killed_between_two_removals_leaves_a_readable_stream() {
    let ws = workspace();
    for _ in 0..3 {
        ws.run(4);
        ws.roll(usize::MAX);
    }
    ws.clock.advance_millis(100 * DAY_MS);
    // What a gc killed after its first removal leaves.
    write_last_seq(&ws.layout, 12).unwrap();
    let oldest = closed(&ws.layout).unwrap().segments.remove(0);
    durable::remove(&oldest.path).unwrap();
    assert_eq!(seqs(&ws.read_all().await), (5..=12).collect::<Vec<_>>());
    let mut report = Report::new(false);
    prune(&ws.layout, None, &sweep(&ws, 1, false), &mut report).unwrap();
    assert_eq!(report.kinds[&Kind::Events].removed.items, 2, "{report:?}");
    assert!(ws.read_all().await.is_empty());
    assert_eq!(ws.stream().last().await.unwrap(), 12);
    assert_eq!(ws.run(1), [13]);
    assert_eq!(seqs(&ws.read_all().await), [13]);
}
