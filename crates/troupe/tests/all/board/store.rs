//! The file task board: durability across instances, corrupt files, claim races between
//! threads, and the inspection view.

use std::fs;
use std::path::Path;
use std::sync::{Arc, Barrier};

use pretty_assertions::assert_eq;
use troupe::clock::{Clock, ManualClock, SystemClock};
use troupe::error::ErrorCode;
use troupe::ids::{RandomIds, SequentialIds};
use troupe::inspect::TaskSummary;
use troupe::layout::Layout;
use troupe::store::tasks::{
    FileTaskBoard, MemoryTaskBoard, NewTask, Task, TaskBoard, TaskError, TaskId, TaskStatus,
};
use troupe::wire::AgentName;

pub fn board(workspace: &Path, prefix: u16) -> FileTaskBoard {
    FileTaskBoard::new(
        &Layout::new(workspace),
        Arc::new(ManualClock::at_spec_epoch()),
        Arc::new(SequentialIds::with_prefix(prefix)),
    )
}

pub fn new_task(subject: &str, blocked_by: Vec<TaskId>) -> NewTask {
    NewTask {
        subject: subject.into(),
        description: None,
        blocked_by,
        ..Default::default()
    }
}

fn agent(name: &str) -> AgentName {
    AgentName::parse(name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_board_instance_reads_what_an_old_one_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let old = board(dir.path(), 1);
    let a = old.create(new_task("a", vec![])).await.unwrap();
    let b = old
        .create(NewTask {
            subject: "b".into(),
            description: Some("details".into()),
            blocked_by: vec![a.id],
            ..Default::default()
        })
        .await
        .unwrap();
    let claim = old
        .claim(&a.id, &agent("alice"))
        .await
        .unwrap()
        .lease
        .unwrap();
    drop(old);

    let new = board(dir.path(), 2);
    let listed = new.list().await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].status, TaskStatus::InProgress);
    assert_eq!(listed[0].owner, Some(agent("alice")));
    assert_eq!(listed[1], b);
    assert_eq!(new.get(&b.id).await.unwrap(), b);
    // The rules hold across instances: b is still blocked until alice completes a.
    assert_eq!(
        new.claim(&b.id, &agent("bob")).await.unwrap_err().code(),
        "task_blocked"
    );
    new.complete(&a.id, &agent("alice"), &claim.token)
        .await
        .unwrap();
    assert_eq!(
        new.claim(&b.id, &agent("bob")).await.unwrap().owner,
        Some(agent("bob"))
    );
    // One file per task, plus the lock; no temp files left.
    let mut names: Vec<String> = fs::read_dir(dir.path().join(".troupe/tasks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            ".tasks.lock".to_owned(),
            format!("{}.json", a.id),
            format!("{}.json", b.id)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_is_the_task_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let task = board(dir.path(), 0)
        .create(new_task("a", vec![]))
        .await
        .unwrap();
    let bytes = fs::read(dir.path().join(format!(".troupe/tasks/{}.json", task.id))).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        value,
        serde_json::json!({
            "id": task.id.to_string(), "subject": "a", "description": "", "blocked_by": [],
            "status": "pending", "owner": null,
            "created_at_utc": "2026-07-30T08:00:00.000Z",
            "updated_at_utc": "2026-07-30T08:00:00.000Z"
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_already_taken_is_refused_without_overwriting() {
    let dir = tempfile::tempdir().unwrap();
    let first = board(dir.path(), 0)
        .create(new_task("first", vec![]))
        .await
        .unwrap();
    // A second generator with the same sequence yields the same id.
    let err = board(dir.path(), 0)
        .create(new_task("second", vec![]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, TaskError::IdTaken(id) if id == first.id),
        "{err}"
    );
    assert_eq!(err.code(), "storage_error");
    assert_eq!(board(dir.path(), 0).get(&first.id).await.unwrap(), first);
}

/// Writes `bytes` as the file of task `id`.
fn plant(workspace: &Path, name: &str, bytes: &[u8]) -> String {
    let dir = workspace.join(".troupe/tasks");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_task_files_are_clear_errors() {
    let good = |id: &str| {
        serde_json::json!({
            "id": id, "subject": "s", "description": "", "blocked_by": [],
            "status": "pending", "owner": null,
            "created_at_utc": "2026-07-30T08:00:00.000Z",
            "updated_at_utc": "2026-07-30T08:00:00.000Z"
        })
    };
    let id = "00000000-0000-4000-8000-0000000000aa";
    let other = "00000000-0000-4000-8000-0000000000bb";
    let with = |key: &str, value: serde_json::Value| {
        let mut v = good(id);
        v[key] = value;
        v.to_string().into_bytes()
    };
    let mut extra = good(id);
    extra["priority"] = 1.into();
    let mut missing = good(id);
    missing.as_object_mut().unwrap().remove("owner");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("not json", b"{not json".to_vec(), "key must be a string"),
        ("truncated", b"".to_vec(), "EOF while parsing"),
        (
            "unknown key",
            extra.to_string().into_bytes(),
            "unknown field `priority`",
        ),
        (
            "missing key",
            missing.to_string().into_bytes(),
            "missing field `owner`",
        ),
        (
            "bad status",
            with("status", "done".into()),
            "unknown variant `done`",
        ),
        (
            "bad owner",
            with("owner", "Alice".into()),
            "invalid agent name",
        ),
        (
            "owner while pending",
            with("owner", "alice".into()),
            "a pending task has an owner (alice)",
        ),
        (
            "no owner in progress",
            with("status", "in_progress".into()),
            "a task in_progress has no owner",
        ),
        (
            "blank subject",
            with("subject", " ".into()),
            "the subject is blank",
        ),
        (
            "self blocked",
            with("blocked_by", serde_json::json!([id])),
            "the task is blocked by itself",
        ),
        (
            "unknown blocker",
            with("blocked_by", serde_json::json!([other])),
            "which does not exist",
        ),
        (
            "bad time",
            with("updated_at_utc", "2026-07-30T08:00:00Z".into()),
            "2026-07-30T08:00:00Z",
        ),
        (
            "time order",
            with("updated_at_utc", "2026-07-29T08:00:00.000Z".into()),
            "updated_at_utc is before created_at_utc",
        ),
        (
            "other id",
            good(other).to_string().into_bytes(),
            "it holds task 00000000-0000-4000-8000-0000000000bb",
        ),
    ];
    for (what, bytes, reason) in cases {
        let dir = tempfile::tempdir().unwrap();
        let ok = board(dir.path(), 0)
            .create(new_task("fine", vec![]))
            .await
            .unwrap();
        let path = plant(dir.path(), &format!("{id}.json"), &bytes);
        let b = board(dir.path(), 1);
        let err = b.list().await.unwrap_err();
        assert_eq!(err.code(), "task_store_corrupt", "{what}: {err}");
        let text = err.to_string();
        assert!(
            text.starts_with("the task board is corrupt: "),
            "{what}: {text}"
        );
        assert!(text.contains(reason), "{what}: {text}");
        if !matches!(what, "unknown blocker") {
            assert!(text.contains(&path), "{what}: {text}");
        }
        // Changes refuse too, and leave the good task as it was.
        let claim = b.claim(&ok.id, &agent("alice")).await.unwrap_err();
        assert_eq!(claim.code(), "task_store_corrupt", "{what}");
        assert_eq!(b.get(&ok.id).await.unwrap(), ok);
        let inspected =
            troupe::bootstrap::inspector_on_files(Layout::new(dir.path()), Arc::new(SystemClock))
                .tasks()
                .await;
        assert_eq!(inspected.unwrap_err().code(), "task_store_corrupt");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_named_for_no_task_and_a_cycle_on_disk_are_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = plant(dir.path(), "notes.json", b"{}");
    let err = board(dir.path(), 0).list().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("the task board is corrupt: {path}: the file name is not a task id")
    );

    // Other files and dot files are not the board's.
    let dir = tempfile::tempdir().unwrap();
    plant(dir.path(), "README.txt", b"hello");
    plant(dir.path(), ".abc.json.tmp-1-2", b"partial");
    assert_eq!(board(dir.path(), 0).list().await.unwrap(), vec![]);

    // A cycle can only come from editing files by hand; loading refuses it.
    let dir = tempfile::tempdir().unwrap();
    let b = board(dir.path(), 0);
    let x = b.create(new_task("x", vec![])).await.unwrap();
    let y = b.create(new_task("y", vec![x.id])).await.unwrap();
    let x_cycled = Task {
        blocked_by: vec![y.id],
        ..x.clone()
    };
    plant(
        dir.path(),
        &format!("{}.json", x.id),
        &serde_json::to_vec(&x_cycled).unwrap(),
    );
    let err = b.claim(&x.id, &agent("alice")).await.unwrap_err();
    assert_eq!(err.code(), "task_store_corrupt");
    assert!(
        err.to_string().ends_with(&format!(
            "dependency cycle {} -> {} -> {}",
            x.id, y.id, x.id
        )),
        "{err}"
    );
}

/// `claimers` threads, each with its own board instance (another open lock file, as another
/// process would have), race to claim one task after a barrier.
pub fn race_threads(boards: Vec<Arc<dyn TaskBoard>>, id: TaskId) -> Vec<(AgentName, bool)> {
    let barrier = Arc::new(Barrier::new(boards.len()));
    let handles: Vec<_> = boards
        .into_iter()
        .enumerate()
        .map(|(i, board)| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let me = agent(&format!("claimer-{i}"));
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                barrier.wait();
                match runtime.block_on(board.claim(&id, &me)) {
                    Ok(task) => {
                        assert_eq!(task.owner.as_ref(), Some(&me));
                        (me, true)
                    }
                    Err(e) => {
                        assert_eq!(e.code(), "task_claimed", "{e}");
                        (me, false)
                    }
                }
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_threads_give_one_owner() {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let id = board(dir.path(), 0)
            .create(new_task("contested", vec![]))
            .await
            .unwrap()
            .id;
        let boards: Vec<Arc<dyn TaskBoard>> = (0..8)
            .map(|i| Arc::new(board(dir.path(), 10 + i)) as Arc<dyn TaskBoard>)
            .collect();
        let results = race_threads(boards, id);
        let winners: Vec<&AgentName> = results.iter().filter(|r| r.1).map(|r| &r.0).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        assert_eq!(
            board(dir.path(), 99).get(&id).await.unwrap().owner.as_ref(),
            Some(winners[0])
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_threads_on_one_shared_board_give_one_owner() {
    let dir = tempfile::tempdir().unwrap();
    let shared: Arc<dyn TaskBoard> = Arc::new(board(dir.path(), 0));
    let memory: Arc<dyn TaskBoard> = Arc::new(MemoryTaskBoard::new(
        Arc::new(ManualClock::at_spec_epoch()),
        Arc::new(RandomIds),
    ));
    for board in [shared, memory] {
        let id = board
            .create(new_task("contested", vec![]))
            .await
            .unwrap()
            .id;
        let results = race_threads(vec![board.clone(); 8], id);
        assert_eq!(results.iter().filter(|r| r.1).count(), 1, "{results:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_board_follows_the_same_rules() {
    let clock = ManualClock::at_spec_epoch();
    let board = MemoryTaskBoard::new(Arc::new(clock.clone()), Arc::new(SequentialIds::new()));
    let a = board.create(new_task("a", vec![])).await.unwrap();
    let b = board.create(new_task("b", vec![a.id])).await.unwrap();
    assert_eq!(
        board.claim(&b.id, &agent("bob")).await.unwrap_err().code(),
        "task_blocked"
    );
    let unknown = TaskId::parse("00000000-0000-4000-8000-0000000000ff").unwrap();
    assert_eq!(
        board
            .create(new_task("c", vec![unknown]))
            .await
            .unwrap_err()
            .code(),
        "task_not_found"
    );
    let claim = board
        .claim(&a.id, &agent("alice"))
        .await
        .unwrap()
        .lease
        .unwrap();
    clock.advance_millis(10);
    let done = board
        .complete(&a.id, &agent("alice"), &claim.token)
        .await
        .unwrap();
    assert_eq!(done.updated_at_utc, clock.now());
    assert_eq!(
        board.claim(&b.id, &agent("bob")).await.unwrap().status,
        TaskStatus::InProgress
    );
    assert_eq!(board.list().await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspection_shows_tasks_and_a_summary_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let inspector =
        troupe::bootstrap::inspector_on_files(Layout::new(dir.path()), Arc::new(SystemClock));
    assert_eq!(inspector.tasks().await.unwrap(), vec![]);
    assert_eq!(
        inspector.status().await.unwrap().tasks,
        TaskSummary::default()
    );
    assert!(
        !dir.path().join(".troupe").exists(),
        "inspection created state"
    );

    let b = board(dir.path(), 0);
    let a = b.create(new_task("a", vec![])).await.unwrap();
    let c = b.create(new_task("c", vec![a.id])).await.unwrap();
    b.create(new_task("d", vec![])).await.unwrap();
    b.claim(&a.id, &agent("alice")).await.unwrap();
    let views = inspector.tasks().await.unwrap();
    assert_eq!(views.len(), 3);
    assert_eq!(views[1].task, c);
    assert_eq!(views[1].open_blockers, vec![a.id]);
    assert_eq!(
        inspector.status().await.unwrap().tasks,
        TaskSummary {
            total: 3,
            pending: 2,
            in_progress: 1,
            completed: 0
        }
    );
}
