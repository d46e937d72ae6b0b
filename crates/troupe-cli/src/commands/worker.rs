//! `troupe worker`: runs teammates of a team shared through PostgreSQL in this process and
//! workspace, until Ctrl-C or SIGTERM. It takes the same model, approval, sandbox and settings
//! options as `troupe run`; its teammates' file effects happen in this workspace.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

use troupe::agent::NullObserver;
use troupe::bootstrap::{build_worker, EventOptions, LongLived, TeamSettings};
use troupe::clock::SystemClock;
use troupe::ids::RandomIds;
use troupe::team::NoTeamObserver;

use troupe::store::events::{kinds, EventSink, RUN_AGENT};

use crate::agent_setup::{
    approval_provider, context_window, models, no_terminal_notice, settings_for_agents, Models,
};
use crate::args::{ApprovalMode, WorkerArgs};
use crate::error::CliError;
use crate::input::parse_duration;
use crate::interrupt::Interrupt;
use crate::observe::approval::PausingApproval;
use crate::observe::{Console, Sink};
use crate::store_choice::store_choice;

pub async fn worker(workspace: &Path, args: WorkerArgs, verbose: u8) -> Result<(), CliError> {
    if args.max_turns == 0 {
        return Err(CliError::usage("--max-turns must be at least 1".into()));
    }
    let ttl = parse_duration(&args.request_ttl)?;
    let (loaded, file_settings) = settings_for_agents(workspace)?;
    let store = store_choice(&args.store, &file_settings, true)?;
    let Some(options) = store.shared() else {
        return Err(CliError::usage(
            "troupe worker runs teammates of a shared team: give --store postgres://… (or \
             TROUPE_STORE_URL, or [store] url in troupe.toml or your config.toml)"
                .into(),
        ));
    };
    let team_key = options.team.clone();
    let (sandbox, sandbox_line) =
        crate::sandboxing::options(workspace, args.sandbox, &file_settings, args.approval)?;
    let context_window = context_window(&args.model, &file_settings)?;
    let Models {
        chooser: models,
        redactor,
        name: model_name,
        provider,
    } = models(&args.model, &loaded)?;
    let telemetry = crate::telemetry::options(&file_settings, provider, &model_name);
    let interrupt = Interrupt::default();
    if args.approval == ApprovalMode::Ask && !std::io::stdin().is_terminal() {
        eprintln!(
            "troupe: {}",
            no_terminal_notice(&file_settings.approvals, true)
        );
    }
    let console = Arc::new(Console::new(Sink::Stderr, verbose > 0));
    let mut approval = approval_provider(args.approval, &interrupt.prompts, workspace);
    if args.approval == ApprovalMode::Ask {
        approval = Arc::new(PausingApproval {
            inner: approval,
            console: console.clone(),
        });
    }
    let settings = TeamSettings {
        workspace: workspace.to_path_buf(),
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
        models,
        approval,
        run_observer: Arc::new(NullObserver),
        team_observer: Arc::new(NoTeamObserver),
        max_turns: args.max_turns,
        request_ttl: ttl,
        shell_timeout: troupe::tools::shell::DEFAULT_TIMEOUT,
        watch: false,
        require_plans: false,
        redactor,
        long_lived: LongLived {
            model_name,
            context_window,
            remember: !args.no_memory,
            max_run_tokens: None,
            max_run_cost: None,
            new_session: false,
        },
        events: EventOptions {
            listeners: vec![console.clone()],
            prompt: format!("worker of team {team_key}"),
            telemetry,
        },
        settings: file_settings,
        sandbox,
        mcp: Default::default(),
        store,
    };
    let result = async {
        let cancel = interrupt.run.clone();
        // Ctrl-C is the worker's until it has stopped.
        let _listening = crate::interrupt::listen(cancel.clone())?;
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .map_err(|e| CliError::failed(format_args!("cannot watch SIGTERM: {e}")))?;
        let mut settings = settings;
        crate::agent_setup::start_mcp(&mut settings).await;
        let mcp = settings.mcp.clone();
        let worker = match build_worker(settings).await {
            Ok(worker) => worker,
            Err(e) => {
                mcp.stop().await;
                return Err(CliError::coded(&e));
            }
        };
        eprintln!("{sandbox_line}");
        eprintln!(
            "troupe: worker {} of team {team_key:?} is running; Ctrl-C or SIGTERM stops it",
            worker.holder
        );
        tokio::select! {
            () = cancel.cancelled() => {}
            _ = terminate.recv() => {}
        }
        eprintln!("troupe: stopping: teammates stop at a safe point and their leases are freed");
        worker.runtime.start_closing();
        interrupt.prompts.cancel();
        let events = worker.events.clone();
        let telemetry = worker.telemetry.clone();
        worker.close().await;
        if let Some(line) = crate::telemetry::close(telemetry.as_deref(), true).await {
            eprintln!("{line}");
        }
        events.emit(
            RUN_AGENT,
            kinds::RUN_ENDED,
            kinds::fields(serde_json::json!({"exit_code": 0, "outcome": "stopped"})),
        );
        // Every event is in the team's shared stream before the process ends.
        events.close_listeners();
        Ok(())
    }
    .await;
    console.finish();
    result
}
