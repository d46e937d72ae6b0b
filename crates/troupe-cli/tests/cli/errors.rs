//! Bad input and broken state files: every failure is one line on stderr (`troupe: …`) — or,
//! with `--json`, one JSON object on stdout — a non-zero exit code (2 for bad usage, 1 for
//! anything else), and never a panic.

use super::support::{assert_fails, assert_fails_json, demo_workspace, troupe, troupe_in};
use troupe::layout::Layout;

#[test]
fn bad_names_states_and_ids_are_refused() {
    let (_dir, ws) = demo_workspace();
    assert_fails(
        &troupe_in(&ws, &["mailbox", "../x"]),
        2,
        "invalid agent name \"../x\"",
    );
    assert_fails(
        &troupe_in(&ws, &["mailbox", "Lead"]),
        2,
        "invalid agent name",
    );
    assert_fails(
        &troupe_in(&ws, &["mailbox", "ghost"]),
        1,
        "no mailbox for agent ghost",
    );
    assert_fails(
        &troupe_in(&ws, &["mailbox", "lead", "--state", "bogus"]),
        2,
        "unknown mailbox state",
    );
    assert_fails(
        &troupe_in(&ws, &["requests", "--status", "bogus"]),
        2,
        "unknown status",
    );
    assert_fails(
        &troupe_in(&ws, &["review", "not-a-uuid", "--approve"]),
        2,
        "not-a-uuid",
    );
    assert_fails(
        &troupe_in(
            &ws,
            &["review", "00000000-0000-4000-8000-00000000beef", "--reject"],
        ),
        1,
        "[protocol_not_found]",
    );
    let missing = ws.join("no-such-folder");
    assert_fails(
        &troupe(&ws, &["status", "--workspace", missing.to_str().unwrap()]),
        2,
        "is not a folder",
    );
}

#[test]
fn a_corrupt_state_json_is_reported_not_repaired() {
    let (_dir, ws) = demo_workspace();
    let state = Layout::new(&ws).protocol_state();
    std::fs::write(&state, b"{\"version\":1,\"requests\":[{\"id\":\"x\"}]}").unwrap();
    for args in [
        &["requests"][..],
        &["requests", "--json"],
        &["status", "--json"],
        &[
            "review",
            "00000000-0000-4000-8000-00000000beef",
            "--approve",
        ],
    ] {
        if args.contains(&"--json") {
            assert_fails_json(&troupe_in(&ws, args), 1, "protocol_state_corrupt");
        } else {
            assert_fails(&troupe_in(&ws, args), 1, "[protocol_state_corrupt]");
        }
    }
    assert_eq!(
        std::fs::read(&state).unwrap(),
        b"{\"version\":1,\"requests\":[{\"id\":\"x\"}]}",
        "left as it was"
    );
}

#[test]
fn a_corrupt_team_json_is_reported() {
    let (_dir, ws) = demo_workspace();
    let team = Layout::new(&ws).team_file();
    for bytes in [
        &b"not json"[..],
        b"{\"version\":1,\"teammates\":[{\"name\":\"../x\"}]}",
    ] {
        std::fs::write(&team, bytes).unwrap();
        assert_fails(&troupe_in(&ws, &["status"]), 1, "team.json");
        assert_fails_json(
            &troupe_in(&ws, &["status", "--json"]),
            1,
            "team_state_corrupt",
        );
    }
}

/// Inspection never creates state: a protocol folder holding nothing is read as no requests,
/// and its lock file is not created.
#[test]
fn inspection_creates_no_lock_file_in_an_empty_protocol_folder() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let layout = Layout::new(ws);
    std::fs::create_dir_all(layout.protocol_dir()).unwrap();
    for args in [&["status"][..], &["requests", "--json"]] {
        let ran = troupe_in(ws, args);
        assert_eq!(ran.code, 0, "{ran:#?}");
    }
    let requests: serde_json::Value =
        serde_json::from_str(&troupe_in(ws, &["requests", "--json"]).stdout).unwrap();
    assert_eq!(requests["requests"], serde_json::json!([]));
    assert!(!layout.protocol_lock().exists());
    assert_eq!(std::fs::read_dir(layout.protocol_dir()).unwrap().count(), 0);
}
