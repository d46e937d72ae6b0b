//! The troupe runtime: durable mailboxes, the protocol store, agents, tools and permissions.
//!
//! # Layout
//!
//! - [`clock`], [`ids`]: the injectable clock and id generator every store and runtime takes,
//!   so that tests are deterministic.
//! - [`layout`]: where things live under `<workspace>/.troupe/`.
//! - [`protected`]: the workspace's protected paths (`.git`, `troupe.toml`, `.env`, `.troupe/`,
//!   `[sandbox] deny_write`): the one list every writer — file tools and sandbox — checks.
//! - [`error`]: the stable error codes shared by every module's error enum.
//! - [`store`]: durable file primitives (atomic replace, folder fsync, cross-process locks), the
//!   mailbox store and the protocol store.
//! - [`prices`]: what model calls cost, as an estimate: the built-in price table, the
//!   settings' `[prices]` over it, exact cost arithmetic, and usage reports with costs.
//! - [`model`]: the `ModelClient` port, the OpenAI Chat Completions client, a scripted model, and
//!   the model configuration (environment, `<workspace>/.env`, flags).
//! - [`tools`]: the tool registry, the one dispatch path every call takes, and the base tools.
//! - [`permissions`]: pure rules, the policy, approval providers, the audit sink, hooks.
//! - [`process`]: commands as child processes in their own process group: spawning, output
//!   capping, killing the group — shared by the `shell` tool and background jobs.
//! - [`sync`]: poison-tolerant locking of std mutexes, written once.
//! - [`terminal_text`]: text from a workspace, a model, a tool or a server made safe to print
//!   on a terminal (its control characters shown escaped), written once.
//! - [`jobs`]: background shell jobs: the supervisor, their records under `.troupe/jobs/`.
//! - [`hooks`]: the settings' `[[hooks]]` as external commands (PreToolUse, PostToolUse,
//!   UserPromptSubmit, Stop) with a JSON protocol.
//! - [`worktree`]: a git worktree per teammate (`isolation: "worktree"`): making and
//!   reattaching them, committing on a teammate's branch, merging into the lead's checkout,
//!   listing and removing them — git run as a child process, hooks off, with a timeout.
//! - [`agent`]: the runner (the tool-call loop) and its history.
//! - [`team`]: teammates, the lead's events, the protocols at runtime, the plan gate, the driver.
//! - [`telemetry`]: OpenTelemetry traces of a run (turns, model calls, tool calls, messages),
//!   off unless the `OTEL_*` variables or `[telemetry]` say; exported over OTLP/HTTP.
//! - [`bootstrap`]: the composition root, the only place concrete adapters are chosen — for a run
//!   (`build_team`) and for the commands that run no team (`inspector`, `PlanReview`).
//! - [`send`]: a person's message to the lead or a teammate (`troupe send`, the web view).
//! - [`cron`]: `schedule_cron` and the cron runtime that wakes the lead (`.troupe/cron.json`).
//! - [`secrets`]: the redactor that keeps the API key out of tool results, jobs and errors, and
//!   taking the credential variables out of troupe's own environment at start.
//! - [`demo`]: the scripted scenario of `troupe demo`.
//! - [`inspect`]: read-only views of a workspace for `troupe status`, `requests`, `mailbox`,
//!   `jobs`.
//! - [`sandbox`]: confining commands (Landlock and namespaces, or bubblewrap): the workspace
//!   writable but its protected paths, a private temp folder, the network off or loopback.
//! - [`settings`]: `troupe.toml` and the user's `config.toml`, every value with its source, and
//!   what of a workspace's own files needs the person's trust.
//! - [`mcp`]: MCP servers (stdio or streamable HTTP) started for a run, and their state.
//! - [`approvals`]: approvals as requests: a permission request opened, answered once from
//!   anywhere, and the provider whose call waits for the first answer.
//! - [`gc`]: `troupe gc` and `[retention] auto`: one pass over a team's state that removes
//!   what its retention allows (`store::retention`), and says what it kept and why.
//! - [`replay`]: every run's model calls recorded (`.troupe/recordings/`), and a recording
//!   played again: each call answered from it in the recorded order, each request compared.
//!
//! The modules form layers (ARCHITECTURE.md, "Layers"); `tests/all/architecture.rs` fails on an
//! import cycle between files or an import that goes up a layer, and `tests/all/code_map.rs` on
//! a module missing from this list.

pub mod agent;
pub mod approvals;
pub mod bootstrap;
pub mod clock;
pub mod cron;
pub mod demo;
pub mod error;
pub mod gc;
pub mod hooks;
pub mod ids;
pub mod inspect;
pub mod jobs;
pub mod layout;
pub mod mcp;
pub mod model;
pub mod permissions;
pub mod prices;
pub mod process;
pub mod protected;
pub mod replay;
pub mod sandbox;
pub mod secrets;
pub mod send;
pub mod settings;
pub mod store;
pub mod sync;
pub mod team;
pub mod telemetry;
pub mod terminal_text;
pub mod tools;
pub mod worktree;

pub use troupe_wire as wire;
