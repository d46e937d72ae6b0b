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
//!
//! Sending an answer ([`check_answer`]) follows the same order, with "already answered" in place
//! of the replay/duplicate step: an answer recorded in `answers/` (sent, perhaps not consumed
//! yet) or a resolution refuses every other answer, whatever its decision.
//!
//! A `*_request` message ([`check_request_message`]) must carry the kind, parties *and content*
//! that were registered: the content is what the recipient acts on, so a message that names a
//! real request but says something else is a mismatch.

use troupe_wire::{
    AgentName, MessageId, ProtocolMessage, ProtocolRequest, RequestState, Resolution, UtcTime,
};

use super::ProtocolError;

/// What consuming a response would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
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

/// What sending an answer would do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnswerCheck {
    /// No answer yet: record this one, then deliver it.
    New,
    /// This very message is the recorded answer (or the one that resolved the request): deliver
    /// it again if it is missing; nothing else changes.
    Again,
}

fn state_error(request: &ProtocolRequest, now: UtcTime, why: String) -> ProtocolError {
    ProtocolError::State {
        id: request.id(),
        status: request.status_at(now).as_str().to_owned(),
        why,
    }
}

/// Checks that `message` is a response of the kind that answers `request`, from its target to its
/// sender, and returns its decision.
fn check_pairing(
    request: &ProtocolRequest,
    message: &ProtocolMessage,
) -> Result<bool, ProtocolError> {
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
    Ok(approved)
}

/// The refusal of a second answer, naming the first.
fn already_answered(
    request: &ProtocolRequest,
    approved: bool,
    by: &AgentName,
    message_id: MessageId,
) -> ProtocolError {
    ProtocolError::Answered {
        id: request.id(),
        approved,
        by: by.clone(),
        message_id,
    }
}

/// The refusal of an answer to `request`, which `recorded` answered already.
pub(crate) fn answered_by(request: &ProtocolRequest, recorded: &ProtocolMessage) -> ProtocolError {
    // A record passed `check_recorded`, so it carries a decision.
    already_answered(
        request,
        recorded.approved().unwrap_or(false),
        recorded.sender(),
        recorded.id(),
    )
}

/// Decides whether `message` may be sent as *the* answer to `request` at `now`, given the answer
/// recorded for it, if any (checks in the module's order).
pub(crate) fn check_answer(
    request: &ProtocolRequest,
    message: &ProtocolMessage,
    recorded: Option<&ProtocolMessage>,
    now: UtcTime,
) -> Result<AnswerCheck, ProtocolError> {
    let approved = check_pairing(request, message)?;
    if let Some(recorded) = recorded {
        if recorded.id() != message.id() {
            return Err(answered_by(request, recorded));
        }
        if recorded != message {
            return Err(state_error(
                request,
                now,
                format!(
                    "message {} was recorded as its answer with a different decision or content",
                    message.id()
                ),
            ));
        }
        return Ok(AnswerCheck::Again);
    }
    if let RequestState::Resolved(resolution) = request.state() {
        if resolution.message_id == message.id()
            && resolution.approved == approved
            && &resolution.content == message.content()
        {
            return Ok(AnswerCheck::Again);
        }
        return Err(already_answered(
            request,
            resolution.approved,
            request.target(),
            resolution.message_id,
        ));
    }
    check_window(request, now)?;
    Ok(AnswerCheck::New)
}

/// Steps 4 and 5: the clock has not moved back past the request's creation, and `now` is inside
/// its response window `[created, expires)`.
fn check_window(request: &ProtocolRequest, now: UtcTime) -> Result<(), ProtocolError> {
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
    Ok(())
}

/// Checks that an answer record read from `answers/` answers `request` (kind, parties, id).
pub(crate) fn check_recorded(
    request: &ProtocolRequest,
    recorded: &ProtocolMessage,
) -> Result<(), ProtocolError> {
    if recorded.request_id() != request.id() {
        return Err(mismatch(
            request,
            format!(
                "the recorded answer names request {}",
                recorded.request_id()
            ),
        ));
    }
    check_pairing(request, recorded).map(|_| ())
}

/// Decides what a `*_response` message does to `request` at `now` (checks in the module's order).
pub(crate) fn decide_response(
    request: &ProtocolRequest,
    message: &ProtocolMessage,
    now: UtcTime,
) -> Result<Decision, ProtocolError> {
    let approved = check_pairing(request, message)?;
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
    check_window(request, now)?;
    let resolved = request.resolved(Resolution {
        message_id: message.id(),
        approved,
        content: message.content().clone(),
        resolved_at_utc: now,
    })?;
    Ok(Decision::Apply(resolved))
}

/// What consuming `message` would give, changing nothing (`validate_response`): the resolved
/// request, or the stored one for a replay.
pub(crate) fn would_consume(
    request: ProtocolRequest,
    message: &ProtocolMessage,
    now: UtcTime,
) -> Result<super::Consumed, ProtocolError> {
    Ok(match decide_response(&request, message, now)? {
        Decision::Replay => super::Consumed {
            request,
            replayed: true,
        },
        Decision::Apply(resolved) => super::Consumed {
            request: resolved,
            replayed: false,
        },
    })
}

/// Checks that a `*_request` message announces `request`: same kind, same parties, still pending
/// and inside its window.
pub(crate) fn check_request_message(
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
    if message.content() != request.content() {
        return Err(mismatch(
            request,
            format!(
                "{}'s content differs from the registered request's",
                message.kind().as_str()
            ),
        ));
    }
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
    sender: &AgentName,
    recipient: &AgentName,
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

    fn answer_code(result: Result<AnswerCheck, ProtocolError>) -> &'static str {
        use crate::error::ErrorCode;
        match result {
            Ok(AnswerCheck::New) => "new",
            Ok(AnswerCheck::Again) => "again",
            Err(e) => e.code(),
        }
    }

    #[test]
    fn an_answer_is_new_only_while_nothing_answered_the_request() {
        let request = shutdown();
        let first = good(&request, mid(9));
        let other = good(&request, mid(10));
        let flipped = response(
            &request,
            mid(10),
            ProtocolMessageKind::ShutdownResponse,
            "alice",
            "lead",
            false,
        );
        assert_eq!(
            answer_code(check_answer(&request, &first, None, at(1))),
            "new"
        );
        // Recorded (sent, not consumed yet): the same message again, nothing else.
        let recorded = Some(&first);
        assert_eq!(
            answer_code(check_answer(&request, &first, recorded, at(2))),
            "again"
        );
        for second in [&other, &flipped] {
            let refused = check_answer(&request, second, recorded, at(2));
            assert_eq!(answer_code(refused), "protocol_state_error");
        }
        let Err(ProtocolError::Answered {
            approved,
            by,
            message_id,
            ..
        }) = check_answer(&request, &flipped, recorded, at(2))
        else {
            panic!("expected Answered")
        };
        assert_eq!((approved, by, message_id), (true, name("alice"), mid(9)));
        // Recorded answers win over expiry: the refusal names the answer.
        assert_eq!(
            answer_code(check_answer(&request, &other, recorded, at(TTL))),
            "protocol_state_error"
        );
        // Resolved (consumed): likewise, from the resolution.
        let Decision::Apply(resolved) = decide_response(&request, &first, at(3)).unwrap() else {
            panic!("expected apply")
        };
        assert_eq!(
            answer_code(check_answer(&resolved, &first, None, at(4))),
            "again"
        );
        assert_eq!(
            answer_code(check_answer(&resolved, &flipped, None, at(4))),
            "protocol_state_error"
        );
        // Pairing first, window last.
        let wrong = response(
            &request,
            mid(11),
            ProtocolMessageKind::ShutdownResponse,
            "bob",
            "lead",
            true,
        );
        assert_eq!(
            answer_code(check_answer(&request, &wrong, recorded, at(2))),
            "protocol_mismatch"
        );
        assert_eq!(
            answer_code(check_answer(&request, &first, None, at(TTL))),
            "protocol_expired"
        );
        assert_eq!(
            answer_code(check_answer(&request, &first, None, at(-1))),
            "protocol_clock_error"
        );
    }

    #[test]
    fn a_record_must_answer_its_request() {
        let request = shutdown();
        assert!(check_recorded(&request, &good(&request, mid(9))).is_ok());
        let backwards = response(
            &request,
            mid(9),
            ProtocolMessageKind::ShutdownResponse,
            "lead",
            "alice",
            true,
        );
        assert!(check_recorded(&request, &backwards).is_err());
    }

    #[test]
    fn a_request_message_must_say_what_was_registered() {
        let request = shutdown();
        let saying = |text: &str| {
            let envelope = Envelope {
                id: mid(3),
                sender: name("lead"),
                recipient: name("alice"),
                content: Content::parse(text).unwrap(),
                created_at_utc: at(0),
            };
            ProtocolMessage::request(envelope, ProtocolMessageKind::ShutdownRequest, request.id())
                .unwrap()
        };
        assert!(check_request_message(&request, &saying("please stop"), at(1)).is_ok());
        let other =
            check_request_message(&request, &saying("please stop and wipe the disk"), at(1));
        let Err(ProtocolError::Mismatch { why, .. }) = other else {
            panic!("expected a mismatch")
        };
        assert_eq!(
            why,
            "shutdown_request's content differs from the registered request's"
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
