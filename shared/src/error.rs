//! One error type for every plugin, mapped to the suite's documented exit codes.
//!
//! Exit codes (the same for every `kubectl-<plugin>`):
//!
//! | code | const            | meaning                                                        |
//! |------|------------------|----------------------------------------------------------------|
//! | 0    | [`EXIT_OK`]      | success, nothing found                                         |
//! | 1    | [`EXIT_FINDING`] | a finding / a failed check (the tool worked, the answer is "no") |
//! | 2    | [`EXIT_USAGE`]   | bad input: flags, arguments, files the user named, a context/cluster/user named on the command line that does not exist |
//! | 3    | [`EXIT_CLUSTER`] | the cluster or API could not be reached or refused the request, a cluster object the user named does not exist (404), or the kubeconfig found by default is unusable |
//!
//! The rule between 2 and 3: exit 2 is for what is wrong whatever cluster you point at, and is
//! decided before any API request (a malformed `ks/a/b`, a bad flag, an unreadable file). Once
//! the question needed the cluster's answer, the failure is 3, including "no such object": the
//! same name is right on another context or namespace, or a moment later, so a script must not
//! read it as a typo. The not-found message names the kind, namespace and name, the context and
//! server asked, and the `kubectl get <kind> -A` command that lists what does exist
//! ([`Error::not_found`], and [`Error::from_kube`] for a 404 on a named object).
//!
//! Kubernetes API failures are turned into messages an operator can act on by
//! [`Error::from_kube`]: 401 names the server and says to refresh credentials, 403 names the
//! verb, resource (group) and namespace RBAC denied and prints the `kubectl auth can-i`
//! command to check it, 404 on a Flux kind says the CRD or API version is not served, and
//! transport failures (connection refused, TLS, DNS, timeouts) name the server URL.

use crate::kind::{FLUX_GROUP_SUFFIX, KINDS};
use std::error::Error as StdError;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Exit code 0: success.
pub const EXIT_OK: i32 = 0;
/// Exit code 1: a finding or a failed check.
pub const EXIT_FINDING: i32 = 1;
/// Exit code 2: usage error (bad flags, arguments or input files).
pub const EXIT_USAGE: i32 = 2;
/// Exit code 3: cluster / API error (unreachable, refused, unusable default kubeconfig).
pub const EXIT_CLUSTER: i32 = 3;

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a failed API request was doing, so the error can name it.
///
/// Every field is optional except `server`; fill what you know. `resource` is the plural
/// resource name as RBAC sees it (`kustomizations`, `pods`, `pods/ephemeralcontainers`),
/// `group` the API group (`""` for core).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiContext {
    /// API server URL from the kubeconfig, e.g. `https://127.0.0.1:6443/`.
    pub server: String,
    /// Kubernetes verb: `get`, `list`, `watch`, `patch`, `create`, `delete`, ...
    pub verb: String,
    /// API group, `""` for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Plural resource name, optionally with `/subresource`.
    pub resource: String,
    /// Namespace of the request, `None` for cluster-scoped or all-namespaces requests.
    pub namespace: Option<String>,
    /// Object name, when the request was for one object.
    pub name: Option<String>,
    /// kubeconfig context the request went through (`None`: in-cluster or unknown), so a
    /// not-found can say which cluster was asked.
    pub kube_context: Option<String>,
}

impl ApiContext {
    /// A context for a request to `server` (the kubeconfig's cluster URL).
    pub fn new(server: impl Into<String>) -> Self {
        ApiContext {
            server: server.into(),
            ..Default::default()
        }
    }

    /// Sets the verb (`get`, `list`, `watch`, `patch`, ...).
    pub fn verb(mut self, verb: impl Into<String>) -> Self {
        self.verb = verb.into();
        self
    }

    /// Sets group, version and plural resource from a typed [`kube::Resource`] with a `()`
    /// dynamic type (all k8s-openapi types and the [`crate::flux`] types).
    pub fn resource_of<K: kube::Resource<DynamicType = ()>>(mut self) -> Self {
        self.group = K::group(&()).into_owned();
        self.version = K::version(&()).into_owned();
        self.resource = K::plural(&()).into_owned();
        self
    }

    /// Sets group, version and plural resource from an [`kube::api::ApiResource`].
    pub fn api_resource(mut self, ar: &kube::api::ApiResource) -> Self {
        self.group = ar.group.clone();
        self.version = ar.version.clone();
        self.resource = ar.plural.clone();
        self
    }

    /// Sets the plural resource name (e.g. `pods/ephemeralcontainers`) and group.
    pub fn resource(mut self, group: impl Into<String>, resource: impl Into<String>) -> Self {
        self.group = group.into();
        self.resource = resource.into();
        self
    }

    /// Sets the namespace (`None`: cluster-scoped or all namespaces).
    pub fn namespace(mut self, ns: Option<impl Into<String>>) -> Self {
        self.namespace = ns.map(Into::into);
        self
    }

    /// Sets the object name (an empty name, as for a list, leaves it unset).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        let name = name.into();
        self.name = (!name.is_empty()).then_some(name);
        self
    }

    /// Sets the kubeconfig context name ([`crate::cli::Connection::ctx`] does this).
    pub fn kube_context(mut self, context: Option<impl Into<String>>) -> Self {
        self.kube_context = context.map(Into::into);
        self
    }

    /// Fill group, version, resource and namespace (those still empty) from an API path
    /// such as `/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations`
    /// or `/api/v1/pods` (what `kube::Api::resource_url` returns).
    pub fn with_resource_url(mut self, url: &str) -> Self {
        let segs: Vec<&str> = url.split('/').filter(|s| !s.is_empty()).collect();
        let (group, version, rest) = match segs.as_slice() {
            ["api", v, rest @ ..] => ("", *v, rest),
            ["apis", g, v, rest @ ..] => (*g, *v, rest),
            _ => return self,
        };
        let (ns, resource) = match rest {
            ["namespaces", ns, r, ..] => (Some(*ns), *r),
            [r, ..] => (None, *r),
            [] => return self,
        };
        if self.resource.is_empty() {
            self.group = group.to_string();
            self.version = version.to_string();
            self.resource = resource.to_string();
        }
        if self.namespace.is_none() {
            self.namespace = ns.map(str::to_string);
        }
        self
    }

    /// `resource.group` as kubectl spells a fully-qualified resource (`kustomizations.kustomize.toolkit.fluxcd.io`,
    /// or just `pods` for the core group).
    pub fn qualified_resource(&self) -> String {
        qualify(&self.resource, &self.group)
    }
}

fn qualify(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        // subresources: pods/log stays pods/log; a group applies to the main resource.
        match resource.split_once('/') {
            Some((main, sub)) => format!("{main}.{group}/{sub}"),
            None => format!("{resource}.{group}"),
        }
    }
}

/// The suite's error type. Display is the operator-facing message (no `error:` prefix; see
/// [`exit_with`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad flags, arguments or input; exit code 2.
    #[error("{0}")]
    Usage(String),
    /// A finding or failed check the plugin wants to exit 1 with.
    #[error("{0}")]
    Finding(String),
    /// A Kubernetes API request failed; exit code 3. `message` is already actionable.
    #[error("{message}")]
    Api {
        /// Actionable message (see [`Error::from_kube`]).
        message: String,
        /// HTTP status code when the server answered (401, 403, 404, 409, 5xx...).
        code: Option<u16>,
        /// What the request was doing.
        context: Box<ApiContext>,
        /// The underlying kube error.
        #[source]
        source: Option<Box<kube::Error>>,
    },
    /// The cluster did something we cannot work with (e.g. a watch ended, an object was
    /// deleted while waiting); exit code 3.
    #[error("{0}")]
    Cluster(String),
    /// The kubeconfig could not be used (missing or unparsable file, unknown context, cluster
    /// or user, no current-context); exit code 3 wherever it came from (flag or environment).
    #[error("{message}")]
    Config {
        /// Message naming the file / context and what to do.
        message: String,
        /// True when the culprit came from a command-line flag (`--kubeconfig`, `--context`,
        /// `--cluster`, `--user`) rather than KUBECONFIG or ~/.kube/config. Informational:
        /// every kubeconfig error exits 3, wherever the file or name came from.
        from_flags: bool,
    },
    /// A local file the user named could not be read or written; exit code 2.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Anything else (internal or unexpected); exit code 3.
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// The process exit code for this error: see the module table.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) | Error::Io { .. } => EXIT_USAGE,
            Error::Finding(_) => EXIT_FINDING,
            Error::Api { .. } | Error::Config { .. } | Error::Cluster(_) | Error::Other(_) => {
                EXIT_CLUSTER
            }
        }
    }

    /// Shorthand for [`Error::Usage`].
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }

    /// Shorthand for [`Error::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// A named object the cluster does not have: exit code 3 ([`EXIT_CLUSTER`]), with the
    /// same message as a 404 from [`Error::from_kube`]. For plugins that find objects by
    /// listing (one list instead of N gets) and so never see the 404 themselves.
    ///
    /// `ctx` must carry the resource (e.g. [`ApiContext::resource_of`]), the namespace (for
    /// namespaced kinds) and the name; [`crate::cli::Connection::ctx`] fills server and
    /// context. [`Error::is_not_found`] is true for the result and its status code is 404.
    pub fn not_found(ctx: ApiContext) -> Self {
        Error::Api {
            message: missing_object_message(&ctx),
            code: Some(404),
            context: Box::new(ctx),
            source: None,
        }
    }

    /// HTTP status code of an API error, if the server answered.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Error::Api { code, .. } => *code,
            _ => None,
        }
    }

    /// True for an API 404 on an object that does not exist while its type is served
    /// (false for a 404 because the CRD / API version is missing).
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::Api {
                code: Some(404),
                context,
                source,
                ..
            } => match source.as_deref() {
                Some(kube::Error::Api(st)) => names_object(st, context),
                // Error::not_found: built for a named object.
                None => context.name.is_some(),
                Some(_) => false,
            },
            _ => false,
        }
    }

    /// True for an API 409 Conflict (stale resourceVersion / already exists).
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            Error::Api {
                code: Some(409),
                ..
            }
        )
    }

    /// Turn a kube error into an actionable [`Error::Api`].
    ///
    /// Rules:
    /// - 401: `credentials rejected by <server>: refresh your kubeconfig / token`.
    /// - 403: `RBAC denied: cannot <verb> <resource.group> in namespace "<ns>" (<server message>)`,
    ///   then `check with: kubectl auth can-i <verb> <resource.group> -n <ns>`. Verb, resource,
    ///   group and namespace come from the apiserver's Status message
    ///   (`User "u" cannot patch resource "kustomizations" in API group "kustomize.toolkit.fluxcd.io"
    ///   in the namespace "flux-system"`), else from `ctx`.
    /// - 404 on a named object (name in the Status details, or in `ctx`): `<Kind> "<name>" not
    ///   found in namespace "<ns>" (context "<ctx>", <server>); list what exists with: kubectl
    ///   get <short> -A --context <ctx>` (see [`Error::not_found`]; exit 3, like every API error).
    /// - 404 without one (the path itself is unknown) on a Flux group: `Flux CRD not installed
    ///   or API version not served (<group>/<version> <plural>)`; on another group: `resource
    ///   type not served`.
    /// - transport errors: connection refused / TLS / DNS / timeout, naming `ctx.server`.
    pub fn from_kube(err: kube::Error, ctx: ApiContext) -> Self {
        let (message, code) = describe_kube_error(&err, &ctx);
        Error::Api {
            message,
            code,
            context: Box::new(ctx),
            source: Some(Box::new(err)),
        }
    }
}

impl From<kube::Error> for Error {
    /// Conversion without request context: prefer [`Error::from_kube`] or
    /// [`KubeResultExt::api_context`], which can name the server, verb and resource.
    fn from(err: kube::Error) -> Self {
        Error::from_kube(err, ApiContext::default())
    }
}

impl From<std::fmt::Error> for Error {
    fn from(e: std::fmt::Error) -> Self {
        Error::Other(e.to_string())
    }
}

/// Adds request context to kube results: `api.get(name).await.api_context(|| ctx)?`.
pub trait KubeResultExt<T> {
    /// Map a kube error through [`Error::from_kube`] with the context built by `ctx`.
    fn api_context(self, ctx: impl FnOnce() -> ApiContext) -> Result<T>;
}

impl<T> KubeResultExt<T> for std::result::Result<T, kube::Error> {
    fn api_context(self, ctx: impl FnOnce() -> ApiContext) -> Result<T> {
        self.map_err(|e| Error::from_kube(e, ctx()))
    }
}

fn server_or_unknown(ctx: &ApiContext) -> &str {
    if ctx.server.is_empty() {
        "the API server"
    } else {
        ctx.server.trim_end_matches('/')
    }
}

/// RBAC facts parsed from a 403 Status message.
#[derive(Debug, Default, PartialEq, Eq)]
struct Forbidden {
    verb: Option<String>,
    resource: Option<String>,
    group: Option<String>,
    namespace: Option<String>,
    cluster_scope: bool,
}

/// Parse the authorizer's wording (k8s.io/apiserver pkg/endpoints/handlers/responsewriters
/// `forbiddenMessage`): `User "x" cannot <verb> resource "<res>[/<sub>]" in API group "<g>"
/// in the namespace "<ns>"` or `... at the cluster scope`.
fn parse_forbidden(msg: &str) -> Forbidden {
    let mut f = Forbidden::default();
    if let Some(i) = msg.find(" cannot ") {
        let rest = &msg[i + " cannot ".len()..];
        if let Some(verb) = rest.split_whitespace().next() {
            f.verb = Some(verb.to_string());
        }
        if let Some(res) = quoted_after(rest, "resource \"") {
            f.resource = Some(res);
        }
        if let Some(g) = quoted_after(rest, "in API group \"") {
            f.group = Some(g);
        }
        if let Some(ns) = quoted_after(rest, "in the namespace \"") {
            f.namespace = Some(ns);
        }
        f.cluster_scope = rest.contains("at the cluster scope");
    }
    f
}

fn quoted_after(s: &str, prefix: &str) -> Option<String> {
    let start = s.find(prefix)? + prefix.len();
    let end = s[start..].find('"')?;
    Some(s[start..start + end].to_string())
}

fn describe_kube_error(err: &kube::Error, ctx: &ApiContext) -> (String, Option<u16>) {
    let server = server_or_unknown(ctx);
    match err {
        kube::Error::Api(status) => {
            let code = status.code;
            let msg = match code {
                401 => format!(
                    "credentials rejected by {server} (401 Unauthorized): refresh your kubeconfig / token (e.g. re-run your login or credential plugin)"
                ),
                403 => forbidden_message(&status.message, ctx),
                404 => not_found_message(status, ctx),
                _ => {
                    let what = describe_request(ctx);
                    let reason = if status.reason.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", status.reason)
                    };
                    if what.is_empty() {
                        format!("{server}: {}{reason}", status.message)
                    } else {
                        format!(
                            "{what} on {server} failed with {code}{reason}: {}",
                            status.message
                        )
                    }
                }
            };
            (msg, Some(code))
        }
        other if find_auth_error(other).is_some() => {
            let detail = find_auth_error(other).map(auth_detail).unwrap_or_default();
            (
                format!(
                    "could not get credentials for {server}: {detail}: check the user's exec/OIDC credential plugin in your kubeconfig (run it by hand to see its error)"
                ),
                None,
            )
        }
        other => (transport_message(other, server), None),
    }
}

fn describe_request(ctx: &ApiContext) -> String {
    if ctx.verb.is_empty() && ctx.resource.is_empty() {
        return String::new();
    }
    let mut s = String::new();
    if !ctx.verb.is_empty() {
        s.push_str(&ctx.verb);
        s.push(' ');
    }
    s.push_str(&ctx.qualified_resource());
    match (&ctx.namespace, &ctx.name) {
        (Some(ns), Some(n)) => {
            let _ = write!(s, " {ns}/{n}");
        }
        (None, Some(n)) => {
            let _ = write!(s, " {n}");
        }
        (Some(ns), None) => {
            let _ = write!(s, " in namespace {ns}");
        }
        (None, None) => {}
    }
    s.trim().to_string()
}

fn forbidden_message(status_msg: &str, ctx: &ApiContext) -> String {
    let f = parse_forbidden(status_msg);
    let verb = f
        .verb
        .clone()
        .or_else(|| (!ctx.verb.is_empty()).then(|| ctx.verb.clone()))
        .unwrap_or_else(|| "<verb>".to_string());
    let (resource, group) = match (&f.resource, &f.group) {
        (Some(r), g) => (r.clone(), g.clone().unwrap_or_default()),
        (None, _) => (ctx.resource.clone(), ctx.group.clone()),
    };
    let resource = if resource.is_empty() {
        "<resource>".to_string()
    } else {
        qualify(&resource, &group)
    };
    let namespace = if f.cluster_scope {
        None
    } else {
        f.namespace.clone().or_else(|| ctx.namespace.clone())
    };
    let (scope, ns_flag) = match &namespace {
        Some(ns) => (format!(" in namespace \"{ns}\""), format!(" -n {ns}")),
        None => (" at the cluster scope".to_string(), String::new()),
    };
    let detail = if status_msg.is_empty() {
        String::new()
    } else {
        format!(" ({status_msg})")
    };
    format!(
        "RBAC denied: cannot {verb} {resource}{scope}{detail}; check with: kubectl auth can-i {verb} {resource}{ns_flag}"
    )
}

/// A 404 Status is about a missing object (not a missing type) when it names the object
/// in `details.name`, or when we asked for a named object and the message is not the
/// apiserver's unknown-path text `the server could not find the requested resource`.
fn names_object(status: &kube::core::Status, ctx: &ApiContext) -> bool {
    status.details.as_ref().is_some_and(|d| !d.name.is_empty())
        || (ctx.name.is_some()
            && !status
                .message
                .contains("could not find the requested resource"))
}

/// `kind/namespace/name not found` with the context and server asked and the command that
/// lists what exists. Kind and short name come from [`crate::kind::KINDS`] when the resource is
/// one of ours (`Kustomization`, `ks`), else the `resource.group` kubectl accepts.
fn missing_object_message(ctx: &ApiContext) -> String {
    let known = KINDS
        .iter()
        .find(|i| i.plural == ctx.resource && i.group == ctx.group);
    let (kind, list_as) = match &known {
        Some(i) => (
            i.kind.to_string(),
            i.short_names.first().unwrap_or(&i.plural).to_string(),
        ),
        None => (ctx.qualified_resource(), ctx.qualified_resource()),
    };
    let name = ctx.name.as_deref().unwrap_or("");
    let scope_flag = if ctx.namespace.is_some() { " -A" } else { "" };
    let place = match &ctx.namespace {
        Some(ns) => format!(" in namespace \"{ns}\""),
        None => String::new(),
    };
    let (asked, context_flag) = where_asked(ctx.kube_context.as_deref(), server_or_unknown(ctx));
    format!(
        "{kind} \"{name}\" not found{place} ({asked}); list what exists with: kubectl get {list_as}{scope_flag}{context_flag}"
    )
}

/// Where a request was asked, for messages, and the kubectl flag that asks the same place:
/// (`context "C", SERVER`, ` --context C`) with a kubeconfig context, else (`SERVER`, ``).
/// The context is one shell word in the flag ([`shell_word`]).
pub(crate) fn where_asked(kube_context: Option<&str>, server: &str) -> (String, String) {
    match kube_context {
        Some(c) => (
            format!("context \"{c}\", {server}"),
            format!(" --context {}", shell_word(c)),
        ),
        None => (server.to_string(), String::new()),
    }
}

/// `s` as one shell word (single-quoted when it has anything but `[A-Za-z0-9@%+=:,./_-]`).
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn not_found_message(status: &kube::core::Status, ctx: &ApiContext) -> String {
    if names_object(status, ctx) {
        let detail_name = status
            .details
            .as_ref()
            .map(|d| d.name.clone())
            .filter(|n| !n.is_empty());
        if !ctx.resource.is_empty() && (ctx.name.is_some() || detail_name.is_some()) {
            let mut named = ctx.clone();
            if named.name.is_none() {
                named.name = detail_name;
            }
            missing_object_message(&named)
        } else {
            format!("not found: {} ({})", status.message, server_or_unknown(ctx))
        }
    } else if ctx.group.ends_with(FLUX_GROUP_SUFFIX) {
        format!(
            "Flux CRD not installed or API version not served ({}/{} {}) on {}: check `flux check` or `kubectl api-resources --api-group={}`",
            ctx.group,
            ctx.version,
            ctx.resource,
            server_or_unknown(ctx),
            ctx.group
        )
    } else {
        let gv = if ctx.group.is_empty() {
            ctx.version.clone()
        } else {
            format!("{}/{}", ctx.group, ctx.version)
        };
        format!(
            "resource type not served by {} ({gv} {}): {}",
            server_or_unknown(ctx),
            ctx.resource,
            status.message
        )
    }
}

/// The credential (exec / OIDC / token file) error inside `err`, if any.
fn find_auth_error(err: &kube::Error) -> Option<&kube::client::AuthError> {
    if let kube::Error::Auth(a) = err {
        return Some(a);
    }
    let mut cur: Option<&(dyn StdError + 'static)> = err.source();
    while let Some(e) = cur {
        if let Some(a) = e.downcast_ref::<kube::client::AuthError>() {
            return Some(a);
        }
        cur = e.source();
    }
    None
}

/// A short description of a credential error: for a failed exec plugin, its exit status
/// and the last line of its stderr (kube's own text dumps the whole process output).
fn auth_detail(a: &kube::client::AuthError) -> String {
    match a {
        kube::client::AuthError::AuthExecRun { out, .. } => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim();
            if last.is_empty() {
                format!("exec credential plugin failed ({})", out.status)
            } else {
                format!("exec credential plugin failed ({}): {last}", out.status)
            }
        }
        other => other.to_string(),
    }
}

/// Walk the source chain looking for what the transport failed on.
fn transport_message(err: &kube::Error, server: &str) -> String {
    let mut chain: Vec<String> = Vec::new();
    let mut io_kind = None;
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            io_kind.get_or_insert(io.kind());
        }
        let s = e.to_string();
        if chain.last() != Some(&s) {
            chain.push(s);
        }
        cur = e.source();
    }
    let all = chain.join(": ").to_lowercase();
    let root = chain.last().cloned().unwrap_or_default();
    use std::io::ErrorKind as K;
    if io_kind == Some(K::ConnectionRefused) || all.contains("connection refused") {
        format!(
            "connection refused by {server}: is the cluster running and is this the right context? (kubectl config current-context)"
        )
    } else if all.contains("certificate")
        || all.contains("tls")
        || all.contains("handshake")
        || all.contains("unknownissuer")
    {
        format!(
            "TLS failure talking to {server}: {root}: check the cluster's certificate-authority-data / tls-server-name in your kubeconfig"
        )
    } else if io_kind == Some(K::TimedOut) || all.contains("timed out") || all.contains("elapsed") {
        format!(
            "request to {server} timed out ({root}): check connectivity, or raise --request-timeout"
        )
    } else if all.contains("dns error")
        || all.contains("failed to lookup")
        || all.contains("name or service not known")
    {
        format!("cannot resolve the API server host of {server}: {root}")
    } else if all.contains("connection reset") || all.contains("broken pipe") {
        format!("connection to {server} was reset: {root}")
    } else {
        format!("request to {server} failed: {}", chain.join(": "))
    }
}

/// Print `error: <message>` to stderr and exit with [`Error::exit_code`].
///
/// Use at the top of a plugin's `main`; never returns.
pub fn exit_with(err: &Error) -> ! {
    // Not eprintln!: it panics (exit 101) when stderr is a closed pipe (`... 2>&1 | head`).
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "error: {err}");
    std::process::exit(err.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::{Status, response::StatusDetails};

    fn api_err(code: u16, msg: &str, reason: &str, name: Option<&str>) -> kube::Error {
        let mut st = Status::failure(msg, reason).with_code(code);
        if let Some(n) = name {
            let details: StatusDetails =
                serde_json::from_value(serde_json::json!({ "name": n })).unwrap();
            st = st.with_details(details);
        }
        kube::Error::Api(Box::new(st))
    }

    fn ks_ctx() -> ApiContext {
        ApiContext::new("https://10.0.0.1:6443/")
            .verb("patch")
            .resource_of::<crate::flux::Kustomization>()
            .namespace(Some("flux-system"))
            .name("apps")
    }

    #[test]
    fn exit_codes() {
        assert_eq!(Error::usage("x").exit_code(), 2);
        assert_eq!(Error::Finding("x".into()).exit_code(), 1);
        assert_eq!(Error::Cluster("x".into()).exit_code(), 3);
        assert_eq!(Error::Other("x".into()).exit_code(), 3);
        assert_eq!(
            Error::Config {
                message: "x".into(),
                from_flags: true
            }
            .exit_code(),
            3
        );
        assert_eq!(
            Error::Config {
                message: "x".into(),
                from_flags: false
            }
            .exit_code(),
            3
        );
        assert_eq!(
            Error::io("/x", std::io::Error::from(std::io::ErrorKind::NotFound)).exit_code(),
            2
        );
        let e = Error::from_kube(api_err(500, "boom", "InternalError", None), ks_ctx());
        assert_eq!(e.exit_code(), 3);
        assert_eq!(
            (EXIT_OK, EXIT_FINDING, EXIT_USAGE, EXIT_CLUSTER),
            (0, 1, 2, 3)
        );
    }

    #[test]
    fn unauthorized_names_server() {
        let e = Error::from_kube(api_err(401, "Unauthorized", "Unauthorized", None), ks_ctx());
        let m = e.to_string();
        assert!(
            m.starts_with("credentials rejected by https://10.0.0.1:6443"),
            "{m}"
        );
        assert!(m.contains("refresh your kubeconfig / token"), "{m}");
        assert_eq!(e.status_code(), Some(401));
        assert_eq!(e.exit_code(), 3);
    }

    #[test]
    fn forbidden_from_status_message() {
        let msg = r#"kustomizations.kustomize.toolkit.fluxcd.io "apps" is forbidden: User "alice" cannot patch resource "kustomizations" in API group "kustomize.toolkit.fluxcd.io" in the namespace "flux-system""#;
        let e = Error::from_kube(
            api_err(403, msg, "Forbidden", Some("apps")),
            ApiContext::new("https://k"),
        );
        let m = e.to_string();
        assert!(
            m.starts_with(
                "RBAC denied: cannot patch kustomizations.kustomize.toolkit.fluxcd.io in namespace \"flux-system\""
            ),
            "{m}"
        );
        assert!(
            m.ends_with(
                "check with: kubectl auth can-i patch kustomizations.kustomize.toolkit.fluxcd.io -n flux-system"
            ),
            "{m}"
        );
    }

    #[test]
    fn forbidden_core_subresource_and_cluster_scope() {
        let msg = r#"pods "p" is forbidden: User "bob" cannot patch resource "pods/ephemeralcontainers" in API group "" in the namespace "apps""#;
        let m = Error::from_kube(
            api_err(403, msg, "Forbidden", None),
            ApiContext::new("https://k"),
        )
        .to_string();
        assert!(
            m.contains("kubectl auth can-i patch pods/ephemeralcontainers -n apps"),
            "{m}"
        );
        let msg = r#"namespaces is forbidden: User "bob" cannot list resource "namespaces" in API group "" at the cluster scope"#;
        let m = Error::from_kube(
            api_err(403, msg, "Forbidden", None),
            ApiContext::new("https://k"),
        )
        .to_string();
        assert!(
            m.contains("cannot list namespaces at the cluster scope"),
            "{m}"
        );
        assert!(m.ends_with("kubectl auth can-i list namespaces"), "{m}");
    }

    #[test]
    fn forbidden_falls_back_to_context() {
        let m = Error::from_kube(api_err(403, "", "Forbidden", None), ks_ctx()).to_string();
        assert!(
            m.ends_with(
                "kubectl auth can-i patch kustomizations.kustomize.toolkit.fluxcd.io -n flux-system"
            ),
            "{m}"
        );
    }

    #[test]
    fn not_found_flux_crd_vs_object() {
        let crd = Error::from_kube(
            api_err(
                404,
                "the server could not find the requested resource",
                "NotFound",
                None,
            ),
            ks_ctx(),
        );
        let m = crd.to_string();
        assert!(
            m.starts_with(
                "Flux CRD not installed or API version not served (kustomize.toolkit.fluxcd.io/v1 kustomizations)"
            ),
            "{m}"
        );
        assert!(!crd.is_not_found());
        let obj = Error::from_kube(
            api_err(
                404,
                r#"kustomizations.kustomize.toolkit.fluxcd.io "apps" not found"#,
                "NotFound",
                Some("apps"),
            ),
            ks_ctx(),
        );
        assert_eq!(
            obj.to_string(),
            "Kustomization \"apps\" not found in namespace \"flux-system\" (https://10.0.0.1:6443); \
             list what exists with: kubectl get ks -A"
        );
        assert!(obj.is_not_found());
        assert_eq!(obj.exit_code(), EXIT_CLUSTER);
    }

    #[test]
    fn not_found_names_context_and_listing_command() {
        // A 404 from the server and Error::not_found (a list that lacked the name) say the
        // same thing and exit the same way.
        let ctx = ks_ctx().kube_context(Some("prod-eu"));
        let from_404 = Error::from_kube(
            api_err(
                404,
                r#"kustomizations.kustomize.toolkit.fluxcd.io "apps" not found"#,
                "NotFound",
                Some("apps"),
            ),
            ctx.clone(),
        );
        let listed = Error::not_found(ctx);
        let want = "Kustomization \"apps\" not found in namespace \"flux-system\" \
                    (context \"prod-eu\", https://10.0.0.1:6443); \
                    list what exists with: kubectl get ks -A --context prod-eu";
        for e in [&from_404, &listed] {
            assert_eq!(e.to_string(), want);
            assert_eq!(e.exit_code(), EXIT_CLUSTER);
            assert!(e.is_not_found());
            assert_eq!(e.status_code(), Some(404));
        }
        // A core kind with the name only in the Status details; a context needing quotes.
        let e = Error::from_kube(
            api_err(404, r#"pods "web-0" not found"#, "NotFound", Some("web-0")),
            ApiContext::new("https://k")
                .kube_context(Some("my ctx"))
                .verb("get")
                .with_resource_url("/api/v1/namespaces/apps/pods"),
        );
        assert_eq!(
            e.to_string(),
            "Pod \"web-0\" not found in namespace \"apps\" (context \"my ctx\", https://k); \
             list what exists with: kubectl get po -A --context 'my ctx'"
        );
        // A resource that is not one of refs::Kind: its resource.group.
        let e = Error::not_found(
            ApiContext::new("https://k")
                .resource("networking.k8s.io", "ingresses")
                .namespace(Some("web"))
                .name("front"),
        );
        assert_eq!(
            e.to_string(),
            "ingresses.networking.k8s.io \"front\" not found in namespace \"web\" (https://k); \
             list what exists with: kubectl get ingresses.networking.k8s.io -A"
        );
    }

    #[test]
    fn connection_refused_names_server() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = kube::Error::Service(Box::new(io));
        let m = Error::from_kube(e, ApiContext::new("https://127.0.0.1:1/")).to_string();
        assert!(
            m.starts_with("connection refused by https://127.0.0.1:1"),
            "{m}"
        );
    }

    #[test]
    fn tls_failure_names_server() {
        let io = std::io::Error::other("invalid peer certificate: UnknownIssuer");
        let e = kube::Error::Service(Box::new(io));
        let m = Error::from_kube(e, ApiContext::new("https://k.example:6443")).to_string();
        assert!(
            m.starts_with("TLS failure talking to https://k.example:6443"),
            "{m}"
        );
    }

    #[test]
    fn context_from_resource_url() {
        let c = ApiContext::new("https://k").with_resource_url(
            "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations",
        );
        assert_eq!(c.group, "kustomize.toolkit.fluxcd.io");
        assert_eq!(c.version, "v1");
        assert_eq!(c.resource, "kustomizations");
        assert_eq!(c.namespace.as_deref(), Some("flux-system"));
        let c = ApiContext::new("https://k").with_resource_url("/api/v1/namespaces");
        assert_eq!(
            (c.group.as_str(), c.resource.as_str(), c.namespace),
            ("", "namespaces", None)
        );
        let c = ApiContext::new("https://k")
            .resource("apps", "deployments")
            .with_resource_url("/api/v1/pods");
        assert_eq!(c.resource, "deployments");
    }

    #[test]
    fn parse_forbidden_wording() {
        let f = parse_forbidden(
            r#"User "system:serviceaccount:x:y" cannot watch resource "gitrepositories" in API group "source.toolkit.fluxcd.io" in the namespace "flux-system""#,
        );
        assert_eq!(f.verb.as_deref(), Some("watch"));
        assert_eq!(f.resource.as_deref(), Some("gitrepositories"));
        assert_eq!(f.group.as_deref(), Some("source.toolkit.fluxcd.io"));
        assert_eq!(f.namespace.as_deref(), Some("flux-system"));
        assert!(!f.cluster_scope);
    }
}
