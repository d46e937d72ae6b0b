//! Tool schemas adapted to what each provider accepts, from one source of truth: the JSON
//! Schemas the tools declare ([`crate::model::ToolSpec::parameters`]).
//!
//! - [`SchemaDialect::OpenAi`] and [`SchemaDialect::Anthropic`] take JSON Schema as it is: the
//!   schema is sent unchanged.
//! - [`SchemaDialect::Gemini`]: Gemini's OpenAI-compatible endpoint turns tool schemas into its
//!   own `Schema` message, a subset of OpenAPI 3.0, and refuses the whole request at the first
//!   field it does not know (`Unknown name "exclusiveMinimum"`, `additionalProperties`, …). So
//!   the schema is rewritten to that subset by an allow-list, recursively through
//!   `properties`, `items` and `anyOf`: unknown keywords are dropped; `oneOf` becomes `anyOf`;
//!   `const` becomes a one-value `enum`; a `type` list with `"null"` becomes the other type
//!   plus `nullable`; `exclusiveMinimum: n` becomes `minimum: n + 1` where that is exact (an
//!   integer schema and an integer bound) and is dropped otherwise (likewise
//!   `exclusiveMaximum`); an `enum` that is not all strings and a `format` Gemini does not list
//!   are dropped. Dropping only ever loosens a schema: the tool's own validation still checks
//!   every call against the original.
//!
//! The dialect is chosen from the base URL ([`SchemaDialect::for_base_url`]): Gemini for
//! `generativelanguage.googleapis.com`, OpenAI otherwise; Anthropic's wire format uses its own.

use serde_json::{Map, Value};

/// Which subset of JSON Schema a provider accepts for tool parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaDialect {
    /// JSON Schema as is (OpenAI and compatible servers).
    #[default]
    OpenAi,
    /// Gemini's OpenAPI 3.0 subset.
    Gemini,
    /// JSON Schema as is (Anthropic Messages' `input_schema`).
    Anthropic,
}

/// The host of Gemini's OpenAI-compatible endpoint.
pub const GEMINI_HOST: &str = "generativelanguage.googleapis.com";

/// The keywords Gemini's `Schema` knows (besides those rewritten).
const GEMINI_KEYWORDS: [&str; 17] = [
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "anyOf",
    "items",
];

/// The `format`s Gemini lists.
const GEMINI_FORMATS: [&str; 6] = ["enum", "date-time", "float", "double", "int32", "int64"];

impl SchemaDialect {
    /// Gemini for its compatible endpoint's host, OpenAI for any other (or unparsable) URL.
    pub fn for_base_url(base_url: &str) -> Self {
        let host = reqwest::Url::parse(base_url)
            .ok()
            .and_then(|url| url.host_str().map(str::to_ascii_lowercase));
        match host.as_deref() {
            Some(GEMINI_HOST) => Self::Gemini,
            _ => Self::OpenAi,
        }
    }
}

/// `schema` as `dialect` accepts it.
pub fn adapt(schema: &Value, dialect: SchemaDialect) -> Value {
    match dialect {
        SchemaDialect::OpenAi | SchemaDialect::Anthropic => schema.clone(),
        SchemaDialect::Gemini => gemini(schema),
    }
}

fn gemini(schema: &Value) -> Value {
    let Value::Object(fields) = schema else {
        // `true`/`false` schemas and junk: an unconstrained schema.
        return Value::Object(Map::new());
    };
    let mut out = Map::new();
    for (key, value) in fields {
        match key.as_str() {
            "properties" => {
                if let Value::Object(properties) = value {
                    let adapted = properties
                        .iter()
                        .map(|(name, property)| (name.clone(), gemini(property)))
                        .collect();
                    out.insert(key.clone(), Value::Object(adapted));
                }
            }
            "items" => {
                // A tuple (`items: [...]`) is not expressible: its first schema stands for all.
                let item = match value {
                    Value::Array(items) => items.first().cloned().unwrap_or(Value::Bool(true)),
                    other => other.clone(),
                };
                out.insert(key.clone(), gemini(&item));
            }
            "anyOf" | "oneOf" => {
                if let Value::Array(options) = value {
                    let options: Vec<Value> = options.iter().map(gemini).collect();
                    out.insert("anyOf".to_owned(), Value::Array(options));
                }
            }
            "type" => match value {
                Value::String(_) => {
                    out.insert(key.clone(), value.clone());
                }
                Value::Array(types) => {
                    let named: Vec<&Value> = types
                        .iter()
                        .filter(|t| t.as_str() != Some("null"))
                        .collect();
                    if named.len() < types.len() {
                        out.insert("nullable".to_owned(), Value::Bool(true));
                    }
                    if let [only] = named.as_slice() {
                        out.insert(key.clone(), (*only).clone());
                    }
                }
                _ => {}
            },
            "const" => {
                if let Value::String(_) = value {
                    out.insert("enum".to_owned(), Value::Array(vec![value.clone()]));
                }
            }
            "enum"
                if value
                    .as_array()
                    .is_some_and(|values| values.iter().all(Value::is_string)) =>
            {
                out.insert(key.clone(), value.clone());
            }
            "format" if value.as_str().is_some_and(|f| GEMINI_FORMATS.contains(&f)) => {
                out.insert(key.clone(), value.clone());
            }
            "minimum" | "maximum" if value.is_number() => {
                out.insert(key.clone(), value.clone());
            }
            // Refused as they are; the exclusive bounds are rewritten below.
            "enum" | "format" | "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
            }
            known if GEMINI_KEYWORDS.contains(&known) => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    let integer = fields.get("type").and_then(Value::as_str) == Some("integer");
    for (exclusive, inclusive, step) in [
        ("exclusiveMinimum", "minimum", 1i64),
        ("exclusiveMaximum", "maximum", -1i64),
    ] {
        let Some(bound) = fields.get(exclusive).and_then(Value::as_i64) else {
            continue;
        };
        if !integer {
            continue;
        }
        let Some(exact) = bound.checked_add(step) else {
            continue;
        };
        // Where both bounds are given, the stricter one holds.
        let stricter = match out.get(inclusive).and_then(Value::as_f64) {
            Some(existing) if step > 0 => (exact as f64) > existing,
            Some(existing) => (exact as f64) < existing,
            None => true,
        };
        if stricter {
            out.insert(inclusive.to_owned(), Value::from(exact));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dialect_follows_the_host() {
        assert_eq!(
            SchemaDialect::for_base_url("https://generativelanguage.googleapis.com/v1beta/openai/"),
            SchemaDialect::Gemini
        );
        assert_eq!(
            SchemaDialect::for_base_url("https://api.openai.com/v1"),
            SchemaDialect::OpenAi
        );
        assert_eq!(
            SchemaDialect::for_base_url("http://127.0.0.1:8080/v1"),
            SchemaDialect::OpenAi
        );
    }
}
