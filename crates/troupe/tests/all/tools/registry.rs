//! The registry keeps registration order, refuses duplicates and open schemas.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::error::ErrorCode;
use troupe::tools::shell::ShellTool;
use troupe::tools::testing::NoopTool;
use troupe::tools::{
    base_tools, Effect, RegistryError, ToolContext, ToolDefinition, ToolError, ToolHandler,
    ToolRegistry,
};

fn base_registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in base_tools(ShellTool::new()) {
        registry.register(tool).unwrap();
    }
    registry
}

/// Every object schema, at any depth, must say `additionalProperties: false`.
fn assert_closed_objects(schema: &Value, path: &str) {
    if schema["type"] == "object" {
        assert_eq!(
            schema["additionalProperties"],
            json!(false),
            "{path} is an open object"
        );
        if let Some(props) = schema["properties"].as_object() {
            for (name, sub) in props {
                assert_closed_objects(sub, &format!("{path}.{name}"));
            }
        }
    }
    if schema["type"] == "array" {
        assert_closed_objects(&schema["items"], &format!("{path}[]"));
    }
}

#[test]
fn base_tools_are_offered_in_spec_order_with_their_effects_and_schemas() {
    let registry = base_registry();
    let offered: Vec<(String, Effect, Vec<String>, Vec<String>)> = registry
        .definitions()
        .map(|d| {
            let props = d.parameters["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            let required = d.parameters["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect();
            (d.name.clone(), d.effect, props, required)
        })
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        offered,
        vec![
            (
                "shell".to_owned(),
                Effect::Execute,
                s(&["command", "run_in_background"]),
                s(&["command"])
            ),
            (
                "read_file".to_owned(),
                Effect::Read,
                s(&["path", "limit", "offset"]),
                s(&["path"])
            ),
            (
                "write_file".to_owned(),
                Effect::Write,
                s(&["path", "content"]),
                s(&["path", "content"])
            ),
            (
                "edit_file".to_owned(),
                Effect::Write,
                s(&["path", "old_text", "new_text"]),
                s(&["path", "old_text", "new_text"])
            ),
            (
                "glob".to_owned(),
                Effect::Read,
                s(&["pattern"]),
                s(&["pattern"])
            ),
        ]
    );
    for d in registry.definitions() {
        assert_closed_objects(&d.parameters, &d.name);
        assert!(
            d.description.len() > 80,
            "{} needs a real description",
            d.name
        );
    }
    let read_file = registry.get("read_file").unwrap();
    assert_eq!(
        read_file.definition.parameters["properties"]["limit"],
        json!({"type": "integer", "exclusiveMinimum": 0,
               "description": "Return at most this many lines."})
    );
    assert_eq!(
        read_file.definition.parameters["properties"]["offset"],
        json!({"type": "integer", "minimum": 0,
               "description": "Skip this many lines first (0: from the start)."})
    );
    let edit = registry.get("edit_file").unwrap();
    assert_eq!(
        edit.definition.parameters["properties"]["old_text"]["minLength"],
        json!(1)
    );
}

#[test]
fn effects_serialize_snake_case() {
    assert_eq!(
        serde_json::to_value([
            Effect::Read,
            Effect::Write,
            Effect::Execute,
            Effect::External
        ])
        .unwrap(),
        json!(["read", "write", "execute", "external"])
    );
}

#[test]
fn registration_order_is_kept_not_sorted() {
    let mut registry = ToolRegistry::new();
    for name in ["zeta", "alpha", "mid"] {
        registry
            .register(Arc::new(NoopTool::new(name, Effect::Read)))
            .unwrap();
    }
    assert_eq!(registry.names(), vec!["zeta", "alpha", "mid"]);
    let picked = registry.select(&["mid", "zeta"]).unwrap();
    assert_eq!(picked.names(), vec!["mid", "zeta"]);
    assert_eq!(
        registry.select(&["nope"]).unwrap_err(),
        RegistryError::Unknown("nope".to_owned())
    );
}

#[test]
fn duplicate_names_are_refused() {
    let mut registry = ToolRegistry::new();
    registry
        .register(Arc::new(NoopTool::new("same", Effect::Read)))
        .unwrap();
    let err = registry
        .register(Arc::new(NoopTool::new("same", Effect::Write)))
        .unwrap_err();
    assert_eq!(err, RegistryError::Duplicate("same".to_owned()));
    assert_eq!(err.code(), "duplicate_tool");
    assert_eq!(registry.len(), 1);
    assert_eq!(
        registry.get("same").unwrap().definition.effect,
        Effect::Read
    );
}

struct OpenSchemaTool;

#[async_trait::async_trait]
impl ToolHandler for OpenSchemaTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "open".to_owned(),
            description: "x".to_owned(),
            parameters: json!({"type": "object", "properties": {
                "inner": {"type": "object", "properties": {}}
            }, "additionalProperties": false}),
            effect: Effect::Read,
        }
    }
    async fn call(&self, _: &ToolContext, _: Value) -> Result<String, ToolError> {
        Ok(String::new())
    }
}

#[test]
fn a_schema_with_an_open_object_is_refused_at_registration() {
    let mut registry = ToolRegistry::new();
    let err = registry.register(Arc::new(OpenSchemaTool)).unwrap_err();
    assert_eq!(err.code(), "invalid_tool_schema");
    assert!(err.to_string().contains("$.inner"), "{err}");
    assert!(registry.is_empty());
}
