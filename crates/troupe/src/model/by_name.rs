//! One OpenAI client per distinct model name, all with the same endpoint, key, timeouts and
//! retry policy: what lets a teammate run on another model than the lead (an agent
//! definition's `model`, or `[model.agents]` in the settings). Clients are built the first
//! time a name is asked for and then shared.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::config::ModelConfig;
use super::{ModelClient, OpenAiClient};
use crate::sync::lock;

pub struct ClientsByName {
    config: ModelConfig,
    default: Arc<dyn ModelClient>,
    clients: Mutex<HashMap<String, Arc<dyn ModelClient>>>,
}

impl ClientsByName {
    /// `default` answers `config.model` (and any name whose client cannot be built).
    pub fn new(config: ModelConfig, default: Arc<dyn ModelClient>) -> Self {
        let mut clients = HashMap::new();
        clients.insert(config.model.clone(), default.clone());
        Self {
            config,
            default,
            clients: Mutex::new(clients),
        }
    }

    /// The client of `model`; none: the configured model.
    pub fn named(&self, model: Option<&str>) -> Arc<dyn ModelClient> {
        let Some(model) = model else {
            return self.default.clone();
        };
        let mut clients = lock(&self.clients);
        if let Some(client) = clients.get(model) {
            return client.clone();
        }
        let config = ModelConfig {
            model: model.to_owned(),
            ..self.config.clone()
        };
        match OpenAiClient::new(&config) {
            Ok(client) => {
                let client: Arc<dyn ModelClient> = Arc::new(client);
                clients.insert(model.to_owned(), client.clone());
                client
            }
            Err(e) => {
                tracing::warn!(
                    "no client for model {model} ({e}); using {}",
                    self.config.model
                );
                self.default.clone()
            }
        }
    }

    /// How many distinct clients exist now.
    pub fn len(&self) -> usize {
        lock(&self.clients).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
