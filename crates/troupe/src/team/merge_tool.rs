//! The lead's `merge_teammate(name)` (SPEC §12): merges a worktree teammate's branch into the
//! lead's checkout — its pending changes committed first, fast-forward or a merge commit — or
//! aborts a conflicting merge and names the conflicting files (the branch stays, the lead's
//! tree is as it was). Each outcome is reported (`teammate_merged`, `merge_conflict`). After a
//! merge, the worktree of a teammate that has shut down is removed if it is clean.

use async_trait::async_trait;
use serde_json::{json, Value};
use troupe_wire::{AgentName, Isolation, TeammateStatus};

use super::error::TeamError;
use super::observer::TeamUpdate;
use super::runtime::TeamHandle;
use crate::tools::{str_arg, Effect, ToolContext, ToolDefinition, ToolError, ToolHandler};
use crate::worktree::{Merged, Removal, WorktreeError};

pub struct MergeTeammate(pub TeamHandle);

#[async_trait]
impl ToolHandler for MergeTeammate {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "merge_teammate".into(),
            description: "Merge the branch of a teammate spawned with isolation \"worktree\" \
                (troupe/<name>) into your checkout: its uncommitted work is committed first, \
                then the branch is merged (fast-forward or a merge commit). On a conflict \
                nothing in your checkout changes: the merge is aborted and the result lists \
                the conflicting files; the branch stays for another try."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "description": "the teammate's name"}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
            effect: Effect::Write,
        }
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let name = AgentName::parse(str_arg(&args, "name")?)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        let team = self.0.upgrade().map_err(|e| ToolError::coded(&e))?;
        let record = team
            .record_of(&name)
            .await
            .ok_or_else(|| ToolError::coded(&TeamError::TeammateNotFound(name.clone())))?;
        let no_worktree = || ToolError::coded(&WorktreeError::NoWorktree(name.clone()));
        if record.isolation != Isolation::Worktree {
            return Err(no_worktree());
        }
        let worktrees = team.worktrees().cloned().ok_or_else(no_worktree)?;
        // git can take a while: off the async threads, on the blocking pool.
        let merging = name.clone();
        let merge_worktrees = worktrees.clone();
        let merged =
            crate::sync::offload("merge_teammate", move || merge_worktrees.merge(&merging))
                .await
                .map_err(|e| ToolError::Failed(e.to_string()))?
                .map_err(|e| ToolError::coded(&e))?;
        let mut result = match &merged {
            Merged::Done {
                branch,
                commit,
                fast_forward,
                committed,
            } => {
                team.report(&TeamUpdate::Merged {
                    name: name.clone(),
                    branch: branch.clone(),
                    commit: commit.clone(),
                    fast_forward: *fast_forward,
                });
                json!({
                    "merged": true,
                    "branch": branch,
                    "commit": commit,
                    "fast_forward": fast_forward,
                    "committed_pending_work": committed,
                })
            }
            Merged::AlreadyMerged { branch } => json!({
                "merged": true,
                "branch": branch,
                "note": "the branch was already part of your HEAD; nothing to merge",
            }),
            Merged::Conflict {
                branch,
                files,
                committed,
            } => {
                team.report(&TeamUpdate::MergeConflict {
                    name: name.clone(),
                    branch: branch.clone(),
                    files: files.clone(),
                });
                return Ok(json!({
                    "merged": false,
                    "branch": branch,
                    "conflicts": files,
                    "committed_pending_work": committed,
                    "note": format!(
                        "the merge conflicted and was aborted: nothing changed in your \
                         checkout and {branch} stays as it is. Resolve it yourself (git merge \
                         {branch} in your shell, fix the files, commit), or have {name} redo \
                         its change so that it no longer overlaps yours."
                    ),
                })
                .to_string());
            }
        };
        if record.status == TeammateStatus::Shutdown {
            let removal =
                crate::sync::offload("merge_teammate", move || worktrees.remove_if_done(&name))
                    .await
                    .map_err(|e| ToolError::Failed(e.to_string()))?;
            result["worktree"] = match removal {
                Ok(Removal::Removed) => json!("removed (merged and clean, its teammate shut down)"),
                Ok(Removal::Kept(why)) => json!(format!("kept: {why}")),
                Err(e) => json!(format!("kept: {e}")),
            };
        }
        Ok(result.to_string())
    }
}
