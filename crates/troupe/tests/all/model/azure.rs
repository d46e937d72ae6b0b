//! Azure OpenAI: the same wire format behind deployment URLs, an `api-key` header and an
//! `api-version` query, against wiremock on 127.0.0.1.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::error::ErrorCode;
use troupe::model::config::{ModelConfig, Provider};
use troupe::model::openai::DEFAULT_AZURE_API_VERSION;
use troupe::model::{ModelClient, OpenAiClient, RetryPolicy};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::openai::{completion, hello, requests};

const KEY: &str = "azure-key-0123456789abcdef";

fn config(server: &MockServer, api_version: Option<&str>) -> ModelConfig {
    ModelConfig {
        provider: Provider::Azure,
        api_version: api_version.map(str::to_owned),
        base_url: format!("{}/", server.uri()),
        timeout: Duration::from_secs(10),
        retry: RetryPolicy::fixed(1, Duration::from_millis(1)),
        ..ModelConfig::new(KEY, "my-gpt4o-deployment")
    }
}

#[tokio::test]
async fn requests_go_to_the_deployment_with_api_key_and_api_version() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(
            "/openai/deployments/my-gpt4o-deployment/chat/completions",
        ))
        .and(query_param("api-version", "2024-06-01"))
        .and(header("api-key", KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant", "content": "from azure"}),
            "stop",
        )))
        .mount(&server)
        .await;

    let client = OpenAiClient::new(&config(&server, Some("2024-06-01"))).unwrap();
    let response = client.complete(&hello()).await.unwrap();

    assert_eq!(response.message.content.as_deref(), Some("from azure"));
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].url.path(),
        "/openai/deployments/my-gpt4o-deployment/chat/completions"
    );
    assert_eq!(sent[0].url.query(), Some("api-version=2024-06-01"));
    assert_eq!(sent[0].headers.get("api-key").unwrap(), KEY);
    assert!(sent[0].headers.get("authorization").is_none());
    // The same wire otherwise, streaming asked for.
    let body: serde_json::Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(body["stream"], json!(true));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "hello"}])
    );
}

#[tokio::test]
async fn without_an_api_version_the_default_is_asked_and_errors_keep_their_codes() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(404).set_body_json(json!({
            "error": {"code": "DeploymentNotFound", "message": "The API deployment for this resource does not exist."}
        })))
        .mount(&server)
        .await;

    let error = OpenAiClient::new(&config(&server, None))
        .unwrap()
        .complete(&hello())
        .await
        .unwrap_err();

    assert_eq!(error.code(), "model_not_found");
    let sent = requests(&server).await;
    assert_eq!(
        sent[0].url.query(),
        Some(format!("api-version={DEFAULT_AZURE_API_VERSION}").as_str())
    );
    assert!(!error.to_string().contains(KEY));
}

#[tokio::test]
async fn a_deployment_name_cannot_change_the_url_shape() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    let config = ModelConfig {
        model: "../x?api-version=evil".to_owned(),
        ..config(&server, Some("2024-06-01"))
    };

    let _ = OpenAiClient::new(&config).unwrap().complete(&hello()).await;

    let sent = requests(&server).await;
    assert_eq!(
        sent[0].url.path(),
        "/openai/deployments/..%2Fx%3Fapi-version=evil/chat/completions"
    );
    assert_eq!(sent[0].url.query(), Some("api-version=2024-06-01"));
}
