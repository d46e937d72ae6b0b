//! `troupe run`: the lead's user turn, then event turns until the team is quiescent.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};
use troupe::agent::{NullObserver, TurnEnd, UsageSink};
use troupe::bootstrap::{build_team, EventOptions, LongLived, TeamSettings};
use troupe::clock::SystemClock;
use troupe::ids::RandomIds;
use troupe::prices::Cost;
use troupe::store::events::{kinds, EventSink, RUN_AGENT};
use troupe::team::{DriveOutcome, NoTeamObserver};

use crate::agent_setup::{
    approval_provider, context_window, models, no_terminal_notice, settings_for_agents, Models,
};
use crate::args::{ApprovalMode, RunArgs};
use crate::error::{CliError, Kind};
use crate::input::{parse_duration, text_or_stdin};
use crate::interrupt::{self, Interrupt};
use crate::observe::approval::PausingApproval;
use crate::observe::json::JsonLines;
use crate::observe::{Console, Sink};
use crate::render;
use crate::store_choice::store_choice;

pub async fn run(workspace: &Path, mut args: RunArgs, verbose: u8) -> Result<(), CliError> {
    // `--continue` has no prompt: the work is what an earlier run left.
    if let Some(raw) = &args.prompt {
        let prompt = text_or_stdin(raw, "--prompt")?;
        if prompt.trim().is_empty() {
            return Err(CliError::usage("--prompt must not be blank".into()));
        }
        args.prompt = Some(prompt);
    }
    if args.team.max_turns == 0 {
        return Err(CliError::usage("--max-turns must be at least 1".into()));
    }
    if args.team.max_tokens == Some(0) {
        return Err(CliError::usage("--max-tokens must be at least 1".into()));
    }
    if args.watch {
        if args.team.approval == ApprovalMode::Ask {
            return Err(CliError::usage(
                "--watch cannot ask for approvals on the terminal it shows the team on; use \
                 --approval auto or --approval deny (settings rules still apply)"
                    .into(),
            )
            .with_code("watch_needs_approval_mode"));
        }
        crate::watch::need_terminal("troupe run --watch")?;
    }
    let interrupt = Interrupt::default();
    let Prepared {
        mut settings,
        sandbox_line,
    } = prepare(workspace, &args, &interrupt)?;
    let notice = (args.team.approval == ApprovalMode::Ask && !std::io::stdin().is_terminal())
        .then(|| no_terminal_notice(&settings.settings.approvals, false));
    // The view: the event stream itself on stdout (`--json`), or the terminal view on stderr,
    // whose spinners step aside while the approval prompt is up.
    // With --watch the view reads the stream itself: nothing else writes to the terminal.
    let console =
        (!args.json && !args.watch).then(|| Arc::new(Console::new(Sink::Stderr, verbose > 0)));
    settings.events.listeners = match &console {
        Some(console) => {
            if args.team.approval == ApprovalMode::Ask {
                settings.approval = Arc::new(PausingApproval {
                    inner: settings.approval.clone(),
                    console: console.clone(),
                });
            }
            vec![console.clone()]
        }
        None if args.json => vec![Arc::new(JsonLines)],
        None => Vec::new(),
    };
    let start_line = (!args.json).then_some(sandbox_line.as_str());
    let outcome = if args.watch {
        // What the run says on stderr waits until the view is gone.
        let held = Say::Held(Mutex::default());
        let view_store = settings.store.clone();
        let outcome = crate::watch::watch_run(
            workspace,
            view_store,
            || {
                interrupt.run.cancel();
                interrupt.prompts.cancel();
            },
            drive_work(
                settings,
                Work::of(args.prompt.as_deref()),
                &interrupt,
                notice.as_deref(),
                start_line,
                &held,
            ),
        )
        .await;
        held.flush();
        outcome?
    } else {
        drive_work(
            settings,
            Work::of(args.prompt.as_deref()),
            &interrupt,
            notice.as_deref(),
            start_line,
            &Say::Now,
        )
        .await
    };
    if let Some(console) = &console {
        console.finish();
    }
    let Some(outcome) = outcome? else {
        // `--continue` found nothing left (said on stderr): nothing to print.
        return Ok(());
    };
    if args.json {
        // The answer is in the stream's last event, `run_ended`.
        return Ok(());
    }
    render::print_text(&format!("{}\n", outcome.answer))
}

/// A drive's team settings and its sandbox line, as `args` and the workspace's settings make
/// them (shared by `troupe run` and each prompt of `troupe session`). The approval provider is
/// `--approval`'s own, answered "no" when `interrupt.prompts` fires; no event listener yet:
/// the caller adds its view. Checked here: the settings files, the trust gate, the store, the
/// sandbox and the model, each refused (exit 2) before any state exists.
pub fn prepare(
    workspace: &Path,
    args: &RunArgs,
    interrupt: &Interrupt,
) -> Result<Prepared, CliError> {
    let max_cost = args.team.max_cost.map(parse_max_cost).transpose()?;
    let ttl = parse_duration(&args.team.request_ttl)?;
    // The settings files first: a bad one is exit 2 before any state exists, and so is a
    // workspace whose own files would run commands or redirect the key before the person
    // trusted it (on a terminal they are asked).
    let (loaded, mut file_settings) = settings_for_agents(workspace)?;
    if let Some(isolation) = args.team.isolation {
        file_settings.team.isolation = Some(troupe::settings::Sourced {
            value: isolation,
            source: troupe::settings::Source::Flag("--isolation".into()),
        });
    }
    // The flag over `[run] max_cost`.
    let max_run_cost = max_cost.or(file_settings.run.max_cost.as_ref().map(|c| c.value));
    let store = store_choice(&args.team.store, &file_settings, !args.no_local_workers)?;
    if args.no_local_workers && store.shared().is_none() {
        return Err(CliError::usage(
            "--no-local-workers needs --store postgres://…: without a shared store no other \
             process can run the teammates"
                .into(),
        ));
    }
    // Then the sandbox: a machine that cannot confine refuses before any state exists too.
    let (sandbox, sandbox_line) = crate::sandboxing::options(
        workspace,
        args.team.sandbox,
        &file_settings,
        args.team.approval,
    )?;
    let context_window = context_window(&args.team.model, &file_settings)?;
    let Models {
        chooser: models,
        redactor,
        name: model_name,
        provider,
    } = models(&args.team.model, &loaded)?;
    let telemetry = crate::telemetry::options(&file_settings, provider, &model_name);
    tracing::debug!(
        max_turns = args.team.max_turns,
        request_ttl = ?ttl,
        approval = ?args.team.approval,
        model = %model_name,
        "run settings"
    );
    let long_lived = LongLived {
        model_name,
        context_window,
        remember: !args.team.no_memory,
        max_run_tokens: args.team.max_tokens,
        max_run_cost,
        new_session: args.team.new_session,
    };
    let approval = approval_provider(args.team.approval, &interrupt.prompts, workspace);
    let settings = TeamSettings {
        workspace: workspace.to_path_buf(),
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
        models,
        approval,
        run_observer: Arc::new(NullObserver),
        team_observer: Arc::new(NoTeamObserver),
        max_turns: args.team.max_turns,
        request_ttl: ttl,
        shell_timeout: troupe::tools::shell::DEFAULT_TIMEOUT,
        watch: true,
        require_plans: args.team.require_plans,
        redactor,
        long_lived,
        events: EventOptions {
            listeners: Vec::new(),
            // Empty for `--continue` (`run_started` then says `continued`).
            prompt: args.prompt.clone().unwrap_or_default(),
            telemetry,
        },
        settings: file_settings,
        sandbox,
        // Started in `drive`, inside the runtime.
        mcp: Default::default(),
        store,
    };
    Ok(Prepared {
        settings,
        sandbox_line,
    })
}

/// What [`prepare`] makes.
pub struct Prepared {
    pub settings: TeamSettings,
    /// The sandbox, in one line, said when the team is built.
    pub sandbox_line: String,
}

/// `--max-cost`: USD above 0, as a cost.
fn parse_max_cost(usd: f64) -> Result<Cost, CliError> {
    Cost::from_usd(usd)
        .filter(|cost| *cost > Cost::ZERO)
        .ok_or_else(|| {
            CliError::usage(format!(
                "--max-cost must be a number of USD above 0 and at most {}, e.g. 0.50 (not {usd})",
                troupe::prices::MAX_USD
            ))
        })
}

/// Where the run's own lines on stderr go (recovered messages, the sandbox line, the closing
/// usage line): out at once, or held while the terminal view is up and said after it.
pub enum Say {
    Now,
    Held(Mutex<Vec<String>>),
}

impl Say {
    /// `line` may quote recovered messages or a server's words: shown, never obeyed.
    fn line(&self, line: String) {
        let line = troupe::terminal_text::for_terminal(&line).into_owned();
        match self {
            Self::Now => eprintln!("{line}"),
            Self::Held(lines) => troupe::sync::lock(lines).push(line),
        }
    }

    /// Says the held lines.
    fn flush(self) {
        if let Self::Held(lines) = self {
            for line in lines.into_inner().unwrap_or_else(|p| p.into_inner()) {
                eprintln!("{line}");
            }
        }
    }
}

/// Builds the team, drives it to quiescence (or Ctrl-C, see [`interrupt`]), closes it, and ends
/// the event stream with `run_ended`. `notice`, if any, is said once the team is built, then
/// `start_line` (the sandbox, shown as is) when there is one. A turn
/// limit or a spent token or cost budget is an error (exit 3). Errors after the team exists are
/// [`CliError::in_stream`]: `run_ended` carries them.
pub async fn drive(
    settings: TeamSettings,
    prompt: &str,
    interrupt: &Interrupt,
    notice: Option<&str>,
    start_line: Option<&str>,
    say: &Say,
) -> Result<DriveOutcome, CliError> {
    drive_work(
        settings,
        Work::Prompt(prompt),
        interrupt,
        notice,
        start_line,
        say,
    )
    .await?
    .ok_or_else(|| CliError::failed("the run had no prompt to answer"))
}

/// What a drive does: answer a prompt, or continue what an earlier run left.
#[derive(Debug, Clone, Copy)]
pub enum Work<'a> {
    Prompt(&'a str),
    /// `troupe run --continue`.
    Continue,
}

impl<'a> Work<'a> {
    /// The prompt's work, or `--continue`'s when there is none.
    pub fn of(prompt: Option<&'a str>) -> Self {
        prompt.map_or(Self::Continue, Self::Prompt)
    }
}

/// [`drive`] for either kind of work; `None` when `Work::Continue` found nothing to continue
/// (said on stderr; the team is closed again and the run ends with exit 0).
pub async fn drive_work(
    settings: TeamSettings,
    work: Work<'_>,
    interrupt: &Interrupt,
    notice: Option<&str>,
    start_line: Option<&str>,
    say: &Say,
) -> Result<Option<DriveOutcome>, CliError> {
    // A run with a cost budget counts its cost, and says what it came to.
    let priced = settings.long_lived.max_run_cost.is_some();
    let cancel = &interrupt.run;
    // Ctrl-C is the run's until the drive ends.
    let _listening = interrupt::listen(cancel.clone())?;
    let mut settings = settings;
    crate::agent_setup::start_mcp(&mut settings).await;
    let mcp = settings.mcp.clone();
    let mut team = match build_team(settings).await {
        Ok(team) => team,
        Err(e) => {
            mcp.stop().await;
            return Err(CliError::coded(&e));
        }
    };
    tracing::info!(
        run_id = team.events.run_id(),
        events = %team.events.path().display(),
        "team built"
    );
    if team.recovered > 0 {
        say.line(format!(
            "troupe: recovered {} message(s) left in processing by an earlier run",
            team.recovered
        ));
    }
    if let Some(kept) = &team.earlier_session {
        say.line(format!(
            "troupe: new session; the lead's earlier conversation is kept in {}",
            kept.display()
        ));
    }
    if let Some(notice) = notice {
        say.line(format!("troupe: {notice}"));
    }
    if let Some(line) = start_line {
        say.line(line.to_owned());
    }
    // On Ctrl-C the teammates are told to stop first, then the prompts end: a teammate
    // whose prompt was just answered "no" finds its team closing at its next safe point
    // instead of going on to another model call and finishing its message.
    let teammates = team.runtime.clone();
    let (interrupted, prompts) = (cancel.clone(), interrupt.prompts.clone());
    let closer = tokio::spawn(async move {
        interrupted.cancelled().await;
        teammates.start_closing();
        prompts.cancel();
    });
    let mut driver = team.driver();
    let result = match work {
        Work::Prompt(prompt) => driver.run(&mut team.lead, prompt, cancel).await.map(Some),
        Work::Continue => driver.resume(&mut team.lead, cancel).await,
    };
    if matches!(result, Ok(None)) {
        say.line(NOTHING_TO_CONTINUE.to_owned());
    }
    if matches!(result, Ok(Some(_))) && !cancel.is_cancelled() {
        // What this run taught: new memories from the lead's part of the conversation.
        team.lead.remember_run().await;
    }
    let usage = team.usage.clone();
    let events = team.events.clone();
    let telemetry = team.telemetry.clone();
    team.close().await;
    // The team is gone: nothing is left for an interrupt to close.
    closer.abort();
    let result = if cancel.is_cancelled() {
        Err(CliError::interrupted(
            "interrupted; the team was closed and in-flight messages went back to ready/".into(),
        )
        .with_code("interrupted"))
    } else {
        match result {
            Ok(Some(outcome)) => finished(outcome).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(CliError::coded(&e)),
        }
    };
    // The run's last spans, waited for a bounded time; drops said once.
    if let Some(line) = crate::telemetry::close(telemetry.as_deref(), result.is_ok()).await {
        say.line(line);
    }
    events.emit(RUN_AGENT, kinds::RUN_ENDED, run_ended(&result));
    // An empty final answer prints an empty line on stdout; say why, once. The run still
    // succeeded (exit 0): the model did answer, with nothing.
    if result
        .as_ref()
        .is_ok_and(|outcome| outcome.as_ref().is_some_and(|o| o.answer.trim().is_empty()))
    {
        say.line(EMPTY_ANSWER.to_owned());
    }
    let spent = usage.per_agent();
    if !spent.is_empty() {
        say.line(troupe::agent::usage::render_closing_line(&spent));
    }
    if priced {
        say.line(format!("estimated cost: {}", usage.run_cost().text()));
    }
    result.map_err(|e| e.in_stream())
}

/// Said on stderr when `--continue` finds nothing an earlier run left.
const NOTHING_TO_CONTINUE: &str =
    "troupe: nothing to continue: no unanswered turn, queued message, unfinished teammate or \
     open request";

/// Said on stderr when the lead's final answer has no text.
const EMPTY_ANSWER: &str = "the model's answer was empty: it stopped without any text";

/// A drive that ended without the lead's final answer is incomplete (exit 3).
fn finished(outcome: DriveOutcome) -> Result<DriveOutcome, CliError> {
    match outcome.last_end {
        TurnEnd::MaxTurns { limit } => Err(CliError::incomplete(format!(
            "the lead stopped after {limit} model calls without a final answer \
             (--max-turns {limit})"
        ))
        .with_code("turn_limit")),
        TurnEnd::TokenBudget { limit, used } => Err(CliError::incomplete(format!(
            "the run stopped after using {used} tokens, past its budget of {limit} \
             (--max-tokens {limit})"
        ))
        .with_code("token_budget")),
        TurnEnd::CostBudget { limit, used } => Err(CliError::incomplete(format!(
            "the run stopped at an estimated {}, past its cost budget of {} (--max-cost or \
             [run] max_cost; `troupe usage` shows the cost per agent and model)",
            used.text(),
            limit.text()
        ))
        .with_code("cost_budget")),
        _ => Ok(outcome),
    }
}

/// The fields of `run_ended`: `exit_code`, `outcome` (`done`, `failed`, `interrupted`,
/// `max_turns`, `budget`), and the lead's `answer` or the `error` (`message [code]`).
fn run_ended(result: &Result<Option<DriveOutcome>, CliError>) -> Map<String, Value> {
    match result {
        Ok(Some(outcome)) => kinds::fields(json!({
            "exit_code": 0,
            "outcome": "done",
            "answer": outcome.answer,
        })),
        Ok(None) => kinds::fields(json!({
            "exit_code": 0,
            "outcome": "done",
            "answer": "",
            "nothing_to_continue": true,
        })),
        Err(error) => {
            let code = error.code();
            let outcome = match (error.kind(), code) {
                (Kind::Interrupted, _) => "interrupted",
                (_, "turn_limit") => "max_turns",
                (_, "token_budget" | "cost_budget") => "budget",
                _ => "failed",
            };
            kinds::fields(json!({
                "exit_code": error.exit_code(),
                "outcome": outcome,
                "error": format!("{} [{code}]", error.cause()),
            }))
        }
    }
}
