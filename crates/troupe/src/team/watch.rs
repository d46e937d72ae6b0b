//! Notices messages that another process writes into a mailbox (`troupe review` answering a plan
//! from a second terminal), through a filesystem watch — inotify on Linux — not a polling loop.
//!
//! Only arrivals in a `ready/` folder wake anyone: a created file (a send) or a file moved in (a
//! release). Departures (claims) are ignored, so a worker's own claims do not wake it again.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use notify::event::{CreateKind, ModifyKind, RenameMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::task::JoinHandle;
use troupe_wire::AgentName;

use super::postman::Postman;
use crate::layout::Layout;
use crate::store::{durable, IoError};

/// Keeps the watch alive; dropping it stops watching.
pub struct MailboxWatch {
    _watcher: RecommendedWatcher,
    task: JoinHandle<()>,
}

impl Drop for MailboxWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("cannot watch {path}: {source}")]
    Notify { path: String, source: notify::Error },
}

/// Starts watching `.troupe/mailboxes/`; arrivals wake their agent through the postman.
pub fn start(layout: &Layout, postman: Arc<Postman>) -> Result<MailboxWatch, WatchError> {
    let root = layout.mailboxes_dir();
    durable::ensure_real_dir(&root)?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<AgentName>();
    let watched = root.clone();
    let notify_error = |source| WatchError::Notify {
        path: root.display().to_string(),
        source,
    };
    let mut watcher = notify::recommended_watcher(move |result: notify::Result<Event>| {
        let Ok(event) = result else { return };
        for path in arrivals(&event) {
            if let Some(agent) = ready_owner(&watched, path) {
                let _ = tx.send(agent);
            }
        }
    })
    .map_err(notify_error)?;
    watcher
        .watch(&root, RecursiveMode::Recursive)
        .map_err(notify_error)?;
    let task = tokio::spawn(async move {
        while let Some(agent) = rx.recv().await {
            postman.wake(&agent);
        }
    });
    Ok(MailboxWatch {
        _watcher: watcher,
        task,
    })
}

/// The paths an event brings into existence.
fn arrivals(event: &Event) -> Vec<&PathBuf> {
    match event.kind {
        EventKind::Create(CreateKind::File | CreateKind::Any) => event.paths.iter().collect(),
        EventKind::Modify(ModifyKind::Name(RenameMode::To)) => event.paths.iter().collect(),
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
            event.paths.iter().skip(1).collect()
        }
        _ => Vec::new(),
    }
}

/// `<root>/<agent>/ready/<file>` → the agent.
fn ready_owner(root: &Path, path: &Path) -> Option<AgentName> {
    let rest = path.strip_prefix(root).ok()?;
    let parts: Vec<&str> = rest
        .components()
        .map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    match parts.as_slice() {
        [agent, "ready", file] if !file.starts_with('.') => AgentName::parse(agent).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ready_files_name_an_owner() {
        let root = Path::new("/w/.troupe/mailboxes");
        assert_eq!(
            ready_owner(root, &root.join("alice/ready/x.json")).map(|a| a.to_string()),
            Some("alice".into())
        );
        assert_eq!(ready_owner(root, &root.join("alice/done/x.json")), None);
        assert_eq!(
            ready_owner(root, &root.join("alice/ready/.x.json.tmp-1")),
            None
        );
        assert_eq!(ready_owner(root, &root.join("Bad/ready/x.json")), None);
        assert_eq!(
            ready_owner(root, Path::new("/elsewhere/alice/ready/x.json")),
            None
        );
    }
}
