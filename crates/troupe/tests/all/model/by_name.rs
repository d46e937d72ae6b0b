//! One client per model name (`ClientsByName`): each name's requests carry that name, on the
//! same endpoint and key; a name asked for twice reuses its client; and which model an agent
//! runs on (`bootstrap::agent_model`): `[model.agents]` by its name, then by its definition's
//! name, then the definition's `model`.

use std::sync::Arc;

use troupe::bootstrap::agent_model;
use troupe::model::by_name::ClientsByName;
use troupe::model::{ModelClient, OpenAiClient};
use troupe::settings::{ModelSettings, Source, Sourced};
use troupe::team::definitions::parse_definition;
use troupe_wire::AgentName;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer};

use super::openai::{config, hello, ok_text, ENDPOINT, KEY};

#[tokio::test]
async fn each_model_name_gets_its_own_client_on_the_same_endpoint_and_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(ok_text("ok"))
        .mount(&server)
        .await;
    let config = config(&server);
    let default: Arc<dyn ModelClient> = Arc::new(OpenAiClient::new(&config).unwrap());
    let clients = ClientsByName::new(config, default);
    clients.named(None).complete(&hello()).await.unwrap();
    clients
        .named(Some("model-b"))
        .complete(&hello())
        .await
        .unwrap();
    clients
        .named(Some("model-b"))
        .complete(&hello())
        .await
        .unwrap();
    clients
        .named(Some("gpt-test"))
        .complete(&hello())
        .await
        .unwrap();
    assert_eq!(clients.len(), 2, "gpt-test and model-b");
    let sent: Vec<(String, String)> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            let auth = r.headers.get("authorization").unwrap().to_str().unwrap();
            (body["model"].as_str().unwrap().to_owned(), auth.to_owned())
        })
        .collect();
    let bearer = format!("Bearer {KEY}");
    let models: Vec<&str> = sent.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(models, ["gpt-test", "model-b", "model-b", "gpt-test"]);
    assert!(sent.iter().all(|(_, auth)| *auth == bearer));
}

#[test]
fn settings_by_agent_name_beat_settings_by_definition_which_beat_the_definition() {
    let tools = ["shell", "read_file"];
    let definition = parse_definition(
        "---\nname: reviewer\ndescription: d\nmodel: from-definition\n---\n",
        "reviewer",
        &tools,
    )
    .unwrap();
    let entry = |name: &str, model: &str| {
        (
            name.to_owned(),
            Sourced {
                value: model.to_owned(),
                source: Source::Default,
            },
        )
    };
    let rev = AgentName::parse("rev").unwrap();
    let mut settings = ModelSettings::default();
    assert_eq!(agent_model(&settings, &rev, None), None);
    assert_eq!(
        agent_model(&settings, &rev, Some(&definition)).as_deref(),
        Some("from-definition")
    );
    settings
        .agents
        .push(entry("reviewer", "by-definition-name"));
    assert_eq!(
        agent_model(&settings, &rev, Some(&definition)).as_deref(),
        Some("by-definition-name")
    );
    settings.agents.push(entry("rev", "by-agent-name"));
    assert_eq!(
        agent_model(&settings, &rev, Some(&definition)).as_deref(),
        Some("by-agent-name")
    );
    settings.agents.push(entry("lead", "lead-model"));
    assert_eq!(
        agent_model(&settings, &AgentName::lead(), None).as_deref(),
        Some("lead-model")
    );
}
