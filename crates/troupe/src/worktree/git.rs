//! Running git for troupe: a child process with explicit arguments (never a shell), with the
//! repository treated as hostile input.
//!
//! - Every variable of the environment whose name starts with `GIT_` is removed, so nothing
//!   outside troupe (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`, `GIT_CONFIG_*`, …) redirects
//!   a command; troupe sets the few it needs itself (identities, `GIT_TERMINAL_PROMPT=0`).
//! - What a repository's configuration could make git run is switched off for troupe's
//!   commands ([`SAFE_CONFIG`]): hooks (`core.hooksPath=/dev/null`), the file system monitor,
//!   signing programs; diffs are asked for without external diff or text conversion. Filters
//!   and merge drivers named in `.gitattributes` run only if the repository's own config
//!   defines them — that config is the person's (the sandbox keeps agents out of
//!   `.git/config`), like their `~/.gitconfig`.
//! - Every call has a timeout ([`GIT_TIMEOUT`]); past it, git's process group is killed.
//! - Messages are read in the C locale, so troupe can recognise them.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::WorktreeError;

/// How long one git command may run.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(60);

/// The `-c` settings given to every git command troupe runs: nothing configured in the
/// repository runs a program (hooks, fsmonitor, signing, a pager, an editor, credentials).
pub const SAFE_CONFIG: [&str; 8] = [
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "core.pager=cat",
    "core.editor=true",
    "credential.helper=",
    "core.untrackedCache=false",
];

/// Where a git command runs: a checkout found from its folder (the lead's), or a worktree
/// given by its admin folder and its files explicitly, so that a `.git` file inside the
/// worktree (which its teammate can write) never decides which repository is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// `git -C <dir>`: the repository whose top level is `dir`.
    Checkout(PathBuf),
    /// `git --git-dir=<git_dir> --work-tree=<files>`.
    Worktree { git_dir: PathBuf, files: PathBuf },
}

impl Place {
    /// The folder the command's paths are relative to.
    pub fn dir(&self) -> &Path {
        match self {
            Place::Checkout(dir) => dir,
            Place::Worktree { files, .. } => files,
        }
    }
}

/// What a finished git command printed.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn ok(&self) -> bool {
        self.status.success()
    }

    /// The first line of stderr (else stdout): what a failure says, in one line.
    pub fn why(&self) -> String {
        let text = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("(no message)")
            .to_owned()
    }
}

/// A git command about to run.
pub struct Git {
    command: Command,
    /// `git <args>` as shown in errors.
    shown: String,
    timeout: Duration,
}

impl Git {
    /// `git <safe config> <place> <args>`.
    pub fn new<I, S>(place: &Place, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::in_environment(place, args, std::env::vars_os().map(|(key, _)| key))
    }

    /// [`Git::new`] for a process whose environment holds the variables `inherited`.
    fn in_environment<I, S>(
        place: &Place,
        args: I,
        inherited: impl Iterator<Item = std::ffi::OsString>,
    ) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new("git");
        for key in inherited {
            if key.to_string_lossy().starts_with("GIT_") {
                command.env_remove(&key);
            }
        }
        command
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .env("LANGUAGE", "C");
        for setting in SAFE_CONFIG {
            command.arg("-c").arg(setting);
        }
        match place {
            Place::Checkout(dir) => {
                command.arg("-C").arg(dir);
            }
            Place::Worktree { git_dir, files } => {
                command
                    .arg("--git-dir")
                    .arg(git_dir)
                    .arg("--work-tree")
                    .arg(files)
                    .current_dir(files);
            }
        }
        let mut shown = String::from("git");
        for arg in args {
            let arg = arg.as_ref();
            shown.push(' ');
            shown.push_str(&arg.to_string_lossy());
            command.arg(arg);
        }
        Self {
            command,
            shown,
            timeout: GIT_TIMEOUT,
        }
    }

    /// Sets an environment variable of the command (an identity).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.command.env(key, value);
        self
    }

    /// Reads without taking git's optional locks (an inspection never writes the index).
    pub fn read_only(self) -> Self {
        self.env("GIT_OPTIONAL_LOCKS", "0")
    }

    /// Another timeout (tests).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs it to its end (or its timeout): what it printed, whatever its exit status.
    pub fn output(mut self) -> Result<Output, WorktreeError> {
        let shown = self.shown.clone();
        let failed = |why: String| WorktreeError::Git {
            command: shown.clone(),
            why,
        };
        let mut child = self
            .command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| failed(format!("cannot start git: {e}")))?;
        let pgid = child.id();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || {
            let stderr_reader = std::thread::spawn(move || read_all(stderr));
            let stdout = read_all(stdout);
            let stderr = stderr_reader.join().unwrap_or_default();
            let status = child.wait();
            let _ = done.send(status.map(|status| Output {
                status,
                stdout,
                stderr,
            }));
        });
        let result = match finished.recv_timeout(self.timeout) {
            Ok(result) => result,
            Err(_) => {
                if let Ok(pgid) = libc::pid_t::try_from(pgid) {
                    crate::process::signal_group(pgid, libc::SIGKILL);
                }
                let _ = finished.recv();
                return Err(WorktreeError::Timeout {
                    command: shown,
                    after: self.timeout,
                });
            }
        };
        result.map_err(|e| failed(format!("waiting for git: {e}")))
    }

    /// Runs it and requires success: its stdout.
    pub fn run(self) -> Result<String, WorktreeError> {
        let shown = self.shown.clone();
        let output = self.output()?;
        if output.ok() {
            Ok(output.stdout)
        } else {
            Err(WorktreeError::Git {
                command: shown,
                why: output.why(),
            })
        }
    }
}

fn read_all(pipe: Option<impl Read>) -> String {
    let mut bytes = Vec::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The lines of `text`, trimmed, without empty ones.
pub fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_past_its_timeout_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        // `git var` with an editor that sleeps would need config; `git hash-object --stdin`
        // waits on stdin, which is /dev/null, so use a long `sleep` alias instead.
        let err = Git::new(
            &Place::Checkout(dir.path().to_owned()),
            ["-c", "alias.nap=!sleep 30", "nap"],
        )
        .with_timeout(Duration::from_millis(200))
        .output()
        .unwrap_err();
        assert!(matches!(err, WorktreeError::Timeout { .. }), "{err}");
    }

    #[test]
    fn git_variables_of_the_environment_are_not_passed_on() {
        let dir = tempfile::tempdir().unwrap();
        let inherited = ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "HOME", "PATH"]
            .into_iter()
            .map(std::ffi::OsString::from);
        let git = Git::in_environment(
            &Place::Checkout(dir.path().to_owned()),
            ["status"],
            inherited,
        );
        let mut removed: Vec<_> = git
            .command
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        removed.sort();
        assert_eq!(removed, ["GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE"]);
        let args: Vec<_> = git
            .command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            args.contains(&"core.hooksPath=/dev/null".to_owned()),
            "{args:?}"
        );
    }
}
