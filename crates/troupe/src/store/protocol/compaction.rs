//! Which requests leave `state.json` for the archive, and when.
//!
//! A request is *archivable* when it is resolved, is not its sender's latest plan (the plan gate
//! reads that from `state.json`), and no request that stays in `state.json` before it in the
//! array has the same `created_at_utc`. The last rule is what lets `list` rebuild the exact
//! creation order from the two files: merging them by `created_at_utc`, archive lines first on
//! ties, is then the array order (a request archived later, or one that stayed, can share a
//! creation time only with requests created *after* it — see `merged_in_creation_order`).
//!
//! Compaction runs when more than [`COMPACT_ABOVE`] requests are archivable, so its cost (an
//! fsynced append) is spread over that many transitions and `state.json` stays small.

use std::collections::{HashMap, HashSet};

use troupe_wire::{AgentName, ProtocolRequest, RequestId, RequestKind, UtcTime};

/// Compact when more than this many requests in `state.json` are archivable.
pub const COMPACT_ABOVE: usize = 32;

/// The outcome of a compaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    /// What stays in `state.json`, in array order.
    pub(super) keep: Vec<ProtocolRequest>,
    /// The ids of every request that leaves `state.json`.
    pub(super) moved: HashSet<RequestId>,
    /// What must be appended to the archive, in array order (archivable requests that are not
    /// archived yet; a request left in both files by a crash is only dropped from the state).
    pub(super) append: Vec<ProtocolRequest>,
}

/// The index of each sender's latest plan in `requests` (array order, never time or id).
pub(super) fn latest_plans(requests: &[ProtocolRequest]) -> HashMap<&AgentName, usize> {
    let mut latest = HashMap::new();
    for (i, request) in requests.iter().enumerate() {
        if request.kind() == RequestKind::PlanApproval {
            latest.insert(request.sender(), i);
        }
    }
    latest
}

/// Plans a compaction of `requests`, or `None` while at most `threshold` are archivable.
///
/// The store plans on `state.json` as it is on disk, *before* the write in progress: a request
/// resolved by that write is archived by a later compaction, so the archive never holds a copy
/// that `state.json` does not hold yet (if the state replace failed, the copies would differ).
pub(super) fn plan(
    requests: &[ProtocolRequest],
    threshold: usize,
    is_archived: impl Fn(RequestId) -> bool,
) -> Option<Plan> {
    let latest = latest_plans(requests);
    let mut latest_kept: Option<UtcTime> = None;
    let mut archivable = vec![false; requests.len()];
    let mut count = 0;
    for (i, request) in requests.iter().enumerate() {
        let is_latest_plan = latest.get(request.sender()) == Some(&i);
        let ties_a_kept_one = latest_kept.is_some_and(|t| t >= request.created_at_utc());
        if !request.is_pending() && !is_latest_plan && !ties_a_kept_one {
            archivable[i] = true;
            count += 1;
        } else {
            latest_kept = Some(request.created_at_utc());
        }
    }
    if count <= threshold {
        return None;
    }
    let mut keep = Vec::with_capacity(requests.len() - count);
    let mut append = Vec::with_capacity(count);
    let mut moved = HashSet::with_capacity(count);
    for (request, moves) in requests.iter().zip(archivable) {
        if !moves {
            keep.push(request.clone());
            continue;
        }
        moved.insert(request.id());
        if !is_archived(request.id()) {
            append.push(request.clone());
        }
    }
    Some(Plan {
        keep,
        moved,
        append,
    })
}

/// Every request, in creation order: archived ones in line order (a copy also in `state` is
/// skipped: the state wins) and then the state's, stably sorted by creation time. Archive lines come first on equal
/// times, which is their true order by the archivability rule above.
pub(super) fn merged_in_creation_order(
    archived: Vec<ProtocolRequest>,
    state: &[ProtocolRequest],
    in_state: impl Fn(RequestId) -> bool,
) -> Vec<ProtocolRequest> {
    let mut all = archived;
    all.retain(|r| !in_state(r.id()));
    all.extend(state.iter().cloned());
    all.sort_by_key(|r| r.created_at_utc());
    all
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;
    use troupe_wire::{Content, MessageId, Resolution};

    fn at(ms: i64) -> UtcTime {
        UtcTime::from_unix_millis(1_785_398_400_000 + ms).unwrap()
    }

    fn req(
        n: u32,
        kind: RequestKind,
        sender: &str,
        created: i64,
        resolved: bool,
    ) -> ProtocolRequest {
        let target = if sender == "lead" { "alice" } else { "lead" };
        let pending = ProtocolRequest::new_pending(
            RequestId::parse(&format!("00000000-0000-4000-8000-{n:012x}")).unwrap(),
            kind,
            AgentName::parse(sender).unwrap(),
            AgentName::parse(target).unwrap(),
            Content::parse("c").unwrap(),
            at(created),
            at(created + 300_000),
        )
        .unwrap();
        if !resolved {
            return pending;
        }
        pending
            .resolved(Resolution {
                message_id: MessageId::parse(&format!("00000000-0000-4000-9000-{n:012x}")).unwrap(),
                approved: true,
                content: Content::parse("ok").unwrap(),
                resolved_at_utc: at(created),
            })
            .unwrap()
    }

    fn ids(requests: &[ProtocolRequest]) -> Vec<u128> {
        requests
            .iter()
            .map(|r| r.id().as_uuid().as_u128() & 0xffff)
            .collect()
    }

    #[test]
    fn waits_for_more_than_the_threshold() {
        let requests: Vec<_> = (1..=3)
            .map(|n| req(n, RequestKind::Shutdown, "lead", i64::from(n), true))
            .collect();
        assert_eq!(plan(&requests, 3, |_| false), None);
        assert!(plan(&requests, 2, |_| false).is_some());
    }

    #[test]
    fn keeps_pending_and_latest_plans() {
        let requests = vec![
            req(1, RequestKind::PlanApproval, "alice", 1, true),
            req(2, RequestKind::Shutdown, "lead", 2, false),
            req(3, RequestKind::PlanApproval, "alice", 3, true),
            req(4, RequestKind::PlanApproval, "bob", 4, true),
            req(5, RequestKind::Shutdown, "lead", 5, true),
        ];
        let plan = plan(&requests, 0, |_| false).unwrap();
        assert_eq!(ids(&plan.keep), vec![2, 3, 4]);
        assert_eq!(ids(&plan.append), vec![1, 5]);
    }

    #[test]
    fn a_kept_request_holds_back_later_ones_created_in_the_same_millisecond() {
        let requests = vec![
            req(1, RequestKind::Shutdown, "lead", 7, false),
            req(2, RequestKind::Shutdown, "lead", 7, true),
            req(3, RequestKind::Shutdown, "lead", 8, true),
        ];
        let plan = plan(&requests, 0, |_| false).unwrap();
        assert_eq!(ids(&plan.keep), vec![1, 2]);
        assert_eq!(ids(&plan.append), vec![3]);
        // And the merge gives back the array order.
        let merged = merged_in_creation_order(plan.append.clone(), &plan.keep, |id| {
            plan.keep.iter().any(|r| r.id() == id)
        });
        assert_eq!(ids(&merged), vec![1, 2, 3]);
    }

    #[test]
    fn already_archived_copies_are_dropped_not_appended_again() {
        let requests = vec![
            req(1, RequestKind::Shutdown, "lead", 1, true),
            req(2, RequestKind::Shutdown, "lead", 2, true),
        ];
        let first = requests[0].id();
        let plan = plan(&requests, 0, |id| id == first).unwrap();
        assert_eq!(ids(&plan.keep), Vec::<u128>::new());
        assert_eq!(ids(&plan.append), vec![2]);
    }

    #[test]
    fn merge_prefers_the_state_copy_and_orders_archive_first_on_ties() {
        let a = req(1, RequestKind::Shutdown, "lead", 5, true);
        let b = req(2, RequestKind::Shutdown, "lead", 5, true);
        let c = req(3, RequestKind::Shutdown, "lead", 3, true);
        // Archive lines out of time order (a later batch archived an older request).
        let archived = vec![a.clone(), c.clone(), b.clone()];
        let state = vec![b.clone(), req(4, RequestKind::Shutdown, "lead", 5, false)];
        let merged = merged_in_creation_order(archived, &state, |id| id == b.id());
        assert_eq!(ids(&merged), vec![3, 1, 2, 4]);
    }
}
