//! The prompts typed in sessions on a workspace, for ↑/↓: `.troupe/session_history.jsonl`, one
//! JSON string a line (a prompt may hold new lines), the newest last, at most [`KEPT`]. Private
//! to its owner (0600, as every file troupe creates), replaced whole on each save so that a
//! reader never sees half of one.

use std::path::{Path, PathBuf};

use troupe::layout::Layout;

/// How many prompts are kept.
pub const KEPT: usize = 500;

/// The largest history file read (a larger one is not troupe's: no history).
const MAX_BYTES: u64 = 8 * 1024 * 1024;

fn file(workspace: &Path) -> PathBuf {
    Layout::new(workspace)
        .state_dir()
        .join("session_history.jsonl")
}

/// The prompts kept for `workspace`, oldest first; none when there is no file or it cannot be
/// read (history is a convenience, never a reason to refuse a session). A line that is not a
/// JSON string is skipped.
pub fn load(workspace: &Path) -> Vec<String> {
    // A regular file of at most `MAX_BYTES`: a FIFO, a device or a symlink put there (a
    // repository may ship its `.troupe/`) is not history, and never blocks the session.
    let Ok(Some(bytes)) = troupe::store::read::read_regular(
        &file(workspace),
        troupe::store::read::Links::Refuse,
        MAX_BYTES,
    ) else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut prompts: Vec<String> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<String>(line).ok())
        .collect();
    let extra = prompts.len().saturating_sub(KEPT);
    prompts.drain(..extra);
    prompts
}

/// Keeps the newest [`KEPT`] of `prompts`; a failure is returned for the person to see.
pub fn save(workspace: &Path, prompts: &[String]) -> Result<(), String> {
    let dir = Layout::new(workspace).state_dir();
    troupe::store::durable::ensure_real_dir(&dir).map_err(|e| format!("history not saved: {e}"))?;
    let from = prompts.len().saturating_sub(KEPT);
    let mut text = String::new();
    for prompt in &prompts[from..] {
        let line = serde_json::to_string(prompt).map_err(|e| format!("history not saved: {e}"))?;
        text.push_str(&line);
        text.push('\n');
    }
    troupe::store::durable::replace_view(&file(workspace), text.as_bytes())
        .map_err(|e| format!("history not saved: {e}"))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn history_keeps_the_newest_prompts_with_their_lines_privately() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()), Vec::<String>::new());
        let prompts: Vec<String> = (0..KEPT + 3).map(|n| format!("p{n}\nline 2")).collect();
        save(dir.path(), &prompts).unwrap();
        let loaded = load(dir.path());
        assert_eq!(loaded.len(), KEPT);
        assert_eq!(loaded.first().map(String::as_str), Some("p3\nline 2"));
        assert_eq!(loaded.last(), prompts.last());
        let mode = std::fs::metadata(file(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_fifo_or_a_link_in_place_of_the_history_is_no_history() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".troupe")).unwrap();
        let path = file(dir.path());
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path in the test's folder.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(
            load(dir.path()),
            Vec::<String>::new(),
            "never blocks on a FIFO"
        );
        std::fs::remove_file(&path).unwrap();
        let secret = dir.path().join("secret.txt");
        std::fs::write(&secret, "\"not a prompt of yours\"\n").unwrap();
        std::os::unix::fs::symlink(&secret, &path).unwrap();
        assert_eq!(
            load(dir.path()),
            Vec::<String>::new(),
            "a link is not followed"
        );
        // Saving replaces the link itself, never writes through it.
        save(dir.path(), &["mine".to_owned()]).unwrap();
        assert_eq!(load(dir.path()), ["mine"]);
        assert_eq!(
            std::fs::read_to_string(&secret).unwrap(),
            "\"not a prompt of yours\"\n"
        );
    }
}
