//! Which events are lines of the terminal view. The others (claims, acks, releases, model calls
//! starting and finishing, tools starting) only drive the spinners, and are lines with `-v`; so
//! are the run's start and end (the prompt is the user's own, the end is the answer or the
//! `troupe: …` error line).

use troupe::store::events::kinds;

/// Kinds shown as lines without `-v`.
const SHOWN: [&str; 23] = [
    kinds::MODEL_RETRY,
    kinds::MODEL_FALLBACK,
    kinds::MODEL_CALL_FAILED,
    kinds::ASSISTANT_TEXT,
    kinds::TOOL_FINISHED,
    kinds::MESSAGE_SENT,
    kinds::MESSAGE_QUARANTINED,
    kinds::REQUEST_CREATED,
    kinds::REQUEST_ANSWERED,
    kinds::REQUEST_CONSUMED,
    kinds::REQUEST_EXPIRED,
    kinds::APPROVAL_ANSWERED,
    kinds::PERMISSION_REQUESTED,
    kinds::PERMISSION_EXPIRED,
    kinds::COMPACTION,
    kinds::JOB_STARTED,
    kinds::JOB_ENDED,
    kinds::CRON_FIRED,
    kinds::TEAMMATE_SPAWNED,
    kinds::TEAMMATE_STATUS,
    kinds::USER_MESSAGE,
    kinds::TEAMMATE_MERGED,
    kinds::MERGE_CONFLICT,
];

/// Whether an event of `kind` is a line (`verbose`: every kind is).
pub fn shown(kind: &str, verbose: bool) -> bool {
    verbose || SHOWN.contains(&kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinner_input_is_shown_only_when_verbose() {
        for kind in [
            kinds::MESSAGE_CLAIMED,
            kinds::MESSAGE_ACKED,
            kinds::MESSAGE_RELEASED,
            kinds::MODEL_CALL_STARTED,
            kinds::MODEL_CALL_FINISHED,
            kinds::TOOL_STARTED,
        ] {
            assert!(!shown(kind, false), "{kind}");
            assert!(shown(kind, true), "{kind}");
        }
        assert!(shown(kinds::TOOL_FINISHED, false));
        assert!(shown(kinds::MODEL_RETRY, false));
        assert!(shown("some_new_kind", true));
    }
}
