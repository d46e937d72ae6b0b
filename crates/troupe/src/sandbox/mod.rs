//! Confining the commands agents run (SPEC §11, "Sandbox").
//!
//! A [`Sandbox`] turns a command line into a child process that can read the file system except
//! the protected paths, write only where its [`Mode`] says, and reach the network only as its
//! [`Network`] says. troupe itself is never restricted: everything happens in the child, between
//! fork and exec, or in a `bwrap` process that then runs the command.
//!
//! - `workspace-write` (the default): writes inside the workspace — minus its protected paths
//!   ([`crate::protected`]: `.git` whole, `troupe.toml`, `.env`, `.troupe/` and the settings'
//!   `deny_write`), which stay readable (but `.env`) and can be neither written, renamed nor
//!   replaced — the run's private temp folder, a private `/dev/shm` and harmless devices
//!   (`/dev/null`, …). A protected path that does not exist when a command starts cannot be
//!   held by a mount: if the command creates it, it is moved aside into
//!   `.troupe/blocked/` when the command ends, and the command's result says so
//!   ([`Sandbox::undo_created`]).
//! - `read-only`: writes only to the private temp folder and those devices.
//!
//! The private temp folder (`private_temp`) is made in the host's (`$TMPDIR`, else `/tmp`) and
//! mounted over it for the command when the workspace is not inside it, so `/tmp/x` lands
//! there; otherwise the host's temp folder is not writable and `TMPDIR` names the private one.
//! Either way a command never writes the host's temp folder, where a workspace (or a
//! neighbour's project) may live. A protected path stays protected whatever writable folder
//! contains it, in every mode.
//! - `off`: no confinement.
//!
//! In both confined modes nothing under `~/.ssh`, `~/.aws`, `~/.gnupg`, `~/.config/gcloud`, the
//! workspace's `.env` or the settings' extra paths can be read, and the network is off unless the
//! settings allow it (all of it, or a private loopback only).
//!
//! **Mechanisms.** [`Mechanism::Landlock`]: the child enters a new user, mount (and, for the
//! network, network) namespace, makes `.troupe/` a read-only bind mount and masks protected paths
//! that lie inside writable folders, then restricts itself with a Landlock ruleset built by the
//! parent (reads granted everywhere but the protected paths, writes only to the writable roots,
//! signals and abstract sockets scoped to the sandbox). Landlock also forbids the command to
//! undo the mounts. [`Mechanism::Bubblewrap`]: the same view built by `bwrap`, used when Landlock
//! or user namespaces are missing. When neither works, [`Sandbox::new`] refuses with
//! `sandbox_unavailable`, naming `--sandbox off`: a confined run never runs unconfined silently.
//!
//! **Architecture Invariant:** the pre-exec code ([`namespace`]) only makes system calls on
//! data prepared before the fork — no allocation, no lock — so it is safe in the child of a
//! multi-threaded process.

mod bubblewrap;
mod created;
mod denial;
mod landlock_rules;
mod namespace;
mod paths;
mod private_temp;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::ErrorCode;

pub use created::Absent;
pub use paths::{real, Host, Protected};

/// How much a command may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    #[default]
    WorkspaceWrite,
    ReadOnly,
    Off,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::WorkspaceWrite, Mode::ReadOnly, Mode::Off];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::WorkspaceWrite => "workspace-write",
            Mode::ReadOnly => "read-only",
            Mode::Off => "off",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                format!("unknown sandbox mode {s:?}: expected workspace-write, read-only or off")
            })
    }
}

/// What a confined command may reach over the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Network {
    /// No network at all: a network namespace with no interface up.
    #[default]
    Off,
    /// A private loopback of its own (a test server the command starts is reachable; the
    /// host's services are not).
    Loopback,
    /// The host's network, unrestricted.
    On,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Off => "off",
            Network::Loopback => "loopback",
            Network::On => "on",
        }
    }
}

/// What the settings and flags ask for, before the machine is asked whether it can.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    pub mode: Mode,
    pub network: Network,
    /// More paths no command may read (absolute, `~/…`, or relative to the workspace).
    pub deny_read: Vec<String>,
    /// More paths no command may write (absolute, `~/…`, or relative to the workspace), beside
    /// the built-in protected paths ([`crate::protected`]).
    pub deny_write: Vec<String>,
}

/// How commands are confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    /// Landlock and namespaces, set up in the child before exec.
    Landlock { abi: i32 },
    /// `bwrap` at this path.
    Bubblewrap(PathBuf),
}

impl Mechanism {
    pub fn name(&self) -> &'static str {
        match self {
            Mechanism::Landlock { .. } => "landlock",
            Mechanism::Bubblewrap(_) => "bubblewrap",
        }
    }
}

/// Forces one mechanism (`landlock` or `bubblewrap`) instead of trying Landlock first: for
/// diagnosis and for the tests of the fallback.
pub const MECHANISM_VAR: &str = "TROUPE_SANDBOX_MECHANISM";

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "cannot confine commands on this machine ({reasons}); run with `--sandbox off` to run \
         them unconfined"
    )]
    Unavailable { reasons: String },
    #[error("cannot prepare the sandbox: {0}")]
    Prepare(String),
}

impl ErrorCode for SandboxError {
    fn code(&self) -> &'static str {
        match self {
            SandboxError::Unavailable { .. } => "sandbox_unavailable",
            SandboxError::Prepare(_) => "sandbox_failed",
        }
    }
}

/// A sandbox ready to start commands: the policy, resolved against one workspace, and the
/// mechanism this machine offers.
#[derive(Debug, Clone)]
pub struct Sandbox {
    mode: Mode,
    network: Network,
    paths: Protected,
    mechanism: Option<Mechanism>,
    /// The run's private temp folder (confined only), shared by every clone.
    private_temp: Option<Arc<private_temp::PrivateTemp>>,
}

impl Sandbox {
    /// No confinement (`--sandbox off`).
    pub fn off(workspace: &Path) -> Self {
        Self::unconfined(Protected::resolve(workspace, &[], &[], &Host::from_env()))
    }

    fn unconfined(paths: Protected) -> Self {
        Self {
            mode: Mode::Off,
            network: Network::On,
            paths,
            mechanism: None,
            private_temp: None,
        }
    }

    /// Resolves `policy` for `workspace` on this machine ([`Host::from_env`]) and finds a
    /// mechanism that works here (by starting `true` under it), or refuses. `off` needs none.
    pub fn new(policy: &Policy, workspace: &Path) -> Result<Self, SandboxError> {
        Self::new_on(policy, workspace, &Host::from_env())
    }

    /// [`Sandbox::new`] with the home, temp folder and forced mechanism given.
    pub fn new_on(policy: &Policy, workspace: &Path, host: &Host) -> Result<Self, SandboxError> {
        let mut paths = Protected::resolve(workspace, &policy.deny_read, &policy.deny_write, host);
        if policy.mode == Mode::Off {
            return Ok(Self::unconfined(paths));
        }
        let private_temp = Arc::new(private_temp::PrivateTemp::create(paths.host_temp())?);
        paths.use_private_temp(private_temp.path());
        let forced = host.mechanism.clone();
        let mut reasons = Vec::new();
        for candidate in ["landlock", "bubblewrap"] {
            if forced.as_deref().is_some_and(|f| f != candidate) {
                continue;
            }
            let found = match candidate {
                "landlock" => landlock_rules::abi()
                    .map(|abi| Mechanism::Landlock { abi })
                    .ok_or_else(|| "landlock: not supported by this kernel".to_owned()),
                _ => bubblewrap::find()
                    .map(Mechanism::Bubblewrap)
                    .ok_or_else(|| "bubblewrap: `bwrap` not found on PATH".to_owned()),
            };
            let mechanism = match found {
                Ok(m) => m,
                Err(reason) => {
                    reasons.push(reason);
                    continue;
                }
            };
            let sandbox = Self {
                mode: policy.mode,
                network: policy.network,
                paths: paths.clone(),
                mechanism: Some(mechanism),
                private_temp: Some(private_temp.clone()),
            };
            match sandbox.probe() {
                Ok(()) => return Ok(sandbox),
                Err(e) => reasons.push(format!("{candidate}: {e}")),
            }
        }
        if let Some(forced) = forced.filter(|f| f != "landlock" && f != "bubblewrap") {
            reasons.push(format!("{MECHANISM_VAR}={forced:?} names no mechanism"));
        }
        Err(SandboxError::Unavailable {
            reasons: reasons.join("; "),
        })
    }

    /// The same machine and protected paths under another mode (an agent definition's own
    /// `sandbox`). From `off` a mechanism must still be found, so this may refuse too.
    pub fn with_mode(&self, mode: Mode, policy: &Policy) -> Result<Self, SandboxError> {
        match (mode, &self.mechanism) {
            (Mode::Off, _) => Ok(Self::unconfined(self.paths.clone())),
            (_, Some(_)) => Ok(Self {
                mode,
                network: policy.network,
                ..self.clone()
            }),
            (_, None) => Self::new(
                &Policy {
                    mode,
                    ..policy.clone()
                },
                self.paths.workspace(),
            ),
        }
    }

    /// The same sandbox with `root` as its workspace: a teammate's git worktree
    /// (`.troupe/worktrees/<name>`), the only folder (with the temp folder) its commands may
    /// write. The protected paths stay — the lead's `.env` is still unreadable — and the
    /// worktree's own `.env` joins them; the lead's checkout, inside which the worktree lies,
    /// is no writable root.
    pub fn rooted_at(&self, root: &Path) -> Self {
        Self {
            paths: self.paths.rooted_at(root),
            ..self.clone()
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn network(&self) -> Network {
        self.network
    }

    pub fn mechanism(&self) -> Option<&Mechanism> {
        self.mechanism.as_ref()
    }

    pub fn protected(&self) -> &Protected {
        &self.paths
    }

    /// The run's private temp folder (confined only), as it is on the host: removed when the
    /// last clone of this sandbox is dropped.
    pub fn private_temp(&self) -> Option<&Path> {
        self.private_temp
            .as_deref()
            .map(private_temp::PrivateTemp::path)
    }

    /// One line for the start of a run: `workspace-write (landlock, network off)`.
    pub fn describe(&self) -> String {
        match &self.mechanism {
            None => "off (commands run unconfined)".to_owned(),
            Some(m) => format!(
                "{} ({}, network {})",
                self.mode,
                m.name(),
                self.network.as_str()
            ),
        }
    }

    /// `sh -c command`, confined. The caller sets the working folder, stdio, environment and
    /// process group.
    /// Confined commands get `TMPDIR` set to the temp folder they may write: the run's private
    /// one (see [`Protected::temp_mounted_over_host`] for where they see it).
    pub fn shell(&self, command: &str) -> Result<tokio::process::Command, SandboxError> {
        let std_command = self.shell_std(command)?;
        Ok(tokio::process::Command::from(std_command))
    }

    fn shell_std(&self, command: &str) -> Result<std::process::Command, SandboxError> {
        self.command("sh", &["-c".to_owned(), command.to_owned()])
    }

    /// `program` with `args`, confined like a command (an MCP server's process). The caller
    /// sets the working folder, stdio, environment and process group.
    pub fn command(
        &self,
        program: &str,
        args: &[String],
    ) -> Result<std::process::Command, SandboxError> {
        let mut c = match &self.mechanism {
            None => {
                let mut c = std::process::Command::new(program);
                c.args(args);
                c
            }
            Some(Mechanism::Landlock { .. }) => {
                let prepared = namespace::Prepared::new(self)?;
                let mut c = std::process::Command::new(program);
                c.args(args);
                prepared.install(&mut c);
                c
            }
            Some(Mechanism::Bubblewrap(bwrap)) => {
                let mut c = std::process::Command::new(bwrap);
                c.args(bubblewrap::arguments(self));
                c.arg("--").arg(program).args(args);
                c
            }
        };
        if self.mechanism.is_some() {
            c.env("TMPDIR", self.paths.command_temp());
        }
        Ok(c)
    }

    /// The sandbox an MCP server runs under: `mode` (else this sandbox's) and `network`, on the
    /// same machine, protected paths and private temp folder. From `off` a mechanism must
    /// still be found, so this may refuse.
    pub fn for_server(&self, mode: Option<Mode>, network: Network) -> Result<Self, SandboxError> {
        let mode = mode.unwrap_or(self.mode);
        match (mode, &self.mechanism) {
            (Mode::Off, _) => Ok(Self::unconfined(self.paths.clone())),
            (_, Some(_)) => Ok(Self {
                mode,
                network,
                ..self.clone()
            }),
            (_, None) => Self::new(
                &Policy {
                    mode,
                    network,
                    deny_read: Vec::new(),
                    deny_write: Vec::new(),
                },
                self.paths.workspace(),
            ),
        }
    }

    /// Starts `true` under the sandbox and waits for it: whether this mechanism works here.
    fn probe(&self) -> Result<(), String> {
        let mut c = self.shell_std("true").map_err(|e| e.to_string())?;
        let out = c
            .current_dir(self.paths.workspace())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(format!(
                "a confined `true` failed ({}){}",
                out.status,
                match stderr.trim() {
                    "" => String::new(),
                    s => format!(": {}", s.lines().next().unwrap_or_default()),
                }
            ))
        }
    }

    /// The protected paths that do not exist now, inside what a command may write: to be
    /// moved aside if the command creates them ([`Absent::undo_created`], see the module doc).
    /// `None` when commands run unconfined or cannot write there.
    pub fn absent_protected(&self) -> Option<Absent> {
        self.mechanism.as_ref()?;
        let writable = self.paths.writable(self.mode);
        let missing: Vec<_> = self
            .paths
            .write_protected()
            .missing()
            .into_iter()
            .filter(|p| writable.iter().any(|w| p.path.starts_with(w)))
            .collect();
        (!missing.is_empty()).then(|| {
            Absent::new(
                missing,
                self.paths.workspace().to_owned(),
                self.paths.blocked_dir().to_owned(),
            )
        })
    }

    /// Notes for the model when a confined command's `output` shows it ran into the sandbox:
    /// `sandbox: write outside the workspace denied: /path`, …. Empty when unconfined or when
    /// nothing in the output points at the sandbox.
    pub fn explain(&self, output: &str, cwd: &Path) -> Vec<String> {
        if self.mechanism.is_none() {
            return Vec::new();
        }
        denial::explain(self, output, cwd)
    }
}
