//! The team runtime of a run on its opened stores: its ports, where its teammates may run, the
//! lead's board, and the factory of teammates' runners (`teammates.rs`); the workspace's agent
//! definitions.

use std::sync::Arc;

use crate::team::board_work::BoardWork;
use crate::team::{TeamPorts, TeamRuntime};
use crate::worktree::Worktrees;

use super::kit::LongLivedKit;
use super::options::{BootstrapError, TeamSettings};
use super::start::{Start, Stores};
use super::teammates::{read_definitions, teammate_factory, Definitions};

/// What a lead and a worker build alike on their opened run: the long-lived kit of every
/// runner, the workspace's agent definitions, and the team runtime with its teammate factory.
pub(super) struct Crew {
    pub(super) kit: Arc<LongLivedKit>,
    pub(super) definitions: Definitions,
    pub(super) runtime: TeamRuntime,
    /// Tasks whose lease ran out, back on the board: the lead is told (a worker drops them:
    /// its event stream has them).
    pub(super) task_returns: tokio::sync::mpsc::UnboundedReceiver<crate::store::tasks::Task>,
}

/// The team runtime on `start`'s stores; `local_workers` overrides the settings' choice (a
/// worker always runs teammates).
pub(super) async fn team_runtime(
    start: &Start,
    settings: &TeamSettings,
    local_workers: Option<bool>,
) -> Result<Crew, BootstrapError> {
    let kit = Arc::new(LongLivedKit::new(
        &start.layout,
        settings,
        start.events.run_id(),
        start.stores.pg.as_ref().map(|on| &on.parts.store),
    ));
    let definitions = read_definitions(&settings.workspace);
    let worktrees = Arc::new(
        Worktrees::new(start.layout.clone()).with_remote(
            settings
                .settings
                .team
                .remote
                .as_ref()
                .map(|r| r.value.clone()),
        ),
    );
    let placement = start.stores.placement(settings, local_workers);
    let runtime = TeamRuntime::new(
        start.layout.clone(),
        team_ports(settings, &start.stores, placement.clone(), &worktrees),
        teammate_factory(
            settings,
            &start.stores,
            &start.base_policy,
            &start.jobs,
            &kit,
            definitions.clone(),
            worktrees,
        ),
    )
    .await?;
    let task_returns = attach_board(&runtime, &start.stores, settings);
    Ok(Crew {
        kit,
        definitions,
        runtime,
        task_returns,
    })
}

/// Lets idle teammates pull work from the board (SPEC §12): the board's changes wake the
/// teammates they concern, and this process's leases are kept; returns where tasks whose
/// lease ran out are reported.
fn attach_board(
    runtime: &TeamRuntime,
    stores: &Stores,
    settings: &TeamSettings,
) -> tokio::sync::mpsc::UnboundedReceiver<crate::store::tasks::Task> {
    let handle = runtime.handle();
    stores.observed_board.on_change(Box::new(move || {
        let team = handle.upgrade();
        Box::pin(async move {
            if let Ok(team) = team {
                team.board_changed().await;
            }
        })
    }));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let work = Arc::new(BoardWork::new(
        stores.claims.clone(),
        settings.clock.clone(),
        stores.task_lease,
    ));
    runtime.attach_board(
        work,
        Arc::new(move |task: &crate::store::tasks::Task| {
            let _ = tx.send(task.clone());
            Box::pin(async {})
        }),
    );
    rx
}

/// What the team runtime is built on, from the opened stores and where teammates run.
fn team_ports(
    settings: &TeamSettings,
    stores: &Stores,
    placement: Arc<dyn crate::team::Placement>,
    worktrees: &Arc<Worktrees>,
) -> TeamPorts {
    TeamPorts {
        mailbox: stores.mailbox.clone(),
        protocol: stores.protocol.clone(),
        clock: settings.clock.clone(),
        ids: settings.ids.clone(),
        observer: settings.team_observer.clone(),
        request_ttl: settings.request_ttl,
        transcripts: stores.transcripts.clone(),
        placement,
        worktrees: Some(worktrees.clone()),
    }
}
