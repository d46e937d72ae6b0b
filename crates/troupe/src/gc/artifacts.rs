//! Artifacts ([`Kind::Artifacts`]): tool results and job outputs kept whole under
//! `.troupe/artifacts/<agent>/<id>.txt`. One that a current conversation (`<agent>.jsonl`, not
//! an earlier one) or a job record still refers to is kept, as is one a live run may be
//! writing; the others follow the rule.

use std::collections::HashSet;
use std::path::Path;

use troupe_wire::UtcTime;

use crate::layout::Layout;
use crate::store::journal;
use crate::store::retention::files::{is_earlier_conversation, listing, prune_folder, subfolders};
use crate::store::retention::{needed, Kind, Report, Sweep};
use crate::store::IoError;

/// Why an artifact a job record names is kept.
pub const JOB_REFERS: &str = "a job record refers to it";

pub fn prune(
    layout: &Layout,
    live_since: Option<UtcTime>,
    sweep: &Sweep,
    report: &mut Report,
) -> Result<(), IoError> {
    let mut by_conversation = HashSet::new();
    for file in listing(&layout.transcripts_dir())? {
        if !is_earlier_conversation(&file.name) {
            references_in(&file.path, &mut by_conversation)?;
        }
    }
    let mut by_job = HashSet::new();
    for file in listing(&layout.jobs_dir())? {
        references_in(&file.path, &mut by_job)?;
    }
    for dir in subfolders(&layout.artifacts_root())? {
        let agent = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let files = listing(&dir)?;
        prune_folder(&dir, Kind::Artifacts, sweep, report, files, |file| {
            let key = format!("{agent}/{}", file.name.to_string_lossy());
            if by_conversation.contains(&key) {
                Some(needed::CONVERSATION)
            } else if by_job.contains(&key) {
                Some(JOB_REFERS)
            } else if live_since.is_some_and(|since| file.modified >= since) {
                Some(needed::LIVE_RUN)
            } else {
                None
            }
        })?;
    }
    Ok(())
}

/// Adds every `<agent>/<name>.txt` that follows `artifacts/` in the file at `path` (read a line
/// at a time; a JSON string never escapes `/` in troupe's files).
fn references_in(path: &Path, found: &mut HashSet<String>) -> Result<(), IoError> {
    const MARK: &[u8] = b"artifacts/";
    journal::for_each_line(path, |_, line| {
        let mut rest = line;
        while let Some(at) = find(rest, MARK) {
            rest = &rest[at + MARK.len()..];
            let end = rest
                .iter()
                .position(|b| {
                    !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'/' | b'.'))
                })
                .unwrap_or(rest.len());
            if let Ok(text) = std::str::from_utf8(&rest[..end]) {
                if let Some(key) = text.find(".txt").map(|i| &text[..i + 4]) {
                    found.insert(key.to_owned());
                }
            }
        }
        Ok(())
    })?;
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_found_in_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lead.jsonl");
        std::fs::write(
            &path,
            "{\"content\":\"see .troupe/artifacts/lead/0190a0b2-0000-7000-8000-000000000001.txt (head)\"}\n{\"x\":\"artifacts/alice/abc.txt\\\"\"}\n{\"y\":\"no artifacts here\"}\n",
        )
        .unwrap();
        let mut found = HashSet::new();
        references_in(&path, &mut found).unwrap();
        let mut found: Vec<_> = found.into_iter().collect();
        found.sort();
        assert_eq!(
            found,
            vec![
                "alice/abc.txt".to_owned(),
                "lead/0190a0b2-0000-7000-8000-000000000001.txt".to_owned()
            ]
        );
    }
}
