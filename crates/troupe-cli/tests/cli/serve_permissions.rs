//! `troupe serve`'s pending permission requests (SPEC §13): `/api/state` lists those waiting
//! for a person (with the call, the diff, the sandbox and the entry "always" would allow), and
//! `POST /api/permission` answers one exactly like `troupe approve` / `troupe deny` — the answer
//! recorded once, by `page`, the response delivered into the asking agent's mailbox; a second
//! answer refused (409) naming the first; bad input 400, an unknown request 404, no token 403.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::approvals::{PermissionAsk, PermissionReply};
use troupe::clock::SystemClock;
use troupe::ids::RandomIds;
use troupe::layout::Layout;
use troupe::permissions::Effect;
use troupe::sandbox::Mode;
use troupe::store::protocol::{JsonProtocolStore, NewRequest, ProtocolStore};
use troupe::wire::{AgentName, Content, RequestId, RequestKind};

use super::serve::{mail_of, request, Server};

/// Hostile text in the diff: the page must show it as text.
const CONTENT: &str = "<img src=x onerror=alert(1)>\nsecond line\n";

fn store_of(ws: &Path) -> JsonProtocolStore {
    JsonProtocolStore::open(&Layout::new(ws), Arc::new(SystemClock), Arc::new(RandomIds)).unwrap()
}

/// Registers the lead's ask for a person, as a run's provider does.
async fn ask(ws: &Path, ask: &PermissionAsk, ttl: Duration) -> RequestId {
    store_of(ws)
        .create(NewRequest {
            kind: RequestKind::Permission,
            sender: AgentName::lead(),
            target: AgentName::user(),
            content: Content::parse(ask.to_content()).unwrap(),
            ttl,
        })
        .await
        .unwrap()
        .id()
}

fn write_ask() -> PermissionAsk {
    PermissionAsk::new(
        "write_file",
        Effect::Write,
        &json!({"path": "notes.txt", "content": CONTENT}),
        None,
        "write tools ask",
        None,
        Some(format!(
            "--- notes.txt\n+++ notes.txt\n+{}",
            CONTENT.replace('\n', "\n+")
        )),
    )
}

fn shell_ask(command: &str) -> PermissionAsk {
    PermissionAsk::new(
        "shell",
        Effect::Execute,
        &json!({"command": command}),
        Some(Mode::WorkspaceWrite),
        "execute tools ask",
        Some("shell(cargo test:*)"),
        None,
    )
}

/// A workspace with a write ask, a shell ask, and an ask already past its window.
async fn workspace() -> (tempfile::TempDir, PathBuf, RequestId, RequestId) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let write = ask(&ws, &write_ask(), Duration::from_secs(3600)).await;
    let shell = ask(&ws, &shell_ask("cargo test"), Duration::from_secs(3600)).await;
    ask(
        &ws,
        &shell_ask("cargo test --old"),
        Duration::from_millis(1),
    )
    .await;
    (dir, ws, write, shell)
}

/// The pending permissions of `/api/state`, without their times.
fn pending(server: &Server) -> Vec<Value> {
    let state = server.get_json("/api/state");
    state["pending_permissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert!(
                p["created_at"].is_string() && p["expires_at"].is_string(),
                "{p}"
            );
            let mut p = p.clone();
            let object = p.as_object_mut().unwrap();
            object.remove("created_at");
            object.remove("expires_at");
            p
        })
        .collect()
}

fn answer(server: &Server, body: &Value) -> (u16, Value) {
    let response = server.post("/api/permission", &body.to_string());
    (response.status, response.json())
}

/// The reply recorded for `id`, and whether it approves.
async fn recorded(ws: &Path, id: RequestId) -> Option<(bool, PermissionReply)> {
    let message = store_of(ws).recorded_answer(id).await.unwrap()?;
    let reply = PermissionReply::from_content(message.content().as_str()).unwrap();
    Some((message.approved().unwrap(), reply))
}

#[tokio::test]
async fn the_state_lists_pending_permission_requests_with_the_call_and_the_diff() {
    let (_dir, ws, write, shell) = workspace().await;
    let server = Server::start(&ws);
    let write_preview = write_ask().preview.unwrap();
    assert_eq!(
        pending(&server),
        [
            json!({
                "request_id": write.to_string(), "agent": "lead", "target": "user",
                "status": "pending", "tool": "write_file", "effect": "write",
                "summary": "write_file: notes.txt",
                "arguments": {"path": "notes.txt", "content": CONTENT},
                "sandbox": null, "reason": "write tools ask", "suggestion": null,
                "preview": write_preview,
            }),
            json!({
                "request_id": shell.to_string(), "agent": "lead", "target": "user",
                "status": "pending", "tool": "shell", "effect": "execute",
                "summary": "shell: cargo test",
                "arguments": {"command": "cargo test"},
                "sandbox": "workspace-write", "reason": "execute tools ask",
                "suggestion": "shell(cargo test:*)", "preview": null,
            }),
        ]
    );
    // The plans are apart.
    assert_eq!(server.get_json("/api/state")["pending_plans"], json!([]));
}

#[tokio::test]
async fn an_approval_from_the_page_is_recorded_once_and_a_second_answer_names_the_first() {
    let (_dir, ws, write, shell) = workspace().await;
    let server = Server::start(&ws);
    let id = write.to_string();

    // Refused before anything is written: without the token, bad choices, "always" with no
    // entry to allow, a reason with an approval, an unknown or malformed request.
    let body = json!({"request_id": id, "choice": "once"}).to_string();
    let no_token = request(
        server.port,
        "POST",
        "/api/permission",
        &[
            ("Host", &server.host()),
            ("Content-Type", "application/json"),
        ],
        Some(body.as_bytes()),
    );
    assert_eq!(no_token.status, 403, "{no_token:?}");
    assert_eq!(no_token.json()["error"]["code"], "forbidden");
    for (body, status, code) in [
        (json!({"request_id": id, "choice": "maybe"}), 400, "usage"),
        (json!({"request_id": id, "choice": "always"}), 400, "usage"),
        (json!({"request_id": id, "choice": "save"}), 400, "usage"),
        (
            json!({"request_id": id, "choice": "once", "reason": "fine"}),
            400,
            "usage",
        ),
        (
            json!({"request_id": id, "approve": true}),
            400,
            "invalid_json",
        ),
        (
            json!({"request_id": "0195a1b2-c3d4-4e5f-8a6b-7c8d9e0f1a2b", "choice": "once"}),
            404,
            "protocol_not_found",
        ),
        (json!({"request_id": "xyz", "choice": "once"}), 400, "usage"),
    ] {
        let (status_got, answer) = answer(&server, &body);
        assert_eq!(
            (status_got, answer["error"]["code"].as_str()),
            (status, Some(code)),
            "{body}: {answer}"
        );
    }
    let duplicate = format!(r#"{{"request_id": "{id}", "choice": "no", "choice": "once"}}"#);
    assert_eq!(server.post("/api/permission", &duplicate).status, 400);
    assert_eq!(recorded(&ws, write).await, None);
    assert_eq!(pending(&server).len(), 2);

    let (status, approved) = answer(&server, &json!({"request_id": id, "choice": "once"}));
    assert_eq!(status, 200, "{approved}");
    let response_id = approved["response_id"].as_str().unwrap().to_owned();
    assert_eq!(
        approved,
        json!({"ok": true, "request_id": id, "approved": true, "choice": "once", "agent": "lead",
               "call": "write_file: notes.txt", "response_id": response_id, "saved": null})
    );
    let (yes, reply) = recorded(&ws, write).await.unwrap();
    assert!(yes);
    assert_eq!(reply.by, "page");
    assert_eq!(reply.choice.as_str(), "once");
    // The answer waits in the asking agent's mailbox, like any response.
    assert_eq!(
        mail_of(&ws, "lead"),
        [
            json!({"state": "ready", "type": null, "kind": "permission_response",
                "sender": "user", "approved": true, "content": reply_content(&reply)})
        ]
    );
    let left: Vec<Value> = pending(&server)
        .iter()
        .map(|p| p["request_id"].clone())
        .collect();
    assert_eq!(left, [json!(shell.to_string())]);

    // A second answer — from the page or `troupe deny` — is refused naming the first.
    let (status, again) = answer(
        &server,
        &json!({"request_id": id, "choice": "no", "reason": "too late"}),
    );
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "protocol_state_error");
    let message = again["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the first answer: approved once by page (approved with page (pid "),
        "{message}"
    );
    let denied = super::support::troupe_in(&ws, &["deny", &id, "--reason", "too late"]);
    super::support::assert_fails(&denied, 1, "the first answer: approved once by page");
    assert_eq!(recorded(&ws, write).await.unwrap().1, reply);
    assert_eq!(mail_of(&ws, "lead").len(), 1);
}

/// A reply's content as the mailbox shows it.
fn reply_content(reply: &PermissionReply) -> Value {
    json!(reply.to_content())
}

#[tokio::test]
async fn a_denial_from_the_page_carries_its_reason_and_always_needs_a_suggested_entry() {
    let (_dir, ws, write, shell) = workspace().await;
    let server = Server::start(&ws);
    let (status, denied) = answer(
        &server,
        &json!({"request_id": write.to_string(), "choice": "no", "reason": "  not in notes.txt  "}),
    );
    assert_eq!(status, 200, "{denied}");
    assert_eq!(
        (denied["approved"].clone(), denied["choice"].clone()),
        (json!(false), json!("no"))
    );
    let (yes, reply) = recorded(&ws, write).await.unwrap();
    assert!(!yes);
    assert_eq!(reply.choice.as_str(), "no");
    assert!(reply.reason.ends_with("): not in notes.txt"), "{reply:?}");

    let (status, always) = answer(
        &server,
        &json!({"request_id": shell.to_string(), "choice": "always"}),
    );
    assert_eq!(status, 200, "{always}");
    assert_eq!(always["choice"], "always");
    let (yes, reply) = recorded(&ws, shell).await.unwrap();
    assert!(yes);
    assert!(
        reply
            .reason
            .ends_with("shell(cargo test:*) allowed for this run"),
        "{reply:?}"
    );
    assert_eq!(pending(&server), Vec::<Value>::new());
    assert!(!ws.join("troupe.toml").exists(), "always saves nothing");
}
