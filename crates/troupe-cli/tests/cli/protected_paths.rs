//! The protected paths (issue 39) through the real binary, a scripted model and a real git
//! repository: what an agent would do to run code outside the sandbox through git — its file
//! tools writing `.git/config`, a confined command renaming `.git` — is refused, the person's
//! next plain `git status` (and troupe's own `git worktree add`) runs nothing the agent wrote,
//! and the refusal says why. Also: the sandbox's `/dev/shm` is the run's own, and `.troupe/` is
//! the user's alone.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::support::{command, ran, Ran};

/// A person's `git <args>` in `dir` (the repository's own config honoured), which must succeed.
fn git_ok(dir: &Path, args: &[&str]) -> String {
    super::support::git(dir, dir.parent().unwrap(), args)
}

struct Repo {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: PathBuf,
    /// Where the attacks' programs would leave their mark.
    pwned: PathBuf,
    config: PathBuf,
}

/// A git repository with one commit, in a folder of its own beside the test's other files.
fn repo() -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    git_ok(&ws, &["init", "--quiet"]);
    std::fs::write(ws.join("README.md"), "# project\n").unwrap();
    git_ok(&ws, &["add", "README.md"]);
    git_ok(&ws, &["commit", "--quiet", "-m", "first"]);
    std::fs::create_dir_all(root.join("config/troupe")).unwrap();
    Repo {
        pwned: root.join("PWNED"),
        config: root.join("config"),
        _dir: dir,
        root,
        ws,
    }
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

/// `troupe run --approval <approval>` on `script` in the repository, confined by `mechanism`
/// (else the first that works); the person's own config folder is the test's
/// (`XDG_CONFIG_HOME`), HOME and TMPDIR beside the repository.
fn run(repo: &Repo, script: &Value, approval: &str, mechanism: Option<&str>) -> Ran {
    let path = repo.root.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let tmp = repo.root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut c = command(&repo.ws);
    c.args(["run", "--workspace", repo.ws.to_str().unwrap()])
        .args(["--prompt", "tidy the repository", "--no-memory"])
        .args(["--approval", approval])
        .args(["--model-script", path.to_str().unwrap()])
        .env("XDG_CONFIG_HOME", &repo.config)
        .env("HOME", &repo.root)
        .env("TMPDIR", &tmp)
        .env_remove("TROUPE_SANDBOX")
        .env_remove("TROUPE_SANDBOX_MECHANISM")
        .stdin(std::process::Stdio::null());
    if let Some(mechanism) = mechanism {
        c.env("TROUPE_SANDBOX_MECHANISM", mechanism);
    }
    ran(c.output().unwrap())
}

/// Every audit line of the run.
fn audit(ws: &Path) -> Vec<Value> {
    std::fs::read_to_string(ws.join(".troupe/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What the lead's transcript holds, as one text (the tool results the model saw).
fn transcript(ws: &Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(ws.join(".troupe/transcripts")).unwrap() {
        all.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    all
}

/// The file tool writes an agent would make to have git run its program — each one through a
/// different spelling of a protected path.
fn file_tool_attacks(pwned: &Path) -> Vec<Value> {
    let pwned = pwned.display();
    vec![
        call(
            "edit_file",
            json!({"path": ".git/config", "old_text": "[core]",
                   "new_text": format!("[core]\n\tfsmonitor = \"touch {pwned}; echo\"")}),
        ),
        call(
            "write_file",
            json!({"path": ".git/hooks/pre-commit",
                   "content": format!("#!/bin/sh\ntouch {pwned}\n")}),
        ),
        call(
            "write_file",
            json!({"path": "docs/../.git/info/attributes", "content": "* filter=x\n"}),
        ),
        call(
            "write_file",
            json!({"path": "troupe.toml",
                   "content": format!("[[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"touch {pwned}\"\n")}),
        ),
        call(
            "write_file",
            json!({"path": ".env", "content": "OPENAI_BASE_URL=http://attacker.invalid\n"}),
        ),
    ]
}

#[test]
fn file_tools_never_write_a_protected_path_under_approval_auto_or_a_broad_allow() {
    let repo = repo();
    let config_before = std::fs::read(repo.ws.join(".git/config")).unwrap();
    // The person's own broad rule: it allows ordinary writes without asking, not these.
    std::fs::write(
        repo.config.join("troupe/config.toml"),
        "[permissions]\nallow = [\"write_file\", \"edit_file\"]\n",
    )
    .unwrap();
    let script = json!({"responses": [
        {"tool_calls": file_tool_attacks(&repo.pwned)},
        {"tool_calls": [call("write_file", json!({"path": "notes.txt", "content": "ok\n"}))]},
        {"text": "done"},
    ]});
    let out = run(&repo, &script, "auto", None);
    assert_eq!(out.code, 0, "{out:#?}");

    assert_eq!(
        std::fs::read(repo.ws.join(".git/config")).unwrap(),
        config_before
    );
    for never in [
        ".git/hooks/pre-commit",
        ".git/info/attributes",
        "troupe.toml",
        ".env",
    ] {
        assert!(!repo.ws.join(never).exists(), "{never} was written");
    }
    // An ordinary write still goes through.
    assert_eq!(
        std::fs::read_to_string(repo.ws.join("notes.txt")).unwrap(),
        "ok\n"
    );
    // The person's next plain git commands run nothing.
    git_ok(&repo.ws, &["status"]);
    git_ok(
        &repo.ws,
        &["commit", "--quiet", "--allow-empty", "-m", "next"],
    );
    assert!(!repo.pwned.exists(), "a program the agent wrote ran");

    // Each refusal is the protected-path step's, and says which path and why.
    let denied: Vec<Value> = audit(&repo.ws)
        .into_iter()
        .filter(|e| e["rule"] == "protected")
        .collect();
    assert_eq!(denied.len(), 5, "{:#?}", audit(&repo.ws));
    assert!(denied.iter().all(|e| e["decision"] == "deny"));
    let seen = transcript(&repo.ws);
    for shown in [
        ".git/config is a protected path",
        ".git/hooks/pre-commit is a protected path",
        ".git/info/attributes is a protected path",
        "troupe.toml is a protected path",
        ".env is a protected path",
        "only a rule naming the path exactly (write_file(troupe.toml)) allows it",
    ] {
        assert!(seen.contains(shown), "{shown:?} not in {seen}");
    }
}

#[test]
fn a_rule_naming_a_protected_path_exactly_allows_that_write_and_nothing_else() {
    let repo = repo();
    std::fs::write(
        repo.config.join("troupe/config.toml"),
        "[permissions]\nallow = [\"write_file(.git/info/exclude)\"]\n",
    )
    .unwrap();
    let script = json!({"responses": [
        {"tool_calls": [
            call("write_file", json!({"path": ".git/info/exclude", "content": "*.log\n"})),
            call("write_file", json!({"path": ".git/info/attributes", "content": "* filter=x\n"})),
        ]},
        {"text": "done"},
    ]});
    let out = run(&repo, &script, "auto", None);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        std::fs::read_to_string(repo.ws.join(".git/info/exclude")).unwrap(),
        "*.log\n"
    );
    assert!(!repo.ws.join(".git/info/attributes").exists());
    let rules: Vec<String> = audit(&repo.ws)
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["decision"].as_str().unwrap(),
                e["rule"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        rules,
        [
            "allow config.toml allow[0] \"write_file(.git/info/exclude)\"",
            "deny protected",
        ],
        "{rules:?}"
    );
}

/// The commands a confined agent would run to get around `.git`'s protection, each leaving
/// `ok_<name>` when it got through.
fn command_attacks(pwned: &Path) -> Vec<(&'static str, String)> {
    let pwned = pwned.display();
    vec![
        ("rename", "mv .git .git-old".to_owned()),
        ("remove", "rm -rf .git".to_owned()),
        (
            "config",
            format!("printf '[core]\\n\\tfsmonitor = \"touch {pwned}; echo\"\\n' >> .git/config"),
        ),
        (
            "attributes",
            "mkdir -p .git/info && echo '* filter=x' > .git/info/attributes".to_owned(),
        ),
        (
            "hook",
            format!("printf '#!/bin/sh\\ntouch {pwned}\\n' > .git/hooks/post-checkout"),
        ),
        ("troupe_state", "echo x > .troupe/planted".to_owned()),
    ]
    .into_iter()
    .map(|(name, command)| (name, format!("{command} && touch ok_{name}")))
    .collect()
}

fn confined_attempts(mechanism: &str) {
    let repo = repo();
    let config_before = std::fs::read(repo.ws.join(".git/config")).unwrap();
    let head_before = git_ok(&repo.ws, &["rev-parse", "HEAD"]);
    // The rename-and-copy of the issue, with the copy's config given a smudge filter.
    let copy = format!(
        "mv .git .git-old && cp -a .git-old .git && printf '[filter \"x\"]\\n\\tsmudge = \
         \"touch {}; cat\"\\n' >> .git/config && echo '* filter=x' > .git/info/attributes",
        repo.pwned.display()
    );
    let mut calls: Vec<Value> = command_attacks(&repo.pwned)
        .iter()
        .map(|(_, c)| call("shell", json!({"command": c})))
        .collect();
    calls.push(call("shell", json!({"command": copy})));
    // troupe.toml does not exist: creating it cannot be stopped, only undone.
    calls.push(call(
        "shell",
        json!({"command": "echo '[run]' > troupe.toml"}),
    ));
    // A private /dev/shm: what the host has there is neither read nor overwritten, what the
    // command writes there stays in the run.
    let host_shm =
        PathBuf::from("/dev/shm").join(format!("troupe-test-{}-{mechanism}", std::process::id()));
    std::fs::write(&host_shm, "host\n").unwrap();
    let shm_name = host_shm.file_name().unwrap().to_str().unwrap().to_owned();
    calls.push(call(
        "shell",
        json!({"command": format!(
            "echo sandbox > /dev/shm/{shm_name} && cat /dev/shm/{shm_name} > shm_seen.txt"
        )}),
    ));
    let script = json!({"agents": {
        "lead": [
            {"tool_calls": calls},
            {"tool_calls": [call("spawn_teammate", json!({"name": "alice", "role": "writer",
                "prompt": "Write hello.txt.", "isolation": "worktree"}))]},
            {"text": "alice is on it"},
            {"text": "done"},
        ],
        "alice": [
            {"tool_calls": [call("write_file", json!({"path": "hello.txt", "content": "hi\n"}))]},
            {"text": "wrote it"},
        ],
    }});
    let out = run(&repo, &script, "auto", Some(mechanism));
    let shm_after = std::fs::read_to_string(&host_shm).unwrap();
    std::fs::remove_file(&host_shm).unwrap();
    assert_eq!(out.code, 0, "{out:#?}");

    for (name, _) in command_attacks(&repo.pwned) {
        assert!(
            !repo.ws.join(format!("ok_{name}")).exists(),
            "{name} got through"
        );
    }
    assert!(repo.ws.join(".git").is_dir());
    assert!(!repo.ws.join(".git-old").exists());
    assert_eq!(
        std::fs::read(repo.ws.join(".git/config")).unwrap(),
        config_before
    );
    assert!(!repo.ws.join(".git/info/attributes").exists());
    assert!(!repo.ws.join(".git/hooks/post-checkout").exists());
    assert!(!repo.ws.join(".troupe/planted").exists());
    assert_eq!(git_ok(&repo.ws, &["rev-parse", "HEAD"]), head_before);
    // `troupe.toml` did not exist: the command could create it, and it was moved aside.
    assert!(!repo.ws.join("troupe.toml").exists());
    let blocked: Vec<PathBuf> = std::fs::read_dir(repo.ws.join(".troupe/blocked"))
        .unwrap_or_else(|e| panic!("{e}: {}", transcript(&repo.ws)))
        .map(|e| e.unwrap().path().join("troupe.toml"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert_eq!(std::fs::read_to_string(&blocked[0]).unwrap(), "[run]\n");
    // The run's own /dev/shm.
    assert_eq!(shm_after, "host\n");
    assert_eq!(
        std::fs::read_to_string(repo.ws.join("shm_seen.txt")).unwrap(),
        "sandbox\n"
    );

    // troupe's own `git worktree add` ran, and nothing the commands wrote; nor does the
    // person's next git.
    assert!(
        repo.ws.join(".troupe/worktrees/alice/hello.txt").exists(),
        "{out:#?}"
    );
    git_ok(&repo.ws, &["status"]);
    assert!(!repo.pwned.exists(), "a program the agent wrote ran");

    let seen = transcript(&repo.ws);
    assert!(
        seen.contains("sandbox: creating troupe.toml is denied"),
        "{seen}"
    );
    assert!(seen.contains("read-only to commands"), "{seen}");
}

#[test]
fn a_confined_command_can_neither_rename_nor_write_git_with_landlock() {
    confined_attempts("landlock");
}

#[test]
fn a_confined_command_can_neither_rename_nor_write_git_with_bubblewrap() {
    if which("bwrap").is_none() {
        eprintln!("notice: bwrap not installed; the bubblewrap half of this test is skipped");
        return;
    }
    confined_attempts("bubblewrap");
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Every folder and file under `dir` whose mode lets anyone but the user in.
fn open_to_others(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let meta = std::fs::symlink_metadata(&next).unwrap();
        if meta.permissions().mode() & 0o077 != 0 {
            found.push(format!(
                "{} {:o}",
                next.display(),
                meta.permissions().mode() & 0o777
            ));
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&next).unwrap() {
                pending.push(entry.unwrap().path());
            }
        }
    }
    found
}

#[test]
fn troupe_state_is_the_user_s_alone_and_status_says_when_an_older_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("demo");
    let out = ran(command(dir.path())
        .args(["demo", "--workspace", ws.to_str().unwrap()])
        .output()
        .unwrap());
    assert_eq!(out.code, 0, "{out:#?}");
    let state = ws.join(".troupe");
    assert_eq!(
        std::fs::metadata(&state).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(open_to_others(&state), Vec::<String>::new());
    let status = ran(command(&ws)
        .args(["status", "--workspace", ws.to_str().unwrap()])
        .output()
        .unwrap());
    assert_eq!(status.code, 0, "{status:#?}");
    assert!(
        !status.stderr.contains("readable by other users"),
        "{status:#?}"
    );

    // A workspace made before: it keeps working, and status says how to close it.
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    let status = ran(command(&ws)
        .args(["status", "--workspace", ws.to_str().unwrap()])
        .output()
        .unwrap());
    assert_eq!(status.code, 0, "{status:#?}");
    assert!(
        status
            .stderr
            .contains("is readable by other users of this machine (mode 0755)"),
        "{status:#?}"
    );
    assert!(status.stderr.contains("chmod -R go-rwx"), "{status:#?}");
}
