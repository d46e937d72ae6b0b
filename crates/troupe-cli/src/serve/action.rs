//! What the routes that act (`POST /api/review`, `/api/permission`, `/api/send`) share: the
//! body read as strict JSON of one expected shape, and a command's error turned into an HTTP
//! answer with its stable code. The token and `Host` checks come before, in `http`.

use hyper::{Response, StatusCode};
use serde::de::DeserializeOwned;

use super::response::{error, Body};
use crate::error::{CliError, Kind};

/// `body` as a `T` (`what` names it in the error: "a review"), refusing duplicate and unknown
/// keys.
pub fn parse_body<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, BadBody> {
    troupe::wire::strict::from_json_bytes(body, what).map_err(|e| BadBody(e.to_string()))
}

/// A body that is not the JSON a route takes: the cause.
pub struct BadBody(String);

impl BadBody {
    /// Answered 400 `invalid_json`.
    pub fn response(&self) -> Response<Body> {
        error(StatusCode::BAD_REQUEST, "invalid_json", &self.0)
    }
}

/// A command's error as an HTTP answer with its stable code: bad input 400, no such request
/// 404, a request that cannot take this answer (answered, expired, its teammate gone) 409,
/// anything else (storage, corrupt state) 500.
pub fn cli_error(e: &CliError) -> Response<Body> {
    let code = e.code();
    let status = match e.kind() {
        Kind::Usage => StatusCode::BAD_REQUEST,
        _ if code == "protocol_not_found" => StatusCode::NOT_FOUND,
        _ if code == "invalid_arguments" => StatusCode::BAD_REQUEST,
        _ if code.starts_with("protocol_") && code != "protocol_state_corrupt" => {
            StatusCode::CONFLICT
        }
        // The plan's teammate failed, shut down or left the roster: it cannot take an answer.
        _ if code == "teammate_state" || code == "teammate_not_found" => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, code, e.cause())
}
