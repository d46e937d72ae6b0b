//! `troupe init`: a commented `troupe.toml` for the folder — a scripted model beside it when no
//! key is set, so `troupe run` works at once; the provider's model when one is; `.troupe/` in
//! `.gitignore` in a git repository, never twice; its trust recorded; nothing overwritten.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::support::{assert_fails, command, json, ran, troupe, Ran};

fn empty_folder() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    (dir, ws)
}

/// `git init` in `dir`, with nothing from the machine's or the person's git settings.
fn git_init(dir: &Path) {
    let out = std::process::Command::new("git")
        .args(["init", "--quiet"])
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// The folder's entries, names and contents, for "nothing changed".
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut entries: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&path).unwrap_or_default();
            (name, bytes)
        })
        .collect();
    entries.sort();
    entries
}

fn init(ws: &Path, env: &[(&str, &str)]) -> Ran {
    let mut c = command(ws);
    c.arg("init");
    for (k, v) in env {
        c.env(k, v);
    }
    ran(c.stdin(Stdio::null()).output().unwrap())
}

#[test]
fn init_in_an_empty_folder_writes_a_scripted_model_and_a_run_works_at_once_with_no_key() {
    let (_dir, ws) = empty_folder();
    let out = init(&ws, &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    for says in [
        "wrote ",
        "troupe.toml",
        "troupe.script.json",
        "scripted",
        "not a git repository",
        "trusted",
        "troupe run --prompt",
        "troupe watch",
    ] {
        assert!(out.stdout.contains(says), "{says}: {out:#?}");
    }
    let settings = std::fs::read_to_string(ws.join("troupe.toml")).unwrap();
    assert!(
        settings.contains("\nscript = \"troupe.script.json\"\n"),
        "{settings}"
    );
    assert!(settings.starts_with("# troupe.toml"), "{settings}");
    assert!(ws.join("troupe.script.json").is_file());
    assert!(!ws.join(".gitignore").exists(), "not a repository");

    // The next run needs no key and asks nothing: the scripted model answers, trusted.
    let run = ran(command(&ws)
        .args(["run", "--prompt", "x"])
        .stdin(Stdio::null())
        .output()
        .unwrap());
    assert_eq!(run.code, 0, "{run:#?}");
    assert!(
        run.stdout.contains("Hello from troupe's scripted model"),
        "{run:#?}"
    );
}

#[test]
fn init_in_a_git_repository_adds_the_state_folder_to_gitignore_once() {
    // No .gitignore: created.
    let (_dir, ws) = empty_folder();
    git_init(&ws);
    let out = init(&ws, &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.contains(".gitignore: created"), "{out:#?}");
    assert_eq!(
        std::fs::read_to_string(ws.join(".gitignore")).unwrap(),
        ".troupe/\n"
    );

    // One without the line (and without a last newline): appended after a newline.
    let (_dir, ws) = empty_folder();
    git_init(&ws);
    std::fs::write(ws.join(".gitignore"), "target\n*.log").unwrap();
    let out = json(&ran(command(&ws)
        .args(["init", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap()));
    assert_eq!(out["gitignore"], "appended", "{out}");
    assert_eq!(out["model"], "scripted");
    assert_eq!(out["trusted"], true);
    assert_eq!(
        out["written"],
        serde_json::json!(["troupe.toml", "troupe.script.json"])
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".gitignore")).unwrap(),
        "target\n*.log\n.troupe/\n"
    );

    // One that already ignores it: left as it is.
    let (_dir, ws) = empty_folder();
    git_init(&ws);
    std::fs::write(ws.join(".gitignore"), "/.troupe\n").unwrap();
    let out = init(&ws, &[]);
    assert!(
        out.stdout.contains(".gitignore: already ignored"),
        "{out:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".gitignore")).unwrap(),
        "/.troupe\n"
    );
}

#[test]
fn init_refuses_to_overwrite_and_changes_nothing() {
    let (_dir, ws) = empty_folder();
    git_init(&ws);
    std::fs::write(ws.join("troupe.toml"), "# mine\n").unwrap();
    let before = snapshot(&ws);
    let out = init(&ws, &[]);
    assert_fails(&out, 2, "troupe.toml already exists");
    assert!(out.stderr.contains("[init_exists]"), "{out:#?}");
    assert_eq!(snapshot(&ws), before);

    // The script file it would write, or a link at either path (never followed).
    let (_dir, ws) = empty_folder();
    std::fs::write(ws.join("troupe.script.json"), "{}").unwrap();
    let before = snapshot(&ws);
    assert_fails(&init(&ws, &[]), 2, "troupe.script.json already exists");
    assert_eq!(snapshot(&ws), before);
    let (_dir, ws) = empty_folder();
    let (_elsewhere, target) = empty_folder();
    std::os::unix::fs::symlink(target.join("t.toml"), ws.join("troupe.toml")).unwrap();
    assert_fails(&init(&ws, &[]), 2, "troupe.toml already exists");
    assert!(!target.join("t.toml").exists());
    assert!(!ws.join("troupe.script.json").exists());
}

#[test]
fn init_with_a_key_names_the_provider_and_writes_no_script() {
    let (_dir, ws) = empty_folder();
    let out = init(&ws, &[("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.contains("Anthropic"), "{out:#?}");
    let settings = std::fs::read_to_string(ws.join("troupe.toml")).unwrap();
    assert!(
        settings.contains("\nprovider = \"anthropic\"\n"),
        "{settings}"
    );
    assert!(!ws.join("troupe.script.json").exists());

    let (_dir, ws) = empty_folder();
    let out = init(
        &ws,
        &[
            ("OPENAI_API_KEY", "sk-test-0123456789"),
            ("ANTHROPIC_API_KEY", "sk-ant-test-0123456789"),
        ],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let settings = std::fs::read_to_string(ws.join("troupe.toml")).unwrap();
    assert!(settings.contains("\nprovider = \"openai\"\n"), "{settings}");
    // Trusted: `troupe trust --show` has nothing left to ask.
    let shown = troupe(&ws, &["trust", "--show"]);
    assert_eq!(shown.code, 0, "{shown:#?}");
    assert!(shown.stdout.contains(" is trusted;"), "{shown:#?}");
}
