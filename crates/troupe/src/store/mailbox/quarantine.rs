//! Quarantine: moving a file into `quarantine/` without ever overwriting or deleting anything,
//! and the journal `<agent>/quarantine.jsonl` that records why, one JSON object per line:
//! `{"file_name","from","reason","at"}`.
//!
//! The journal is a `store::journal` log: a line is appended under a lock on the file, after
//! cutting a torn last line a crash may have left, and fsynced. Lines are kept under 4 KiB (the
//! reason is truncated). Reading it refuses anything but a regular file, without blocking; a
//! line that does not parse strictly (a duplicate key included) is skipped.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;

use serde_json::json;
use troupe_wire::strict::parse_json_bytes;

use super::QuarantineRecord;
use crate::store::durable::fsync_dir;
use crate::store::moves::rename_noreplace;
use crate::store::{journal, IoError};

/// The journal's file name inside the agent's mailbox folder.
pub(super) const JOURNAL_FILE: &str = "quarantine.jsonl";

/// A journal line, newline included, stays strictly below this.
pub(super) const MAX_LINE_BYTES: usize = 4096;

/// Collision suffixes tried before giving up (a folder with this many copies of one name is
/// broken beyond what quarantine can help).
const MAX_SUFFIX: u32 = 100_000;

/// Moves `from_dir/name` into `quarantine_dir` as `name`, or `name.1`, `name.2`, … when taken,
/// and fsyncs both folders. `None` when the source is gone (someone else moved it first).
pub(super) fn move_into(
    from_dir: &Path,
    name: &OsStr,
    quarantine_dir: &Path,
) -> io::Result<Option<OsString>> {
    let source = from_dir.join(name);
    for n in 0..=MAX_SUFFIX {
        let mut candidate = name.to_os_string();
        if n > 0 {
            candidate.push(format!(".{n}"));
        }
        match rename_noreplace(&source, &quarantine_dir.join(&candidate)) {
            Ok(()) => {
                fsync_dir(quarantine_dir).map_err(|e| e.source)?;
                fsync_dir(from_dir).map_err(|e| e.source)?;
                return Ok(Some(candidate));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "more than {MAX_SUFFIX} quarantined files named {}",
        name.to_string_lossy()
    )))
}

/// The journal line of `record`, newline included, with the reason cut to fit
/// [`MAX_LINE_BYTES`].
pub(super) fn journal_line(record: &QuarantineRecord) -> String {
    let line_with = |reason: &str| {
        json!({
            "file_name": record.file_name,
            "from": record.from.as_str(),
            "reason": reason,
            "at": record.at.to_string(),
        })
        .to_string()
    };
    // The longest line without its newline that keeps line + newline below the limit.
    let max_line = MAX_LINE_BYTES - 2;
    let full = line_with(&record.reason);
    if full.len() <= max_line {
        return full + "\n";
    }
    // Escapes make the JSON longer than the text, so each character is measured escaped.
    let escaped_len = |c: char| serde_json::to_string(&c.to_string()).map_or(12, |s| s.len() - 2);
    let budget = max_line.saturating_sub(line_with("").len());
    let mut used = escaped_len('…');
    let mut cut = String::new();
    for c in record.reason.chars() {
        used += escaped_len(c);
        if used > budget {
            break;
        }
        cut.push(c);
    }
    cut.push('…');
    line_with(&cut) + "\n"
}

/// Appends `record` to the journal at `path` and fsyncs it (creating the journal, and fsyncing
/// its folder, if needed).
pub(super) fn append_record(path: &Path, record: &QuarantineRecord) -> Result<(), IoError> {
    journal::append(path, journal_line(record).as_bytes())
}

/// The last recorded reason of each quarantined file name. A torn last line is left out; other
/// lines that do not parse are skipped.
pub(super) fn read_reasons(path: &Path) -> Result<HashMap<String, String>, IoError> {
    let Some(bytes) = journal::read_complete(path)? else {
        return Ok(HashMap::new());
    };
    let mut reasons = HashMap::new();
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(value) = parse_json_bytes(line, "") else {
            continue;
        };
        if let (Some(name), Some(reason)) = (value["file_name"].as_str(), value["reason"].as_str())
        {
            reasons.insert(name.to_owned(), reason.to_owned());
        }
    }
    Ok(reasons)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::mailbox::MailboxState;
    use serde_json::Value;
    use std::fs;
    use std::io::Write;
    use troupe_wire::UtcTime;

    fn record(reason: &str) -> QuarantineRecord {
        QuarantineRecord {
            file_name: "x.json".to_owned(),
            from: MailboxState::Ready,
            reason: reason.to_owned(),
            at: UtcTime::from_unix_millis(0).unwrap(),
        }
    }

    #[test]
    fn long_reasons_are_truncated_below_4k() {
        for reason in ["é".repeat(5000), "\u{1}".repeat(5000), "a".repeat(4090)] {
            let line = journal_line(&record(&reason));
            assert!(line.len() < MAX_LINE_BYTES, "{}", line.len());
            let value: Value = serde_json::from_str(line.trim_end()).unwrap();
            assert!(value["reason"].as_str().unwrap().ends_with('…'));
        }
        let short = journal_line(&record("bad json"));
        assert_eq!(
            short,
            "{\"file_name\":\"x.json\",\"from\":\"ready\",\"reason\":\"bad json\",\"at\":\"1970-01-01T00:00:00.000Z\"}\n"
        );
    }

    #[test]
    fn collisions_get_suffixes_and_nothing_is_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let (from, quarantine) = (dir.path().join("from"), dir.path().join("q"));
        fs::create_dir(&from).unwrap();
        fs::create_dir(&quarantine).unwrap();
        let mut names = Vec::new();
        for content in ["one", "two", "three"] {
            fs::write(from.join("m.json"), content).unwrap();
            names.push(move_into(&from, OsStr::new("m.json"), &quarantine).unwrap());
        }
        assert_eq!(
            names,
            vec![
                Some("m.json".into()),
                Some("m.json.1".into()),
                Some("m.json.2".into())
            ]
        );
        assert_eq!(fs::read(quarantine.join("m.json")).unwrap(), b"one");
        assert_eq!(fs::read(quarantine.join("m.json.2")).unwrap(), b"three");
        assert_eq!(
            move_into(&from, OsStr::new("m.json"), &quarantine).unwrap(),
            None
        );
    }

    #[test]
    fn the_last_reason_per_file_wins_and_torn_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join(JOURNAL_FILE);
        append_record(&journal, &record("first")).unwrap();
        append_record(&journal, &record("second")).unwrap();
        fs::OpenOptions::new()
            .append(true)
            .open(&journal)
            .unwrap()
            .write_all(b"{\"file_name\":\"x.js")
            .unwrap();
        let reasons = read_reasons(&journal).unwrap();
        assert_eq!(reasons.get("x.json").map(String::as_str), Some("second"));
    }
}
