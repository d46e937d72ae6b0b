//! What every agent's runner gets for long runs (SPEC §9) — the run's usage, token and cost
//! budgets, the context budget with artifacts, memory — and the settings' hooks, their matchers
//! read like permission rules.

use std::path::PathBuf;
use std::sync::Arc;

use troupe_wire::AgentName;

use crate::agent::context::ContextBudget;
use crate::agent::memory::{Memory, MemoryQueries};
use crate::agent::usage::RunUsage;
use crate::agent::Runner;
use crate::hooks::CommandHooks;
use crate::ids::IdGenerator;
use crate::layout::Layout;
use crate::model::ModelClient;
use crate::permissions::hooks::Hooks;
use crate::permissions::patterns::{RulePattern, Use};
use crate::prices::Cost;
use crate::store::artifacts::{ArtifactCopy, ArtifactStore};
use crate::store::memory::MemoryStore;
use crate::store::postgres::memory::PgMemory;
use crate::store::postgres::PgStore;
use crate::store::usage::UsageLog;

use super::options::TeamSettings;
use super::shared;

/// What every agent's runner gets for long runs (SPEC §9): the run's usage and token budget,
/// the context budget with artifacts for large results, memory, and the settings' hooks.
pub(super) struct LongLivedKit {
    layout: Layout,
    ids: Arc<dyn IdGenerator>,
    pub(super) usage: Arc<RunUsage>,
    max_run_tokens: Option<u64>,
    max_run_cost: Option<Cost>,
    budget: ContextBudget,
    remember: bool,
    /// The settings' `[[hooks]]`, if any: tool hooks for every dispatcher, prompt and stop
    /// hooks for the lead and teammates.
    hooks: Option<CommandHooks>,
    /// The memory records: the workspace's, or a shared team's.
    memory: MemoryStore,
    /// Where artifacts are copied too and recovered from: a shared team's database, or nowhere.
    artifact_copy: Arc<dyn ArtifactCopy>,
}

/// A hook's `matcher` read like a permission rule (`shell`, `shell(cargo test:*)`,
/// `write_file(docs/**)`): it fires when the rule would restrict the call — for a shell chain,
/// when any part matches. No matcher (or `*`) fires on every call.
fn hook_matchers(workspace: PathBuf) -> crate::hooks::MatcherFactory {
    Arc::new(move |matcher: Option<&str>| -> crate::hooks::ToolMatcher {
        match matcher.map(str::trim) {
            None | Some("") | Some("*") => Arc::new(|_: &str, _: &serde_json::Value| true),
            Some(text) => {
                let pattern = RulePattern::parse(text);
                let workspace = workspace.clone();
                Arc::new(move |tool: &str, arguments: &serde_json::Value| {
                    pattern.matches(tool, arguments, &workspace, Use::Restrict)
                })
            }
        }
    })
}

impl LongLivedKit {
    /// `shared`: a shared team's database, where every usage record and artifact is copied too
    /// and the memory records are.
    pub(super) fn new(
        layout: &Layout,
        settings: &TeamSettings,
        events_run_id: &str,
        shared: Option<&PgStore>,
    ) -> Self {
        let memory = match shared {
            Some(store) => MemoryStore::on(Arc::new(PgMemory::new(store.clone()))),
            None => MemoryStore::open(layout),
        };
        let artifact_copy = shared::copies::artifacts(shared);
        let hooks = &settings.settings.hooks;
        let hooks = (!hooks.is_empty()).then(|| {
            let hooks = CommandHooks::with_matchers(
                hooks.clone(),
                settings.workspace.clone(),
                events_run_id,
                hook_matchers(settings.workspace.clone()),
            );
            if settings.sandbox.confine_hooks {
                hooks.confined(settings.sandbox.sandbox.clone())
            } else {
                hooks
            }
        });
        let run_id = settings.ids.next_uuid().to_string();
        let usage = RunUsage::new(
            run_id,
            UsageLog::open(layout, settings.clock.clone()).with_copy(shared::copies::usage(shared)),
        );
        // Costs are counted only for a budget: a run without one warns about no price.
        let usage = match settings.long_lived.max_run_cost {
            Some(_) => usage.with_prices(settings.settings.prices.table()),
            None => usage,
        };
        Self {
            layout: layout.clone(),
            ids: settings.ids.clone(),
            usage: Arc::new(usage),
            max_run_tokens: settings.long_lived.max_run_tokens,
            max_run_cost: settings.long_lived.max_run_cost,
            budget: ContextBudget::for_model(
                &settings.long_lived.model_name,
                settings.long_lived.context_window,
            ),
            remember: settings.long_lived.remember,
            hooks,
            memory,
            artifact_copy,
        }
    }

    /// The settings' command hooks, if any (the `PermissionRequest` notices).
    pub(super) fn command_hooks(&self) -> Option<CommandHooks> {
        self.hooks.clone()
    }

    /// The dispatcher hooks of the settings (none without `[[hooks]]`).
    pub(super) fn tool_hooks(&self) -> Hooks {
        self.hooks
            .as_ref()
            .map(CommandHooks::tool_hooks)
            .unwrap_or_default()
    }

    /// `runner` (of `agent`, answered by `model`) with the run's usage, the context budget and
    /// artifacts, and — for the lead and teammates, not subagents — memory and the prompt and
    /// stop hooks.
    pub(super) fn apply(
        &self,
        runner: Runner,
        agent: &AgentName,
        model: &Arc<dyn ModelClient>,
        with_memory: bool,
    ) -> Runner {
        let runner = runner
            .with_usage(self.usage.clone(), self.max_run_tokens)
            .with_cost_budget(self.max_run_cost)
            .with_context(
                self.budget,
                Some(
                    ArtifactStore::new(&self.layout, agent, self.ids.clone())
                        .with_copy(self.artifact_copy.clone()),
                ),
            );
        if !with_memory {
            return runner;
        }
        let runner = match &self.hooks {
            Some(hooks) => runner.with_hooks(hooks.clone()),
            None => runner,
        };
        let queries =
            MemoryQueries::new(model.clone()).with_usage(agent.clone(), self.usage.clone());
        let memory = Memory::new(self.memory.clone(), queries);
        runner.with_memory(Arc::new(memory), self.remember)
    }
}
