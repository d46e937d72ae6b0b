//! Retention (issue 45): what `troupe gc` may remove of a team's state, one rule engine over
//! both backends.
//!
//! - [`Kind`]: the kinds of state that are pruned (done messages, quarantined messages,
//!   archived requests, old session transcripts, artifacts, events, merged worktrees, finished
//!   jobs, recordings, usage lines).
//! - [`Policy`]: a [`Rule`] per kind (an age and/or a size), from `[retention]`.
//! - [`Sweep`]: one gc pass: the policy, the time, whether it only reports (`--dry-run`).
//! - [`decide`]: the one rule engine: given a kind's candidates (each with its time, its size
//!   and what still needs it), which may go. Every adapter asks it; none decides alone.
//! - [`Report`]: what was removed and what was kept and why, per kind.
//! - [`Prune`]: the port each backend's state implements (`files` for a workspace,
//!   `postgres::retention` for a shared team, [`NoSharedState`] for a team on files alone).
//!
//! What is never removed, whatever the policy: what a live run, a pending request, an
//! unfinished task or job, an unmerged branch or a conversation still needs. Every removal is
//! one atomic step (an unlink, an atomic replace, one statement), so a gc killed midway leaves
//! consistent state and the next gc finishes the work.

pub mod files;
pub mod lines;
pub mod listing;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use troupe_wire::UtcTime;

use super::PortError;

/// A kind of state retention applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Messages in `done/`.
    Messages,
    /// Messages in `quarantine/` (kept longer by default: they are evidence).
    Quarantine,
    /// Resolved protocol requests in the archive, and their answers.
    Requests,
    /// Earlier conversations of an agent (`lead.<n>.jsonl`), never the current one.
    Transcripts,
    /// Tool results kept whole that no current conversation refers to.
    Artifacts,
    /// Closed event segments.
    Events,
    /// Worktrees whose branch is merged, with their local branch.
    Worktrees,
    /// Finished background jobs' records and output.
    Jobs,
    /// Replay recordings of ended runs.
    Recordings,
    /// Completed board tasks (never one a task that stays is blocked by).
    Tasks,
    /// Lines of the audit log (`audit.jsonl`, a shared team's `troupe_audit`).
    Audit,
    /// Usage lines, compacted into per-day totals (never removed: totals stay right).
    Usage,
}

impl Kind {
    pub const ALL: [Kind; 12] = [
        Kind::Messages,
        Kind::Quarantine,
        Kind::Requests,
        Kind::Transcripts,
        Kind::Artifacts,
        Kind::Events,
        Kind::Worktrees,
        Kind::Jobs,
        Kind::Recordings,
        Kind::Tasks,
        Kind::Audit,
        Kind::Usage,
    ];

    /// Its key in `[retention]` and in reports.
    pub fn as_str(&self) -> &'static str {
        match self {
            Kind::Messages => "messages",
            Kind::Quarantine => "quarantine",
            Kind::Requests => "requests",
            Kind::Transcripts => "transcripts",
            Kind::Artifacts => "artifacts",
            Kind::Events => "events",
            Kind::Worktrees => "worktrees",
            Kind::Jobs => "jobs",
            Kind::Recordings => "recordings",
            Kind::Tasks => "tasks",
            Kind::Audit => "audit",
            Kind::Usage => "usage",
        }
    }

    pub fn parse(key: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == key)
    }

    /// The rule when `[retention]` says nothing of this kind.
    pub fn default_rule(&self) -> Rule {
        const DAY: u64 = 24 * 3600;
        let days = match self {
            Kind::Quarantine | Kind::Audit => 90,
            Kind::Usage => 90,
            Kind::Transcripts => 90,
            Kind::Worktrees | Kind::Jobs => 7,
            _ => 30,
        };
        Rule {
            age: Some(Duration::from_secs(days * DAY)),
            size: None,
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How long, and how much, of one kind is kept. An item goes when it is older than `age`, or
/// when the newer items of its kind already fill `size` bytes; with neither, nothing goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rule {
    pub age: Option<Duration>,
    pub size: Option<u64>,
}

/// A rule per kind, and whether gc runs at each run's close.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    rules: BTreeMap<Kind, Rule>,
    /// `[retention] auto`: gc at each run's close (default false: nothing is deleted unless a
    /// person asks).
    pub auto: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            rules: Kind::ALL.iter().map(|k| (*k, k.default_rule())).collect(),
            auto: false,
        }
    }
}

impl Policy {
    pub fn rule(&self, kind: Kind) -> Rule {
        self.rules.get(&kind).copied().unwrap_or_default()
    }

    pub fn set(&mut self, kind: Kind, rule: Rule) {
        self.rules.insert(kind, rule);
    }
}

/// One gc pass.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub policy: Policy,
    pub now: UtcTime,
    /// Report what would go; change nothing.
    pub dry_run: bool,
}

impl Sweep {
    /// Items of `kind` made before this time are past its age (`None`: no age rule).
    pub fn cutoff(&self, kind: Kind) -> Option<UtcTime> {
        let age = self.policy.rule(kind).age?;
        let millis = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        Some(
            UtcTime::from_unix_millis(self.now.unix_millis().saturating_sub(millis))
                .unwrap_or(self.now),
        )
    }
}

/// A number of items and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub items: u64,
    pub bytes: u64,
}

impl Tally {
    fn add(&mut self, bytes: u64) {
        self.items += 1;
        self.bytes = self.bytes.saturating_add(bytes);
    }
}

/// One kind's outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KindReport {
    /// Removed (with `--dry-run`: would be removed).
    pub removed: Tally,
    /// Kept, per reason.
    pub kept: BTreeMap<String, Tally>,
}

/// What a gc pass removed and kept, per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub dry_run: bool,
    pub kinds: BTreeMap<Kind, KindReport>,
}

impl Report {
    pub fn new(dry_run: bool) -> Self {
        Self {
            dry_run,
            kinds: BTreeMap::new(),
        }
    }

    /// Records one item of `kind` removed (or that would be).
    pub fn removed(&mut self, kind: Kind, bytes: u64) {
        self.kinds.entry(kind).or_default().removed.add(bytes);
    }

    /// Records one item of `kind` kept, and why.
    pub fn kept(&mut self, kind: Kind, why: &str, bytes: u64) {
        self.kinds
            .entry(kind)
            .or_default()
            .kept
            .entry(why.to_owned())
            .or_default()
            .add(bytes);
    }

    /// Records `items` of `kind` removed at once, `bytes` in all (rows a statement deleted,
    /// usage lines merged into totals).
    pub fn removed_many(&mut self, kind: Kind, items: u64, bytes: u64) {
        let t = &mut self.kinds.entry(kind).or_default().removed;
        t.items += items;
        t.bytes = t.bytes.saturating_add(bytes);
    }

    /// Records `items` of `kind` kept at once, and why.
    pub fn kept_many(&mut self, kind: Kind, why: &str, items: u64, bytes: u64) {
        if items == 0 {
            return;
        }
        let t = self
            .kinds
            .entry(kind)
            .or_default()
            .kept
            .entry(why.to_owned())
            .or_default();
        t.items += items;
        t.bytes = t.bytes.saturating_add(bytes);
    }

    /// Adds another report's figures (the workspace's and the database's).
    pub fn merge(&mut self, other: Report) {
        for (kind, theirs) in other.kinds {
            let ours = self.kinds.entry(kind).or_default();
            ours.removed.items += theirs.removed.items;
            ours.removed.bytes = ours.removed.bytes.saturating_add(theirs.removed.bytes);
            for (why, tally) in theirs.kept {
                let t = ours.kept.entry(why).or_default();
                t.items += tally.items;
                t.bytes = t.bytes.saturating_add(tally.bytes);
            }
        }
    }

    /// Everything removed, over all kinds.
    pub fn removed_total(&self) -> Tally {
        let mut total = Tally::default();
        for k in self.kinds.values() {
            total.items += k.removed.items;
            total.bytes = total.bytes.saturating_add(k.removed.bytes);
        }
        total
    }
}

/// Why an item is kept whatever the rule says.
pub mod needed {
    pub const LIVE_RUN: &str = "a live run uses it";
    pub const PENDING_REQUEST: &str = "a pending request";
    pub const UNFINISHED_TASK: &str = "an unfinished task";
    pub const BLOCKS_A_TASK: &str = "a task that stays is blocked by it";
    pub const UNFINISHED_JOB: &str = "an unfinished job";
    pub const UNMERGED_BRANCH: &str = "its branch is not merged";
    pub const CONVERSATION: &str = "a conversation refers to it";
    pub const CURRENT: &str = "the current conversation";
    pub const OPEN_SEGMENT: &str = "the open segment";
    pub const USAGE_TOTALS: &str = "per-day totals of older usage";
}

/// Why an item the rule would keep is kept.
pub const WITHIN_AGE: &str = "within its age";
pub const WITHIN_SIZE: &str = "within its size";

/// One item a backend could remove: when it was made (or last changed), its bytes, and what
/// still needs it (`Some(reason)`: never removed).
#[derive(Debug, Clone)]
pub struct Candidate<T> {
    pub item: T,
    pub at: UtcTime,
    pub bytes: u64,
    pub needed: Option<&'static str>,
}

/// The one rule engine: which of `candidates` of `kind` may go under `sweep`'s rule. Those kept
/// are recorded in `report` with their reason; those returned are for the caller to remove,
/// and to record with [`Report::removed`] once removed (items that vanished meanwhile are not
/// recorded). The newest items fill the size budget first; needed items count toward it.
pub fn decide<T>(
    kind: Kind,
    sweep: &Sweep,
    mut candidates: Vec<Candidate<T>>,
    report: &mut Report,
) -> Vec<(T, u64)> {
    let rule = sweep.policy.rule(kind);
    let cutoff = sweep.cutoff(kind);
    candidates.sort_by_key(|c| std::cmp::Reverse(c.at));
    let mut used: u64 = 0;
    let mut out = Vec::new();
    for c in candidates {
        used = used.saturating_add(c.bytes);
        if let Some(why) = c.needed {
            report.kept(kind, why, c.bytes);
            continue;
        }
        let too_old = cutoff.is_some_and(|cut| c.at < cut);
        let too_big = rule.size.is_some_and(|size| used > size);
        if too_old || too_big {
            out.push((c.item, c.bytes));
        } else if rule.size.is_some() && rule.age.is_none() {
            report.kept(kind, WITHIN_SIZE, c.bytes);
        } else {
            report.kept(kind, WITHIN_AGE, c.bytes);
        }
    }
    out
}

/// A backend's state, pruned by a sweep: each kind it holds, through [`decide`].
#[async_trait::async_trait]
pub trait Prune: Send + Sync {
    /// Removes (with `sweep.dry_run`: only counts) what the policy allows, recording every
    /// item in `report`.
    async fn prune(&self, sweep: &Sweep, report: &mut Report) -> Result<(), PortError>;
}

/// The state of a team kept in its workspace's files alone: nothing beyond them to prune (the
/// files are pruned by `files::FileState`, always).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSharedState;

#[async_trait::async_trait]
impl Prune for NoSharedState {
    async fn prune(&self, _sweep: &Sweep, _report: &mut Report) -> Result<(), PortError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
