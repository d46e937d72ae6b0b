//! `troupe config` showing every value with its source — `[tasks] lease`, `[approvals] ttl`
//! and `route`, and a workspace's `[prices]` entry that waits for trust beside the price that
//! applies — and `troupe demo --workspace DIR` refusing a folder that holds a file it would
//! write. Every test has its own config folder (user settings and trust records).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{assert_fails, command, json as stdout_json, ran, Ran};

struct Place {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    xdg: PathBuf,
}

fn place() -> Place {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (ws, xdg) = (root.join("ws"), root.join("xdg"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(xdg.join("troupe")).unwrap();
    Place { _dir: dir, ws, xdg }
}

impl Place {
    /// `troupe ARGS --workspace WS` with this place's config folder.
    fn troupe(&self, args: &[&str]) -> Ran {
        let mut c = command(&self.ws);
        c.args(args)
            .args(["--workspace", self.ws.to_str().unwrap()])
            .env("XDG_CONFIG_HOME", &self.xdg)
            .stdin(std::process::Stdio::null());
        ran(c.output().unwrap())
    }

    fn user_file(&self) -> PathBuf {
        self.xdg.join("troupe").join("config.toml")
    }
}

/// The lines of `text` under the heading that starts with `section`, up to the next blank line.
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| !l.starts_with(heading))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

#[test]
fn config_shows_the_lease_the_approvals_with_their_sources_and_marks_a_waiting_price() {
    let p = place();
    // The person prices a local model; the workspace prices it lower, and gpt-4.1 below
    // troupe's table (2 / 8 / 0.5 / 2): both wait for trust, as does route = "lead".
    std::fs::write(p.user_file(), "[prices.local]\ninput = 1\noutput = 1\n").unwrap();
    std::fs::write(
        p.ws.join("troupe.toml"),
        "[tasks]\nlease = \"2m\"\n\n[approvals]\nttl = \"5m\"\nroute = \"lead\"\n\n\
         [prices.\"gpt-4.1\"]\ninput = 0.1\noutput = 0.1\n\n[prices.local]\ninput = 0\noutput = 0\n",
    )
    .unwrap();
    let file = p.ws.join("troupe.toml").display().to_string();
    let user = p.user_file().display().to_string();

    let text = p.troupe(&["config"]);
    assert_eq!(text.code, 0, "{text:#?}");
    assert_eq!(
        section(&text.stdout, "[tasks]"),
        [format!("lease            = \"2m\"   ({file})")],
        "{}",
        text.stdout
    );
    assert_eq!(
        section(&text.stdout, "[approvals]")[..2],
        [
            format!("ttl              = \"5m\"   ({file})"),
            format!("route            = \"lead\"   ({file})   [waits for trust]"),
        ],
        "{}",
        text.stdout
    );
    // The price that applies, then the workspace's, marked.
    assert_eq!(
        section(&text.stdout, "[prices]"),
        [
            "gpt-4.1          = 2 / 8 / 0.5 / 2   (built-in table)".to_owned(),
            format!("gpt-4.1          = 0.1 / 0.1 / 0.1 / 0.1   ({file})   [waits for trust]"),
            format!("local            = 1 / 1 / 1 / 1   ({user})"),
            format!("local            = 0 / 0 / 0 / 0   ({file})   [waits for trust]"),
        ],
        "{}",
        text.stdout
    );

    let config = stdout_json(&p.troupe(&["config", "--json"]));
    assert_eq!(
        config["tasks"],
        json!({"lease_ms": {"value": 120_000, "source": file}})
    );
    assert_eq!(
        config["approvals"]["ttl_secs"],
        json!({"value": 300, "source": file})
    );
    assert_eq!(
        config["approvals"]["route"],
        json!({"value": "lead", "source": file})
    );
    assert_eq!(
        config["prices"],
        json!({
            "gpt-4.1": {"input": 2.0, "output": 8.0, "cache_read": 0.5, "cache_write": 2.0,
                        "source": "built-in table",
                        "waits_for_trust": {"input": 0.1, "output": 0.1, "cache_read": 0.1,
                                            "cache_write": 0.1, "source": file}},
            "local": {"input": 1.0, "output": 1.0, "cache_read": 1.0, "cache_write": 1.0,
                      "source": user,
                      "waits_for_trust": {"input": 0.0, "output": 0.0, "cache_read": 0.0,
                                          "cache_write": 0.0, "source": file}},
        })
    );
    let mut kinds: Vec<&str> = config["trust"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["approval_route", "prices", "prices"], "{config:#}");

    // Trusted, the workspace's prices are the ones that apply, and nothing waits.
    let trusted = p.troupe(&["trust", "--yes"]);
    assert_eq!(trusted.code, 0, "{trusted:#?}");
    let text = p.troupe(&["config"]);
    assert_eq!(
        section(&text.stdout, "[prices]"),
        [
            format!("gpt-4.1          = 0.1 / 0.1 / 0.1 / 0.1   ({file})"),
            format!("local            = 0 / 0 / 0 / 0   ({file})"),
        ],
        "{}",
        text.stdout
    );
    assert!(!text.stdout.contains("[waits for trust]"), "{text:#?}");
    let config = stdout_json(&p.troupe(&["config", "--json"]));
    assert_eq!(
        config["prices"]["gpt-4.1"],
        json!({"input": 0.1, "output": 0.1, "cache_read": 0.1, "cache_write": 0.1,
               "source": file})
    );
    assert!(!p.ws.join(".troupe").exists());
}

#[test]
fn config_says_where_the_lease_and_approvals_come_from_by_default_and_from_the_user() {
    let p = place();
    let text = p.troupe(&["config"]);
    assert_eq!(
        section(&text.stdout, "[tasks]"),
        ["lease            = \"5m\"   (default)"],
        "{}",
        text.stdout
    );
    assert_eq!(
        section(&text.stdout, "[approvals]")[..2],
        [
            "ttl              = \"10m\"   (default)",
            "route            = \"person\"   (default)",
        ],
        "{}",
        text.stdout
    );
    // The person's own route needs no trust.
    std::fs::write(
        p.user_file(),
        "[approvals]\nroute = \"lead\"\n\n[tasks]\nlease = 90\n",
    )
    .unwrap();
    let user = p.user_file().display().to_string();
    let config = stdout_json(&p.troupe(&["config", "--json"]));
    assert_eq!(
        config["tasks"],
        json!({"lease_ms": {"value": 90_000, "source": user}})
    );
    assert_eq!(
        config["approvals"]["ttl_secs"],
        json!({"value": 600, "source": "default"})
    );
    assert_eq!(
        config["approvals"]["route"],
        json!({"value": "lead", "source": user})
    );
    let text = p.troupe(&["config"]);
    assert!(
        text.stdout
            .contains(&format!("route            = \"lead\"   ({user})\n")),
        "{text:#?}"
    );
    assert!(!text.stdout.contains("[waits for trust]"), "{text:#?}");
}

/// The names in `dir`, recursively, relative to it (`.troupe/` as one name).
fn names(dir: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            let is_dir = path.is_dir() && !path.is_symlink();
            out.insert(name.clone());
            if is_dir && name != ".troupe" {
                walk(root, &path, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn demo_refuses_a_folder_holding_a_persons_notes_and_writes_nothing() {
    let p = place();
    let notes = b"# My notes\n\nNot the demo's.\n";
    std::fs::write(p.ws.join("NOTES.md"), notes).unwrap();
    std::fs::write(p.ws.join("other.txt"), "kept\n").unwrap();
    let before = names(&p.ws);

    let out = p.troupe(&["demo"]);
    assert_fails(&out, 2, "NOTES.md");
    assert!(out.stderr.contains(&p.ws.display().to_string()), "{out:#?}");
    assert_eq!(std::fs::read(p.ws.join("NOTES.md")).unwrap(), notes);
    assert_eq!(names(&p.ws), before);
    assert!(!p.ws.join(".troupe").exists());

    // A link named NOTES.md counts too: the demo would write through it.
    std::fs::remove_file(p.ws.join("NOTES.md")).unwrap();
    std::os::unix::fs::symlink(p.ws.join("elsewhere.md"), p.ws.join("NOTES.md")).unwrap();
    let out = p.troupe(&["demo"]);
    assert_fails(&out, 2, "NOTES.md");
    assert!(!p.ws.join("elsewhere.md").exists());
    assert!(!p.ws.join(".troupe").exists());
}

#[test]
fn demo_runs_in_a_non_empty_folder_without_its_files_and_leaves_them_alone() {
    let p = place();
    std::fs::write(p.ws.join("README.txt"), "mine\n").unwrap();
    std::fs::create_dir_all(p.ws.join("src/deep")).unwrap();
    std::fs::write(p.ws.join("src/deep/notes.md"), "also mine\n").unwrap();

    let out = p.troupe(&["demo"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        std::fs::read_to_string(p.ws.join("README.txt")).unwrap(),
        "mine\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.ws.join("src/deep/notes.md")).unwrap(),
        "also mine\n"
    );
    // Besides the person's files: the demo's note and its state, nothing else.
    let expected: BTreeSet<String> = [
        ".troupe",
        "NOTES.md",
        "README.txt",
        "src",
        "src/deep",
        "src/deep/notes.md",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(names(&p.ws), expected);
}
