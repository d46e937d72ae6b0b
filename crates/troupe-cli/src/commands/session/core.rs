//! The session's core, with no terminal in it: the workspace's team kept for a person across
//! prompts, and what a front end (the terminal's view today, an editor's later) does to it —
//! [`Core::submit`] a prompt, [`Core::send`] to an agent, [`Core::cancel`] the current work,
//! [`Core::start_fresh`] — with what comes back told through [`Core::open`]'s `said`. Answers
//! to permission asks and plans go through the same durable requests as `troupe approve` and
//! `troupe review` (see [`super::asks`]); the team's events are the workspace's stream, which a
//! front end follows.
//!
//! Each prompt is driven as one `troupe run` (`commands::run`'s `drive`, with the settings its
//! `prepare` made once when the session opened): the team is built, driven until quiescent and
//! closed; the lead's conversation is its transcript,
//! which the next prompt continues (`troupe log` shows every prompt of the session).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use troupe::agent::RunObserver;
use troupe::bootstrap::{
    compact_conversation, Compacted, EventOptions, LongLived, StoreChoice, TeamSettings,
};
use troupe::clock::{Clock, SystemClock};
use troupe::permissions::ApprovalProvider;
use troupe::settings::McpServerSpec;
use troupe::store::events::EventListener;
use troupe::team::DriveOutcome;
use troupe::wire::{AgentName, MessageId, UtcTime};

use super::asks::ViewAsks;
use crate::args::{ApprovalMode, SessionArgs};
use crate::commands::run::{drive, prepare, Prepared, Say};
use crate::error::CliError;
use crate::interrupt::Interrupt;
use crate::watch::waiting::Runtime;

/// Lines for the person (the outcome of a prompt, what a run said), told to the front end.
pub type Said = Box<dyn Fn(Vec<String>) + Send + Sync>;

/// What a front end adds to one prompt's team ([`Core::prompt`]).
#[derive(Default, Clone)]
pub struct Hooks {
    /// See every event of the prompt's team as it is written (an editor's updates, an MCP
    /// client's progress).
    pub listeners: Vec<Arc<dyn EventListener>>,
    /// Sees every agent's model and tool calls with their arguments (an editor's tool calls
    /// and diffs); none by default.
    pub observer: Option<Arc<dyn RunObserver>>,
    /// Under `--approval ask`: who asks the person, made for each prompt from the prompt's
    /// cancel (fired by [`Core::cancel`]). `None`: the session view's durable asks.
    pub asker: Option<Asker>,
}

/// Makes a prompt's approval provider from the prompt's cancel token.
pub type Asker = Arc<dyn Fn(CancellationToken) -> Arc<dyn ApprovalProvider> + Send + Sync>;

/// What [`Core::submit`] did with a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted {
    /// The team was quiescent: the line started a prompt's work.
    Started,
    /// The team was at work: the line went to the lead as a message from the person.
    SentToLead(String),
}

/// One session on one workspace.
pub struct Core {
    workspace: PathBuf,
    args: SessionArgs,
    /// The settings every prompt's team is built with, read once when the session opens: the
    /// trust gate asks (if it must) once, before the view takes the terminal; every prompt
    /// talks to the same models (a scripted model goes on through its script).
    template: TeamSettings,
    /// The prompt's work going on, if any; `None` between prompts.
    work: Mutex<Work>,
    /// Where prompts are driven (the command's one runtime).
    runtime: Runtime,
    /// True while a prompt's work goes on, for [`Core::finished`].
    working: tokio::sync::watch::Sender<bool>,
    said: Said,
}

#[derive(Default)]
struct Work {
    /// The current prompt's interrupt (fired by [`Core::cancel`]) and when it started.
    current: Option<(Interrupt, UtcTime)>,
    /// The next prompt starts the lead on a fresh conversation (`--new-session`, `/new`).
    fresh: bool,
}

impl Core {
    /// Checks the options and the workspace's settings (the trust gate asks here, on the
    /// terminal as it still is) before any front end takes the terminal.
    pub fn open(workspace: &Path, args: SessionArgs, said: Said) -> Result<Arc<Self>, CliError> {
        Self::open_with(workspace, args, said, Vec::new())
    }

    /// [`Self::open`], with MCP servers a front end brings (an editor's own, joined to the
    /// workspace's configured ones without a trust prompt: the person named them).
    pub fn open_with(
        workspace: &Path,
        args: SessionArgs,
        said: Said,
        mcp_servers: Vec<McpServerSpec>,
    ) -> Result<Arc<Self>, CliError> {
        if args.team.max_turns == 0 {
            return Err(CliError::usage("--max-turns must be at least 1".into()));
        }
        if args.team.max_tokens == Some(0) {
            return Err(CliError::usage("--max-tokens must be at least 1".into()));
        }
        let Prepared {
            settings: mut template,
            ..
        } = prepare(workspace, &args.run_args("", false), &Interrupt::default())?;
        template.settings.mcp_servers.extend(mcp_servers);
        let fresh = args.team.new_session;
        Ok(Arc::new(Self {
            workspace: workspace.to_owned(),
            template,
            args,
            work: Mutex::new(Work {
                current: None,
                fresh,
            }),
            runtime: Runtime::current(),
            working: tokio::sync::watch::Sender::new(false),
            said,
        }))
    }

    /// The run's secrets (the model's key, the credentials taken from the environment), for a
    /// front end to keep out of what it shows.
    pub fn redactor(&self) -> &troupe::secrets::Redactor {
        &self.template.redactor
    }

    /// The team's stores.
    pub fn store(&self) -> &StoreChoice {
        &self.template.store
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Whether a prompt's work is going on.
    pub fn is_working(&self) -> bool {
        troupe::sync::lock(&self.work).current.is_some()
    }

    /// When the current prompt's work started, if there is any: asks made before it have no
    /// call waiting for them any more (an interrupted call leaves its request to expire).
    pub fn working_since(&self) -> Option<UtcTime> {
        troupe::sync::lock(&self.work)
            .current
            .as_ref()
            .map(|(_, since)| *since)
    }

    /// `text` to the lead: a new prompt when the team is quiescent, else a message from the
    /// person (as `troupe send lead TEXT`). Called from a front end's thread, not the runtime's.
    pub fn submit(self: &Arc<Self>, text: &str) -> Result<Submitted, CliError> {
        let Some((interrupt, fresh)) = self.start_work() else {
            let id = self.send(&AgentName::lead(), text)?;
            return Ok(Submitted::SentToLead(id.to_string()));
        };
        let core = self.clone();
        let prompt = text.to_owned();
        self.runtime.spawn(async move {
            let (outcome, mut said) = core
                .turn(&prompt, &interrupt, fresh, Hooks::default())
                .await;
            core.end_work();
            match outcome {
                Ok(_) => said.push("the team is quiescent; type the next prompt".into()),
                Err(e) => said.push(format!("troupe: {e}")),
            }
            (core.said)(said);
        });
        Ok(Submitted::Started)
    }

    /// One prompt's work, to its end: the lead's turn on `text`, then the team until
    /// quiescent, with the front end's `hooks`. Refused (`session_busy`) while a prompt's work
    /// goes on. What the run said (recovered messages, the closing usage line) goes to the
    /// session's `said`; the outcome comes back (an interrupt by [`Core::cancel`] is the
    /// `interrupted` error, as for `troupe run`).
    pub async fn prompt(&self, text: &str, hooks: Hooks) -> Result<DriveOutcome, CliError> {
        let Some((interrupt, fresh)) = self.start_work() else {
            return Err(CliError::usage(
                "a prompt's work is going on in this session; wait for it, or cancel it".into(),
            )
            .with_code("session_busy"));
        };
        let (outcome, said) = self.turn(text, &interrupt, fresh, hooks).await;
        self.end_work();
        if !said.is_empty() {
            (self.said)(said);
        }
        outcome
    }

    /// Marks a prompt's work as started: its interrupt, and whether it starts fresh; `None`
    /// when work goes on already.
    fn start_work(&self) -> Option<(Interrupt, bool)> {
        let mut work = troupe::sync::lock(&self.work);
        if work.current.is_some() {
            return None;
        }
        let interrupt = Interrupt::default();
        work.current = Some((interrupt.clone(), SystemClock.now()));
        self.working.send_replace(true);
        Some((interrupt, std::mem::take(&mut work.fresh)))
    }

    fn end_work(&self) {
        troupe::sync::lock(&self.work).current = None;
        self.working.send_replace(false);
    }

    /// `text` to `agent` as a message from the person, through `troupe send`'s path.
    pub fn send(&self, agent: &AgentName, text: &str) -> Result<MessageId, CliError> {
        self.runtime.wait(crate::user_message::send_as_user(
            &self.workspace,
            &self.template.store,
            agent,
            text,
        ))
    }

    /// Stops the current prompt's work as `troupe run`'s Ctrl-C does (the team closed at a
    /// safe point, in-flight messages back to `ready/`, waiting asks answered no); the session
    /// stays. Whether there was work to stop.
    pub fn cancel(&self) -> bool {
        match &troupe::sync::lock(&self.work).current {
            Some((interrupt, _)) => {
                interrupt.run.cancel();
                interrupt.prompts.cancel();
                true
            }
            None => false,
        }
    }

    /// Waits until no prompt's work goes on (the team closed).
    pub async fn finished(&self) {
        let mut working = self.working.subscribe();
        let _ = working.wait_for(|working| !*working).await;
    }

    /// Compacts `agent`'s conversation now, as `troupe compact` does, with the session's model;
    /// not while the team works (the run holds the workspace). What it did, in one line.
    pub fn compact(&self, agent: &AgentName) -> Result<String, CliError> {
        if self.is_working() {
            return Err(CliError::usage(
                "/compact waits until the team is quiescent (Ctrl-C stops the work)".into(),
            ));
        }
        let compacted = self
            .runtime
            .wait(compact_conversation(
                &self.workspace,
                agent,
                self.template.models.model_for(agent),
                &self.template.long_lived,
                &self.template.store,
            ))
            .map_err(|e| CliError::coded(&e))?;
        Ok(match compacted {
            Compacted::Done(report) => format!(
                "{agent}: compacted, {} messages → {} ({} KB → {} KB)",
                report.messages_before,
                report.messages_after,
                report.bytes_before / 1024,
                report.bytes_after / 1024
            ),
            Compacted::Nothing { messages, .. } => {
                format!("{agent}: nothing older to compact ({messages} messages)")
            }
        })
    }

    /// The next prompt starts the lead on a fresh conversation (the old one kept).
    pub fn start_fresh(&self) {
        troupe::sync::lock(&self.work).fresh = true;
    }

    /// One prompt, driven as `troupe run` drives it: its outcome, and what the run said.
    async fn turn(
        &self,
        prompt: &str,
        interrupt: &Interrupt,
        fresh: bool,
        hooks: Hooks,
    ) -> (Result<DriveOutcome, CliError>, Vec<String>) {
        let settings = self.settings_for(prompt, interrupt, fresh, hooks);
        let held = Say::Held(Mutex::default());
        let outcome = drive(settings, prompt, interrupt, None, None, &held).await;
        let lines = match held {
            Say::Held(lines) => lines.into_inner().unwrap_or_else(|p| p.into_inner()),
            Say::Now => Vec::new(),
        };
        (outcome, lines)
    }

    /// The session's settings for one prompt's team: the template's, with the prompt, a fresh
    /// conversation if asked, no MCP servers yet (`drive` starts them) and, under `--approval
    /// ask`, asks as durable requests that the view (or `troupe approve`) answers.
    fn settings_for(
        &self,
        prompt: &str,
        interrupt: &Interrupt,
        fresh: bool,
        hooks: Hooks,
    ) -> TeamSettings {
        let t = &self.template;
        let approval: Arc<dyn ApprovalProvider> = match (self.args.team.approval, hooks.asker) {
            (ApprovalMode::Ask, Some(asker)) => asker(interrupt.prompts.clone()),
            (ApprovalMode::Ask, None) => Arc::new(ViewAsks::new(
                interrupt.prompts.clone(),
                crate::save_allow::saver(&self.workspace),
            )),
            _ => t.approval.clone(),
        };
        TeamSettings {
            workspace: t.workspace.clone(),
            clock: t.clock.clone(),
            ids: t.ids.clone(),
            models: t.models.clone(),
            approval,
            run_observer: hooks.observer.unwrap_or_else(|| t.run_observer.clone()),
            team_observer: t.team_observer.clone(),
            max_turns: t.max_turns,
            request_ttl: t.request_ttl,
            shell_timeout: t.shell_timeout,
            watch: t.watch,
            require_plans: t.require_plans,
            redactor: t.redactor.clone(),
            long_lived: LongLived {
                new_session: fresh,
                ..t.long_lived.clone()
            },
            events: EventOptions {
                listeners: hooks.listeners,
                prompt: prompt.to_owned(),
                telemetry: t.events.telemetry.clone(),
            },
            settings: t.settings.clone(),
            sandbox: t.sandbox.clone(),
            mcp: Default::default(),
            store: t.store.clone(),
        }
    }
}
