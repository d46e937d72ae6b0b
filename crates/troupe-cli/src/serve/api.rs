//! The routes of `troupe serve` (every one behind the checks of `http`): the page and its two
//! files, the read-only JSON views, the live event stream, and the three actions a person takes
//! (answer a plan, answer a permission request, send a message). GET never changes troupe's
//! state (it may catch up the stream's index, the server's own cache).

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};
use troupe::bootstrap::StoreChoice;
use troupe::bootstrap::TeamView;
use troupe::layout::Layout;
use troupe::wire::AgentName;

use super::action::{cli_error, parse_body};
use super::changes::Changes;
use super::cost::CostFold;
use super::filter::Filter;
use super::history::{EventSource, ReadError};
use super::http::Handler;
use super::response::{self, error, query_param, respond, Body};
use super::state;
use super::token::Token;
use super::window::{json_array, EventWindow};
use super::{page, permissions, send, sse};
use crate::plan_answer::answer_plan_in;

/// The largest request body accepted (JSON of a review or a message).
pub const MAX_BODY: usize = 64 * 1024;

/// The most events one `GET /api/events` returns (and how many without `limit`).
const MAX_LIMIT: usize = 5_000;

/// The most events of the history one filtered `GET /api/events?before=` searches; the
/// answer's `next_before` says where to go on.
const MAX_SCAN: usize = 50_000;

/// What every request handler shares.
pub struct Shared {
    pub workspace: PathBuf,
    pub layout: Layout,
    pub token: Arc<Token>,
    pub changes: Changes,
    /// The latest events and the fold of the stream (never the whole stream).
    pub window: tokio::sync::Mutex<EventWindow>,
    /// The team served (the workspace's files, or a shared team's database), and its
    /// read-only views (`/api/state`), opened once.
    pub view: TeamView,
    /// Where the team's stores are, as the commands name it (for the functions the commands
    /// share: answers and messages go there).
    pub choice: StoreChoice,
    /// What the agents' costs are estimated with: the settings' `[prices]` over the built-in
    /// table, as they were when the server started.
    pub prices: troupe::prices::PriceTable,
    /// The fold of the team's usage records: per-agent costs and the cost over time.
    pub cost: tokio::sync::Mutex<CostFold>,
}

impl Shared {
    /// A reader of the served team's events after `since` (a file's found through the index:
    /// the stream is not read from its start).
    pub async fn reader_after(&self, since: u64) -> Result<EventSource, ReadError> {
        self.window.lock().await.reader_after(since).await
    }

    /// The store choice of the served team (for the functions the commands share).
    pub fn choice(&self) -> StoreChoice {
        self.choice.clone()
    }
}

/// The routes as the server's [`Handler`]: every request it lets through, answered with `shared`.
pub fn handler(shared: Arc<Shared>) -> Handler {
    Arc::new(move |request| Box::pin(route(shared.clone(), request)))
}

async fn route(shared: Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().map(str::to_owned);
    let get = method == Method::GET || method == Method::HEAD;
    match path.as_str() {
        "/" | "/index.html" if get => respond(
            StatusCode::OK,
            "text/html; charset=utf-8",
            page::index(shared.token.as_str()),
        ),
        "/app.js" if get => respond(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            page::APP_JS,
        ),
        "/style.css" if get => respond(StatusCode::OK, "text/css; charset=utf-8", page::STYLE_CSS),
        "/api/state" if get => state_view(&shared).await,
        "/api/events" if get => events(&shared, query.as_deref()).await,
        "/api/events/stream" if get => {
            let since = request
                .headers()
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .or_else(|| query_param(query.as_deref(), "since"));
            match parse_seq(since.as_deref()) {
                Ok(since) => {
                    let found = shared.reader_after(since).await;
                    match found {
                        Ok(source) => sse::stream(shared.changes.subscribe(), source, since),
                        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.code, &e.message),
                    }
                }
                Err(cause) => error(StatusCode::BAD_REQUEST, "usage", &cause),
            }
        }
        "/api/conversation" if get => conversation(&shared, query.as_deref()).await,
        "/api/review" if method == Method::POST => match read_json(request).await {
            Ok(body) => review(&shared, &body).await,
            Err(response) => response,
        },
        "/api/permission" if method == Method::POST => match read_json(request).await {
            Ok(body) => permissions::answer(&shared.workspace, &shared.choice(), &body).await,
            Err(response) => response,
        },
        "/api/send" if method == Method::POST => match read_json(request).await {
            Ok(body) => send_message(&shared, &body).await,
            Err(response) => response,
        },
        "/" | "/index.html" | "/app.js" | "/style.css" | "/api/state" | "/api/events"
        | "/api/events/stream" | "/api/conversation" | "/api/review" | "/api/permission"
        | "/api/send" => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            &format!("{method} is not allowed on {path}"),
        ),
        _ => error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("no route {path}"),
        ),
    }
}

/// An event seq from the query or `Last-Event-ID` (none: 0); the error is the cause.
fn parse_seq(raw: Option<&str>) -> Result<u64, String> {
    match raw {
        None | Some("") => Ok(0),
        Some(raw) => raw
            .trim()
            .parse()
            .map_err(|_| format!("{raw:?} is not an event seq (a whole number)")),
    }
}

/// The body of a POST, when it is JSON (`Content-Type: application/json`) of at most
/// [`MAX_BODY`] bytes.
async fn read_json(request: Request<Incoming>) -> Result<Bytes, Response<Body>> {
    let is_json = request
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be JSON (Content-Type: application/json)",
        ));
    }
    match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(_) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            &format!("the body must be at most {MAX_BODY} bytes"),
        )),
    }
}

async fn state_view(shared: &Shared) -> Response<Body> {
    match state::state(
        &shared.layout,
        &shared.view,
        &shared.window,
        &shared.cost,
        &shared.prices,
    )
    .await
    {
        Ok(value) => response::json(StatusCode::OK, &value),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.code, &e.message),
    }
}

/// `GET /api/events`, two ways:
/// - `?since=N&limit=M`: the events with `seq > N`, at most M (default and cap 5,000), oldest
///   first, as a JSON array.
/// - `?before=N|end&limit=M[&agent=A][&kind=K][&q=TEXT]`: the latest M (default and cap 5,000)
///   events with `seq < N` (or the stream's last ones) that match the filters, oldest first, as
///   `{"events": [...], "next_before": S|null, "last_seq": L}`: `next_before` is where to ask
///   for the page before this one (null: the stream's start was reached). A filtered search
///   reads at most 50,000 events of the history per request, so a page may hold fewer than M
///   events and still have a `next_before`.
async fn events(shared: &Shared, query: Option<&str>) -> Response<Body> {
    let limit = match query_param(query, "limit") {
        None => MAX_LIMIT,
        Some(raw) => match raw.parse::<usize>() {
            Ok(n) => n.min(MAX_LIMIT),
            Err(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "usage",
                    &format!("limit {raw:?} is not a whole number"),
                )
            }
        },
    };
    let before = match query_param(query, "before").as_deref() {
        None => None,
        Some("end") => Some(u64::MAX),
        Some(raw) => match parse_seq(Some(raw)) {
            Ok(seq) => Some(seq),
            Err(cause) => return error(StatusCode::BAD_REQUEST, "usage", &cause),
        },
    };
    let since = match parse_seq(query_param(query, "since").as_deref()) {
        Ok(since) => since,
        Err(cause) => return error(StatusCode::BAD_REQUEST, "usage", &cause),
    };
    let mut window = shared.window.lock().await;
    if let Err(e) = window.refresh().await {
        return error(StatusCode::INTERNAL_SERVER_ERROR, e.code, &e.message);
    }
    let Some(before) = before else {
        return match window.after(since, limit).await {
            Ok(events) => respond(StatusCode::OK, "application/json", json_array(&events)),
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.code, &e.message),
        };
    };
    let filter = Filter::new(
        query_param(query, "agent"),
        query_param(query, "kind"),
        query_param(query, "q"),
    );
    match window.before(before, limit, &filter, MAX_SCAN).await {
        Ok(older) => {
            let next = older
                .next_before
                .map_or_else(|| "null".to_owned(), |s| s.to_string());
            respond(
                StatusCode::OK,
                "application/json",
                format!(
                    r#"{{"events":{},"next_before":{next},"last_seq":{}}}"#,
                    json_array(&older.events),
                    window.last_seq()
                ),
            )
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.code, &e.message),
    }
}

/// `GET /api/conversation?agent=NAME`: the agent's transcript since its last compaction, each
/// message with its origin.
async fn conversation(shared: &Shared, query: Option<&str>) -> Response<Body> {
    let raw = query_param(query, "agent").unwrap_or_default();
    let agent = match AgentName::parse(&raw) {
        Ok(agent) => agent,
        Err(e) => return error(StatusCode::BAD_REQUEST, "usage", &e.to_string()),
    };
    let loaded = shared
        .view
        .conversation(&agent)
        .await
        .map_err(|e| e.to_string());
    match loaded {
        Ok(loaded) => {
            let messages: Vec<Value> = loaded
                .messages
                .iter()
                .zip(&loaded.origins)
                .map(|(message, origin)| json!({"origin": origin, "message": message}))
                .collect();
            response::json(
                StatusCode::OK,
                &json!({"agent": agent, "compactions": loaded.boundaries, "messages": messages}),
            )
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "storage_error", &e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewBody {
    request_id: String,
    approve: bool,
    #[serde(default)]
    feedback: Option<String>,
}

/// `POST /api/review`: the same answer as `troupe review` (one shared function).
async fn review(shared: &Shared, body: &[u8]) -> Response<Body> {
    let body: ReviewBody = match parse_body(body, "a review") {
        Ok(body) => body,
        Err(bad) => return bad.response(),
    };
    let feedback = body.feedback.as_deref().filter(|f| !f.trim().is_empty());
    match answer_plan_in(
        &shared.workspace,
        &shared.choice(),
        &body.request_id,
        body.approve,
        feedback,
    )
    .await
    {
        Ok(answer) => response::json(
            StatusCode::OK,
            &json!({
                "ok": true,
                "request_id": answer.request_id.to_string(),
                "approved": answer.approved,
                "response_id": answer.response_id.to_string(),
                "recipient": answer.recipient,
            }),
        ),
        Err(e) => cli_error(&e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendBody {
    agent: String,
    text: String,
}

/// `POST /api/send`: the same as `troupe send AGENT TEXT`.
async fn send_message(shared: &Shared, body: &[u8]) -> Response<Body> {
    let body: SendBody = match parse_body(body, "a message") {
        Ok(body) => body,
        Err(bad) => return bad.response(),
    };
    let agent = match AgentName::parse(&body.agent) {
        Ok(agent) => agent,
        Err(e) => return error(StatusCode::BAD_REQUEST, "usage", &e.to_string()),
    };
    match send::send_from_user(&shared.workspace, &shared.choice(), &agent, &body.text).await {
        Ok(id) => response::json(
            StatusCode::OK,
            &json!({"ok": true, "message_id": id.to_string(), "agent": agent, "to": agent, "from": "user"}),
        ),
        Err(e) => error(e.status, e.code, &e.message),
    }
}
