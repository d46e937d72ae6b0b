//! What a new user reads: `--help` of every command, shell completions, and the commands the
//! demo tells them to paste.

use pretty_assertions::assert_eq;

use super::support::{command, ran, troupe};

#[test]
fn demo_help_says_it_makes_a_temporary_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let help = troupe(dir.path(), &["demo", "--help"]);
    assert_eq!(help.code, 0, "{help:#?}");
    assert!(
        help.stdout.contains("fresh temporary folder"),
        "{}",
        help.stdout
    );
    assert!(
        !help.stdout.contains("current directory"),
        "{}",
        help.stdout
    );
    let status = troupe(dir.path(), &["status", "--help"]);
    assert!(
        status.stdout.contains("current directory"),
        "{}",
        status.stdout
    );
}

/// The demo's closing lines: the commands it says to paste.
fn pasteable(stdout: &str) -> Vec<String> {
    let tail = stdout
        .split("Inspect it:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no inspect commands in\n{stdout}"));
    tail.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_demo_names_inspect_commands_that_work_when_pasted() {
    let dir = tempfile::tempdir().unwrap();
    // A path a shell would split or choke on unless it is quoted.
    let workspace = std::fs::canonicalize(dir.path())
        .unwrap()
        .join("it's a demo");
    let out = troupe(
        dir.path(),
        &["demo", "--workspace", workspace.to_str().unwrap()],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let commands = pasteable(&out.stdout);
    assert_eq!(commands.len(), 4, "{commands:?}");
    // troupe is not on this PATH: the commands name the binary that ran.
    let exe = env!("CARGO_BIN_EXE_troupe");
    for (line, expected) in commands
        .iter()
        .zip(["status", "requests", "mailbox writer", "usage"])
    {
        assert!(line.starts_with(exe), "{line}");
        assert!(line.contains(expected), "{line}");
        let pasted = ran(std::process::Command::new("sh")
            .args(["-c", line])
            .env("PATH", "/usr/bin:/bin")
            .current_dir("/")
            .output()
            .unwrap());
        assert_eq!(pasted.code, 0, "{line}: {pasted:#?}");
        assert!(pasted.stdout.contains("writer"), "{line}: {pasted:#?}");
    }
}

#[test]
fn the_demo_says_troupe_when_troupe_is_on_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_troupe"));
    let out = ran(command(dir.path())
        .args([
            "demo",
            "--workspace",
            dir.path().join("ws").to_str().unwrap(),
        ])
        .env("PATH", exe.parent().unwrap())
        .output()
        .unwrap());
    assert_eq!(out.code, 0, "{out:#?}");
    for line in pasteable(&out.stdout) {
        assert!(line.starts_with("troupe "), "{line}");
    }
}

/// The words of a text table's first row.
fn header(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[test]
fn text_tables_have_header_rows_and_resolved_requests_show_no_expiry() {
    let (_dir, ws) = super::support::demo_workspace();
    let requests = super::support::troupe_in(&ws, &["requests"]);
    let lines: Vec<&str> = requests.stdout.lines().collect();
    assert_eq!(
        header(lines[0]),
        ["short", "id", "kind", "from", "to", "status", "when", "content"]
    );
    assert_eq!(lines.len(), 3, "{}", requests.stdout);
    for row in &lines[1..] {
        assert!(row.contains("approved  resolved 20"), "{row}");
        assert!(
            !row.contains("expires"),
            "a resolved request has no deadline: {row}"
        );
    }
    // JSON keeps the contracted expiry.
    let json = super::support::json(&super::support::troupe_in(&ws, &["requests", "--json"]));
    assert!(json["requests"][0]["expires_at_utc"].is_string(), "{json}");

    let mailbox = super::support::troupe_in(&ws, &["mailbox", "lead"]);
    assert_eq!(
        header(mailbox.stdout.lines().next().unwrap()),
        ["state", "created", "id", "from", "to", "kind", "content"]
    );
    let status = super::support::troupe_in(&ws, &["status"]).stdout;
    let after = |section: &str| {
        let mut lines = status.lines().skip_while(|l| *l != section);
        lines.next();
        header(
            lines
                .next()
                .unwrap_or_else(|| panic!("no {section} in\n{status}")),
        )
    };
    assert_eq!(after("teammates"), ["name", "status", "role"]);
    assert_eq!(
        after("mailboxes"),
        ["agent", "ready", "processing", "done", "quarantine"]
    );
}
