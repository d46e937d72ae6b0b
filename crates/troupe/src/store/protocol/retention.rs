//! `troupe gc` of the protocol store's files (issue 45): resolved requests in `archive.jsonl`
//! past their retention ([`Kind::Requests`]), and their answer records.
//!
//! Under the protocol lock every operation holds, the archive is rewritten without them in one
//! atomic replace (a new file: every process's index notices the new inode and reads it again,
//! see `archive`), then their `answers/<id>.json` go. Pending requests and every request still
//! in `state.json` are never touched: only archived ones (resolved, and not their sender's
//! latest plan) can go. A gc killed between the two steps leaves answers whose request is gone;
//! the next gc removes them (an answer of a request in neither file, past the cutoff).

use std::collections::HashSet;
use std::ffi::OsString;

use troupe_wire::strict::parse_json_bytes;
use troupe_wire::ProtocolRequest;

use crate::layout::Layout;
use crate::store::lock::lock_exclusive;
use crate::store::read::{read_regular, Links};
use crate::store::retention::listing::listing;
use crate::store::retention::{decide, Candidate, Kind, Report, Sweep};
use crate::store::{durable, journal, IoError};

/// Why an archive that does not read is left alone.
const UNREADABLE: &str = "the archive does not read (gc leaves it as it is)";

/// Prunes the archive and the answers of `layout`'s protocol store.
pub fn prune(layout: &Layout, sweep: &Sweep, report: &mut Report) -> Result<(), IoError> {
    let archive = layout.protocol_archive();
    if !layout.protocol_dir().is_dir() {
        return Ok(());
    }
    let _lock = lock_exclusive(&layout.protocol_lock())?;
    let mut lines: Vec<(String, Vec<u8>)> = Vec::new();
    let mut candidates = Vec::new();
    let mut unreadable = false;
    journal::for_each_line(&archive, |_, bytes| {
        match parse_json_bytes(bytes, "").and_then(ProtocolRequest::from_value) {
            Ok(request) if !request.is_pending() => {
                let id = request.id().to_string();
                candidates.push(Candidate {
                    item: id.clone(),
                    at: request.created_at_utc(),
                    bytes: bytes.len() as u64 + 1,
                    needed: None,
                });
                lines.push((id, bytes.to_vec()));
            }
            _ => unreadable = true,
        }
        Ok(())
    })?;
    if unreadable {
        let size = std::fs::metadata(&archive).map_or(0, |m| m.len());
        report.kept(Kind::Requests, UNREADABLE, size);
        return Ok(());
    }
    let gone: Vec<(String, u64)> = decide(Kind::Requests, sweep, candidates, report);
    let gone_ids: HashSet<&str> = gone.iter().map(|(id, _)| id.as_str()).collect();
    if !gone.is_empty() && !sweep.dry_run {
        let mut kept = Vec::new();
        for (id, line) in &lines {
            if !gone_ids.contains(id.as_str()) {
                kept.extend_from_slice(line);
                kept.push(b'\n');
            }
        }
        durable::replace(&archive, &kept)?;
    }
    for (_, bytes) in &gone {
        report.removed(Kind::Requests, *bytes);
    }
    prune_answers(layout, sweep, &lines, &gone_ids)
}

/// Removes the answers of the requests just pruned, and those a killed gc left behind.
fn prune_answers(
    layout: &Layout,
    sweep: &Sweep,
    archived: &[(String, Vec<u8>)],
    gone: &HashSet<&str>,
) -> Result<(), IoError> {
    let dir = layout.protocol_answers_dir();
    let state =
        read_regular(&layout.protocol_state(), Links::Refuse, u64::MAX)?.unwrap_or_default();
    let state = String::from_utf8_lossy(&state);
    let still_archived: HashSet<&str> = archived
        .iter()
        .map(|(id, _)| id.as_str())
        .filter(|id| !gone.contains(id))
        .collect();
    let cutoff = sweep.cutoff(Kind::Requests);
    let mut doomed: Vec<OsString> = Vec::new();
    for file in listing(&dir)? {
        let Some(id) = file.name.to_str().and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        let orphan = !still_archived.contains(id)
            && !state.contains(id)
            && cutoff.is_some_and(|cut| file.modified < cut);
        if gone.contains(id) || orphan {
            doomed.push(file.name.clone());
        }
    }
    if !sweep.dry_run {
        durable::remove_in(&dir, &doomed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use troupe_wire::{AgentName, Content, MessageId, RequestId, RequestKind, Resolution, UtcTime};

    use super::*;
    use crate::clock::ManualClock;
    use crate::ids::SequentialIds;
    use crate::store::protocol::{JsonProtocolStore, ProtocolStore};
    use crate::store::retention::{Policy, Rule, WITHIN_AGE};

    const DAY_MS: i64 = 86_400_000;

    fn at_day(day: i64) -> UtcTime {
        UtcTime::from_unix_millis(1_785_398_400_000 + day * DAY_MS).unwrap()
    }

    fn id(n: u32) -> RequestId {
        RequestId::parse(&format!("00000000-0000-4000-8000-{n:012x}")).unwrap()
    }

    fn resolved(n: u32, day: i64) -> ProtocolRequest {
        ProtocolRequest::new_pending(
            id(n),
            RequestKind::Shutdown,
            AgentName::parse("lead").unwrap(),
            AgentName::parse("alice").unwrap(),
            Content::parse("stop").unwrap(),
            at_day(day),
            at_day(day + 1),
        )
        .unwrap()
        .resolved(Resolution {
            message_id: MessageId::parse(&format!("00000000-0000-4000-9000-{n:012x}")).unwrap(),
            approved: true,
            content: Content::parse("ok").unwrap(),
            resolved_at_utc: at_day(day),
        })
        .unwrap()
    }

    fn sweep(now_day: i64, dry_run: bool) -> Sweep {
        let mut policy = Policy::default();
        policy.set(
            Kind::Requests,
            Rule {
                age: Some(Duration::from_secs(30 * 86_400)),
                size: None,
            },
        );
        Sweep {
            policy,
            now: at_day(now_day),
            dry_run,
        }
    }

    #[tokio::test]
    async fn old_archived_requests_and_their_answers_go_and_a_running_store_sees_it() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        std::fs::create_dir_all(layout.protocol_answers_dir()).unwrap();
        let mut archive = Vec::new();
        for n in 0..10u32 {
            serde_json::to_writer(&mut archive, &resolved(n, i64::from(n) * 10)).unwrap();
            archive.push(b'\n');
            std::fs::write(
                layout
                    .protocol_answers_dir()
                    .join(format!("{}.json", id(n))),
                b"{}",
            )
            .unwrap();
        }
        std::fs::write(layout.protocol_archive(), &archive).unwrap();
        let clock = Arc::new(ManualClock::new(at_day(100)));
        let store =
            JsonProtocolStore::open(&layout, clock, Arc::new(SequentialIds::new())).unwrap();
        assert_eq!(store.list().await.unwrap().len(), 10);

        // Day 100, 30 days kept: requests of days 0..=60 go (70 is exactly at the cutoff).
        let mut dry = Report::new(true);
        prune(&layout, &sweep(100, true), &mut dry).unwrap();
        assert_eq!(std::fs::read(layout.protocol_archive()).unwrap(), archive);
        let mut report = Report::new(false);
        prune(&layout, &sweep(100, false), &mut report).unwrap();
        assert_eq!(dry.kinds, report.kinds);
        assert_eq!(report.kinds[&Kind::Requests].removed.items, 7);
        assert_eq!(report.kinds[&Kind::Requests].kept[WITHIN_AGE].items, 3);

        let left: Vec<RequestId> = store.list().await.unwrap().iter().map(|r| r.id()).collect();
        assert_eq!(left, vec![id(7), id(8), id(9)]);
        assert!(store.get(id(3)).await.unwrap().is_none());
        assert_eq!(store.get(id(8)).await.unwrap(), Some(resolved(8, 80)));
        let answers = listing(&layout.protocol_answers_dir()).unwrap();
        assert_eq!(answers.len(), 3);

        // Again: nothing more to do.
        let mut again = Report::new(false);
        prune(&layout, &sweep(100, false), &mut again).unwrap();
        assert_eq!(again.removed_total().items, 0);
    }

    #[test]
    fn an_archive_that_does_not_read_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        std::fs::create_dir_all(layout.protocol_dir()).unwrap();
        let mut text = serde_json::to_vec(&resolved(1, 0)).unwrap();
        text.extend_from_slice(b"\nnot json\n");
        std::fs::write(layout.protocol_archive(), &text).unwrap();
        let mut report = Report::new(false);
        prune(&layout, &sweep(100, false), &mut report).unwrap();
        assert_eq!(std::fs::read(layout.protocol_archive()).unwrap(), text);
        assert_eq!(report.kinds[&Kind::Requests].kept[UNREADABLE].items, 1);
    }
}
