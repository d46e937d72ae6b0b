//! A worktree teammate's workspace as the team sees it (SPEC §12): its finished work committed
//! on its branch, and the worktrees of teammates that shut down removed when the team closes —
//! only those whose branch is merged and whose tree is clean (see `crate::worktree`).

use troupe_wire::{AgentName, Isolation, MailboxMessage, TeammateRecord, TeammateStatus};

use crate::worktree::{Removal, Worktrees};

/// Commits what `name` changed in its worktree while it worked on `message`, with the first
/// line of its task as the commit's subject. A failure is logged, not fatal: the changes stay
/// in the worktree, and `merge_teammate` commits them before it merges.
pub(super) fn commit_finished_work(
    worktrees: &Worktrees,
    name: &AgentName,
    message: &MailboxMessage,
) {
    let subject = match message {
        MailboxMessage::Ordinary(m) => m.content.as_str().to_owned(),
        MailboxMessage::Protocol(p) => format!(
            "Carry out plan {} ({})",
            p.request_id(),
            p.content().as_str()
        ),
    };
    commit_work(worktrees, name, &subject);
}

/// Commits what `name` changed in its worktree, with `subject` (a message's task, or the
/// subject of a task it took from the board) as the commit's subject, and pushes its branch
/// when the team has a remote; a failure is logged (the work stays in the worktree, and the
/// next commit or the merge tries again).
pub(super) fn commit_work(worktrees: &Worktrees, name: &AgentName, subject: &str) {
    match worktrees.commit(name, subject) {
        Ok(Some(commit)) => tracing::debug!("committed {name}'s work as {commit}"),
        Ok(None) => {}
        Err(e) => tracing::warn!("could not commit {name}'s work on its branch: {e}"),
    }
    // With `[team] remote`, the branch goes where the lead can fetch it (a no-op without).
    if let Err(e) = worktrees.publish(name) {
        tracing::warn!(
            "could not push {name}'s branch to git remote {}: {e}",
            worktrees.remote().unwrap_or("?")
        );
    }
}

/// At close: removes the worktree of every teammate of `roster` that shut down, when its branch
/// is merged into the lead's `HEAD` and its tree is clean; every other worktree is kept (and
/// listed by `troupe worktrees`).
pub fn remove_finished_worktrees(worktrees: &Worktrees, roster: &[TeammateRecord]) {
    for record in roster {
        if record.isolation != Isolation::Worktree || record.status != TeammateStatus::Shutdown {
            continue;
        }
        match worktrees.remove_if_done(&record.name) {
            Ok(Removal::Removed) => {
                tracing::info!("removed the merged worktree of {}", record.name)
            }
            Ok(Removal::Kept(why)) => {
                tracing::info!("kept the worktree of {}: {why}", record.name)
            }
            Err(e) => tracing::info!("kept the worktree of {}: {e}", record.name),
        }
    }
}
