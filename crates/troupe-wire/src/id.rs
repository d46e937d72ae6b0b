//! Message and request ids: canonical lowercase hyphenated UUIDs, version 4 or 7 (SPEC §2).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

use crate::WireError;

/// Parses a canonical id: 36 chars, lowercase hex, hyphenated, version 4 or 7, RFC 4122 variant.
/// No braces, no `urn:`, no upper case, no simple (unhyphenated) form.
pub fn parse_canonical_uuid(raw: &str, what: &str) -> Result<Uuid, WireError> {
    let refuse = |why: &str| {
        WireError::new(format!(
            "invalid {what} {raw:?}: {why} (expected a canonical lowercase hyphenated UUID v4 or v7)"
        ))
    };
    if raw.len() != 36 {
        return Err(refuse("wrong length"));
    }
    let uuid = Uuid::try_parse(raw).map_err(|_| refuse("not a UUID"))?;
    if uuid.hyphenated().to_string() != raw {
        return Err(refuse("not in canonical form"));
    }
    match uuid.get_version_num() {
        4 | 7 => {}
        _ => return Err(refuse("unsupported version")),
    }
    if uuid.get_variant() != uuid::Variant::RFC4122 {
        return Err(refuse("unsupported variant"));
    }
    Ok(uuid)
}

macro_rules! uuid_id {
    ($name:ident, $what:literal) => {
        #[doc = concat!("A canonical ", $what, " id.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Uuid);

        impl $name {
            pub fn parse(raw: &str) -> Result<Self, WireError> {
                parse_canonical_uuid(raw, concat!($what, " id")).map(Self)
            }

            /// Wraps a UUID, refusing versions other than 4 and 7.
            pub fn from_uuid(uuid: Uuid) -> Result<Self, WireError> {
                Self::parse(&uuid.hyphenated().to_string())
            }

            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = WireError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(&self.0.hyphenated())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                Self::parse(&raw).map_err(serde::de::Error::custom)
            }
        }
    };
}

uuid_id!(MessageId, "message");
uuid_id!(RequestId, "request");

/// How many hex digits a short request id has.
pub const SHORT_REQUEST_ID_LEN: usize = 8;

impl RequestId {
    /// The id a person reads and types: the last [`SHORT_REQUEST_ID_LEN`] hex digits. A UUIDv7
    /// starts with its millisecond timestamp, so the first digits of requests made close
    /// together are the same; the last ones are random (in a v4 id too), so they tell them
    /// apart.
    pub fn short(&self) -> String {
        let mut full = self.to_string();
        full.split_off(full.len().saturating_sub(SHORT_REQUEST_ID_LEN))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_request_id_is_the_random_tail() {
        let a = RequestId::parse("01890a5d-ac96-774b-bcce-b302099a8057").unwrap();
        let b = RequestId::parse("01890a5d-ac96-774b-8a01-5c61d0e3f2a9").unwrap();
        assert_eq!(a.short(), "099a8057");
        assert_ne!(a.short(), b.short());
    }

    #[test]
    fn accepts_canonical_v4_and_v7() {
        assert!(MessageId::parse("0b7e3c1a-2f4d-4c6e-9a8b-1c2d3e4f5a6b").is_ok());
        assert!(RequestId::parse("01890a5d-ac96-774b-bcce-b302099a8057").is_ok());
    }

    #[test]
    fn refuses_non_canonical() {
        for bad in [
            "0B7E3C1A-2F4D-4C6E-9A8B-1C2D3E4F5A6B",
            "0b7e3c1a2f4d4c6e9a8b1c2d3e4f5a6b",
            "{0b7e3c1a-2f4d-4c6e-9a8b-1c2d3e4f5a6b}",
            "urn:uuid:0b7e3c1a-2f4d-4c6e-9a8b-1c2d3e4f5a6b",
            "0b7e3c1a-2f4d-1c6e-9a8b-1c2d3e4f5a6b", // v1
            "0b7e3c1a-2f4d-4c6e-1a8b-1c2d3e4f5a6b", // NCS variant
            "req-001",
            "abc123",
            "",
        ] {
            assert!(MessageId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn round_trips() {
        let raw = "0b7e3c1a-2f4d-4c6e-9a8b-1c2d3e4f5a6b";
        let id = RequestId::parse(raw).ok();
        assert_eq!(id.map(|i| i.to_string()).as_deref(), Some(raw));
    }
}
