//! `troupe eval SUITE.toml`: suites of scripted cases run in fresh copies of their fixtures —
//! the table, the JSON and JUnit reports and the exit code; repetitions run two at a time; a
//! git revision as the fixture (its hooks never run); a fixture that needs trust; a run past
//! its timeout; and hostile suites refused with one line before anything runs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::support::{assert_fails, command, ran, Ran};

/// A folder for a suite: the suite file, its scripts and fixtures, and a user config whose
/// `[prices.scripted]` gives the scripted model a price ($100 per million tokens either way).
struct Dir {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Dir {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap();
        let config = path.join("config").join("troupe");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(
            config.join("config.toml"),
            "[prices.scripted]\ninput = 100\noutput = 100\n",
        )
        .unwrap();
        Self { _dir: dir, path }
    }

    fn write(&self, relative: &str, content: &str) -> PathBuf {
        let path = self.path.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    fn script(&self, relative: &str, script: &Value) {
        self.write(relative, &script.to_string());
    }

    /// `troupe eval ARGS` in the folder.
    fn eval(&self, args: &[&str]) -> Ran {
        self.eval_with(args, &[])
    }

    fn eval_with(&self, args: &[&str], env: &[(&str, &str)]) -> Ran {
        let mut troupe = command(&self.path);
        troupe
            .arg("eval")
            .args(args)
            .env("XDG_CONFIG_HOME", self.path.join("config"));
        for (key, value) in env {
            troupe.env(key, value);
        }
        ran(troupe.output().unwrap())
    }
}

/// 60 prompt and 10 completion tokens.
fn usage() -> Value {
    json!({"prompt_tokens": 60, "completion_tokens": 10, "total_tokens": 70})
}

/// The lead writes NOTES.md, then answers.
fn writes_notes() -> Value {
    json!({"responses": [
        {"tool_calls": [{"name": "write_file", "arguments":
            {"path": "NOTES.md", "content": "# Notes\nusage: troupe eval suite.toml\n"}}],
         "usage": usage()},
        {"text": "Added the note.", "usage": usage()}
    ]})
}

/// The lead answers at once.
fn answers() -> Value {
    json!({"responses": [{"text": "Nothing to do.", "usage": usage()}]})
}

const NOTE_CHECKS: &str = r#"
[[case.check]]
file_exists = "NOTES.md"
[[case.check]]
file_contains = { path = "NOTES.md", text = "usage" }
[[case.check]]
file_matches = { path = "NOTES.md", regex = "^# Notes$" }
[[case.check]]
command = "grep -q usage NOTES.md && test -f README.md"
[[case.check]]
tool_called = "write_file"
[[case.check]]
tool_not_called = "shell"
[[case.check]]
exit_code = 0
[[case.check]]
max_tokens = 1000
[[case.check]]
max_cost = 0.10
[[case.check]]
max_seconds = 120
"#;

fn basic_fixture(dir: &Dir) {
    dir.write("fixtures/basic/README.md", "# A project\n");
    dir.write("fixtures/basic/src/lib.rs", "// code\n");
    // A previous run's state in the fixture is never copied.
    dir.write("fixtures/basic/.troupe/recordings/old.jsonl", "{}\n");
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn three_cases_one_failing_give_the_table_json_junit_and_exit_1() {
    let dir = Dir::new();
    basic_fixture(&dir);
    dir.script("scripts/notes.json", &writes_notes());
    dir.script("scripts/answers.json", &answers());
    let suite = format!(
        r#"
[defaults]
model = {{ script = "scripts/notes.json" }}

[[case]]
name = "adds a note"
prompt = "Add a usage note to NOTES.md"
fixture = "fixtures/basic"
{NOTE_CHECKS}

[[case]]
name = 'mentions <the> changelog & "more"'
prompt = "Add a note that mentions the changelog"
fixture = "fixtures/basic"
[[case.check]]
file_contains = {{ path = "NOTES.md", text = "changelog" }}
[[case.check]]
tool_called = "write_file"

[[case]]
name = "only answers"
prompt = "Say hello"
fixture = "fixtures/basic"
model = {{ script = "scripts/answers.json" }}
[[case.check]]
tool_not_called = "write_file"
[[case.check]]
command = "test ! -e NOTES.md"
"#
    );
    dir.write("suite.toml", &suite);
    let ran = dir.eval(&[
        "suite.toml",
        "--json",
        "report.json",
        "--junit",
        "report.xml",
    ]);
    assert_eq!(ran.code, 1, "{ran:#?}");
    assert!(!ran.stderr.contains("panicked"), "{ran:#?}");

    // The table: a line per case, then the failed check with why.
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(lines[0].starts_with("case "), "{ran:#?}");
    let row = |name: &str| {
        *lines
            .iter()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row {name}: {ran:#?}"))
    };
    let passing = row("adds a note");
    assert!(
        passing.contains("1/1") && passing.contains("100%"),
        "{passing}"
    );
    assert!(
        passing.contains("140") && passing.contains("$0.0140"),
        "{passing}"
    );
    assert!(passing.ends_with("pass"), "{passing}");
    let failing = row("mentions <the> changelog");
    assert!(
        failing.contains("0/1") && failing.contains("FAIL"),
        "{failing}"
    );
    assert!(row("only answers").ends_with("pass"), "{ran:#?}");
    assert!(
        ran.stdout.contains(
            "mentions <the> changelog & \"more\" #1: file_contains NOTES.md \"changelog\": \
             NOTES.md does not contain \"changelog\""
        ),
        "{ran:#?}"
    );

    // Progress as it ran, then the one-line verdict.
    for at in ["[1/3]", "[2/3]", "[3/3]"] {
        assert!(ran.stderr.contains(at), "{ran:#?}");
    }
    assert!(ran.stderr.contains("… passed ("), "{ran:#?}");
    let last = ran.stderr.lines().last().unwrap();
    assert!(
        last.starts_with("troupe: 1 of 3 cases passed less often than their min_pass")
            && last.ends_with("[eval_failed]"),
        "{ran:#?}"
    );

    // The JSON report.
    let report = json_file(&dir.path.join("report.json"));
    assert_eq!(report["ok"], false);
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 3);
    let first = &cases[0];
    assert_eq!(first["name"], "adds a note");
    assert_eq!(first["repeat"], 1);
    assert_eq!(first["passed"], 1);
    assert_eq!(first["pass_rate"], 1.0);
    assert_eq!(first["min_pass"], 1.0);
    assert_eq!(first["tokens"], 140);
    assert!(
        (first["cost_usd"].as_f64().unwrap() - 0.014).abs() < 1e-9,
        "{first}"
    );
    assert!(first["seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(first["repetitions"][0]["failed_checks"], json!([]));
    assert_eq!(first["repetitions"][0]["exit_code"], 0);
    let second = &cases[1];
    assert_eq!(second["passed"], 0);
    assert_eq!(second["ok"], false);
    assert_eq!(
        second["repetitions"][0]["failed_checks"],
        json!([{"check": "file_contains NOTES.md \"changelog\"",
                "why": "NOTES.md does not contain \"changelog\""}])
    );
    assert_eq!(cases[2]["ok"], true);
    assert_eq!(cases[2]["tokens"], 70);

    // The JUnit report: one test case per repetition, the failure's text escaped.
    let xml = std::fs::read_to_string(dir.path.join("report.xml")).unwrap();
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"suite\" tests=\"3\" failures=\"1\""), "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
    assert!(
        xml.contains("name=\"mentions &lt;the&gt; changelog &amp; &quot;more&quot; #1\""),
        "{xml}"
    );
    assert!(
        xml.contains(
            "<failure message=\"file_contains NOTES.md &quot;changelog&quot;: NOTES.md does \
             not contain &quot;changelog&quot;\">"
        ),
        "{xml}"
    );
    assert!(xml.trim_end().ends_with("</testsuite>"), "{xml}");
}

#[test]
fn a_passing_suite_exits_0() {
    let dir = Dir::new();
    basic_fixture(&dir);
    dir.script("notes.json", &writes_notes());
    dir.write(
        "suite.toml",
        &format!(
            "[[case]]\nname = \"adds a note\"\nprompt = \"Add a note\"\n\
             fixture = \"fixtures/basic\"\nmodel = {{ script = \"notes.json\" }}\n{NOTE_CHECKS}"
        ),
    );
    let ran = dir.eval(&["suite.toml"]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    assert!(ran.stdout.contains("1/1"), "{ran:#?}");
    assert!(!ran.stdout.contains("failed checks"), "{ran:#?}");
    assert!(
        ran.stderr.contains("[1/1] adds a note #1 … passed ("),
        "{ran:#?}"
    );
    // The fixture is as it was: every run worked in a copy.
    assert!(!dir.path.join("fixtures/basic/NOTES.md").exists());
}

#[test]
fn repetitions_run_two_at_a_time_each_in_a_fresh_copy() {
    let dir = Dir::new();
    basic_fixture(&dir);
    // Each copy holds the recording of its own run and no other: no copy is reused, and the
    // fixture's own recording (in its `.troupe/`) is never copied.
    dir.script("notes.json", &writes_notes());
    dir.write(
        "suite.toml",
        "[defaults]\nmodel = { script = \"notes.json\" }\nrepeat = 3\n\
         [[case]]\nname = \"adds a note\"\nprompt = \"Add a note\"\nfixture = \"fixtures/basic\"\n\
         [[case.check]]\ncommand = \"test $(ls .troupe/recordings | wc -l) -eq 1\"\n\
         [[case.check]]\nfile_contains = { path = \"NOTES.md\", text = \"usage\" }\n\
         [[case]]\nname = \"twice\"\nprompt = \"Add a note\"\nfixture = \"fixtures/basic\"\n\
         repeat = 2\nmin_pass = 0.5\n\
         [[case.check]]\ntool_called = \"write_file\"\n",
    );
    let ran = dir.eval(&["suite.toml", "--jobs", "2", "--json", "out.json"]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    let progress: Vec<&str> = ran.stderr.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(progress.len(), 5, "{ran:#?}");
    for at in 1..=5 {
        assert!(
            progress
                .iter()
                .any(|l| l.starts_with(&format!("[{at}/5] "))),
            "{ran:#?}"
        );
    }
    for number in 1..=3 {
        assert!(
            ran.stderr
                .contains(&format!("adds a note #{number} … passed")),
            "{ran:#?}"
        );
    }
    let report = json_file(&dir.path.join("out.json"));
    let numbers: Vec<u64> = report["cases"][0]["repetitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert_eq!(report["cases"][0]["passed"], 3);
    assert_eq!(report["cases"][0]["tokens"], 3 * 140);
    assert_eq!(report["cases"][1]["repeat"], 2);
    assert_eq!(report["cases"][1]["min_pass"], 0.5);
}

fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(status.status.success(), "git {args:?}: {status:?}");
}

#[test]
fn a_git_revision_is_checked_out_without_its_hooks() {
    let dir = Dir::new();
    let repo = dir.path.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("first.txt"), "first\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    std::fs::write(repo.join("second.txt"), "second\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "second"]);
    // A hook the clone would run on checkout if hooks ran.
    let marker = dir.path.join("hook-ran");
    let hook = repo.join(".git/hooks/post-checkout");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir.script("answers.json", &answers());
    dir.write(
        "suite.toml",
        "[[case]]\nname = \"old\"\nprompt = \"Look\"\nfixture = { git = \"repo\", rev = \"HEAD~1\" }\n\
         model = { script = \"answers.json\" }\n\
         [[case.check]]\nfile_exists = \"first.txt\"\n\
         [[case.check]]\ncommand = \"test ! -e second.txt\"\n",
    );
    let ran = dir.eval(&["suite.toml"]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    assert!(!marker.exists(), "the fixture's hook ran");

    dir.write(
        "bad-rev.toml",
        "[[case]]\nname = \"nowhere\"\nprompt = \"Look\"\nfixture = { git = \"repo\", rev = \"no-such-branch\" }\n",
    );
    let ran = dir.eval(&["bad-rev.toml"]);
    assert_fails(&ran, 2, "case \"nowhere\": fixture");
    assert!(
        ran.stderr.contains("no-such-branch") && ran.stderr.contains("[eval_suite_invalid]"),
        "{ran:#?}"
    );
}

#[test]
fn a_fixture_that_needs_trust_fails_its_repetitions_with_why() {
    let dir = Dir::new();
    dir.write(
        "fixtures/hooked/troupe.toml",
        "[[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"echo hooked\"\n",
    );
    dir.script("answers.json", &answers());
    dir.write(
        "suite.toml",
        "[[case]]\nname = \"hooked\"\nprompt = \"Look\"\nfixture = \"fixtures/hooked\"\n\
         model = { script = \"answers.json\" }\n",
    );
    let ran = dir.eval(&["suite.toml", "--json", "out.json"]);
    assert_eq!(ran.code, 1, "{ran:#?}");
    let report = json_file(&dir.path.join("out.json"));
    let failed = &report["cases"][0]["repetitions"][0]["failed_checks"][0];
    assert_eq!(failed["check"], "trust", "{report}");
    let why = failed["why"].as_str().unwrap();
    assert!(
        why.contains("would run 1 hook") && why.contains("--trust-workspace"),
        "{why}"
    );
}

#[test]
fn a_run_past_its_timeout_is_stopped() {
    let dir = Dir::new();
    dir.write("fixtures/empty/.keep", "");
    dir.script(
        "slow.json",
        &json!({"responses": [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 60"}}]},
            {"text": "slept"}
        ]}),
    );
    dir.write(
        "suite.toml",
        "[[case]]\nname = \"slow\"\nprompt = \"Wait\"\nfixture = \"fixtures/empty\"\n\
         model = { script = \"slow.json\" }\ntimeout = 1\n",
    );
    let started = Instant::now();
    let ran = dir.eval(&["suite.toml"]);
    assert_eq!(ran.code, 1, "{ran:#?}");
    assert!(started.elapsed() < Duration::from_secs(40), "{ran:#?}");
    assert!(
        ran.stdout
            .contains("slow #1: timeout: the run took longer than 1 s and was stopped"),
        "{ran:#?}"
    );
}

/// A suite refused before anything runs: exit 2, one line naming the file (and the case).
fn refused(dir: &Dir, suite: &str, needles: &[&str]) {
    dir.write("bad.toml", suite);
    let ran = dir.eval(&["bad.toml"]);
    assert_fails(&ran, 2, "bad.toml");
    assert!(ran.stderr.contains("[eval_suite_invalid]"), "{ran:#?}");
    for needle in needles {
        assert!(ran.stderr.contains(needle), "{needle:?} in {ran:#?}");
    }
    assert_eq!(ran.stdout, "", "{ran:#?}");
}

#[test]
fn hostile_and_broken_suites_are_refused_with_one_line() {
    let dir = Dir::new();
    basic_fixture(&dir);
    let case = "[[case]]\nname = \"a\"\nprompt = \"p\"\nfixture = \"fixtures/basic\"\n";
    refused(
        &dir,
        &format!("{case}surprise = 1\n"),
        &["bad.toml:5:", "surprise"],
    );
    refused(
        &dir,
        &format!("{case}[[case.check]]\nfile_exist = \"x\"\n"),
        &["bad.toml:6:", "file_exist"],
    );
    refused(
        &dir,
        &format!("{case}[[case.check]]\nfile_exists = \"a\"\ntool_called = \"shell\"\n"),
        &["bad.toml:5:", "holds exactly one check"],
    );
    refused(&dir, "[defaults]\nrepeat = 2\n", &["no [[case]]"]);
    refused(
        &dir,
        "[[case]]\nname = \"lost\"\nprompt = \"p\"\nfixture = \"nowhere\"\n",
        &["case \"lost\"", "nowhere"],
    );
    refused(
        &dir,
        &format!("{case}repeat = 0\n"),
        &["case \"a\"", "`repeat`"],
    );
    refused(
        &dir,
        &format!("{case}min_pass = 1.5\n"),
        &["case \"a\"", "`min_pass`"],
    );
    refused(
        &dir,
        &format!("{case}[[case.check]]\nfile_matches = {{ path = \"a\", regex = \"(\" }}\n"),
        &["case \"a\"", "check 1", "bad regex"],
    );
    refused(
        &dir,
        &format!("{case}[[case.check]]\nfile_exists = \"../outside\"\n"),
        &["case \"a\"", "relative path inside"],
    );
    refused(
        &dir,
        &format!("{case}model = {{ script = \"missing.json\" }}\n"),
        &["case \"a\"", "missing.json"],
    );
    refused(
        &dir,
        &format!("{case}{case}"),
        &["two cases have this name"],
    );

    // A FIFO in the fixture: refused when the suite is read, never opened.
    let fifo_dir = dir.path.join("fixtures/fifo");
    std::fs::create_dir_all(&fifo_dir).unwrap();
    let fifo = std::ffi::CString::new(fifo_dir.join("pipe").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    refused(
        &dir,
        "[[case]]\nname = \"fifo\"\nprompt = \"p\"\nfixture = \"fixtures/fifo\"\n",
        &["case \"fifo\"", "pipe", "not a file, folder or link"],
    );

    // Links out of the fixture, absolute or relative.
    dir.write("secret.txt", "secret\n");
    for (name, target) in [
        ("absolute", dir.path.join("secret.txt")),
        ("relative", PathBuf::from("../../secret.txt")),
    ] {
        let fixture = dir.path.join("fixtures").join(name);
        std::fs::create_dir_all(&fixture).unwrap();
        std::os::unix::fs::symlink(&target, fixture.join("link")).unwrap();
        refused(
            &dir,
            &format!(
                "[[case]]\nname = \"{name}\"\nprompt = \"p\"\nfixture = \"fixtures/{name}\"\n"
            ),
            &[
                &format!("case \"{name}\""),
                "link",
                "must be relative and stay inside it",
            ],
        );
    }

    // --jobs 0 is a usage error.
    dir.write("ok.toml", case);
    let ran = dir.eval(&["ok.toml", "--jobs", "0"]);
    assert_fails(&ran, 2, "--jobs must be at least 1");
}

#[test]
fn a_recorded_run_answers_a_case() {
    let dir = Dir::new();
    basic_fixture(&dir);
    // Record a run: its model calls land in `.troupe/recordings/<run>.jsonl`.
    let recorded = dir.path.join("recorded");
    std::fs::create_dir(&recorded).unwrap();
    dir.script("notes.json", &writes_notes());
    let script = dir.path.join("notes.json");
    let run = super::support::troupe_in(
        &recorded,
        &[
            "run",
            "--prompt",
            "Add a note",
            "--approval",
            "auto",
            "--model-script",
            script.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    let recordings: Vec<PathBuf> = std::fs::read_dir(recorded.join(".troupe/recordings"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(recordings.len(), 1, "{recordings:?}");
    std::fs::copy(&recordings[0], dir.path.join("run.jsonl")).unwrap();
    dir.write(
        "suite.toml",
        "[defaults]\nmodel = { recording = \"run.jsonl\" }\n\
         [[case]]\nname = \"replayed\"\nprompt = \"Add a note\"\nfixture = \"fixtures/basic\"\n\
         [[case.check]]\nfile_contains = { path = \"NOTES.md\", text = \"usage\" }\n\
         [[case.check]]\ntool_called = \"write_file\"\n",
    );
    let ran = dir.eval(&["suite.toml"]);
    assert_eq!(ran.code, 0, "{ran:#?}");
    assert!(
        ran.stderr.contains("[1/1] replayed #1 … passed"),
        "{ran:#?}"
    );
}
