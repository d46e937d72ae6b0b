//! The injectable id generator (SPEC §2).

use std::sync::atomic::{AtomicU64, Ordering};

use troupe_wire::{MessageId, RequestId};
use uuid::Uuid;

/// Where new message and request ids come from.
pub trait IdGenerator: Send + Sync {
    /// A fresh UUID of version 4 or 7.
    fn next_uuid(&self) -> Uuid;

    fn message_id(&self) -> MessageId {
        // Both implementations below produce v4/v7 UUIDs, which `from_uuid` accepts.
        MessageId::from_uuid(self.next_uuid()).unwrap_or_else(|_| random_message_id())
    }

    fn request_id(&self) -> RequestId {
        RequestId::from_uuid(self.next_uuid()).unwrap_or_else(|_| random_request_id())
    }
}

fn random_message_id() -> MessageId {
    MessageId::from_uuid(Uuid::new_v4()).unwrap_or_else(|_| unreachable_v4())
}

fn random_request_id() -> RequestId {
    RequestId::from_uuid(Uuid::new_v4()).unwrap_or_else(|_| unreachable_v4())
}

fn unreachable_v4<T>() -> T {
    unreachable!("Uuid::new_v4 always yields a canonical v4 UUID")
}

/// Time-ordered UUID v7 ids: unique across processes and sortable by creation.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomIds;

impl IdGenerator for RandomIds {
    fn next_uuid(&self) -> Uuid {
        Uuid::now_v7()
    }
}

/// Deterministic v4-shaped ids for tests: `00000000-0000-4000-8000-<prefix><counter>`.
#[derive(Debug)]
pub struct SequentialIds {
    prefix: u16,
    counter: AtomicU64,
}

impl SequentialIds {
    pub fn new() -> Self {
        Self::with_prefix(0)
    }

    /// Different prefixes give disjoint id ranges (for several generators in one test).
    pub fn with_prefix(prefix: u16) -> Self {
        Self {
            prefix,
            counter: AtomicU64::new(1),
        }
    }
}

impl Default for SequentialIds {
    fn default() -> Self {
        Self::new()
    }
}

impl IdGenerator for SequentialIds {
    fn next_uuid(&self) -> Uuid {
        let n = self.counter.fetch_add(1, Ordering::SeqCst) & 0xffff_ffff;
        let tail = (u64::from(self.prefix) << 32) | n;
        let value: u128 = (0x4000u128 << 64) | (0x8000u128 << 48) | u128::from(tail);
        Uuid::from_u128(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_are_canonical_and_distinct() {
        let ids = SequentialIds::new();
        let a = ids.message_id().to_string();
        let b = ids.request_id().to_string();
        assert_eq!(a, "00000000-0000-4000-8000-000000000001");
        assert_eq!(b, "00000000-0000-4000-8000-000000000002");
        assert!(MessageId::parse(&a).is_ok());
    }

    #[test]
    fn random_ids_parse() {
        let id = RandomIds.message_id().to_string();
        assert!(MessageId::parse(&id).is_ok());
    }
}
