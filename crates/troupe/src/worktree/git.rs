//! Running git for troupe: a child process with explicit arguments (never a shell), with the
//! repository — and everything in the workspace — treated as hostile input. Every git command
//! troupe runs (worktrees, a teammate's commits, merges, `troupe worktrees`, pushes and fetches
//! through `[team] remote`) goes through [`Git`]; nothing else in troupe starts `git`.
//!
//! What a command can never be made to do by the repository or the workspace:
//!
//! - **Be redirected.** Every variable of the environment whose name starts with `GIT_` is
//!   removed (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`, `GIT_CONFIG_*`, `GIT_SSH_COMMAND`,
//!   `GIT_EXTERNAL_DIFF`, …); troupe sets the few it needs itself. The repository is the
//!   lead's checkout found from its folder ([`Place::Checkout`]) or a teammate's worktree whose
//!   admin folder git itself reported ([`Place::Worktree`], built only after
//!   `verify` compared the worktree's record with `git worktree list`): no `--git-dir` or
//!   `--work-tree` is ever taken from a file the workspace holds, and a relative one is refused.
//! - **Run a program named in configuration** ([`SAFE_CONFIG`] and [`hooks_dir`]): hooks
//!   (`core.hooksPath` names an empty folder of troupe's own, made once per user with mode 0700
//!   under the host's temp folder, which confined commands cannot write), the file system
//!   monitor, signing and signature checks, a pager, an editor, credential helpers and askpass
//!   programs, a proxy command for `git://`, an ssh command other than `ssh` (the person's
//!   `~/.ssh/config` still applies), and submodules (never recursed into, never looked inside:
//!   a nested repository a teammate makes in its worktree keeps its own config to itself).
//!   `diff`, `log` and `show` always get `--no-ext-diff --no-textconv` (added here, not by each
//!   caller: `diff.external=` in config would make git run an empty command instead).
//! - **Reach a transport that runs programs.** `protocol.allow=never` with `file`, `git`,
//!   `http`, `https` and `ssh` allowed: `ext::` (runs a command), `fd::` and any other remote
//!   helper are refused. A fetch, `ls-remote` or push names `git-upload-pack` /
//!   `git-receive-pack` itself (see `remote`), so `remote.<name>.uploadpack` cannot run a
//!   local program.
//! - **Read the machine's `/etc/gitconfig`** (`GIT_CONFIG_NOSYSTEM=1`).
//!
//! **What troupe's git still honours, and why.** The person's own configuration: their
//! `~/.gitconfig` (identity aside, which troupe sets) and the lead's repository's
//! `.git/config` — made by their `git clone` or `git init`, edited by them, and out of the
//! agents' reach (the sandbox keeps agents out of `.git`). Filters, merge drivers and diff
//! drivers that `.gitattributes` names run only if that configuration defines them — as they
//! would for the person's own `git status` (git-lfs keeps working); a `.gitattributes` alone
//! runs nothing. `safe.directory` is left to git: troupe never sets it, so a repository owned
//! by another user is refused by git as it would be for the person (with
//! `GIT_CONFIG_NOSYSTEM`, a `safe.directory` listed only in `/etc/gitconfig` is not seen: put it
//! in `~/.gitconfig`).
//!
//! Every call has a timeout ([`GIT_TIMEOUT`]); past it, git's process group is killed.
//! Messages are read in the C locale, so troupe can recognise them.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use super::WorktreeError;

/// How long one git command may run.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(60);

/// The `-c` settings given to every git command troupe runs (with `core.hooksPath`, see
/// [`hooks_dir`]): nothing configured in the repository runs a program, and only transports
/// that run none are allowed.
pub const SAFE_CONFIG: [&str; 21] = [
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "merge.verifySignatures=false",
    "core.pager=cat",
    "core.editor=true",
    "sequence.editor=true",
    "credential.helper=",
    "core.askPass=",
    "core.sshCommand=ssh",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
    "fetch.recurseSubmodules=false",
    "push.recurseSubmodules=no",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "protocol.git.allow=always",
    "protocol.http.allow=always",
    "protocol.https.allow=always",
    "protocol.ssh.allow=always",
];

/// The environment every git command troupe runs gets (after every `GIT_*` variable was
/// removed): no system config, no prompts, no askpass program, no proxy command.
pub const SAFE_ENVIRONMENT: [(&str, &str); 6] = [
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_ASKPASS", ""),
    ("GIT_PROXY_COMMAND", ""),
    ("LC_ALL", "C"),
    ("LANGUAGE", "C"),
];

/// The subcommands that can produce a diff: external diff programs and text conversion are
/// switched off on them.
const DIFFING: [&str; 3] = ["diff", "log", "show"];

/// Where a git command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// `git -C <dir>`: the repository whose top level is `dir` (the lead's checkout, the
    /// person's own repository).
    Checkout(PathBuf),
    /// `git --git-dir=<admin> --work-tree=<files>`: a teammate's worktree, named by the admin
    /// folder git reported for it, so that a `.git` file in the worktree (which its teammate
    /// can write) or a record in `.troupe/` (which a cloned repository can ship) never decides
    /// which repository is used.
    Worktree(Confirmed),
}

/// A teammate's worktree as git itself knows it: built only by `verify` (after `git
/// worktree list` and the repository's `worktrees/` agreed with the record), never from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmed {
    /// git's admin folder of the worktree: `<common git dir>/worktrees/<id>`, absolute.
    git_dir: PathBuf,
    /// The worktree's files: `.troupe/worktrees/<name>` of the workspace, absolute.
    files: PathBuf,
}

impl Confirmed {
    pub(super) fn new(git_dir: PathBuf, files: PathBuf) -> Self {
        Self { git_dir, files }
    }

    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    pub fn files(&self) -> &Path {
        &self.files
    }
}

impl Place {
    /// The folder the command's paths are relative to.
    pub fn dir(&self) -> &Path {
        match self {
            Place::Checkout(dir) => dir,
            Place::Worktree(worktree) => &worktree.files,
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
    /// Why the command must not run at all (no empty hooks folder, a relative repository
    /// path): reported by [`Git::output`] before anything starts.
    refused: Option<String>,
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
        inherited: impl Iterator<Item = OsString>,
    ) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new("git");
        let mut refused = None;
        for key in inherited {
            if key.to_string_lossy().starts_with("GIT_") {
                command.env_remove(&key);
            }
        }
        for (key, value) in SAFE_ENVIRONMENT {
            command.env(key, value);
        }
        match hooks_dir() {
            Ok(hooks) => {
                let mut setting = OsString::from("core.hooksPath=");
                setting.push(hooks);
                command.arg("-c").arg(setting);
            }
            Err(why) => refused = Some(why.clone()),
        }
        for setting in SAFE_CONFIG {
            command.arg("-c").arg(setting);
        }
        match place {
            Place::Checkout(dir) => {
                if !dir.is_absolute() {
                    refused = Some(format!("{} is not an absolute path", dir.display()));
                }
                command.arg("-C").arg(dir);
            }
            Place::Worktree(Confirmed { git_dir, files }) => {
                if !git_dir.is_absolute() || !files.is_absolute() {
                    refused = Some(format!(
                        "worktree paths must be absolute ({}, {})",
                        git_dir.display(),
                        files.display()
                    ));
                }
                command
                    .arg("--git-dir")
                    .arg(git_dir)
                    .arg("--work-tree")
                    .arg(files)
                    .current_dir(files);
            }
        }
        let mut shown = String::from("git");
        let mut args = args.into_iter().peekable();
        let diffing = args
            .peek()
            .is_some_and(|first| DIFFING.iter().any(|d| OsStr::new(d) == first.as_ref()));
        if let Some(first) = args.next() {
            shown.push(' ');
            shown.push_str(&first.as_ref().to_string_lossy());
            command.arg(first.as_ref());
            if diffing {
                command.args(["--no-ext-diff", "--no-textconv"]);
            }
        }
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
            refused,
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
        if let Some(why) = self.refused.take() {
            return Err(failed(format!("not run: {why}")));
        }
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

/// The empty folder troupe's git takes its hooks from (so none runs): `troupe-no-hooks-<uid>`
/// in the host's temp folder, made with mode 0700 and reused while it is a real folder of this
/// user that only they can write and that holds nothing; otherwise a fresh one beside it.
/// Found once per process.
pub fn hooks_dir() -> Result<&'static Path, &'static String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| empty_private_dir(&std::env::temp_dir()))
        .as_ref()
        .map(PathBuf::as_path)
}

/// An empty folder in `parent` that only this user can write (see [`hooks_dir`]).
fn empty_private_dir(parent: &Path) -> Result<PathBuf, String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let stable = parent.join(format!("troupe-no-hooks-{uid}"));
    let mut candidates = vec![stable];
    for n in 0..8 {
        candidates.push(parent.join(format!(
            "troupe-no-hooks-{uid}-{}-{n}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        )));
    }
    let mut why = String::new();
    for dir in candidates {
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                why = format!("cannot create {}: {e}", dir.display());
                continue;
            }
        }
        match usable(&dir, uid) {
            Ok(()) => return Ok(dir),
            Err(e) => why = format!("{} {e}", dir.display()),
        }
    }
    Err(format!("no empty folder for git's hooks: {why}"))
}

/// Whether `dir` is a folder (not a link) of `uid`, writable by no one else, and empty.
fn usable(dir: &Path, uid: u32) -> Result<(), &'static str> {
    let meta = std::fs::symlink_metadata(dir).map_err(|_| "cannot be read")?;
    if !meta.is_dir() {
        return Err("is not a folder");
    }
    if meta.uid() != uid || meta.permissions().mode() & 0o022 != 0 {
        return Err("is another user's or writable by others");
    }
    let mut entries = std::fs::read_dir(dir).map_err(|_| "cannot be listed")?;
    if entries.next().is_some() {
        return Err("is not empty");
    }
    Ok(())
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
    use pretty_assertions::assert_eq;

    fn args_of(git: &Git) -> Vec<String> {
        git.command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn env_of(git: &Git) -> Vec<(String, Option<String>)> {
        let mut env: Vec<_> = git
            .command
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        env.sort();
        env
    }

    /// Plain `git` for setting a test repository up (not troupe's runner).
    fn plain_git(dir: &Path, args: &[&str]) -> std::process::Output {
        let mut command = Command::new("git");
        for (key, _) in std::env::vars() {
            if key.starts_with("GIT_") {
                command.env_remove(key);
            }
        }
        command
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
            .args([
                "-c",
                "init.defaultBranch=main",
                "-c",
                "commit.gpgSign=false",
            ])
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap()
    }

    fn setup_git(dir: &Path, args: &[&str]) {
        let out = plain_git(dir, args);
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    fn troupe_git(dir: &Path, args: &[&str]) -> String {
        Git::new(&Place::Checkout(dir.to_owned()), args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@troupe.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@troupe.invalid")
            .run()
            .unwrap()
    }

    /// An executable that touches `marker` when run.
    fn toucher(path: &Path, marker: &Path) {
        std::fs::write(path, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

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
        let inherited = [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_SSH_COMMAND",
            "HOME",
            "PATH",
        ]
        .into_iter()
        .map(OsString::from);
        let git = Git::in_environment(
            &Place::Checkout(dir.path().to_owned()),
            ["status"],
            inherited,
        );
        let removed: Vec<_> = env_of(&git)
            .into_iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            removed,
            [
                "GIT_DIR",
                "GIT_INDEX_FILE",
                "GIT_SSH_COMMAND",
                "GIT_WORK_TREE"
            ]
        );
    }

    #[test]
    fn every_command_carries_the_hardening() {
        let dir = tempfile::tempdir().unwrap();
        let git = Git::in_environment(
            &Place::Checkout(dir.path().to_owned()),
            ["status"],
            std::iter::empty(),
        );
        let args = args_of(&git);
        let hooks = hooks_dir().unwrap();
        let mut expected = vec![
            "-c".to_owned(),
            format!("core.hooksPath={}", hooks.display()),
        ];
        for setting in SAFE_CONFIG {
            expected.push("-c".into());
            expected.push(setting.into());
        }
        expected.extend([
            "-C".into(),
            dir.path().display().to_string(),
            "status".into(),
        ]);
        assert_eq!(args, expected);
        for needed in [
            "core.fsmonitor=false",
            "protocol.allow=never",
            "credential.helper=",
            "core.askPass=",
            "core.sshCommand=ssh",
            "diff.ignoreSubmodules=all",
        ] {
            assert!(SAFE_CONFIG.contains(&needed), "{needed}");
        }
        assert!(
            !SAFE_CONFIG.iter().any(|s| s.starts_with("protocol.ext")
                || s.starts_with("protocol.fd")
                || s.starts_with("diff.external")),
            "{SAFE_CONFIG:?}"
        );
        let set: Vec<_> = env_of(&git)
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect();
        let mut wanted: Vec<_> = SAFE_ENVIRONMENT
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        wanted.sort();
        assert_eq!(set, wanted);
        assert!(wanted.contains(&("GIT_CONFIG_NOSYSTEM".into(), "1".into())));
    }

    #[test]
    fn the_hooks_folder_exists_is_empty_and_only_this_user_s() {
        let hooks = hooks_dir().unwrap();
        assert!(hooks.is_absolute());
        assert_ne!(hooks, Path::new("/dev/null"));
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        assert_eq!(usable(hooks, uid), Ok(()));
        let mode = std::fs::metadata(hooks).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
    }

    #[test]
    fn a_hooks_folder_with_something_in_it_or_open_to_others_is_not_used() {
        let parent = tempfile::tempdir().unwrap();
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let stable = parent.path().join(format!("troupe-no-hooks-{uid}"));
        std::fs::create_dir(&stable).unwrap();
        std::fs::set_permissions(&stable, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(stable.join("pre-commit"), "#!/bin/sh\n").unwrap();
        let chosen = empty_private_dir(parent.path()).unwrap();
        assert_ne!(chosen, stable);
        assert_eq!(usable(&chosen, uid), Ok(()));

        let open = tempfile::tempdir().unwrap();
        let stable = open.path().join(format!("troupe-no-hooks-{uid}"));
        std::fs::create_dir(&stable).unwrap();
        std::fs::set_permissions(&stable, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_ne!(empty_private_dir(open.path()).unwrap(), stable);

        let reused = tempfile::tempdir().unwrap();
        let first = empty_private_dir(reused.path()).unwrap();
        assert_eq!(empty_private_dir(reused.path()).unwrap(), first);
    }

    #[test]
    fn a_diff_never_runs_an_external_program_or_a_text_conversion() {
        let dir = tempfile::tempdir().unwrap();
        let place = Place::Checkout(dir.path().to_owned());
        for sub in DIFFING {
            let args = args_of(&Git::new(&place, [sub, "HEAD"]));
            let at = args.iter().position(|a| a == sub).unwrap();
            assert_eq!(
                args[at..],
                [sub, "--no-ext-diff", "--no-textconv", "HEAD"],
                "{args:?}"
            );
        }
        let args = args_of(&Git::new(&place, ["status"]));
        assert!(!args.contains(&"--no-ext-diff".to_owned()), "{args:?}");
    }

    #[test]
    fn a_repository_s_hooks_and_fsmonitor_never_run_for_troupe() {
        let dir = tempfile::tempdir().unwrap();
        let repo = std::fs::canonicalize(dir.path()).unwrap();
        let marks = tempfile::tempdir().unwrap();
        setup_git(&repo, &["init", "--quiet"]);
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        setup_git(&repo, &["add", "a.txt"]);
        setup_git(&repo, &["commit", "--quiet", "-m", "first"]);
        let hooks = repo.join(".git/hooks");
        let hook_names = [
            "pre-commit",
            "commit-msg",
            "post-commit",
            "post-checkout",
            "post-merge",
            "reference-transaction",
            "post-index-change",
        ];
        for hook in hook_names {
            toucher(&hooks.join(hook), &marks.path().join(hook));
        }
        let monitor = marks.path().join("monitor.sh");
        toucher(&monitor, &marks.path().join("fsmonitor"));
        setup_git(
            &repo,
            &["config", "core.fsmonitor", monitor.to_str().unwrap()],
        );
        // The test's own control: plain git runs them.
        std::fs::write(repo.join("a.txt"), "b\n").unwrap();
        setup_git(&repo, &["status", "--porcelain"]);
        setup_git(&repo, &["commit", "--quiet", "-am", "control"]);
        let ran: Vec<_> = std::fs::read_dir(marks.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "monitor.sh")
            .collect();
        assert!(ran.contains(&"pre-commit".to_owned()), "{ran:?}");
        assert!(ran.contains(&"fsmonitor".to_owned()), "{ran:?}");
        for mark in &ran {
            std::fs::remove_file(marks.path().join(mark)).unwrap();
        }

        // troupe's git: status, add, commit, a worktree made, a merge.
        std::fs::write(repo.join("a.txt"), "c\n").unwrap();
        troupe_git(&repo, &["status", "--porcelain"]);
        troupe_git(&repo, &["add", "--all"]);
        troupe_git(&repo, &["commit", "--quiet", "-m", "second"]);
        let wt = repo.join("wt");
        troupe_git(
            &repo,
            &[
                "worktree",
                "add",
                "-b",
                "side",
                wt.to_str().unwrap(),
                "HEAD",
            ],
        );
        std::fs::write(wt.join("b.txt"), "b\n").unwrap();
        troupe_git(&wt, &["add", "--all"]);
        troupe_git(&wt, &["commit", "--quiet", "-m", "side"]);
        troupe_git(&repo, &["merge", "--no-edit", "side"]);
        let ran: Vec<_> = std::fs::read_dir(marks.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "monitor.sh")
            .collect();
        assert_eq!(ran, Vec::<String>::new());
    }

    #[test]
    fn a_transport_that_runs_a_command_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let repo = std::fs::canonicalize(dir.path()).unwrap();
        setup_git(&repo, &["init", "--quiet"]);
        let marker = repo.join("EXT");
        let url = format!("ext::sh -c touch% {}", marker.display());
        let out = Git::new(&Place::Checkout(repo.clone()), ["ls-remote", &url])
            .output()
            .unwrap();
        assert!(!out.ok(), "{out:?}");
        assert!(out.stderr.contains("not allowed"), "{}", out.stderr);
        assert!(!marker.exists());
    }

    #[test]
    fn a_relative_place_is_refused_before_git_starts() {
        let err = Git::new(&Place::Checkout(PathBuf::from("repo")), ["status"])
            .output()
            .unwrap_err();
        assert!(err.to_string().contains("not run"), "{err}");
        let place = Place::Worktree(Confirmed::new("evil".into(), "/tmp".into()));
        let err = Git::new(&place, ["status"]).output().unwrap_err();
        assert!(err.to_string().contains("absolute"), "{err}");
    }
}
