//! How a `troupe run` that did not succeed says so (SPEC §8): a run stopped by `--max-turns`
//! without a final answer exits 3 with a one-line reason; `--approval ask` without a terminal
//! says once, at start, that calls needing approval will be denied and how to allow them.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{command, ran, Ran};

fn run_with_script(script: serde_json::Value, args: &[&str]) -> (tempfile::TempDir, Ran) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let path = ws.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let out = command(&ws)
        .args(["run", "--workspace", ws.to_str().unwrap(), "--prompt", "go"])
        .args(["--model-script", path.to_str().unwrap()])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (dir, ran(out))
}

/// Lines troupe itself says (tool activity lines start with a time stamp instead).
fn said(ran: &Ran) -> Vec<&str> {
    ran.stderr
        .lines()
        .filter(|l| l.starts_with("troupe: "))
        .collect()
}

#[test]
fn a_run_stopped_by_the_turn_limit_exits_3_with_one_line() {
    let glob = json!({"tool_calls": [{"name": "glob", "arguments": {"pattern": "*"}}]});
    let (_dir, out) = run_with_script(
        json!({"responses": [glob, glob, glob]}),
        &["--max-turns", "2", "--approval", "deny"],
    );
    assert_eq!(out.code, 3, "{out:#?}");
    assert_eq!(out.stdout, "", "no answer to print");
    assert_eq!(
        said(&out),
        [
            "troupe: the lead stopped after 2 model calls without a final answer \
          (--max-turns 2) [turn_limit]"
        ]
    );
    assert_eq!(out.stderr.lines().last(), said(&out).last().copied());
}

#[test]
fn an_answer_within_the_turn_limit_is_success() {
    let (_dir, out) = run_with_script(
        json!({"responses": [{"text": "done"}]}),
        &["--max-turns", "1"],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "done\n");
}

#[test]
fn ask_without_a_terminal_says_once_at_start_that_calls_will_be_denied() {
    let write = |path: &str| json!({"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": "x"}}]});
    let script = json!({"responses": [write("a.txt"), write("b.txt"), {"text": "finished"}]});
    let (_dir, out) = run_with_script(script.clone(), &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        said(&out),
        ["troupe: no terminal to ask for approval: calls that need it (write and execute tools) \
          will be denied; use --approval auto to allow them"]
    );
    assert_eq!(
        out.stderr.lines().next(),
        said(&out).first().copied(),
        "said first"
    );
    assert_eq!(out.stderr.matches("DENIED").count(), 2, "{out:#?}");
    for mode in ["auto", "deny"] {
        let (_dir, out) = run_with_script(script.clone(), &["--approval", mode]);
        assert_eq!(out.code, 0, "{out:#?}");
        assert_eq!(said(&out), Vec::<&str>::new(), "--approval {mode}");
    }
}
