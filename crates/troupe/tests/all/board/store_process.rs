//! Claim races between real processes: this test binary re-executes itself, once per claimer.

use std::process::{Command, Stdio};

use pretty_assertions::assert_eq;
use troupe::error::ErrorCode;
use troupe::layout::Layout;
use troupe::store::lock;
use troupe::store::tasks::{TaskBoard, TaskId};
use troupe::wire::AgentName;

use super::store::{board, new_task};

const ENV_DIR: &str = "TROUPE_TEST_TASK_CLAIM_DIR";
const ENV_TASK: &str = "TROUPE_TEST_TASK_CLAIM_ID";
const ENV_AGENT: &str = "TROUPE_TEST_TASK_CLAIM_AGENT";
const RESULT: &str = "TASK-CLAIM-RESULT ";

/// The child: claims the task named in the environment and prints the outcome. Does nothing
/// when run as an ordinary test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_child() {
    let (Ok(dir), Ok(task), Ok(agent)) = (
        std::env::var(ENV_DIR),
        std::env::var(ENV_TASK),
        std::env::var(ENV_AGENT),
    ) else {
        return;
    };
    let agent = AgentName::parse(&agent).unwrap();
    let id = TaskId::parse(&task).unwrap();
    // Each process has its own generator; ids are not used by a claim anyway.
    let board = board(std::path::Path::new(&dir), 7);
    match board.claim(&id, &agent).await {
        Ok(task) => println!("{RESULT}ok {}", task.owner.unwrap()),
        Err(e) => println!("{RESULT}err {}", e.code()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_processes_give_one_owner() {
    const CLAIMERS: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    let id = board(dir.path(), 0)
        .create(new_task("contested", vec![]))
        .await
        .unwrap()
        .id;
    let exe = std::env::current_exe().unwrap();
    // Hold the board's lock while the children start, so that they pile up on it and race
    // when it is released.
    let guard = lock::lock_exclusive(&Layout::new(dir.path()).tasks_lock()).unwrap();
    let children: Vec<_> = (0..CLAIMERS)
        .map(|i| {
            Command::new(&exe)
                .args([
                    "board::store_process::claim_child",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(ENV_DIR, dir.path())
                .env(ENV_TASK, id.to_string())
                .env(ENV_AGENT, format!("process-{i}"))
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();
    drop(guard);
    let mut outcomes: Vec<String> = children
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().unwrap();
            assert!(output.status.success(), "{output:?}");
            let stdout = String::from_utf8(output.stdout).unwrap();
            // The harness prints `test … ... ` on the same line, before the result.
            stdout
                .split_once(RESULT)
                .and_then(|(_, rest)| rest.lines().next())
                .unwrap_or_else(|| panic!("no result in {stdout:?}"))
                .to_owned()
        })
        .collect();
    outcomes.sort();
    let winners: Vec<&String> = outcomes.iter().filter(|o| o.starts_with("ok ")).collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    assert_eq!(
        outcomes.iter().filter(|o| *o == "err task_claimed").count(),
        CLAIMERS - 1,
        "{outcomes:?}"
    );
    let owner = board(dir.path(), 9).get(&id).await.unwrap().owner.unwrap();
    assert_eq!(format!("ok {owner}"), *winners[0]);
}
