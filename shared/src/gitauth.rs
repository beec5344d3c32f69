//! A Git source's HTTP credential as source-controller sends it, and what to do when the Git
//! server refuses it: the one home of this rule for `kubectl unstick` and `kubectl gitops
//! verify` (failure catalogue, "Auth": a token rotation that revokes the credential Flux holds
//! breaks the source with "authentication required"; mint uniquely named tokens, never revoke
//! the one in use).
//!
//! Sources of each rule:
//! - Which key is sent: fluxcd/pkg/git v0.52.0 `options.go` `NewAuthOptions` (what
//!   source-controller v1.9.6 builds from `spec.secretRef`): for `http://` and `https://`, a
//!   Secret with a `bearerToken` key sends `Authorization: Bearer <bearerToken>` and nothing
//!   else (its `username`/`password` are not read); otherwise `username` and `password` go as
//!   basic auth. `ca.crt` (or the older `caFile`) is the CA bundle either way.
//! - The refusal's words: go-git v5.19.1 `plumbing/transport/http/common.go` `NewErr`: an HTTP
//!   401 is `authentication required: <the server's reason>` (`ErrAuthenticationRequired`);
//!   source-controller wraps it as `failed to checkout and determine revision: unable to
//!   list remote for '<url>': authentication required: ...` when the source already has an
//!   artifact (fluxcd/pkg/git `gogit/clone.go` lists the remote's HEAD first to compare it with
//!   the last revision: the case of a token revoked while Flux holds it, seen so on the real
//!   controller), or `... unable to clone '<url>': authentication required: ...` on a first
//!   fetch (Ready=False, reason `GitOperationFailed`, and `FetchFailed=True`).
//! - Over `http://` source-controller sends the credential as it is, in clear text: it makes
//!   its Git client with `gogit.WithInsecureCredentialsOverHTTP()` for every `http://` URL
//!   (source-controller v1.9.6 `internal/controller/gitrepository_controller.go`), so
//!   fluxcd/pkg/git's "basic auth cannot be sent over HTTP" is never reached there; `flux
//!   bootstrap git` refuses such a URL first ([`BOOTSTRAP_HTTP_REFUSAL`]).

/// What `flux bootstrap git` v2.9.5 says for an `http://` URL without
/// `--allow-insecure-http` (flux2 `cmd/flux/bootstrap_git.go` `getAuthOpts`).
pub const BOOTSTRAP_HTTP_REFUSAL: &str =
    "scheme http is insecure, pass --allow-insecure-http=true to allow it";

/// What source-controller does with a credential on an `http://` URL, in words for a
/// finding: it sends it, it does not refuse (see the module's sources).
pub const SOURCE_CONTROLLER_SENDS_OVER_HTTP: &str = "source-controller v1.9.6 does not refuse \
     it: it sends the credential in clear text on every fetch (its Git client is made with \
     WithInsecureCredentialsOverHTTP for http:// URLs), so anyone on the path can read it";

/// The credential source-controller sends over HTTP(S), read from the Secret's key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpCredential {
    /// `bearerToken`: `Authorization: Bearer`.
    Bearer,
    /// `password` (with `username`): basic auth.
    Basic,
    /// Neither key: source-controller sends no credential.
    None,
}

impl HttpCredential {
    /// Reads the key names of a source's Secret (never the values) as fluxcd/pkg/git's
    /// `NewAuthOptions` does: a `bearerToken` key wins over `username`/`password`.
    pub fn from_keys<S: AsRef<str>>(keys: &[S]) -> Self {
        let has = |k: &str| keys.iter().any(|x| x.as_ref() == k);
        if has("bearerToken") {
            HttpCredential::Bearer
        } else if has("password") {
            HttpCredential::Basic
        } else {
            HttpCredential::None
        }
    }

    /// The Secret key that holds the token, `None` for [`HttpCredential::None`].
    pub fn key(&self) -> Option<&'static str> {
        match self {
            HttpCredential::Bearer => Some("bearerToken"),
            HttpCredential::Basic => Some("password"),
            HttpCredential::None => None,
        }
    }

    /// How it is sent, for a sentence: `as Authorization: Bearer`, `as basic auth with the
    /// username in key username`.
    pub fn sent_as(&self) -> &'static str {
        match self {
            HttpCredential::Bearer => "as `Authorization: Bearer`",
            HttpCredential::Basic => "as basic auth (user from key `username`)",
            HttpCredential::None => "",
        }
    }
}

/// Whether a source condition's message is the Git server's 401 as source-controller reports
/// it (go-git's `authentication required`).
pub fn is_auth_refused(message: &str) -> bool {
    message
        .to_ascii_lowercase()
        .contains("authentication required")
}

/// A refused Git credential: what it is and what to do, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The finding: which Secret and key the refused credential is in (or that there is none).
    pub why: String,
    /// The fix, ending with `then` (the caller's command that fetches again).
    pub fix: String,
}

/// The finding and fix for a GitRepository whose server answered 401 ([`is_auth_refused`]).
/// `secret`: `spec.secretRef` as `(namespace, name)` (the source's namespace), `None` without
/// one. `keys`: the Secret's key names when they were read, `None` when not (not readable,
/// or not read). `then`: the command that makes source-controller fetch again (e.g. `flux
/// reconcile source git NAME -n NS` or `kubectl unstick ks/NAME -n NS --with-source`).
pub fn refused(secret: Option<(&str, &str)>, keys: Option<&[String]>, then: &str) -> Refused {
    let Some((ns, name)) = secret else {
        return Refused {
            why: "the Git server asks for a credential and the source has no spec.secretRef, so \
                  source-controller sends none"
                .into(),
            fix: format!(
                "mint a token on the Git server, create a Secret in the source's namespace with \
                 username and password (or bearerToken) and the server's CA as ca.crt, set \
                 spec.secretRef to it, then {then}"
            ),
        };
    };
    let cred = keys.map(HttpCredential::from_keys);
    match (cred, keys) {
        (Some(HttpCredential::None), Some(keys)) => Refused {
            why: format!(
                "the Git server asks for a credential and Secret {ns}/{name} holds none (its \
                 keys: {}; source-controller sends bearerToken, or username and password)",
                if keys.is_empty() {
                    "none".to_string()
                } else {
                    keys.join(", ")
                }
            ),
            fix: format!(
                "mint a new, uniquely named token on the Git server, put it in Secret \
                 {ns}/{name} (kubectl -n {ns} patch secret {name} --type merge -p \
                 '{{\"stringData\":{{\"username\":\"<user>\",\"password\":\"<new token>\"}}}}'), \
                 then {then}"
            ),
        },
        (Some(c), _) => {
            let key = c.key().unwrap_or("password");
            Refused {
                why: format!(
                    "the Git server refused the token in Secret {ns}/{name} key `{key}` (sent {}): \
                     revoked or expired (a token rotation that revoked the token Flux holds does \
                     this)",
                    c.sent_as()
                ),
                fix: rotate_fix(ns, name, key, then),
            }
        }
        (None, _) => Refused {
            why: format!(
                "the Git server refused the credential in Secret {ns}/{name} (its keys were not \
                 read: key `bearerToken` when it has one, else `password`): revoked or expired \
                 (a token rotation that revoked the token Flux holds does this)"
            ),
            fix: rotate_fix(
                ns,
                name,
                "password (or bearerToken when the Secret has it)",
                then,
            ),
        },
    }
}

fn rotate_fix(ns: &str, name: &str, key: &str, then: &str) -> String {
    let patch_key = key.split(' ').next().unwrap_or(key);
    format!(
        "mint a new, uniquely named token on the Git server (never reuse a name; do not revoke the \
         one in use first), put it in Secret {ns}/{name} key `{key}`: kubectl -n {ns} patch \
         secret {name} --type merge -p '{{\"stringData\":{{\"{patch_key}\":\"<new token>\"}}}}', \
         then {then}; revoke the old token only once the source is Ready with the new one"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn bearer_token_wins_over_basic_as_flux_reads_it() {
        assert_eq!(
            HttpCredential::from_keys(&keys(&["bearerToken", "password", "username"])),
            HttpCredential::Bearer
        );
        assert_eq!(
            HttpCredential::from_keys(&keys(&["ca.crt", "password", "username"])),
            HttpCredential::Basic
        );
        assert_eq!(
            HttpCredential::from_keys(&keys(&["ca.crt"])),
            HttpCredential::None
        );
    }

    #[test]
    fn refused_names_the_secret_the_key_and_the_rotation() {
        let k = keys(&["bearerToken", "ca.crt"]);
        let r = refused(
            Some(("apps", "git-auth")),
            Some(&k),
            "flux reconcile source git x -n apps",
        );
        assert!(
            r.why.contains("Secret apps/git-auth key `bearerToken`"),
            "{}",
            r.why
        );
        assert!(r.fix.contains("uniquely named token"), "{}", r.fix);
        assert!(
            r.fix.contains("\"bearerToken\":\"<new token>\""),
            "{}",
            r.fix
        );
        assert!(
            r.fix
                .ends_with("revoke the old token only once the source is Ready with the new one")
        );
        assert!(
            r.fix.contains("then flux reconcile source git x -n apps;"),
            "{}",
            r.fix
        );
        let k = keys(&["ca.crt", "password", "username"]);
        let r = refused(Some(("apps", "git-auth")), Some(&k), "x");
        assert!(
            r.why.contains("key `password` (sent as basic auth"),
            "{}",
            r.why
        );
        let k = keys(&["ca.crt"]);
        let r = refused(Some(("apps", "git-auth")), Some(&k), "x");
        assert!(r.why.contains("holds none (its keys: ca.crt;"), "{}", r.why);
        let r = refused(Some(("apps", "git-auth")), None, "x");
        assert!(r.why.contains("keys were not read"), "{}", r.why);
        let r = refused(None, None, "x");
        assert!(r.why.contains("no spec.secretRef"), "{}", r.why);
    }

    #[test]
    fn the_401_is_recognised_by_go_gits_words() {
        // source-controller v1.9.6's message for a revoked token on a source with an artifact
        // (the real-cluster test unstick::auth), and on a first fetch.
        assert!(is_auth_refused(
            "failed to checkout and determine revision: unable to list remote for 'https://h/x.git': authentication required: Unauthorized\n"
        ));
        assert!(is_auth_refused(
            "failed to checkout and determine revision: unable to clone 'https://h/x.git': authentication required: Unauthorized"
        ));
        assert!(!is_auth_refused("secrets \"x\" not found"));
    }
}
