//! The versioned protocol snapshot, `.troupe/protocol/state.json` (SPEC §5).

use std::collections::HashSet;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::strict::{parse_json_bytes, StrictObject};
use crate::{ProtocolRequest, WireError};

/// A snapshot whose every invariant holds: known version, valid requests, unique ids, array in
/// creation order (non-decreasing `created_at_utc`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProtocolSnapshot {
    requests: Vec<ProtocolRequest>,
}

impl ProtocolSnapshot {
    pub const VERSION: u64 = 1;

    pub fn new(requests: Vec<ProtocolRequest>) -> Result<Self, WireError> {
        let mut seen = HashSet::with_capacity(requests.len());
        let mut previous = None;
        for request in &requests {
            if !seen.insert(request.id()) {
                return Err(WireError::new(format!(
                    "state: request id {} appears twice",
                    request.id()
                )));
            }
            if let Some(previous) = previous {
                if request.created_at_utc() < previous {
                    return Err(WireError::new(format!(
                        "state: request {} was created at {} before the request preceding it \
                         ({previous}): the array must be in creation order",
                        request.id(),
                        request.created_at_utc()
                    )));
                }
            }
            previous = Some(request.created_at_utc());
        }
        Ok(Self { requests })
    }

    pub fn requests(&self) -> &[ProtocolRequest] {
        &self.requests
    }

    pub fn into_requests(self) -> Vec<ProtocolRequest> {
        self.requests
    }

    pub fn from_json_bytes(bytes: &[u8]) -> Result<Self, WireError> {
        let mut obj = StrictObject::new("state", parse_json_bytes(bytes, "state")?)?;
        let version: u64 = obj.take("version")?;
        if version != Self::VERSION {
            return Err(WireError::new(format!(
                "state: unsupported version {version} (this troupe reads version {})",
                Self::VERSION
            )));
        }
        let requests = match obj.take_value("requests")? {
            Value::Array(items) => items
                .into_iter()
                .map(ProtocolRequest::from_value)
                .collect::<Result<Vec<_>, _>>()?,
            _ => return Err(WireError::new("state: \"requests\" must be an array")),
        };
        obj.finish()?;
        Self::new(requests)
    }

    pub fn to_json_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }
}

impl Serialize for ProtocolSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("version", &Self::VERSION)?;
        map.serialize_entry("requests", &self.requests)?;
        map.end()
    }
}
