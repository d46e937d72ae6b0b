//! A git worktree per teammate (SPEC §12), on real git repositories the tests make.
//!
//! - `support`: a repository in a temp folder (identity given with `-c`, nothing from the
//!   environment), and reading it back.
//! - `git`: the `Worktrees` port itself — made from the lead's `HEAD`, reattached, commits
//!   authored by the teammate, fast-forward and conflicting merges, removal only when merged and
//!   clean, hooks of a hostile repository never run, a workspace that is not a repository.
//! - `records`: a worktree record checked against git — one naming another worktree's admin
//!   folder, the lead's `.git`, a worktree git has forgotten or shows on another branch is
//!   refused everywhere; a nested repository a teammate makes never runs its filter.
//! - `team`: through a running team — `spawn_teammate` with `isolation: "worktree"`, the
//!   teammate's tools and confined commands in its worktree, its result committed, the lead's
//!   `merge_teammate` and its events, two teammates on the same lines, the settings' default,
//!   a workspace that is not a repository left as it was.
//! - `remote`: a shared team's branches through a bare repository as `[team] remote` —
//!   published at spawn, made and pushed in a worker's clone, fetched and merged by the lead,
//!   a conflict aborted, diverged branches refused, a teammate moving between clones.

pub mod support;

mod git;
mod records;
mod remote;
mod team;
