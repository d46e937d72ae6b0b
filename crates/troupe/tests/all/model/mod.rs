//! The model layer: the OpenAI client against a real HTTP server on 127.0.0.1 (wiremock), the
//! retry policy, the scripted model, the conversation types and the model configuration.

mod config;
mod openai;
mod recovery;
mod retry;
mod scripted;
mod types;
