//! The HTTP side of the Git server: routing, authentication and the CGI bridge to the real
//! `git http-backend`.
//!
//! Behaviour relied on, from git-http-backend(1) and git's http-backend.c:
//! - The repository is `$GIT_PROJECT_ROOT$PATH_INFO` minus the service suffix
//!   (`/info/refs`, `/git-upload-pack`, `/git-receive-pack`, dumb `/HEAD`, `/objects/...`);
//!   `GIT_HTTP_EXPORT_ALL` exports every repository without a `git-daemon-export-ok` file.
//! - `REQUEST_METHOD`, `QUERY_STRING` (`service=git-upload-pack`), `CONTENT_TYPE` and
//!   `CONTENT_LENGTH` are the CGI variables; without `CONTENT_LENGTH` the request body is read
//!   to EOF, so chunked and HTTP/2 bodies are streamed to stdin and stdin is closed at the end.
//! - `HTTP_CONTENT_ENCODING=gzip` (or `x-gzip`) makes http-backend inflate the request body
//!   itself (git clients gzip upload-pack requests larger than 1 KiB).
//! - `GIT_PROTOCOL` carries the client's `Git-Protocol` header (`version=2`) to upload-pack.
//! - git-receive-pack is enabled when `REMOTE_USER` is set, or when the repository's
//!   `http.receivepack` is true (set on every repository here, so anonymous pushes to a repo
//!   without auth work the way they do on a permissive Gitea).
//! - The response is CGI: header lines (`Status: 404 Not Found`, `Content-Type: ...`), an empty
//!   line, then the body, streamed.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use futures::StreamExt as _;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::{Fault, RequestRecord, Shared};

pub(crate) type Body = BoxBody<Bytes, std::io::Error>;

fn full(status: StatusCode, text: &str) -> Response<Body> {
    let mut resp = Response::new(
        Full::new(Bytes::from(text.to_owned()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Splits a request path into (repository name, PATH_INFO for http-backend).
/// `/org/fleet.git/info/refs` and `/org/fleet/info/refs` both give `org/fleet` and
/// `/org/fleet.git/info/refs` (Gitea accepts the name with or without `.git`).
pub(crate) fn route(path: &str) -> Option<(String, String)> {
    const SUFFIXES: [&str; 5] = [
        "/info/refs",
        "/git-upload-pack",
        "/git-receive-pack",
        "/HEAD",
        "/objects/",
    ];
    let (pos, _) = SUFFIXES
        .iter()
        .filter_map(|s| path.find(s).map(|p| (p, *s)))
        .min_by_key(|(p, _)| *p)?;
    let repo = path[..pos].trim_start_matches('/');
    let repo = repo.strip_suffix(".git").unwrap_or(repo);
    if !super::valid_repo_name(repo) {
        return None;
    }
    Some((repo.to_owned(), format!("/{repo}.git{}", &path[pos..])))
}

/// Who the request authenticates as, for a repository with auth configured, and whether the
/// credential may write: `Ok(None)` for a repository without auth, `Ok(Some((user, write)))`,
/// `Err(())` for missing or wrong credentials.
/// Basic: username must match and the password must be a live token (Gitea accepts a token as
/// the password). Bearer / `token` schemes: the token alone (Gitea's API and git endpoints
/// accept `Authorization: Bearer <token>` and `token <token>`).
fn authenticate(
    shared: &Shared,
    repo: &str,
    auth_header: Option<&str>,
) -> Result<Option<(String, bool)>, ()> {
    let auth = shared.auth.lock().unwrap();
    let Some(cfg) = auth.get(repo) else {
        return Ok(None);
    };
    let Some(value) = auth_header else {
        return Err(());
    };
    let cfg = cfg.clone();
    let grant = |token: &str| -> Result<Option<(String, bool)>, ()> {
        if cfg.tokens.iter().any(|t| t == token) {
            Ok(Some((cfg.username.clone(), true)))
        } else if cfg.read_only.iter().any(|t| t == token) {
            Ok(Some((cfg.username.clone(), false)))
        } else {
            Err(())
        }
    };
    let (scheme, rest) = value.split_once(' ').ok_or(())?;
    let rest = rest.trim();
    let username = cfg.username.clone();
    // A user's own password or named token ([`super::users`]), read and write.
    let users_grant = |secret: &str| -> Result<Option<(String, bool)>, ()> {
        if super::users::user_accepts(shared, &username, secret) {
            Ok(Some((username.clone(), true)))
        } else {
            Err(())
        }
    };
    drop(auth);
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .map_err(|_| ())?;
        let decoded = String::from_utf8(decoded).map_err(|_| ())?;
        let (user, pass) = decoded.split_once(':').ok_or(())?;
        if user == username {
            return grant(pass).or_else(|()| users_grant(pass));
        }
    } else if scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token") {
        return grant(rest).or_else(|()| match super::users::token_owner(shared, rest) {
            Some(owner) if owner == username => Ok(Some((owner, true))),
            _ => Err(()),
        });
    }
    Err(())
}

/// The hyper service: one call per HTTP request.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    scheme: &'static str,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or_default().to_owned();
    let header_str =
        |name: &header::HeaderName| req.headers().get(name).and_then(|v| v.to_str().ok());
    let content_encoding = header_str(&header::CONTENT_ENCODING).map(str::to_owned);
    let git_protocol = req
        .headers()
        .get("git-protocol")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if path.starts_with(super::users::API_PREFIX) {
        return Ok(api(shared, scheme, req).await);
    }
    let mut record = RequestRecord {
        scheme,
        version: format!("{:?}", req.version()),
        method: method.clone(),
        path: path.clone(),
        query: query.clone(),
        repo: None,
        user: None,
        authorization: header_str(&header::AUTHORIZATION)
            .map(|v| v.split(' ').next().unwrap_or_default().to_owned()),
        status: 0,
        content_length: header_str(&header::CONTENT_LENGTH).and_then(|v| v.parse().ok()),
        content_encoding: content_encoding.clone(),
        git_protocol: git_protocol.clone(),
    };
    let admitted = admit(
        &shared,
        &mut record,
        &path,
        &query,
        header_str(&header::AUTHORIZATION),
    )
    .await;
    let (path_info, user) = match admitted {
        Ok(a) => a,
        Err(resp) => {
            shared.record(record);
            return Ok(resp);
        }
    };
    let mut cmd = backend_command(
        &shared,
        peer,
        &Cgi {
            method: &method,
            path_info: &path_info,
            query: &query,
            content_type: header_str(&header::CONTENT_TYPE),
            content_length: header_str(&header::CONTENT_LENGTH),
            content_encoding: content_encoding.as_deref(),
            git_protocol: git_protocol.as_deref(),
            user: user.as_deref(),
        },
    );
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            record.status = 500;
            shared.record(record);
            let msg = format!("cannot run {}: {e}\n", shared.http_backend.display());
            return Ok(full(StatusCode::INTERNAL_SERVER_ERROR, &msg));
        }
    };
    pump_stdin_and_stderr(
        &mut child,
        req.into_body(),
        shared.clone(),
        path_info.clone(),
    );

    // CGI response headers.
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut buf = BytesMut::with_capacity(8192);
    let header_end = loop {
        if let Some(end) = find_header_end(&buf) {
            break Some(end);
        }
        match stdout.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break None,
            Ok(_) => {}
        }
    };
    let Some((head_len, body_start)) = header_end else {
        record.status = 502;
        shared.record(record);
        return Ok(full(
            StatusCode::BAD_GATEWAY,
            "git http-backend sent no CGI headers\n",
        ));
    };
    let head = String::from_utf8_lossy(&buf[..head_len]).into_owned();
    let leftover = buf.split_off(body_start).freeze();
    let (builder, status) = cgi_response(&head);
    record.status = status.as_u16();
    shared.record(record);
    let body = body_stream(leftover, stdout, child);
    Ok(builder.body(body).unwrap_or_else(|e| {
        full(
            StatusCode::BAD_GATEWAY,
            &format!("bad CGI header from git http-backend: {e}\n"),
        )
    }))
}

/// A request to the token API ([`super::users`]), recorded like any other (never the body).
async fn api(shared: Arc<Shared>, scheme: &'static str, req: Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return full(
                StatusCode::BAD_REQUEST,
                &format!("cannot read the body: {e}\n"),
            );
        }
    };
    let (resp, user) = super::users::handle(
        &shared,
        &parts.method,
        parts.uri.path(),
        authorization.as_deref(),
        &body,
    );
    shared.record(RequestRecord {
        scheme,
        version: format!("{:?}", parts.version),
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().unwrap_or_default().to_owned(),
        repo: None,
        user,
        authorization: authorization.map(|v| v.split(' ').next().unwrap_or_default().to_owned()),
        status: resp.status().as_u16(),
        content_length: None,
        content_encoding: None,
        git_protocol: None,
    });
    resp
}

/// Admits a request to repository `path` (or answers it): 404 for a path no route takes or a
/// repository that does not exist, an injected fault (a status, or a delay before going on),
/// 401 with the Basic challenge when the credentials are refused, 403 for a push with a
/// read-only token. Fills `record`'s repository, user and (when it answers) status; returns
/// the PATH_INFO for git http-backend and the user.
async fn admit(
    shared: &Shared,
    record: &mut RequestRecord,
    path: &str,
    query: &str,
    authorization: Option<&str>,
) -> Result<(String, Option<String>), Response<Body>> {
    let Some((repo, path_info)) = route(path) else {
        record.status = 404;
        return Err(full(StatusCode::NOT_FOUND, "Not found\n"));
    };
    record.repo = Some(repo.clone());
    if !shared.repo_dir(&repo).is_dir() {
        record.status = 404;
        return Err(full(StatusCode::NOT_FOUND, "Repository not found\n"));
    }
    let fault = shared.faults.lock().unwrap().get(&repo).copied();
    match fault {
        Some(Fault::Status(code)) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            record.status = status.as_u16();
            let text = format!(
                "{}\n",
                status.canonical_reason().unwrap_or("injected fault")
            );
            return Err(full(status, &text));
        }
        Some(Fault::Delay(d)) => tokio::time::sleep(d).await,
        None => {}
    }
    let user = match authenticate(shared, &repo, authorization) {
        Ok(user) => user,
        Err(()) => {
            record.status = 401;
            let mut resp = full(StatusCode::UNAUTHORIZED, "Unauthorized\n");
            let challenge = format!("Basic realm=\"{}\"", shared.realm);
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_str(&challenge)
                    .unwrap_or(HeaderValue::from_static("Basic realm=\"git\"")),
            );
            return Err(resp);
        }
    };
    let user = match user {
        Some((_, false))
            if query.contains("service=git-receive-pack")
                || path_info.ends_with("/git-receive-pack") =>
        {
            record.status = 403;
            return Err(full(StatusCode::FORBIDDEN, "Forbidden\n"));
        }
        Some((u, _)) => Some(u),
        None => None,
    };
    record.user = user.clone();
    Ok((path_info, user))
}

/// What git http-backend is told about the request (CGI/1.1 meta-variables).
struct Cgi<'a> {
    method: &'a str,
    path_info: &'a str,
    query: &'a str,
    content_type: Option<&'a str>,
    content_length: Option<&'a str>,
    content_encoding: Option<&'a str>,
    git_protocol: Option<&'a str>,
    user: Option<&'a str>,
}

/// git http-backend as a CGI for one request from `peer`: a clean environment (PATH, HOME, no
/// system config), the repository root, every repository exported, and the request's
/// meta-variables; stdin, stdout and stderr piped, killed when dropped.
fn backend_command(shared: &Shared, peer: SocketAddr, r: &Cgi<'_>) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&shared.http_backend);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &shared.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_PROJECT_ROOT", &shared.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("SERVER_SOFTWARE", "cluster-loop-twin-git")
        .env("REQUEST_METHOD", r.method)
        .env("PATH_INFO", r.path_info)
        .env("QUERY_STRING", r.query)
        .env("REMOTE_ADDR", peer.ip().to_string());
    if let Some(v) = r.content_type {
        cmd.env("CONTENT_TYPE", v);
    }
    if let Some(v) = r.content_length {
        cmd.env("CONTENT_LENGTH", v);
    }
    if let Some(v) = r.content_encoding {
        cmd.env("HTTP_CONTENT_ENCODING", v);
    }
    if let Some(v) = r.git_protocol {
        cmd.env("GIT_PROTOCOL", v);
    }
    if let Some(u) = r.user {
        cmd.env("REMOTE_USER", u);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Request body -> the backend's stdin, concurrently with reading the response (a large push
/// must not deadlock against a full stdout pipe), and the backend's stderr into the server's
/// log for `log_path`.
fn pump_stdin_and_stderr(
    child: &mut tokio::process::Child,
    mut body: Incoming,
    log_shared: Arc<Shared>,
    log_path: String,
) {
    let mut stdin = child.stdin.take().expect("piped stdin");
    tokio::spawn(async move {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            if let Ok(data) = frame.into_data()
                && stdin.write_all(&data).await.is_err()
            {
                break;
            }
        }
        let _ = stdin.shutdown().await;
    });
    let mut stderr = child.stderr.take().expect("piped stderr");
    tokio::spawn(async move {
        let mut buf = String::new();
        if stderr.read_to_string(&mut buf).await.is_ok() && !buf.trim().is_empty() {
            log_shared.backend_stderr(&log_path, buf.trim_end());
        }
    });
}

/// The response the CGI headers `head` say: its `Status:` (200 when absent or unreadable) and
/// every other header as is.
fn cgi_response(head: &str) -> (http::response::Builder, StatusCode) {
    let mut builder = Response::builder().status(StatusCode::OK);
    let mut status = StatusCode::OK;
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split(' ').next().and_then(|c| c.parse::<u16>().ok());
            status = code
                .and_then(|c| StatusCode::from_u16(c).ok())
                .unwrap_or(StatusCode::OK);
        } else {
            builder = builder.header(name.trim(), value);
        }
    }
    builder = builder.status(status);
    (builder, status)
}

/// Response body: what was read past the headers (`leftover`), then the rest of stdout. The
/// child is reaped at EOF; if the client goes away the stream is dropped and kill_on_drop
/// ends it.
fn body_stream(
    leftover: Bytes,
    stdout: tokio::process::ChildStdout,
    child: tokio::process::Child,
) -> Body {
    let first = if leftover.is_empty() {
        None
    } else {
        Some(leftover)
    };
    let stream = futures::stream::unfold(
        (first, Some(stdout), Some(child)),
        |(first, stdout, child)| async move {
            if let Some(chunk) = first {
                return Some((Ok(chunk), (None, stdout, child)));
            }
            let mut out = stdout?;
            let mut chunk = BytesMut::with_capacity(64 * 1024);
            match out.read_buf(&mut chunk).await {
                Ok(0) => {
                    if let Some(mut c) = child {
                        let _ = c.wait().await;
                    }
                    None
                }
                Ok(_) => Some((Ok(chunk.freeze()), (None, Some(out), child))),
                Err(e) => Some((Err(e), (None, None, child))),
            }
        },
    );
    BodyExt::boxed(StreamBody::new(stream.map(|r| r.map(Frame::data))))
}

/// Finds the blank line ending CGI headers: returns (header length, body start).
fn find_header_end(buf: &[u8]) -> Option<(usize, usize)> {
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, p + 4));
    let lf = buf
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|p| (p, p + 2));
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_smart_and_dumb_paths() {
        assert_eq!(
            route("/org/fleet.git/info/refs"),
            Some(("org/fleet".into(), "/org/fleet.git/info/refs".into()))
        );
        assert_eq!(
            route("/org/fleet/git-upload-pack"),
            Some(("org/fleet".into(), "/org/fleet.git/git-upload-pack".into()))
        );
        assert_eq!(
            route("/fleet.git/objects/info/packs"),
            Some(("fleet".into(), "/fleet.git/objects/info/packs".into()))
        );
        assert_eq!(route("/org/fleet.git"), None);
        assert_eq!(route("/../etc/info/refs"), None);
        assert_eq!(route("/info/refs"), None);
    }

    #[test]
    fn finds_cgi_header_end() {
        assert_eq!(find_header_end(b"Status: 200\r\n\r\nbody"), Some((11, 15)));
        assert_eq!(find_header_end(b"A: b\n\nbody"), Some((4, 6)));
        assert_eq!(find_header_end(b"A: b\r\n"), None);
    }
}
