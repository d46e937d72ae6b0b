//! The workspace's instructions for agents, as every living system prompt carries them: the
//! workspace's `AGENTS.md` (else its `CLAUDE.md`), or the files `[context] files` lists instead,
//! at most [`MAX_INSTRUCTION_BYTES`] in all; and the other `AGENTS.md` files below it, listed by
//! path (at most [`MAX_LISTED`]) so an agent reads the one next to the files it works on.
//!
//! The workspace is the agent's own: the lead's checkout, or a worktree teammate's worktree
//! (whose copy may differ). The files are read when the prompt is refreshed — before every
//! model call — so an edit is seen at the next call; a file is read again only when its
//! identity, size or times changed ([`Stamp`]), and the walk that finds the other `AGENTS.md`
//! files is bounded ([`MAX_WALKED`] entries, [`MAX_DEPTH`] folders deep), so a refresh stays
//! cheap in a large workspace.
//!
//! What is never done: following a symbolic link out of the workspace (a file, or a folder on
//! its way, is judged where it really is), opening anything but a regular file (a FIFO or device
//! named `AGENTS.md` is skipped without being opened, so it cannot hang a turn), or refusing a
//! file because it is not UTF-8 (it is read lossily). A file that cannot be shown is named in
//! the section with the reason. Nothing here is an error: at worst the section is empty.

use std::collections::{HashMap, VecDeque};
use std::fs::{self, Metadata};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::settings::ContextSettings;
use crate::store::read::{open_regular, Links};
use crate::sync::lock;

/// The most bytes of instructions one prompt carries, all files together; a file that does not
/// fit whole is cut (on a character boundary) with a notice saying how much was left out.
pub const MAX_INSTRUCTION_BYTES: usize = 32 * 1024;
/// The most other `AGENTS.md` files listed.
pub const MAX_LISTED: usize = 50;
/// The most folder entries the walk for other `AGENTS.md` files looks at.
pub const MAX_WALKED: usize = 5_000;
/// How deep below the workspace the walk goes.
pub const MAX_DEPTH: usize = 12;
/// The files shown when `[context] files` does not say: the first of these that is there.
pub const DEFAULT_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];
/// The name of the per-folder instruction files that are listed.
const LISTED_NAME: &str = "AGENTS.md";
/// Folders the walk never enters (hidden folders neither): troupe's state, git's, build output
/// and dependencies, where an `AGENTS.md` is nobody's instructions for this project.
const SKIPPED_FOLDERS: [&str; 4] = [".git", ".troupe", "target", "node_modules"];

/// Which files are shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// `AGENTS.md`, else `CLAUDE.md`.
    Default,
    /// `[context] files`, in order (relative to the workspace, checked by the settings).
    Listed(Vec<String>),
}

impl Choice {
    pub fn of(settings: &ContextSettings) -> Self {
        match &settings.files {
            Some(files) => Self::Listed(files.value.iter().map(|f| f.path.clone()).collect()),
            None => Self::Default,
        }
    }
}

/// The instructions of one agent's workspace, with the files last read.
pub struct Instructions {
    workspace: PathBuf,
    choice: Choice,
    /// The run's secrets: a key pasted into an instruction file never reaches the model.
    redactor: crate::secrets::Redactor,
    /// By real path: what was read of each file and the stamp it had, so an unchanged file is
    /// not read again.
    cache: Mutex<HashMap<PathBuf, Cached>>,
}

/// What tells a file changed without reading it: which file it is (device, inode), its size,
/// and its modification and change times. A rewrite in place that keeps the size within one
/// tick of the file system's clock would go unseen until the next change; an editor's
/// replace-by-rename changes the inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Stamp {
    fn of(meta: &Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

#[derive(Debug, Clone)]
struct Cached {
    stamp: Stamp,
    /// The first bytes of the file: at most the cap and a character's worth more.
    head: Vec<u8>,
}

/// One file, as found.
enum Found {
    File { head: Vec<u8>, len: u64 },
    Missing,
    Skipped(&'static str),
}

impl Instructions {
    /// The instructions of `workspace` (the agent's own), as `choice` picks them.
    pub fn new(workspace: &Path, choice: Choice) -> Self {
        Self {
            workspace: workspace.to_path_buf(),
            choice,
            redactor: crate::secrets::Redactor::default(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// These instructions, with the run's secrets redacted from what they show.
    pub fn with_redactor(mut self, redactor: crate::secrets::Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// The section's text as the files are now (empty: nothing to show). Blocking: it reads
    /// files and walks folders.
    pub fn section(&self) -> String {
        let Ok(root) = fs::canonicalize(&self.workspace) else {
            return String::new();
        };
        let mut seen = Vec::new();
        let mut shown = Vec::new();
        let mut notes = Vec::new();
        let mut budget = MAX_INSTRUCTION_BYTES;
        let wanted: Vec<String> = match &self.choice {
            Choice::Default => DEFAULT_FILES.iter().map(|f| (*f).to_owned()).collect(),
            Choice::Listed(files) => files.clone(),
        };
        for name in &wanted {
            let (found, real) = self.find(&root, name);
            seen.extend(real.clone());
            match found {
                Found::File { head, len } => {
                    shown.extend(real);
                    let (text, cut) = within(&head, len, budget);
                    budget -= text.len().min(budget);
                    let mut part = format!("### {name}\n{}", text.trim_end());
                    if let Some(left_out) = cut {
                        part.push_str(&format!(
                            "\n[{name} was cut here: {left_out} of its {len} bytes are not shown \
                             (the instructions shown are capped at {} KiB); read the rest with \
                             read_file on {name}]",
                            MAX_INSTRUCTION_BYTES / 1024
                        ));
                    }
                    notes.push(part);
                    if self.choice == Choice::Default {
                        break;
                    }
                }
                Found::Missing if self.choice == Choice::Default => {}
                Found::Missing => notes.push(format!(
                    "({name} is listed in [context] files but does not exist: skipped)"
                )),
                Found::Skipped(why) => notes.push(format!("({name} skipped: {why})")),
            }
        }
        self.keep_only(&seen);
        let (others, more) = other_agents_files(&root, &shown);
        if !others.is_empty() {
            let mut list = format!(
                "Other {LISTED_NAME} files, each for the folder it is in (read the one nearest \
                 the files you work on):"
            );
            for path in &others {
                list.push_str("\n- ");
                list.push_str(path);
            }
            if more {
                list.push_str("\n- … (more not listed)");
            }
            notes.push(list);
        }
        self.redactor.redact(&notes.join("\n\n")).into_owned()
    }

    /// `name` in the workspace `root`: its text if it is a regular file inside it (read, or
    /// from the cache when unchanged), with its real path.
    fn find(&self, root: &Path, name: &str) -> (Found, Option<PathBuf>) {
        let path = root.join(name);
        match fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Found::Missing, None),
            Err(_) => return (Found::Skipped("it cannot be inspected"), None),
        }
        // Every link on the way resolved: the file is judged where it really is.
        let Ok(real) = fs::canonicalize(&path) else {
            return (
                Found::Skipped("a symbolic link whose target does not exist"),
                None,
            );
        };
        if !real.starts_with(root) {
            return (
                Found::Skipped("it leads out of the workspace through a symbolic link"),
                None,
            );
        }
        // troupe's state, git's folder, the settings and `.env` are never shown to a model, by
        // whatever name (a link named AGENTS.md, a listed `.env`).
        if crate::protected::ProtectedPaths::built_in(root).contains(&real) {
            return (
                Found::Skipped(
                    "a protected path (troupe's state, git's folder, troupe.toml or .env): \
                     never shown to a model",
                ),
                None,
            );
        }
        // Looked at before anything is opened: a FIFO or a device is never opened.
        let Ok(meta) = fs::metadata(&real) else {
            return (Found::Skipped("it cannot be inspected"), None);
        };
        if !meta.is_file() {
            return (Found::Skipped("not a regular file"), None);
        }
        let found = self.read(&real, &meta);
        (found, Some(real))
    }

    fn read(&self, real: &Path, meta: &Metadata) -> Found {
        let stamp = Stamp::of(meta);
        if let Some(cached) = lock(&self.cache).get(real).filter(|c| c.stamp == stamp) {
            return Found::File {
                head: cached.head.clone(),
                len: stamp.len,
            };
        }
        // `real` holds no link; `open_regular` refuses one put there since, and anything but a
        // regular file, without blocking.
        let Ok(Some(file)) = open_regular(real, Links::Refuse) else {
            return Found::Skipped("it cannot be read");
        };
        // The stamp of what is read: a change after this is seen next time.
        let stamp = match file.metadata() {
            Ok(meta) => Stamp::of(&meta),
            Err(_) => return Found::Skipped("it cannot be read"),
        };
        let mut head = Vec::new();
        let wanted = (MAX_INSTRUCTION_BYTES + 4) as u64;
        if file.take(wanted).read_to_end(&mut head).is_err() {
            return Found::Skipped("it cannot be read");
        }
        lock(&self.cache).insert(
            real.to_path_buf(),
            Cached {
                stamp,
                head: head.clone(),
            },
        );
        let len = stamp.len.max(head.len() as u64);
        Found::File { head, len }
    }

    /// Forgets the files no longer shown.
    fn keep_only(&self, seen: &[PathBuf]) {
        lock(&self.cache).retain(|path, _| seen.contains(path));
    }
}

/// The text of a file whose first bytes are `head` and whose size is `len`, within `budget`
/// bytes: whole, or cut on a character boundary with how many bytes were left out. Not UTF-8
/// is read lossily.
fn within(head: &[u8], len: u64, budget: usize) -> (String, Option<u64>) {
    if len <= budget as u64 && head.len() <= budget {
        return (String::from_utf8_lossy(head).into_owned(), None);
    }
    let mut end = budget.min(head.len());
    // Back to the start of the character the cut falls in (at most three continuation bytes).
    let mut back = 0;
    while end > 0 && end < head.len() && back < 3 && head[end] & 0xC0 == 0x80 {
        end -= 1;
        back += 1;
    }
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let left_out = len.max(head.len() as u64) - end as u64;
    (text, Some(left_out))
}

/// The workspace's `AGENTS.md` files below its root, by path relative to it (sorted), but those
/// in `shown`; and whether there were more than [`MAX_LISTED`] or the walk stopped early.
/// Breadth first, so the folders nearest the root are looked at first; links are not followed.
fn other_agents_files(root: &Path, shown: &[PathBuf]) -> (Vec<String>, bool) {
    let mut found = Vec::new();
    let mut more = false;
    let mut walked = 0;
    let mut folders = VecDeque::from([(root.to_path_buf(), 0usize)]);
    'walk: while let Some((folder, depth)) = folders.pop_front() {
        let Ok(entries) = fs::read_dir(&folder) else {
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            walked += 1;
            if walked > MAX_WALKED {
                more = true;
                break 'walk;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if kind.is_dir() {
                let skipped = name.starts_with('.') || SKIPPED_FOLDERS.contains(&name.as_ref());
                if !skipped && depth < MAX_DEPTH {
                    folders.push_back((entry.path(), depth + 1));
                }
            } else if kind.is_file() && name == LISTED_NAME && folder != root {
                let path = entry.path();
                if shown.contains(&path) {
                    continue;
                }
                if found.len() == MAX_LISTED {
                    more = true;
                    break 'walk;
                }
                if let Ok(relative) = path.strip_prefix(root) {
                    found.push(relative.display().to_string());
                }
            }
        }
    }
    found.sort();
    (found, more)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        (dir, root)
    }

    fn write(root: &Path, path: &str, text: &[u8]) {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn default(root: &Path) -> String {
        Instructions::new(root, Choice::Default).section()
    }

    #[test]
    fn agents_md_is_shown_else_claude_md_else_nothing() {
        let (_dir, root) = workspace();
        assert_eq!(default(&root), "");
        write(&root, "CLAUDE.md", b"Use tabs.\n");
        assert_eq!(default(&root), "### CLAUDE.md\nUse tabs.");
        write(&root, "AGENTS.md", b"Run cargo test.\n");
        assert_eq!(default(&root), "### AGENTS.md\nRun cargo test.");
    }

    #[test]
    fn protected_paths_are_never_shown_and_secrets_are_redacted() {
        let (_dir, root) = workspace();
        write(&root, ".env", b"OPENAI_API_KEY=sk-secret-in-env\n");
        std::os::unix::fs::symlink(root.join(".env"), root.join("AGENTS.md")).unwrap();
        let shown = default(&root);
        assert!(!shown.contains("sk-secret-in-env"), "{shown}");
        assert!(shown.contains("protected path"), "{shown}");
        let listed = Instructions::new(&root, Choice::Listed(vec![".env".into()])).section();
        assert!(!listed.contains("sk-secret-in-env"), "{listed}");
        fs::remove_file(root.join("AGENTS.md")).unwrap();
        write(&root, "AGENTS.md", b"Deploy with key sk-pasted-key-123.\n");
        let redacted = Instructions::new(&root, Choice::Default)
            .with_redactor(crate::secrets::Redactor::new([
                "sk-pasted-key-123".to_owned()
            ]))
            .section();
        assert!(!redacted.contains("sk-pasted-key-123"), "{redacted}");
        assert!(redacted.contains("Deploy with key"), "{redacted}");
    }

    #[test]
    fn a_long_file_is_cut_on_a_character_boundary_with_a_notice() {
        let (_dir, root) = workspace();
        // 'é' is two bytes: the cap falls inside one at an odd offset.
        let mut text = vec![b'a'];
        text.extend("é".repeat(20_000).as_bytes());
        write(&root, "AGENTS.md", &text);
        let section = default(&root);
        let body = section
            .strip_prefix("### AGENTS.md\n")
            .unwrap()
            .split("\n[AGENTS.md was cut here")
            .next()
            .unwrap();
        assert_eq!(
            body.len(),
            MAX_INSTRUCTION_BYTES - 1,
            "cut before the split 'é'"
        );
        assert!(!body.contains('\u{fffd}'));
        let left_out = text.len() - body.len();
        assert!(
            section.contains(&format!(
                "[AGENTS.md was cut here: {left_out} of its {} bytes are not shown",
                text.len()
            )),
            "{}",
            &section[section.len() - 300..]
        );
        assert!(section.ends_with("read the rest with read_file on AGENTS.md]"));
    }

    #[test]
    fn a_file_that_is_not_utf8_is_read_lossily() {
        let (_dir, root) = workspace();
        write(&root, "AGENTS.md", b"ok \xff\xfe done\n");
        assert_eq!(default(&root), "### AGENTS.md\nok \u{fffd}\u{fffd} done");
    }

    #[test]
    fn an_edit_is_seen_and_an_unchanged_file_comes_from_the_cache() {
        let (_dir, root) = workspace();
        write(&root, "AGENTS.md", b"first\n");
        let instructions = Instructions::new(&root, Choice::Default);
        assert_eq!(instructions.section(), "### AGENTS.md\nfirst");
        assert_eq!(lock(&instructions.cache).len(), 1);
        write(&root, "AGENTS.md", b"second, longer\n");
        assert_eq!(instructions.section(), "### AGENTS.md\nsecond, longer");
        // Replaced by another file (a rename, as editors save): a new inode.
        write(&root, "new.md", b"third\n");
        fs::rename(root.join("new.md"), root.join("AGENTS.md")).unwrap();
        assert_eq!(instructions.section(), "### AGENTS.md\nthird");
        fs::remove_file(root.join("AGENTS.md")).unwrap();
        assert_eq!(instructions.section(), "");
        assert!(lock(&instructions.cache).is_empty());
    }

    #[test]
    fn a_fifo_or_a_link_out_of_the_workspace_is_skipped_never_opened() {
        let (_dir, root) = workspace();
        let fifo =
            std::ffi::CString::new(root.join("AGENTS.md").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        write(&root, "CLAUDE.md", b"fallback\n");
        // Returns at once (a FIFO opened for reading would block without a writer).
        assert_eq!(
            default(&root),
            "(AGENTS.md skipped: not a regular file)\n\n### CLAUDE.md\nfallback"
        );
        let (_outside_dir, outside) = workspace();
        write(&outside, "AGENTS.md", b"secret\n");
        fs::remove_file(root.join("AGENTS.md")).unwrap();
        fs::remove_file(root.join("CLAUDE.md")).unwrap();
        std::os::unix::fs::symlink(outside.join("AGENTS.md"), root.join("AGENTS.md")).unwrap();
        let section = default(&root);
        assert!(!section.contains("secret"), "{section}");
        assert_eq!(
            section,
            "(AGENTS.md skipped: it leads out of the workspace through a symbolic link)"
        );
        // A link inside the workspace is followed.
        fs::remove_file(root.join("AGENTS.md")).unwrap();
        write(&root, "docs/agents.md", b"inside\n");
        std::os::unix::fs::symlink(root.join("docs/agents.md"), root.join("AGENTS.md")).unwrap();
        assert_eq!(default(&root), "### AGENTS.md\ninside");
    }

    #[test]
    fn listed_files_replace_the_default_share_the_cap_and_a_missing_one_is_noted() {
        let (_dir, root) = workspace();
        write(&root, "AGENTS.md", b"not shown\n");
        write(&root, "docs/CONVENTIONS.md", b"Conventions.\n");
        write(&root, "docs/BIG.md", &vec![b'x'; MAX_INSTRUCTION_BYTES]);
        let listed = |files: &[&str]| {
            Instructions::new(
                &root,
                Choice::Listed(files.iter().map(|f| (*f).to_owned()).collect()),
            )
            .section()
        };
        assert_eq!(
            listed(&["docs/CONVENTIONS.md", "docs/GONE.md"]),
            "### docs/CONVENTIONS.md\nConventions.\n\n(docs/GONE.md is listed in [context] \
             files but does not exist: skipped)"
        );
        let both = listed(&["docs/CONVENTIONS.md", "docs/BIG.md"]);
        assert!(
            both.contains("[docs/BIG.md was cut here: 13 of its 32768 bytes are not shown"),
            "{}",
            &both[both.len() - 200..]
        );
        assert_eq!(listed(&[]), "");
    }

    #[test]
    fn other_agents_files_are_listed_by_path_skipping_state_hidden_and_build_folders() {
        let (_dir, root) = workspace();
        write(&root, "AGENTS.md", b"root\n");
        write(&root, "crates/a/AGENTS.md", b"a\n");
        write(&root, "web/AGENTS.md", b"w\n");
        for skipped in [
            ".git/AGENTS.md",
            ".troupe/worktrees/x/AGENTS.md",
            "target/AGENTS.md",
            "node_modules/p/AGENTS.md",
            ".hidden/AGENTS.md",
        ] {
            write(&root, skipped, b"no\n");
        }
        let section = default(&root);
        assert!(
            section.ends_with(
                "(read the one nearest the files you work on):\n- crates/a/AGENTS.md\n- web/AGENTS.md"
            ),
            "{section}"
        );
        // Listed in [context] files: shown, not listed again.
        let listed = Instructions::new(&root, Choice::Listed(vec!["web/AGENTS.md".into()]));
        let section = listed.section();
        assert!(section.starts_with("### web/AGENTS.md\nw"), "{section}");
        assert!(section.ends_with(":\n- crates/a/AGENTS.md"), "{section}");
    }

    #[test]
    fn the_listing_is_bounded() {
        let (_dir, root) = workspace();
        for n in 0..(MAX_LISTED + 5) {
            write(&root, &format!("d{n:03}/AGENTS.md"), b"x\n");
        }
        let section = default(&root);
        assert_eq!(section.matches("/AGENTS.md").count(), MAX_LISTED);
        assert!(section.ends_with("- … (more not listed)"), "{section}");
    }
}
