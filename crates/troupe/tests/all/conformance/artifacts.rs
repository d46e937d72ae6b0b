//! A shared team's artifacts (PostgreSQL only): an artifact written in one workspace is copied
//! to the team's database, and `read_file` in another workspace of the team — a teammate taken
//! over by a worker elsewhere — makes it from there; the copy is bounded; a name that is not an
//! artifact's, or a folder that is not a real one, is never fetched into.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use troupe::ids::SequentialIds;
use troupe::layout::Layout;
use troupe::secrets::Redactor;
use troupe::store::artifact_stream::{ArtifactStream, StreamEnd};
use troupe::store::artifacts::{ArtifactKey, ArtifactStore, SHARED_ARTIFACT_BYTES};
use troupe::store::postgres::artifacts::PgArtifacts;
use troupe::store::postgres::testing::TestDb;
use troupe::store::postgres::PgStore;
use troupe::tools::read_file::ReadFileTool;
use troupe::tools::{ToolContext, ToolError, ToolHandler};
use troupe::wire::AgentName;

const MADE_HERE: &str =
    "[this workspace had no copy of this artifact; it was made from the team's store]";

fn alice() -> AgentName {
    AgentName::parse("alice").unwrap()
}

/// `agent`'s artifacts in `workspace`, copied to (and recovered from) `pg`.
fn artifacts(workspace: &Path, agent: &AgentName, pg: &PgStore, prefix: u16) -> ArtifactStore {
    ArtifactStore::new(
        &Layout::new(workspace),
        agent,
        Arc::new(SequentialIds::with_prefix(prefix)),
    )
    .with_copy(Arc::new(PgArtifacts::new(pg.clone())))
}

/// `read_file` of `path` as alice in `workspace`, with `store` as her artifacts.
async fn read_as_alice(
    workspace: &Path,
    store: &ArtifactStore,
    path: &str,
) -> Result<String, ToolError> {
    let ctx = ToolContext::new(alice(), workspace).with_artifacts(Some(store.clone()));
    ReadFileTool.call(&ctx, json!({ "path": path })).await
}

/// Every file under `dir`, as paths relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                found.push(
                    entry
                        .path()
                        .strip_prefix(dir)
                        .unwrap()
                        .display()
                        .to_string(),
                );
            }
        }
    }
    found.sort();
    found
}

/// Two workspaces of one team (two clones on two hosts), each with its own connection.
struct Team {
    db: TestDb,
    a: tempfile::TempDir,
    b: tempfile::TempDir,
}

impl Team {
    fn new() -> Option<Self> {
        Some(Self {
            db: TestDb::create()?,
            a: tempfile::tempdir().unwrap(),
            b: tempfile::tempdir().unwrap(),
        })
    }

    fn in_a(&self) -> ArtifactStore {
        artifacts(self.a.path(), &alice(), &self.db.store("team-a"), 1)
    }

    fn in_b(&self) -> ArtifactStore {
        artifacts(self.b.path(), &alice(), &self.db.store("team-a"), 2)
    }
}

#[tokio::test]
async fn an_artifact_written_in_one_workspace_is_read_in_another_of_the_team() {
    let Some(team) = Team::new() else { return };
    let content = "line of a long build log\n".repeat(2_000);
    let written = team.in_a().write(&content).await.unwrap();
    assert!(written
        .relative_path
        .starts_with(".troupe/artifacts/alice/"));
    let in_b = team.b.path().join(&written.relative_path);
    assert!(!in_b.exists());

    // The first read in B makes the file from the team's copy and says so.
    let store_b = team.in_b();
    let text = read_as_alice(team.b.path(), &store_b, &written.relative_path)
        .await
        .unwrap();
    assert_eq!(text, format!("{content}{MADE_HERE}"));
    assert_eq!(std::fs::read_to_string(&in_b).unwrap(), content);
    // From then on it is this workspace's file: read as any other.
    let again = read_as_alice(team.b.path(), &store_b, &written.relative_path)
        .await
        .unwrap();
    assert_eq!(again, content);

    // A streamed artifact (a command's output) is copied too, with the same path form.
    let mut stream = ArtifactStream::new(team.in_a(), 10, Redactor::default());
    stream.push(b"0123456789 streamed output\n");
    let StreamEnd::Kept { artifact, .. } = stream.finish().await else {
        panic!("no artifact");
    };
    let text = read_as_alice(team.b.path(), &store_b, &artifact.relative_path)
        .await
        .unwrap();
    assert_eq!(text, format!("0123456789 streamed output\n{MADE_HERE}"));

    // Another team of the same database sees nothing of it.
    let other = tempfile::tempdir().unwrap();
    let other_store = artifacts(other.path(), &alice(), &team.db.store("team-b"), 3);
    let err = read_as_alice(other.path(), &other_store, &written.relative_path)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::NotFound(_)), "{err:?}");
    assert!(!other.path().join(".troupe").exists());
}

/// An artifact past the bound is kept in the database up to it (never splitting a
/// character), and the file made from the copy, and the read that made it, say so.
#[tokio::test]
async fn the_teams_copy_of_an_artifact_is_bounded_and_a_cut_copy_says_so() {
    let Some(team) = Team::new() else { return };
    // A two-byte character straddles the bound.
    let mut content = "a".repeat(SHARED_ARTIFACT_BYTES - 1);
    content.push('é');
    content.push_str(&"z".repeat(1_000));
    let written = team.in_a().write(&content).await.unwrap();
    let kept = team
        .db
        .query_text("SELECT length(content)::text || '/' || bytes::text FROM troupe_artifacts")
        .unwrap()
        .unwrap();
    assert_eq!(
        kept,
        format!("{}/{}", SHARED_ARTIFACT_BYTES - 1, content.len())
    );

    let store_b = team.in_b();
    let text = read_as_alice(team.b.path(), &store_b, &written.relative_path)
        .await
        .unwrap();
    let note = format!(
        "[this workspace had no copy of this artifact; it was made from the team's store, which \
         keeps the first {SHARED_ARTIFACT_BYTES} bytes of each: {} of its {} bytes]",
        SHARED_ARTIFACT_BYTES - 1,
        content.len()
    );
    assert!(text.ends_with(&note), "{}", &text[text.len() - 400..]);
    let made = std::fs::read_to_string(team.b.path().join(&written.relative_path)).unwrap();
    assert!(made.starts_with(&content[..SHARED_ARTIFACT_BYTES - 1]));
    assert_eq!(
        &made[SHARED_ARTIFACT_BYTES - 1..],
        format!(
            "\n[troupe: this copy of the artifact came from the team's store, which keeps the \
             first {SHARED_ARTIFACT_BYTES} bytes of each: {} of its {} bytes]\n",
            SHARED_ARTIFACT_BYTES - 1,
            content.len()
        )
    );
}

/// Only a path that resolves to `.troupe/artifacts/<agent>/<uuid>.txt` is fetched: rows with
/// other names planted in the database are never written anywhere, and folders that are not
/// real ones are refused rather than followed.
#[tokio::test]
async fn a_name_that_is_not_an_artifacts_is_never_fetched() {
    let Some(team) = Team::new() else { return };
    // Connecting sets the schema up.
    let store_b = team.in_b();
    let uuid = "00000000-0000-4000-8000-000100000000";
    for (agent, name) in [
        ("alice", "../../../escape.txt"),
        ("alice", "notes.txt"),
        ("alice", &uuid.to_uppercase()),
        ("..", &format!("{uuid}.txt")),
        ("alice", &format!("{uuid}.txt.sh")),
    ] {
        team.db
            .execute(&format!(
                "INSERT INTO troupe_artifacts (team, agent, name, bytes, content, host)
                 VALUES ('team-a', '{agent}', '{name}', 3, 'bad'::bytea, 'h')"
            ))
            .unwrap();
    }
    for path in [
        ".troupe/artifacts/alice/../../../escape.txt",
        ".troupe/artifacts/alice/notes.txt",
        &format!(".troupe/artifacts/alice/{}", uuid.to_uppercase()),
        &format!(".troupe/artifacts/../{uuid}.txt"),
        &format!(".troupe/artifacts/alice/{uuid}.txt.sh"),
        &format!("./.troupe/artifacts/alice/{uuid}.txt/x"),
    ] {
        let err = read_as_alice(team.b.path(), &store_b, path)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ToolError::NotFound(_) | ToolError::PermissionDenied(_)),
            "{path}: {err:?}"
        );
    }
    assert!(
        files_under(team.b.path()).is_empty(),
        "{:?}",
        files_under(team.b.path())
    );
    assert!(ArtifactKey::parse("alice", "../x.txt").is_none());
    assert!(ArtifactKey::parse("Alice!", &format!("{uuid}.txt")).is_none());
    assert!(ArtifactKey::parse("alice", &format!("{uuid}.txt")).is_some());

    // A real artifact whose folder in B is a symlink (to a folder of the workspace, or out of
    // it): refused, nothing written through it.
    let written = team.in_a().write("the real one\n").await.unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(team.b.path().join(".troupe/artifacts")).unwrap();
    std::fs::create_dir(team.b.path().join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(
        team.b.path().join("elsewhere"),
        team.b.path().join(".troupe/artifacts/alice"),
    )
    .unwrap();
    let err = read_as_alice(team.b.path(), &store_b, &written.relative_path)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::NotFound(_)), "{err:?}");
    let key =
        ArtifactKey::parse("alice", written.relative_path.rsplit('/').next().unwrap()).unwrap();
    let refused = store_b.recover(&key).await.unwrap_err();
    assert!(refused.to_string().contains("symbolic link"), "{refused}");
    std::fs::remove_file(team.b.path().join(".troupe/artifacts/alice")).unwrap();
    std::fs::remove_dir(team.b.path().join(".troupe/artifacts")).unwrap();
    std::os::unix::fs::symlink(outside.path(), team.b.path().join(".troupe/artifacts")).unwrap();
    let err = read_as_alice(team.b.path(), &store_b, &written.relative_path)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ToolError::NotFound(_) | ToolError::PermissionDenied(_)),
        "{err:?}"
    );
    assert!(store_b.recover(&key).await.is_err());
    assert!(files_under(outside.path()).is_empty());
    assert!(files_under(&team.b.path().join("elsewhere")).is_empty());
}

/// Without a shared store nothing is fetched: a missing artifact is missing.
#[tokio::test]
async fn on_files_a_missing_artifact_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let store = ArtifactStore::new(
        &Layout::new(dir.path()),
        &alice(),
        Arc::new(SequentialIds::new()),
    );
    let err = read_as_alice(
        dir.path(),
        &store,
        ".troupe/artifacts/alice/00000000-0000-4000-8000-000000000000.txt",
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ToolError::NotFound(_)), "{err:?}");
    assert!(!dir.path().join(".troupe").exists());
}
