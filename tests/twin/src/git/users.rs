//! Users and their named access tokens, minted and revoked while the server runs, through the
//! Rust API ([`super::GitServer::add_user`], [`super::GitServer::mint_token`],
//! [`super::GitServer::revoke_named_token`]) or over HTTP(S) with Gitea's token API shape, so
//! a person at a shell (`./demo --keep`) can rotate a token as on a real Gitea:
//!
//! - `POST /api/v1/users/{user}/tokens` with a JSON body `{"name": "..."}` (other fields such
//!   as `scopes` are accepted and ignored): `201` and `{"id", "name", "sha1", "token_last_eight"}`
//!   (`sha1` is the token, shown only here); a name the user already has: `400`
//!   `{"message": "access token name has been used already"}`.
//! - `GET /api/v1/users/{user}/tokens`: `200` and `[{"id", "name", "sha1": "",
//!   "token_last_eight"}]`.
//! - `DELETE /api/v1/users/{user}/tokens/{name or id}`: `204`, or `404` for none such.
//!
//! Every call needs basic auth with the user's password (Gitea refuses a token there), as that
//! user: `401` with `WWW-Authenticate: Basic` without it, `403` as another user. A minted token
//! is a credential for every repository whose auth names that user ([`super::GitServer::set_auth`]),
//! read and write: as the password of basic auth with that username, or as
//! `Authorization: Bearer`/`token`. The user's password is one too (Gitea accepts it for Git
//! over HTTP when the account has no second factor).

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use serde_json::{Value, json};

use super::http::Body;
use super::{GitError, Result, Shared};

/// The API's path prefix.
pub(crate) const API_PREFIX: &str = "/api/v1/users/";

/// One named token of a user.
#[derive(Debug, Clone)]
pub(crate) struct NamedToken {
    pub(crate) id: u64,
    pub(crate) name: String,
    pub(crate) value: String,
}

/// A user: the password (for the API and Git) and the tokens minted so far, oldest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct User {
    pub(crate) password: String,
    pub(crate) tokens: Vec<NamedToken>,
}

/// Whether `secret` is `user`'s password or one of its live tokens.
pub(crate) fn user_accepts(shared: &Shared, user: &str, secret: &str) -> bool {
    let users = shared.users.lock().unwrap();
    users
        .get(user)
        .is_some_and(|u| u.password == secret || u.tokens.iter().any(|t| t.value == secret))
}

/// The user whose live token `token` is (for `Authorization: Bearer`).
pub(crate) fn token_owner(shared: &Shared, token: &str) -> Option<String> {
    let users = shared.users.lock().unwrap();
    users
        .iter()
        .find(|(_, u)| u.tokens.iter().any(|t| t.value == token))
        .map(|(n, _)| n.clone())
}

/// 40 lowercase hex characters from the kernel's random source (Gitea's tokens have that
/// shape).
fn random_token() -> Result<String> {
    use std::io::Read as _;
    let mut buf = [0u8; 20];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(|source| GitError::Io {
            context: "read /dev/urandom for a token".into(),
            source,
        })?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Mints token `name` for `user`: errors [`GitError::Invalid`] for an unknown user, an empty
/// name or a name the user already has.
pub(crate) fn mint(shared: &Shared, user: &str, name: &str) -> Result<NamedToken> {
    let name = name.trim();
    if name.is_empty() {
        return Err(GitError::Invalid("a token needs a name".into()));
    }
    let value = random_token()?;
    let mut users = shared.users.lock().unwrap();
    let u = users
        .get_mut(user)
        .ok_or_else(|| GitError::Invalid(format!("no user {user:?} on the twin Git server")))?;
    if u.tokens.iter().any(|t| t.name == name) {
        return Err(GitError::Invalid(format!(
            "access token name has been used already: user {user:?} has a token named {name:?}"
        )));
    }
    let id = shared
        .next_token_id
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let t = NamedToken {
        id,
        name: name.to_owned(),
        value,
    };
    u.tokens.push(t.clone());
    Ok(t)
}

/// Revokes `user`'s token named (or numbered) `name_or_id`; whether one was live.
pub(crate) fn revoke(shared: &Shared, user: &str, name_or_id: &str) -> bool {
    let mut users = shared.users.lock().unwrap();
    let Some(u) = users.get_mut(user) else {
        return false;
    };
    let before = u.tokens.len();
    u.tokens
        .retain(|t| t.name != name_or_id && t.id.to_string() != name_or_id);
    before != u.tokens.len()
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    let mut resp = Response::new(
        Full::new(Bytes::from(v.to_string()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json;charset=utf-8"),
    );
    resp
}

fn message(status: StatusCode, text: &str) -> Response<Body> {
    json_response(status, &json!({"message": text}))
}

fn last_eight(v: &str) -> &str {
    &v[v.len().saturating_sub(8)..]
}

/// The basic-auth user of `authorization` when its password is that user's password.
fn api_user(shared: &Shared, authorization: Option<&str>) -> Option<String> {
    let (scheme, rest) = authorization?.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, pass) = decoded.split_once(':')?;
    let users = shared.users.lock().unwrap();
    users
        .get(user)
        .filter(|u| u.password == pass)
        .map(|_| user.to_owned())
}

/// Answers one API request (`path` starts with [`API_PREFIX`]); returns the response and the
/// user it authenticated as.
pub(crate) fn handle(
    shared: &Shared,
    method: &Method,
    path: &str,
    authorization: Option<&str>,
    body: &[u8],
) -> (Response<Body>, Option<String>) {
    let rest = path.strip_prefix(API_PREFIX).unwrap_or_default();
    let parts: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
    let (user, token) = match parts.as_slice() {
        [user, "tokens"] => (*user, None),
        [user, "tokens", t] => (*user, Some(*t)),
        _ => return (message(StatusCode::NOT_FOUND, "Not Found"), None),
    };
    let Some(caller) = api_user(shared, authorization) else {
        let mut resp = message(
            StatusCode::UNAUTHORIZED,
            "basic auth with the user's password required",
        );
        let challenge = format!("Basic realm=\"{}\"", shared.realm);
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        return (resp, None);
    };
    if caller != user {
        return (
            message(StatusCode::FORBIDDEN, "only the user may manage its tokens"),
            Some(caller),
        );
    }
    let resp = match (method.clone(), token) {
        (Method::GET, None) => {
            let users = shared.users.lock().unwrap();
            let list: Vec<Value> = users
                .get(user)
                .map(|u| {
                    u.tokens
                        .iter()
                        .map(|t| {
                            json!({"id": t.id, "name": t.name, "sha1": "",
                                "token_last_eight": last_eight(&t.value)})
                        })
                        .collect()
                })
                .unwrap_or_default();
            json_response(StatusCode::OK, &Value::Array(list))
        }
        (Method::POST, None) => {
            let name = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_owned));
            match name {
                None => message(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "the body must be JSON with a \"name\"",
                ),
                Some(name) => match mint(shared, user, &name) {
                    Ok(t) => json_response(
                        StatusCode::CREATED,
                        &json!({"id": t.id, "name": t.name, "sha1": t.value,
                            "token_last_eight": last_eight(&t.value)}),
                    ),
                    Err(GitError::Invalid(m)) if m.contains("used already") => message(
                        StatusCode::BAD_REQUEST,
                        "access token name has been used already",
                    ),
                    Err(e) => message(StatusCode::UNPROCESSABLE_ENTITY, &e.to_string()),
                },
            }
        }
        (Method::DELETE, Some(t)) => {
            if revoke(shared, user, t) {
                let mut r = json_response(StatusCode::NO_CONTENT, &Value::Null);
                *r.body_mut() = Full::new(Bytes::new())
                    .map_err(|never| match never {})
                    .boxed();
                r
            } else {
                message(StatusCode::NOT_FOUND, "access token does not exist")
            }
        }
        _ => message(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed"),
    };
    (resp, Some(caller))
}
