//! Protected paths a confined command created.
//!
//! A protected path that exists is held by a read-only mount for the command's life: it can be
//! neither written, renamed nor replaced. One that does not exist yet (`troupe.toml` in a
//! workspace without settings, `.git` outside a repository) cannot be: a mount needs something
//! to mount on, and Landlock grants by folder, not by name. So the paths missing when a command
//! starts are noted ([`Absent`]), and whatever of them the command created is moved aside into
//! `.troupe/blocked/<stamp>/` when it ends — kept for the person to look at, out of the place
//! where git or troupe would act on it — and the command's result says so (and a warning on
//! troupe's stderr: a path the person made meanwhile, such as a `troupe.toml` saved from an
//! approval prompt, is moved the same way; nothing tells the two apart).

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::layout::Layout;
use crate::protected::ProtectedPath;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The protected paths a command found missing when it started, inside what it may write.
#[derive(Debug, Clone)]
pub struct Absent {
    missing: Vec<ProtectedPath>,
    /// The workspace the paths are shown relative to.
    root: PathBuf,
    /// `.troupe/blocked/` of the team: where created paths are moved.
    blocked: PathBuf,
}

impl Absent {
    pub(super) fn new(missing: Vec<ProtectedPath>, root: PathBuf, blocked: PathBuf) -> Self {
        Self {
            missing,
            root,
            blocked,
        }
    }

    /// Moves aside whatever of the missing paths exists now; one note per path for the
    /// command's result (empty when it created none).
    pub fn undo_created(&self) -> Vec<String> {
        let created: Vec<&ProtectedPath> = self
            .missing
            .iter()
            .filter(|p| std::fs::symlink_metadata(&p.path).is_ok())
            .collect();
        if created.is_empty() {
            return Vec::new();
        }
        let stamp = format!(
            "{}-{}-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or_default(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let folder = self.blocked.join(stamp);
        created
            .into_iter()
            .map(|protected| {
                let note = self.move_aside(protected, &folder);
                // The person hears of it too: what was moved may be theirs (a `troupe.toml`
                // saved from an approval prompt while the command ran); it is kept there.
                tracing::warn!("{note}");
                note
            })
            .collect()
    }

    fn move_aside(&self, protected: &ProtectedPath, folder: &Path) -> String {
        let shown = protected
            .path
            .strip_prefix(&self.root)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| protected.path.display().to_string());
        let name = shown.replace('/', "%2F");
        let target = folder.join(&name);
        let why = protected.protection.why();
        // Inside `.troupe/`: the user's alone, like the rest of it.
        let moved = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(Layout::DIR_MODE)
            .create(folder)
            .and_then(|()| std::fs::rename(&protected.path, &target));
        match moved {
            Ok(()) => format!(
                "sandbox: creating {shown} is denied ({why}); what the command created there \
                 was moved to {}",
                target.display()
            ),
            Err(move_error) => {
                let removed = match std::fs::symlink_metadata(&protected.path) {
                    Ok(m) if m.is_dir() => std::fs::remove_dir_all(&protected.path),
                    _ => std::fs::remove_file(&protected.path),
                };
                match removed {
                    Ok(()) => format!(
                        "sandbox: creating {shown} is denied ({why}); it could not be moved \
                         aside ({move_error}), so it was removed"
                    ),
                    Err(remove_error) => {
                        tracing::error!(
                            path = %protected.path.display(),
                            "a confined command created a protected path that could be neither \
                             moved ({move_error}) nor removed ({remove_error})"
                        );
                        format!(
                            "sandbox: creating {shown} is denied ({why}), but it could be \
                             neither moved aside ({move_error}) nor removed ({remove_error})"
                        )
                    }
                }
            }
        }
    }
}
