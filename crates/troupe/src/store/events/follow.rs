//! A wakeup whenever the event stream changes, from the kernel's file watch (inotify on Linux)
//! rather than a timer: `troupe log -f` and the web view's live stream wait on it, then read the
//! new lines with a [`super::read::EventCursor`].
//!
//! The folder holding the file is watched (not the file), so that the file being created after
//! the watch starts wakes the follower too. A wakeup may come with nothing new (another file of
//! the folder changed); readers simply find no new lines. [`watch_file_in_new_folder`] also
//! follows a file whose folder does not exist yet (`troupe log -f` before the first run): it
//! watches the folder's parent until the folder appears, then the folder.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

/// Keeps the watch alive; dropping it stops the wakeups.
pub struct FileWatch {
    _watcher: RecommendedWatcher,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot watch {path}: {source}")]
pub struct FollowError {
    pub path: String,
    #[source]
    pub source: notify::Error,
}

/// Calls `on_change` after every change of `file` (created, written, replaced). The folder
/// holding `file` must exist.
pub fn watch_file(
    file: &Path,
    on_change: impl Fn() + Send + 'static,
) -> Result<FileWatch, FollowError> {
    let folder = file.parent().unwrap_or(Path::new("."));
    let name = file.file_name().map(ToOwned::to_owned);
    let error = |source| FollowError {
        path: folder.display().to_string(),
        source,
    };
    let mut watcher = notify::recommended_watcher(move |result: notify::Result<notify::Event>| {
        let Ok(event) = result else { return };
        if matches!(event.kind, EventKind::Access(_)) {
            return;
        }
        if event.paths.iter().any(|p| p.file_name() == name.as_deref()) {
            on_change();
        }
    })
    .map_err(error)?;
    watcher
        .watch(folder, RecursiveMode::NonRecursive)
        .map_err(error)?;
    Ok(FileWatch { _watcher: watcher })
}

/// Keeps a [`watch_file_in_new_folder`] alive; dropping it stops the wakeups.
pub struct NewFolderWatch {
    _parent: Option<RecommendedWatcher>,
    _file: Arc<Mutex<Option<FileWatch>>>,
}

/// Like [`watch_file`], but the folder holding `file` need not exist yet, only its parent: until
/// the folder appears, the parent is watched (no timer); once it appears, the folder is watched
/// as by [`watch_file`] and `on_change` is called, since the file may already be in it.
pub fn watch_file_in_new_folder(
    file: &Path,
    on_change: impl Fn() + Send + Sync + 'static,
) -> Result<NewFolderWatch, FollowError> {
    let folder = file.parent().unwrap_or(Path::new(".")).to_owned();
    let on_change: Arc<dyn Fn() + Send + Sync> = Arc::new(on_change);
    let slot: Arc<Mutex<Option<FileWatch>>> = Arc::default();
    if folder.is_dir() {
        let watch = watch_file(file, {
            let on_change = on_change.clone();
            move || on_change()
        })?;
        *crate::sync::lock(&slot) = Some(watch);
        return Ok(NewFolderWatch {
            _parent: None,
            _file: slot,
        });
    }
    let parent = folder.parent().unwrap_or(Path::new(".")).to_owned();
    let error = |source| FollowError {
        path: parent.display().to_string(),
        source,
    };
    let arm = Arc::new(Arm {
        file: file.to_owned(),
        folder: folder.clone(),
        on_change,
        slot: slot.clone(),
    });
    let armed = arm.clone();
    let name = folder.file_name().map(ToOwned::to_owned);
    let mut watcher = notify::recommended_watcher(move |result: notify::Result<notify::Event>| {
        let Ok(event) = result else { return };
        if matches!(event.kind, EventKind::Access(_)) {
            return;
        }
        if event.paths.iter().any(|p| p.file_name() == name.as_deref()) {
            armed.try_arm();
        }
    })
    .map_err(error)?;
    watcher
        .watch(&parent, RecursiveMode::NonRecursive)
        .map_err(error)?;
    // The folder may have appeared between the check above and the watch.
    arm.try_arm();
    Ok(NewFolderWatch {
        _parent: Some(watcher),
        _file: slot,
    })
}

/// Moves the watch onto the folder once it exists (once).
struct Arm {
    file: PathBuf,
    folder: PathBuf,
    on_change: Arc<dyn Fn() + Send + Sync>,
    slot: Arc<Mutex<Option<FileWatch>>>,
}

impl Arm {
    fn try_arm(&self) {
        let mut slot = crate::sync::lock(&self.slot);
        if slot.is_some() || !self.folder.is_dir() {
            return;
        }
        let on_change = self.on_change.clone();
        match watch_file(&self.file, move || on_change()) {
            Ok(watch) => *slot = Some(watch),
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the new folder of a followed file");
                return;
            }
        }
        drop(slot);
        (self.on_change)();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    #[test]
    fn an_append_wakes_the_follower() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let (tx, rx) = std::sync::mpsc::channel();
        let _watch = watch_file(&path, move || {
            let _ = tx.send(());
        })
        .unwrap();
        let mut file = std::fs::File::create(&path).unwrap();
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the creation wakes the follower");
        while rx.try_recv().is_ok() {}
        file.write_all(b"x\n").unwrap();
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the append wakes the follower");
    }

    #[test]
    fn a_folder_created_after_the_watch_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join(".troupe");
        let path = folder.join("events.jsonl");
        let (tx, rx) = std::sync::mpsc::channel();
        let _watch = watch_file_in_new_folder(&path, move || {
            let _ = tx.send(());
        })
        .unwrap();
        assert!(!folder.exists(), "watching creates nothing");
        std::fs::create_dir(&folder).unwrap();
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the folder's creation wakes the follower");
        while rx.try_recv().is_ok() {}
        std::fs::write(&path, b"x\n").unwrap();
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the file in the new folder wakes the follower");
    }
}
