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
    /// The task for the lead.
    #[arg(long)]
    pub prompt: String,
    #[arg(long, value_enum, default_value_t = ApprovalMode::Ask)]
    pub approval: ApprovalMode,
    /// The most model calls in one turn of any agent.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub max_turns: usize,
    /// The response window of protocol requests, e.g. 90s, 5m, 1h.
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub request_ttl: String,
    /// Overrides OPENAI_MODEL.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Overrides OPENAI_BASE_URL.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Overrides OPENAI_FALLBACK_MODEL.
    #[arg(long, value_name = "NAME")]
    pub fallback_model: Option<String>,
    /// Answer every agent from a scripted model file instead of a server (no network, no key).
    #[arg(long, value_name = "FILE")]
    pub model_script: Option<PathBuf>,
    /// Gate every teammate of this run from its first tool call until the lead approves a plan
    /// of its (as if each were spawned with plan_required); without it, only teammates spawned
    /// with plan_required are, and the others only once they submit a plan.
    #[arg(long)]
    pub require_plans: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the lead on a prompt, then keep the team going until it is quiescent.
    Run(RunArgs),
    /// A scripted team scenario: no network, no key, approvals automatic.
    Demo,
    /// A person answers a pending plan request as the lead, while a run is going.
    Review {
        /// The plan request's id.
        request_id: String,
        #[arg(long, conflicts_with = "reject", required_unless_present = "reject")]
        approve: bool,
        #[arg(long)]
        reject: bool,
        /// What the teammate is told.
        #[arg(long)]
        feedback: Option<String>,
    },
    /// Teammates and their status, mailbox counts per state, pending requests.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Protocol requests; expired pending requests show as `expired`.
    Requests {
        /// Only requests with this status: pending, approved, rejected or expired.
        #[arg(long, value_name = "S")]
        status: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Background shell jobs and their status (running, completed, failed, cancelled, timed_out).
    Jobs {
        #[arg(long)]
        json: bool,
    },
    /// The durable cron jobs in `.troupe/cron.json`, soonest first.
    Cron {
        #[arg(long)]
        json: bool,
    },
    /// The task board: every task with its status, owner and open blockers.
    Tasks {
        /// Print JSON (`{"tasks":[…]}`) instead of text.
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
        #[arg(long)]
        json: bool,
    },
}
