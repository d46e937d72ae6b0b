//! `troupe worktrees [--json]`: the teammates' git worktrees of the workspace (isolation
//! "worktree") — name, branch, base, ahead/behind the lead's `HEAD`, uncommitted changes,
//! merged. Read-only: git runs without its optional locks and nothing is created.

use std::path::Path;

use troupe::layout::Layout;
use troupe::worktree::Worktrees;

use crate::error::CliError;
use crate::render;

pub async fn worktrees(workspace: &Path, json: bool) -> Result<(), CliError> {
    let views = Worktrees::new(Layout::new(workspace))
        .list()
        .map_err(|e| CliError::coded(&e))?;
    if json {
        render::print_json(&serde_json::json!({ "worktrees": views }))
    } else {
        render::print_text(&render::worktrees(&views))
    }
}
