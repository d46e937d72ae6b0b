//! The `troupe` binary, run as a child process (`CARGO_BIN_EXE_troupe`), linked into one test
//! binary.
//!
//! - `support`: running the binary with a clean model environment; output checks.
//! - `architecture`: no import cycle between the CLI's files or its top-level modules, read from
//!   `src/` (the one module here that does not run the binary).
//! - `cost`: `troupe usage` (tokens and estimated cost per agent, model or day; `[prices]`;
//!   `--since`; a shared team's) and `--max-cost` / `[run] max_cost` stopping a run (exit 3).
//! - `config_and_demo`: `troupe config` showing `[tasks] lease` and `[approvals] ttl`/`route`
//!   with their sources and a workspace's price that waits for trust beside the one that
//!   applies; `troupe demo --workspace DIR` refusing a folder that holds a file it would write.
//! - `demo`: `troupe demo` and the inspection commands' JSON shapes on its workspace.
//! - `eval`: `troupe eval SUITE.toml`: scripted cases in fresh fixture copies (a folder, a git
//!   revision whose hooks never run), the table, JSON and JUnit reports and exit codes,
//!   `--jobs 2` with `repeat`, trust and timeouts, hostile suites refused with one line.
//! - `errors`: bad input and broken state files: one line on stderr, the right exit code.
//! - `run`: missing model configuration; a second run on a held workspace.
//! - `model`: `troupe run` against a Chat Completions server: configuration precedence, exit
//!   codes on model failures, approval modes.
//! - `events_segments`: the event stream rolled into closed segments between scripted runs:
//!   `troupe log`, `log -f` and `timeline` read the same across them, `seq` continues.
//! - `log`: `troupe log` and `troupe log -f`: filters, `--json` lines, nothing created, corrupt
//!   lines and FIFOs, followers ended by SIGTERM, Ctrl-C or their reader going away.
//! - `memory`: `troupe memory list|show|forget`: JSON shapes, errors, nothing created, `forget`
//!   while a run holds the run lock.
//! - `tasks`: `troupe tasks` and the task summary of `troupe status`.
//! - `orphans`: a job left running by a killed run is stopped by the next run.
//! - `replay`: `troupe replay`: a recorded team replayed identically from its git starting point
//!   with no key; a changed definition or MCP tool description stopping it with a diff;
//!   `--live-after-divergence` on a loopback server; `--until` then `run --continue`; broken
//!   recordings and folders refused.
//! - `plans`: `troupe run --require-plans`: a teammate gated from its first call until a person
//!   approves its plan.
//! - `browser`: the page of `troupe serve` in headless Chromium during a run: a plan approved
//!   by a click, the token refused; screenshots in `target/browser-artifacts/`.
//! - `browser_demo`: the page and the exported timeline on the demo's workspace: the run ended
//!   (and `live` again when another starts), roles shown once, the lead's status, the cost.
//! - `browser_permissions`: the page's "Waiting for approval" panel during a run with no
//!   terminal: a write approved once and one denied with a reason, by clicks.
//! - `readme`: the README's and docs' settings, script, MCP, agent-definition and memory
//!   examples, as written.
//! - `readme_blocks`: every fenced block of the README and `docs/` run by a test or marked with
//!   why not (the marker convention is at the top of the file).
//! - `review`: `troupe review` from another process while a team runs in this one.
//! - `short_ids_and_races`: the short request ids a person reads and types (distinct for requests
//!   made in the same millisecond, accepted by `troupe approve`/`review`); two `troupe review`
//!   processes racing on one plan, the loser saying one line.
//! - `run_lock`: `troupe status` trusts the kernel's lock on `run.lock`, not its text.
//! - `state_files`: a torn transcript across runs; duplicate JSON keys in state files.
//! - `special_files`: a FIFO in place of a state file fails every command at once, naming it.
//! - `exits`: exit 3 at the turn limit; the no-terminal notice of `--approval ask`.
//! - `help`: what a new user reads: help texts, completions, the demo's closing commands.
//! - `init`: `troupe init` — a scripted model when no key is set (and a run right after it), a
//!   provider's model when one is, `.troupe/` in `.gitignore` once, nothing overwritten.
//! - `approval_choices`: the approval prompt's yes/always/save/no-with-reason on a
//!   pseudo-terminal; `troupe.toml` kept byte for byte when an entry is saved.
//! - `interrupt`: Ctrl-C at an approval prompt, in a model call, and twice (exit 130).
//! - `usage`: errors as JSON under `--json`, shell completions, compound durations.
//! - `scripts`: `--model-script` with a queue per agent, teammates running concurrently.
//! - `token_usage`: the token usage of `.troupe/usage.jsonl` in `troupe status`.
//! - `estimated_usage`: a streaming server that reports no usage: tokens estimated, marked in
//!   `usage.jsonl`, the events, `troupe usage` and `troupe status`, counted by `--max-tokens`;
//!   an empty answer said on stderr.
//! - `sessions`: long-lived agents: new sessions, token budgets, compaction across runs.
//! - `terminal`: the terminal view and `run --json`, rendered from the event stream: colours,
//!   spinners on a pseudo-terminal, `-v` and `RUST_LOG`, retries and fallbacks as they happen.
//! - `quiet_output`: a run's default stderr: formatted lines only, each once (warnings as
//!   `troupe: …` notices, a retry once, a telemetry failure without a debug dump), the log
//!   records back with `-v` or `RUST_LOG`; the text of a misconfigured start, `troupe mailbox`'s
//!   order, an MCP server whose program is not installed, the README's first paragraph.
//! - `terminal_text`: escape sequences from a workspace's hooks and a model's text and files
//!   shown as `\xHH` text, never obeyed: `troupe trust --show` and the trust prompt, the
//!   approval prompt's diff, the run's lines and answer, `troupe log`.
//! - `serve`: `troupe serve` (token, Host check, read-only GETs, the event stream, reviews from
//!   the page) and `troupe timeline --html`.
//! - `serve_permissions`: the page's pending permission requests and `POST /api/permission`,
//!   answered as `troupe approve`/`deny` answer them.
//! - `agentdefs`: agent definitions (`agents/<name>.md`): a teammate on its definition's model,
//!   tools and instructions; invalid and unknown definitions.
//! - `streaming`: `troupe run` against a streaming server: a tool call streamed in deltas split
//!   across chunks, then the streamed answer printed.
//! - `secrets`: the API key stays out of troupe's own environment, of what the model is sent
//!   and of every file under `.troupe/`.
//! - `sandbox`: every escape a hostile command tries is refused by default and works with
//!   `--sandbox off` (Landlock and bubblewrap); read-only mode, settings, refusal without a
//!   mechanism.
//! - `protected_paths`: the protected paths (`.git`, `troupe.toml`, `.env`, `.troupe/`) with a
//!   real git repository: file tools under `--approval auto` and a broad allow, a rule naming a
//!   path exactly, confined commands renaming `.git` (Landlock and bubblewrap); the sandbox's
//!   private `/dev/shm`; `.troupe/` made `0700`.
//! - `providers`: the team flow against a native Anthropic server; a run on Azure OpenAI.
//! - `shared_faults`: a shared team's faults with real processes: SIGKILL and SIGSTOP of a
//!   worker, PostgreSQL restarted mid-run, a second lead.
//! - `shared_team`: a team across processes on PostgreSQL: lead and writer in two processes.
//! - `worker_recovery`: workers of a shared team with real processes: a worker SIGKILLed while
//!   its teammate holds a task claim (the claim comes back at the takeover); an idle teammate
//!   in a worker writing no status changes.
//! - `store_settings`: `[store]` in the settings files: `troupe config` with sources and no
//!   password, the file's store URL used unless `--store` says otherwise, a password refused.
//! - `approvals`: permission asks as requests — `troupe approve`/`deny` from other processes
//!   (one answer wins), a prompt on a pseudo-terminal that gives way, a worker's teammate
//!   answered from the lead's host.
//! - `telemetry`: OpenTelemetry traces of real runs read back from a real receiver (Arize
//!   Phoenix, `otel_receiver`): one trace per run (a shared team's too), the GenAI attributes,
//!   contents only when asked and redacted, a receiver down or silent costing the run nothing.
//! - `rules_and_notices`: a trusted workspace's allow rules under `--approval deny` and `ask`
//!   without a terminal, an untrusted one's never; a rule naming no known tool refused with its
//!   line and the nearest name; the no-terminal notice under `[approvals] no_terminal`.
//! - `hostile_settings`: what a hostile workspace's files try past the trust gate: a hook
//!   written while an allow rule is saved, a `.env` linked out of the workspace or quoting
//!   itself in an error, a `.env` that switches the provider or key, a looser cost limit.
//! - `trust`: a workspace's own hooks, MCP servers, model server, allow rules and looser sandbox
//!   wait for `troupe trust`: exit 2 without a terminal, one question on one, tightening always.
//! - `team_flow`: the demo's team flow as any provider's mock plays it, and its checks.
//! - `continue_run`: `troupe run --continue` finishes a run killed mid-team with no new
//!   prompt; nothing left is "nothing to continue" (exit 0).
//! - `session`: `troupe session` (bare `troupe` on a terminal) driven in tmux: two prompts in
//!   one lead conversation, `/cost`, `/exit`, the terminal restored; Ctrl-C and a line typed
//!   while the team works; help off a terminal.
//! - `watch`: `troupe watch` driven in tmux: a scripted team followed, its plan approved and a
//!   message sent from the view, the terminal restored after `q` or Ctrl-C; a shared team's
//!   view (`--store`); `troupe run --watch`; `NO_COLOR`; exit 2 without a terminal.
//! - `hostile_git`: a cloned repository that ships a worktree record whose `git_dir` is a folder
//!   of its own (a clean filter in its config): `troupe worktrees` and a run's close refuse the
//!   record and the filter never runs.
//! - `acp`: `troupe acp` driven by the official ACP client SDK (Python) and by raw lines.
//! - `worktrees`: `troupe run --isolation worktree` on a real git repository — a teammate in
//!   its own worktree, its branch merged by the lead — then `troupe worktrees [--json]`.
//! - `clients`: the protocols' official Python clients in their venv (`.ci/run` installs them),
//!   or a skip with one notice (a failure under `TROUPE_TEST_CLIENTS_REQUIRED=1`).
//! - `mcp_serve`: `troupe mcp serve` driven by the MCP Python SDK's client: the tools, a run's
//!   progress and result, a cancelled run (nothing lost), asks elicited or denied, a plan
//!   answered with `troupe_answer`; hostile input on raw pipes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "cli/acp.rs"]
mod acp;
#[path = "cli/agentdefs.rs"]
mod agentdefs;
#[path = "cli/approval_choices.rs"]
mod approval_choices;
#[path = "cli/approvals.rs"]
mod approvals;
#[path = "cli/architecture.rs"]
mod architecture;
#[path = "cli/board.rs"]
mod board;
#[path = "cli/browser.rs"]
mod browser;
#[path = "cli/browser_cost.rs"]
mod browser_cost;
#[path = "cli/browser_demo.rs"]
mod browser_demo;
#[path = "cli/browser_history.rs"]
mod browser_history;
#[path = "cli/browser_permissions.rs"]
mod browser_permissions;
#[path = "cli/clients.rs"]
pub mod clients;
#[path = "cli/config_and_demo.rs"]
mod config_and_demo;
#[path = "cli/continue_run.rs"]
mod continue_run;
#[path = "cli/cost.rs"]
mod cost;
#[path = "cli/demo.rs"]
mod demo;
#[path = "cli/errors.rs"]
mod errors;
#[path = "cli/estimated_usage.rs"]
mod estimated_usage;
#[path = "cli/eval.rs"]
mod eval;
#[path = "cli/events.rs"]
mod events;
#[path = "cli/events_segments.rs"]
mod events_segments;
#[path = "cli/exits.rs"]
mod exits;
#[path = "cli/gc.rs"]
mod gc;
#[path = "cli/help.rs"]
mod help;
#[path = "cli/hostile_git.rs"]
mod hostile_git;
#[path = "cli/hostile_settings.rs"]
mod hostile_settings;
#[path = "cli/init.rs"]
mod init;
#[path = "cli/interrupt.rs"]
mod interrupt;
#[path = "cli/log.rs"]
mod log;
#[path = "cli/mcp.rs"]
mod mcp;
#[path = "cli/mcp_serve.rs"]
mod mcp_serve;
#[path = "cli/memory.rs"]
mod memory;
#[path = "cli/model.rs"]
mod model;
#[path = "cli/orphans.rs"]
mod orphans;
#[path = "cli/otel_receiver.rs"]
mod otel_receiver;
#[path = "cli/plans.rs"]
pub mod plans;
#[path = "cli/protected_paths.rs"]
mod protected_paths;
#[path = "cli/providers.rs"]
mod providers;
#[path = "cli/quiet_output.rs"]
mod quiet_output;
#[path = "cli/readme.rs"]
mod readme;
#[path = "cli/readme_blocks.rs"]
mod readme_blocks;
#[path = "cli/replay.rs"]
mod replay;
#[path = "cli/review.rs"]
mod review;
#[path = "cli/rules_and_notices.rs"]
mod rules_and_notices;
#[path = "cli/run.rs"]
mod run;
#[path = "cli/run_lock.rs"]
mod run_lock;
#[path = "cli/sandbox.rs"]
mod sandbox;
#[path = "cli/scripts.rs"]
mod scripts;
#[path = "cli/secrets.rs"]
mod secrets;
#[path = "cli/send.rs"]
mod send;
#[path = "cli/serve.rs"]
mod serve;
#[path = "cli/serve_permissions.rs"]
mod serve_permissions;
#[path = "cli/session.rs"]
mod session;
#[path = "cli/sessions.rs"]
mod sessions;
#[path = "cli/settings.rs"]
mod settings;
#[path = "cli/shared_faults.rs"]
mod shared_faults;
#[path = "cli/shared_team.rs"]
mod shared_team;
#[path = "cli/short_ids_and_races.rs"]
mod short_ids_and_races;
#[path = "cli/silent_db.rs"]
mod silent_db;
#[path = "cli/special_files.rs"]
mod special_files;
/// The library tests' chunked streaming server, shared rather than copied.
#[allow(dead_code)]
#[path = "../../troupe/tests/all/model/sse_server.rs"]
mod sse_server;
#[path = "cli/state_files.rs"]
mod state_files;
#[path = "cli/store_settings.rs"]
mod store_settings;
#[path = "cli/streaming.rs"]
mod streaming;
#[path = "cli/support.rs"]
mod support;
#[path = "cli/tasks.rs"]
mod tasks;
#[path = "cli/team_flow.rs"]
mod team_flow;
#[path = "cli/telemetry.rs"]
mod telemetry;
#[path = "cli/terminal.rs"]
mod terminal;
#[path = "cli/terminal_text.rs"]
mod terminal_text;
#[path = "cli/token_usage.rs"]
mod token_usage;
#[path = "cli/trust.rs"]
mod trust;
#[path = "cli/usage.rs"]
mod usage;
#[path = "cli/watch.rs"]
mod watch;
#[path = "cli/worker_recovery.rs"]
mod worker_recovery;
#[path = "cli/worktrees.rs"]
mod worktrees;
