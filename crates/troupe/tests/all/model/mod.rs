//! The model layer: the OpenAI client against a real HTTP server on 127.0.0.1 (wiremock), the
//! retry policy, the scripted model, the conversation types, the model configuration, and one
//! client per model name.

mod anthropic;
mod azure;
mod by_name;
mod config;
mod dialects;
mod openai;
mod recovery;
mod retry;
mod scripted;
mod sse_server;
mod streaming;
mod types;
