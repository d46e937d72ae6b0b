//! Protocol requests (SPEC §5): a request, its closed state, and its resolution.

use std::fmt;

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::strict::{StrictObject, StrictValue};
use crate::{AgentName, Content, MessageId, ProtocolMessageKind, RequestId, UtcTime, WireError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    Shutdown,
    PlanApproval,
    /// A tool call the policy sent to `ask` (SPEC §13): its sender is the calling agent, its
    /// target whoever answers for the team (`user`, or the lead when asks are routed to it).
    Permission,
}

impl RequestKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Shutdown => "shutdown",
            Self::PlanApproval => "plan_approval",
            Self::Permission => "permission",
        }
    }
    pub fn request_message_kind(&self) -> ProtocolMessageKind {
        match self {
            Self::Shutdown => ProtocolMessageKind::ShutdownRequest,
            Self::PlanApproval => ProtocolMessageKind::PlanApprovalRequest,
            Self::Permission => ProtocolMessageKind::PermissionRequest,
        }
    }
    pub fn response_message_kind(&self) -> ProtocolMessageKind {
        match self {
            Self::Shutdown => ProtocolMessageKind::ShutdownResponse,
            Self::PlanApproval => ProtocolMessageKind::PlanApprovalResponse,
            Self::Permission => ProtocolMessageKind::PermissionResponse,
        }
    }
}

/// How a request was answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resolution {
    /// The response message that resolved it: a retry of the same message is idempotent, a
    /// different message for the same request is a duplicate.
    pub message_id: MessageId,
    pub approved: bool,
    pub content: Content,
    pub resolved_at_utc: UtcTime,
}

/// The closed state of a request: a pending request has no resolution, a resolved one always
/// has one, so the JSON's `status` + `resolution` pair cannot disagree in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestState {
    Pending,
    Resolved(Resolution),
}

/// The status as stored (`pending | approved | rejected`) or as shown (`expired` is a view of a
/// pending request past its window; the store never writes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestStatus {
    Pending,
    Approved,
    Rejected,
    Expired,
}

impl RequestStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Expired => "expired",
        }
    }

    pub fn parse(raw: &str) -> Result<Self, WireError> {
        match raw {
            "pending" => Ok(Self::Pending),
            "approved" => Ok(Self::Approved),
            "rejected" => Ok(Self::Rejected),
            "expired" => Ok(Self::Expired),
            other => Err(WireError::new(format!(
                "unknown status {other:?}: expected pending, approved, rejected or expired"
            ))),
        }
    }
}

impl fmt::Display for RequestStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A registered request. Fields are private: [`ProtocolRequest::new_pending`] and the parser are
/// the only constructors, and both check every invariant of SPEC §5.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolRequest {
    id: RequestId,
    kind: RequestKind,
    sender: AgentName,
    target: AgentName,
    content: Content,
    created_at_utc: UtcTime,
    expires_at_utc: UtcTime,
    state: RequestState,
}

impl ProtocolRequest {
    pub fn new_pending(
        id: RequestId,
        kind: RequestKind,
        sender: AgentName,
        target: AgentName,
        content: Content,
        created_at_utc: UtcTime,
        expires_at_utc: UtcTime,
    ) -> Result<Self, WireError> {
        let request = Self {
            id,
            kind,
            sender,
            target,
            content,
            created_at_utc,
            expires_at_utc,
            state: RequestState::Pending,
        };
        request.check()?;
        Ok(request)
    }

    /// This request, resolved. Checks `created ≤ resolved_at < expires`; it does not check that
    /// the request was pending (the store does, under its lock).
    pub fn resolved(&self, resolution: Resolution) -> Result<Self, WireError> {
        let mut next = self.clone();
        next.state = RequestState::Resolved(resolution);
        next.check()?;
        Ok(next)
    }

    fn check(&self) -> Result<(), WireError> {
        let id = self.id;
        if self.sender == self.target {
            return Err(WireError::new(format!(
                "request {id}: sender and target are both {}",
                self.sender
            )));
        }
        if self.expires_at_utc <= self.created_at_utc {
            return Err(WireError::new(format!(
                "request {id}: expires_at_utc {} is not after created_at_utc {}",
                self.expires_at_utc, self.created_at_utc
            )));
        }
        if let RequestState::Resolved(r) = &self.state {
            if r.resolved_at_utc < self.created_at_utc || r.resolved_at_utc >= self.expires_at_utc {
                return Err(WireError::new(format!(
                    "request {id}: resolved_at_utc {} is outside [created_at_utc {}, expires_at_utc {})",
                    r.resolved_at_utc, self.created_at_utc, self.expires_at_utc
                )));
            }
        }
        Ok(())
    }

    pub fn id(&self) -> RequestId {
        self.id
    }
    pub fn kind(&self) -> RequestKind {
        self.kind
    }
    pub fn sender(&self) -> &AgentName {
        &self.sender
    }
    pub fn target(&self) -> &AgentName {
        &self.target
    }
    pub fn content(&self) -> &Content {
        &self.content
    }
    pub fn created_at_utc(&self) -> UtcTime {
        self.created_at_utc
    }
    pub fn expires_at_utc(&self) -> UtcTime {
        self.expires_at_utc
    }
    pub fn state(&self) -> &RequestState {
        &self.state
    }
    pub fn resolution(&self) -> Option<&Resolution> {
        match &self.state {
            RequestState::Pending => None,
            RequestState::Resolved(r) => Some(r),
        }
    }
    pub fn is_pending(&self) -> bool {
        matches!(self.state, RequestState::Pending)
    }

    /// The status as stored: pending, approved or rejected.
    pub fn stored_status(&self) -> RequestStatus {
        match &self.state {
            RequestState::Pending => RequestStatus::Pending,
            RequestState::Resolved(r) if r.approved => RequestStatus::Approved,
            RequestState::Resolved(_) => RequestStatus::Rejected,
        }
    }

    /// The status as seen at `now`: a pending request at or past `expires_at_utc` is `expired`.
    pub fn status_at(&self, now: UtcTime) -> RequestStatus {
        match self.stored_status() {
            RequestStatus::Pending if now >= self.expires_at_utc => RequestStatus::Expired,
            status => status,
        }
    }

    /// Whether `now` is inside the response window `[created, expires)`.
    pub fn is_open_at(&self, now: UtcTime) -> bool {
        now < self.expires_at_utc
    }

    pub fn from_value(value: Value) -> Result<Self, WireError> {
        let mut obj = StrictObject::new("protocol request", value)?;
        let id: RequestId = obj.take("id")?;
        let kind: RequestKind = obj.take("kind")?;
        let sender: AgentName = obj.take("sender")?;
        let target: AgentName = obj.take("target")?;
        let status_raw: String = obj.take("status")?;
        let content: Content = obj.take("content")?;
        let created_at_utc: UtcTime = obj.take("created_at_utc")?;
        let expires_at_utc: UtcTime = obj.take("expires_at_utc")?;
        let resolution: Option<Resolution> = obj.take("resolution")?;
        obj.finish()?;
        let state = match (status_raw.as_str(), resolution) {
            ("pending", None) => RequestState::Pending,
            ("approved", Some(r)) if r.approved => RequestState::Resolved(r),
            ("rejected", Some(r)) if !r.approved => RequestState::Resolved(r),
            ("pending", Some(_)) => {
                return Err(WireError::new(format!(
                    "request {id}: pending but carries a resolution"
                )))
            }
            ("approved" | "rejected", None) => {
                return Err(WireError::new(format!(
                    "request {id}: {status_raw} but has no resolution"
                )))
            }
            ("approved" | "rejected", Some(_)) => {
                return Err(WireError::new(format!(
                    "request {id}: status {status_raw} disagrees with resolution.approved"
                )))
            }
            (other, _) => {
                return Err(WireError::new(format!(
                    "request {id}: unknown status {other:?} (stored statuses are pending, approved, rejected)"
                )))
            }
        };
        let request = Self {
            id,
            kind,
            sender,
            target,
            content,
            created_at_utc,
            expires_at_utc,
            state,
        };
        request.check()?;
        Ok(request)
    }
}

impl Serialize for ProtocolRequest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(9))?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("kind", &self.kind)?;
        map.serialize_entry("sender", &self.sender)?;
        map.serialize_entry("target", &self.target)?;
        map.serialize_entry("status", self.stored_status().as_str())?;
        map.serialize_entry("content", &self.content)?;
        map.serialize_entry("created_at_utc", &self.created_at_utc)?;
        map.serialize_entry("expires_at_utc", &self.expires_at_utc)?;
        map.serialize_entry("resolution", &self.resolution())?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for ProtocolRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let StrictValue(value) = StrictValue::deserialize(d)?;
        Self::from_value(value).map_err(serde::de::Error::custom)
    }
}
