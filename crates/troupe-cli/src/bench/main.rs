//! `troupe-bench`: measures troupe's runtime costs on this machine and prints one JSON object per
//! suite. Every suite also measures the disk's own durable-write rate in the same run
//! (`disk_durable_writes_per_s`), so each figure can be read as a ratio to the hardware.
//!
//! ```text
//! cargo run --release --bin troupe-bench -- mailbox --n 10000 --json
//! cargo run --release --bin troupe-bench -- protocol --history 10000 --json
//! cargo run --release --bin troupe-bench -- contention --procs 4 --n 250 --json
//! cargo run --release --bin troupe-bench -- dispatch --json
//! cargo run --release --bin troupe-bench -- team --json
//! cargo run --release --bin troupe-bench -- longrun --turns 500 --json
//! cargo build --release --bins && target/release/troupe-bench events --json
//! cargo build --release --bins && target/release/troupe-bench page-load --json
//! cargo run --release --bin troupe-bench -- sandbox --json
//! cargo run --release --bin troupe-bench -- pg --procs 4 --n 2500 --json
//! cargo run --release --bin troupe-bench -- board --teammates 8 --tasks 64 --latency-ms 500 --json
//! cargo run --release --bin troupe-bench -- replay --calls 500 --runs 5 --json
//! cargo run --release --features bench --bin troupe-bench -- soak --minutes 60 --out soak.json
//! cargo run --release --features bench --bin troupe-bench -- teamrun --turns 200 --teammates 8
//! cargo run --release --features bench --bin troupe-bench -- realwork --teammates 4 --latency-ms 2000
//! ```

mod board;
// Shared with the browser tests of `troupe serve`, which use more of it.
#[allow(dead_code)]
mod cdp;
#[cfg(test)]
mod cdp_tests;
mod contention;
mod disk;
mod dispatch;
mod events;
mod longrun;
mod mailbox;
mod page_load;
mod pg;
mod protocol;
mod realwork;
mod replay;
mod result;
mod sandbox;
mod scripted;
mod soak;
mod stats;
mod team;
mod teamrun;
mod telemetry;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "troupe-bench", about = "Benchmarks of the troupe runtime")]
struct Args {
    /// Where to create the temporary workspaces (default: the system temp folder). Put it on the
    /// disk you want to measure.
    #[arg(long, global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Print the result as one JSON object (the default prints it pretty).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    suite: Suite,
}

#[derive(Debug, Subcommand)]
enum Suite {
    /// Send n messages to one mailbox, then claim+ack them all.
    Mailbox {
        #[arg(long, default_value_t = 10_000)]
        n: usize,
    },
    /// Create+consume round trips on an empty store and on one holding `history` resolved
    /// requests; latest-plan lookups at that size.
    Protocol {
        #[arg(long, default_value_t = 10_000)]
        history: usize,
        /// Round trips measured on each store.
        #[arg(long, default_value_t = 300)]
        rounds: usize,
    },
    /// `procs` processes create+consume `n` requests each on one store; `procs` processes send
    /// `n` messages each to one mailbox while this process claims.
    Contention {
        #[arg(long, default_value_t = 4)]
        procs: usize,
        #[arg(long, default_value_t = 250)]
        n: usize,
    },
    /// Runtime overhead of one tool call: dispatch + permission + audit around a no-op handler.
    Dispatch {
        #[arg(long, default_value_t = 5_000)]
        calls: usize,
    },
    /// OpenTelemetry export: the trace observer's cost per model call and per tool call with
    /// export on to a local receiver (p50 µs, over export off), and a scripted run's wall time
    /// with the receiver down against export off.
    Telemetry {
        #[arg(long, default_value_t = 20_000)]
        calls: usize,
        /// Runs of each kind (alternating).
        #[arg(long, default_value_t = 11)]
        runs: usize,
        /// Tool calls in each run.
        #[arg(long, default_value_t = 40)]
        tool_calls: usize,
        /// An OTLP/HTTP receiver's base URL (e.g. Arize Phoenix's); default: a built-in one.
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
    },
    /// Shutdown and plan round trips with scripted models; 32 idle teammates' CPU and memory.
    Team {
        /// Plan round trips measured.
        #[arg(long, default_value_t = 32)]
        rounds: usize,
    },
    /// Teammates that pull their own work: `teammates` teammates in git worktrees take `tasks`
    /// tasks from the board, each two model calls of `latency_ms` and one file edit; then 5 s
    /// idle with an empty board, and merges of a 10-file branch.
    Board {
        #[arg(long, default_value_t = 8)]
        teammates: usize,
        #[arg(long, default_value_t = 64)]
        tasks: usize,
        #[arg(long, default_value_t = 500)]
        latency_ms: u64,
        /// A PostgreSQL URL: the board (and the team's stores) in that database, on a team
        /// key of its own.
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// The lead's runner through many tool turns with large results and a small context
    /// window: what is sent, with compaction, against what would be sent without.
    Longrun {
        /// Turns: a prompt, one read of a 1–80 KB blob, an answer.
        #[arg(long, default_value_t = 500)]
        turns: usize,
        /// The context window, in tokens.
        #[arg(long, default_value_t = 32_768)]
        window: u32,
    },
    /// Replaying a recording: a lead's `calls` model calls in one turn (each a `read_file` of a
    /// small file, the last a text) recorded, then replayed `runs` times (each request
    /// compared) against as many live runs, alternating: the replay's cost per call.
    Replay {
        #[arg(long, default_value_t = 500)]
        calls: usize,
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// A lead and eight teammates, cycle after cycle (each a run) for `minutes`: messages,
    /// plans, board tasks and tool calls with a scripted model at `latency_ms`; RSS, fds,
    /// threads, the state's size and message round trips sampled every minute, and the goals
    /// of issue 45 checked (reported; a missed goal does not fail the suite).
    Soak {
        #[arg(long, default_value_t = 60)]
        minutes: u64,
        /// A PostgreSQL URL: the team in a schema of its own there (dropped at the end).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
        #[arg(long, default_value_t = 50)]
        latency_ms: u64,
        /// Every kind of state kept this many seconds, gc at each run's close.
        #[arg(long, value_name = "SECS")]
        retention: Option<u64>,
        /// Also write the summary (pretty JSON) to this file.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// A lead and `teammates` teammates over `turns` lead model calls with spawns, status
    /// changes, plans, board tasks and messages: what each role's prompt cache could reuse
    /// (`cache_prefix_share`), and the fixed prompt of every call (issue 46).
    Teamrun {
        #[arg(long, default_value_t = 200)]
        turns: usize,
        #[arg(long, default_value_t = 8)]
        teammates: usize,
        #[arg(long, default_value_t = 0)]
        latency_ms: u64,
    },
    /// A team builds a small Rust crate (a module and its tests per task, in worktrees, merged,
    /// one conflict resolved by the lead, `cargo test` at the end) against one agent alone.
    Realwork {
        #[arg(long, default_value_t = 4)]
        teammates: usize,
        #[arg(long, default_value_t = 2000)]
        latency_ms: u64,
        #[arg(long, default_value_t = 8)]
        tasks: usize,
    },
    /// Appending one event to the stream; how soon a `troupe log -f` process (the `troupe`
    /// binary next to this one) prints it.
    Events {
        /// Appends measured.
        #[arg(long, default_value_t = 20_000)]
        appends: usize,
        /// Events followed, one at a time.
        #[arg(long, default_value_t = 200)]
        follows: usize,
    },
    /// `page_load_ms_10k`: the page of `troupe serve` (the `troupe` binary beside this one) on a
    /// workspace of `events` events, loaded `loads` times in headless Chromium: the median ms from
    /// navigation start to ready.
    PageLoad {
        #[arg(long, default_value_t = 10_000)]
        events: usize,
        #[arg(long, default_value_t = 5)]
        loads: usize,
    },
    /// `spawn_overhead_ms_p50`: spawning `sh -c true` confined (the default sandbox) minus
    /// unconfined, medians over `rounds` alternating samples; bubblewrap too when installed.
    Sandbox {
        #[arg(long, default_value_t = 300)]
        rounds: usize,
    },
    /// The PostgreSQL backend against the local server (TROUPE_TEST_PG_URL), the file store in
    /// the same run: sends, claim+ack by `procs` processes, protocol round trips, wake latency,
    /// and the takeover of a killed worker's teammate.
    Pg {
        #[arg(long, default_value_t = 4)]
        procs: usize,
        /// Messages per sending thread.
        #[arg(long, default_value_t = 2500)]
        n: usize,
        /// The lease of claims and teammates (what a takeover waits for): 10, 10s, 1m30s, 500ms.
        #[arg(long, default_value = "10s", value_parser = |raw: &str| {
            troupe::settings::parse_duration(raw).ok_or("not a duration (10, 10s, 1m30s, 500ms)")
        })]
        lease: std::time::Duration,
    },
    /// Internal: one process of the pg suite.
    #[command(hide = true)]
    PgWorker {
        #[arg(long)]
        role: String,
        #[arg(long)]
        index: usize,
        #[arg(long)]
        url: String,
        #[arg(long, default_value_t = 10_000)]
        lease_ms: u64,
    },
    /// Internal: one worker process of the contention suite.
    #[command(hide = true)]
    ContentionWorker {
        #[arg(long)]
        workspace: PathBuf,
        #[arg(long)]
        role: String,
        #[arg(long)]
        index: usize,
        #[arg(long)]
        n: usize,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    // The library's own warnings (a store call that timed out, a gc that failed), on stderr
    // when asked for: `RUST_LOG=warn troupe-bench soak …`.
    if let Some(filter) = std::env::var("RUST_LOG")
        .ok()
        .filter(|f| !f.trim().is_empty())
    {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
    let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let result = match args.suite {
        Suite::Mailbox { n } => mailbox::run(&dir, n),
        Suite::Protocol { history, rounds } => protocol::run(&dir, history, rounds),
        Suite::Contention { procs, n } => contention::run(&dir, procs, n),
        Suite::Dispatch { calls } => dispatch::run(&dir, calls),
        Suite::Team { rounds } => team::run(&dir, rounds),
        Suite::Telemetry {
            calls,
            runs,
            tool_calls,
            endpoint,
        } => telemetry::run(&dir, calls, runs, tool_calls, endpoint.as_deref()),
        Suite::Board {
            teammates,
            tasks,
            latency_ms,
            store,
        } => board::run(&dir, teammates, tasks, latency_ms, store.as_deref()),
        Suite::Longrun { turns, window } => longrun::run(&dir, turns, window),
        Suite::Replay { calls, runs } => replay::run(&dir, calls, runs),
        Suite::Teamrun {
            turns,
            teammates,
            latency_ms,
        } => teamrun::run(&dir, turns, teammates, latency_ms),
        Suite::Realwork {
            teammates,
            latency_ms,
            tasks,
        } => realwork::run(&dir, teammates, latency_ms, tasks),
        Suite::Events { appends, follows } => events::run(&dir, appends, follows),
        Suite::PageLoad { events, loads } => page_load::run(&dir, events, loads),
        Suite::Sandbox { rounds } => sandbox::run(&dir, rounds),
        Suite::Pg { procs, n, lease } => pg::run(&dir, procs, n, lease),
        Suite::Soak {
            minutes,
            store,
            latency_ms,
            retention,
            out,
        } => soak::run(
            &dir,
            &soak::Options {
                minutes,
                store,
                latency: std::time::Duration::from_millis(latency_ms),
                retention: retention.map(std::time::Duration::from_secs),
                out,
            },
        ),
        Suite::PgWorker {
            role,
            index,
            url,
            lease_ms,
        } => return pg::worker(&role, index, &url, lease_ms),
        Suite::ContentionWorker {
            workspace,
            role,
            index,
            n,
        } => {
            return contention::worker(&workspace, &role, index, n);
        }
    };
    match result {
        Ok(value) => {
            let text = if args.json {
                serde_json::to_string(&value)
            } else {
                serde_json::to_string_pretty(&value)
            };
            match text {
                Ok(text) => {
                    println!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("troupe-bench: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("troupe-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
