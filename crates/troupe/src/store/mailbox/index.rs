//! The in-memory index of one agent's `ready/` folder, so that claim neither lists nor parses the
//! folder on every call.
//!
//! It holds ids and creation times only, never contents. It is a cache of what this instance
//! knows: the folder on disk stays the truth, and an entry whose file has gone (another claimer
//! won) is simply dropped when claim meets it.

use std::collections::{BTreeSet, HashMap};
use std::time::SystemTime;

use troupe_wire::{MessageId, UtcTime};

/// A rescan triggered by a folder change (not by an empty index) costs a listing of the whole
/// folder; allowing one per `entries / RESCAN_SPREAD` claims keeps that cost per claim bounded
/// (about `RESCAN_SPREAD` directory entries) however large the backlog is.
const RESCAN_SPREAD: usize = 256;

#[derive(Debug, Default)]
pub(super) struct ReadyIndex {
    /// Claim order: oldest `created_at_utc` first, then id.
    order: BTreeSet<(UtcTime, MessageId)>,
    /// The same entries by id, so a rescan parses only files it does not know yet.
    by_id: HashMap<MessageId, UtcTime>,
    /// Whether the folder has been listed once by this instance.
    scanned: bool,
    /// The folder's mtime as last explained by this instance's own listing or moves. A different
    /// mtime at the next claim means another writer may have added files.
    explained_mtime: Option<SystemTime>,
    /// Claims since the last listing, and the entries that listing saw (for [`RESCAN_SPREAD`]).
    claims_since_scan: usize,
    last_scan_entries: usize,
}

impl ReadyIndex {
    pub(super) fn insert(&mut self, at: UtcTime, id: MessageId) {
        if let Some(previous) = self.by_id.insert(id, at) {
            self.order.remove(&(previous, id));
        }
        self.order.insert((at, id));
    }

    pub(super) fn remove(&mut self, id: MessageId) {
        if let Some(at) = self.by_id.remove(&id) {
            self.order.remove(&(at, id));
        }
    }

    pub(super) fn contains(&self, id: MessageId) -> bool {
        self.by_id.contains_key(&id)
    }

    pub(super) fn pop_oldest(&mut self) -> Option<(UtcTime, MessageId)> {
        let first = self.order.pop_first()?;
        self.by_id.remove(&first.1);
        Some(first)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.order.len()
    }

    pub(super) fn is_scanned(&self) -> bool {
        self.scanned
    }

    /// Whether claim should list the folder before choosing: never listed yet, or the folder
    /// changed in a way this instance cannot explain (rate-limited by [`RESCAN_SPREAD`]).
    pub(super) fn wants_rescan(&self, observed_mtime: Option<SystemTime>) -> bool {
        if !self.scanned {
            return true;
        }
        observed_mtime != self.explained_mtime
            && self.claims_since_scan >= self.last_scan_entries / RESCAN_SPREAD
    }

    /// Records a finished listing. `mtime_before` is the folder's mtime read *before* listing, so
    /// that a change made during the listing still triggers the next rescan.
    pub(super) fn scanned(&mut self, mtime_before: Option<SystemTime>, entries: usize) {
        self.scanned = true;
        self.explained_mtime = mtime_before;
        self.claims_since_scan = 0;
        self.last_scan_entries = entries;
    }

    /// Records this instance's own claim (a rename out of the folder) and the mtime right after.
    pub(super) fn claimed(&mut self, mtime_after: Option<SystemTime>) {
        self.claims_since_scan += 1;
        self.explained_mtime = mtime_after;
    }

    /// Records this instance's own addition to the folder, seen between `before` and `after`. Only
    /// when nothing unexplained happened up to `before` is the change taken as ours alone.
    pub(super) fn added(&mut self, before: Option<SystemTime>, after: Option<SystemTime>) {
        if self.explained_mtime == before {
            self.explained_mtime = after;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn id(n: u128) -> MessageId {
        MessageId::from_uuid(uuid::Uuid::from_u128((0x4000 << 64) | (0x8000 << 48) | n)).unwrap()
    }

    fn at(ms: i64) -> UtcTime {
        UtcTime::from_unix_millis(ms).unwrap()
    }

    #[test]
    fn pops_by_time_then_id_and_replaces_moved_entries() {
        let mut index = ReadyIndex::default();
        index.insert(at(2), id(1));
        index.insert(at(1), id(3));
        index.insert(at(1), id(2));
        index.insert(at(5), id(4));
        index.insert(at(0), id(4)); // same id again: the new time wins, no second entry
        assert_eq!(index.len(), 4);
        let order: Vec<_> = std::iter::from_fn(|| index.pop_oldest()).collect();
        assert_eq!(
            order,
            vec![
                (at(0), id(4)),
                (at(1), id(2)),
                (at(1), id(3)),
                (at(2), id(1))
            ]
        );
        assert!(!index.contains(id(1)));
    }

    #[test]
    fn rescans_when_the_folder_changed_unexplained() {
        let t = |s| Some(SystemTime::UNIX_EPOCH + Duration::from_secs(s));
        let mut index = ReadyIndex::default();
        assert!(index.wants_rescan(t(1)));
        index.scanned(t(1), 3);
        assert!(!index.wants_rescan(t(1)));
        assert!(index.wants_rescan(t(2)));
        index.claimed(t(3));
        assert!(!index.wants_rescan(t(3)));
        index.added(t(3), t(4));
        assert!(!index.wants_rescan(t(4)));
        // Someone else changed it before our addition: not explained.
        index.added(t(5), t(6));
        assert!(index.wants_rescan(t(6)));
    }

    #[test]
    fn rescans_are_spread_over_claims_for_large_folders() {
        let t = |s| Some(SystemTime::UNIX_EPOCH + Duration::from_secs(s));
        let mut index = ReadyIndex::default();
        index.scanned(t(0), 2 * RESCAN_SPREAD);
        assert!(!index.wants_rescan(t(9)));
        index.claimed(t(1));
        assert!(!index.wants_rescan(t(9)));
        index.claimed(t(2));
        assert!(index.wants_rescan(t(9)));
    }
}
