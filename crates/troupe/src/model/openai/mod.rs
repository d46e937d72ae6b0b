//! The OpenAI Chat Completions wire format ([`OpenAiWire`]), for OpenAI itself, any compatible
//! server (Ollama, vLLM, llama.cpp server, DeepSeek, Gemini's compatible endpoint, …) and Azure
//! OpenAI. [`OpenAiClient`] is the shared transport ([`HttpModelClient`]) speaking it.
//!
//! - Endpoint and credential: `POST {base_url}/chat/completions` with `Authorization: Bearer`
//!   (no header at all when the key is empty: local servers on loopback need none); for Azure,
//!   `POST {base_url}/openai/deployments/{model}/chat/completions?api-version=…` with an
//!   `api-key` header.
//! - Bodies: [`wire`] (whole answers, error bodies) and [`stream`] (the streamed chunks).
//! - Tool schemas: adapted to the server's [`SchemaDialect`] (Gemini's endpoint accepts only a
//!   subset of JSON Schema), chosen from the base URL's host.

pub mod stream;
pub mod wire;

use super::config::{ApiKey, ModelConfig, Provider};
use super::schema_dialect::SchemaDialect;
use super::transport::HttpModelClient;
use super::types::{ModelRequest, ModelResponse};
use super::wire_format::{ErrorKind, StreamAssembler, WireFormat, WireRequest};

/// The client of an OpenAI-compatible server: the shared transport speaking [`OpenAiWire`].
pub type OpenAiClient = HttpModelClient;

/// The `api-version` asked of Azure OpenAI when none is configured (its GA data-plane version).
pub const DEFAULT_AZURE_API_VERSION: &str = "2024-10-21";

/// The OpenAI Chat Completions format, plain or Azure-flavoured.
#[derive(Clone)]
pub struct OpenAiWire {
    base_url: String,
    api_key: ApiKey,
    /// `Some(api-version)` for Azure OpenAI.
    azure: Option<String>,
    dialect: SchemaDialect,
}

impl std::fmt::Debug for OpenAiWire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiWire")
            .field("base_url", &self.base_url)
            .field("azure", &self.azure)
            .field("dialect", &self.dialect)
            .finish_non_exhaustive()
    }
}

impl OpenAiWire {
    /// The format `config` asks for: Azure's when its provider is [`Provider::Azure`], the plain
    /// one otherwise; the schema dialect from the base URL.
    pub fn for_config(config: &ModelConfig) -> Self {
        let azure = (config.provider == Provider::Azure).then(|| {
            config
                .api_version
                .clone()
                .filter(|version| !version.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_AZURE_API_VERSION.to_owned())
        });
        Self {
            base_url: config.base_url.trim_end_matches('/').to_owned(),
            api_key: config.api_key.clone(),
            azure,
            dialect: SchemaDialect::for_base_url(&config.base_url),
        }
    }

    /// The tool-schema dialect the requests use.
    pub fn dialect(&self) -> SchemaDialect {
        self.dialect
    }

    fn url(&self, model: &str) -> String {
        match &self.azure {
            None => format!("{}/chat/completions", self.base_url),
            Some(version) => {
                // The deployment name is one escaped path segment, the version one escaped query
                // value: neither can change the URL's shape.
                let base = format!("{}/openai/deployments", self.base_url);
                match reqwest::Url::parse(&base) {
                    Ok(mut url) => {
                        if let Ok(mut segments) = url.path_segments_mut() {
                            segments.push(model).push("chat").push("completions");
                        }
                        url.query_pairs_mut().append_pair("api-version", version);
                        url.to_string()
                    }
                    // The base URL was checked when the config was built.
                    Err(_) => format!("{base}/{model}/chat/completions?api-version={version}"),
                }
            }
        }
    }
}

impl WireFormat for OpenAiWire {
    fn name(&self) -> &'static str {
        if self.azure.is_some() {
            "azure"
        } else {
            "openai"
        }
    }

    fn request(&self, model: &str, request: &ModelRequest, stream: bool) -> WireRequest {
        let key = self.api_key.expose();
        let mut headers = Vec::new();
        if !key.is_empty() {
            match self.azure {
                Some(_) => headers.push(("api-key", key.to_owned())),
                None => headers.push(("authorization", format!("Bearer {key}"))),
            }
        }
        if stream {
            headers.push(("accept", "text/event-stream".to_owned()));
        }
        WireRequest {
            url: self.url(model),
            headers,
            body: wire::request_body_for(model, request, stream, self.dialect),
        }
    }

    fn parse_response(&self, model: &str, body: &str) -> Result<ModelResponse, String> {
        wire::parse_response(body.as_bytes(), model)
    }

    fn stream_assembler(&self, model: &str) -> Box<dyn StreamAssembler> {
        Box::new(stream::ChunkAssembler::new(model))
    }

    fn classify_error(&self, status: u16, body: &str) -> (ErrorKind, Option<String>) {
        // The whole text and the codes are read for "context too long" and "overloaded"; the
        // transport redacts and cuts the message it keeps.
        let reply = wire::server_error(body.as_bytes());
        let kind = match status {
            status
                if reply.says_context_too_long() && super::overflow::is_overflow_status(status) =>
            {
                ErrorKind::ContextTooLong
            }
            401 | 403 => ErrorKind::Auth,
            404 => ErrorKind::NotFound,
            429 => ErrorKind::RateLimited,
            529 => ErrorKind::Overloaded,
            503 if reply.says_overloaded() => ErrorKind::Overloaded,
            500..=599 => ErrorKind::Server,
            _ => ErrorKind::Refused,
        };
        (kind, reply.message)
    }
}
