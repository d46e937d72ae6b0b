//! Choosing a run's sandbox (SPEC §11): `--sandbox` > `TROUPE_SANDBOX` > the settings'
//! `[sandbox] mode` > `workspace-write`; the network, extra protected paths and hooks from the
//! settings. The machine is asked at once whether it can confine: when it cannot, a confined run
//! is refused (exit 2, `sandbox_unavailable`) before any state exists.

use std::path::Path;
use std::sync::Arc;

use troupe::bootstrap::SandboxOptions;
use troupe::error::ErrorCode;
use troupe::sandbox::{Mode, Network, Policy, Sandbox};
use troupe::settings::{Settings, Source, Sourced};

use crate::args::ApprovalMode;
use crate::error::CliError;

/// The variable that sets the mode when `--sandbox` does not.
pub const SANDBOX_VAR: &str = "TROUPE_SANDBOX";

/// The mode and where it came from.
pub fn mode(flag: Option<Mode>, settings: &Settings) -> Result<Sourced<Mode>, CliError> {
    if let Some(value) = flag {
        return Ok(Sourced {
            value,
            source: Source::Flag("--sandbox".into()),
        });
    }
    match std::env::var(SANDBOX_VAR) {
        Ok(raw) if !raw.trim().is_empty() => {
            let value = raw
                .trim()
                .parse::<Mode>()
                .map_err(|why| CliError::usage(format!("{SANDBOX_VAR}: {why}")))?;
            Ok(Sourced {
                value,
                source: Source::Env(SANDBOX_VAR.into()),
            })
        }
        _ => Ok(settings.sandbox.mode.clone().unwrap_or(Sourced {
            value: Mode::default(),
            source: Source::Default,
        })),
    }
}

/// The network setting and where it came from.
pub fn network(settings: &Settings) -> Sourced<Network> {
    settings.sandbox.network.clone().unwrap_or(Sourced {
        value: Network::Off,
        source: Source::Default,
    })
}

/// The run's sandbox, found to work on this machine, and the start-of-run line that says what
/// it is (and, when a workspace's own troupe.toml loosened it, says that too).
pub fn options(
    workspace: &Path,
    flag: Option<Mode>,
    settings: &Settings,
    approval: ApprovalMode,
) -> Result<(SandboxOptions, String), CliError> {
    let mode = mode(flag, settings)?;
    let network = network(settings);
    let policy = Policy {
        mode: mode.value,
        network: network.value,
        deny_read: settings.sandbox.deny_read.clone(),
        deny_write: settings.sandbox.deny_write.clone(),
    };
    let sandbox = Sandbox::new(&policy, workspace)
        .map_err(|e| CliError::usage(e.to_string()).with_code(e.code()))?;
    let mut line = format!("sandbox: {}", sandbox.describe());
    for (what, source, loosens) in [
        ("mode", &mode.source, mode.value == Mode::Off),
        ("network", &network.source, network.value != Network::Off),
    ] {
        if loosens && matches!(source, Source::Project(_)) {
            line.push_str(&format!(" — {what} set by {}", source.describe()));
        }
    }
    Ok((
        SandboxOptions {
            sandbox: Arc::new(sandbox),
            policy,
            confine_hooks: settings.sandbox.hooks.as_ref().is_some_and(|h| h.value),
            unconfined_reruns: approval == ApprovalMode::Ask,
        },
        line,
    ))
}
