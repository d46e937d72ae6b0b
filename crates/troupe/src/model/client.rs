//! Which wire format a configuration speaks: the one place a [`Provider`] becomes a client.

use std::sync::Arc;

use super::anthropic::AnthropicWire;
use super::config::{ModelConfig, Provider};
use super::openai::OpenAiWire;
use super::transport::HttpModelClient;
use super::wire_format::WireFormat;
use super::ModelError;

impl HttpModelClient {
    /// The client `config` names: the shared transport speaking OpenAI Chat Completions (any
    /// compatible server, and Azure OpenAI's deployments) or Anthropic Messages, natively.
    pub fn new(config: &ModelConfig) -> Result<Self, ModelError> {
        let wire: Arc<dyn WireFormat> = match config.provider {
            Provider::OpenAi | Provider::Azure => Arc::new(OpenAiWire::for_config(config)),
            Provider::Anthropic => Arc::new(AnthropicWire::from_config(config)),
        };
        Self::with_wire(config, wire)
    }
}
