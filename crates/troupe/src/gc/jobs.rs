//! Finished background jobs' records ([`Kind::Jobs`]): a running job's record stays; a record
//! that does not read is left as it is (and said so). A job's output artifact goes with the
//! artifacts once no record or conversation refers to it (`artifacts`).

use crate::jobs::record::{JobRecord, JobState};
use crate::layout::Layout;
use crate::store::read::{read_regular, Links, MAX_STATE_FILE_BYTES};
use crate::store::retention::files::{listing, prune_folder};
use crate::store::retention::{needed, Kind, Report, Sweep};
use crate::store::IoError;

/// Why a job record is kept when it does not read.
pub const UNREADABLE: &str = "the record does not read";

pub fn prune(layout: &Layout, sweep: &Sweep, report: &mut Report) -> Result<(), IoError> {
    let dir = layout.jobs_dir();
    let mut files = Vec::new();
    let mut reasons = std::collections::HashMap::new();
    for mut file in listing(&dir)? {
        if !file.name.to_string_lossy().ends_with(".json") {
            continue;
        }
        let record = read_regular(&file.path, Links::Refuse, MAX_STATE_FILE_BYTES)?
            .map(|bytes| JobRecord::from_json_bytes(&bytes));
        match record {
            Some(Ok(JobRecord {
                state:
                    JobState::Finished {
                        finished_at_utc, ..
                    },
                ..
            })) => file.modified = finished_at_utc,
            Some(Ok(_)) => {
                reasons.insert(file.name.clone(), needed::UNFINISHED_JOB);
            }
            Some(Err(_)) | None => {
                reasons.insert(file.name.clone(), UNREADABLE);
            }
        }
        files.push(file);
    }
    prune_folder(&dir, Kind::Jobs, sweep, report, files, |file| {
        reasons.get(&file.name).copied()
    })
}
