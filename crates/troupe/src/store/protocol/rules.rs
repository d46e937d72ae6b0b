//! The matching rules of SPEC §5 as pure functions: does this message fit this request, now?
//!
//! The store looks the request up (a missing id is `NotFound`), then calls one of these under its
//! locks. Keeping them pure lets every rule and the order of the checks be tested without files.
//!
//! Order of the checks for a response (the first failing one is reported):
//! 1. the message is a `*_response` whose kind pairs with the request's kind → else `Mismatch`;
//! 2. its sender is the request's target and its recipient the request's sender → else `Mismatch`;
//! 3. if the request is resolved: by this very message id (same decision and content) → a replay;
//!    by another message → `State` (a duplicate). Replays are honoured even after expiry, because
//!    a retried ack must get the stored result whatever the time;
//! 4. `now` is not before the request's creation → else `ClockBackwards`;
//! 5. `now < expires_at_utc` → else `Expired`.
//!
//! Parties are checked before state so that a message that could never have answered the request
//! is reported as a mismatch, not as a duplicate.

use troupe_wire::{ProtocolMessage, ProtocolRequest, RequestState, Resolution, UtcTime};

use super::ProtocolError;

/// What consuming a response would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Decision {
    /// Resolve the pending request: this is the request after the transition.
    Apply(ProtocolRequest),
    /// The same message already resolved the request; nothing changes.
    Replay,
}

fn mismatch(request: &ProtocolRequest, why: String) -> ProtocolError {
    ProtocolError::Mismatch {
        id: request.id(),
        why,
    }
}

fn state_error(request: &ProtocolRequest, now: UtcTime, why: String) -> ProtocolError {
    ProtocolError::State {
        id: request.id(),
        status: request.status_at(now).as_str().to_owned(),
        why,
    }
}

/// Decides what a `*_response` message does to `request` at `now` (checks in the module's order).
pub(super) fn decide_response(
    request: &ProtocolRequest,
    message: &ProtocolMessage,
    now: UtcTime,
) -> Result<Decision, ProtocolError> {
    let kind = message.kind();
    let expected = request.kind().response_message_kind();
    if kind != expected {
        return Err(mismatch(
            request,
            format!(
                "a {} request is answered by {}, not {}",
                request.kind().as_str(),
                expected.as_str(),
                kind.as_str()
            ),
        ));
    }
    let Some(approved) = message.approved() else {
        return Err(mismatch(
            request,
            format!("{} carries no decision", kind.as_str()),
        ));
    };
    check_parties(request, message, request.target(), request.sender())?;
    if let RequestState::Resolved(resolution) = request.state() {
        if resolution.message_id != message.id() {
            return Err(state_error(
                request,
                now,
                format!(
                    "already resolved by message {}; message {} is a duplicate",
                    resolution.message_id,
                    message.id()
                ),
            ));
        }
        if resolution.approved != approved || &resolution.content != message.content() {
            return Err(state_error(
                request,
                now,
                format!(
                    "message {} resolved it with a different decision or content than it now carries",
                    message.id()
                ),
            ));
        }
        return Ok(Decision::Replay);
    }
    if now < request.created_at_utc() {
        return Err(ProtocolError::ClockBackwards {
            now,
            latest: request.created_at_utc(),
        });
    }
    if !request.is_open_at(now) {
        return Err(ProtocolError::Expired {
            id: request.id(),
            expires_at: request.expires_at_utc(),
        });
    }
    let resolved = request.resolved(Resolution {
        message_id: message.id(),
        approved,
        content: message.content().clone(),
        resolved_at_utc: now,
    })?;
    Ok(Decision::Apply(resolved))
}

/// Checks that a `*_request` message announces `request`: same kind, same parties, still pending
/// and inside its window.
pub(super) fn check_request_message(
    request: &ProtocolRequest,
    message: &ProtocolMessage,
    now: UtcTime,
) -> Result<(), ProtocolError> {
    let kind = message.kind();
    let expected = request.kind().request_message_kind();
    if kind != expected {
        return Err(mismatch(
            request,
            format!(
                "a {} request is announced by {}, not {}",
                request.kind().as_str(),
                expected.as_str(),
                kind.as_str()
            ),
        ));
    }
    check_parties(request, message, request.sender(), request.target())?;
    if !request.is_pending() {
        return Err(state_error(
            request,
            now,
            "it is no longer pending".to_owned(),
        ));
    }
    if !request.is_open_at(now) {
        return Err(ProtocolError::Expired {
            id: request.id(),
            expires_at: request.expires_at_utc(),
        });
    }
    Ok(())
}

fn check_parties(
    request: &ProtocolRequest,
    message: &ProtocolMessage,
    sender: &troupe_wire::AgentName,
    recipient: &troupe_wire::AgentName,
) -> Result<(), ProtocolError> {
    if message.sender() != sender {
        return Err(mismatch(
            request,
            format!(
                "{} must come from {sender}, not {}",
                message.kind().as_str(),
                message.sender()
            ),
        ));
    }
    if message.recipient() != recipient {
        return Err(mismatch(
            request,
            format!(
                "{} must be addressed to {recipient}, not {}",
                message.kind().as_str(),
                message.recipient()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;
    use troupe_wire::message::Envelope;
    use troupe_wire::{
        AgentName, Content, MessageId, ProtocolMessageKind, RequestId, RequestKind, RequestStatus,
    };

    const CREATED: i64 = 1_785_398_400_000;
    const TTL: i64 = 300_000;

    fn at(offset: i64) -> UtcTime {
        UtcTime::from_unix_millis(CREATED + offset).unwrap()
    }

    fn name(raw: &str) -> AgentName {
        AgentName::parse(raw).unwrap()
    }

    fn mid(n: u8) -> MessageId {
        MessageId::parse(&format!("00000000-0000-4000-8000-0000000000{n:02x}")).unwrap()
    }

    fn shutdown() -> ProtocolRequest {
        ProtocolRequest::new_pending(
            RequestId::parse("00000000-0000-4000-8000-000000000001").unwrap(),
            RequestKind::Shutdown,
            name("lead"),
            name("alice"),
            Content::parse("please stop").unwrap(),
            at(0),
            at(TTL),
        )
        .unwrap()
    }

    fn response(
        request: &ProtocolRequest,
        id: MessageId,
        kind: ProtocolMessageKind,
        from: &str,
        to: &str,
        approved: bool,
    ) -> ProtocolMessage {
        let envelope = Envelope {
            id,
            sender: name(from),
            recipient: name(to),
            content: Content::parse("ok").unwrap(),
            created_at_utc: at(1),
        };
        ProtocolMessage::response(envelope, kind, request.id(), approved).unwrap()
    }

    fn good(request: &ProtocolRequest, id: MessageId) -> ProtocolMessage {
        response(
            request,
            id,
            ProtocolMessageKind::ShutdownResponse,
            "alice",
            "lead",
            true,
        )
    }

    fn code(result: Result<Decision, ProtocolError>) -> &'static str {
        use crate::error::ErrorCode;
        match result {
            Ok(Decision::Apply(_)) => "apply",
            Ok(Decision::Replay) => "replay",
            Err(e) => e.code(),
        }
    }

    #[test]
    fn applies_a_matching_response_with_its_resolution() {
        let request = shutdown();
        let decision = decide_response(&request, &good(&request, mid(9)), at(10)).unwrap();
        let Decision::Apply(resolved) = decision else {
            panic!("expected apply")
        };
        assert_eq!(resolved.stored_status(), RequestStatus::Approved);
        assert_eq!(
            resolved.resolution().cloned(),
            Some(Resolution {
                message_id: mid(9),
                approved: true,
                content: Content::parse("ok").unwrap(),
                resolved_at_utc: at(10),
            })
        );
    }

    #[test]
    fn window_is_half_open() {
        let request = shutdown();
        let msg = good(&request, mid(9));
        assert_eq!(code(decide_response(&request, &msg, at(0))), "apply");
        assert_eq!(code(decide_response(&request, &msg, at(TTL - 1))), "apply");
        assert_eq!(
            code(decide_response(&request, &msg, at(TTL))),
            "protocol_expired"
        );
        assert_eq!(
            code(decide_response(&request, &msg, at(-1))),
            "protocol_clock_error"
        );
    }

    #[test]
    fn kind_and_parties_must_match() {
        let request = shutdown();
        let cases = [
            (ProtocolMessageKind::PlanApprovalResponse, "alice", "lead"),
            (ProtocolMessageKind::ShutdownResponse, "bob", "lead"),
            (ProtocolMessageKind::ShutdownResponse, "alice", "bob"),
            (ProtocolMessageKind::ShutdownResponse, "lead", "alice"),
        ];
        for (kind, from, to) in cases {
            let msg = response(&request, mid(9), kind, from, to, true);
            assert_eq!(
                code(decide_response(&request, &msg, at(1))),
                "protocol_mismatch",
                "{kind:?} {from}->{to}"
            );
        }
    }

    #[test]
    fn replay_needs_the_same_message_and_wins_over_expiry() {
        let request = shutdown();
        let Decision::Apply(resolved) =
            decide_response(&request, &good(&request, mid(9)), at(5)).unwrap()
        else {
            panic!("expected apply")
        };
        let same = good(&request, mid(9));
        assert_eq!(code(decide_response(&resolved, &same, at(6))), "replay");
        assert_eq!(
            code(decide_response(&resolved, &same, at(TTL * 10))),
            "replay"
        );
        let other = good(&request, mid(10));
        assert_eq!(
            code(decide_response(&resolved, &other, at(6))),
            "protocol_state_error"
        );
        let flipped = response(
            &request,
            mid(9),
            ProtocolMessageKind::ShutdownResponse,
            "alice",
            "lead",
            false,
        );
        assert_eq!(
            code(decide_response(&resolved, &flipped, at(6))),
            "protocol_state_error"
        );
    }

    #[test]
    fn mismatch_is_reported_before_duplicate() {
        let request = shutdown();
        let Decision::Apply(resolved) =
            decide_response(&request, &good(&request, mid(9)), at(5)).unwrap()
        else {
            panic!("expected apply")
        };
        let wrong_sender = response(
            &request,
            mid(10),
            ProtocolMessageKind::ShutdownResponse,
            "bob",
            "lead",
            true,
        );
        assert_eq!(
            code(decide_response(&resolved, &wrong_sender, at(6))),
            "protocol_mismatch"
        );
    }

    #[test]
    fn request_messages_are_checked_the_same_way() {
        let request = shutdown();
        let envelope = |from: &str, to: &str| Envelope {
            id: mid(3),
            sender: name(from),
            recipient: name(to),
            content: Content::parse("please stop").unwrap(),
            created_at_utc: at(0),
        };
        let announce = |kind, from, to| {
            ProtocolMessage::request(envelope(from, to), kind, request.id()).unwrap()
        };
        let ok = announce(ProtocolMessageKind::ShutdownRequest, "lead", "alice");
        assert!(check_request_message(&request, &ok, at(1)).is_ok());
        let code_of = |r: Result<(), ProtocolError>| {
            use crate::error::ErrorCode;
            r.err().map(|e| e.code())
        };
        assert_eq!(
            code_of(check_request_message(&request, &ok, at(TTL))),
            Some("protocol_expired")
        );
        let wrong_kind = announce(ProtocolMessageKind::PlanApprovalRequest, "lead", "alice");
        assert_eq!(
            code_of(check_request_message(&request, &wrong_kind, at(1))),
            Some("protocol_mismatch")
        );
        let wrong_parties = announce(ProtocolMessageKind::ShutdownRequest, "alice", "lead");
        assert_eq!(
            code_of(check_request_message(&request, &wrong_parties, at(1))),
            Some("protocol_mismatch")
        );
        let answer = good(&request, mid(9));
        assert_eq!(
            code_of(check_request_message(&request, &answer, at(1))),
            Some("protocol_mismatch")
        );
        let Decision::Apply(resolved) = decide_response(&request, &answer, at(2)).unwrap() else {
            panic!("expected apply")
        };
        assert_eq!(
            code_of(check_request_message(&resolved, &ok, at(3))),
            Some("protocol_state_error")
        );
    }
}
