//! Artifacts: tool results too large for an agent's history, kept whole on disk (SPEC §9).
//!
//! The model sees only a preview of such a result and the artifact's workspace-relative path,
//! which `read_file` can open (tools may read `.troupe/`, never write it). Each artifact is
//! `.troupe/artifacts/<agent>/<id>.txt`: the name comes from the id generator — never from
//! anything the model wrote — and the file is created with [`durable::create_new`] (or, written
//! piece by piece, placed by [`durable::StagedFile`]), so it appears whole or not at all and an
//! existing artifact is never overwritten.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use troupe_wire::AgentName;

use super::durable;
use super::IoError;
use crate::ids::IdGenerator;
use crate::layout::Layout;

/// How many fresh ids are tried when a name is taken (only a reused deterministic generator,
/// e.g. in tests, can collide; a UUID v7 never does).
const NAME_ATTEMPTS: usize = 8;

/// Where one agent's artifacts are written.
#[derive(Clone)]
pub struct ArtifactStore {
    /// `.troupe/`: checked to be a real folder before anything is created under it.
    state_dir: PathBuf,
    /// `.troupe/artifacts/<agent>`: the folder of this agent's artifacts.
    dir: PathBuf,
    /// The same folder relative to the workspace, with `/` separators, as the model sees it.
    relative_dir: String,
    /// Names the artifacts (injected, so tests are deterministic).
    ids: Arc<dyn IdGenerator>,
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
        Self {
            state_dir: layout.state_dir(),
            dir: layout.artifacts_dir(agent),
            relative_dir: format!("{}/artifacts/{}", Layout::STATE_DIR, agent.as_str()),
            ids,
        }
    }

    /// The folder the artifacts go to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `content` durably to a new artifact and returns where it is.
    pub fn write(&self, content: &str) -> Result<ArtifactRef, IoError> {
        self.ensure_dirs()?;
        let bytes = content.len();
        self.place(bytes, |dest| durable::create_new(dest, content.as_bytes()))
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

    /// Runs `create` on fresh names until one is free, and names the artifact it created.
    fn place(
        &self,
        bytes: usize,
        mut create: impl FnMut(&Path) -> Result<(), IoError>,
    ) -> Result<ArtifactRef, IoError> {
        let mut last_error = None;
        for _ in 0..NAME_ATTEMPTS {
            let name = format!("{}.txt", self.ids.next_uuid());
            match create(&self.dir.join(&name)) {
                Ok(()) => {
                    return Ok(ArtifactRef {
                        relative_path: format!("{}/{name}", self.relative_dir),
                        bytes,
                    })
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

    /// Syncs the artifact and places it under a fresh name (blocking I/O).
    pub fn finish(mut self) -> Result<ArtifactRef, IoError> {
        let bytes = self.bytes;
        let store = self.store.clone();
        store.place(bytes, |dest| self.staged.place_new(dest))
    }
}
