//! `troupe gc` through the binary (issue 45): a workspace of many runs pruned by the default
//! retention keeps working (the next run continues the conversation, `usage` and `log` are
//! unchanged, every artifact the conversation names is there); `--dry-run` changes nothing;
//! gc beside a live run removes nothing it uses; a gc killed midway is finished by the next.
//! Files are aged by setting their modification times, as weeks of use would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::special_files::mkfifo;
use super::support::{command, json as json_of, troupe_in, wait_for_event};

const DAY: Duration = Duration::from_secs(86_400);

fn run(ws: &Path, args: &[&str], script: &Value) -> std::process::Output {
    run_command(ws, args, script).output().unwrap()
}

fn run_command(ws: &Path, args: &[&str], script: &Value) -> std::process::Command {
    let path = ws.join(format!(".script-{}.json", uuid::Uuid::new_v4().simple()));
    std::fs::write(&path, script.to_string()).unwrap();
    let mut run = command(ws);
    run.args(["run", "--workspace", ws.to_str().unwrap()])
        .args(args)
        .args([
            "--approval",
            "auto",
            "--model-script",
            path.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run
}

fn ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn text(t: &str) -> Value {
    json!({ "text": t })
}

/// A run whose lead runs a command with a long output (kept whole as an artifact) and answers;
/// the first also spawns a teammate that answers.
fn a_run(ws: &Path, n: usize, extra: &[&str]) {
    let mut lead = vec![
        json!({"tool_calls": [{"name": "shell", "arguments": {"command": format!("seq 1 9000; echo run-{n}")}}]}),
    ];
    let mut agents = serde_json::Map::new();
    if n == 0 {
        lead.insert(
            0,
            json!({"tool_calls": [{"name": "spawn_teammate", "arguments": {"name": "alpha", "role": "helper", "prompt": "Say hello."}}]}),
        );
        agents.insert("alpha".into(), json!([text("hello")]));
        lead.push(text("waiting"));
    }
    lead.push(text(&format!("done {n}")));
    lead.push(text(&format!("done {n}")));
    agents.insert("lead".into(), Value::Array(lead));
    let prompt = format!("prompt number {n}");
    let mut args = vec!["--prompt", prompt.as_str()];
    args.extend_from_slice(extra);
    ok(&run(ws, &args, &json!({ "agents": agents })));
}

/// Every regular file under `dir`, recursively, not through symlinks.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let p = e.unwrap().path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            out.extend(files(&p));
        } else if meta.is_file() {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Makes every file of the workspace's state `days` old, but the run lock.
fn age_state(ws: &Path, days: u32) {
    for path in files(&ws.join(".troupe")) {
        if path.ends_with("run.lock") {
            continue;
        }
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() - DAY * days).unwrap();
    }
}

/// Each file of the state with its bytes and its time.
fn digest(ws: &Path) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
    files(&ws.join(".troupe"))
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            let modified = std::fs::metadata(&p).unwrap().modified().unwrap();
            (
                p.strip_prefix(ws).unwrap().display().to_string(),
                (bytes, modified),
            )
        })
        .collect()
}

fn count_under(ws: &Path, part: &str) -> usize {
    files(&ws.join(".troupe"))
        .iter()
        .filter(|p| p.to_string_lossy().contains(part))
        .count()
}

fn gc(ws: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["gc", "--json"];
    args.extend_from_slice(extra);
    json_of(&troupe_in(ws, &args))
}

fn removed(report: &Value, kind: &str) -> u64 {
    report["kinds"][kind]["removed"]["items"]
        .as_u64()
        .unwrap_or(0)
}

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(ws.join(".troupe")).unwrap();
    (dir, ws)
}

#[test]
fn gc_on_a_workspace_of_many_runs_keeps_it_working() {
    let (_dir, ws) = workspace();
    a_run(&ws, 0, &[]);
    a_run(&ws, 1, &[]);
    a_run(&ws, 2, &["--new-session"]);
    a_run(&ws, 3, &[]);
    age_state(&ws, 100);
    a_run(&ws, 4, &[]);
    let usage = json_of(&troupe_in(&ws, &["usage", "--json"]));
    let log = troupe_in(&ws, &["log"]);
    assert_eq!(log.code, 0, "{log:?}");
    let before = digest(&ws);
    assert!(count_under(&ws, "lead.1.jsonl") == 1);
    assert_eq!(count_under(&ws, "/recordings/"), 5);

    // A dry run says what would go and changes nothing.
    let dry = gc(&ws, &["--dry-run"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(digest(&ws), before, "a dry run changed the state");

    let report = gc(&ws, &[]);
    assert_eq!(report["dry_run"], false);
    // The dry run said what gc did (the open event segment counted before it is compressed).
    let items = |r: &Value| {
        let mut kinds = r["kinds"].clone();
        kinds["events"]["kept"]["within its age"]["bytes"] = json!(null);
        kinds
    };
    assert_eq!(items(&report), items(&dry), "the dry run said what gc did");
    assert!(removed(&report, "messages") > 0, "{report}");
    assert_eq!(removed(&report, "transcripts"), 1, "{report}");
    assert_eq!(removed(&report, "recordings"), 4, "{report}");
    assert!(removed(&report, "artifacts") > 0, "{report}");
    assert!(
        report["bytes_after"].as_u64() < report["bytes_before"].as_u64(),
        "{report}"
    );
    // What the current conversations need is there: the transcripts, and every artifact
    // they name.
    assert_eq!(count_under(&ws, "lead.1.jsonl"), 0);
    let lead = std::fs::read_to_string(ws.join(".troupe/transcripts/lead.jsonl")).unwrap();
    assert!(ws.join(".troupe/transcripts/alpha.jsonl").is_file());
    let named: Vec<&str> = lead
        .match_indices(".troupe/artifacts/")
        .map(|(at, _)| {
            let rest = &lead[at..];
            &rest[..rest.find(".txt").unwrap() + 4]
        })
        .collect();
    assert!(!named.is_empty(), "the conversation names its artifacts");
    for artifact in named {
        assert!(ws.join(artifact).is_file(), "{artifact} was removed");
    }
    // The newest run's recording stays; usage and the log read the same.
    assert_eq!(count_under(&ws, "/recordings/"), 1);
    assert_eq!(json_of(&troupe_in(&ws, &["usage", "--json"])), usage);
    assert_eq!(troupe_in(&ws, &["log"]).stdout, log.stdout);

    // The next run continues the conversation.
    a_run(&ws, 5, &[]);
    let lead = std::fs::read_to_string(ws.join(".troupe/transcripts/lead.jsonl")).unwrap();
    for prompt in ["prompt number 2", "prompt number 4", "prompt number 5"] {
        assert!(lead.contains(prompt), "{prompt} is not in the conversation");
    }
    // A second gc finds nothing more of the aged state.
    let again = gc(&ws, &[]);
    assert_eq!(removed(&again, "transcripts"), 0, "{again}");
    assert_eq!(removed(&again, "recordings"), 0, "{again}");
    // The text report names each kind and the totals.
    let shown = troupe_in(&ws, &["gc", "--dry-run"]);
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(shown.stdout.contains("would remove"), "{}", shown.stdout);
    assert!(
        shown.stdout.contains("the current conversation"),
        "{}",
        shown.stdout
    );
}

#[test]
fn gc_beside_a_live_run_removes_nothing_it_uses() {
    let (_dir, ws) = workspace();
    a_run(&ws, 0, &[]);
    a_run(&ws, 1, &[]);
    age_state(&ws, 100);
    let fifo = ws.join("gate");
    mkfifo(&fifo);
    let seen = troupe::store::events::read::read_all(&ws.join(".troupe/events.jsonl"))
        .unwrap()
        .last()
        .map_or(0, |e| e.seq);
    let live = run_command(
        &ws,
        &["--prompt", "wait at the gate"],
        &json!({"agents": {"lead": [
            {"tool_calls": [{"name": "shell", "arguments": {"command": format!("seq 1 9000; read line < {}", fifo.display())}}]},
            text("through the gate"), text("through the gate")
        ]}}),
    )
    .spawn()
    .unwrap();
    // The earlier runs' events are there too: only one after them is this run's.
    wait_for_event(&ws, "the lead's shell call", |e| {
        e.kind == "tool_started" && e.agent == "lead" && e.seq > seen
    });
    let report = gc(&ws, &[]);
    assert!(report["live_run_since"].is_string(), "{report}");
    // The earlier runs' recordings went; the live run's stayed.
    assert_eq!(removed(&report, "recordings"), 2, "{report}");
    assert_eq!(count_under(&ws, "/recordings/"), 1);
    assert_eq!(
        report["kinds"]["recordings"]["kept"]["a live run uses it"]["items"], 1,
        "{report}"
    );
    // Let the run go on: it finishes as if nothing happened.
    std::fs::write(&fifo, b"go\n").unwrap();
    let out = live.wait_with_output().unwrap();
    ok(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "through the gate"
    );
    let status = json_of(&troupe_in(&ws, &["status", "--json"]));
    assert!(status["state_bytes"].as_u64().unwrap() > 0, "{status}");
    a_run(&ws, 2, &[]);
}

#[test]
fn a_gc_killed_midway_is_finished_by_the_next() {
    let (_dir, ws) = workspace();
    a_run(&ws, 0, &[]);
    // Thousands of old done messages, so that the kill lands while gc removes them.
    let done = ws.join(".troupe/mailboxes/lead/done");
    for n in 0..4000 {
        std::fs::write(
            done.join(format!("00000000-0000-4000-8000-{n:012}.json")),
            b"{}",
        )
        .unwrap();
    }
    age_state(&ws, 100);
    let total = std::fs::read_dir(&done).unwrap().count();
    let mut child = command(&ws)
        .args(["gc", "--workspace", ws.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    loop {
        let left = std::fs::read_dir(&done).unwrap().count();
        if left < total || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::yield_now();
    }
    let _ = child.kill();
    child.wait().unwrap();
    let report = gc(&ws, &[]);
    assert_eq!(std::fs::read_dir(&done).unwrap().count(), 0, "{report}");
    // The workspace reads and runs.
    let status = json_of(&troupe_in(&ws, &["status", "--json"]));
    assert_eq!(status["pending_requests"], json!([]), "{status}");
    a_run(&ws, 1, &[]);
}

#[test]
fn a_workspace_s_own_retention_that_deletes_waits_for_trust() {
    let (_dir, ws) = workspace();
    a_run(&ws, 0, &[]);
    std::fs::write(
        ws.join("troupe.toml"),
        "[retention]\nauto = true\nmessages = \"1s\"\nrecordings = \"1s\"\n",
    )
    .unwrap();
    // Not trusted: the defaults apply, and nothing of today goes.
    let report = gc(&ws, &[]);
    assert_eq!(removed(&report, "messages"), 0, "{report}");
    assert_eq!(removed(&report, "recordings"), 0, "{report}");
    // A run asks for trust first: it would delete.
    let refused = run(
        &ws,
        &["--prompt", "x"],
        &json!({"agents": {"lead": [text("x")]}}),
    );
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("delete troupe's state sooner than the defaults"),
        "{stderr}"
    );
    assert_eq!(count_under(&ws, "/recordings/"), 1);
    // Trusted, its run's close prunes by its rules: the day-old state goes, the new run stays.
    age_state(&ws, 1);
    a_run(&ws, 1, &["--trust-workspace"]);
    assert_eq!(count_under(&ws, "/recordings/"), 1);
    let done_old = files(&ws.join(".troupe/mailboxes"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/done/"))
        .filter(|p| std::fs::metadata(p).unwrap().modified().unwrap() < SystemTime::now() - DAY / 2)
        .count();
    assert_eq!(
        done_old, 0,
        "the day-old done messages went at the run's close"
    );
}

#[test]
fn gc_removes_old_finished_tasks_and_the_board_still_loads() {
    use std::sync::Arc;
    use troupe::clock::{Clock, ManualClock, SystemClock};
    use troupe::ids::RandomIds;
    use troupe::store::tasks::{FileTaskBoard, NewTask, TaskBoard};
    use troupe::wire::{AgentName, UtcTime};

    let (_dir, ws) = workspace();
    // A board of 100 days ago: `old` finished and `next` (pending) blocked by it; `done`
    // finished and named by nothing.
    let days_ago = |days: i64| {
        let now = SystemClock.now();
        UtcTime::from_unix_millis(now.unix_millis() - days * 86_400_000).unwrap()
    };
    let board = FileTaskBoard::new(
        &troupe::layout::Layout::new(&ws),
        Arc::new(ManualClock::new(days_ago(100))),
        Arc::new(RandomIds),
    );
    let worker = AgentName::parse("alpha").unwrap();
    let task = |subject: &str, blocked_by| NewTask {
        subject: subject.into(),
        blocked_by,
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        for subject in ["old", "done"] {
            let made = board.create(task(subject, vec![])).await.unwrap();
            let claimed = board.claim(&made.id, &worker).await.unwrap();
            let token = claimed.lease.unwrap().token;
            board.complete(&made.id, &worker, &token).await.unwrap();
            if subject == "old" {
                board.create(task("next", vec![made.id])).await.unwrap();
            }
        }
    });
    let subjects = |ws: &Path| {
        let listed = json_of(&troupe_in(ws, &["tasks", "--json"]));
        let mut subjects: Vec<String> = listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["subject"].as_str().unwrap().to_owned())
            .collect();
        subjects.sort();
        subjects
    };
    assert_eq!(subjects(&ws), ["done", "next", "old"]);
    let before = digest(&ws);
    let dry = gc(&ws, &["--dry-run"]);
    assert_eq!(removed(&dry, "tasks"), 1, "{dry}");
    assert_eq!(digest(&ws), before, "a dry run changed the state");

    let report = gc(&ws, &[]);
    assert_eq!(removed(&report, "tasks"), 1, "{report}");
    let kept = &report["kinds"]["tasks"]["kept"];
    assert_eq!(
        kept["a task that stays is blocked by it"]["items"], 1,
        "{report}"
    );
    assert_eq!(kept["an unfinished task"]["items"], 1, "{report}");
    // The board loads, and `next` can still be claimed (its blocker is there, completed).
    assert_eq!(subjects(&ws), ["next", "old"]);
    let shown = troupe_in(&ws, &["gc", "--dry-run"]);
    assert!(shown.stdout.contains("tasks"), "{}", shown.stdout);
}

#[test]
fn a_shared_teams_run_prunes_the_teams_tables_at_its_close() {
    use troupe::store::postgres::testing::TestDb;
    let Some(db) = TestDb::create() else {
        return;
    };
    let url = db.url();
    let (_dir, ws) = workspace();
    a_run(&ws, 1, &["--store", &url]);
    let count = |sql: &str| -> u64 { db.query_text(sql).unwrap().unwrap().parse().unwrap() };
    let all = "SELECT count(*) FROM troupe_audit";
    let first = count(all);
    assert!(first > 0, "the run's decisions are in the team's table");
    // Those decisions are made two days old.
    db.execute(
        "UPDATE troupe_audit SET line = regexp_replace(line, '\"at\":\"[^\"]+\"', \
         '\"at\":\"2026-01-01T00:00:00.000Z\"')",
    )
    .unwrap();
    std::fs::write(
        ws.join("troupe.toml"),
        "[retention]\nauto = true\naudit = \"1d\"\n",
    )
    .unwrap();
    a_run(&ws, 2, &["--store", &url, "--trust-workspace"]);
    let old = "SELECT count(*) FROM troupe_audit WHERE line LIKE '%\"at\":\"2026-01-01T%'";
    assert_eq!(count(old), 0, "the close left the old decisions");
    assert!(count(all) > 0, "the new run's decisions stay");
}
