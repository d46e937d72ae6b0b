//! `[store] url`: a PostgreSQL URL that may be committed, so it carries no password — the check
//! ([`store_url`]) and how any store URL is shown ([`store_url_shown`], `troupe config`).

use super::error::SettingsErrorKind as Kind;
use crate::store::is_postgres_url;

/// Why `[store] url` may not carry a password. PostgreSQL's `PGPASSWORD` and `~/.pgpass` are not
/// named: tokio-postgres reads neither, so troupe's only place for the password is the URL.
const STORE_PASSWORD_HINT: &str = "`store.url` carries a password: a password never goes in a \
     settings file, which may be committed; give the whole URL in TROUPE_STORE_URL instead (troupe \
     takes it out of its environment at start, so no command an agent runs sees it)";
/// What `[store] url` must look like.
const STORE_URL_FORM: &str = "a PostgreSQL URL (postgres://user@host:port/database)";

/// Checks `[store] url` (see [`super::store`]): the URL, trimmed, or why not. The password check
/// comes first and uses PostgreSQL's own parsing, so that every way of writing one (the user
/// part, `?password=`, a key/value string) is caught; no message repeats the value.
pub(super) fn store_url(raw: &str) -> Result<String, (Kind, String)> {
    let url = raw.trim();
    if url.is_empty() {
        return Err((Kind::Invalid, "`store.url` must not be blank".into()));
    }
    match url.parse::<tokio_postgres::Config>() {
        Ok(config) if config.get_password().is_some() => {
            Err((Kind::Secret, STORE_PASSWORD_HINT.into()))
        }
        Ok(_) if is_postgres_url(url) => Ok(url.to_owned()),
        Err(e) if is_postgres_url(url) => Err((
            Kind::Invalid,
            format!("`store.url` must be {STORE_URL_FORM}: {e}"),
        )),
        Ok(_) | Err(_) => Err((
            Kind::Invalid,
            format!("`store.url` must be {STORE_URL_FORM}"),
        )),
    }
}

/// A store URL as `troupe config` may print it (from any source: `TROUPE_STORE_URL` may carry a
/// password): the password of the user part or of a `password=` parameter replaced by `***`.
/// None when it cannot be shown safely (not parseable, a percent-encoded parameter name, a
/// key/value string with a password).
pub fn store_url_shown(url: &str) -> Option<String> {
    let password_of = |url: &str| {
        url.parse::<tokio_postgres::Config>()
            .map(|c| c.get_password().map(<[u8]>::to_vec))
    };
    match password_of(url) {
        Ok(None) => return Some(url.to_owned()),
        Ok(Some(_)) if is_postgres_url(url) => {}
        Ok(Some(_)) | Err(_) => return None,
    }
    let (scheme, rest) = url.split_once("://")?;
    // As tokio-postgres reads it: the credentials end at the first `@`, the password starts
    // after their first `:`.
    let (credentials, rest) = match rest.split_once('@') {
        Some((credentials, rest)) => match credentials.split_once(':') {
            Some((user, _)) => (format!("{user}:***@"), rest),
            None => (format!("{credentials}@"), rest),
        },
        None => (String::new(), rest),
    };
    let (place, query) = match rest.split_once('?') {
        Some((place, query)) => (place, Some(query)),
        None => (rest, None),
    };
    let mut shown = format!("{scheme}://{credentials}{place}");
    if let Some(query) = query {
        let mut params = Vec::new();
        for param in query.split('&') {
            let key = param.split('=').next().unwrap_or_default();
            if key.contains('%') {
                return None;
            }
            params.push(if key == "password" {
                "password=***"
            } else {
                param
            });
        }
        shown.push('?');
        shown.push_str(&params.join("&"));
    }
    // Whatever the reading above missed, the parser would see.
    match password_of(&shown) {
        Ok(None) => Some(shown),
        Ok(Some(p)) if p == b"***" => Some(shown),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_are_shown_without_their_password() {
        for (url, shown) in [
            ("postgres://u@h:5432/db", Some("postgres://u@h:5432/db")),
            (
                "postgres://u:s3cret@h:5432/db",
                Some("postgres://u:***@h:5432/db"),
            ),
            (
                "postgresql://u@h/db?sslmode=disable&password=s3cret",
                Some("postgresql://u@h/db?sslmode=disable&password=***"),
            ),
            (
                "postgres://u:s3cret@h/db?password=s3cret2&application_name=x",
                Some("postgres://u:***@h/db?password=***&application_name=x"),
            ),
            ("postgres://u@h/db?pass%77ord=s3cret", None),
            ("postgres://u:s3cret@h:port/db", None),
            ("host=h password=s3cret", None),
        ] {
            assert_eq!(store_url_shown(url).as_deref(), shown, "{url}");
        }
    }
}
