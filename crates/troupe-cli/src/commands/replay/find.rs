//! Which recording `RUN` names, and the folder the replay runs in.

use std::path::{Path, PathBuf};

use troupe::layout::Layout;

use crate::error::CliError;

/// The shortest prefix of a run id that names it.
const MIN_PREFIX: usize = 8;

/// The recording `run` names in `workspace`: a file, `last` (the newest), a run id or a unique
/// prefix of one.
pub fn recording(workspace: &Path, run: &str) -> Result<PathBuf, CliError> {
    let as_file = Path::new(run);
    if run.ends_with(".jsonl") && as_file.is_file() {
        return Ok(as_file.to_owned());
    }
    let dir = Layout::new(workspace).recordings_dir();
    let mut runs: Vec<(std::time::SystemTime, String)> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let id = name.strip_suffix(".jsonl")?.to_owned();
                let meta = e.metadata().ok().filter(|m| m.is_file())?;
                Some((meta.modified().ok()?, id))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    if runs.is_empty() {
        return Err(CliError::usage(format!(
            "no recorded runs in {} (every `troupe run` records one)",
            dir.display()
        ))
        .with_code("recording_not_found"));
    }
    runs.sort();
    let chosen = if run == "last" {
        runs.last().map(|(_, id)| id.clone())
    } else {
        if run.len() < MIN_PREFIX {
            return Err(CliError::usage(format!(
                "{run:?} is too short: name a run by its id, a prefix of at least {MIN_PREFIX} \
                 characters, `last`, or a recording file"
            )));
        }
        let matching: Vec<&String> = runs
            .iter()
            .map(|(_, id)| id)
            .filter(|id| id.starts_with(run))
            .collect();
        match matching.as_slice() {
            [one] => Some((*one).clone()),
            [] => None,
            _ => {
                return Err(CliError::usage(format!(
                    "{run:?} names {} recorded runs; give more of the id",
                    matching.len()
                )))
            }
        }
    };
    let Some(id) = chosen else {
        return Err(CliError::usage(format!(
            "no recorded run {run:?} in {} (`last` is the newest)",
            dir.display()
        ))
        .with_code("recording_not_found"));
    };
    Ok(dir.join(format!("{id}.jsonl")))
}

/// The folder a replay runs in: `--into DIR` (new or empty, kept) or a temporary one.
pub enum Folder {
    Kept(PathBuf),
    Temporary(tempfile::TempDir),
}

/// `--into DIR` made (it must be missing or empty), or a temporary folder.
pub fn folder(into: Option<&Path>) -> Result<Folder, CliError> {
    let Some(dir) = into else {
        return tempfile::Builder::new()
            .prefix("troupe-replay-")
            .tempdir()
            .map(Folder::Temporary)
            .map_err(|e| CliError::failed(format!("cannot make a folder for the replay: {e}")));
    };
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(CliError::usage(format!(
                    "--into {}: the folder is not empty; name a new or empty folder",
                    dir.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)
                .map_err(|e| CliError::failed(format!("cannot make {}: {e}", dir.display())))?;
        }
        Err(e) => return Err(CliError::usage(format!("--into {}: {e}", dir.display()))),
    }
    let dir = std::fs::canonicalize(dir)
        .map_err(|e| CliError::failed(format!("cannot use {}: {e}", dir.display())))?;
    Ok(Folder::Kept(dir))
}

impl Folder {
    pub fn path(&self) -> &Path {
        match self {
            Self::Kept(dir) => dir,
            Self::Temporary(dir) => dir.path(),
        }
    }

    /// The folder, when it is kept.
    pub fn kept(&self) -> Option<&Path> {
        match self {
            Self::Kept(dir) => Some(dir),
            Self::Temporary(_) => None,
        }
    }

    /// A temporary folder goes, and the repository forgets its worktree.
    pub fn finish(&self, repository: Option<&Path>) {
        let Self::Temporary(dir) = self else {
            return;
        };
        let _ = std::fs::remove_dir_all(dir.path());
        if let Some(repository) = repository {
            let place = troupe::worktree::git::Place::Checkout(repository.to_owned());
            let _ = troupe::worktree::git::Git::new(&place, ["worktree", "prune"]).run();
        }
    }
}
