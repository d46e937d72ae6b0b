//! The tools an agent is offered, in registration order.
//!
//! The order is part of the contract (SPEC §4.1 lists it): the model is offered the tools in
//! exactly the order they were registered, so registration order is kept and never sorted.

use std::collections::HashMap;
use std::sync::Arc;

use super::schema;
use super::{ToolDefinition, ToolHandler};
use crate::error::ErrorCode;

/// Why a tool could not be registered or selected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("a tool named {0:?} is already registered")]
    Duplicate(String),
    #[error("tool {name:?} has an unsupported parameters schema: {reason}")]
    BadSchema { name: String, reason: String },
    #[error("no tool named {0:?} is registered")]
    Unknown(String),
}

impl ErrorCode for RegistryError {
    fn code(&self) -> &'static str {
        match self {
            RegistryError::Duplicate(_) => "duplicate_tool",
            RegistryError::BadSchema { .. } => "invalid_tool_schema",
            RegistryError::Unknown(_) => "unknown_tool",
        }
    }
}

/// One registered tool: its definition, captured once, and its handler.
#[derive(Clone)]
pub struct RegisteredTool {
    /// Captured at registration so the name the model sees and the name dispatch looks up can
    /// never drift apart.
    pub definition: ToolDefinition,
    pub handler: Arc<dyn ToolHandler>,
}

/// Tools in registration order, unique by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<RegisteredTool>,
    by_name: HashMap<String, usize>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool at the end. Refuses a duplicate name and a schema outside the supported
    /// subset (including any object without `additionalProperties: false`).
    pub fn register(&mut self, handler: Arc<dyn ToolHandler>) -> Result<(), RegistryError> {
        let definition = handler.definition();
        if self.by_name.contains_key(&definition.name) {
            return Err(RegistryError::Duplicate(definition.name));
        }
        let checked = if handler.checked_schema() {
            schema::check_schema(&definition.parameters)
        } else {
            schema::check_root_object(&definition.parameters)
        };
        checked.map_err(|e| RegistryError::BadSchema {
            name: definition.name.clone(),
            reason: e.to_string(),
        })?;
        self.by_name
            .insert(definition.name.clone(), self.tools.len());
        self.tools.push(RegisteredTool {
            definition,
            handler,
        });
        Ok(())
    }

    /// A registry holding the named tools, in the order given (e.g. the teammate's tool set).
    pub fn select(&self, names: &[&str]) -> Result<ToolRegistry, RegistryError> {
        let mut selected = ToolRegistry::new();
        for name in names {
            let tool = self
                .get(name)
                .ok_or_else(|| RegistryError::Unknown((*name).to_owned()))?;
            selected.register(tool.handler.clone())?;
        }
        Ok(selected)
    }

    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.by_name.get(name).and_then(|&i| self.tools.get(i))
    }

    /// The definitions in the order the model is offered them.
    pub fn definitions(&self) -> impl Iterator<Item = &ToolDefinition> {
        self.tools.iter().map(|t| &t.definition)
    }

    /// The definitions of the tools available now ([`ToolHandler::unavailable`]), in order:
    /// what the model is offered at each call.
    pub fn available_definitions(&self) -> impl Iterator<Item = &ToolDefinition> {
        self.tools
            .iter()
            .filter(|t| t.handler.unavailable().is_none())
            .map(|t| &t.definition)
    }

    pub fn names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .map(|t| t.definition.name.as_str())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}
