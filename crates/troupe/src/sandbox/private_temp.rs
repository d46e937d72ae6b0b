//! A run's private temp folder: confined commands write their temporary files here, not in the
//! machine's temp folder, so "writes only the workspace and its own temp" holds wherever the
//! workspace lives (a workspace, or a neighbour's project, inside `/tmp` is not writable
//! through the temp folder's grant). Made `0700` in the host's temp folder when the sandbox is
//! made; every clone of the sandbox (background jobs, agent definitions' modes) shares it; the
//! last one dropped removes it with what the commands left there.
//!
//! Inside it, `shm/` is the commands' `/dev/shm` (mounted over the host's, which they cannot
//! write): POSIX shared memory and semaphores work, private to the run.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::SandboxError;

/// The name of the private `/dev/shm` inside the folder.
const SHM: &str = "shm";

/// The folder, removed when the last holder drops it.
#[derive(Debug)]
pub struct PrivateTemp {
    path: PathBuf,
}

impl PrivateTemp {
    /// A new folder `troupe-<random>` in `host_temp`, only the user's.
    pub fn create(host_temp: &Path) -> Result<Self, SandboxError> {
        let path = host_temp.join(format!("troupe-{}", uuid::Uuid::new_v4().simple()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| {
                SandboxError::Prepare(format!(
                    "cannot make the private temp folder {}: {e}",
                    path.display()
                ))
            })?;
        let shm = path.join(SHM);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&shm)
            .map_err(|e| {
                SandboxError::Prepare(format!(
                    "cannot make the private /dev/shm {}: {e}",
                    shm.display()
                ))
            })?;
        Ok(Self { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateTemp {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the private temp folder");
            }
        }
    }
}
