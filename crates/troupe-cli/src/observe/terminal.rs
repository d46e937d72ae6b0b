//! The one place stderr is written while spinners may be on it: the tracing output goes through
//! here, so that a warning lands above the spinners instead of through them.

use std::io::Write;
use std::sync::Mutex;

use indicatif::MultiProgress;

/// The spinners on stderr, while there are any.
static ACTIVE: Mutex<Option<MultiProgress>> = Mutex::new(None);

/// Records (or forgets) the spinners that stderr writes must step around.
pub fn set_active(multi: Option<MultiProgress>) {
    *troupe::sync::lock(&ACTIVE) = multi;
}

/// Writes `bytes` to stderr, above the spinners if there are any.
pub fn write_stderr(bytes: &[u8]) {
    let active = troupe::sync::lock(&ACTIVE).clone();
    let write = || {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(bytes).and_then(|()| err.flush());
    };
    match active {
        Some(multi) => multi.suspend(write),
        None => write(),
    }
}

/// A tracing writer: buffers one record and writes it whole through [`write_stderr`].
#[derive(Default)]
pub struct StderrRecord(Vec<u8>);

impl Write for StderrRecord {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for StderrRecord {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            write_stderr(&self.0);
        }
    }
}
