//! Records a process keeps in its own workspace and copies to its team: audit lines, usage
//! records and background job records (ARCHITECTURE "A team across processes").
//!
//! Every such store writes its own file first and then hands the record to one [`CopyTo`],
//! which bootstrap points at the team's store (a [`TeamCopy`] adapter: PostgreSQL for a shared
//! team) or at nothing (a team on files). The rule is the same for each kind: the local record
//! stands whatever happens to the copy, and a copy that fails is reported once per process
//! (not once per record: a database that is down would otherwise flood the output).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use uuid::Uuid;

use super::BackendError;

/// The team's copy of one kind of record.
#[async_trait::async_trait]
pub trait TeamCopy<R: Sync>: Send + Sync {
    async fn copy(&self, record: &R) -> Result<(), BackendError>;
}

/// An audit decision, as the team's audit keeps it: who, which tool, `allow` or `deny`, and
/// the local log's line whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditLine {
    pub agent: String,
    pub tool: String,
    pub decision: String,
    pub line: String,
}

/// A background job's record (its JSON text, as the local file holds it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLine {
    pub id: Uuid,
    pub record: String,
}

/// Every host's job records of a team, as `(id, host, record text)`: what `troupe jobs
/// --store` lists.
#[async_trait::async_trait]
pub trait TeamJobs: Send + Sync {
    async fn all(&self) -> Result<Vec<(Uuid, String, String)>, BackendError>;
}

/// Where a local store copies its records: nowhere, or a [`TeamCopy`].
pub struct CopyTo<R: Sync> {
    target: Option<Arc<dyn TeamCopy<R>>>,
    /// What the team misses when a copy fails ("the team's audit misses this decision").
    missing: &'static str,
    warned: AtomicBool,
}

impl<R: Sync> std::fmt::Debug for CopyTo<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CopyTo")
            .field("on", &self.target.is_some())
            .finish_non_exhaustive()
    }
}

impl<R: Sync> Default for CopyTo<R> {
    fn default() -> Self {
        Self::nowhere()
    }
}

impl<R: Sync> CopyTo<R> {
    /// No copy (a team on files).
    pub fn nowhere() -> Self {
        Self {
            target: None,
            missing: "",
            warned: AtomicBool::new(false),
        }
    }

    /// Copies to `target` when there is one; `missing` says what the team lacks when a copy
    /// fails.
    pub fn to(target: Option<Arc<dyn TeamCopy<R>>>, missing: &'static str) -> Self {
        Self {
            target,
            missing,
            warned: AtomicBool::new(false),
        }
    }

    /// Whether records go anywhere.
    pub fn is_on(&self) -> bool {
        self.target.is_some()
    }

    /// Copies `record`, whose local copy is in `kept` (for the warning); a failure is said
    /// once and otherwise ignored. Returns whether the copy was made.
    pub async fn copy(&self, record: &R, kept: &(dyn std::fmt::Display + Sync)) -> bool {
        let Some(target) = &self.target else {
            return false;
        };
        match target.copy(record).await {
            Ok(()) => true,
            Err(e) => {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!("{e}: {} (it is in {kept})", self.missing);
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Flaky {
        seen: Mutex<Vec<u32>>,
    }

    #[async_trait::async_trait]
    impl TeamCopy<u32> for Flaky {
        async fn copy(&self, record: &u32) -> Result<(), BackendError> {
            self.seen.lock().unwrap().push(*record);
            if record.is_multiple_of(2) {
                Err(BackendError::new("store_unavailable", "down"))
            } else {
                Ok(())
            }
        }
    }

    #[tokio::test]
    async fn every_record_is_offered_and_failures_only_report() {
        let flaky = Arc::new(Flaky::default());
        let copy = CopyTo::to(
            Some(flaky.clone() as Arc<dyn TeamCopy<u32>>),
            "the team misses it",
        );
        assert!(copy.is_on());
        let mut made: Vec<bool> = Vec::new();
        for n in 1..=4 {
            made.push(copy.copy(&n, &"here").await);
        }
        assert_eq!(made, vec![true, false, true, false]);
        assert_eq!(*flaky.seen.lock().unwrap(), vec![1, 2, 3, 4]);
        assert!(copy.warned.load(Ordering::Relaxed));
    }

    #[tokio::test]
    async fn nowhere_copies_nothing() {
        let copy = CopyTo::<u32>::nowhere();
        assert!(!copy.is_on());
        assert!(!copy.copy(&1, &"here").await);
    }
}
