//! Agent names: lowercase slugs, `^[a-z0-9]+(?:-[a-z0-9]+)*$`, 1–64 chars (SPEC §2).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::WireError;

/// A valid agent name. The only way to build one is [`AgentName::parse`] (or [`AgentName::lead`]),
/// so a name that could escape a folder (`..`, `/`) or differ only in case cannot exist.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentName(String);

impl AgentName {
    /// The lead's name.
    pub const LEAD: &'static str = "lead";
    /// The sender of messages from a person (`troupe send`, the web view); never an agent.
    pub const USER: &'static str = "user";
    /// The name events about the run itself carry; never an agent.
    pub const TROUPE: &'static str = "troupe";
    pub const MAX_LEN: usize = 64;

    pub fn lead() -> Self {
        Self(Self::LEAD.to_owned())
    }

    pub fn parse(raw: &str) -> Result<Self, WireError> {
        if is_slug(raw) {
            Ok(Self(raw.to_owned()))
        } else {
            Err(WireError::new(format!(
                "invalid agent name {raw:?}: expected a lowercase slug of 1-64 characters \
                 (a-z, 0-9, single hyphens between them)"
            )))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_lead(&self) -> bool {
        self.0 == Self::LEAD
    }

    /// The name of a person sending messages.
    pub fn user() -> Self {
        Self(Self::USER.to_owned())
    }

    pub fn is_user(&self) -> bool {
        self.0 == Self::USER
    }

    /// `user` and `troupe` name no agent: no teammate may take them.
    pub fn is_reserved(&self) -> bool {
        self.0 == Self::USER || self.0 == Self::TROUPE
    }
}

/// `^[a-z0-9]+(?:-[a-z0-9]+)*$` and 1–64 chars, without a regex engine.
pub fn is_slug(raw: &str) -> bool {
    if raw.is_empty() || raw.len() > AgentName::MAX_LEN {
        return false;
    }
    let bytes = raw.as_bytes();
    if bytes[0] == b'-' || bytes[bytes.len() - 1] == b'-' {
        return false;
    }
    let mut previous_hyphen = false;
    for &b in bytes {
        match b {
            b'a'..=b'z' | b'0'..=b'9' => previous_hyphen = false,
            b'-' if !previous_hyphen => previous_hyphen = true,
            _ => return false,
        }
    }
    true
}

impl fmt::Display for AgentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad` honours width and alignment, so names line up in tables.
        f.pad(&self.0)
    }
}

impl AsRef<str> for AgentName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for AgentName {
    type Err = WireError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for AgentName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for AgentName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_slugs() {
        for ok in [
            "lead",
            "alice",
            "a",
            "a-b",
            "bob-2",
            "x1-y2-z3",
            &"a".repeat(64),
        ] {
            assert!(AgentName::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_everything_else() {
        for bad in [
            "",
            "-a",
            "a-",
            "a--b",
            "Alice",
            "al ice",
            "../x",
            "a/b",
            "..",
            ".",
            "a_b",
            "é",
            &"a".repeat(65),
            "a\0",
            "a\n",
        ] {
            assert!(AgentName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn display_pads() {
        let name = AgentName::parse("bob").ok();
        assert_eq!(
            name.map(|n| format!("[{n:<5}]")).as_deref(),
            Some("[bob  ]")
        );
    }

    #[test]
    fn deserialize_checks() {
        assert!(serde_json::from_str::<AgentName>("\"Bob\"").is_err());
        assert_eq!(
            serde_json::from_str::<AgentName>("\"bob\"").ok(),
            AgentName::parse("bob").ok()
        );
    }
}
