//! The ids of a run's trace, derived, never stored: every process of a run computes the same
//! ones from what it already knows, so nothing on disk or in a message changes (SPEC §3.1).
//!
//! - the **trace id** from the run's key ([`RunKey`]): a run's own id for a team on files; the
//!   team and its lead's registry id for a shared team, which each `troupe worker` reads
//!   from the team's worker registry;
//! - the **root span id** (the run's span, every turn's parent) from the same key;
//! - a **message span id** from a message id alone: the sender's `send_message` span has it,
//!   and the turn that handles the message links to it.

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
use sha2::{Digest, Sha256};
use troupe_wire::MessageId;

/// What names one run, for its trace: the same in the lead and in every worker of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunKey(String);

impl RunKey {
    /// A run of a team on files: the run's own id.
    pub fn run(run_id: &str) -> Self {
        Self(format!("run\0{run_id}"))
    }

    /// A run of a shared team: the team's key and its lead's id in the worker registry
    /// (one per lead process, so two runs of one team are two traces).
    pub fn shared(team: &str, lead: &str) -> Self {
        Self(format!("team\0{team}\0{lead}"))
    }

    /// The run's trace id.
    pub fn trace_id(&self) -> TraceId {
        TraceId::from_bytes(digest::<16>("trace", &self.0))
    }

    /// The id of the run's own span, the parent of every turn.
    pub fn root_span_id(&self) -> SpanId {
        SpanId::from_bytes(digest::<8>("root", &self.0))
    }

    /// The run's span, as a parent or a link target.
    pub fn root_context(&self) -> SpanContext {
        remote(self.trace_id(), self.root_span_id())
    }
}

/// The span id of the span that sent `message`.
pub fn message_span_id(message: MessageId) -> SpanId {
    SpanId::from_bytes(digest::<8>("message", &message.to_string()))
}

/// A span of another process (or one already ended), to parent or link to.
pub fn remote(trace_id: TraceId, span_id: SpanId) -> SpanContext {
    SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    )
}

/// A fresh random span id (never the invalid all-zero one).
pub fn random_span_id() -> SpanId {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let mut id = [0u8; 8];
    id.copy_from_slice(&bytes[..8]);
    nonzero(&mut id);
    SpanId::from_bytes(id)
}

/// The first `N` bytes of SHA-256 over a purpose and a value, never all zero (an invalid id).
fn digest<const N: usize>(purpose: &str, value: &str) -> [u8; N] {
    let mut hasher = Sha256::new();
    hasher.update(b"troupe.telemetry\0");
    hasher.update(purpose.as_bytes());
    hasher.update(b"\0");
    hasher.update(value.as_bytes());
    let full = hasher.finalize();
    let mut out = [0u8; N];
    out.copy_from_slice(&full[..N]);
    nonzero(&mut out);
    out
}

fn nonzero(bytes: &mut [u8]) {
    if bytes.iter().all(|&b| b == 0) {
        if let Some(last) = bytes.last_mut() {
            *last = 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_process_of_a_run_derives_the_same_ids_and_other_runs_others() {
        let lead = RunKey::shared("team-a", "host1-42-abc");
        let worker = RunKey::shared("team-a", "host1-42-abc");
        assert_eq!(lead.trace_id(), worker.trace_id());
        assert_eq!(lead.root_span_id(), worker.root_span_id());
        assert_ne!(
            lead.trace_id(),
            RunKey::shared("team-a", "host1-43-abd").trace_id()
        );
        assert_ne!(lead.trace_id(), RunKey::run("team-a").trace_id());
        assert_ne!(lead.trace_id(), TraceId::INVALID);
        let message = MessageId::parse("0190f5e2-8c1a-7cc0-9b3e-4b8f7a9d2c11").unwrap();
        assert_eq!(message_span_id(message), message_span_id(message));
        assert_ne!(message_span_id(message), SpanId::INVALID);
        assert_ne!(random_span_id(), random_span_id());
    }
}
