//! What the commands that start agents resolve before anything runs: the settings through the
//! trust gate, the approval provider, the model and its context window. `run` and `worker` use
//! all of it, `compact` the model, `config` the context window with its source; it depends on
//! none of them.

use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use troupe::bootstrap::{ModelChooser, ScriptedPerAgent};
use troupe::error::ErrorCode;
use troupe::model::by_name::ClientsByName;
use troupe::model::config::{ModelConfig, ModelOverrides};
use troupe::model::{ModelClient, OpenAiClient, ScriptedModel};
use troupe::permissions::{ApprovalProvider, AutoApproval, DenyApproval, TerminalApproval};
use troupe::secrets::Redactor;
use troupe::settings::{ApprovalSettings, NoTerminal, Settings, Source, Sourced};

use crate::args::{ApprovalMode, ModelFlags};
use crate::error::CliError;
use crate::trust::Loaded;

/// The provider for `mode`; a terminal prompt ends (denied) when `cancel` fires.
pub fn approval_provider(
    mode: ApprovalMode,
    cancel: &CancellationToken,
    workspace: &Path,
) -> Arc<dyn ApprovalProvider> {
    match mode {
        ApprovalMode::Ask => Arc::new(
            TerminalApproval::stdio()
                .with_cancel(cancel.clone())
                .with_saver(crate::save_allow::saver(workspace)),
        ),
        ApprovalMode::Auto => Arc::new(AutoApproval),
        ApprovalMode::Deny => Arc::new(DenyApproval),
    }
}

/// The settings of a command that runs agents (`run`, `worker`), through the trust gate (asked
/// on a terminal, exit 2 without one); the gate's result too (for the model and the approval
/// saver). Whatever `--approval` says, the rules that apply are the person's own and, once the
/// workspace is trusted, its own: a matching rule decides over the default policy even under
/// `--approval deny` or `ask` without a terminal (SPEC §7), and an untrusted workspace's
/// `allow` rules are never among them (the gate left them out).
pub fn settings_for_agents(workspace: &Path) -> Result<(Loaded, Settings), CliError> {
    let loaded = crate::trust::load(workspace, crate::trust::Use::Run)?;
    let settings = loaded.settings.clone();
    Ok((loaded, settings))
}

/// What `--approval ask` says once at start when there is no terminal to ask on: what
/// `[approvals] no_terminal` makes of an ask — denied at once, or a request that waits up to
/// `[approvals] ttl` for an answer from elsewhere. `waits_unless_set`: the command's own choice
/// when no file sets it (`troupe worker` waits, `troupe run` denies; SPEC §7, §13).
pub fn no_terminal_notice(approvals: &ApprovalSettings, waits_unless_set: bool) -> String {
    let waits = approvals
        .no_terminal
        .as_ref()
        .map_or(waits_unless_set, |chosen| chosen.value == NoTerminal::Wait);
    if waits {
        format!(
            "no terminal to ask for approval: calls that need it (write and execute tools) wait \
             up to {} for an answer from another terminal (troupe approve ID, or troupe deny ID; \
             troupe requests lists them) or from the page of troupe serve; no answer in time \
             counts as no",
            humantime::format_duration(approvals.ttl)
        )
    } else {
        "no terminal to ask for approval: calls that need it (write and execute tools) will be \
         denied; use --approval auto to allow them"
            .to_owned()
    }
}

/// Chooses the model before anything touches the workspace: missing configuration exits 2
/// without creating `.troupe/`. With it comes the redactor of its secrets (the API key, and
/// the credentials `main` took out of the environment). The settings files' model values come
/// below the flags, the environment and `.env`.
/// The missing-configuration error and what a person can do next: the Anthropic variables
/// when it asked for OpenAI's (the provider is inferred from them), and the ways to run with
/// no model server at all.
fn with_next_steps(missing: &str) -> String {
    let anthropic = if missing.contains("ANTHROPIC_") {
        ""
    } else {
        "; for Anthropic set ANTHROPIC_API_KEY and ANTHROPIC_MODEL instead"
    };
    format!(
        "{missing}{anthropic}; or run `troupe init` to write a troupe.toml for this folder (with \
         a scripted model when no key is set), run `troupe demo` to watch a scripted team, or \
         give --model-script FILE"
    )
}

/// Whether a model is configured for `workspace` as `troupe run` would choose it; the error
/// says what is missing. Settings that cannot be read yet (a workspace not trusted) are not
/// this check's to report: a session opened there reports them.
pub fn model_configured(workspace: &Path, args: &ModelFlags) -> Result<(), CliError> {
    let Ok(loaded) = crate::trust::load(workspace, crate::trust::Use::Run) else {
        return Ok(());
    };
    models(args, &loaded).map(|_| ())
}

pub fn models(args: &ModelFlags, loaded: &Loaded) -> Result<Models, CliError> {
    let settings = &loaded.settings;
    // `--model-script`, else the settings' `[model] script` (as `troupe init` writes it).
    let script = args
        .model_script
        .clone()
        .or_else(|| settings.model.script.as_ref().map(|s| s.value.clone()));
    if let Some(file) = &args.model_recording {
        return Ok(Models {
            chooser: answered_from_recording(file)?,
            redactor: troupe::secrets::process_redactor(),
            name: troupe::model::scripted::SCRIPTED_MODEL_NAME.to_owned(),
            provider: "troupe.recording",
        });
    }
    if let Some(script) = &script {
        let model = ScriptedModel::from_json_file(script)
            .map_err(|e| CliError::usage(e.to_string()).with_code(e.code()))?;
        return Ok(Models {
            chooser: Arc::new(ScriptedPerAgent(Arc::new(model))),
            redactor: troupe::secrets::process_redactor(),
            name: troupe::model::scripted::SCRIPTED_MODEL_NAME.to_owned(),
            provider: "troupe.scripted",
        });
    }
    let overrides = ModelOverrides {
        provider: args.provider,
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        fallback_model: args.fallback_model.clone(),
        ..ModelOverrides::default()
    };
    let env = troupe::model::config::process_env().map_err(|e| CliError::usage(e.to_string()))?;
    let config = ModelConfig::resolve_layers(&env, &loaded.dotenv, &overrides, &settings.model)
        .map_err(|e| match e.code() {
            "config_missing" => CliError::usage(with_next_steps(&e.to_string())),
            "config_invalid" => CliError::usage(e.to_string()),
            _ => CliError::failed(&e),
        })?;
    // A cloned repository's troupe.toml can name the server that gets the user's API key: say
    // so, every run, before anything is sent.
    if let Some(url) = &settings.model.base_url {
        if matches!(url.source, Source::Project(_)) && url.value == config.base_url {
            eprintln!(
                "troupe: the model server is {} (from {}); your API key is sent there",
                troupe::terminal_text::line_for_terminal(&url.value),
                url.source.describe()
            );
        }
    }
    let client: Arc<dyn ModelClient> =
        Arc::new(OpenAiClient::new(&config).map_err(|e| CliError::failed(&e))?);
    // A teammate may run on another model (its agent definition's, or `[model.agents]`): one
    // client per distinct name, on this endpoint, key and retry policy.
    Ok(Models {
        chooser: Arc::new(ClientsByName::new(config.clone(), client)),
        redactor: config.redactor(),
        name: config.model.clone(),
        provider: match config.provider {
            troupe::model::config::Provider::OpenAi => "openai",
            troupe::model::config::Provider::Azure => "azure.ai.openai",
            troupe::model::config::Provider::Anthropic => "anthropic",
        },
    })
}

/// `--model-recording FILE`: each agent answered with its recorded answers, in its order,
/// whatever it asks.
fn answered_from_recording(file: &Path) -> Result<Arc<dyn ModelChooser>, CliError> {
    use troupe::replay::{Mode, PlayOptions, Player, Recording};
    let recording =
        Recording::load(file).map_err(|e| CliError::usage(e.to_string()).with_code(e.code()))?;
    let player = Player::new(
        recording,
        PlayOptions {
            mode: Mode::AnswerOnly,
            until: None,
            live: None,
            stall: std::time::Duration::from_secs(60),
            workspace: String::new(),
            redactor: troupe::secrets::process_redactor(),
        },
    );
    Ok(player.models())
}

/// The model every agent uses, the redactor of its secrets, and its name (for the built-in
/// context-window table).
pub struct Models {
    pub chooser: Arc<dyn ModelChooser>,
    pub redactor: Redactor,
    pub name: String,
    /// The provider as the GenAI semantic conventions name it (`gen_ai.provider.name`).
    pub provider: &'static str,
}

/// The variable that sets the context window when `--context-window` does not.
pub const CONTEXT_WINDOW_VAR: &str = "TROUPE_CONTEXT_WINDOW";

/// `--context-window`, else `TROUPE_CONTEXT_WINDOW`, else the settings files'
/// `model.context_window`; zero or not a number is a usage error.
pub fn context_window(args: &ModelFlags, settings: &Settings) -> Result<Option<u32>, CliError> {
    Ok(context_window_sourced(args, settings)?.map(|s| s.value))
}

/// [`context_window`] and where it came from; none means the built-in table for the model.
pub fn context_window_sourced(
    args: &ModelFlags,
    settings: &Settings,
) -> Result<Option<Sourced<u32>>, CliError> {
    let raw = match (args.context_window, std::env::var(CONTEXT_WINDOW_VAR)) {
        (Some(tokens), _) => {
            return positive_window(tokens).map(|value| {
                Some(Sourced {
                    value,
                    source: Source::Flag("--context-window".into()),
                })
            })
        }
        (None, Ok(raw)) if !raw.trim().is_empty() => raw,
        _ => return Ok(settings.model.context_window.clone()),
    };
    let tokens = raw.trim().parse::<u32>().map_err(|_| {
        CliError::usage(format!(
            "{CONTEXT_WINDOW_VAR} must be a number of tokens, not {raw:?}"
        ))
    })?;
    positive_window(tokens).map(|value| {
        Some(Sourced {
            value,
            source: Source::Env(CONTEXT_WINDOW_VAR.into()),
        })
    })
}

fn positive_window(tokens: u32) -> Result<u32, CliError> {
    if tokens < 1024 {
        return Err(CliError::usage(format!(
            "the context window must be at least 1024 tokens (got {tokens})"
        )));
    }
    Ok(tokens)
}

/// Starts the settings' MCP servers for a team about to be built (a run's or a worker's): a
/// server that does not start is reported (a warning) and its tools left out; the team goes on.
/// A token a server was given must not come back through its results either: it joins the
/// redactor's secrets.
pub async fn start_mcp(settings: &mut troupe::bootstrap::TeamSettings) {
    if settings.settings.mcp_servers.is_empty() {
        return;
    }
    settings.mcp = Arc::new(
        troupe::mcp::McpServers::start(
            &settings.settings.mcp_servers,
            &settings.workspace,
            &settings.sandbox.sandbox,
        )
        .await,
    );
    let secrets = settings.mcp.secrets();
    settings.redactor = std::mem::take(&mut settings.redactor).with_secrets(secrets);
}
