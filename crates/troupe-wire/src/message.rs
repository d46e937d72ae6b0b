//! Mailbox messages (SPEC §3.1): ordinary and protocol, two separate types.
//!
//! An ordinary message has exactly the keys `id, sender, recipient, kind, content,
//! created_at_utc`; a protocol message has those plus `request_id` and `approved`. `approved` is
//! `null` on requests and a boolean on responses — the constructors and the parser enforce it.

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::strict::{parse_json_bytes, StrictObject, StrictValue};
use crate::{AgentName, Content, MessageId, RequestId, UtcTime, WireError};

/// Kinds of ordinary messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrdinaryKind {
    /// Work for a teammate (its first task, delivered when it is spawned).
    Task,
    /// Free text between agents.
    Message,
    /// A teammate's final answer to a task or message, sent back to the lead.
    Result,
}

impl OrdinaryKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Task => "task",
            Self::Message => "message",
            Self::Result => "result",
        }
    }
}

/// Kinds of protocol messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtocolMessageKind {
    ShutdownRequest,
    ShutdownResponse,
    PlanApprovalRequest,
    PlanApprovalResponse,
    /// A tool call waiting for a person's (or the lead's) answer (SPEC §13).
    PermissionRequest,
    PermissionResponse,
}

impl ProtocolMessageKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::ShutdownRequest => "shutdown_request",
            Self::ShutdownResponse => "shutdown_response",
            Self::PlanApprovalRequest => "plan_approval_request",
            Self::PlanApprovalResponse => "plan_approval_response",
            Self::PermissionRequest => "permission_request",
            Self::PermissionResponse => "permission_response",
        }
    }

    pub fn is_response(&self) -> bool {
        matches!(
            self,
            Self::ShutdownResponse | Self::PlanApprovalResponse | Self::PermissionResponse
        )
    }

    /// The request kind this message belongs to.
    pub fn request_kind(&self) -> crate::RequestKind {
        match self {
            Self::ShutdownRequest | Self::ShutdownResponse => crate::RequestKind::Shutdown,
            Self::PlanApprovalRequest | Self::PlanApprovalResponse => {
                crate::RequestKind::PlanApproval
            }
            Self::PermissionRequest | Self::PermissionResponse => crate::RequestKind::Permission,
        }
    }
}

/// A `task`, `message` or `result`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrdinaryMessage {
    pub id: MessageId,
    pub sender: AgentName,
    pub recipient: AgentName,
    pub kind: OrdinaryKind,
    pub content: Content,
    pub created_at_utc: UtcTime,
}

/// A message of the shutdown or plan-approval protocol. Fields are private so that `approved`
/// always agrees with the kind; build one with [`ProtocolMessage::request`] or
/// [`ProtocolMessage::response`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolMessage {
    id: MessageId,
    sender: AgentName,
    recipient: AgentName,
    kind: ProtocolMessageKind,
    content: Content,
    created_at_utc: UtcTime,
    request_id: RequestId,
    approved: Option<bool>,
}

/// The parts shared by both kinds of message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub id: MessageId,
    pub sender: AgentName,
    pub recipient: AgentName,
    pub content: Content,
    pub created_at_utc: UtcTime,
}

impl ProtocolMessage {
    /// A `*_request` message (`approved` is null).
    pub fn request(
        envelope: Envelope,
        kind: ProtocolMessageKind,
        request_id: RequestId,
    ) -> Result<Self, WireError> {
        if kind.is_response() {
            return Err(WireError::new(format!(
                "{} is a response kind, not a request kind",
                kind.as_str()
            )));
        }
        Ok(Self::from_parts(envelope, kind, request_id, None))
    }

    /// A `*_response` message carrying the decision.
    pub fn response(
        envelope: Envelope,
        kind: ProtocolMessageKind,
        request_id: RequestId,
        approved: bool,
    ) -> Result<Self, WireError> {
        if !kind.is_response() {
            return Err(WireError::new(format!(
                "{} is a request kind, not a response kind",
                kind.as_str()
            )));
        }
        Ok(Self::from_parts(envelope, kind, request_id, Some(approved)))
    }

    fn from_parts(
        envelope: Envelope,
        kind: ProtocolMessageKind,
        request_id: RequestId,
        approved: Option<bool>,
    ) -> Self {
        Self {
            id: envelope.id,
            sender: envelope.sender,
            recipient: envelope.recipient,
            kind,
            content: envelope.content,
            created_at_utc: envelope.created_at_utc,
            request_id,
            approved,
        }
    }

    pub fn id(&self) -> MessageId {
        self.id
    }
    pub fn sender(&self) -> &AgentName {
        &self.sender
    }
    pub fn recipient(&self) -> &AgentName {
        &self.recipient
    }
    pub fn kind(&self) -> ProtocolMessageKind {
        self.kind
    }
    pub fn content(&self) -> &Content {
        &self.content
    }
    pub fn created_at_utc(&self) -> UtcTime {
        self.created_at_utc
    }
    pub fn request_id(&self) -> RequestId {
        self.request_id
    }
    /// `None` on requests, the decision on responses.
    pub fn approved(&self) -> Option<bool> {
        self.approved
    }
}

/// Either kind of mailbox message: the union the mailbox files hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailboxMessage {
    Ordinary(OrdinaryMessage),
    Protocol(ProtocolMessage),
}

impl MailboxMessage {
    pub fn id(&self) -> MessageId {
        match self {
            Self::Ordinary(m) => m.id,
            Self::Protocol(m) => m.id,
        }
    }
    pub fn sender(&self) -> &AgentName {
        match self {
            Self::Ordinary(m) => &m.sender,
            Self::Protocol(m) => &m.sender,
        }
    }
    pub fn recipient(&self) -> &AgentName {
        match self {
            Self::Ordinary(m) => &m.recipient,
            Self::Protocol(m) => &m.recipient,
        }
    }
    pub fn content(&self) -> &Content {
        match self {
            Self::Ordinary(m) => &m.content,
            Self::Protocol(m) => &m.content,
        }
    }
    pub fn created_at_utc(&self) -> UtcTime {
        match self {
            Self::Ordinary(m) => m.created_at_utc,
            Self::Protocol(m) => m.created_at_utc,
        }
    }
    /// The `kind` string as written on disk.
    pub fn kind_str(&self) -> &'static str {
        match self {
            Self::Ordinary(m) => m.kind.as_str(),
            Self::Protocol(m) => m.kind.as_str(),
        }
    }

    /// Parses a mailbox file's bytes strictly.
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Self, WireError> {
        Self::from_value(parse_json_bytes(bytes, "mailbox message")?)
    }

    pub fn from_value(value: Value) -> Result<Self, WireError> {
        let mut obj = StrictObject::new("mailbox message", value)?;
        let id: MessageId = obj.take("id")?;
        let sender: AgentName = obj.take("sender")?;
        let recipient: AgentName = obj.take("recipient")?;
        let kind_raw: String = obj.take("kind")?;
        let content: Content = obj.take("content")?;
        let created_at_utc: UtcTime = obj.take("created_at_utc")?;
        let envelope = Envelope {
            id,
            sender,
            recipient,
            content,
            created_at_utc,
        };
        let ordinary = match kind_raw.as_str() {
            "task" => Some(OrdinaryKind::Task),
            "message" => Some(OrdinaryKind::Message),
            "result" => Some(OrdinaryKind::Result),
            _ => None,
        };
        if let Some(kind) = ordinary {
            obj.finish()?;
            return Ok(Self::Ordinary(OrdinaryMessage {
                id: envelope.id,
                sender: envelope.sender,
                recipient: envelope.recipient,
                kind,
                content: envelope.content,
                created_at_utc: envelope.created_at_utc,
            }));
        }
        let kind = match kind_raw.as_str() {
            "shutdown_request" => ProtocolMessageKind::ShutdownRequest,
            "shutdown_response" => ProtocolMessageKind::ShutdownResponse,
            "plan_approval_request" => ProtocolMessageKind::PlanApprovalRequest,
            "plan_approval_response" => ProtocolMessageKind::PlanApprovalResponse,
            "permission_request" => ProtocolMessageKind::PermissionRequest,
            "permission_response" => ProtocolMessageKind::PermissionResponse,
            other => {
                return Err(WireError::new(format!(
                    "mailbox message: unknown kind {other:?}"
                )))
            }
        };
        let request_id: RequestId = obj.take("request_id")?;
        let approved: Option<bool> = obj.take("approved")?;
        obj.finish()?;
        match (kind.is_response(), approved) {
            (false, None) => ProtocolMessage::request(envelope, kind, request_id),
            (true, Some(decision)) => {
                ProtocolMessage::response(envelope, kind, request_id, decision)
            }
            (false, Some(_)) => Err(WireError::new(format!(
                "mailbox message: {} must carry \"approved\": null",
                kind.as_str()
            ))),
            (true, None) => Err(WireError::new(format!(
                "mailbox message: {} must carry \"approved\": true or false",
                kind.as_str()
            ))),
        }
        .map(Self::Protocol)
    }

    /// The canonical bytes written to a mailbox file.
    pub fn to_json_bytes(&self) -> Vec<u8> {
        // Serializing these types cannot fail: every field is a string, bool or null.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

impl Serialize for MailboxMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Ordinary(m) => {
                let mut map = s.serialize_map(Some(6))?;
                map.serialize_entry("id", &m.id)?;
                map.serialize_entry("sender", &m.sender)?;
                map.serialize_entry("recipient", &m.recipient)?;
                map.serialize_entry("kind", m.kind.as_str())?;
                map.serialize_entry("content", &m.content)?;
                map.serialize_entry("created_at_utc", &m.created_at_utc)?;
                map.end()
            }
            Self::Protocol(m) => {
                let mut map = s.serialize_map(Some(8))?;
                map.serialize_entry("id", &m.id)?;
                map.serialize_entry("sender", &m.sender)?;
                map.serialize_entry("recipient", &m.recipient)?;
                map.serialize_entry("kind", m.kind.as_str())?;
                map.serialize_entry("content", &m.content)?;
                map.serialize_entry("created_at_utc", &m.created_at_utc)?;
                map.serialize_entry("request_id", &m.request_id)?;
                map.serialize_entry("approved", &m.approved)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for MailboxMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let StrictValue(value) = StrictValue::deserialize(d)?;
        Self::from_value(value).map_err(serde::de::Error::custom)
    }
}

impl From<OrdinaryMessage> for MailboxMessage {
    fn from(m: OrdinaryMessage) -> Self {
        Self::Ordinary(m)
    }
}

impl From<ProtocolMessage> for MailboxMessage {
    fn from(m: ProtocolMessage) -> Self {
        Self::Protocol(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    const ID: &str = "0b7e3c1a-2f4d-4c6e-9a8b-1c2d3e4f5a6b";
    const REQ: &str = "1b7e3c1a-2f4d-4c6e-9a8b-1c2d3e4f5a6b";
    const AT: &str = "2026-07-30T08:00:00.000Z";

    fn ordinary() -> Value {
        json!({"id": ID, "sender": "lead", "recipient": "alice", "kind": "task",
               "content": "do it", "created_at_utc": AT})
    }

    fn protocol(kind: &str, approved: Value) -> Value {
        json!({"id": ID, "sender": "lead", "recipient": "alice", "kind": kind,
               "content": "stop", "created_at_utc": AT, "request_id": REQ, "approved": approved})
    }

    #[test]
    fn ordinary_round_trips_byte_for_byte() {
        let msg = MailboxMessage::from_value(ordinary());
        assert!(msg.is_ok(), "{msg:?}");
        let msg = msg.unwrap_or_else(|_| unreachable!());
        let back: Value = serde_json::from_slice(&msg.to_json_bytes()).unwrap_or_default();
        assert_eq!(back, ordinary());
    }

    #[test]
    fn protocol_round_trips() {
        for (kind, approved) in [
            ("shutdown_request", Value::Null),
            ("plan_approval_request", Value::Null),
            ("shutdown_response", json!(true)),
            ("plan_approval_response", json!(false)),
        ] {
            let value = protocol(kind, approved);
            let msg = MailboxMessage::from_value(value.clone());
            assert!(
                matches!(msg, Ok(MailboxMessage::Protocol(_))),
                "{kind}: {msg:?}"
            );
            let bytes = msg.map(|m| m.to_json_bytes()).unwrap_or_default();
            let back: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            assert_eq!(back, value);
        }
    }

    #[test]
    fn refuses_extra_and_missing_keys() {
        let mut extra = ordinary();
        extra["request_id"] = json!(REQ);
        assert!(MailboxMessage::from_value(extra).is_err());
        let mut missing = ordinary();
        missing.as_object_mut().map(|o| o.remove("content"));
        assert!(MailboxMessage::from_value(missing).is_err());
        let mut no_approved = protocol("shutdown_request", Value::Null);
        no_approved.as_object_mut().map(|o| o.remove("approved"));
        assert!(MailboxMessage::from_value(no_approved).is_err());
    }

    #[test]
    fn approved_must_agree_with_kind() {
        assert!(MailboxMessage::from_value(protocol("shutdown_request", json!(true))).is_err());
        assert!(MailboxMessage::from_value(protocol("shutdown_response", Value::Null)).is_err());
        assert!(
            MailboxMessage::from_value(protocol("plan_approval_response", json!("yes"))).is_err()
        );
    }

    #[test]
    fn refuses_bad_fields() {
        for (key, bad) in [
            ("id", json!("abc")),
            ("sender", json!("Lead")),
            ("recipient", json!("../etc")),
            ("kind", json!("shutdown")),
            ("content", json!("   ")),
            ("created_at_utc", json!("2026-07-30T08:00:00Z")),
        ] {
            let mut v = ordinary();
            v[key] = bad;
            assert!(MailboxMessage::from_value(v).is_err(), "{key}");
        }
    }

    #[test]
    fn refuses_non_utf8_and_truncation() {
        assert!(MailboxMessage::from_json_bytes(b"{\"id\": \"\xff\"}").is_err());
        let full = serde_json::to_vec(&ordinary()).unwrap_or_default();
        assert!(MailboxMessage::from_json_bytes(&full[..full.len() - 3]).is_err());
        assert!(MailboxMessage::from_json_bytes(b"[]").is_err());
    }

    #[test]
    fn refuses_duplicate_keys_even_with_equal_values() {
        let text = ordinary().to_string();
        assert!(MailboxMessage::from_json_bytes(text.as_bytes()).is_ok());
        let twice = text.replacen('{', &format!("{{\"id\":\"{ID}\","), 1);
        let err = MailboxMessage::from_json_bytes(twice.as_bytes()).unwrap_err();
        assert!(err.0.contains("duplicate key \"id\""), "{err}");
        // Also when the message is read as part of a larger document.
        let nested = format!("[{twice}]");
        let err = serde_json::from_str::<Vec<MailboxMessage>>(&nested).unwrap_err();
        assert!(err.to_string().contains("duplicate key \"id\""), "{err}");
    }
}
