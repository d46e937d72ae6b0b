//! Teammates' branches between the clones of a shared team (`[team] remote`).
//!
//! On a team shared through PostgreSQL, a teammate may run in a `troupe worker` on another
//! host, whose checkout is its own clone: its worktree and branch are made there, not in the
//! lead's checkout. With a remote named in settings, the branch travels through it:
//!
//! 1. **At spawn** (the lead, [`Worktrees::prepare`]): the lead publishes the teammate's base —
//!    its `HEAD` — as `refs/heads/troupe/<name>` on the remote, unless the remote already holds
//!    unmerged work of an earlier teammate of the name (kept, as a local branch is).
//! 2. **Where it runs** ([`Worktrees::attach`]): a clone without the branch fetches it and makes
//!    the worktree from it; one that has it catches up (fast-forward) when the remote is ahead
//!    and the worktree is clean.
//! 3. **After each commit** ([`Worktrees::publish`]): the branch is pushed, never forced. A
//!    rejected push (another clone moved it) is an error the caller logs; the commit stays.
//! 4. **At merge** ([`Worktrees::merge`]): the lead pushes its own copy if the teammate ran
//!    here, fetches the remote's, and merges whichever is ahead; two that diverged are refused.
//!
//! The remote is a *name* of the checkout's configuration (the person's `.git/config`), never a
//! URL from the workspace's files, and in a workspace's own `troupe.toml` it needs trust. Each
//! clone of the team needs the same remote set. troupe never deletes a remote branch.

use super::git::{Git, Place};
use super::merge::is_ancestor;
use super::{branch_of, WorktreeError, Worktrees};
use troupe_wire::AgentName;

impl Worktrees {
    /// The git remote branches travel through, if any.
    pub fn with_remote(mut self, remote: Option<String>) -> Self {
        self.remote = remote;
        self
    }

    pub fn remote(&self) -> Option<&str> {
        self.remote.as_deref()
    }

    /// Before `name` is spawned with a worktree: worktrees can be made here and, with a remote,
    /// the remote exists and holds the teammate's branch (its base published now, see the
    /// module's step 1).
    pub fn prepare(&self, name: &AgentName) -> Result<(), WorktreeError> {
        self.check_available()?;
        let Some(remote) = self.remote.as_deref() else {
            return Ok(());
        };
        let _serial = self.locked();
        // Its worktree is made where it runs; the lead's `.troupe/` stays out of `git status`
        // all the same.
        self.exclude_troupe_state()?;
        let lead = self.lead();
        check_remote(&lead, remote)?;
        if let Some(tip) = fetch_branch(&lead, remote, name)? {
            if !is_ancestor(&lead, &tip, "HEAD")? {
                // Unmerged work of an earlier teammate of the name: kept.
                return Ok(());
            }
        }
        let branch_ref = format!("refs/heads/{}", branch_of(name));
        let local = rev(&lead, &branch_ref)?;
        let source = match local {
            Some(local) if !is_ancestor(&lead, &local, "HEAD")? => local,
            _ => rev(&lead, "HEAD")?.ok_or_else(|| {
                WorktreeError::Unavailable("a commit to branch from (HEAD has none)".into())
            })?,
        };
        push(&lead, remote, &source, &branch_ref)
    }

    /// Pushes `name`'s branch to the remote when the remote's copy (as last seen) differs: a
    /// no-op without a remote. Never forced.
    pub fn publish(&self, name: &AgentName) -> Result<(), WorktreeError> {
        let Some(remote) = self.remote.as_deref() else {
            return Ok(());
        };
        let _serial = self.locked();
        self.publish_unlocked(remote, name)
    }

    fn publish_unlocked(&self, remote: &str, name: &AgentName) -> Result<(), WorktreeError> {
        let lead = self.lead();
        let branch = branch_of(name);
        let branch_ref = format!("refs/heads/{branch}");
        let Some(local) = rev(&lead, &branch_ref)? else {
            return Ok(());
        };
        if rev(&lead, &tracking_ref(remote, name))?.as_deref() == Some(local.as_str()) {
            return Ok(());
        }
        push(&lead, remote, &branch_ref, &branch_ref)
    }

    /// Where it runs, when this clone has no branch of `name`: fetches the branch the lead
    /// published and returns its commit (the worktree's base), or says what is missing.
    pub(super) fn fetch_published(
        &self,
        remote: &str,
        name: &AgentName,
    ) -> Result<String, WorktreeError> {
        let lead = self.lead();
        check_remote(&lead, remote)?;
        fetch_branch(&lead, remote, name)?.ok_or_else(|| {
            WorktreeError::Unavailable(format!(
                "branch {branch} on git remote {remote}: the lead publishes it there when it \
                 spawns {name} with [team] remote set; set the same [team] remote where the \
                 lead runs",
                branch = branch_of(name)
            ))
        })
    }

    /// Where it runs, when this clone already has `name`'s worktree: fast-forwards it to the
    /// remote's branch when that is ahead and the worktree is clean; otherwise leaves it (and
    /// says why in the log). Never fails the attach: the teammate works on what is here.
    pub(super) fn catch_up(&self, remote: &str, name: &AgentName, place: &Place) {
        let lead = self.lead();
        let caught = (|| -> Result<Option<&'static str>, WorktreeError> {
            let Some(tip) = fetch_branch(&lead, remote, name)? else {
                return Ok(None);
            };
            let Some(local) = rev(&lead, &format!("refs/heads/{}", branch_of(name)))? else {
                return Ok(None);
            };
            if local == tip || is_ancestor(&lead, &tip, &local)? {
                return Ok(None);
            }
            if !is_ancestor(&lead, &local, &tip)? {
                return Ok(Some("it and the remote's branch have diverged"));
            }
            if !super::merge::lead_changes(place)?.is_clean() {
                return Ok(Some("its worktree has uncommitted changes"));
            }
            Git::new(place, ["merge", "--ff-only", "--quiet", &tip]).run()?;
            Ok(None)
        })();
        match caught {
            Ok(None) => {}
            Ok(Some(why)) => tracing::warn!(
                "{name}'s worktree is behind {remote}'s {}: {why}; it works on what is here",
                branch_of(name)
            ),
            Err(e) => tracing::warn!("could not bring {name}'s worktree up to {remote}: {e}"),
        }
    }

    /// At merge: which ref to merge for `name` — its local branch, or the remote's copy when
    /// that is ahead — after pushing the local one (the teammate ran here) and fetching the
    /// remote's (see the module's step 4). Without a remote, the local branch, which must
    /// exist (`worktree_not_found` otherwise).
    pub(super) fn merge_source(
        &self,
        name: &AgentName,
        has_worktree: bool,
    ) -> Result<String, WorktreeError> {
        let lead = self.lead();
        let branch = branch_of(name);
        let branch_ref = format!("refs/heads/{branch}");
        let local = rev(&lead, &branch_ref)?;
        let Some(remote) = self.remote.as_deref() else {
            return match local {
                Some(_) => Ok(branch_ref),
                None => Err(WorktreeError::NoWorktree(name.clone())),
            };
        };
        check_remote(&lead, remote)?;
        if has_worktree && local.is_some() {
            if let Err(e) = self.publish_unlocked(remote, name) {
                tracing::warn!("could not push {branch} to {remote} before merging it: {e}");
            }
        }
        let tip = fetch_branch(&lead, remote, name)?;
        match (local, tip) {
            (None, None) => Err(WorktreeError::Unavailable(format!(
                "branch {branch}, here or on git remote {remote}: {name} has not worked in a \
                 worktree yet"
            ))),
            (Some(_), None) => Ok(branch_ref),
            (None, Some(tip)) => {
                Git::new(&lead, ["update-ref", &branch_ref, &tip, ""]).run()?;
                Ok(branch_ref)
            }
            (Some(local), Some(tip)) => {
                if local == tip || is_ancestor(&lead, &tip, &local)? {
                    Ok(branch_ref)
                } else if is_ancestor(&lead, &local, &tip)? {
                    if has_worktree {
                        // Its worktree here is behind: merge the remote's copy, leave it.
                        Ok(tracking_ref(remote, name))
                    } else {
                        Git::new(&lead, ["update-ref", &branch_ref, &tip, &local]).run()?;
                        Ok(branch_ref)
                    }
                } else {
                    Err(WorktreeError::Diverged {
                        branch,
                        remote: remote.to_owned(),
                    })
                }
            }
        }
    }
}

/// The program a fetch or `ls-remote` runs on the remote's side — for a remote that is a path,
/// on this machine: git's own, never `remote.<name>.uploadpack` from the configuration.
const UPLOAD_PACK: &str = "--upload-pack=git-upload-pack";

/// The same for a push (`remote.<name>.receivepack`).
const RECEIVE_PACK: &str = "--receive-pack=git-receive-pack";

/// The remote-tracking ref troupe fetches `name`'s branch into.
fn tracking_ref(remote: &str, name: &AgentName) -> String {
    format!("refs/remotes/{remote}/{}", branch_of(name))
}

/// The commit `rev` names, if it names one.
fn rev(place: &Place, rev: &str) -> Result<Option<String>, WorktreeError> {
    let spec = format!("{rev}^{{commit}}");
    let out = Git::new(place, ["rev-parse", "--verify", "--quiet", &spec])
        .read_only()
        .output()?;
    Ok(out.ok().then(|| out.stdout.trim().to_owned()))
}

/// The remote must be one of the checkout's.
fn check_remote(place: &Place, remote: &str) -> Result<(), WorktreeError> {
    let out = Git::new(place, ["remote", "get-url", "--", remote])
        .read_only()
        .output()?;
    if out.ok() {
        return Ok(());
    }
    Err(WorktreeError::Unavailable(format!(
        "a git remote named {remote} ([team] remote) in {}: add it with `git remote add \
         {remote} <url>`, or unset [team] remote",
        place.dir().display()
    )))
}

/// Fetches `name`'s branch from `remote` into its remote-tracking ref: its commit, or `None`
/// when the remote has no such branch.
fn fetch_branch(
    place: &Place,
    remote: &str,
    name: &AgentName,
) -> Result<Option<String>, WorktreeError> {
    let branch_ref = format!("refs/heads/{}", branch_of(name));
    let listed = Git::new(
        place,
        [
            "ls-remote",
            "--exit-code",
            UPLOAD_PACK,
            "--",
            remote,
            &branch_ref,
        ],
    )
    .output()?;
    match listed.status.code() {
        Some(0) => {}
        Some(2) => return Ok(None),
        _ => {
            return Err(WorktreeError::Git {
                command: format!("git ls-remote {remote} {branch_ref}"),
                why: listed.why(),
            })
        }
    }
    let tracking = tracking_ref(remote, name);
    let refspec = format!("+{branch_ref}:{tracking}");
    Git::new(
        place,
        [
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-recurse-submodules",
            "--no-write-fetch-head",
            UPLOAD_PACK,
            "--",
            remote,
            &refspec,
        ],
    )
    .run()?;
    rev(place, &tracking)
}

/// `git push <remote> <source>:<target>`, never forced, no hooks, no submodules, git's own
/// `git-receive-pack`.
fn push(place: &Place, remote: &str, source: &str, target: &str) -> Result<(), WorktreeError> {
    let refspec = format!("{source}:{target}");
    Git::new(
        place,
        [
            "push",
            "--quiet",
            "--no-verify",
            "--recurse-submodules=no",
            RECEIVE_PACK,
            "--",
            remote,
            &refspec,
        ],
    )
    .run()?;
    Ok(())
}
