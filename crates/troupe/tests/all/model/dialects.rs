//! Tool schemas adapted per provider from one source of truth (`model::schema_dialect`).

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::model::schema_dialect::{adapt, SchemaDialect};

/// Nested objects, arrays, `anyOf`, and every keyword Gemini refuses.
fn schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:troupe:tool",
        "type": "object",
        "description": "Arguments.",
        "properties": {
            "path": {"type": "string", "minLength": 1, "format": "uri-reference"},
            "count": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100,
                      "default": 1},
            "ratio": {"type": "number", "exclusiveMinimum": 0.5, "maximum": 1},
            "mode": {"const": "fast"},
            "note": {"type": ["string", "null"], "description": "Optional."},
            "tags": {
                "type": "array",
                "items": {"type": "object",
                          "properties": {"name": {"type": "string"}},
                          "required": ["name"],
                          "additionalProperties": false},
                "minItems": 1,
                "uniqueItems": true
            },
            "target": {"oneOf": [
                {"type": "string", "enum": ["a", "b"]},
                {"type": "object", "properties": {"id": {"type": "integer", "exclusiveMinimum": 9}},
                 "additionalProperties": false}
            ]},
            "level": {"anyOf": [{"type": "integer", "enum": [1, 2]}, {"type": "null"}]},
            "properties": {"type": "string", "description": "a property named like a keyword"}
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

#[test]
fn openai_takes_the_schema_as_it_is() {
    assert_eq!(adapt(&schema(), SchemaDialect::OpenAi), schema());
}

#[test]
fn anthropic_takes_the_schema_as_it_is() {
    assert_eq!(adapt(&schema(), SchemaDialect::Anthropic), schema());
}

#[test]
fn gemini_gets_its_subset_recursively() {
    assert_eq!(
        adapt(&schema(), SchemaDialect::Gemini),
        json!({
            "type": "object",
            "description": "Arguments.",
            "properties": {
                "path": {"type": "string", "minLength": 1},
                "count": {"type": "integer", "minimum": 1, "maximum": 99},
                "ratio": {"type": "number", "maximum": 1},
                "mode": {"enum": ["fast"]},
                "note": {"type": "string", "nullable": true, "description": "Optional."},
                "tags": {
                    "type": "array",
                    "items": {"type": "object",
                              "properties": {"name": {"type": "string"}},
                              "required": ["name"]},
                    "minItems": 1
                },
                "target": {"anyOf": [
                    {"type": "string", "enum": ["a", "b"]},
                    {"type": "object", "properties": {"id": {"type": "integer", "minimum": 10}}}
                ]},
                "level": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "properties": {"type": "string", "description": "a property named like a keyword"}
            },
            "required": ["path"]
        })
    );
}

#[test]
fn gemini_keeps_the_stricter_of_two_bounds() {
    let adapted = adapt(
        &json!({"type": "integer", "minimum": 5, "exclusiveMinimum": 2}),
        SchemaDialect::Gemini,
    );
    assert_eq!(adapted, json!({"type": "integer", "minimum": 5}));
    let adapted = adapt(
        &json!({"type": "integer", "minimum": 0, "exclusiveMinimum": 2}),
        SchemaDialect::Gemini,
    );
    assert_eq!(adapted, json!({"type": "integer", "minimum": 3}));
}

#[test]
fn the_gemini_dialect_reaches_the_wire_for_its_host() {
    use troupe::model::config::ModelConfig;
    use troupe::model::wire_format::WireFormat;
    use troupe::model::OpenAiWire;
    use troupe::model::{ModelRequest, ToolSpec};

    let request = ModelRequest {
        tools: vec![ToolSpec {
            name: "t".to_owned(),
            description: "T.".to_owned(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        }],
        ..Default::default()
    };
    let gemini = OpenAiWire::for_config(&ModelConfig {
        base_url: "https://generativelanguage.googleapis.com/v1beta/openai/".to_owned(),
        ..ModelConfig::new("k", "gemini-2.5-flash")
    });
    assert_eq!(gemini.dialect(), SchemaDialect::Gemini);
    let sent = gemini.request("gemini-2.5-flash", &request, true);
    assert_eq!(
        sent.url,
        "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"
    );
    assert_eq!(
        sent.body["tools"][0]["function"]["parameters"],
        json!({"type": "object", "properties": {}})
    );
    let openai = OpenAiWire::for_config(&ModelConfig::new("k", "gpt"));
    assert_eq!(
        openai.request("gpt", &request, false).body["tools"][0]["function"]["parameters"],
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    );
}
