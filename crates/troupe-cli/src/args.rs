//! Raw command-line arguments (clap). Validation into settings happens in `commands`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "troupe",
    version,
    about = "Run a team of LLM agents on one workspace"
)]
pub struct Cli {
    /// The workspace folder (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// More output on stderr: -v shows every event of a run and info logs, -vv debug logs
    /// (RUST_LOG, when set, chooses the logs instead).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Trust the workspace's own troupe.toml and .env for this command (hooks, MCP servers, the
    /// model server, allow rules, a looser sandbox) without recording it: for CI. Also
    /// TROUPE_TRUST_WORKSPACE=1. See `troupe trust`.
    #[arg(long, global = true)]
    pub trust_workspace: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// How `write` and `execute` tools are approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApprovalMode {
    /// Ask on the terminal; with no terminal, deny and say how to allow.
    Ask,
    /// Allow whatever the rules do not deny.
    Auto,
    /// Deny whatever needs approval.
    Deny,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task for the lead; `-` reads it from standard input.
    #[arg(long, required_unless_present = "continue_run")]
    pub prompt: Option<String>,
    /// No new prompt: finish what an interrupted run left — the lead's unanswered turn, queued
    /// messages, teammates' unfinished work, open requests — and exit when the team is
    /// quiescent ("nothing to continue": exit 0).
    #[arg(long = "continue", conflicts_with = "prompt")]
    pub continue_run: bool,
    #[command(flatten)]
    pub team: TeamFlags,
    /// Print the run's event stream as JSON lines on stdout instead of the answer; the last
    /// event, `run_ended`, carries the answer or the error.
    #[arg(long)]
    pub json: bool,
    /// Show the run in the full-screen view of `troupe watch` instead of lines on stderr (needs
    /// a terminal, and --approval auto or deny: the view cannot ask). Leaving the view (q,
    /// Ctrl-C) while the run goes stops it as Ctrl-C does; the answer is printed after it.
    #[arg(long, conflicts_with = "json")]
    pub watch: bool,
    /// With --store: run no teammate in this process; `troupe worker` processes run them all.
    #[arg(long)]
    pub no_local_workers: bool,
}

/// How a team is run, for every command that drives one from a person's prompts (`troupe
/// run`, `troupe session`): approvals, limits, the model, plans, isolation, budgets, memory,
/// the sandbox and the store.
#[derive(Debug, Clone, Args)]
pub struct TeamFlags {
    /// How write and execute tools are approved (in a session, `ask` asks in its view; under
    /// `acp`, in the editor; under `mcp serve`, through the MCP client).
    #[arg(long, value_enum, default_value_t = ApprovalMode::Ask)]
    pub approval: ApprovalMode,
    /// The most model calls in one turn of any agent.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub max_turns: usize,
    /// The response window of protocol requests, e.g. 90s, 5m, 1h30m.
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub request_ttl: String,
    #[command(flatten)]
    pub model: ModelFlags,
    /// Gate every teammate of this run from its first tool call until the lead approves a plan
    /// of its (as if each were spawned with plan_required); without it, only teammates spawned
    /// with plan_required are, and the others only once they submit a plan.
    #[arg(long)]
    pub require_plans: bool,
    /// Where teammates work when spawn_teammate names no isolation: `worktree` (each in its own
    /// git worktree and branch, merged back with merge_teammate; the workspace must be a git
    /// repository) or `none` (the lead's checkout). Over `[team] isolation`.
    #[arg(long, value_name = "MODE", value_parser = parse_isolation)]
    pub isolation: Option<troupe_wire::Isolation>,
    /// Start the lead on a fresh conversation; the old transcript is kept as lead.<n>.jsonl.
    #[arg(long)]
    pub new_session: bool,
    /// Stop the run (in a session: the prompt's work) gracefully, exit 3, once all agents
    /// together have used N tokens.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Stop the run (in a session: the prompt's work) gracefully, exit 3, once the estimated
    /// cost of all agents' model calls reaches USD dollars, by the price table (`[prices]` over
    /// the built-in one); a model with no price counts 0. Over `[run] max_cost`.
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<f64>,
    /// Do not extract memories from this run's conversations (selection of existing ones stays).
    #[arg(long)]
    pub no_memory: bool,
    /// How the commands agents run are confined: workspace-write (the default: writes only in
    /// the workspace and the temp folder, no network), read-only, or off.
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<troupe::sandbox::Mode>,
    #[command(flatten)]
    pub store: StoreFlags,
}

/// `troupe session` (and bare `troupe` on a terminal): the options of `troupe run` that make
/// sense for a session a person drives; each prompt is driven as a run with them
/// ([`SessionArgs::run_args`]).
#[derive(Debug, Args)]
pub struct SessionArgs {
    #[command(flatten)]
    pub team: TeamFlags,
}

impl SessionArgs {
    /// The arguments of the `troupe run` one prompt is driven as; `new_session` for the
    /// session's first prompt with `--new-session`, or after `/new`.
    pub fn run_args(&self, prompt: &str, new_session: bool) -> RunArgs {
        RunArgs {
            prompt: Some(prompt.to_owned()),
            continue_run: false,
            team: TeamFlags {
                new_session,
                ..self.team.clone()
            },
            json: false,
            watch: false,
            no_local_workers: false,
        }
    }
}

/// Which model answers, for the commands that call one.
#[derive(Debug, Clone, Args)]
pub struct ModelFlags {
    /// The model server's wire format: openai (or any compatible server), azure, anthropic.
    /// Overrides TROUPE_PROVIDER and `[model] provider`; inferred when unset.
    #[arg(long, value_name = "PROVIDER", value_parser = parse_provider)]
    pub provider: Option<troupe::model::config::Provider>,
    /// Overrides OPENAI_MODEL (ANTHROPIC_MODEL for Anthropic).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Overrides OPENAI_BASE_URL (ANTHROPIC_BASE_URL, AZURE_OPENAI_ENDPOINT).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Overrides OPENAI_FALLBACK_MODEL.
    #[arg(long, value_name = "NAME")]
    pub fallback_model: Option<String>,
    /// Answer every agent from a scripted model file instead of a server (no network, no key).
    #[arg(long, value_name = "FILE", conflicts_with = "model_recording")]
    pub model_script: Option<PathBuf>,
    /// Answer every agent from a recorded run (`.troupe/recordings/<run>.jsonl`): each agent
    /// gets its recorded answers in order, whatever it asks (no network, no key; `troupe
    /// replay` is the one that compares the requests).
    #[arg(long, value_name = "FILE")]
    pub model_recording: Option<PathBuf>,
    /// The model's context window in tokens, overriding the built-in table
    /// (also TROUPE_CONTEXT_WINDOW).
    #[arg(long, value_name = "TOKENS")]
    pub context_window: Option<u32>,
}

/// Where a team's stores are, for the commands that open them.
#[derive(Debug, Clone, Default, Args)]
pub struct StoreFlags {
    /// Put every shared store in PostgreSQL (postgres://…) instead of files under .troupe/, so
    /// that teammates can run in `troupe worker` processes on other hosts (also
    /// TROUPE_STORE_URL).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// With --store: the team's key in the database; teams sharing one database are told
    /// apart by it (also TROUPE_TEAM; default: `default`).
    #[arg(long, value_name = "KEY")]
    pub team: Option<String>,
    /// Use this workspace's own files under .troupe/ even when TROUPE_STORE_URL or a
    /// `[store] url` names a shared store.
    #[arg(long, conflicts_with_all = ["store", "team"])]
    pub local: bool,
}

/// `troupe replay`: a recorded run played again.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The run: its id (or a unique prefix of at least 8 characters), `last`, or a recording
    /// file.
    pub run: String,
    /// Rebuild the starting point in this folder (new or empty) and leave it there (default:
    /// a temporary folder, removed at the end).
    #[arg(long, value_name = "DIR")]
    pub into: Option<PathBuf>,
    /// Stop after this call of the recorded global order (numbered from 1), leaving --into DIR
    /// as a workspace at that point: `troupe run --workspace DIR --continue` goes on from it.
    #[arg(long, value_name = "CALL", requires = "into")]
    pub until: Option<usize>,
    /// At the first difference, go on with the configured model instead of stopping.
    #[arg(long)]
    pub live_after_divergence: bool,
    /// The model to go on with after a divergence (as `troupe run`'s flags).
    #[command(flatten)]
    pub model: ModelFlags,
    /// How long replay waits for the call that comes next in the recorded order before it
    /// says the run stalled (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub stall_timeout: String,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    /// Where the recordings are: a shared team's database (the replay itself runs on files).
    #[command(flatten)]
    pub store: StoreFlags,
}

/// `troupe eval`: a suite of cases run and checked.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The suite file (TOML).
    pub suite: PathBuf,
    /// How many repetitions run at once.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub jobs: usize,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the report as JUnit XML to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// `troupe worker`: runs teammates of a shared team in this process and workspace.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub store: StoreFlags,
    /// How write and execute tools are approved.
    #[arg(long, value_enum, default_value_t = ApprovalMode::Ask)]
    pub approval: ApprovalMode,
    /// The most model calls in one turn of any agent.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub max_turns: usize,
    /// The response window of protocol requests this worker's teammates make, e.g. 5m.
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub request_ttl: String,
    #[command(flatten)]
    pub model: ModelFlags,
    /// Do not extract memories from its teammates' conversations.
    #[arg(long)]
    pub no_memory: bool,
    /// How the commands its teammates run are confined: workspace-write (default), read-only,
    /// or off.
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<troupe::sandbox::Mode>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the lead on a prompt, then keep the team going until it is quiescent.
    Run(RunArgs),
    /// Run teammates of a team shared through PostgreSQL (--store), in this workspace, until
    /// Ctrl-C or SIGTERM: it leases teammates as their messages arrive and takes over those of
    /// a worker that died.
    Worker(WorkerArgs),
    /// A scripted team scenario: no network, no key, approvals automatic.
    Demo {
        /// The workspace folder (default: a fresh temporary folder; a folder you name must not
        /// hold troupe state or a NOTES.md, which the demo writes).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// A person answers a pending plan request as the lead, while a run is going.
    #[command(group(clap::ArgGroup::new("decision").required(true).args(["approve", "reject"])))]
    Review {
        /// The plan request's id, or a unique prefix of it (at least 8 characters).
        request_id: String,
        /// Approve the plan.
        #[arg(long)]
        approve: bool,
        /// Reject the plan.
        #[arg(long)]
        reject: bool,
        /// What the teammate is told.
        #[arg(long)]
        feedback: Option<String>,
        #[command(flatten)]
        store: StoreFlags,
    },
    /// Approve a pending permission request (a tool call waiting for a person), from any
    /// terminal, while a run is going; one answer per request, the first wins.
    Approve {
        /// The permission request's id, or a unique prefix of it (at least 8 characters).
        request_id: String,
        /// Also allow the request's suggested entry (`shell(cargo test:*)`) for the rest of the run.
        #[arg(long, conflicts_with = "save")]
        always: bool,
        /// As --always, and save the entry to this workspace's troupe.toml.
        #[arg(long)]
        save: bool,
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreFlags,
    },
    /// Deny a pending permission request, from any terminal; the reason is what the agent is told.
    Deny {
        /// The permission request's id, or a unique prefix of it (at least 8 characters).
        request_id: String,
        /// What the agent is told.
        #[arg(long)]
        reason: Option<String>,
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreFlags,
    },
    /// Send a message from you (sender `user`) to the lead or a teammate; a running team picks
    /// it up at once, otherwise the next run does.
    Send {
        /// The lead (`lead`) or a teammate that has not failed or shut down.
        agent: String,
        /// The message; `-` reads it from standard input.
        text: String,
        /// Print the message id as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreFlags,
    },
    /// Teammates and their status, mailbox counts per state, pending requests.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreFlags,
    },
    /// Protocol requests; expired pending requests show as `expired`.
    Requests {
        /// Only requests with this status: pending, approved, rejected or expired.
        #[arg(long, value_name = "S")]
        status: Option<String>,
        /// Print JSON (`{"requests":[…]}`) instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreFlags,
    },
    /// Tokens (prompt, completion, cache read, cache write) and their estimated cost, per agent,
    /// model or day and in total, from .troupe/usage.jsonl (a shared team's: every process's).
    Usage(UsageArgs),
    /// Remove what [retention] lets go (done messages, archived requests, earlier
    /// conversations, artifacts nothing refers to, old events, merged worktrees, finished jobs,
    /// recordings; usage compacted into daily totals), and say what was kept and why. Safe
    /// beside a running team.
    Gc {
        /// Say what would be removed; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreFlags,
    },
    /// Background shell jobs and their status (running, completed, failed, cancelled, timed_out).
    Jobs {
        /// Print JSON (`{"jobs":[…]}`) instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreFlags,
    },
    /// The durable cron jobs in `.troupe/cron.json`, soonest first.
    Cron {
        /// Print JSON (`{"jobs":[…]}`) instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreFlags,
    },
    /// The task board: every task with its status, owner and open blockers.
    Tasks {
        /// Print JSON (`{"tasks":[…]}`) instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreFlags,
    },
    /// Teammates' git worktrees (isolation "worktree"): branch, base, ahead/behind the lead's
    /// HEAD, uncommitted changes, merged.
    Worktrees {
        /// Print JSON (`{"worktrees":[…]}`) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The messages of one agent's mailbox.
    Mailbox {
        /// The agent (a lowercase slug, e.g. `lead`).
        agent: String,
        /// Only one folder: ready, processing, done or quarantine.
        #[arg(long, value_name = "S")]
        state: Option<String>,
        /// Print JSON (`{"agent":…,"messages":[…]}`) instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreFlags,
    },
    /// Compact an agent's conversation now: older history summarised, recent exchanges kept.
    Compact {
        /// Whose conversation: lead (the default) or a teammate's name.
        #[arg(long, value_name = "NAME", default_value = "lead")]
        agent: String,
        #[command(flatten)]
        model: ModelFlags,
        /// Do not extract memories from what is summarised.
        #[arg(long)]
        no_memory: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreFlags,
    },
    /// The durable memory records in `.troupe/memory` (default: list them).
    Memory {
        /// What to do: list (the default), show NAME or forget NAME.
        #[command(subcommand)]
        action: Option<MemoryAction>,
        /// Print JSON instead of text.
        #[arg(long, global = true)]
        json: bool,
        /// A shared team's records, in its PostgreSQL database (also TROUPE_STORE_URL).
        #[arg(long, value_name = "URL", global = true)]
        store: Option<String>,
        /// With --store: the team's key (also TROUPE_TEAM; default: `default`).
        #[arg(long, value_name = "KEY", global = true)]
        team: Option<String>,
    },
    /// A live web view of the workspace on 127.0.0.1 (the address, with its access token, is
    /// printed); serves until Ctrl-C.
    Serve {
        /// The port to listen on; 0 picks a free one.
        #[arg(long, value_name = "N", default_value_t = 0)]
        port: u16,
        /// A shared team, from its database.
        #[command(flatten)]
        store: StoreFlags,
    },
    /// A session you drive on this terminal (what bare `troupe` opens on a terminal): the
    /// team's panes and a prompt line; each prompt goes to the lead and the team works until
    /// quiescent, the lead's conversation going on across prompts. /help lists its commands.
    Session(SessionArgs),
    /// An agent for your editor (Zed, JetBrains, Neovim, Emacs): speaks the Agent Client
    /// Protocol on stdin and stdout. A session is a workspace and its lead's conversation;
    /// the team's tool calls, diffs, plan and permission asks show in the editor.
    Acp(SessionArgs),
    /// Replay a recorded run with no key and no network: the same prompt from the same
    /// starting point, with today's settings, prompts, definitions and tools, every model call
    /// answered from the recording in its recorded order; stops (exit 1) at the first request
    /// that differs from the recorded one, with a diff.
    Replay(ReplayArgs),
    /// Evaluate a team: run each case of a suite (prompt, fixture, model, checks) in fresh
    /// copies, and report pass rates, tokens, cost and time (exit 1 when a case passes less
    /// often than its min_pass).
    Eval(EvalArgs),
    /// The team in a full-screen terminal view: one pane per agent, pending plan requests,
    /// tokens; keys answer a plan and message an agent (q quits). Follows the live stream.
    Watch {
        /// A shared team, from its database.
        #[command(flatten)]
        store: StoreFlags,
    },
    /// Write the event timeline as one self-contained HTML file (works offline).
    Timeline {
        /// The HTML file to write (replaced if it exists; not inside .troupe/).
        #[arg(long, value_name = "FILE")]
        html: PathBuf,
        /// A shared team's whole stream, from its database.
        #[command(flatten)]
        store: StoreFlags,
    },
    /// The run's event stream (`.troupe/events.jsonl`), during or after a run; creates nothing.
    Log(LogArgs),
    /// The effective settings (model, permission rules, hooks) and where each value came from:
    /// flags > environment > .env > troupe.toml > the user's config.toml > defaults. Creates
    /// nothing.
    Config {
        #[command(flatten)]
        model: ModelFlags,
        /// The store values as a command with these flags would use them.
        #[command(flatten)]
        store: StoreFlags,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write a commented troupe.toml for the workspace: a model for the key the environment
    /// has (OpenAI, Anthropic), or a scripted model file beside it when there is none; add
    /// .troupe/ to .gitignore in a git repository; trust what it wrote. Never overwrites.
    Init {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Review what the workspace's own troupe.toml and .env would do that needs your trust
    /// (hooks and MCP servers it would run, the server your API key would go to, allow rules, a
    /// looser sandbox) and trust it. Recorded in your config folder (trusted.json), per
    /// workspace and per content: a later change to those values needs trust again.
    Trust {
        /// Show what needs trust and whether it is trusted; change nothing.
        #[arg(long, conflicts_with_all = ["revoke", "yes"])]
        show: bool,
        /// Forget the trust in this workspace.
        #[arg(long, conflicts_with = "yes")]
        revoke: bool,
        /// Trust without asking (no terminal needed).
        #[arg(long)]
        yes: bool,
    },
    /// MCP: `list` shows the servers of the settings (`[[mcp_servers]]`), each started briefly
    /// to show its state and tools (creates nothing); `serve` is troupe as an MCP server on
    /// stdin and stdout, for a client to hand work to the team.
    Mcp {
        #[command(subcommand)]
        action: McpAction,
        /// Print JSON instead of text.
        #[arg(long, global = true)]
        json: bool,
    },
    /// Print a shell completion script for troupe, e.g. `troupe completions bash`.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// What each line of the table is: an agent, a model, or a UTC day.
    #[arg(long, value_enum, default_value_t = UsageGroup::Agent)]
    pub by: UsageGroup,
    /// Only usage recorded in this long before now, e.g. 1h, 7d, 90m.
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// Print JSON (`{"by":…,"since":…,"groups":[…],"total":{…}}`) instead of text.
    #[arg(long)]
    pub json: bool,
    /// A shared team's usage, every process's, from its database.
    #[command(flatten)]
    pub store: StoreFlags,
}

/// The lines of `troupe usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UsageGroup {
    /// One line per agent.
    Agent,
    /// One line per model, as the server named it.
    Model,
    /// One line per UTC day.
    Day,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Keep following: print new events as they are appended (until Ctrl-C or the reader of
    /// stdout goes away); waits for the stream if there is none yet.
    #[arg(short, long)]
    pub follow: bool,
    /// With --follow: stop once the run being followed ends (its `run_ended`) — the run going
    /// on when the follower starts, else the next one to start.
    #[arg(long, requires = "follow")]
    pub until_end: bool,
    /// Only events about this agent (repeatable), e.g. `lead`, or `troupe` for the run itself.
    #[arg(long, value_name = "A")]
    pub agent: Vec<String>,
    /// Only events of this kind (repeatable), e.g. `tool_finished`.
    #[arg(long, value_name = "K")]
    pub kind: Vec<String>,
    /// Only events after this sequence number.
    #[arg(long, value_name = "SEQ")]
    pub since: Option<u64>,
    /// Print each event as its JSON line, exactly as stored.
    #[arg(long)]
    pub json: bool,
    /// A shared team's whole stream (every process's events, in the team's order; `seq` is
    /// that order), read from its database.
    #[command(flatten)]
    pub store: StoreFlags,
}

/// What `troupe mcp` does.
#[derive(Debug, Clone, Subcommand)]
pub enum McpAction {
    /// Every configured server, its state (up, failed, down) and its tools.
    List,
    /// Troupe as an MCP server on stdin/stdout, for an MCP client (Claude Code, codex, Cursor)
    /// to hand work to the workspace's team: tools `troupe_run`, `troupe_status`,
    /// `troupe_send`, `troupe_answer`. Logs go to stderr; stdout is the protocol's.
    Serve(Box<McpServeArgs>),
}

/// `troupe mcp serve`'s options: those of a run (each `troupe_run` is driven as one).
#[derive(Debug, Clone, Args)]
pub struct McpServeArgs {
    #[command(flatten)]
    pub team: TeamFlags,
}

/// What `troupe memory` does.
#[derive(Debug, Clone, Subcommand)]
pub enum MemoryAction {
    /// Every record (name, type, description) and every file that is not a valid record.
    List,
    /// One record, with its body.
    Show {
        /// The record's name (a lowercase slug, e.g. `prefers-tabs`).
        name: String,
    },
    /// Delete one record (works while a run is going).
    Forget {
        /// The record's name (a lowercase slug, e.g. `prefers-tabs`).
        name: String,
    },
}

/// The tokio runtime `main` builds for a command (see [`Command::runtime_flavor`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeFlavor {
    /// One thread: the command's own.
    CurrentThread,
    /// Worker threads (one per core) besides the command's own.
    MultiThread,
}

impl Command {
    /// The runtime the whole command runs on, chosen once in `main`. Multi-threaded for the
    /// commands that run a team or host long-lived concurrent work — agents, teammates, MCP
    /// servers, a web server's connections, the model call of `compact`, the view of `watch`
    /// (its loop waits on a blocking thread while the stream's listener and signals run), as
    /// `run` and `worker` always had; one thread for the others, which make a few store calls
    /// in a row and print, where more threads would only cost start-up time.
    pub fn runtime_flavor(&self) -> RuntimeFlavor {
        match self {
            Self::Run(_)
            | Self::Demo { .. }
            | Self::Worker(_)
            | Self::Serve { .. }
            | Self::Compact { .. }
            | Self::Mcp { .. }
            | Self::Session(_)
            | Self::Acp(_)
            | Self::Replay(_)
            | Self::Eval(_)
            | Self::Watch { .. } => RuntimeFlavor::MultiThread,
            Self::Review { .. }
            | Self::Approve { .. }
            | Self::Deny { .. }
            | Self::Send { .. }
            | Self::Status { .. }
            | Self::Requests { .. }
            | Self::Usage(_)
            | Self::Gc { .. }
            | Self::Jobs { .. }
            | Self::Cron { .. }
            | Self::Tasks { .. }
            | Self::Worktrees { .. }
            | Self::Memory { .. }
            | Self::Timeline { .. }
            | Self::Log(_)
            | Self::Completions { .. }
            | Self::Trust { .. }
            | Self::Init { .. }
            | Self::Config { .. }
            | Self::Mailbox { .. } => RuntimeFlavor::CurrentThread,
        }
    }

    /// Whether the command runs a team in this process (`troupe run`, `troupe demo`, `troupe
    /// session`, `troupe mcp serve`): its output is the run's formatted lines (or the
    /// protocol's), and its logs are notices unless asked for.
    pub fn runs_a_team(&self) -> bool {
        matches!(
            self,
            Self::Run(_)
                | Self::Demo { .. }
                | Self::Session(_)
                | Self::Acp(_)
                | Self::Mcp {
                    action: McpAction::Serve(_),
                    ..
                }
        )
    }

    /// Whether the user asked for JSON: then errors are JSON too.
    pub fn json_output(&self) -> bool {
        match self {
            Self::Status { json, .. }
            | Self::Send { json, .. }
            | Self::Approve { json, .. }
            | Self::Deny { json, .. }
            | Self::Requests { json, .. }
            | Self::Jobs { json, .. }
            | Self::Gc { json, .. }
            | Self::Usage(UsageArgs { json, .. })
            | Self::Cron { json, .. }
            | Self::Tasks { json, .. }
            | Self::Worktrees { json }
            | Self::Init { json }
            | Self::Mailbox { json, .. }
            | Self::Memory { json, .. }
            | Self::Mcp { json, .. }
            | Self::Run(RunArgs { json, .. })
            | Self::Compact { json, .. }
            | Self::Config { json, .. } => *json,
            Self::Log(args) => args.json,
            Self::Replay(args) => args.json,
            Self::Demo { .. }
            | Self::Eval(_)
            | Self::Worker(_)
            | Self::Review { .. }
            | Self::Serve { .. }
            | Self::Session(_)
            | Self::Acp(_)
            | Self::Watch { .. }
            | Self::Timeline { .. }
            | Self::Completions { .. }
            | Self::Trust { .. } => false,
        }
    }
}

fn parse_isolation(raw: &str) -> Result<troupe_wire::Isolation, String> {
    troupe_wire::Isolation::parse(raw).map_err(|e| e.0)
}

fn parse_provider(raw: &str) -> Result<troupe::model::config::Provider, String> {
    raw.parse()
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every command says what it does, and every argument what it means, in `--help`.
    #[test]
    fn every_command_and_argument_has_help() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            if command.get_about().is_none() && command.get_long_about().is_none() {
                missing.push(format!("`{path}` has no description"));
            }
            for arg in command.get_arguments() {
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("`{path}` argument `{}` has no help", arg.get_id()));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut command = Cli::command();
        // Built, so that global arguments and the generated `help` are where users see them.
        command.build();
        let mut missing = Vec::new();
        walk(&command, "troupe", &mut missing);
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }
}
