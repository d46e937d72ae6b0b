//! Strict JSON: no duplicate keys, and exact key sets.
//!
//! serde_json keeps the last of two equal keys in an object and drops the first without a word,
//! so `{"recipient":"alice","recipient":"bob"}` would read as a message for bob. Every format troupe
//! reads (mailbox messages, `state.json`, the archive, `team.json`, `cron.json`, tasks, job
//! records, transcripts, the scripted model file) is parsed through [`parse_json_bytes`],
//! [`from_json_bytes`] or [`StrictValue`], which refuse a repeated key at any depth, naming it.
//!
//! serde's derive treats a missing `Option` field as `None` and ignores unknown keys unless told
//! otherwise; the on-disk formats want both refused. [`StrictObject`] takes each expected key
//! once and [`StrictObject::finish`] refuses whatever is left.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
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

/// A JSON value read with every object's keys unique, at any depth. Deserializing one fails
/// with `duplicate key "<key>"` (serde_json adds the line and column) at the first repeat.
#[derive(Debug, Clone, PartialEq)]
pub struct StrictValue(pub Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        StrictValue::deserialize(d).map(|v| v.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        let mut seen = HashSet::new();
        while let Some(key) = access.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            let StrictValue(value) = access.next_value()?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

/// `"<what>: "`, or nothing when the caller names the file itself (`what` empty).
fn prefix(what: &str) -> String {
    if what.is_empty() {
        String::new()
    } else {
        format!("{what}: ")
    }
}

fn utf8<'a>(bytes: &'a [u8], what: &str) -> Result<&'a str, WireError> {
    std::str::from_utf8(bytes)
        .map_err(|e| WireError::new(format!("{}not UTF-8 ({e})", prefix(what))))
}

/// `what: invalid JSON (…)` for a syntax error, `what: duplicate key "k" at …` (or another
/// data error) for the rest.
fn json_error(what: &str, e: &serde_json::Error) -> WireError {
    match e.classify() {
        serde_json::error::Category::Data => WireError::new(format!("{}{e}", prefix(what))),
        _ => WireError::new(format!("{}invalid JSON ({e})", prefix(what))),
    }
}

/// Parses bytes as UTF-8 JSON whose objects have unique keys, with one clear error for each
/// failure.
pub fn parse_json_bytes(bytes: &[u8], what: &str) -> Result<Value, WireError> {
    parse_json_str(utf8(bytes, what)?, what)
}

/// [`parse_json_bytes`] on text.
pub fn parse_json_str(text: &str, what: &str) -> Result<Value, WireError> {
    serde_json::from_str::<StrictValue>(text)
        .map(|v| v.0)
        .map_err(|e| json_error(what, &e))
}

/// Deserializes a `T` from UTF-8 JSON bytes, refusing duplicate keys at any depth first. The
/// typed parse reads the text itself, so its errors keep their line and column. An empty `what`
/// leaves the message unprefixed, for callers whose error names the file already.
pub fn from_json_bytes<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, WireError> {
    from_json_str(utf8(bytes, what)?, what)
}

/// [`from_json_bytes`] on text.
pub fn from_json_str<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, WireError> {
    parse_json_str(text, what)?;
    serde_json::from_str(text).map_err(|e| json_error(what, &e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth_naming_the_key() {
        for (text, key) in [
            (r#"{"a":1,"a":2}"#, "a"),
            (r#"{"a":{"b":[{"c":1,"c":1}]}}"#, "c"),
            (r#"[{"x":null,"y":0,"x":null}]"#, "x"),
            (r#"{"\u0061":1,"a":2}"#, "a"),
        ] {
            let err = parse_json_str(text, "thing").unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("thing: duplicate key \"{key}\"")),
                "{text}: {err}"
            );
            let typed = from_json_str::<Value>(text, "thing")
                .unwrap_err()
                .to_string();
            assert!(typed.contains("duplicate key"), "{typed}");
        }
    }

    #[test]
    fn unique_keys_parse_as_serde_json_would() {
        let text = r#"{"a":[1,-2,3.5,true,null,"s"],"b":{"a":{}},"c":18446744073709551615}"#;
        let expected: Value = serde_json::from_str(text).unwrap();
        assert_eq!(parse_json_str(text, "t").unwrap(), expected);
        assert_eq!(parse_json_bytes(text.as_bytes(), "t").unwrap(), expected);
        assert_eq!(
            from_json_str::<Value>(text, "t").unwrap(),
            json!({"a":[1,-2,3.5,true,null,"s"],"b":{"a":{}},"c":18446744073709551615u64})
        );
    }

    #[test]
    fn syntax_and_encoding_errors_say_so() {
        let err = parse_json_bytes(b"{\"a\":", "t").unwrap_err().to_string();
        assert!(err.starts_with("t: invalid JSON ("), "{err}");
        let err = parse_json_bytes(b"\xff", "t").unwrap_err().to_string();
        assert!(err.starts_with("t: not UTF-8"), "{err}");
        let err = from_json_bytes::<Value>(b"{\"a\":1,\"a\":1}", "").unwrap_err();
        assert!(err.0.starts_with("duplicate key \"a\" at line 1"), "{err}");
    }
}
