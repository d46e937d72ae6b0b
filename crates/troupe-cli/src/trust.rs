//! The trust gate (issue 22): a workspace's own `troupe.toml` and `.env` may tighten at once,
//! but their trust-requiring values (hooks, MCP servers, the model server, the provider, the
//! store, allow rules, a looser sandbox; `troupe::settings::trust` lists them) apply only once
//! the person trusts the workspace: recorded with `troupe trust` or at the prompt, or for one
//! command with `--trust-workspace` / `TROUPE_TRUST_WORKSPACE=1`. The person's own settings
//! (user `config.toml`, environment, flags) need no trust.
//!
//! Every command reads its settings through [`load`], in one of three ways ([`Use`]):
//! commands that run agents, commands or servers (`run`, `worker`, `serve`, `compact`, `mcp`)
//! ask on a terminal — trust / run without them / quit — and without one exit 2 before anything
//! is created, with one line naming `troupe trust` and `--trust-workspace`; read-only and
//! steering commands leave the values out (saying so when the store they would use was one);
//! `troupe config` shows everything and marks what waits.

use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::OnceLock;

use troupe::error::ErrorCode;
use troupe::model::config::{
    process_env, read_env_file, split_dotenv_trust_against, ENV_FILE_NAME,
};
use troupe::settings::trust::{TrustItem, TrustKind, TrustState, TrustStore, TRUST_WORKSPACE_VAR};
use troupe::settings::{user_config_path, Settings};
use troupe::terminal_text::{for_terminal, line_for_terminal};

use crate::error::CliError;

/// The stable code of a command refused because its workspace is not trusted.
pub const UNTRUSTED_CODE: &str = "workspace_untrusted";

/// `--trust-workspace`, set once by `main` (a global flag).
static FLAG: OnceLock<bool> = OnceLock::new();

/// Records `--trust-workspace` for this process.
pub fn set_flag(on: bool) {
    let _ = FLAG.set(on);
}

/// Whether this command trusts the workspace without a record: `--trust-workspace`, or
/// `TROUPE_TRUST_WORKSPACE` set to `1`, `true` or `yes`.
pub fn opted_in() -> bool {
    FLAG.get().copied().unwrap_or(false)
        || std::env::var(TRUST_WORKSPACE_VAR)
            .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}

/// How a command uses its settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// It runs agents, commands or servers: untrusted values need the person's answer.
    Run,
    /// It reads or steers state: untrusted values are left out.
    Read,
    /// `troupe config`: every value, with the trust state beside them.
    Show,
}

/// A workspace's settings as a command may use them.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub settings: Settings,
    /// The workspace `.env`'s variables that apply (read into memory only).
    pub dotenv: HashMap<String, String>,
    /// Every trust-requiring value of the workspace's files.
    pub items: Vec<TrustItem>,
    pub state: TrustState,
    /// Whether the trust-requiring values apply to this command.
    pub applied: bool,
    /// They apply because of `--trust-workspace` / `TROUPE_TRUST_WORKSPACE`, not a record.
    pub by_flag: bool,
}

/// What the workspace's files hold, read once.
pub struct Review {
    pub trusted: Settings,
    pub untrusted: Settings,
    pub dotenv: HashMap<String, String>,
    pub dotenv_untrusted: HashMap<String, String>,
    pub items: Vec<TrustItem>,
}

/// Reads `troupe.toml`, the user's `config.toml` and `.env` (a bad settings file, or a rule
/// naming no known tool, is exit 2 naming the file and line) and sets their trust-requiring values apart. `lenient_dotenv`: an
/// unreadable `.env` counts as empty (for commands that never call a model).
pub fn review(workspace: &Path, lenient_dotenv: bool) -> Result<Review, CliError> {
    let reviewed = Settings::load_reviewed(workspace, user_config_path().as_deref())
        .map_err(|e| CliError::usage(e.to_string()).with_code(e.code()))?;
    // Every file's rules, before trust leaves any out: a rule naming no tool is a mistake
    // whether or not the workspace is trusted.
    troupe::bootstrap::check_rule_tools(&reviewed.trusted)
        .map_err(|e| CliError::usage(e.to_string()).with_code(e.code()))?;
    let dotenv = match read_env_file(&workspace.join(ENV_FILE_NAME)) {
        Ok(vars) => vars,
        Err(_) if lenient_dotenv => HashMap::new(),
        Err(e) => return Err(CliError::usage(e.to_string()).with_code(e.code())),
    };
    // The person's own variables decide which provider and key a `.env` may not change; one
    // that is not UTF-8 fails the model's configuration later, whatever the `.env` holds.
    let env = process_env().unwrap_or_default();
    let (dotenv_untrusted, dotenv_items) =
        split_dotenv_trust_against(dotenv.clone(), &env, &reviewed.untrusted.model);
    let mut items = reviewed.items;
    items.extend(dotenv_items);
    Ok(Review {
        trusted: reviewed.trusted,
        untrusted: reviewed.untrusted,
        dotenv,
        dotenv_untrusted,
        items,
    })
}

/// The person's record for the workspace's current content.
pub fn state(workspace: &Path, items: &[TrustItem]) -> Result<TrustState, CliError> {
    if items.is_empty() {
        return Ok(TrustState::NotNeeded);
    }
    match TrustStore::user() {
        Some(store) => store
            .state(workspace, items)
            .map_err(|e| CliError::coded(&e)),
        None => Ok(TrustState::Untrusted),
    }
}

/// The settings `workspace`'s command may use (see the module docs).
pub fn load(workspace: &Path, how: Use) -> Result<Loaded, CliError> {
    let review = review(workspace, how == Use::Read)?;
    let by_flag = !review.items.is_empty() && opted_in();
    let recorded = match state(workspace, &review.items) {
        Ok(state) => state,
        // A trust record that cannot be read trusts nothing; a command that would run the
        // workspace's values says why.
        Err(e) if how == Use::Run && !by_flag => return Err(e),
        Err(_) => TrustState::Untrusted,
    };
    if by_flag || recorded.allows() || how == Use::Show {
        return Ok(loaded(review, recorded, true, by_flag));
    }
    match how {
        Use::Run => ask(workspace, review, recorded),
        Use::Read | Use::Show => {
            if review.trusted.store.url != review.untrusted.store.url {
                eprintln!(
                    "troupe: the [store] url of {} is left out until you trust this workspace \
                     (troupe trust)",
                    troupe::settings::PROJECT_FILE_NAME
                );
            }
            Ok(loaded(review, recorded, false, false))
        }
    }
}

fn loaded(review: Review, state: TrustState, applied: bool, by_flag: bool) -> Loaded {
    let (settings, dotenv) = if applied {
        (review.trusted, review.dotenv)
    } else {
        (review.untrusted, review.dotenv_untrusted)
    };
    Loaded {
        settings,
        dotenv,
        items: review.items,
        state,
        applied,
        by_flag,
    }
}

/// An untrusted workspace for a command that would run its values: the prompt on a terminal,
/// else exit 2 with one line.
fn ask(workspace: &Path, review: Review, state: TrustState) -> Result<Loaded, CliError> {
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !interactive {
        return Err(refusal(workspace, &review.items, state));
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{}", describe(workspace, &review.items, state));
    let _ = writeln!(
        err,
        "troupe runs none of this until you trust the workspace; trust is recorded in your \
         config folder, not in the workspace."
    );
    loop {
        let _ = write!(
            err,
            "[t]rust and run / [r]un without them / [q]uit (default q): "
        );
        let _ = err.flush();
        let mut answer = String::new();
        let read = std::io::stdin().lock().read_line(&mut answer);
        let answer = match read {
            Ok(0) | Err(_) => "q".to_owned(),
            Ok(_) => answer.trim().to_ascii_lowercase(),
        };
        match answer.as_str() {
            "t" | "trust" => {
                record(workspace, &review.items)?;
                let _ = writeln!(
                    err,
                    "troupe: trusted {}",
                    for_terminal(&workspace.display().to_string())
                );
                return Ok(loaded(review, TrustState::Trusted, true, false));
            }
            "r" | "run" => {
                let _ = writeln!(
                    err,
                    "troupe: running without the workspace's trust-requiring settings"
                );
                return Ok(loaded(review, state, false, false));
            }
            "" | "q" | "quit" => {
                return Err(CliError::usage(format!(
                    "quit: workspace {} is not trusted; nothing ran",
                    workspace.display()
                ))
                .with_code(UNTRUSTED_CODE))
            }
            _ => continue,
        }
    }
}

/// Records the person's trust in `items` of `workspace`, now.
pub fn record(workspace: &Path, items: &[TrustItem]) -> Result<(), CliError> {
    let store = TrustStore::user().ok_or_else(no_config_folder)?;
    let now = troupe::wire::UtcTime::from_datetime(chrono::Utc::now()).to_string();
    store
        .record(workspace, items, &now)
        .map_err(|e| CliError::coded(&e))
}

/// The one line of a refusal without a terminal.
fn refusal(workspace: &Path, items: &[TrustItem], state: TrustState) -> CliError {
    let ws = workspace.display();
    let why = match state {
        TrustState::Changed => "its trust-requiring settings changed since you trusted it",
        _ => "it is not trusted",
    };
    CliError::usage(format!(
        "workspace {ws}: {why}, and its files would {}; review them with `troupe trust \
         --workspace {ws}`, or pass --trust-workspace (TROUPE_TRUST_WORKSPACE=1) to trust it \
         for this command",
        summary(items)
    ))
    .with_code(UNTRUSTED_CODE)
}

/// `run 1 hook, send your API key to http://…, allow shell` — what the items would do, short.
pub fn summary(items: &[TrustItem]) -> String {
    let count = |kind: TrustKind| items.iter().filter(|i| i.kind == kind).count();
    let plural = |n: usize, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let mut parts = Vec::new();
    if count(TrustKind::Hook) > 0 {
        parts.push(format!(
            "run {}",
            plural(count(TrustKind::Hook), "hook", "hooks")
        ));
    }
    if count(TrustKind::McpServer) > 0 {
        parts.push(format!(
            "start {}",
            plural(count(TrustKind::McpServer), "MCP server", "MCP servers")
        ));
    }
    for item in items {
        match item.kind {
            // `sends your API key to …` → `send your API key to …`
            TrustKind::ModelServer
            | TrustKind::Provider
            | TrustKind::ApiKey
            | TrustKind::Store
            | TrustKind::GitRemote => parts.push(match item.shown.split_once(' ') {
                Some((verb, rest)) => {
                    format!("{} {rest}", verb.strip_suffix('s').unwrap_or(verb))
                }
                None => item.shown.clone(),
            }),
            _ => {}
        }
    }
    let allows: Vec<&str> = items
        .iter()
        .filter(|i| i.kind == TrustKind::Allow)
        .map(|i| i.content.as_str())
        .collect();
    if !allows.is_empty() {
        parts.push(format!("allow {} without asking", allows.join(", ")));
    }
    for (kind, what) in [
        (TrustKind::UnconfinedHooks, "run hooks unconfined"),
        (TrustKind::SandboxMode, "loosen the sandbox"),
        (TrustKind::Network, "give commands the network"),
        (TrustKind::Prices, "lower the prices --max-cost counts with"),
        (TrustKind::CostLimit, "raise your [run] max_cost"),
        (
            TrustKind::ApprovalRoute,
            "let the lead answer teammates' permission asks",
        ),
        (TrustKind::Telemetry, "send the run's traces elsewhere"),
        (
            TrustKind::Retention,
            "delete troupe's state sooner than the defaults",
        ),
    ] {
        if count(kind) > 0 {
            parts.push(what.to_owned());
        }
    }
    parts.join(", ")
}

/// The review: a heading, then each item with its file, one line each. What the workspace
/// wrote is shown, never obeyed: its control characters (and an item's newlines, which could
/// fake an item of their own or push the real start off the screen) are escaped here
/// ([`troupe::terminal_text`]), so the text is printed as it is, not escaped again.
pub fn describe(workspace: &Path, items: &[TrustItem], state: TrustState) -> String {
    let shown_workspace = workspace.display().to_string();
    let shown_workspace = line_for_terminal(&shown_workspace);
    let new = match state {
        TrustState::Changed => TrustStore::user()
            .and_then(|store| store.untrusted(workspace, items).ok())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let heading = match state {
        TrustState::NotNeeded => {
            return format!("{shown_workspace}: its files hold nothing that needs trust\n")
        }
        TrustState::Trusted => "is trusted; its files",
        TrustState::Changed => {
            "changed since you trusted it (its trust-requiring settings differ); its files now"
        }
        TrustState::Untrusted => "is not trusted; its files would",
    };
    let mut out = format!("{shown_workspace} {heading}:\n");
    let mut new = new;
    for item in items {
        let mark = match new.iter().position(|n| n == item) {
            Some(at) => {
                new.remove(at);
                "   (not trusted yet)"
            }
            None => "",
        };
        out.push_str(&format!(
            "  {:<12} {}{mark}\n",
            item.file,
            line_for_terminal(&item.shown)
        ));
    }
    out
}

/// Trust cannot be recorded without a config folder.
pub fn no_config_folder() -> CliError {
    let e = troupe::settings::trust::TrustError::NoConfigFolder;
    CliError::coded(&e)
}
