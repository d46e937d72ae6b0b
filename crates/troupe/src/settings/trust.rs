//! Trust in a workspace's own files (issue 22). A cloned repository's `troupe.toml` and `.env`
//! are written by someone else: what they may do without the person's word is **tighten**
//! (`deny` and `ask` rules, a stricter sandbox, agent definitions, skills, memory). What
//! **needs trust** is listed as [`TrustItem`]s:
//!
//! - anything that runs a program: hooks, MCP servers, `[sandbox] hooks = false`;
//! - anything that decides where the key goes or which server is called: `[model] base_url` and
//!   `provider`, `[store] url`, and the `.env` variables that choose the server or the provider
//!   (`model::config` lists them); and where the team's code is pushed: `[team] remote`;
//! - anything that widens what agents may do: `allow` rules, `[sandbox] mode = "off"` (or a
//!   mode looser than the person's own config's), `[sandbox] network` other than off, and a
//!   `[prices]` entry below the built-in table (it lets a run go further before `--max-cost`);
//!   and where traces are sent: `[telemetry] endpoint` and `capture_content = true`.
//!
//! Trust is recorded in the person's own config folder ([`TrustStore`], `trusted.json` next to
//! the user `config.toml`), never in the workspace: per workspace, its real path and a digest of
//! the trust-requiring content of each file. A change to that content (a pulled commit that adds
//! a hook) needs trust again; any other edit of the files does not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::ErrorCode;
use crate::store::read::{read_regular, Links};
use crate::store::{durable, lock, IoError};

/// The file of trust records, in the person's troupe config folder.
pub const TRUST_FILE_NAME: &str = "trusted.json";
/// The largest trust file read (a record is a few hundred bytes).
pub const MAX_TRUST_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// The variable that trusts the workspace for one command (CI), like `--trust-workspace`.
pub const TRUST_WORKSPACE_VAR: &str = "TROUPE_TRUST_WORKSPACE";

const FORMAT_VERSION: u32 = 1;

/// What a trust-requiring value would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrustKind {
    /// A `[[hooks]]` command.
    Hook,
    /// An `[[mcp_servers]]` entry (a command started, or a server called).
    McpServer,
    /// `[sandbox] hooks = false`: hook commands unconfined.
    UnconfinedHooks,
    /// The model server the key is sent to.
    ModelServer,
    /// The provider (which key is sent, and how).
    Provider,
    /// `[store] url`: the database a team's state goes to.
    Store,
    /// `[team] remote`: the git remote teammates' branches are pushed to.
    GitRemote,
    /// An `allow` rule.
    Allow,
    /// `[sandbox] mode = "off"`, or a mode looser than the person's own `config.toml` says.
    SandboxMode,
    /// `[sandbox] network` other than off.
    Network,
    /// A `[prices]` entry below troupe's built-in table (it loosens `--max-cost`).
    Prices,
    /// `[approvals] route = "lead"`: a model answers teammates' permission asks.
    ApprovalRoute,
    /// `[telemetry]`: where the run's traces are sent, and whether contents go with them.
    Telemetry,
}

impl TrustKind {
    /// How the review names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hook => "hook",
            Self::McpServer => "mcp_server",
            Self::UnconfinedHooks => "unconfined_hooks",
            Self::ModelServer => "model_server",
            Self::Provider => "provider",
            Self::Store => "store",
            Self::GitRemote => "git_remote",
            Self::Allow => "allow",
            Self::SandboxMode => "sandbox_mode",
            Self::Network => "network",
            Self::Prices => "prices",
            Self::ApprovalRoute => "approval_route",
            Self::Telemetry => "telemetry",
        }
    }
}

/// One value of a workspace's files that waits for trust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustItem {
    /// The file it is in, by name: `troupe.toml` or `.env`.
    pub file: &'static str,
    pub kind: TrustKind,
    /// What it would do, one line for the person: `runs hook UserPromptSubmit: echo hi`.
    pub shown: String,
    /// Everything about it that matters, for the digest (an MCP server's environment values
    /// included, which are not shown).
    pub content: String,
}

impl TrustItem {
    pub fn new(file: &'static str, kind: TrustKind, shown: String, content: String) -> Self {
        Self {
            file,
            kind,
            shown,
            content,
        }
    }
}

/// The digest of each file's trust-requiring content (files without any are absent):
/// `sha256:<hex>` of the items in file order.
pub fn digests(items: &[TrustItem]) -> BTreeMap<String, String> {
    let mut hashers: BTreeMap<&str, Sha256> = BTreeMap::new();
    for item in items {
        let hasher = hashers.entry(item.file).or_default();
        // Length-prefixed fields: no two different lists hash the same bytes.
        for part in [item.kind.as_str(), item.content.as_str()] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
    }
    hashers
        .into_iter()
        .map(|(file, hasher)| {
            let hex: String = hasher
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            (file.to_owned(), format!("sha256:{hex}"))
        })
        .collect()
}

/// Whether a workspace's trust-requiring values may apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustState {
    /// Its files hold nothing that needs trust.
    NotNeeded,
    /// The person trusted exactly this content.
    Trusted,
    /// Never trusted (or the trust was revoked).
    Untrusted,
    /// Trusted once, but the trust-requiring content changed since.
    Changed,
}

impl TrustState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotNeeded => "not_needed",
            Self::Trusted => "trusted",
            Self::Untrusted => "untrusted",
            Self::Changed => "changed",
        }
    }

    /// Whether the trust-requiring values apply.
    pub fn allows(self) -> bool {
        matches!(self, Self::NotNeeded | Self::Trusted)
    }
}

/// Why the trust records could not be read or written (`trust_record`).
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("{path} is not a trust record troupe wrote: {reason}; remove it to start over")]
    Corrupt { path: String, reason: String },
    #[error("the workspace path {0} is not UTF-8: troupe cannot record trust for it")]
    PathNotUtf8(String),
    #[error(
        "no config folder to record trust in: set HOME or XDG_CONFIG_HOME (or pass \
         --trust-workspace for this command)"
    )]
    NoConfigFolder,
}

impl ErrorCode for TrustError {
    fn code(&self) -> &'static str {
        "trust_record"
    }
}

/// The person's trust records: `<config folder>/troupe/trusted.json`, changed under
/// `trusted.json.lock` and replaced atomically.
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
}

/// The file as written.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    version: u32,
    workspaces: BTreeMap<String, TrustRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustRecord {
    trusted_at_utc: String,
    digests: BTreeMap<String, String>,
}

impl TrustStore {
    /// The records at `path`.
    pub fn at(path: PathBuf) -> Self {
        Self { path }
    }

    /// The person's records, next to their `config.toml`; none without a config folder.
    pub fn user() -> Option<Self> {
        let config = super::user_config_path()?;
        Some(Self::at(config.with_file_name(TRUST_FILE_NAME)))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The state of `workspace` (its real path) whose files hold `items`.
    pub fn state(&self, workspace: &Path, items: &[TrustItem]) -> Result<TrustState, TrustError> {
        if items.is_empty() {
            return Ok(TrustState::NotNeeded);
        }
        let key = key_of(workspace)?;
        Ok(match self.read()?.workspaces.get(&key) {
            None => TrustState::Untrusted,
            Some(record) if record.digests == digests(items) => TrustState::Trusted,
            Some(_) => TrustState::Changed,
        })
    }

    /// Records that the person trusts `workspace` with exactly `items` (`at_utc` for the
    /// record). Nothing to trust: any earlier record is removed.
    pub fn record(
        &self,
        workspace: &Path,
        items: &[TrustItem],
        at_utc: &str,
    ) -> Result<(), TrustError> {
        let key = key_of(workspace)?;
        self.change(|file| {
            if items.is_empty() {
                file.workspaces.remove(&key);
            } else {
                file.workspaces.insert(
                    key.clone(),
                    TrustRecord {
                        trusted_at_utc: at_utc.to_owned(),
                        digests: digests(items),
                    },
                );
            }
        })
        .map(|_| ())
    }

    /// Forgets `workspace`; whether there was a record.
    pub fn revoke(&self, workspace: &Path) -> Result<bool, TrustError> {
        let key = key_of(workspace)?;
        self.change(|file| file.workspaces.remove(&key).is_some())
    }

    /// When `workspace` was trusted, if it is recorded.
    pub fn trusted_at(&self, workspace: &Path) -> Result<Option<String>, TrustError> {
        let key = key_of(workspace)?;
        Ok(self
            .read()?
            .workspaces
            .get(&key)
            .map(|r| r.trusted_at_utc.clone()))
    }

    /// Reads, changes and writes the records under their lock.
    fn change<T>(&self, edit: impl FnOnce(&mut TrustFile) -> T) -> Result<T, TrustError> {
        let folder = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(folder).map_err(|e| IoError::new("create folder", folder, e))?;
        let _guard = lock::lock_exclusive(&self.path.with_extension("json.lock"))?;
        let mut file = self.read()?;
        let out = edit(&mut file);
        file.version = FORMAT_VERSION;
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| self.corrupt(e))?;
        bytes.push(b'\n');
        durable::replace(&self.path, &bytes)?;
        Ok(out)
    }

    fn read(&self) -> Result<TrustFile, TrustError> {
        let Some(bytes) = read_regular(&self.path, Links::Refuse, MAX_TRUST_FILE_BYTES)? else {
            return Ok(TrustFile {
                version: FORMAT_VERSION,
                ..TrustFile::default()
            });
        };
        let file: TrustFile = troupe_wire::strict::from_json_bytes(&bytes, "trust record")
            .map_err(|e| self.corrupt(e))?;
        if file.version != FORMAT_VERSION {
            return Err(self.corrupt(format!(
                "version {} (this troupe writes {FORMAT_VERSION})",
                file.version
            )));
        }
        Ok(file)
    }

    fn corrupt(&self, reason: impl std::fmt::Display) -> TrustError {
        TrustError::Corrupt {
            path: self.path.display().to_string(),
            reason: reason.to_string(),
        }
    }
}

fn key_of(workspace: &Path) -> Result<String, TrustError> {
    workspace
        .to_str()
        .map(str::to_owned)
        .ok_or_else(|| TrustError::PathNotUtf8(workspace.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(command: &str) -> TrustItem {
        TrustItem::new(
            "troupe.toml",
            TrustKind::Hook,
            format!("runs {command}"),
            command.into(),
        )
    }

    #[test]
    fn digests_follow_the_content_per_file() {
        let a = digests(&[hook("echo a")]);
        assert_eq!(a, digests(&[hook("echo a")]));
        assert_ne!(a, digests(&[hook("echo b")]));
        assert_ne!(a, digests(&[hook("echo a"), hook("echo a")]));
        // The split between fields is part of what is hashed.
        let joined = TrustItem::new("troupe.toml", TrustKind::Hook, "x".into(), "ab".into());
        assert_ne!(digests(&[joined]), digests(&[hook("a")]));
        let dotenv = TrustItem::new(".env", TrustKind::ModelServer, "x".into(), "u".into());
        let both = digests(&[hook("echo a"), dotenv]);
        assert_eq!(both.len(), 2);
        assert_eq!(both["troupe.toml"], a["troupe.toml"]);
        assert!(digests(&[]).is_empty());
    }

    #[test]
    fn records_states_and_revocation() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::at(dir.path().join("troupe").join(TRUST_FILE_NAME));
        let ws = Path::new("/work/project");
        let items = [hook("echo a")];
        assert_eq!(store.state(ws, &[]).unwrap(), TrustState::NotNeeded);
        assert_eq!(store.state(ws, &items).unwrap(), TrustState::Untrusted);
        store
            .record(ws, &items, "2026-12-02T00:00:00.000Z")
            .unwrap();
        assert_eq!(store.state(ws, &items).unwrap(), TrustState::Trusted);
        assert_eq!(
            store.state(Path::new("/work/other"), &items).unwrap(),
            TrustState::Untrusted
        );
        assert_eq!(
            store.state(ws, &[hook("echo b")]).unwrap(),
            TrustState::Changed
        );
        assert!(store.revoke(ws).unwrap());
        assert!(!store.revoke(ws).unwrap());
        assert_eq!(store.state(ws, &items).unwrap(), TrustState::Untrusted);
    }

    #[test]
    fn a_bad_record_file_is_refused_not_taken_as_trust() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TRUST_FILE_NAME);
        let store = TrustStore::at(path.clone());
        let ws = Path::new("/w");
        let items = [hook("echo a")];
        let digest = &digests(&items)["troupe.toml"];
        let duplicate = format!(
            r#"{{"version":1,"workspaces":{{"/w":{{"trusted_at_utc":"t","digests":{{"troupe.toml":"x","troupe.toml":"{digest}"}}}}}}}}"#
        );
        for bad in [
            "",
            "{",
            "[]",
            r#"{"version":2,"workspaces":{}}"#,
            &duplicate,
        ] {
            std::fs::write(&path, bad).unwrap();
            let err = store.state(ws, &items).unwrap_err();
            assert_eq!(err.code(), "trust_record", "{bad}: {err}");
        }
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/dev/null", &path).unwrap();
        assert!(store.state(ws, &items).is_err());
    }
}
