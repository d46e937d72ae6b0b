//! Non-blank text, the content of every message and request.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::WireError;

/// Text with at least one non-whitespace character.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Content(String);

impl Content {
    pub fn parse(raw: impl Into<String>) -> Result<Self, WireError> {
        let raw = raw.into();
        if raw.trim().is_empty() {
            Err(WireError::new("content must not be blank"))
        } else {
            Ok(Self(raw))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Content {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(raw).map_err(serde::de::Error::custom)
    }
}
