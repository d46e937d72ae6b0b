use super::*;
use pretty_assertions::assert_eq;

fn line(seq: u64) -> String {
    format!(
        "{{\"seq\":{seq},\"at\":\"2026-07-30T08:00:00.000Z\",\"run_id\":\"r\",\"agent\":\"lead\",\"kind\":\"k\",\"n\":\"{}\"}}\n",
        "x".repeat((seq % 7) as usize)
    )
}

fn lines(seqs: impl IntoIterator<Item = u64>) -> String {
    seqs.into_iter().map(line).collect()
}

struct Fixture {
    _dir: tempfile::TempDir,
    events: PathBuf,
    index: PathBuf,
}

fn fixture(text: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let index = dir.path().join("events.idx");
    std::fs::write(&events, text).unwrap();
    Fixture {
        _dir: dir,
        events,
        index,
    }
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

fn seqs(index: &mut EventIndex, from: u64, to: u64) -> Vec<u64> {
    index
        .lines(from, to)
        .unwrap()
        .iter()
        .map(|l| l.seq)
        .collect()
}

#[test]
fn appended_lines_are_indexed_by_a_catch_up_and_a_torn_tail_waits() {
    let f = fixture(&lines(1..=3));
    let mut index = EventIndex::open(&f.events, &f.index).unwrap();
    assert_eq!(index.len(), 3);
    let torn = line(6);
    append(&f.events, &format!("{}{}", lines(4..=5), &torn[..12]));
    index.catch_up().unwrap();
    assert_eq!(index.len(), 5, "the torn last line is not indexed");
    assert_eq!(index.last().map(|e| e.seq), Some(5));
    append(&f.events, &torn[12..]);
    index.catch_up().unwrap();
    assert_eq!(seqs(&mut index, 0, 10), (1..=6).collect::<Vec<_>>());
    assert_eq!(
        std::fs::metadata(&f.index).unwrap().len(),
        HEADER + 6 * RECORD,
        "one record per line, after the header"
    );
    assert_eq!(index.rebuilds(), 0);
}

#[test]
fn an_index_behind_the_stream_is_caught_up_not_rebuilt() {
    let f = fixture(&lines(1..=10));
    drop(EventIndex::open(&f.events, &f.index).unwrap());
    append(&f.events, &lines(11..=20));
    let mut index = EventIndex::open(&f.events, &f.index).unwrap();
    assert_eq!(index.len(), 20);
    assert_eq!(index.rebuilds(), 0);
    assert_eq!(seqs(&mut index, 18, 20), [19, 20]);
}

#[test]
fn seek_by_seq_finds_a_line_and_its_text() {
    let f = fixture(&lines([1, 2, 5, 7, 8]));
    let mut index = EventIndex::open(&f.events, &f.index).unwrap();
    assert_eq!(index.position(1).unwrap(), 0);
    assert_eq!(index.position(5).unwrap(), 2);
    assert_eq!(
        index.position(4).unwrap(),
        2,
        "a missing seq: the next line"
    );
    assert_eq!(index.position(8).unwrap(), 4);
    assert_eq!(index.position(9).unwrap(), 5, "past the end: the length");
    let got = index.lines(2, 4).unwrap();
    assert_eq!(
        got,
        vec![
            IndexedLine {
                seq: 5,
                text: line(5).trim_end().to_owned()
            },
            IndexedLine {
                seq: 7,
                text: line(7).trim_end().to_owned()
            },
        ]
    );
    assert_eq!(
        index.entry(2).unwrap().offset,
        (line(1).len() + line(2).len()) as u64
    );
}

#[test]
fn a_torn_record_is_cut_and_the_rest_kept() {
    let f = fixture(&lines(1..=4));
    drop(EventIndex::open(&f.events, &f.index).unwrap());
    append(&f.index, "torn!!!");
    let mut index = EventIndex::open(&f.events, &f.index).unwrap();
    assert_eq!(index.rebuilds(), 0);
    assert_eq!(seqs(&mut index, 0, 4), [1, 2, 3, 4]);
    assert_eq!(
        std::fs::metadata(&f.index).unwrap().len(),
        HEADER + 4 * RECORD
    );
}

#[test]
fn a_damaged_record_is_found_on_read_and_the_index_rebuilt() {
    let record = |i: u64| usize::try_from(HEADER + i * RECORD).unwrap();
    // One byte off (no line starts there), or the start of another line (a plausible offset).
    for damage in ["one byte off", "another line's offset"] {
        let f = fixture(&lines(1..=50));
        drop(EventIndex::open(&f.events, &f.index).unwrap());
        let mut bytes = std::fs::read(&f.index).unwrap();
        let at = record(20) + 8;
        if damage == "one byte off" {
            bytes[at] = bytes[at].wrapping_add(1);
        } else {
            let next: Vec<u8> = bytes[record(21) + 8..record(21) + 16].to_vec();
            bytes[at..at + 8].copy_from_slice(&next);
        }
        std::fs::write(&f.index, &bytes).unwrap();
        let mut index = EventIndex::open(&f.events, &f.index).unwrap();
        assert_eq!(
            index.rebuilds(),
            0,
            "{damage}: first and last records are right"
        );
        assert_eq!(seqs(&mut index, 20, 22), [21, 22], "{damage}");
        assert_eq!(index.rebuilds(), 1, "{damage}: the read found the damage");
        assert_eq!(seqs(&mut index, 0, 50), (1..=50).collect::<Vec<_>>());
    }
}

#[test]
fn an_index_of_something_else_is_rebuilt_on_open() {
    for damage in ["garbage", "another stream", "ahead of the stream"] {
        let f = fixture(&lines(1..=30));
        drop(EventIndex::open(&f.events, &f.index).unwrap());
        match damage {
            "garbage" => std::fs::write(&f.index, b"not an index at all, no").unwrap(),
            "another stream" => std::fs::write(&f.events, lines(100..=140)).unwrap(),
            _ => std::fs::write(&f.events, lines(1..=10)).unwrap(),
        }
        let mut index = EventIndex::open(&f.events, &f.index).unwrap();
        assert_eq!(index.rebuilds(), 1, "{damage}");
        let expected: Vec<u64> = match damage {
            "garbage" => (1..=30).collect(),
            "another stream" => (100..=140).collect(),
            _ => (1..=10).collect(),
        };
        assert_eq!(seqs(&mut index, 0, 100), expected, "{damage}");
    }
}

#[test]
fn a_stream_replaced_under_its_name_is_indexed_anew() {
    let f = fixture(&lines(1..=5));
    let mut index = EventIndex::open(&f.events, &f.index).unwrap();
    let moved = f.events.with_extension("old");
    std::fs::rename(&f.events, &moved).unwrap();
    std::fs::write(&f.events, lines(1..=2)).unwrap();
    index.catch_up().unwrap();
    assert_eq!(seqs(&mut index, 0, 10), [1, 2]);
}

#[test]
fn no_stream_no_index_file() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let index_path = dir.path().join("events.idx");
    let index = EventIndex::open(&events, &index_path).unwrap();
    assert!(index.is_empty());
    assert!(!index_path.exists(), "nothing is created without a stream");
}

#[test]
fn a_read_only_folder_keeps_the_records_in_memory() {
    let f = fixture(&lines(1..=3));
    let folder = f.events.parent().unwrap();
    let mut perms = std::fs::metadata(folder).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o500);
    std::fs::set_permissions(folder, perms.clone()).unwrap();
    let opened = EventIndex::open(&f.events, &f.index);
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o700);
    std::fs::set_permissions(folder, perms).unwrap();
    let mut index = opened.unwrap();
    assert_eq!(seqs(&mut index, 0, 3), [1, 2, 3]);
}

#[test]
fn the_seq_is_read_from_the_start_of_a_line_or_from_the_whole_line() {
    assert_eq!(seq_of(br#"{"seq":42,"at":"x"}"#), Some(42));
    assert_eq!(
        seq_of(br#"{"at":"2026-07-30T08:00:00.000Z","seq":7,"run_id":"r","agent":"a","kind":"k"}"#),
        Some(7)
    );
    assert_eq!(seq_of(b"nonsense"), None);
    assert_eq!(seq_of(br#"{"seq":0,"x":1}"#), None);
}
