//! Talking to Git remotes the way source-controller does, with real `git`.
//!
//! Credentials come from the keys of a Flux source Secret (source-controller api/v1
//! `GitRepositorySpec.SecretRef` docs and fluxcd/pkg `git.AuthOptions`): `username` +
//! `password` (HTTP basic), `bearerToken` (HTTP bearer), `ca.crt` (PEM bundle used to verify
//! the server; the legacy `caFile` key is read when `ca.crt` is absent). They reach `git` only
//! through environment variables (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`
//! for the `http.extraHeader`, `GIT_SSL_CAINFO` for a 0600 temp file holding the CA bundle),
//! never through argv or the URL, so no secret value can appear in a process listing or in an
//! error message that echoes the URL.
//!
//! Trust (the rule of go-git v5 plumbing/transport/http/common.go `configureTransport`, which
//! source-controller reaches through fluxcd/pkg/git/gogit with `ca.crt` as `CABundle`): the
//! CA bundle is ADDED to `x509.SystemCertPool()` (an empty pool when that fails), never a
//! replacement. git's `GIT_SSL_CAINFO` replaces curl's bundle, so with a `ca.crt` we point it
//! at a private copy of the system bundle ([`system_ca_bundle`]) followed by the `ca.crt`
//! ([`ca_bundle`]). A server with a publicly trusted certificate therefore passes here even
//! when the Secret's `ca.crt` is unrelated or expired, exactly as it does in Flux.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;

/// Credentials Flux would use for a Git source, read from a Secret's `data`.
///
/// Shape: each field is the decoded bytes of the Secret key named in its doc. `Debug` never
/// prints values.
#[derive(Clone, Default)]
pub struct GitCredentials {
    /// `username` key (HTTP basic auth user).
    pub username: Option<String>,
    /// `password` key (HTTP basic auth password or token).
    pub password: Option<String>,
    /// `bearerToken` key (HTTP `Authorization: Bearer`).
    pub bearer_token: Option<String>,
    /// `ca.crt` key (else legacy `caFile`): PEM CA bundle.
    pub ca_pem: Option<Vec<u8>>,
    /// The names of the Secret's keys (never values): which ones an in-cluster probe must
    /// reference.
    pub keys: Vec<String>,
}

impl std::fmt::Debug for GitCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitCredentials")
            .field("username", &self.username.as_ref().map(|_| "<set>"))
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "ca_pem",
                &self.ca_pem.as_ref().map(|b| format!("{} bytes", b.len())),
            )
            .field("keys", &self.keys)
            .finish()
    }
}

impl GitCredentials {
    /// Reads the keys source-controller reads from a Secret's decoded `data` map.
    pub fn from_secret_data(data: &BTreeMap<String, Vec<u8>>) -> Self {
        let text = |k: &str| {
            data.get(k).map(|v| {
                String::from_utf8_lossy(v)
                    .trim_end_matches(['\n', '\r'])
                    .to_string()
            })
        };
        GitCredentials {
            username: text("username"),
            password: text("password"),
            bearer_token: text("bearerToken"),
            ca_pem: data.get("ca.crt").or_else(|| data.get("caFile")).cloned(),
            keys: data.keys().cloned().collect(),
        }
    }

    /// True when any credential (not counting a CA) is present.
    pub fn has_auth(&self) -> bool {
        self.username.is_some() || self.password.is_some() || self.bearer_token.is_some()
    }

    /// The secret values, for tests and redaction: every string that must never be printed.
    pub fn secret_values(&self) -> Vec<String> {
        [&self.password, &self.bearer_token]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .cloned()
            .collect()
    }

    /// The `Authorization` header value git should send, if any (bearer wins over basic, as in
    /// fluxcd/pkg git `AuthOptions` where BearerToken takes precedence for HTTP).
    fn authorization(&self) -> Option<String> {
        if let Some(t) = &self.bearer_token {
            return Some(format!("Bearer {t}"));
        }
        if self.username.is_some() || self.password.is_some() {
            let raw = format!(
                "{}:{}",
                self.username.as_deref().unwrap_or(""),
                self.password.as_deref().unwrap_or("")
            );
            return Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(raw)
            ));
        }
        None
    }
}

/// Why a remote could not be read, classified from git's own messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteFailure {
    /// 401, or git wanted to prompt for a username: the credential is missing, wrong or revoked.
    Authentication,
    /// 403: the credential is valid but not allowed to read this repository.
    Forbidden,
    /// TLS verification failed (unknown CA, wrong host name, expired).
    Tls(String),
    /// 404 / "repository not found".
    NotFound,
    /// DNS or TCP failure reaching the host.
    Unreachable(String),
    /// The branch does not exist on the remote.
    NoSuchBranch(String),
    /// Anything else, with git's last line.
    Other(String),
}

impl RemoteFailure {
    /// Classifies `git` stderr (git 2.x wording from http.c / remote-curl.c).
    pub fn classify(stderr: &str) -> RemoteFailure {
        let s = stderr.to_ascii_lowercase();
        if s.contains("authentication failed")
            || s.contains("could not read username")
            || s.contains("could not read password")
            || s.contains("returned error: 401")
        {
            RemoteFailure::Authentication
        } else if s.contains("returned error: 403") {
            RemoteFailure::Forbidden
        } else if s.contains("ssl certificate problem")
            || s.contains("server certificate verification failed")
            || s.contains("certificate verify failed")
            || s.contains("ssl: no alternative certificate subject name")
            || s.contains("unable to get local issuer certificate")
        {
            RemoteFailure::Tls(last_line(stderr))
        } else if s.contains("repository not found")
            || s.contains("returned error: 404")
            || s.contains("not found")
        {
            RemoteFailure::NotFound
        } else if s.contains("could not resolve host")
            || s.contains("failed to connect")
            || s.contains("connection refused")
            || s.contains("couldn't connect")
            || s.contains("timed out")
        {
            RemoteFailure::Unreachable(last_line(stderr))
        } else {
            RemoteFailure::Other(last_line(stderr))
        }
    }

    /// An operator-facing explanation with the next step. `secret` is the Secret whose
    /// credentials were sent (`ns/name`); `None` means none was sent (no `--secret` and no
    /// `spec.secretRef`), which turns a 401/403 into "pass --secret".
    pub fn explain(&self, url: &str, secret: Option<&str>) -> String {
        self.explain_sent(url, secret, secret.is_some())
    }

    /// [`RemoteFailure::explain`] when the Secret in use may hold no credential: `sent` is
    /// false when `secret` has no username, password or bearerToken (e.g. only `ca.crt`), so
    /// nothing was sent, as source-controller sends nothing then (fluxcd/pkg git
    /// `AuthOptions`: basic auth from username/password, bearer from bearerToken, each only
    /// when present). A 401/403 then says the Secret has no credential, never that its
    /// credential "was rejected".
    pub fn explain_sent(&self, url: &str, secret: Option<&str>, sent: bool) -> String {
        if let (Some(secret), false) = (secret, sent) {
            let none = format!(
                "secret {secret} has no username/password or bearerToken, so no credential was \
                 sent; add them to that Secret, or pass --secret with one that has them"
            );
            match self {
                RemoteFailure::Authentication => {
                    return format!("{url}: the server requires credentials, but {none}");
                }
                RemoteFailure::Forbidden => {
                    return format!(
                        "{url}: 403 forbidden without credentials: the server does not allow \
                         anonymous reads, and {none}"
                    );
                }
                _ => {}
            }
        }
        let Some(secret) = secret else {
            match self {
                RemoteFailure::Authentication => {
                    return format!(
                        "{url}: the server requires credentials and the GitRepository has no \
                         secretRef; pass --secret with a Secret holding username/password (or \
                         bearerToken) that may read this repository"
                    );
                }
                RemoteFailure::Forbidden => {
                    return format!(
                        "{url}: 403 forbidden without credentials: the server does not allow \
                         anonymous reads and the GitRepository has no secretRef; pass --secret"
                    );
                }
                RemoteFailure::Tls(detail) => {
                    return format!(
                        "{url}: TLS verification failed ({detail}). If the server uses a private \
                         CA, put the CA certificate (PEM) in a Secret under the key `ca.crt` and \
                         pass it with --secret"
                    );
                }
                _ => return RemoteFailure::explain(self, url, Some("<none>")),
            }
        };
        match self {
            RemoteFailure::Authentication => format!(
                "{url}: authentication required: the credential in secret {secret} was rejected \
                 (wrong, expired or revoked). If a token was rotated, mint a new uniquely named \
                 token, put it in the secret, and never revoke the one Flux is using"
            ),
            RemoteFailure::Forbidden => format!(
                "{url}: 403 forbidden: the credential in secret {secret} is valid but may not read \
                 this repository; grant it read access on the new server"
            ),
            RemoteFailure::Tls(detail) => format!(
                "{url}: TLS verification failed ({detail}). If the server uses a private CA, add \
                 the CA certificate (PEM) to secret {secret} under the key `ca.crt`"
            ),
            RemoteFailure::NotFound => {
                format!("{url}: repository not found: check the URL (and the credential's access)")
            }
            RemoteFailure::Unreachable(detail) => format!(
                "{url}: cannot reach the server from this workstation ({detail}); check DNS and \
                 network, and remember the cluster may resolve it differently (kubectl podresolve)"
            ),
            RemoteFailure::NoSuchBranch(b) => format!("{url}: branch `{b}` does not exist there"),
            RemoteFailure::Other(detail) => format!("{url}: git failed: {detail}"),
        }
    }
}

fn last_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("")
        .trim_start_matches("fatal: ")
        .to_string()
}

/// Files tried for the system CA bundle after `SSL_CERT_FILE`, in order: Go crypto/x509
/// root_linux.go `certFiles` (what source-controller's `x509.SystemCertPool()` reads in its
/// container; the first is also the default CA file of Debian's and Alpine's libcurl and
/// OpenSSL's `OPENSSLDIR/cert.pem` there). After these, `$(openssl version -d)/cert.pem`
/// (OpenSSL's default CA file, e.g. Homebrew's on macOS) is tried.
pub const SYSTEM_CA_FILES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt", // Debian/Ubuntu/Gentoo, Alpine
    "/etc/pki/tls/certs/ca-bundle.crt",   // Fedora/RHEL 6
    "/etc/ssl/ca-bundle.pem",             // OpenSUSE
    "/etc/pki/tls/cacert.pem",            // OpenELEC
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS/RHEL 7+
    "/etc/ssl/cert.pem",                  // Alpine (symlink), macOS, BSDs
];

/// The system CA bundle file of this workstation: the model of source-controller's system
/// pool.
///
/// Order: `SSL_CERT_FILE` (honoured by OpenSSL's default verify paths and by Go
/// crypto/x509, the variable that names "the system store" for both), then
/// [`SYSTEM_CA_FILES`], then `$(openssl version -d)/cert.pem`. The first readable, non-empty
/// regular file wins (an unreadable `SSL_CERT_FILE` falls through to the list). `None` when
/// none exists. `GIT_SSL_CAINFO` is NOT consulted: it is this user's git setting, which Flux
/// never sees. CA directories (`SSL_CERT_DIR`) are not read: the distributions above keep the
/// same certificates in the bundle file. git's libcurl may still consult its built-in CA
/// directory (Debian's libcurl3-gnutls: `/etc/ssl/certs`, the same certificates again).
pub fn system_ca_bundle() -> Option<PathBuf> {
    find_system_ca_bundle(
        std::env::var_os("SSL_CERT_FILE").map(PathBuf::from),
        SYSTEM_CA_FILES.iter().map(PathBuf::from),
        openssl_default_ca_file,
    )
}

/// [`system_ca_bundle`] with its inputs given: `ssl_cert_file` (the variable's value),
/// `files` (the fixed list), `openssl` (called only when nothing earlier matched).
fn find_system_ca_bundle(
    ssl_cert_file: Option<PathBuf>,
    files: impl IntoIterator<Item = PathBuf>,
    openssl: impl FnOnce() -> Option<PathBuf>,
) -> Option<PathBuf> {
    let usable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() > 0)
            && std::fs::File::open(p).is_ok()
    };
    ssl_cert_file
        .filter(|p| !p.as_os_str().is_empty())
        .into_iter()
        .chain(files)
        .find(|p| usable(p))
        .or_else(|| openssl().filter(|p| usable(p)))
}

/// `$(openssl version -d)/cert.pem` (`OPENSSLDIR: "/usr/lib/ssl"`), or `None` without an
/// `openssl` binary.
fn openssl_default_ca_file() -> Option<PathBuf> {
    let out = Command::new("openssl")
        .args(["version", "-d"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let dir = text
        .trim()
        .strip_prefix("OPENSSLDIR:")?
        .trim()
        .trim_matches('"');
    (!dir.is_empty()).then(|| Path::new(dir).join("cert.pem"))
}

/// The trust store git gets when the Secret has a CA: the system bundle's bytes (when there is
/// one), a line break if it lacks a final one, then `ca_pem`, as go-git's
/// `SystemCertPool()` + `AppendCertsFromPEM(CABundle)`. Shape: PEM text, system first.
pub fn ca_bundle(system: Option<&[u8]>, ca_pem: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(system.map_or(0, <[u8]>::len) + ca_pem.len() + 2);
    if let Some(sys) = system.filter(|s| !s.is_empty()) {
        out.extend_from_slice(sys);
        if !sys.ends_with(b"\n") {
            out.push(b'\n');
        }
    }
    out.extend_from_slice(ca_pem);
    if !ca_pem.ends_with(b"\n") {
        out.push(b'\n');
    }
    out
}

/// Which certificates a [`GitRunner`] trusts for HTTPS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// No `ca.crt`: git's own default (curl's built-in CA file), or `SSL_CERT_FILE` when set.
    System(Option<PathBuf>),
    /// `ca.crt` appended to the system bundle at this path (go-git's rule).
    SystemPlusSecret(PathBuf),
    /// `ca.crt` alone: no system bundle was found (go-git: an empty pool plus `ca.crt`).
    SecretOnly,
}

impl Trust {
    /// Operator-facing words, e.g. "the system CA bundle /etc/ssl/certs/ca-certificates.crt
    /// plus the secret's ca.crt".
    pub fn describe(&self) -> String {
        match self {
            Trust::System(Some(p)) => format!("the system CA bundle {}", p.display()),
            Trust::System(None) => "git's default system CA bundle".into(),
            Trust::SystemPlusSecret(p) => {
                format!(
                    "the system CA bundle {} plus the secret's ca.crt",
                    p.display()
                )
            }
            Trust::SecretOnly => {
                "the secret's ca.crt only (no system CA bundle found on this workstation)".into()
            }
        }
    }
}

/// Runs `git` with Flux-equivalent credentials and an isolated configuration.
///
/// Isolation: `HOME` and `XDG_CONFIG_HOME` point at a private temp dir, `GIT_CONFIG_NOSYSTEM=1`
/// and `GIT_TERMINAL_PROMPT=0`, so a user's credential helpers, insteadOf rules or prompts never
/// change the answer: the result is what the given Secret alone can do. An inherited
/// `GIT_SSL_CAINFO`, `GIT_SSL_CAPATH` or `GIT_SSL_NO_VERIFY` never widens (or narrows) trust:
/// each is replaced or removed, see [`Trust`].
pub struct GitRunner {
    creds: GitCredentials,
    home: tempfile::TempDir,
    ca_file: Option<PathBuf>,
    trust: Trust,
}

impl GitRunner {
    /// Prepares a runner. With a `ca.crt`, writes [`ca_bundle`] of the [`system_ca_bundle`]
    /// and the CA to a 0600 file in a private temp dir (0700, removed on drop).
    ///
    /// Errors: I/O errors creating the temp dir or the bundle file (an unreadable system
    /// bundle is not an error: the `ca.crt` is then trusted alone, [`Trust::SecretOnly`]).
    pub fn new(creds: GitCredentials) -> std::io::Result<Self> {
        Self::with_system(
            creds,
            system_ca_bundle(),
            std::env::var_os("SSL_CERT_FILE").map(PathBuf::from),
        )
    }

    /// [`GitRunner::new`] with the system bundle found and `SSL_CERT_FILE` given.
    fn with_system(
        creds: GitCredentials,
        system: Option<PathBuf>,
        ssl_cert_file: Option<PathBuf>,
    ) -> std::io::Result<Self> {
        let home = tempfile::Builder::new()
            .prefix("kubectl-cutover-")
            .tempdir()?;
        let (ca_file, trust) = match &creds.ca_pem {
            Some(pem) => {
                let sys = system.as_ref().and_then(|p| std::fs::read(p).ok());
                let trust = match (&system, &sys) {
                    (Some(p), Some(_)) => Trust::SystemPlusSecret(p.clone()),
                    _ => Trust::SecretOnly,
                };
                let p = home.path().join("ca-bundle.pem");
                write_private(&p, &ca_bundle(sys.as_deref(), pem))?;
                (Some(p), trust)
            }
            // Without a ca.crt git's default trust stays, except that SSL_CERT_FILE (which
            // libcurl ignores) names the system store just as it does with a ca.crt.
            None => match ssl_cert_file {
                Some(f) if system.as_deref() == Some(f.as_path()) => {
                    (system.clone(), Trust::System(system))
                }
                _ => (None, Trust::System(None)),
            },
        };
        Ok(GitRunner {
            creds,
            home,
            ca_file,
            trust,
        })
    }

    /// What this runner trusts for HTTPS.
    pub fn trust(&self) -> &Trust {
        &self.trust
    }

    /// The credentials this runner sends.
    pub fn credentials(&self) -> &GitCredentials {
        &self.creds
    }

    /// A `git` command with the isolated environment and credentials set.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new("git");
        cmd.env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "")
            .env("SSH_ASKPASS", "")
            .env_remove("GIT_SSL_NO_VERIFY")
            .env_remove("GIT_SSL_CAPATH")
            .env("LC_ALL", "C");
        let mut n = 0;
        if let Some(h) = self.creds.authorization() {
            cmd.env(format!("GIT_CONFIG_KEY_{n}"), "http.extraHeader")
                .env(
                    format!("GIT_CONFIG_VALUE_{n}"),
                    format!("Authorization: {h}"),
                );
            n += 1;
        }
        cmd.env("GIT_CONFIG_COUNT", n.to_string());
        match &self.ca_file {
            Some(p) => {
                cmd.env("GIT_SSL_CAINFO", p);
            }
            None => {
                cmd.env_remove("GIT_SSL_CAINFO");
            }
        }
        cmd
    }

    fn run(&self, args: &[&str], dir: Option<&Path>) -> std::io::Result<Output> {
        let mut cmd = self.command();
        if let Some(d) = dir {
            cmd.current_dir(d);
        }
        cmd.args(args).output()
    }

    /// `git ls-remote URL refs/heads/BRANCH`: the branch head on the remote.
    ///
    /// Returns the 40-hex SHA. Errors: a classified [`RemoteFailure`]; an empty answer is
    /// [`RemoteFailure::NoSuchBranch`].
    pub fn remote_head(&self, url: &str, branch: &str) -> Result<String, RemoteFailure> {
        let refname = format!("refs/heads/{branch}");
        let out = self
            .run(&["ls-remote", "--", url, &refname], None)
            .map_err(|e| RemoteFailure::Other(format!("cannot run git: {e}")))?;
        if !out.status.success() {
            return Err(RemoteFailure::classify(&String::from_utf8_lossy(
                &out.stderr,
            )));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .find(|(_, r)| *r == refname)
            .map(|(sha, _)| sha.to_string())
            .ok_or_else(|| RemoteFailure::NoSuchBranch(branch.to_string()))
    }

    /// Fetches `refs/heads/BRANCH` of `url` into the bare repository `repo` as
    /// `refs/remotes/<name>/BRANCH`. Errors: a classified [`RemoteFailure`].
    pub fn fetch_branch(
        &self,
        repo: &Path,
        url: &str,
        branch: &str,
        name: &str,
    ) -> Result<(), RemoteFailure> {
        let spec = format!("+refs/heads/{branch}:refs/remotes/{name}/{branch}");
        let out = self
            .run(
                &["fetch", "--quiet", "--no-tags", "--", url, &spec],
                Some(repo),
            )
            .map_err(|e| RemoteFailure::Other(format!("cannot run git: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(RemoteFailure::classify(&String::from_utf8_lossy(
                &out.stderr,
            )))
        }
    }
}

/// Writes `bytes` to a new file readable by its owner only (0600 from creation on unix).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)?.write_all(bytes)
}

/// How the new remote's branch head N relates to the commit C the cluster runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "relation", rename_all = "camelCase")]
pub enum Relation {
    /// N == C: cutting over changes the URL only.
    Identical,
    /// N is an ancestor of C: the new server is `behind` commits behind; cutting over rolls
    /// back to N.
    Behind {
        /// `git rev-list --count N..C`.
        behind: u64,
        /// N's subject line.
        subject: String,
    },
    /// C is an ancestor of N: the new server is `ahead` commits ahead; cutting over also
    /// deploys those commits.
    Ahead {
        /// `git rev-list --count C..N`.
        ahead: u64,
        /// N's subject line.
        subject: String,
    },
    /// Neither contains the other.
    Diverged {
        /// Commits only in C's history.
        behind: u64,
        /// Commits only in N's history.
        ahead: u64,
        /// N's subject line.
        subject: String,
    },
    /// History was not available to tell (C is in no repository we could read).
    Unknown {
        /// Why it could not be told.
        reason: String,
    },
}

impl Relation {
    /// One operator-facing sentence, e.g. "the new server's main is 14 commits behind what the
    /// cluster runs; cutting over would roll back to 1a2b3c4 Fix image".
    pub fn describe(&self, branch: &str, new_head: &str) -> String {
        let short = &new_head[..new_head.len().min(7)];
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        match self {
            Relation::Identical => format!(
                "the new server's {branch} is at exactly the commit the cluster runs ({short})"
            ),
            Relation::Behind { behind, subject } => format!(
                "the new server's {branch} is {behind} commit{} behind what the cluster runs; \
                 cutting over would roll back to {short} {subject}",
                plural(*behind)
            ),
            Relation::Ahead { ahead, subject } => format!(
                "the new server's {branch} is {ahead} commit{} ahead of what the cluster runs; \
                 cutting over would also deploy them, up to {short} {subject}",
                plural(*ahead)
            ),
            Relation::Diverged {
                behind,
                ahead,
                subject,
            } => format!(
                "the new server's {branch} has diverged from what the cluster runs: {ahead} \
                 commit{} not deployed and {behind} deployed commit{} missing; cutting over \
                 would switch to {short} {subject}",
                plural(*ahead),
                plural(*behind)
            ),
            Relation::Unknown { reason } => format!(
                "the new server's {branch} is at {short}, not the commit the cluster runs, and \
                 their relation cannot be told: {reason}"
            ),
        }
    }
}

/// A scratch bare repository used to compare histories without touching the user's clone.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// `git init --bare` in a temp dir; when `alternate` (a local clone, `--repo`) is given its
    /// object database is borrowed read-only through `objects/info/alternates`.
    ///
    /// Errors: I/O or git failures, with the path.
    pub fn new(runner: &GitRunner, alternate: Option<&Path>) -> Result<Scratch, String> {
        let dir = tempfile::Builder::new()
            .prefix("kubectl-cutover-history-")
            .tempdir()
            .map_err(|e| format!("cannot create a temp dir: {e}"))?;
        let out = runner
            .run(&["init", "--quiet", "--bare", "."], Some(dir.path()))
            .map_err(|e| format!("cannot run git: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "git init failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        if let Some(repo) = alternate {
            let objects = git_objects_dir(repo)?;
            std::fs::write(
                dir.path().join("objects/info/alternates"),
                format!("{}\n", objects.display()),
            )
            .map_err(|e| format!("cannot write alternates: {e}"))?;
        }
        Ok(Scratch { dir })
    }

    /// The bare repository's path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// True when `sha` names a commit present here (or in the alternate).
    pub fn has_commit(&self, runner: &GitRunner, sha: &str) -> bool {
        runner
            .run(
                &["cat-file", "-e", &format!("{sha}^{{commit}}")],
                Some(self.path()),
            )
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    /// Relation of `new_head` to `current` (both must be present; see [`Scratch::has_commit`]).
    pub fn relation(&self, runner: &GitRunner, current: &str, new_head: &str) -> Relation {
        if current == new_head {
            return Relation::Identical;
        }
        let subject = self.subject(runner, new_head);
        let count = |range: String| -> u64 {
            runner
                .run(&["rev-list", "--count", &range], Some(self.path()))
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
                .unwrap_or(0)
        };
        let behind = count(format!("{new_head}..{current}"));
        let ahead = count(format!("{current}..{new_head}"));
        match (behind, ahead) {
            (0, 0) => Relation::Identical,
            (b, 0) => Relation::Behind { behind: b, subject },
            (0, a) => Relation::Ahead { ahead: a, subject },
            (b, a) => Relation::Diverged {
                behind: b,
                ahead: a,
                subject,
            },
        }
    }

    /// The subject line of `sha` (empty when unreadable).
    pub fn subject(&self, runner: &GitRunner, sha: &str) -> String {
        runner
            .run(&["log", "-1", "--format=%s", sha, "--"], Some(self.path()))
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    }

    /// Extracts the tree of `sha` into `dest` (`git read-tree` into a private index, then
    /// `checkout-index` with `GIT_WORK_TREE=dest`: no shell, no archive tool).
    ///
    /// Errors: git's message.
    pub fn export_tree(&self, runner: &GitRunner, sha: &str, dest: &Path) -> Result<(), String> {
        let index = self.path().join("cutover-export.index");
        let _ = std::fs::remove_file(&index);
        for args in [
            vec!["read-tree", sha],
            vec!["checkout-index", "--all", "--force"],
        ] {
            let mut cmd = runner.command();
            cmd.current_dir(self.path())
                .env("GIT_INDEX_FILE", &index)
                .env("GIT_DIR", self.path())
                .env("GIT_WORK_TREE", dest)
                .args(&args);
            let out = cmd.output().map_err(|e| format!("cannot run git: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "git {} failed: {}",
                    args[0],
                    last_line(&String::from_utf8_lossy(&out.stderr))
                ));
            }
        }
        let _ = std::fs::remove_file(&index);
        Ok(())
    }
}

/// The object directory of a local clone or bare repository (`git rev-parse --git-common-dir`).
fn git_objects_dir(repo: &Path) -> Result<PathBuf, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "--repo {}: not a git repository ({})",
            repo.display(),
            last_line(&String::from_utf8_lossy(&out.stderr))
        ));
    }
    let common = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    Ok(common.join("objects"))
}

/// `git ls-remote URL refs/heads/BRANCH` from this workstation with `creds`, on a blocking
/// thread (for async callers: unstick's `--check-remote` and gitops verify read a loopback or
/// default head this way). Errors: as [`GitRunner::remote_head`]; a runner that cannot start or
/// a task that panicked is [`RemoteFailure::Other`].
pub async fn remote_head_here(
    creds: GitCredentials,
    url: &str,
    branch: &str,
) -> Result<String, RemoteFailure> {
    let (u, b) = (url.to_string(), branch.to_string());
    tokio::task::spawn_blocking(move || {
        GitRunner::new(creds)
            .map_err(|e| RemoteFailure::Other(e.to_string()))?
            .remote_head(&u, &b)
    })
    .await
    .unwrap_or_else(|e| Err(RemoteFailure::Other(format!("git ls-remote task: {e}"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 19 item 8: with no secret sent, a 401 is "pass --secret", never "the credential in
    /// secret <none> was rejected"; with a secret it names it.
    #[test]
    fn auth_failure_without_a_secret_says_pass_secret() {
        let u = "https://git.example.test/org/fleet.git";
        let m = RemoteFailure::Authentication.explain(u, None);
        assert_eq!(
            m,
            "https://git.example.test/org/fleet.git: the server requires credentials and the \
             GitRepository has no secretRef; pass --secret with a Secret holding \
             username/password (or bearerToken) that may read this repository"
        );
        assert!(!m.contains("<none>"));
        assert!(
            RemoteFailure::Forbidden
                .explain(u, None)
                .contains("the GitRepository has no secretRef; pass --secret")
        );
        assert!(
            RemoteFailure::Authentication
                .explain(u, Some("flux-system/creds"))
                .contains("the credential in secret flux-system/creds was rejected")
        );
    }

    /// Issue 19 item 8: a Secret that holds only `ca.crt` sends no credential: a 401/403 says
    /// so and names the Secret, never "was rejected"; with a credential sent it was rejected.
    #[test]
    fn auth_failure_with_a_secret_that_has_no_credential() {
        let u = "https://git.example.test/org/fleet.git";
        let s = Some("flux-system/ca-only");
        assert_eq!(
            RemoteFailure::Authentication.explain_sent(u, s, false),
            "https://git.example.test/org/fleet.git: the server requires credentials, but secret \
             flux-system/ca-only has no username/password or bearerToken, so no credential was \
             sent; add them to that Secret, or pass --secret with one that has them"
        );
        let m = RemoteFailure::Forbidden.explain_sent(u, s, false);
        assert!(m.contains("403 forbidden without credentials"), "{m}");
        assert!(
            m.contains("secret flux-system/ca-only has no username/password"),
            "{m}"
        );
        assert!(
            RemoteFailure::Authentication
                .explain_sent(u, s, true)
                .contains("the credential in secret flux-system/ca-only was rejected")
        );
        // Other failures do not depend on what was sent.
        assert_eq!(
            RemoteFailure::NotFound.explain_sent(u, s, false),
            RemoteFailure::NotFound.explain(u, s)
        );
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .current_dir(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn repo_with_commits(n: usize) -> (tempfile::TempDir, Vec<String>) {
        let d = tempfile::tempdir().unwrap();
        git(d.path(), &["init", "-q", "-b", "main"]);
        let mut shas = vec![];
        for i in 0..n {
            std::fs::write(d.path().join("f.txt"), format!("{i}\n")).unwrap();
            git(d.path(), &["add", "."]);
            git(d.path(), &["commit", "-q", "-m", &format!("commit {i}")]);
            shas.push(git(d.path(), &["rev-parse", "HEAD"]));
        }
        (d, shas)
    }

    #[test]
    fn relation_counts_commits_both_ways() {
        let (d, shas) = repo_with_commits(15);
        let runner = GitRunner::new(GitCredentials::default()).unwrap();
        let scratch = Scratch::new(&runner, Some(d.path())).unwrap();
        assert!(scratch.has_commit(&runner, &shas[0]));
        assert!(!scratch.has_commit(&runner, &"0".repeat(40)));
        assert_eq!(
            scratch.relation(&runner, &shas[14], &shas[14]),
            Relation::Identical
        );
        let behind = scratch.relation(&runner, &shas[14], &shas[0]);
        assert_eq!(
            behind,
            Relation::Behind {
                behind: 14,
                subject: "commit 0".into()
            }
        );
        assert!(
            behind.describe("main", &shas[0]).contains(
                "14 commits behind what the cluster runs; cutting over would roll back to"
            )
        );
        assert_eq!(
            scratch.relation(&runner, &shas[3], &shas[5]),
            Relation::Ahead {
                ahead: 2,
                subject: "commit 5".into()
            }
        );
    }

    #[test]
    fn relation_diverged() {
        let (d, shas) = repo_with_commits(3);
        git(d.path(), &["checkout", "-q", "-b", "other", &shas[1]]);
        std::fs::write(d.path().join("g.txt"), "x").unwrap();
        git(d.path(), &["add", "."]);
        git(d.path(), &["commit", "-q", "-m", "side"]);
        let side = git(d.path(), &["rev-parse", "HEAD"]);
        let runner = GitRunner::new(GitCredentials::default()).unwrap();
        let scratch = Scratch::new(&runner, Some(d.path())).unwrap();
        assert_eq!(
            scratch.relation(&runner, &shas[2], &side),
            Relation::Diverged {
                behind: 1,
                ahead: 1,
                subject: "side".into()
            }
        );
    }

    #[test]
    fn export_tree_writes_files_of_that_commit() {
        let (d, shas) = repo_with_commits(3);
        let runner = GitRunner::new(GitCredentials::default()).unwrap();
        let scratch = Scratch::new(&runner, Some(d.path())).unwrap();
        let out = tempfile::tempdir().unwrap();
        scratch.export_tree(&runner, &shas[1], out.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.path().join("f.txt")).unwrap(),
            "1\n"
        );
    }

    #[test]
    fn classify_git_messages() {
        assert_eq!(
            RemoteFailure::classify(
                "fatal: Authentication failed for 'https://127.0.0.1:1/x.git/'"
            ),
            RemoteFailure::Authentication
        );
        assert_eq!(
            RemoteFailure::classify(
                "fatal: could not read Username for 'https://h': terminal prompts disabled"
            ),
            RemoteFailure::Authentication
        );
        assert!(matches!(
            RemoteFailure::classify(
                "fatal: unable to access 'https://h/x/': SSL certificate problem: unable to get local issuer certificate"
            ),
            RemoteFailure::Tls(_)
        ));
        assert_eq!(
            RemoteFailure::classify(
                "fatal: unable to access 'https://h/': The requested URL returned error: 403"
            ),
            RemoteFailure::Forbidden
        );
        assert!(matches!(
            RemoteFailure::classify(
                "fatal: unable to access 'https://nohost/': Could not resolve host: nohost"
            ),
            RemoteFailure::Unreachable(_)
        ));
    }

    #[test]
    fn ca_bundle_is_system_then_secret_ca() {
        let sys = b"-----BEGIN CERTIFICATE-----\nSYS\n-----END CERTIFICATE-----";
        let ca = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
        let b = String::from_utf8(ca_bundle(Some(sys), ca)).unwrap();
        assert_eq!(
            b,
            "-----BEGIN CERTIFICATE-----\nSYS\n-----END CERTIFICATE-----\n\
             -----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
        );
        // No system bundle (go-git: an empty pool): the CA alone, newline-terminated.
        assert_eq!(ca_bundle(None, b"X"), b"X\n");
        assert_eq!(ca_bundle(Some(b""), b"X\n"), b"X\n");
        assert_eq!(ca_bundle(Some(b"S\n"), b"X\n"), b"S\nX\n");
    }

    #[test]
    fn system_bundle_order_ssl_cert_file_then_list_then_openssl() {
        let d = tempfile::tempdir().unwrap();
        let file = |name: &str, text: &str| {
            let p = d.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let env = file("env.pem", "E");
        let empty = file("empty.pem", "");
        let first = file("first.pem", "F");
        let second = file("second.pem", "S");
        let missing = d.path().join("missing.pem");
        let never = || -> Option<PathBuf> { panic!("openssl asked although a file matched") };
        let list = || {
            vec![
                missing.clone(),
                empty.clone(),
                first.clone(),
                second.clone(),
            ]
        };
        assert_eq!(
            find_system_ca_bundle(Some(env.clone()), list(), never),
            Some(env)
        );
        // Missing, empty or unset SSL_CERT_FILE: the first usable file of the list.
        for v in [
            Some(missing.clone()),
            Some(empty.clone()),
            Some(PathBuf::new()),
            None,
        ] {
            assert_eq!(find_system_ca_bundle(v, list(), never), Some(first.clone()));
        }
        // Nothing in the list: OpenSSL's default file, when usable.
        let asked = std::cell::Cell::new(0);
        let openssl = || {
            asked.set(asked.get() + 1);
            Some(second.clone())
        };
        assert_eq!(
            find_system_ca_bundle(None, vec![missing.clone()], openssl),
            Some(second.clone())
        );
        assert_eq!(asked.get(), 1);
        assert_eq!(
            find_system_ca_bundle(None, vec![missing.clone()], || Some(empty.clone())),
            None
        );
        assert_eq!(find_system_ca_bundle(None, vec![], || None), None);
    }

    fn cainfo(cmd: &Command) -> Option<Option<PathBuf>> {
        cmd.get_envs()
            .find(|(k, _)| *k == "GIT_SSL_CAINFO")
            .map(|(_, v)| v.map(PathBuf::from))
    }

    #[test]
    fn runner_trusts_system_bundle_plus_secret_ca_in_a_private_file() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path().join("system.pem");
        std::fs::write(&sys, "SYSTEM-CERTS").unwrap();
        let mut data = BTreeMap::new();
        data.insert("ca.crt".to_string(), b"SECRET-CA\n".to_vec());
        let creds = GitCredentials::from_secret_data(&data);

        let runner = GitRunner::with_system(creds.clone(), Some(sys.clone()), None).unwrap();
        assert_eq!(runner.trust(), &Trust::SystemPlusSecret(sys.clone()));
        assert!(
            runner
                .trust()
                .describe()
                .contains("plus the secret's ca.crt")
        );
        let path = cainfo(&runner.command()).unwrap().unwrap();
        assert!(path.starts_with(runner.home.path()), "{path:?}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "SYSTEM-CERTS\nSECRET-CA\n"
        );
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // GIT_SSL_CAPATH from the environment cannot add a directory of CAs.
        assert!(
            runner
                .command()
                .get_envs()
                .any(|(k, v)| k == "GIT_SSL_CAPATH" && v.is_none())
        );
        drop(runner);
        assert!(!path.exists(), "bundle removed with the runner");

        // No system bundle anywhere: the secret's CA alone.
        let runner = GitRunner::with_system(creds, None, None).unwrap();
        assert_eq!(runner.trust(), &Trust::SecretOnly);
        let path = cainfo(&runner.command()).unwrap().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "SECRET-CA\n");

        // No ca.crt: an inherited GIT_SSL_CAINFO is removed (git's default trust) ...
        let runner =
            GitRunner::with_system(GitCredentials::default(), Some(sys.clone()), None).unwrap();
        assert_eq!(runner.trust(), &Trust::System(None));
        assert_eq!(cainfo(&runner.command()), Some(None));
        // ... unless SSL_CERT_FILE names the system store, which git's curl would ignore.
        let runner = GitRunner::with_system(
            GitCredentials::default(),
            Some(sys.clone()),
            Some(sys.clone()),
        )
        .unwrap();
        assert_eq!(runner.trust(), &Trust::System(Some(sys.clone())));
        assert_eq!(cainfo(&runner.command()), Some(Some(sys)));
    }

    #[test]
    fn credentials_never_show_in_debug_and_go_to_env_not_argv() {
        let mut data = BTreeMap::new();
        data.insert("username".to_string(), b"git".to_vec());
        data.insert("password".to_string(), b"s3cr3t-token\n".to_vec());
        let creds = GitCredentials::from_secret_data(&data);
        assert_eq!(creds.password.as_deref(), Some("s3cr3t-token"));
        assert!(!format!("{creds:?}").contains("s3cr3t"));
        let runner = GitRunner::new(creds).unwrap();
        let cmd = runner.command();
        assert!(
            cmd.get_args()
                .all(|a| !a.to_string_lossy().contains("s3cr3t"))
        );
        let header = cmd
            .get_envs()
            .find(|(k, _)| *k == "GIT_CONFIG_VALUE_0")
            .and_then(|(_, v)| v)
            .unwrap()
            .to_string_lossy()
            .to_string();
        assert!(header.starts_with("Authorization: Basic "));
    }
}
