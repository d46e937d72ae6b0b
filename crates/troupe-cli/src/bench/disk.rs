//! The disk's own limit: a loop of durable file replaces (write, fsync, rename, folder fsync),
//! the same primitive every troupe write uses.

use std::path::Path;
use std::time::{Duration, Instant};

use troupe::store::durable;

/// Durable replaces per second, measured for about `budget` (at least 50 writes).
pub fn durable_writes_per_s(dir: &Path, budget: Duration) -> Result<f64, String> {
    let scratch = tempfile::tempdir_in(dir).map_err(|e| format!("disk scratch folder: {e}"))?;
    let target = scratch.path().join("probe.json");
    let payload = vec![b'x'; 300];
    let start = Instant::now();
    let mut writes = 0usize;
    while writes < 50 || start.elapsed() < budget {
        durable::replace(&target, &payload).map_err(|e| e.to_string())?;
        writes += 1;
    }
    Ok(super::stats::per_second(writes, start.elapsed()))
}
