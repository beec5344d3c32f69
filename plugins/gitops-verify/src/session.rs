//! The session value of one run: the connection, what the user asked for, and the request
//! counter every read goes through (docs/gitops-verify.md's request budget is this counter, checked
//! against the fault proxy's log in the real-cluster tests).

use std::time::Duration;

use cluster_loop::cli::Connection;
use unstick::live::Reader;

/// The `HOST|URL` arguments, split: a URL (`https://podinfo.example.com/healthz`) is a
/// request target for the HTTP link, a bare host a name for the DNS link. The DNS, Gateway
/// and HTTP links read them ([`crate::links`]); with none given they take the hosts from
/// the applied inventory's Gateways, HTTPRoutes and Ingresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A host name (`podinfo.example.com`).
    Host(String),
    /// A URL with scheme `http` or `https`.
    Url(url::Url),
}

impl Target {
    /// The host name of the target.
    pub fn host(&self) -> &str {
        match self {
            Target::Host(h) => h,
            Target::Url(u) => u.host_str().unwrap_or_default(),
        }
    }
}

/// What the user asked for, decided before any kubeconfig is read.
#[derive(Debug, Clone)]
pub struct Options {
    /// `HOST|URL` arguments.
    pub targets: Vec<Target>,
    /// `-A`: every namespace.
    pub all_namespaces: bool,
    /// `--source KIND/NAME`: (Kind as the API spells it, name).
    pub source: Option<(String, String)>,
    /// `--probe-source`: contact each GitRepository's remote from a pod in its namespace
    /// (cutover's in-cluster preflight) instead of from this workstation.
    pub probe_source: bool,
    /// `--probe-image` of that probe.
    pub probe_image: String,
    /// `--probe-timeout`.
    pub probe_timeout: Duration,
    /// `--wait`.
    pub wait: bool,
    /// `--timeout`: the `--wait` deadline instead of the computed one.
    pub timeout: Option<Duration>,
    /// `--margin` added to the largest own timeout for the default deadline.
    pub margin: Duration,
}

/// One run's shared state. Links read it through [`crate::links::Context`].
pub struct Session {
    /// The connection.
    pub conn: Connection,
    /// What to check.
    pub opts: Options,
    /// Flux objects' namespace, `None` with `-A`.
    pub namespace: Option<String>,
    /// Counts every API request the run makes (unstick's reader: one count per request).
    pub reader: Reader,
}

impl Session {
    /// The session over `conn`: the namespace is `-n`, else `flux-system` (flux CLI), and
    /// none with `-A`.
    pub fn new(conn: Connection, opts: Options) -> Self {
        let namespace = (!opts.all_namespaces).then(|| conn.flux_namespace());
        Session {
            conn,
            opts,
            namespace,
            reader: Reader::default(),
        }
    }

    /// Requests made so far.
    pub fn requests(&self) -> usize {
        self.reader
            .requests
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Counts one request made outside the reader (a typed list, a probe's requests).
    pub fn count(&self, n: usize) {
        self.reader
            .requests
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
}
