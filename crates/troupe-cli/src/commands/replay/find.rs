//! Which recording `RUN` names, and the folder the replay runs in.

use std::path::{Path, PathBuf};

use crate::error::CliError;

/// The shortest prefix of a run id that names it.
const MIN_PREFIX: usize = 8;

/// A recording found: its run and its text.
pub struct Found {
    pub run: String,
    pub text: String,
}

/// The recording `run` names: a recording file, or — among the team's recordings (the
/// workspace's, or a shared team's in its database) — `last` (the newest), a run id or a
/// unique prefix of one.
pub async fn recording(view: &troupe::bootstrap::TeamView, run: &str) -> Result<Found, CliError> {
    let as_file = Path::new(run);
    if run.ends_with(".jsonl") && as_file.exists() {
        let bytes = troupe::store::read::read_regular(
            as_file,
            troupe::store::read::Links::Follow,
            troupe::store::recordings::MAX_RECORDING_READ,
        )
        .map_err(|e| refused(run, &e.to_string()))?
        .unwrap_or_default();
        let text = String::from_utf8(bytes).map_err(|_| refused(run, "it is not UTF-8"))?;
        let name = as_file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(Found { run: name, text });
    }
    let recordings = view.recordings();
    let runs = recordings.runs().await.map_err(|e| CliError::coded(&e))?;
    if runs.is_empty() {
        return Err(CliError::usage(
            "no recorded runs here (every `troupe run` records one, in .troupe/recordings/)".into(),
        )
        .with_code("recording_not_found"));
    }
    let chosen = if run == "last" {
        runs.last().cloned()
    } else {
        if run.len() < MIN_PREFIX {
            return Err(CliError::usage(format!(
                "{run:?} is too short: name a run by its id, a prefix of at least {MIN_PREFIX} \
                 characters, `last`, or a recording file"
            )));
        }
        let matching: Vec<&String> = runs.iter().filter(|id| id.starts_with(run)).collect();
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
            "no recorded run {run:?} here (`last` is the newest)"
        ))
        .with_code("recording_not_found"));
    };
    let text = recordings
        .text(&id)
        .await
        .map_err(|e| CliError::coded(&e))?
        .ok_or_else(|| {
            CliError::usage(format!("the recording of run {id} is gone"))
                .with_code("recording_not_found")
        })?;
    Ok(Found { run: id, text })
}

fn refused(run: &str, why: &str) -> CliError {
    CliError::usage(format!("the recording {run} cannot be played: {why}"))
        .with_code("recording_invalid")
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
