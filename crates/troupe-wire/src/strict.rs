//! Exact-key-set reading of JSON objects.
//!
//! serde's derive treats a missing `Option` field as `None` and ignores unknown keys unless told
//! otherwise; the on-disk formats want both refused. [`StrictObject`] takes each expected key
//! once and [`StrictObject::finish`] refuses whatever is left.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::WireError;

pub struct StrictObject {
    what: &'static str,
    fields: Map<String, Value>,
}

impl StrictObject {
    pub fn new(what: &'static str, value: Value) -> Result<Self, WireError> {
        match value {
            Value::Object(fields) => Ok(Self { what, fields }),
            other => Err(WireError::new(format!(
                "{what}: expected a JSON object, found {}",
                kind_of(&other)
            ))),
        }
    }

    /// Takes a key that must be present (its value may be `null` only if `T` accepts it).
    pub fn take<T: DeserializeOwned>(&mut self, key: &str) -> Result<T, WireError> {
        let value = self
            .fields
            .remove(key)
            .ok_or_else(|| WireError::new(format!("{}: missing key {key:?}", self.what)))?;
        serde_json::from_value(value)
            .map_err(|e| WireError::new(format!("{}: key {key:?}: {e}", self.what)))
    }

    /// Takes a key that must be present, as raw JSON.
    pub fn take_value(&mut self, key: &str) -> Result<Value, WireError> {
        self.fields
            .remove(key)
            .ok_or_else(|| WireError::new(format!("{}: missing key {key:?}", self.what)))
    }

    /// Refuses any key that was not taken.
    pub fn finish(self) -> Result<(), WireError> {
        let mut extra: Vec<&String> = self.fields.keys().collect();
        if extra.is_empty() {
            return Ok(());
        }
        extra.sort();
        Err(WireError::new(format!(
            "{}: unknown keys {extra:?}",
            self.what
        )))
    }

    pub fn has(&self, key: &str) -> bool {
        self.fields.contains_key(key)
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses bytes as UTF-8 JSON, with one clear error for either failure.
pub fn parse_json_bytes(bytes: &[u8], what: &str) -> Result<Value, WireError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| WireError::new(format!("{what}: not UTF-8 ({e})")))?;
    serde_json::from_str(text).map_err(|e| WireError::new(format!("{what}: invalid JSON ({e})")))
}
