//! What the real `git` CLI prints when it talks to this server and something is wrong:
//! recorded from git 2.47 (libcurl with GnuTLS) against [`super::GitServer`], and asserted
//! against real git by `tests/twin/tests/suite/git_server.rs`, so they stay true on this machine.
//!
//! `url` below is the remote URL without credentials and without a trailing slash, as
//! [`super::GitServer::url_http`] returns it; git appends the `/` itself. These are the
//! git CLI's messages: Flux's source-controller uses go-git and reports the same conditions
//! differently (e.g. "authentication required" for a 401).

/// A 401 after git sent credentials (from the URL, a credential helper or an askpass):
/// `fatal: Authentication failed for '<url>/'`. With this server, git first echoes the 401's
/// text body as `remote: Unauthorized` (git shows text/plain error bodies as `remote:` lines).
pub fn auth_failed(url: &str) -> String {
    format!("fatal: Authentication failed for '{url}/'")
}

/// The `remote:` line git prints from this server's 401 body, before [`auth_failed`].
pub const UNAUTHORIZED_BODY_LINE: &str = "remote: Unauthorized";

/// A 401 when git has no credentials and may not prompt (`GIT_TERMINAL_PROMPT=0`, as in CI or
/// a controller): `fatal: could not read Username for '<scheme>://<host:port>': terminal
/// prompts disabled`. `base` is scheme, host and port only (no path).
pub fn no_username(base: &str) -> String {
    format!("fatal: could not read Username for '{base}': terminal prompts disabled")
}

/// A 404 for a repository the server does not have: `fatal: repository '<url>/' not found`.
pub fn repo_not_found(url: &str) -> String {
    format!("fatal: repository '{url}/' not found")
}

/// The line prefix libcurl-level failures share: `fatal: unable to access '<url>/': `,
/// followed by libcurl's error text (see [`TLS_VERIFY_FAILED_GNUTLS`], [`http_error`]).
pub fn unable_to_access(url: &str) -> String {
    format!("fatal: unable to access '{url}/': ")
}

/// libcurl-GnuTLS's text when the server certificate does not verify against the trusted
/// CAs, here with no CA file configured: the full line is
/// `fatal: unable to access '<url>/': server certificate verification failed. CAfile: none
/// CRLfile: none`. With `GIT_SSL_CAINFO`/`http.sslCAInfo` set to another CA, `none` after
/// `CAfile:` is that file's path (note: `GIT_SSL_CAINFO` in the environment, as on our
/// machines where it names the system bundle, overrides `http.sslCAInfo`). libcurl-OpenSSL says instead
/// `SSL certificate problem: unable to get local issuer certificate`.
pub const TLS_VERIFY_FAILED_GNUTLS: &str =
    "server certificate verification failed. CAfile: none CRLfile: none";

/// libcurl-OpenSSL's text for the same failure as [`TLS_VERIFY_FAILED_GNUTLS`].
pub const TLS_VERIFY_FAILED_OPENSSL: &str =
    "SSL certificate problem: unable to get local issuer certificate";

/// An `http://` URL pointed at the HTTPS port: the TLS side answers the plaintext request with
/// a TLS alert, which libcurl reads as a non-HTTP reply.
pub const PLAIN_HTTP_TO_TLS_PORT: &str = "Received HTTP/0.9 when not allowed";

/// libcurl's text for any other HTTP error status (e.g. a [`super::Fault::Status`] of 503, or
/// 403 for a push with a read-only token, after `remote: Forbidden`):
/// `The requested URL returned error: <status>`. git first prints this server's text body as
/// a `remote:` line (`remote: Service Unavailable`: the status's canonical reason).
pub fn http_error(status: u16) -> String {
    format!("The requested URL returned error: {status}")
}

/// The server certificate's subject common name (its subjectAltNames are `127.0.0.1`,
/// `localhost` and [`super::GitServerOptions::dns_names`]).
pub const SERVER_CERT_CN: &str = "twin-git";

/// libcurl-GnuTLS's text when the URL's host is not on the certificate:
/// `SSL: certificate subject name (twin-git) does not match target host name '<host>'`.
pub fn tls_name_mismatch(host: &str) -> String {
    format!(
        "SSL: certificate subject name ({SERVER_CERT_CN}) does not match target host name '{host}'"
    )
}
