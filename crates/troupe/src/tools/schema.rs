//! A small JSON Schema validator for the subset our tool schemas use.
//!
//! Supported: `type` ∈ object | string | integer | number | boolean | array; `properties`,
//! `required`, `additionalProperties: false` on objects; `minLength`, `maxLength` on strings;
//! `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` on numbers; `items`,
//! `minItems`, `maxItems` on arrays; `enum` on anything; `description` and `title` are ignored.
//!
//! Why not a full validator: the full `jsonschema` crate is heavy to build on our 2-core
//! machines and we use a tenth of it. Why [`check_schema`]: a keyword this validator does not
//! know would otherwise be ignored silently, so registration refuses it instead.

use serde_json::{Map, Value};

/// Where a value or schema broke a rule. `path` is `$` for the arguments object, then
/// `.name` for properties and `[i]` for array items, e.g. `$.todos[3].status`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SchemaError {
    pub path: String,
    pub message: String,
}

fn fail<T>(path: &str, message: impl Into<String>) -> Result<T, SchemaError> {
    Err(SchemaError {
        path: path.to_owned(),
        message: message.into(),
    })
}

const ANNOTATIONS: &[&str] = &["description", "title"];

/// Checks that `schema` uses only the supported subset and that every object schema has
/// `additionalProperties: false`. The root must be an object schema.
pub fn check_schema(schema: &Value) -> Result<(), SchemaError> {
    if schema_type(schema) != Some("object") {
        return fail("$", "the root schema must have \"type\": \"object\"");
    }
    check_node(schema, "$")
}

/// For a schema troupe does not check in full (an MCP server's): only that it describes an
/// object (`"type": "object"`, or no `type` at all).
pub fn check_root_object(schema: &Value) -> Result<(), SchemaError> {
    let is_object = schema
        .as_object()
        .is_some_and(|node| match node.get("type") {
            None => true,
            Some(t) => t == "object",
        });
    if is_object {
        Ok(())
    } else {
        fail("$", "the root schema must describe an object")
    }
}

/// For a schema troupe does not check in full: `value` is an object holding every key of the
/// schema's top-level `required`. The tool's own side checks the rest.
pub fn validate_loosely(schema: &Value, value: &Value) -> Result<(), SchemaError> {
    let Some(object) = value.as_object() else {
        return fail("$", format!("expected an object, got {}", kind_of(value)));
    };
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        if !object.contains_key(name) {
            return fail("$", format!("missing required property {name:?}"));
        }
    }
    Ok(())
}

fn schema_type(schema: &Value) -> Option<&str> {
    schema.get("type").and_then(Value::as_str)
}

fn check_node(schema: &Value, path: &str) -> Result<(), SchemaError> {
    let Some(node) = schema.as_object() else {
        return fail(path, "a schema must be a JSON object");
    };
    let allowed: &[&str] = match schema_type(schema) {
        Some("object") => &["type", "properties", "required", "additionalProperties"],
        Some("string") => &["type", "minLength", "maxLength", "enum"],
        Some("integer") | Some("number") => &[
            "type",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "enum",
        ],
        Some("boolean") => &["type"],
        Some("array") => &["type", "items", "minItems", "maxItems"],
        Some(other) => return fail(path, format!("unsupported type {other:?}")),
        None => return fail(path, "every schema needs a \"type\" string"),
    };
    for key in node.keys() {
        if !allowed.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
            return fail(path, format!("unsupported keyword {key:?} here"));
        }
    }
    match schema_type(schema) {
        Some("object") => {
            if node.get("additionalProperties") != Some(&Value::Bool(false)) {
                return fail(
                    path,
                    "object schemas must set \"additionalProperties\": false",
                );
            }
            let properties = match node.get("properties") {
                None => None,
                Some(Value::Object(p)) => Some(p),
                Some(_) => return fail(path, "\"properties\" must be an object"),
            };
            if let Some(properties) = properties {
                for (name, sub) in properties {
                    check_node(sub, &format!("{path}.{name}"))?;
                }
            }
            if let Some(required) = node.get("required") {
                let Some(required) = required.as_array() else {
                    return fail(path, "\"required\" must be an array of names");
                };
                for name in required {
                    let known = name
                        .as_str()
                        .is_some_and(|n| properties.is_some_and(|p| p.contains_key(n)));
                    if !known {
                        return fail(path, format!("required {name} is not a declared property"));
                    }
                }
            }
        }
        Some("array") => match node.get("items") {
            Some(items) => check_node(items, &format!("{path}[]"))?,
            None => return fail(path, "array schemas must declare \"items\""),
        },
        _ => {}
    }
    for key in ["minLength", "maxLength", "minItems", "maxItems"] {
        if let Some(v) = node.get(key) {
            if v.as_u64().is_none() {
                return fail(path, format!("{key:?} must be a non-negative integer"));
            }
        }
    }
    for key in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
        if let Some(v) = node.get(key) {
            if !v.is_number() {
                return fail(path, format!("{key:?} must be a number"));
            }
        }
    }
    if let Some(e) = node.get("enum") {
        if e.as_array().is_none_or(|a| a.is_empty()) {
            return fail(path, "\"enum\" must be a non-empty array");
        }
    }
    Ok(())
}

/// Validates `value` against `schema` (which passed [`check_schema`]). The first broken rule is
/// reported, naming its path.
pub fn validate(schema: &Value, value: &Value) -> Result<(), SchemaError> {
    validate_at(schema, value, "$")
}

fn validate_at(schema: &Value, value: &Value, path: &str) -> Result<(), SchemaError> {
    let empty = Map::new();
    let node = schema.as_object().unwrap_or(&empty);
    match schema_type(schema) {
        Some("object") => validate_object(node, value, path)?,
        Some("string") => {
            let Some(s) = value.as_str() else {
                return fail(path, format!("expected a string, got {}", kind_of(value)));
            };
            let chars = s.chars().count() as u64;
            if let Some(min) = node.get("minLength").and_then(Value::as_u64) {
                if chars < min {
                    return fail(path, format!("must be at least {min} characters long"));
                }
            }
            if let Some(max) = node.get("maxLength").and_then(Value::as_u64) {
                if chars > max {
                    return fail(path, format!("must be at most {max} characters long"));
                }
            }
        }
        Some(kind @ ("integer" | "number")) => {
            let ok = if kind == "integer" {
                value.is_i64() || value.is_u64()
            } else {
                value.is_number()
            };
            if !ok {
                return fail(path, format!("expected {kind}, got {}", kind_of(value)));
            }
            validate_bounds(node, value, path)?;
        }
        Some("boolean") => {
            if !value.is_boolean() {
                return fail(path, format!("expected a boolean, got {}", kind_of(value)));
            }
        }
        Some("array") => {
            let Some(items) = value.as_array() else {
                return fail(path, format!("expected an array, got {}", kind_of(value)));
            };
            let len = items.len() as u64;
            if let Some(min) = node.get("minItems").and_then(Value::as_u64) {
                if len < min {
                    return fail(path, format!("must have at least {min} items, has {len}"));
                }
            }
            if let Some(max) = node.get("maxItems").and_then(Value::as_u64) {
                if len > max {
                    return fail(path, format!("must have at most {max} items, has {len}"));
                }
            }
            if let Some(item_schema) = node.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate_at(item_schema, item, &format!("{path}[{i}]"))?;
                }
            }
        }
        _ => return fail(path, "the tool's schema is not supported"),
    }
    if let Some(Value::Array(choices)) = node.get("enum") {
        if !choices.contains(value) {
            let listed: Vec<String> = choices.iter().map(Value::to_string).collect();
            return fail(path, format!("must be one of {}", listed.join(", ")));
        }
    }
    Ok(())
}

fn validate_object(
    node: &Map<String, Value>,
    value: &Value,
    path: &str,
) -> Result<(), SchemaError> {
    let Some(object) = value.as_object() else {
        return fail(path, format!("expected an object, got {}", kind_of(value)));
    };
    let empty = Map::new();
    let properties = node
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if let Some(Value::Array(required)) = node.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !object.contains_key(name) {
                return fail(path, format!("missing required property {name:?}"));
            }
        }
    }
    for (name, item) in object {
        match properties.get(name) {
            Some(sub) => validate_at(sub, item, &format!("{path}.{name}"))?,
            None => {
                let known: Vec<&str> = properties.keys().map(String::as_str).collect();
                return fail(
                    path,
                    format!(
                        "unknown property {name:?} (allowed: {})",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ),
                );
            }
        }
    }
    Ok(())
}

fn validate_bounds(
    node: &Map<String, Value>,
    value: &Value,
    path: &str,
) -> Result<(), SchemaError> {
    let Some(x) = value.as_f64() else {
        return Ok(());
    };
    let bound = |key: &str| node.get(key).and_then(Value::as_f64);
    if let Some(min) = bound("minimum") {
        if x < min {
            return fail(path, format!("must be >= {}", node["minimum"]));
        }
    }
    if let Some(min) = bound("exclusiveMinimum") {
        if x <= min {
            return fail(path, format!("must be > {}", node["exclusiveMinimum"]));
        }
    }
    if let Some(max) = bound("maximum") {
        if x > max {
            return fail(path, format!("must be <= {}", node["maximum"]));
        }
    }
    if let Some(max) = bound("exclusiveMaximum") {
        if x >= max {
            return fail(path, format!("must be < {}", node["exclusiveMaximum"]));
        }
    }
    Ok(())
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a non-integer number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn todo_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "limit": {"type": "integer", "exclusiveMinimum": 0},
                "todos": {"type": "array", "maxItems": 2, "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1},
                        "status": {"type": "string", "enum": ["pending", "completed"]}
                    },
                    "required": ["content", "status"],
                    "additionalProperties": false
                }},
                "flag": {"type": "boolean"}
            },
            "required": ["todos"],
            "additionalProperties": false
        })
    }

    fn error_of(value: Value) -> String {
        validate(&todo_schema(), &value).unwrap_err().to_string()
    }

    #[test]
    fn accepts_a_valid_value() {
        check_schema(&todo_schema()).unwrap();
        validate(
            &todo_schema(),
            &json!({"todos": [{"content": "x", "status": "pending"}], "limit": 1, "flag": true}),
        )
        .unwrap();
    }

    #[test]
    fn errors_name_the_offending_path() {
        assert_eq!(
            error_of(json!({})),
            "$: missing required property \"todos\""
        );
        assert_eq!(
            error_of(json!({"todos": [], "extra": 1})),
            "$: unknown property \"extra\" (allowed: limit, todos, flag)"
        );
        assert_eq!(
            error_of(json!({"todos": [{"content": "", "status": "pending"}]})),
            "$.todos[0].content: must be at least 1 characters long"
        );
        assert_eq!(
            error_of(json!({"todos": [{"content": "a", "status": "done"}]})),
            "$.todos[0].status: must be one of \"pending\", \"completed\""
        );
        assert_eq!(
            error_of(json!({"todos": [1, 2, 3]})),
            "$.todos: must have at most 2 items, has 3"
        );
        assert_eq!(
            error_of(json!({"todos": [], "limit": 0})),
            "$.limit: must be > 0"
        );
        assert_eq!(
            error_of(json!({"todos": [], "limit": 1.5})),
            "$.limit: expected integer, got a non-integer number"
        );
        assert_eq!(
            error_of(json!({"todos": [], "flag": "yes"})),
            "$.flag: expected a boolean, got a string"
        );
        assert_eq!(error_of(json!([1])), "$: expected an object, got an array");
    }

    #[test]
    fn check_schema_refuses_open_objects_and_unknown_keywords() {
        let open = json!({"type": "object", "properties": {}});
        assert!(check_schema(&open)
            .unwrap_err()
            .to_string()
            .contains("additionalProperties"));
        let nested_open = json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "array", "items": {"type": "object"}}}});
        assert_eq!(
            check_schema(&nested_open).unwrap_err().path,
            "$.a[]".to_owned()
        );
        let unknown = json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "string", "pattern": "x"}}});
        assert!(check_schema(&unknown)
            .unwrap_err()
            .to_string()
            .contains("pattern"));
        let bad_required = json!({"type": "object", "additionalProperties": false,
            "properties": {}, "required": ["a"]});
        assert!(check_schema(&bad_required).is_err());
    }
}
