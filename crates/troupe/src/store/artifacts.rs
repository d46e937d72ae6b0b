//! Artifacts: tool results too large for an agent's history, kept whole on disk (SPEC §9).
//!
//! The model sees only a preview of such a result and the artifact's workspace-relative path,
//! which `read_file` can open (tools may read `.troupe/`, never write it). Each artifact is
//! `.troupe/artifacts/<agent>/<id>.txt`: the name comes from the id generator — never from
//! anything the model wrote — and the file is created with [`durable::create_new`] (or, written
//! piece by piece, placed by [`durable::StagedFile`]), so it appears whole or not at all and an
//! existing artifact is never overwritten.
//!
//! **A shared team's artifacts.** A teammate may be taken over by a worker on another host,
//! with another workspace; its history names artifacts that are on the first host's disk. So
//! every artifact written is also handed to an [`ArtifactCopy`] — a shared team's database
//! (`store/postgres/artifacts.rs`), or nothing on files ([`FilesOnly`]) — with its first
//! [`SHARED_ARTIFACT_BYTES`], before the result naming it enters the history. Where the file
//! is missing, [`ArtifactStore::recover`] makes it from that copy (`read_file` does so for a
//! path under `.troupe/artifacts/`): the name is checked to be an artifact's
//! ([`ArtifactKey::parse`]), never a path the model chose, and the file is created like any
//! other artifact, in real folders only, never over an existing file. A copy cut at the bound
//! ends with a line saying so.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use troupe_wire::AgentName;

use super::read::{open_regular, Links};
use super::IoError;
use super::{durable, BackendError};
use crate::error::ErrorCode;
use crate::ids::IdGenerator;
use crate::layout::Layout;

/// The most bytes of one artifact a shared team's database keeps: its first 8 MiB. A tool
/// result becomes an artifact past 30,000 bytes and `read_file` shows 200,000 bytes at a time,
/// so 8 MiB holds all of nearly every artifact and the first forty reads of the rest, while a
/// command's 64 MiB log (the file's own bound) costs the database, and a takeover's fetch,
/// one eighth of it; one row's value stays far below what a statement moves in a few seconds.
pub const SHARED_ARTIFACT_BYTES: usize = 8 << 20;

/// One artifact by name: the agent whose folder holds it and its file's name there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactKey {
    agent: AgentName,
    name: String,
}

impl ArtifactKey {
    /// The artifact `name` of `agent`, if both are what the store makes: an agent's name, and
    /// a lowercase hyphenated UUID with `.txt` (so no separator, `..` or other path can pass).
    pub fn parse(agent: &str, name: &str) -> Option<Self> {
        let agent = AgentName::parse(agent).ok()?;
        let id = name.strip_suffix(".txt")?;
        let uuid = uuid::Uuid::try_parse(id).ok()?;
        (uuid.hyphenated().to_string() == id).then(|| Self {
            agent,
            name: name.to_owned(),
        })
    }

    pub fn agent(&self) -> &AgentName {
        &self.agent
    }

    /// The file's name: `<uuid>.txt`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `.troupe/artifacts/<agent>/<id>.txt`, as the model sees it.
    pub fn relative_path(&self) -> String {
        format!(
            "{}/artifacts/{}/{}",
            Layout::STATE_DIR,
            self.agent.as_str(),
            self.name
        )
    }
}

/// An artifact's copy as the team keeps it: its first bytes (at most
/// [`SHARED_ARTIFACT_BYTES`]) of `bytes` in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedArtifact {
    pub head: Vec<u8>,
    pub bytes: u64,
}

impl SharedArtifact {
    /// Whether the copy holds less than the artifact.
    pub fn is_cut(&self) -> bool {
        (self.head.len() as u64) < self.bytes
    }
}

/// Where the artifacts of a team are copied, so that a process in another workspace can read
/// those its agents' histories name. A copy that fails is the copy's to report; the artifact's
/// file is written.
#[async_trait::async_trait]
pub trait ArtifactCopy: Send + Sync {
    /// Whether [`copy`](Self::copy) keeps anything (if not, a streamed artifact is not read
    /// back to hand it over).
    fn keeps(&self) -> bool;

    /// Takes a copy of the artifact `key`: `head`, its first bytes (at most
    /// [`SHARED_ARTIFACT_BYTES`]), of `bytes` in all.
    async fn copy(&self, key: &ArtifactKey, head: &[u8], bytes: u64);

    /// The copy of the artifact `key`, if one was taken.
    async fn fetch(&self, key: &ArtifactKey) -> Result<Option<SharedArtifact>, BackendError>;
}

/// The file store's: artifacts are only in the workspace.
#[derive(Debug, Clone, Copy, Default)]
pub struct FilesOnly;

#[async_trait::async_trait]
impl ArtifactCopy for FilesOnly {
    fn keeps(&self) -> bool {
        false
    }

    async fn copy(&self, _key: &ArtifactKey, _head: &[u8], _bytes: u64) {}

    async fn fetch(&self, _key: &ArtifactKey) -> Result<Option<SharedArtifact>, BackendError> {
        Ok(None)
    }
}

/// The first bytes of `content` a shared copy keeps: all of it up to [`SHARED_ARTIFACT_BYTES`],
/// else that many, moved back off a UTF-8 character the cut would split.
pub fn shared_head(content: &[u8]) -> &[u8] {
    if content.len() <= SHARED_ARTIFACT_BYTES {
        return content;
    }
    let mut end = SHARED_ARTIFACT_BYTES;
    // At most three continuation bytes precede a character's end.
    for _ in 0..3 {
        if end > 0 && content[end] & 0xC0 == 0x80 {
            end -= 1;
        }
    }
    &content[..end]
}

/// What [`ArtifactStore::recover`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The artifact's bytes the file holds (the copy's).
    pub kept: u64,
    /// The artifact's size where it was written.
    pub bytes: u64,
}

impl Recovered {
    pub fn is_cut(&self) -> bool {
        self.kept < self.bytes
    }
}

/// Why an artifact could not be made from the team's copy.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("fetch the artifact from the team's store: {0}")]
    Backend(#[from] BackendError),
}

impl ErrorCode for RecoverError {
    fn code(&self) -> &'static str {
        match self {
            Self::Io(e) => e.code(),
            Self::Backend(e) => e.code(),
        }
    }
}

/// How many fresh ids are tried when a name is taken (only a reused deterministic generator,
/// e.g. in tests, can collide; a UUID v7 never does).
const NAME_ATTEMPTS: usize = 8;

/// Where one agent's artifacts are written.
#[derive(Clone)]
pub struct ArtifactStore {
    /// `.troupe/`: checked to be a real folder before anything is created under it.
    state_dir: PathBuf,
    /// `.troupe/artifacts`: every agent's folder is in it.
    root: PathBuf,
    /// Whose artifacts this store writes.
    agent: AgentName,
    /// `.troupe/artifacts/<agent>`: the folder of this agent's artifacts.
    dir: PathBuf,
    /// The same folder relative to the workspace, with `/` separators, as the model sees it.
    relative_dir: String,
    /// Names the artifacts (injected, so tests are deterministic).
    ids: Arc<dyn IdGenerator>,
    /// Where every artifact is copied too (a shared team's database), and fetched from.
    copy: Arc<dyn ArtifactCopy>,
}

impl std::fmt::Debug for ArtifactStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactStore")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// A written artifact, as the history refers to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRef {
    /// The path relative to the workspace root (`.troupe/artifacts/<agent>/<id>.txt`), which
    /// `read_file` accepts.
    pub relative_path: String,
    /// The size of the content kept, in bytes.
    pub bytes: usize,
}

impl ArtifactStore {
    pub fn new(layout: &Layout, agent: &AgentName, ids: Arc<dyn IdGenerator>) -> Self {
        let dir = layout.artifacts_dir(agent);
        Self {
            state_dir: layout.state_dir(),
            root: dir.parent().map_or_else(|| dir.clone(), Path::to_path_buf),
            agent: agent.clone(),
            dir,
            relative_dir: format!("{}/artifacts/{}", Layout::STATE_DIR, agent.as_str()),
            ids,
            copy: Arc::new(FilesOnly),
        }
    }

    /// This store, copying every artifact to `copy` too and recovering missing ones from it.
    pub fn with_copy(mut self, copy: Arc<dyn ArtifactCopy>) -> Self {
        self.copy = copy;
        self
    }

    /// The folder the artifacts go to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `content` durably to a new artifact (off the async threads) and returns where it
    /// is, once the copy has it too.
    pub async fn write(&self, content: &str) -> Result<ArtifactRef, IoError> {
        let bytes = content.len();
        let (artifact, key) = crate::sync::blocking(|| {
            self.ensure_dirs()?;
            self.place(bytes, |dest| durable::create_new(dest, content.as_bytes()))
        })?;
        if self.copy.keeps() {
            self.copy
                .copy(&key, shared_head(content.as_bytes()), bytes as u64)
                .await;
        }
        Ok(artifact)
    }

    /// Starts an artifact written piece by piece ([`ArtifactDraft`]): nothing appears under
    /// the artifacts folder's names until [`ArtifactDraft::finish`].
    pub fn draft(&self) -> Result<ArtifactDraft, IoError> {
        self.ensure_dirs()?;
        // The temp file's name only; the artifact's own name is chosen when it is placed.
        let staged = durable::StagedFile::create(&self.dir.join("draft.txt"))?;
        Ok(ArtifactDraft {
            store: self.clone(),
            staged,
            bytes: 0,
        })
    }

    /// Makes the missing artifact `key` (of any agent of the team) in this workspace from the
    /// team's copy: `Ok(None)` when there is no copy. The file is created as an artifact is —
    /// in real folders, never over an existing file (one that appeared meanwhile is left as
    /// it is) — holding the copy, and, when the copy was cut at [`SHARED_ARTIFACT_BYTES`], a
    /// last line saying so. The file is made off the async threads.
    pub async fn recover(&self, key: &ArtifactKey) -> Result<Option<Recovered>, RecoverError> {
        let Some(shared) = self.copy.fetch(key).await? else {
            return Ok(None);
        };
        crate::sync::blocking(|| self.make_recovered(key, shared)).map(Some)
    }

    /// Creates the artifact `key` from its copy `shared` (blocking I/O).
    fn make_recovered(
        &self,
        key: &ArtifactKey,
        shared: SharedArtifact,
    ) -> Result<Recovered, RecoverError> {
        let dir = self.root.join(key.agent().as_str());
        durable::ensure_real_dir(&self.state_dir)?;
        durable::ensure_real_dir(&self.root)?;
        durable::ensure_real_dir(&dir)?;
        let recovered = Recovered {
            kept: shared.head.len() as u64,
            bytes: shared.bytes,
        };
        let mut content = shared.head;
        if recovered.is_cut() {
            content.extend_from_slice(
                format!(
                    "\n[troupe: this copy of the artifact came from the team's store, which keeps \
                     the first {SHARED_ARTIFACT_BYTES} bytes of each: {} of its {} bytes]\n",
                    recovered.kept, recovered.bytes
                )
                .as_bytes(),
            );
        }
        match durable::create_new(&dir.join(key.name()), &content) {
            Ok(()) => Ok(recovered),
            Err(e) if e.source.kind() == std::io::ErrorKind::AlreadyExists => Ok(recovered),
            Err(e) => Err(e.into()),
        }
    }

    /// The placed artifact `key`'s first bytes, read back for the copy (blocking I/O); `None`
    /// when the copy keeps nothing.
    fn placed_head(&self, key: &ArtifactKey) -> Option<Result<Vec<u8>, String>> {
        if !self.copy.keeps() {
            return None;
        }
        let path = self.dir.join(key.name());
        // One byte past the bound: the head's cut must see the character it could split.
        Some(match open_regular(&path, Links::Refuse) {
            Ok(Some(file)) => {
                let mut head = Vec::new();
                file.take(SHARED_ARTIFACT_BYTES as u64 + 1)
                    .read_to_end(&mut head)
                    .map(|_| head)
                    .map_err(|e| e.to_string())
            }
            Ok(None) => Err("it is gone".to_owned()),
            Err(e) => Err(e.to_string()),
        })
    }

    /// Hands the placed artifact `key` of `bytes` to the copy: its first bytes, read back
    /// ([`placed_head`](Self::placed_head)).
    async fn share_placed(
        &self,
        key: &ArtifactKey,
        head: Option<Result<Vec<u8>, String>>,
        bytes: usize,
    ) {
        match head {
            None => {}
            Some(Ok(head)) => self.copy.copy(key, shared_head(&head), bytes as u64).await,
            Some(Err(e)) => tracing::warn!(
                "the artifact {} was not copied to the team's store: cannot read it back: {e}",
                key.relative_path()
            ),
        }
    }

    /// Runs `create` on fresh names until one is free, and names the artifact it created.
    fn place(
        &self,
        bytes: usize,
        mut create: impl FnMut(&Path) -> Result<(), IoError>,
    ) -> Result<(ArtifactRef, ArtifactKey), IoError> {
        let mut last_error = None;
        for _ in 0..NAME_ATTEMPTS {
            let name = format!("{}.txt", self.ids.next_uuid());
            match create(&self.dir.join(&name)) {
                Ok(()) => {
                    return Ok((
                        ArtifactRef {
                            relative_path: format!("{}/{name}", self.relative_dir),
                            bytes,
                        },
                        ArtifactKey {
                            agent: self.agent.clone(),
                            name,
                        },
                    ))
                }
                Err(err) if err.source.kind() == std::io::ErrorKind::AlreadyExists => {
                    last_error = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            IoError::new(
                "create",
                &self.dir,
                std::io::Error::other("no free artifact name"),
            )
        }))
    }

    /// `.troupe/`, `.troupe/artifacts/` and the agent's folder, each a real folder (a symlink
    /// planted at any of them is refused rather than followed out of the workspace).
    fn ensure_dirs(&self) -> Result<(), IoError> {
        durable::ensure_real_dir(&self.state_dir)?;
        if let Some(root) = self.dir.parent() {
            durable::ensure_real_dir(root)?;
        }
        durable::ensure_real_dir(&self.dir)
    }
}

/// An artifact being written piece by piece (a command's output as it is read): a temp file in
/// the agent's artifacts folder, placed under a fresh name by [`finish`](Self::finish), or
/// removed if dropped before.
pub struct ArtifactDraft {
    /// Names and places the finished artifact.
    store: ArtifactStore,
    /// The bytes written so far, not yet under an artifact's name.
    staged: durable::StagedFile,
    /// Bytes written so far.
    bytes: usize,
}

impl ArtifactDraft {
    /// Appends `bytes`.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), IoError> {
        self.staged.write_all(bytes)?;
        self.bytes += bytes.len();
        Ok(())
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Syncs the artifact and places it under a fresh name (off the async threads), and hands
    /// it to the copy.
    pub async fn finish(mut self) -> Result<ArtifactRef, IoError> {
        let bytes = self.bytes;
        let store = self.store.clone();
        let (artifact, key, head) = crate::sync::blocking(|| -> Result<_, IoError> {
            let (artifact, key) = store.place(bytes, |dest| self.staged.place_new(dest))?;
            let head = store.placed_head(&key);
            Ok((artifact, key, head))
        })?;
        store.share_placed(&key, head, bytes).await;
        Ok(artifact)
    }
}

/// Removes the staged artifact files (`.<name>.tmp-<pid>-<n>`, see [`durable::StagedFile`]) that
/// a process which died while writing left under `.troupe/artifacts/<agent>/`: those whose
/// writer is no longer running (a live writer's, this process's included, stay). Called at a
/// run's start; best effort (a folder that cannot be read is skipped). Returns how many went.
pub fn remove_stale_temps(layout: &Layout) -> usize {
    let root = layout.state_dir().join("artifacts");
    let Ok(agents) = std::fs::read_dir(&root) else {
        return 0;
    };
    let mut removed = 0;
    for agent in agents.flatten() {
        // Never through a link: only troupe's own folders are swept.
        if !agent.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(files) = std::fs::read_dir(agent.path()) else {
            continue;
        };
        for file in files.flatten() {
            let name = file.file_name();
            let Some(pid) = name.to_str().and_then(writer_of_temp) else {
                continue;
            };
            let alive =
                pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists();
            if !alive && file.file_type().is_ok_and(|t| t.is_file()) {
                match std::fs::remove_file(file.path()) {
                    Ok(()) => removed += 1,
                    Err(e) => tracing::warn!(
                        path = %file.path().display(),
                        error = %e,
                        "cannot remove a stale artifact temp file"
                    ),
                }
            }
        }
    }
    removed
}

/// The writer's pid in a temp file's name (`.<name>.tmp-<pid>-<n>`), when it is one.
fn writer_of_temp(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(durable::TEMP_PREFIX)?;
    let (_, tail) = rest.rsplit_once(".tmp-")?;
    let (pid, n) = tail.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}
