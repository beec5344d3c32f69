//! The twin cluster: an in-memory Kubernetes API server served over HTTPS on 127.0.0.1, for
//! tests, benchmarks and the demo (no kube-apiserver can run on our machines).
//!
//! ```no_run
//! # async fn demo() -> Result<(), twin::TwinError> {
//! let twin = twin::Twin::start(twin::TwinOptions::default()).await?;
//! // kubectl --kubeconfig <twin.kubeconfig_path()> get ks -A
//! let store = twin.store();
//! let ks = store.gvr("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")?;
//! let all = store.list(&ks, None, None)?;
//! # let _ = all; Ok(()) }
//! ```
//!
//! See `tests/twin/README.md` for the behaviours implemented and every known difference from a
//! real kube-apiserver.

pub mod auth;
pub mod error;
pub mod faults;
pub mod flux;
pub mod git;
pub mod patch;
pub mod podexec;
mod protobuf;
pub mod registry;
pub mod selector;
mod server;
pub mod store;
pub mod table;
pub mod testkit;
pub mod workload;

use base64::Engine;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use auth::Rule;
pub use error::StatusError;
pub use faults::{
    Fault, FaultAction, FaultId, FaultMatch, Faults, RequestLog, RequestRecord, Trigger,
};
pub use patch::PatchKind;
pub use registry::{Gvr, ResourceInfo};
pub use store::{
    DeleteOptions, Deleted, ListParams, Store, Subresource, WatchEvent, WatchEventType,
    WatchParams, WatchStream, WriteOptions,
};

/// The Flux CRDs shipped with the twin (file name, YAML), trimmed from the upstream
/// `config/crd/bases` of kustomize-controller v1.7.3, source-controller v1.7.4,
/// image-reflector-controller v1.0.4, image-automation-controller v1.0.4,
/// notification-controller v1.7.5 and helm-controller v1.4.5 (names, scope, versions, printer
/// columns and subresources kept; schemas replaced by `x-kubernetes-preserve-unknown-fields`).
pub const FLUX_CRDS: &[(&str, &str)] = &[
    (
        "kustomize.toolkit.fluxcd.io_kustomizations.yaml",
        include_str!("../crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml"),
    ),
    (
        "source.toolkit.fluxcd.io_gitrepositories.yaml",
        include_str!("../crds/source.toolkit.fluxcd.io_gitrepositories.yaml"),
    ),
    (
        "source.toolkit.fluxcd.io_ocirepositories.yaml",
        include_str!("../crds/source.toolkit.fluxcd.io_ocirepositories.yaml"),
    ),
    (
        "source.toolkit.fluxcd.io_helmrepositories.yaml",
        include_str!("../crds/source.toolkit.fluxcd.io_helmrepositories.yaml"),
    ),
    (
        "source.toolkit.fluxcd.io_helmcharts.yaml",
        include_str!("../crds/source.toolkit.fluxcd.io_helmcharts.yaml"),
    ),
    (
        "source.toolkit.fluxcd.io_buckets.yaml",
        include_str!("../crds/source.toolkit.fluxcd.io_buckets.yaml"),
    ),
    (
        "image.toolkit.fluxcd.io_imagerepositories.yaml",
        include_str!("../crds/image.toolkit.fluxcd.io_imagerepositories.yaml"),
    ),
    (
        "image.toolkit.fluxcd.io_imagepolicies.yaml",
        include_str!("../crds/image.toolkit.fluxcd.io_imagepolicies.yaml"),
    ),
    (
        "image.toolkit.fluxcd.io_imageupdateautomations.yaml",
        include_str!("../crds/image.toolkit.fluxcd.io_imageupdateautomations.yaml"),
    ),
    (
        "notification.toolkit.fluxcd.io_alerts.yaml",
        include_str!("../crds/notification.toolkit.fluxcd.io_alerts.yaml"),
    ),
    (
        "notification.toolkit.fluxcd.io_providers.yaml",
        include_str!("../crds/notification.toolkit.fluxcd.io_providers.yaml"),
    ),
    (
        "notification.toolkit.fluxcd.io_receivers.yaml",
        include_str!("../crds/notification.toolkit.fluxcd.io_receivers.yaml"),
    ),
    (
        "helm.toolkit.fluxcd.io_helmreleases.yaml",
        include_str!("../crds/helm.toolkit.fluxcd.io_helmreleases.yaml"),
    ),
];

/// Errors starting or driving a twin.
#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    /// Socket or file I/O.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Certificate generation or TLS configuration.
    #[error("TLS setup: {0}")]
    Tls(String),
    /// An API error (e.g. loading an object the store rejects).
    #[error(transparent)]
    Api(#[from] StatusError),
    /// A state file could not be loaded.
    #[error("{file}: {message}")]
    Load {
        /// The file (or `<string>`).
        file: String,
        /// What is wrong and what to do.
        message: String,
    },
}

/// How to start a twin.
#[derive(Clone, Debug)]
pub struct TwinOptions {
    /// Register the Flux CRDs ([`FLUX_CRDS`]) and create the `flux-system` namespace (default
    /// true), as after `flux install`.
    pub install_flux_crds: bool,
    /// Extra namespaces to create at start (besides default, kube-system, kube-public,
    /// kube-node-lease).
    pub namespaces: Vec<String>,
    /// YAML files or directories (`*.yaml`/`*.yml`/`*.json`, recursively) to load at start.
    pub state: Vec<PathBuf>,
    /// Watch history window in events (default 10,000); older resourceVersions get 410.
    pub history_window: usize,
    /// Interval between BOOKMARK events on watches with `allowWatchBookmarks=true` (default 60 s,
    /// like the apiserver's bookmark frequency).
    pub bookmark_interval: Duration,
    /// The kubeconfig context's default namespace (default `default`).
    pub default_namespace: String,
    /// Port on 127.0.0.1 (default 0 = ephemeral).
    pub port: u16,
    /// Where to write the admin kubeconfig (default: `kubeconfig` in a temp dir removed on drop).
    pub kubeconfig_path: Option<PathBuf>,
}

impl Default for TwinOptions {
    fn default() -> Self {
        TwinOptions {
            install_flux_crds: true,
            namespaces: Vec::new(),
            state: Vec::new(),
            history_window: 10_000,
            bookmark_interval: Duration::from_secs(60),
            default_namespace: "default".into(),
            port: 0,
            kubeconfig_path: None,
        }
    }
}

/// A running twin cluster. Dropping it stops the server (open connections are closed).
pub struct Twin {
    ctx: Arc<server::Ctx>,
    addr: SocketAddr,
    ca_pem: String,
    admin_token: String,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
    opts: TwinOptions,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> TwinError {
    let context = context.into();
    move |source| TwinError::Io { context, source }
}

struct Pki {
    ca_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

fn make_pki() -> Result<Pki, TwinError> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let t = |e: rcgen::Error| TwinError::Tls(e.to_string());
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(t)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "twin-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().map_err(t)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(t)?;
    let issuer = Issuer::new(ca, ca_key);
    let mut srv = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .map_err(t)?;
    srv.distinguished_name
        .push(DnType::CommonName, "twin-apiserver");
    srv.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    srv.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let srv_key = KeyPair::generate().map_err(t)?;
    let srv_cert = srv.signed_by(&srv_key, &issuer).map_err(t)?;
    Ok(Pki {
        ca_pem: ca_cert.pem(),
        cert_der: srv_cert.der().to_vec(),
        key_der: srv_key.serialize_der(),
    })
}

impl Twin {
    /// Starts a twin: generates a CA and a server certificate for 127.0.0.1/localhost, listens
    /// on 127.0.0.1 (ephemeral port unless set), installs CRDs/namespaces/state, and writes an
    /// admin kubeconfig (context `twin`, user `twin-admin`). Must be called inside a Tokio
    /// runtime.
    pub async fn start(opts: TwinOptions) -> Result<Twin, TwinError> {
        let store = Store::new(opts.history_window);
        if opts.install_flux_crds {
            install_flux_crds(&store)?;
            store.ensure_namespace("flux-system");
        }
        for ns in &opts.namespaces {
            store.ensure_namespace(ns);
        }
        for p in &opts.state {
            load_path(&store, p)?;
        }
        let pki = make_pki()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TwinError::Tls(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(
                vec![rustls::pki_types::CertificateDer::from(pki.cert_der)],
                rustls::pki_types::PrivateKeyDer::Pkcs8(pki.key_der.into()),
            )
            .map_err(|e| TwinError::Tls(e.to_string()))?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", opts.port))
            .await
            .map_err(io_err("binding 127.0.0.1"))?;
        let addr = listener.local_addr().map_err(io_err("local_addr"))?;
        let tokens = auth::Tokens::default();
        let admin_token = tokens.add("twin-admin", None);
        let ctx = Arc::new(server::Ctx {
            store,
            tokens,
            faults: Faults::default(),
            log: RequestLog::default(),
            server_addr: addr.to_string(),
            bookmark_interval: opts.bookmark_interval,
        });
        let (sd_tx, sd_rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, acceptor, ctx.clone(), sd_rx));
        let dir = tempfile::Builder::new()
            .prefix("twin-")
            .tempdir()
            .map_err(io_err("creating temp dir"))?;
        let kubeconfig = opts
            .kubeconfig_path
            .clone()
            .unwrap_or_else(|| dir.path().join("kubeconfig"));
        let twin = Twin {
            ctx,
            addr,
            ca_pem: pki.ca_pem,
            admin_token,
            kubeconfig: kubeconfig.clone(),
            dir,
            opts,
            shutdown: sd_tx,
            task: Some(task),
        };
        twin.write_kubeconfig(&kubeconfig, &twin.admin_token, "twin-admin")?;
        Ok(twin)
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> String {
        format!("https://{}", self.addr)
    }
    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// The CA certificate (PEM) that signed the server certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }
    /// The admin bearer token (full access).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }
    /// Path of the admin kubeconfig.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }
    /// The in-process API (same semantics as HTTP, no auth, no faults).
    pub fn store(&self) -> Store {
        self.ctx.store.clone()
    }
    /// Fault table for HTTP requests.
    pub fn faults(&self) -> &Faults {
        &self.ctx.faults
    }
    /// All HTTP requests served so far.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.ctx.log.all()
    }
    /// The request log (counting helpers).
    pub fn request_log(&self) -> &RequestLog {
        &self.ctx.log
    }
    /// Clears the request log.
    pub fn reset_requests(&self) {
        self.ctx.log.reset()
    }
    /// Ends every open watch now (HTTP and in-process): clients see their streams close, as
    /// when an apiserver restarts or a load balancer drops idle connections.
    pub fn drop_watches(&self) {
        self.ctx.store.drop_watches()
    }

    /// Adds a bearer token for user `name` (e.g. `system:serviceaccount:flux-system:ro`)
    /// restricted to `rules`; returns the token.
    pub fn add_token(&self, name: &str, rules: Vec<Rule>) -> String {
        self.ctx.tokens.add(name, Some(rules))
    }
    /// Adds a token with full access for user `name`.
    pub fn add_admin_token(&self, name: &str) -> String {
        self.ctx.tokens.add(name, None)
    }
    /// Revokes a token: later requests with it get 401.
    pub fn revoke_token(&self, token: &str) {
        self.ctx.tokens.revoke(token)
    }

    /// Writes a kubeconfig for `token` at `path` (cluster `twin`, context `twin`, user `user`,
    /// namespace = the default namespace option).
    pub fn write_kubeconfig(&self, path: &Path, token: &str, user: &str) -> Result<(), TwinError> {
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes());
        let cfg = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "twin", "cluster": {"server": self.server_url(), "certificate-authority-data": ca}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "twin", "context": {"cluster": "twin", "user": user, "namespace": self.opts.default_namespace}}],
            "current-context": "twin",
            "preferences": {},
        });
        let text = serde_saphyr::to_string(&cfg).map_err(|e| TwinError::Load {
            file: path.display().to_string(),
            message: format!("serializing kubeconfig: {e}"),
        })?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io_err(format!("creating {}", parent.display())))?;
        }
        std::fs::write(path, text).map_err(io_err(format!("writing {}", path.display())))
    }

    /// Writes a kubeconfig for `token` in the twin's temp dir (file `kubeconfig-<user>`) and
    /// returns its path.
    pub fn kubeconfig_for(&self, token: &str, user: &str) -> Result<PathBuf, TwinError> {
        let safe: String = user
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let p = self.dir.path().join(format!("kubeconfig-{safe}"));
        self.write_kubeconfig(&p, token, user)?;
        Ok(p)
    }

    /// Loads YAML/JSON objects from a file or directory (see [`load_path`]).
    pub fn load_path(&self, path: &Path) -> Result<usize, TwinError> {
        load_path(&self.ctx.store, path)
    }
    /// Loads objects from a multi-document YAML string.
    pub fn load_yaml(&self, yaml: &str) -> Result<usize, TwinError> {
        load_docs(&self.ctx.store, &parse_docs(yaml, "<string>")?, "<string>")
    }
    /// The store as multi-document YAML.
    pub fn dump_yaml(&self) -> String {
        dump_yaml(&self.ctx.store)
    }
    /// The store as a JSON `v1` `List`.
    pub fn dump_json(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "List", "items": self.ctx.store.dump()})
    }
    /// Clears all objects (CRDs and their types stay), recreates the start namespaces and
    /// reloads nothing; clears the request log and faults. Open watches end.
    pub fn reset(&self) {
        self.ctx.store.reset();
        if self.opts.install_flux_crds {
            self.ctx.store.ensure_namespace("flux-system");
        }
        for ns in &self.opts.namespaces {
            self.ctx.store.ensure_namespace(ns);
        }
        self.ctx.log.reset();
        self.ctx.faults.clear();
    }

    /// Stops the server and waits for the accept loop to end.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        self.ctx.store.drop_watches();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for Twin {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        self.ctx.store.drop_watches();
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    ctx: Arc<server::Ctx>,
    mut sd: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let (tcp, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(_) => continue,
            },
            _ = sd.changed() => return,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let ctx = ctx.clone();
        let mut sd = sd.clone();
        tokio::spawn(async move {
            let tls = tokio::select! {
                r = acceptor.accept(tcp) => match r { Ok(t) => t, Err(_) => return },
                _ = sd.changed() => return,
            };
            let svc = hyper::service::service_fn(move |req| server::handle(ctx.clone(), req));
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(tls), svc);
            tokio::select! {
                _ = conn => {}
                _ = sd.changed() => {}
            }
        });
    }
}

/// Registers the shipped Flux CRDs in `store` (idempotent).
pub fn install_flux_crds(store: &Store) -> Result<(), TwinError> {
    let gvr = store.gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions")?;
    for (file, text) in FLUX_CRDS {
        let crd: Value = serde_saphyr::from_str(text).map_err(|e| TwinError::Load {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        let name = crd["metadata"]["name"].as_str().unwrap_or("").to_string();
        if store.get(&gvr, None, &name).is_err() {
            store.create(&gvr, crd)?;
        }
    }
    Ok(())
}

fn parse_docs(text: &str, file: &str) -> Result<Vec<Value>, TwinError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| TwinError::Load {
        file: file.to_string(),
        message: format!("not valid YAML: {e}"),
    })?;
    let mut out = Vec::new();
    for d in docs {
        if d.is_null() {
            continue;
        }
        if d.get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k == "List" || k.ends_with("List"))
            && let Some(items) = d.get("items").and_then(Value::as_array)
        {
            out.extend(items.iter().cloned());
            continue;
        }
        out.push(d);
    }
    Ok(out)
}

fn load_docs(store: &Store, docs: &[Value], file: &str) -> Result<usize, TwinError> {
    // CRDs first, then namespaces, then everything else (like `kubectl apply` ordering).
    let rank = |d: &Value| match d.get("kind").and_then(Value::as_str) {
        Some("CustomResourceDefinition") => 0,
        Some("Namespace") => 1,
        _ => 2,
    };
    let mut sorted: Vec<&Value> = docs.iter().collect();
    sorted.sort_by_key(|d| rank(d));
    for d in &sorted {
        let id = format!(
            "{}/{} {}/{}",
            d.get("apiVersion").and_then(Value::as_str).unwrap_or("?"),
            d.get("kind").and_then(Value::as_str).unwrap_or("?"),
            d.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or(""),
            d.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("?"),
        );
        store.restore((*d).clone()).map_err(|e| TwinError::Load {
            file: file.to_string(),
            message: format!(
                "{id}: {} (create missing namespaces/CRDs first, or fix apiVersion/kind)",
                e.message
            ),
        })?;
    }
    Ok(sorted.len())
}

/// Loads objects from a YAML/JSON file (multi-document, `List` kinds expanded) or every
/// `*.yaml`/`*.yml`/`*.json` file under a directory (sorted by path). Objects keep their
/// status, uid and generation (restore semantics); CRDs and Namespaces in the same file are
/// applied first. Returns the number of objects. Errors name the file and object.
pub fn load_path(store: &Store, path: &Path) -> Result<usize, TwinError> {
    let mut files = Vec::new();
    if path.is_dir() {
        collect_files(path, &mut files)?;
        files.sort();
    } else {
        files.push(path.to_path_buf());
    }
    let mut all = Vec::new();
    for f in &files {
        let text =
            std::fs::read_to_string(f).map_err(io_err(format!("reading {}", f.display())))?;
        for d in parse_docs(&text, &f.display().to_string())? {
            all.push((f.display().to_string(), d));
        }
    }
    let rank = |d: &Value| match d.get("kind").and_then(Value::as_str) {
        Some("CustomResourceDefinition") => 0,
        Some("Namespace") => 1,
        _ => 2,
    };
    all.sort_by_key(|(_, d)| rank(d));
    for (f, d) in &all {
        load_docs(store, std::slice::from_ref(d), f)?;
    }
    Ok(all.len())
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), TwinError> {
    for e in std::fs::read_dir(dir).map_err(io_err(format!("reading {}", dir.display())))? {
        let p = e
            .map_err(io_err(format!("reading {}", dir.display())))?
            .path();
        if p.is_dir() {
            collect_files(&p, out)?;
        } else if p
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        {
            out.push(p);
        }
    }
    Ok(())
}

/// The store as multi-document YAML (`---` separated), in [`Store::dump`] order.
pub fn dump_yaml(store: &Store) -> String {
    let mut out = String::new();
    for o in store.dump() {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&o).unwrap_or_default());
    }
    out
}
