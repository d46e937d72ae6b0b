//! Taking troupe's credential variables out of its own process environment.
//!
//! Removing `OPENAI_API_KEY` from the environment of the commands troupe runs is not enough:
//! any command can read `/proc/<troupe's pid>/environ`, and that file shows the environment
//! block the kernel put on troupe's stack at `exec`, not libc's current view. `unsetenv`
//! (`std::env::remove_var`) only drops the pointer to the string; the bytes stay in the block
//! and `/proc` keeps showing them. So [`take_from_environment`] copies each credential into
//! memory, removes the variable, then overwrites the bytes of the original `NAME=value` string
//! with NULs. `/proc/<pid>/environ` then shows a run of NULs where the variable was.
//!
//! It must run first thing in `main`, while the process has one thread: the environment is not
//! thread-safe, and no thread may hold a pointer into it. Values read from `<workspace>/.env`
//! never enter the environment (see `config`), so they need no such care.

use std::ffi::{CStr, OsStr, OsString};
use std::sync::OnceLock;

/// The variables that hold credentials troupe runs with: one per provider (OpenAI, Anthropic,
/// Azure OpenAI), each taken whether or not its provider is the one in use, and the shared
/// store's URL (it may carry the database password), so that no command ever sees any of them.
pub const CREDENTIAL_VARS: [&str; 4] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "TROUPE_STORE_URL",
];

/// The values [`take_from_environment`] took, by variable.
static TAKEN: OnceLock<Vec<(&'static str, OsString)>> = OnceLock::new();

extern "C" {
    /// The C library's environment: a NULL-terminated array of `NAME=value` strings.
    static mut environ: *mut *mut libc::c_char;
}

/// Moves every [`CREDENTIAL_VARS`] variable out of the process environment into memory (see
/// [`taken`]) and wipes its bytes from the environment block. Returns the names it took. A
/// second call takes nothing more.
///
/// # Safety
///
/// The process must have a single thread, and nothing may hold a pointer into the environment
/// (call it first thing in `main`).
pub unsafe fn take_from_environment() -> Vec<&'static str> {
    let mut taken = Vec::new();
    for name in CREDENTIAL_VARS {
        let Some(value) = std::env::var_os(name) else {
            continue;
        };
        // SAFETY: single-threaded by the caller's contract. The strings of this name are found
        // first, unlinked by `remove_var`, then overwritten: nothing points at them any more.
        unsafe {
            let strings = entries_of(name);
            std::env::remove_var(name);
            for (string, len) in strings {
                std::ptr::write_bytes(string, 0, len);
            }
        }
        taken.push((name, value));
    }
    let names = taken.iter().map(|(name, _)| *name).collect();
    if TAKEN.set(taken).is_err() {
        tracing::debug!("credentials were already taken from the environment");
    }
    names
}

/// The value of a credential variable that [`take_from_environment`] took.
pub fn taken(name: &str) -> Option<&'static OsStr> {
    TAKEN
        .get()?
        .iter()
        .find(|(taken, _)| *taken == name)
        .map(|(_, value)| value.as_os_str())
}

/// Every value taken, for the redactor.
pub fn taken_values() -> impl Iterator<Item = &'static OsStr> {
    TAKEN
        .get()
        .into_iter()
        .flatten()
        .map(|(_, value)| value.as_os_str())
}

/// The `NAME=value` strings of `name` in the environment (duplicates included), with their
/// lengths.
///
/// # Safety
///
/// No other thread may change the environment while this runs or while the pointers are used.
unsafe fn entries_of(name: &str) -> Vec<(*mut libc::c_char, usize)> {
    let mut prefix = name.as_bytes().to_vec();
    prefix.push(b'=');
    let mut found = Vec::new();
    // SAFETY: `environ` is a valid NULL-terminated array of valid C strings while no thread
    // changes the environment (the caller's contract).
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let string = CStr::from_ptr(*entry);
            if string.to_bytes().starts_with(&prefix) {
                found.push((*entry, string.to_bytes().len()));
            }
            entry = entry.add(1);
        }
    }
    found
}
