//! A wakeup whenever the event stream changes, from the kernel's file watch (inotify on Linux)
//! rather than a timer: `troupe log -f` and the web view's live stream wait on it, then read the
//! new lines with a [`super::read::EventCursor`].
//!
//! The folder holding the file is watched (not the file), so that the file being created after
//! the watch starts wakes the follower too. A wakeup may come with nothing new (another file of
//! the folder changed); readers simply find no new lines.

use std::path::Path;

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
}
