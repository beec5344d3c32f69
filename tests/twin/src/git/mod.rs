//! A smart-HTTP Git server for the twin: real `git http-backend` over bare repositories in a
//! temp dir, on plain HTTP and on HTTPS with its own CA, both on 127.0.0.1 ephemeral ports by
//! default, or on the twin pod network's host address ([`GitServerOptions::listen`], e.g.
//! `10.213.0.1:443`) so the twin's real probe pods reach it by a DNS name their upstream
//! resolver answers (`twin::podexec`), with that name in the certificate.
//!
//! What is real: every byte of the Git protocol (upload-pack, receive-pack, protocol v2,
//! gzip request bodies) is produced by git's own `git http-backend` CGI (git-http-backend(1)),
//! and the test helpers build commits with real `git` plumbing. What is modelled: the HTTP
//! front (hyper 1 + rustls) and Gitea-like access control: a repository may require basic auth
//! (`username` + one of a list of tokens as the password) or `Authorization: Bearer <token>`;
//! anything else gets `401` with `WWW-Authenticate: Basic realm="..."`, which real git reports
//! as `fatal: Authentication failed for '<url>/'` and Flux's source-controller as
//! "authentication required". Tokens can be revoked while the server runs; a read-only token
//! fetches but gets `403 Forbidden` on push. A user ([`GitServer::add_user`]) has named tokens,
//! minted and revoked while the server runs through the Rust API or over HTTP(S) with Gitea's
//! token API shape (`/api/v1/users/{user}/tokens`: [`users`]), so a shell can rotate a token
//! the way an operator does on Gitea. Faults (an HTTP status, a delay) can be injected
//! per repository. [`messages`] holds what real git prints for each failure.
//!
//! The server runs on its own thread with its own tokio runtime, so it works the same from
//! synchronous tests (which block on `git` subprocesses) and from async code. [`GitServer`] is
//! `Send + Sync` (share it in an `Arc`); its repository helpers are blocking (each runs a few
//! `git` plumbing commands, milliseconds), so async callers that care use `spawn_blocking`.
//!
//! ```no_run
//! use twin::git::{Change, GitServer, GitServerOptions};
//! let server = GitServer::start(GitServerOptions::default())?;
//! let sha = server.create_repo_from_dir("org/fleet", "clusters".as_ref(), "main", "initial")?;
//! server.set_auth("org/fleet", "flux", &["token-1"])?;
//! let next = server.commit("org/fleet", &[Change::write("README.md", "hi\n")], "docs")?;
//! assert_ne!(sha, next);
//! println!("{} {}", server.url_https("org/fleet"), server.ca_pem());
//! # Ok::<(), twin::git::GitError>(())
//! ```

mod http;
pub mod messages;
mod tls;
mod users;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

/// Errors from the Git server and its helpers.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// A filesystem or socket operation failed; `context` says which.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A `git` command exited non-zero; `stderr` is git's own message.
    #[error("`git {args}` failed ({status}): {stderr}")]
    Command {
        args: String,
        status: String,
        stderr: String,
    },
    /// Generating the CA / server certificate or the TLS config failed.
    #[error("TLS setup: {0}")]
    Tls(String),
    /// The repository name is not `segment(/segment)*` of `[A-Za-z0-9._-]` (no `..`).
    #[error("invalid repository name {0:?}: use segments of [A-Za-z0-9._-] separated by '/'")]
    InvalidName(String),
    /// No such repository on this server.
    #[error("repository {0:?} does not exist on the twin Git server")]
    NoSuchRepo(String),
    /// The repository already exists.
    #[error("repository {0:?} already exists on the twin Git server")]
    RepoExists(String),
    /// The branch does not exist in the repository.
    #[error("branch {branch:?} does not exist in repository {repo:?}")]
    NoSuchBranch { repo: String, branch: String },
    /// Anything else the caller got wrong (e.g. a commit that does not exist).
    #[error("{0}")]
    Invalid(String),
}

/// Result alias for this module.
pub type Result<T, E = GitError> = std::result::Result<T, E>;

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> GitError {
    let context = context.into();
    move |source| GitError::Io { context, source }
}

/// Options for [`GitServer::start`].
#[derive(Debug, Clone)]
pub struct GitServerOptions {
    /// Extra subjectAltNames for the HTTPS certificate, besides `127.0.0.1` and `localhost`
    /// (e.g. `gitea.example.local`; reach it with [`GitServer::curlopt_resolve`]).
    pub dns_names: Vec<String>,
    /// The realm in `WWW-Authenticate: Basic realm="<realm>"` (Gitea sends `Gitea`).
    pub realm: String,
    /// The `git-http-backend` CGI binary. `None`: `$(git --exec-path)/git-http-backend`, else
    /// `/usr/lib/git-core/git-http-backend`.
    pub http_backend: Option<PathBuf>,
    /// Unix time (seconds, UTC) of the first commit the helpers make; each later commit is
    /// 60 s later, so histories are reproducible. Default: `SOURCE_DATE_EPOCH` from the
    /// environment, else 1767225600 (2026-01-01T00:00:00Z).
    pub epoch: i64,
    /// Author and committer `(name, email)` of helper commits.
    pub identity: (String, String),
    /// Address both listeners bind (default `127.0.0.1`). Pass
    /// `twin::podexec::PodExec::host_address()` to make the server reachable from the twin's
    /// pods (and still from this host); the address is added to the certificate's SANs.
    pub listen: std::net::IpAddr,
    /// Port of the plain-HTTP listener (default 0: ephemeral; 80 on a pod-network address
    /// gives the URLs a fleet repository authors, `http://<host>/...`).
    pub http_port: u16,
    /// Port of the HTTPS listener (default 0: ephemeral; 443 for `https://<host>/...`).
    pub https_port: u16,
}

impl Default for GitServerOptions {
    fn default() -> Self {
        let epoch = std::env::var("SOURCE_DATE_EPOCH")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(1_767_225_600);
        Self {
            dns_names: vec!["gitea.example.local".to_owned()],
            realm: "Gitea".to_owned(),
            http_backend: None,
            epoch,
            identity: ("Twin Git".to_owned(), "twin-git@example.local".to_owned()),
            listen: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            http_port: 0,
            https_port: 0,
        }
    }
}

/// One file-level change for [`GitServer::commit`].
#[derive(Debug, Clone)]
pub enum Change {
    /// Create or replace the file at `path` (repo-relative, `/`-separated), mode 100644.
    Write { path: String, contents: Vec<u8> },
    /// Remove `path` (a file, or a directory recursively). Error if nothing matches.
    Delete { path: String },
    /// Copy every regular file under `src` (recursively, skipping `.git` and symlinks) to
    /// `dest/<relative path>` (`dest` empty: the repository root), keeping the executable bit.
    CopyDir { src: PathBuf, dest: String },
}

impl Change {
    /// [`Change::Write`] shorthand.
    pub fn write(path: impl Into<String>, contents: impl Into<Vec<u8>>) -> Self {
        Change::Write {
            path: path.into(),
            contents: contents.into(),
        }
    }
    /// [`Change::Delete`] shorthand.
    pub fn delete(path: impl Into<String>) -> Self {
        Change::Delete { path: path.into() }
    }
    /// [`Change::CopyDir`] shorthand.
    pub fn copy_dir(src: impl Into<PathBuf>, dest: impl Into<String>) -> Self {
        Change::CopyDir {
            src: src.into(),
            dest: dest.into(),
        }
    }
}

/// One commit as `git log` shows it, newest first in [`GitServer::log`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Full 40-hex SHA-1.
    pub sha: String,
    /// First line of the message.
    pub subject: String,
    /// Author date, unix seconds.
    pub time: i64,
}

/// One HTTP request the server answered (for asserting what a client did, e.g. which auth
/// scheme source-controller sent).
#[derive(Debug, Clone)]
pub struct RequestRecord {
    /// `http` or `https`.
    pub scheme: &'static str,
    /// HTTP version as hyper reports it (`HTTP/1.1`, `HTTP/2.0`).
    pub version: String,
    /// Request method (`GET`, `POST`).
    pub method: String,
    /// Request path, e.g. `/org/fleet.git/info/refs`.
    pub path: String,
    /// Raw query string, e.g. `service=git-upload-pack`; empty if none.
    pub query: String,
    /// The repository the path names, if it routed to one.
    pub repo: Option<String>,
    /// The authenticated user (`REMOTE_USER`), if any.
    pub user: Option<String>,
    /// The scheme word of the `Authorization` header (`Basic`, `Bearer`), never the secret.
    pub authorization: Option<String>,
    /// HTTP status sent (for CGI responses, http-backend's `Status:`; 200 if it sent none).
    pub status: u16,
    /// The request's `Content-Length`, if it sent one (`None` for a chunked HTTP/1.1 body or
    /// an HTTP/2 body without the header).
    pub content_length: Option<u64>,
    /// `Content-Encoding` of the request (`gzip` when git compressed the body).
    pub content_encoding: Option<String>,
    /// The `Git-Protocol` header (`version=2`).
    pub git_protocol: Option<String>,
}

/// A fault injected on one repository's HTTP endpoints (see [`GitServer::set_fault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer every request for the repository with this HTTP status and a one-line text body
    /// (e.g. 500 or 503 for a Git server that is down behind its proxy). Real git reports
    /// `fatal: unable to access '<url>/': The requested URL returned error: <status>`.
    Status(u16),
    /// Hold every response this long before serving it normally (a slow server; for client
    /// timeouts).
    Delay(std::time::Duration),
}

#[derive(Debug, Clone)]
struct RepoAuth {
    username: String,
    /// Read and write.
    tokens: Vec<String>,
    /// Read only: receive-pack (push) gets 403.
    read_only: Vec<String>,
}

/// State shared between the server thread and the handle.
pub(crate) struct Shared {
    root: PathBuf,
    home: PathBuf,
    realm: String,
    http_backend: PathBuf,
    auth: Mutex<HashMap<String, RepoAuth>>,
    /// Users with a password and named tokens ([`users`]).
    users: Mutex<HashMap<String, users::User>>,
    next_token_id: AtomicU64,
    faults: Mutex<HashMap<String, Fault>>,
    requests: Mutex<Vec<RequestRecord>>,
    stderr: Mutex<Vec<String>>,
    tls_errors: Mutex<Vec<String>>,
}

impl Shared {
    fn repo_dir(&self, repo: &str) -> PathBuf {
        self.root.join(format!("{repo}.git"))
    }
    fn record(&self, r: RequestRecord) {
        self.requests.lock().unwrap().push(r);
    }
    fn backend_stderr(&self, path_info: &str, text: &str) {
        self.stderr
            .lock()
            .unwrap()
            .push(format!("{path_info}: {text}"));
    }
}

/// `segment(/segment)*`, segments of `[A-Za-z0-9._-]`, none `.`/`..`, no `.git` suffix needed.
pub(crate) fn valid_repo_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        })
}

fn normalize_repo(name: &str) -> Result<String> {
    let n = name.trim_matches('/');
    let n = n.strip_suffix(".git").unwrap_or(n);
    if valid_repo_name(n) {
        Ok(n.to_owned())
    } else {
        Err(GitError::InvalidName(name.to_owned()))
    }
}

/// A running Git server. Dropping it stops both listeners, kills in-flight `git
/// http-backend` processes and deletes the repositories.
pub struct GitServer {
    shared: Arc<Shared>,
    http_addr: SocketAddr,
    https_addr: SocketAddr,
    ca_pem: String,
    server_pem: String,
    ca_file: PathBuf,
    epoch: i64,
    commits: AtomicI64,
    identity: (String, String),
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    // Last: removed after the server thread has stopped.
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for GitServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitServer")
            .field("http", &self.http_addr)
            .field("https", &self.https_addr)
            .field("root", &self.shared.root)
            .finish()
    }
}

fn default_http_backend() -> PathBuf {
    let exec_path = Command::new("git")
        .arg("--exec-path")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if let Some(p) = exec_path.map(|p| p.join("git-http-backend"))
        && p.is_file()
    {
        return p;
    }
    PathBuf::from("/usr/lib/git-core/git-http-backend")
}

impl GitServer {
    /// Starts the server: binds [`GitServerOptions::listen`] twice (HTTP and HTTPS), generates the CA and
    /// server certificate, and serves until dropped.
    ///
    /// Errors: [`GitError::Io`] if a socket or the temp dir cannot be created or the
    /// http-backend binary is missing, [`GitError::Tls`] for certificate setup.
    pub fn start(opts: GitServerOptions) -> Result<GitServer> {
        let http_backend = opts
            .http_backend
            .clone()
            .unwrap_or_else(default_http_backend);
        if !http_backend.is_file() {
            return Err(GitError::Io {
                context: format!(
                    "git http-backend not found at {} (install git)",
                    http_backend.display()
                ),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        }
        let dir = tempfile::Builder::new()
            .prefix("twin-git-")
            .tempdir()
            .map_err(io_err("create temp dir for the Git server"))?;
        let root = dir.path().join("repos");
        let home = dir.path().join("home");
        for d in [&root, &home] {
            std::fs::create_dir_all(d).map_err(io_err(format!("create {}", d.display())))?;
        }
        let mut sans = opts.dns_names.clone();
        if !opts.listen.is_loopback() {
            sans.push(opts.listen.to_string());
        }
        let pki = tls::generate(&sans)?;
        let ca_file = dir.path().join("ca.crt");
        std::fs::write(&ca_file, &pki.ca_pem).map_err(io_err("write ca.crt"))?;

        let bind = |what: &str, port: u16| -> Result<std::net::TcpListener> {
            let addr = SocketAddr::new(opts.listen, port);
            let l = std::net::TcpListener::bind(addr)
                .map_err(io_err(format!("bind {addr} for {what}")))?;
            l.set_nonblocking(true).map_err(io_err("set_nonblocking"))?;
            Ok(l)
        };
        let http_l = bind("HTTP", opts.http_port)?;
        let https_l = bind("HTTPS", opts.https_port)?;
        let http_addr = http_l.local_addr().map_err(io_err("local_addr"))?;
        let https_addr = https_l.local_addr().map_err(io_err("local_addr"))?;

        let shared = Arc::new(Shared {
            root,
            home,
            realm: opts.realm.clone(),
            http_backend,
            auth: Mutex::new(HashMap::new()),
            users: Mutex::new(HashMap::new()),
            next_token_id: AtomicU64::new(1),
            faults: Mutex::new(HashMap::new()),
            requests: Mutex::new(Vec::new()),
            stderr: Mutex::new(Vec::new()),
            tls_errors: Mutex::new(Vec::new()),
        });
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("twin-git")
            .enable_all()
            .build()
            .map_err(io_err("build the Git server's tokio runtime"))?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let acceptor = tokio_rustls::TlsAcceptor::from(pki.config.clone());
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("twin-git-server".into())
            .spawn(move || {
                rt.block_on(async move {
                    let http_l = tokio::net::TcpListener::from_std(http_l);
                    let https_l = tokio::net::TcpListener::from_std(https_l);
                    let (Ok(http_l), Ok(https_l)) = (http_l, https_l) else {
                        return;
                    };
                    tokio::select! {
                        _ = accept_loop(http_l, None, thread_shared.clone()) => {}
                        _ = accept_loop(https_l, Some(acceptor), thread_shared) => {}
                        _ = rx => {}
                    }
                });
                // Dropping the runtime here cancels every connection task; in-flight
                // http-backend children are killed (kill_on_drop).
                rt.shutdown_background();
            })
            .map_err(io_err("spawn the Git server thread"))?;

        Ok(GitServer {
            shared,
            http_addr,
            https_addr,
            ca_pem: pki.ca_pem,
            server_pem: pki.server_pem,
            ca_file,
            epoch: opts.epoch,
            commits: AtomicI64::new(0),
            identity: opts.identity,
            shutdown: Some(tx),
            thread: Some(thread),
            _dir: dir,
        })
    }

    /// Address of the plain-HTTP listener.
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// Address of the HTTPS listener.
    pub fn https_addr(&self) -> SocketAddr {
        self.https_addr
    }

    /// The server's CA certificate (PEM): `GIT_SSL_CAINFO`, `http.sslCAInfo`, or the `ca.crt`
    /// key of a Flux GitRepository's secretRef.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate as a file on disk (same content as [`Self::ca_pem`]).
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// The HTTPS server (leaf) certificate, PEM.
    pub fn server_cert_pem(&self) -> &str {
        &self.server_pem
    }

    /// `http://127.0.0.1:<port>/<repo>.git`
    pub fn url_http(&self, repo: &str) -> String {
        format!(
            "http://{}/{}.git",
            self.http_addr,
            repo.trim_end_matches(".git")
        )
    }

    /// `https://127.0.0.1:<port>/<repo>.git`
    pub fn url_https(&self, repo: &str) -> String {
        format!(
            "https://{}/{}.git",
            self.https_addr,
            repo.trim_end_matches(".git")
        )
    }

    /// `https://<host>:<port>/<repo>.git` for one of the certificate's DNS names (`:<port>`
    /// left out when it is 443). Real git reaches it with `-c
    /// http.curloptResolve=<`[`Self::curlopt_resolve`]`>`, or through DNS when the server
    /// listens on a pod-network address ([`GitServerOptions::listen`]).
    pub fn url_https_host(&self, repo: &str, host: &str) -> String {
        let port = match self.https_addr.port() {
            443 => String::new(),
            p => format!(":{p}"),
        };
        format!("https://{host}{port}/{}.git", repo.trim_end_matches(".git"))
    }

    /// The `http.curloptResolve` value (libcurl CURLOPT_RESOLVE, git >= 2.37) that makes
    /// `host` resolve to this server's HTTPS listener: `<host>:<port>:127.0.0.1`.
    pub fn curlopt_resolve(&self, host: &str) -> String {
        format!("{host}:{}:{}", self.https_addr.port(), self.https_addr.ip())
    }

    /// Git config (`key`, `value`) pairs that let real git use this server under the URLs a
    /// fleet repository authors, unchanged: `https://<host>/...` is rewritten by
    /// `url.<base>.insteadOf` to `https://<host>:<https port>/...`, which `http.curloptResolve`
    /// pins to 127.0.0.1, so TLS still verifies the certificate for `host` (it must be one of
    /// [`GitServerOptions::dns_names`]); `http://<host>/...` goes to the plain listener.
    /// Pass each as `git -c key=value`, or as `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/
    /// `GIT_CONFIG_VALUE_n` in the environment.
    pub fn host_alias_config(&self, host: &str) -> Vec<(String, String)> {
        vec![
            (
                format!("url.https://{host}:{}/.insteadOf", self.https_addr.port()),
                format!("https://{host}/"),
            ),
            (
                format!("url.http://{}/.insteadOf", self.http_addr),
                format!("http://{host}/"),
            ),
            ("http.curloptResolve".to_owned(), self.curlopt_resolve(host)),
        ]
    }

    /// Directory holding the bare repository `repo` (`<root>/<repo>.git`).
    pub fn repo_path(&self, repo: &str) -> PathBuf {
        self.shared.repo_dir(repo.trim_end_matches(".git"))
    }

    /// Every request answered so far, oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// What `git http-backend` wrote to stderr, one entry per request that wrote any.
    pub fn backend_stderr(&self) -> Vec<String> {
        self.shared.stderr.lock().unwrap().clone()
    }

    /// TLS handshakes that failed on the HTTPS listener (e.g. a client that rejected the
    /// certificate: `received fatal alert: UnknownCA`).
    pub fn tls_errors(&self) -> Vec<String> {
        self.shared.tls_errors.lock().unwrap().clone()
    }

    /// Requires auth on `repo` for every request (read and write): basic auth with `username`
    /// and one of `tokens` as the password, or `Authorization: Bearer <token>`. Replaces any
    /// previous setting. Errors: [`GitError::NoSuchRepo`].
    pub fn set_auth(&self, repo: &str, username: &str, tokens: &[&str]) -> Result<()> {
        let repo = self.existing(repo)?;
        self.shared.auth.lock().unwrap().insert(
            repo,
            RepoAuth {
                username: username.to_owned(),
                tokens: tokens.iter().map(|t| (*t).to_owned()).collect(),
                read_only: Vec::new(),
            },
        );
        Ok(())
    }

    /// Makes `repo` public again (no auth). Returns whether auth was configured.
    pub fn clear_auth(&self, repo: &str) -> bool {
        let repo = repo.trim_end_matches(".git");
        self.shared.auth.lock().unwrap().remove(repo).is_some()
    }

    /// Adds a token to `repo`'s auth (which must be configured). Errors: [`GitError::Invalid`]
    /// if the repository has no auth.
    pub fn add_token(&self, repo: &str, token: &str) -> Result<()> {
        let repo = self.existing(repo)?;
        let mut auth = self.shared.auth.lock().unwrap();
        let cfg = auth
            .get_mut(&repo)
            .ok_or_else(|| GitError::Invalid(format!("repository {repo:?} has no auth set")))?;
        cfg.tokens.push(token.to_owned());
        Ok(())
    }

    /// Adds a read-only token to `repo`'s auth (which must be configured): fetches succeed,
    /// pushes (git-receive-pack) get `403 Forbidden`, like a Gitea token without write scope
    /// or a read-only deploy key. Errors: [`GitError::Invalid`] if the repository has no auth.
    pub fn add_read_only_token(&self, repo: &str, token: &str) -> Result<()> {
        let repo = self.existing(repo)?;
        let mut auth = self.shared.auth.lock().unwrap();
        let cfg = auth
            .get_mut(&repo)
            .ok_or_else(|| GitError::Invalid(format!("repository {repo:?} has no auth set")))?;
        cfg.read_only.push(token.to_owned());
        Ok(())
    }

    /// Revokes `token` on `repo` at once: the next request carrying it gets 401. Returns
    /// whether the token was live.
    pub fn revoke_token(&self, repo: &str, token: &str) -> bool {
        let repo = repo.trim_end_matches(".git");
        let mut auth = self.shared.auth.lock().unwrap();
        let Some(cfg) = auth.get_mut(repo) else {
            return false;
        };
        let before = cfg.tokens.len() + cfg.read_only.len();
        cfg.tokens.retain(|t| t != token);
        cfg.read_only.retain(|t| t != token);
        before != cfg.tokens.len() + cfg.read_only.len()
    }

    /// Adds (or replaces the password of) `user`, whose named tokens [`Self::mint_token`] and
    /// the HTTP token API ([`users`]: `POST/GET /api/v1/users/{user}/tokens`, `DELETE
    /// .../tokens/{name}`, basic auth with `password`) mint, list and revoke. A repository
    /// whose auth names `user` ([`Self::set_auth`]) accepts its live tokens and its password.
    /// Keeps the user's tokens when it exists.
    pub fn add_user(&self, user: &str, password: &str) {
        let mut users = self.shared.users.lock().unwrap();
        users.entry(user.to_owned()).or_default().password = password.to_owned();
    }

    /// Mints a token named `name` for `user` (40 random hex characters, returned once) while
    /// the server runs. Errors: [`GitError::Invalid`] for an unknown user, an empty name or a
    /// name the user already has (token names are unique per user, as on Gitea).
    pub fn mint_token(&self, user: &str, name: &str) -> Result<String> {
        users::mint(&self.shared, user, name).map(|t| t.value)
    }

    /// Revokes `user`'s token named `name` at once: the next request carrying it gets 401.
    /// Returns whether it was live.
    pub fn revoke_named_token(&self, user: &str, name: &str) -> bool {
        users::revoke(&self.shared, user, name)
    }

    /// The names of `user`'s live tokens, oldest first.
    pub fn token_names(&self, user: &str) -> Vec<String> {
        let users = self.shared.users.lock().unwrap();
        users
            .get(user)
            .map(|u| u.tokens.iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default()
    }

    /// `https://127.0.0.1:<port>/api/v1/users/<user>/tokens`: the token API for `user` on
    /// the HTTPS listener (its CA: [`Self::ca_file`]).
    pub fn tokens_url(&self, user: &str) -> String {
        format!(
            "https://{}{}{user}/tokens",
            self.https_addr,
            users::API_PREFIX
        )
    }

    /// Injects `fault` on every request for `repo` (checked before auth), or clears it with
    /// `None`. Takes effect for the next request. Errors: [`GitError::NoSuchRepo`].
    pub fn set_fault(&self, repo: &str, fault: Option<Fault>) -> Result<()> {
        let repo = self.existing(repo)?;
        let mut faults = self.shared.faults.lock().unwrap();
        match fault {
            Some(f) => faults.insert(repo, f),
            None => faults.remove(&repo),
        };
        Ok(())
    }

    fn existing(&self, repo: &str) -> Result<String> {
        let repo = normalize_repo(repo)?;
        if self.shared.repo_dir(&repo).is_dir() {
            Ok(repo)
        } else {
            Err(GitError::NoSuchRepo(repo))
        }
    }

    /// Runs `git` with a clean, reproducible environment (no system/user config, fixed
    /// identity, `LC_ALL=C`) and returns trimmed stdout.
    fn git(
        &self,
        git_dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        stdin: Option<&[u8]>,
    ) -> Result<String> {
        let mut cmd = Command::new("git");
        cmd.arg("--git-dir").arg(git_dir).args(args);
        cmd.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &self.shared.home)
            .env("XDG_CONFIG_HOME", &self.shared.home)
            .env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(io_err("run git (is git on PATH?)"))?;
        if let Some(input) = stdin {
            use std::io::Write as _;
            let mut pipe = child.stdin.take().expect("piped stdin");
            let input = input.to_vec();
            // Write from a thread so a large stdin cannot deadlock against stdout.
            let writer = std::thread::spawn(move || pipe.write_all(&input));
            let out = child.wait_with_output().map_err(io_err("wait for git"))?;
            let _ = writer.join();
            return check(args, out);
        }
        let out = child.wait_with_output().map_err(io_err("wait for git"))?;
        check(args, out)
    }

    /// Creates an empty bare repository whose HEAD names `branch` (no commits yet), with
    /// `http.receivepack=true` so anonymous pushes work when no auth is set.
    /// Errors: [`GitError::InvalidName`], [`GitError::RepoExists`].
    pub fn create_repo(&self, repo: &str, branch: &str) -> Result<()> {
        let repo = normalize_repo(repo)?;
        let dir = self.shared.repo_dir(&repo);
        if dir.exists() {
            return Err(GitError::RepoExists(repo));
        }
        std::fs::create_dir_all(&dir).map_err(io_err(format!("create {}", dir.display())))?;
        self.git(
            &dir,
            &[
                "init",
                "--quiet",
                "--bare",
                &format!("--initial-branch={branch}"),
            ],
            &[],
            None,
        )?;
        self.git(&dir, &["config", "http.receivepack", "true"], &[], None)?;
        Ok(())
    }

    /// Creates `repo` with one commit on `branch` holding every file under `dir` at the
    /// repository root (see [`Change::CopyDir`]). Returns the commit SHA (40 hex).
    pub fn create_repo_from_dir(
        &self,
        repo: &str,
        dir: &Path,
        branch: &str,
        message: &str,
    ) -> Result<String> {
        self.create_repo(repo, branch)?;
        self.commit_on(repo, branch, &[Change::copy_dir(dir, "")], message)
    }

    /// The branch HEAD names (the default branch a clone checks out).
    pub fn default_branch(&self, repo: &str) -> Result<String> {
        let repo = self.existing(repo)?;
        let head = self.git(
            &self.shared.repo_dir(&repo),
            &["symbolic-ref", "HEAD"],
            &[],
            None,
        )?;
        Ok(head.trim_start_matches("refs/heads/").to_owned())
    }

    /// Points HEAD (the default branch) at `branch`.
    pub fn set_default_branch(&self, repo: &str, branch: &str) -> Result<()> {
        let repo = self.existing(repo)?;
        let r = format!("refs/heads/{branch}");
        self.git(
            &self.shared.repo_dir(&repo),
            &["symbolic-ref", "HEAD", &r],
            &[],
            None,
        )?;
        Ok(())
    }

    /// Commits `changes` on top of the default branch (see [`Self::commit_on`]).
    pub fn commit(&self, repo: &str, changes: &[Change], message: &str) -> Result<String> {
        let branch = self.default_branch(repo)?;
        self.commit_on(repo, &branch, changes, message)
    }

    /// Commits `changes` on top of `branch` (created if absent, as a root commit) with the
    /// server's fixed identity and the next reproducible date, and advances the branch
    /// atomically (`git update-ref` with the old value: a concurrent push makes this fail
    /// rather than lose it). Returns the new commit SHA.
    pub fn commit_on(
        &self,
        repo: &str,
        branch: &str,
        changes: &[Change],
        message: &str,
    ) -> Result<String> {
        let repo = self.existing(repo)?;
        let git_dir = self.shared.repo_dir(&repo);
        let refname = format!("refs/heads/{branch}");
        let parent = self.rev_parse(&git_dir, &refname)?;
        let scratch = tempfile::Builder::new()
            .prefix("twin-git-index-")
            .tempdir()
            .map_err(io_err("temp dir for index"))?;
        let index = scratch.path().join("index");
        let index_s = index.to_string_lossy().into_owned();
        let work = scratch.path().join("work");
        std::fs::create_dir(&work).map_err(io_err("create scratch work tree"))?;
        let work_s = work.to_string_lossy().into_owned();
        let env = [("GIT_INDEX_FILE", index_s.as_str())];
        match &parent {
            Some(p) => self.git(&git_dir, &["read-tree", p], &env, None)?,
            None => self.git(&git_dir, &["read-tree", "--empty"], &env, None)?,
        };
        for change in changes {
            match change {
                Change::Write { path, contents } => {
                    let path = clean_path(path)?;
                    let blob = self.git(
                        &git_dir,
                        &["hash-object", "-w", "--stdin"],
                        &[],
                        Some(contents),
                    )?;
                    let info = format!("100644,{blob},{path}");
                    self.git(
                        &git_dir,
                        &["update-index", "--add", "--cacheinfo", &info],
                        &env,
                        None,
                    )?;
                }
                Change::Delete { path } => {
                    let path = clean_path(path)?;
                    self.git(
                        &git_dir,
                        &[
                            "--work-tree",
                            &work_s,
                            "rm",
                            "-r",
                            "--cached",
                            "--quiet",
                            "--",
                            &path,
                        ],
                        &env,
                        None,
                    )?;
                }
                Change::CopyDir { src, dest } => {
                    let dest = if dest.trim_matches('/').is_empty() {
                        String::new()
                    } else {
                        format!("{}/", clean_path(dest)?)
                    };
                    let mut files = Vec::new();
                    collect_files(src, src, &mut files)?;
                    if files.is_empty() {
                        continue;
                    }
                    let paths: String = files
                        .iter()
                        .map(|(abs, _, _)| format!("{}\n", abs.display()))
                        .collect();
                    let shas = self.git(
                        &git_dir,
                        &["hash-object", "-w", "--stdin-paths", "--no-filters"],
                        &[],
                        Some(paths.as_bytes()),
                    )?;
                    let mut info = String::new();
                    for ((_, rel, exec), sha) in files.iter().zip(shas.lines()) {
                        let mode = if *exec { "100755" } else { "100644" };
                        info.push_str(&format!("{mode} {sha}\t{dest}{rel}\n"));
                    }
                    self.git(
                        &git_dir,
                        &["update-index", "--index-info"],
                        &env,
                        Some(info.as_bytes()),
                    )?;
                }
            }
        }
        let tree = self.git(&git_dir, &["write-tree"], &env, None)?;
        let n = self.commits.fetch_add(1, Ordering::SeqCst);
        let date = format!("{} +0000", self.epoch + 60 * n);
        let (name, email) = &self.identity;
        let id_env = [
            ("GIT_AUTHOR_NAME", name.as_str()),
            ("GIT_AUTHOR_EMAIL", email.as_str()),
            ("GIT_AUTHOR_DATE", date.as_str()),
            ("GIT_COMMITTER_NAME", name.as_str()),
            ("GIT_COMMITTER_EMAIL", email.as_str()),
            ("GIT_COMMITTER_DATE", date.as_str()),
        ];
        let mut args = vec!["commit-tree", tree.as_str()];
        if let Some(p) = &parent {
            args.extend(["-p", p.as_str()]);
        }
        let sha = self.git(&git_dir, &args, &id_env, Some(message.as_bytes()))?;
        // Old value "" (40 zeros) = must not exist yet.
        let old = parent.clone().unwrap_or_else(|| "0".repeat(40));
        self.git(&git_dir, &["update-ref", &refname, &sha, &old], &[], None)?;
        Ok(sha)
    }

    fn rev_parse(&self, git_dir: &Path, refname: &str) -> Result<Option<String>> {
        let mut cmd = Command::new("git");
        cmd.arg("--git-dir")
            .arg(git_dir)
            .args([
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{refname}^{{commit}}"),
            ])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &self.shared.home);
        let out = cmd.output().map_err(io_err("run git rev-parse"))?;
        if out.status.success() {
            Ok(Some(String::from_utf8_lossy(&out.stdout).trim().to_owned()))
        } else {
            Ok(None)
        }
    }

    /// Force-moves (or creates) `branch` to commit `sha`: e.g. a server whose main is behind.
    /// Errors: [`GitError::Invalid`] if `sha` is not a commit in `repo`.
    pub fn set_branch(&self, repo: &str, branch: &str, sha: &str) -> Result<()> {
        let repo = self.existing(repo)?;
        let git_dir = self.shared.repo_dir(&repo);
        let full = self
            .rev_parse(&git_dir, sha)?
            .ok_or_else(|| GitError::Invalid(format!("{sha} is not a commit in {repo:?}")))?;
        self.git(
            &git_dir,
            &["update-ref", &format!("refs/heads/{branch}"), &full],
            &[],
            None,
        )?;
        Ok(())
    }

    /// Creates or moves the lightweight tag `tag` to commit `sha`.
    pub fn set_tag(&self, repo: &str, tag: &str, sha: &str) -> Result<()> {
        let repo = self.existing(repo)?;
        let git_dir = self.shared.repo_dir(&repo);
        let full = self
            .rev_parse(&git_dir, sha)?
            .ok_or_else(|| GitError::Invalid(format!("{sha} is not a commit in {repo:?}")))?;
        self.git(
            &git_dir,
            &["update-ref", &format!("refs/tags/{tag}"), &full],
            &[],
            None,
        )?;
        Ok(())
    }

    /// Deletes `branch`. Errors: [`GitError::NoSuchBranch`].
    pub fn delete_branch(&self, repo: &str, branch: &str) -> Result<()> {
        self.head(repo, branch)?;
        let git_dir = self.repo_path(repo);
        self.git(
            &git_dir,
            &["update-ref", "-d", &format!("refs/heads/{branch}")],
            &[],
            None,
        )?;
        Ok(())
    }

    /// The commit `branch` points at (40 hex). Errors: [`GitError::NoSuchBranch`].
    pub fn head(&self, repo: &str, branch: &str) -> Result<String> {
        let repo = self.existing(repo)?;
        self.rev_parse(
            &self.shared.repo_dir(&repo),
            &format!("refs/heads/{branch}"),
        )?
        .ok_or(GitError::NoSuchBranch {
            repo,
            branch: branch.to_owned(),
        })
    }

    /// Every branch and the commit it points at.
    pub fn branches(&self, repo: &str) -> Result<BTreeMap<String, String>> {
        let repo = self.existing(repo)?;
        let out = self.git(
            &self.shared.repo_dir(&repo),
            &[
                "for-each-ref",
                "--format=%(refname:strip=2) %(objectname)",
                "refs/heads/",
            ],
            &[],
            None,
        )?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(b, s)| (b.to_owned(), s.to_owned()))
            .collect())
    }

    /// History of `branch`, newest first (`git log --first-parent`).
    pub fn log(&self, repo: &str, branch: &str) -> Result<Vec<LogEntry>> {
        let head = self.head(repo, branch)?;
        let out = self.git(
            &self.repo_path(repo),
            &["log", "--first-parent", "--format=%H%x00%at%x00%s", &head],
            &[],
            None,
        )?;
        Ok(out
            .lines()
            .filter_map(|l| {
                let mut it = l.splitn(3, '\0');
                Some(LogEntry {
                    sha: it.next()?.to_owned(),
                    time: it.next()?.parse().ok()?,
                    subject: it.next().unwrap_or_default().to_owned(),
                })
            })
            .collect())
    }

    /// Contents of `path` at `rev` (a branch, tag or SHA), e.g. to check what a push wrote.
    pub fn read_file(&self, repo: &str, rev: &str, path: &str) -> Result<Vec<u8>> {
        let repo = self.existing(repo)?;
        let out = Command::new("git")
            .arg("--git-dir")
            .arg(self.shared.repo_dir(&repo))
            .args(["cat-file", "blob", &format!("{rev}:{path}")])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &self.shared.home)
            .output()
            .map_err(io_err("run git cat-file"))?;
        if !out.status.success() {
            return Err(GitError::Invalid(format!(
                "{repo}: {rev}:{path}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(out.stdout)
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn check(args: &[&str], out: std::process::Output) -> Result<String> {
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(GitError::Command {
            args: args.join(" "),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// A repo-relative path: `/`-separated, no empty, `.` or `..` segments.
fn clean_path(p: &str) -> Result<String> {
    let p = p.trim_matches('/');
    if p.is_empty() || p.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return Err(GitError::Invalid(format!(
            "invalid path in repository: {p:?}"
        )));
    }
    Ok(p.to_owned())
}

/// Regular files under `dir` as (absolute path, `/`-separated relative path, executable),
/// sorted; skips `.git` and symlinks.
fn collect_files(base: &Path, dir: &Path, out: &mut Vec<(PathBuf, String, bool)>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io_err(format!("read {}", dir.display())))?
        .collect::<std::io::Result<_>>()
        .map_err(io_err(format!("read {}", dir.display())))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let ft = e
            .file_type()
            .map_err(io_err(format!("stat {}", e.path().display())))?;
        let path = e.path();
        if ft.is_dir() {
            if e.file_name() != ".git" {
                collect_files(base, &path, out)?;
            }
        } else if ft.is_file() {
            use std::os::unix::fs::PermissionsExt as _;
            let meta = e
                .metadata()
                .map_err(io_err(format!("stat {}", path.display())))?;
            let exec = meta.permissions().mode() & 0o111 != 0;
            let rel = path.strip_prefix(base).expect("under base");
            let rel = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>();
            let abs = path
                .canonicalize()
                .map_err(io_err(format!("canonicalize {}", path.display())))?;
            out.push((abs, rel.join("/"), exec));
        }
    }
    Ok(())
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
) {
    let scheme = if tls.is_some() { "https" } else { "http" };
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            // EMFILE and friends: back off briefly instead of spinning.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let shared = shared.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let svc_shared = shared.clone();
            let svc = hyper::service::service_fn(move |req| {
                http::handle(svc_shared.clone(), scheme, peer, req)
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            match tls {
                None => {
                    let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                }
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(tls_stream) => {
                        let _ = builder
                            .serve_connection(TokioIo::new(tls_stream), svc)
                            .await;
                    }
                    Err(e) => shared
                        .tls_errors
                        .lock()
                        .unwrap()
                        .push(format!("{peer}: {e}")),
                },
            }
        });
    }
}
