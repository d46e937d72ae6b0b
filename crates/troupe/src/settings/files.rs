//! Finding and reading the settings files: the workspace's `troupe.toml` and the user's
//! `config.toml`, as text, before anything parses them.
//!
//! A missing file is no settings; a file that is not a regular file (FIFO, socket, device,
//! folder) or is over [`MAX_SETTINGS_FILE_BYTES`] is refused without blocking or reading it.
//! The project file is opened with `O_NOFOLLOW` (a symlink is refused: the workspace may come
//! from anyone); the user file may be a symlink (dotfile managers link it), it is the user's.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::error::{SettingsError, SettingsErrorKind as Kind};
use crate::store::read::{open_regular, Links};

/// The project settings file, at the workspace root.
pub const PROJECT_FILE_NAME: &str = "troupe.toml";
/// A settings file larger than this is refused (they hold a screenful of keys).
pub const MAX_SETTINGS_FILE_BYTES: u64 = 1024 * 1024;

/// `$XDG_CONFIG_HOME/troupe/config.toml`, else `$HOME/.config/troupe/config.toml`; none when
/// neither variable is set to an absolute path.
pub fn user_config_path() -> Option<PathBuf> {
    user_config_path_from(
        std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

fn user_config_path_from(xdg: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    let base = match xdg.filter(|p| p.is_absolute()) {
        Some(xdg) => xdg,
        None => home.filter(|p| p.is_absolute())?.join(".config"),
    };
    Some(base.join("troupe").join("config.toml"))
}

/// The text of a settings file; `None` when it does not exist. Opened like every file troupe
/// reads ([`open_regular`]): never blocking, anything but a regular file refused, a symlink
/// refused unless `follow`.
pub(super) fn read_file(path: &Path, follow: bool) -> Result<Option<String>, SettingsError> {
    let refuse = |what: String| SettingsError::new(Kind::Read, path, None, what);
    let links = if follow { Links::Follow } else { Links::Refuse };
    let file = match open_regular(path, links) {
        Ok(Some(file)) => file,
        Ok(None) => return Ok(None),
        Err(e) => return Err(refuse(e.source.to_string())),
    };
    let too_large = || {
        refuse(format!(
            "is larger than {MAX_SETTINGS_FILE_BYTES} bytes; a settings file holds a screenful of keys"
        ))
    };
    let mut bytes = Vec::new();
    file.take(MAX_SETTINGS_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_SETTINGS_FILE_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| refuse("is not valid UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::super::section::testing::workspace;
    use super::super::{Settings, SettingsErrorKind as Kind};
    use super::*;

    #[test]
    fn missing_files_are_defaults() {
        let dir = workspace(None);
        let user = dir.path().join("nope/config.toml");
        assert_eq!(
            Settings::load(dir.path(), Some(&user)).unwrap(),
            Settings::default()
        );
    }

    #[test]
    fn a_fifo_or_symlink_in_place_of_troupe_toml_is_refused_without_blocking() {
        let dir = workspace(None);
        let path = dir.path().join(PROJECT_FILE_NAME);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = Settings::load(dir.path(), None).unwrap_err();
        assert_eq!(err.kind, Kind::Read);
        assert!(err.to_string().contains("FIFO"), "{err}");
        std::fs::remove_file(&path).unwrap();
        let target = dir.path().join("real.toml");
        std::fs::write(&target, "[model]\nmodel = \"m\"\n").unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let err = Settings::load(dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let err = Settings::load(dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("folder"), "{err}");
        // The user's file may be a link (dotfile managers), to a regular file only.
        let dir = workspace(None);
        let user = dir.path().join("config.toml");
        std::os::unix::fs::symlink(&target, &user).unwrap();
        let s = Settings::load(dir.path(), Some(&user)).unwrap();
        assert_eq!(s.model.model.unwrap().value, "m");
    }

    #[test]
    fn a_huge_file_is_refused() {
        let dir = workspace(None);
        let big = format!("# {}\n", "x".repeat(MAX_SETTINGS_FILE_BYTES as usize));
        std::fs::write(dir.path().join(PROJECT_FILE_NAME), big).unwrap();
        let err = Settings::load(dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("larger than"), "{err}");
    }

    #[test]
    fn user_config_path_prefers_xdg() {
        let p = |x: Option<&str>, h: Option<&str>| {
            user_config_path_from(x.map(PathBuf::from), h.map(PathBuf::from))
        };
        assert_eq!(
            p(Some("/x"), Some("/h")),
            Some(PathBuf::from("/x/troupe/config.toml"))
        );
        assert_eq!(
            p(None, Some("/h")),
            Some(PathBuf::from("/h/.config/troupe/config.toml"))
        );
        assert_eq!(
            p(Some("rel"), Some("/h")),
            Some(PathBuf::from("/h/.config/troupe/config.toml"))
        );
        assert_eq!(p(None, None), None);
    }
}
