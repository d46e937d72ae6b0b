//! Using the command line: errors as JSON when JSON was asked for, shell completions, compound
//! durations.

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::support::{demo_workspace, troupe, troupe_in, Ran};

/// A failure under `--json`: the exit code, one JSON object on stdout, nothing on stderr.
fn json_error(ran: &Ran, exit: i32) -> Value {
    assert_eq!(ran.code, exit, "{ran:#?}");
    assert_eq!(ran.stderr, "", "{ran:#?}");
    assert_eq!(ran.stdout.lines().count(), 1, "one line: {ran:#?}");
    let error: Value =
        serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("{e}: {ran:#?}"));
    assert_eq!(super::support::keys(&error), ["error"], "{error}");
    assert_eq!(
        super::support::keys(&error["error"]),
        ["code", "message"],
        "{error}"
    );
    error
}

#[test]
fn with_json_every_error_is_one_json_object_on_stdout() {
    let (_dir, ws) = demo_workspace();
    assert_eq!(
        json_error(&troupe_in(&ws, &["mailbox", "ghost", "--json"]), 1),
        json!({"error": {"code": "unknown_agent",
                         "message": "no mailbox for agent ghost in this workspace"}})
    );
    let bad_name = json_error(&troupe_in(&ws, &["mailbox", "Lead", "--json"]), 2);
    assert_eq!(bad_name["error"]["code"], "usage");
    assert!(
        bad_name["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid agent name"),
        "{bad_name}"
    );
    let bad_status = json_error(
        &troupe_in(&ws, &["requests", "--json", "--status", "bogus"]),
        2,
    );
    assert_eq!(bad_status["error"]["code"], "usage");
    // clap's own usage errors too.
    let unknown_flag = json_error(&troupe_in(&ws, &["status", "--json", "--bogus"]), 2);
    assert_eq!(unknown_flag["error"]["code"], "usage");
    assert!(
        unknown_flag["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--bogus"),
        "{unknown_flag}"
    );
    // A missing argument is named in the one line.
    let no_agent = json_error(&troupe_in(&ws, &["mailbox", "--json"]), 2);
    assert_eq!(
        no_agent["error"]["message"],
        "the following required arguments were not provided: <AGENT>"
    );
    // A worker without a store names every way to give one.
    super::support::assert_fails(
        &troupe_in(&ws, &["worker"]),
        2,
        "[store] url in troupe.toml",
    );
    let missing = ws.join("no-such-folder");
    let not_a_folder = json_error(
        &troupe(
            &ws,
            &["jobs", "--json", "--workspace", missing.to_str().unwrap()],
        ),
        2,
    );
    assert_eq!(not_a_folder["error"]["code"], "usage");
    // A corrupt state file: its code, as in text.
    std::fs::write(ws.join(".troupe/team.json"), b"not json").unwrap();
    let corrupt = json_error(&troupe_in(&ws, &["status", "--json"]), 1);
    assert_eq!(corrupt["error"]["code"], "team_state_corrupt");
    // Without --json the same error is one line on stderr.
    super::support::assert_fails(&troupe_in(&ws, &["status"]), 1, "[team_state_corrupt]");
}

#[test]
fn completions_are_printed_for_each_shell() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "complete -F _troupe"),
        ("zsh", "#compdef troupe"),
        ("fish", "complete -c troupe"),
    ] {
        let out = troupe(dir.path(), &["completions", shell]);
        assert_eq!(out.code, 0, "{out:#?}");
        assert!(out.stdout.contains(marker), "{shell}: {}", out.stdout);
        for word in ["requests", "mailbox", "max-turns", "model-script"] {
            assert!(out.stdout.contains(word), "{shell} lacks {word}");
        }
    }
    let unknown = troupe(dir.path(), &["completions", "cmd.exe"]);
    assert_eq!(unknown.code, 2, "{unknown:#?}");
}

#[test]
fn request_ttl_takes_compound_durations() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let tool = |name: &str, arguments: Value| json!({"tool_calls": [{"name": name, "arguments": arguments}]});
    let script = json!({"agents": {
        "lead": [
            tool("spawn_teammate", json!({"name": "writer", "role": "writer", "prompt": "Say hi."})),
            tool("request_shutdown", json!({"teammate": "writer"})),
            {"text": "Asked the writer to stop."},
            {"text": "Done."},
            {"text": "Done."}
        ],
        "writer": [{"text": "hi"}]
    }});
    let path = ws.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let run = troupe_in(
        &ws,
        &[
            "run",
            "--prompt",
            "go",
            "--request-ttl",
            "1h30m",
            "--model-script",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    let requests = super::support::json(&troupe_in(&ws, &["requests", "--json"]));
    let request = &requests["requests"][0];
    assert_eq!(request["kind"], "shutdown");
    let at =
        |key: &str| chrono::DateTime::parse_from_rfc3339(request[key].as_str().unwrap()).unwrap();
    assert_eq!(
        (at("expires_at_utc") - at("created_at_utc")).num_seconds(),
        90 * 60
    );
}
