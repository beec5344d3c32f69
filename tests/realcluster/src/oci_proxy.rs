//! The real OCI registry ([`crate::oci`]) served under the names a fleet gives it (e.g.
//! `registry.example.local:5000`), over HTTPS, through a forward proxy: how
//! image-reflector-controller reaches a registry whose name resolves nowhere on this machine.
//!
//! Why a proxy, and why TLS:
//! - go-containerregistry speaks plain HTTP only to `localhost:`, `127.0.0.1`, `::1`,
//!   `*.localhost` and RFC 1918 registries, or with `name.Insecure` (pkg/name
//!   `Registry.Scheme`, v0.21.6: the version image-reflector-controller v1.2.0 uses); any other
//!   name is pinged and read over `https` only (pkg/v1/remote/transport `ping`). So a fleet's
//!   `registry.example.local:5000` without `spec.insecure` needs a TLS server for that name.
//! - image-reflector-controller v1.2.0 builds no transport of its own for an ImageRepository
//!   without `proxySecretRef`/`certSecretRef` (internal/registry/options.go), so
//!   go-containerregistry's `remote.DefaultTransport` is used: `Proxy:
//!   http.ProxyFromEnvironment` (HTTPS_PROXY for https URLs; Go never proxies `localhost` or a
//!   loopback IP, so the controller's kube-apiserver at 127.0.0.1 stays direct) and the system
//!   roots, which Go's crypto/x509 reads from `SSL_CERT_FILE` on Linux.
//! - The name cannot resolve for a host process (only /etc/hosts would, and it is the
//!   machine's), the fleet's port 5000 may be taken, and the registry serves plain HTTP on a
//!   port the kernel picks. A forward proxy needs none of them: the client sends
//!   `CONNECT registry.example.local:5000` to it and never resolves the name.
//!
//! What it does: answers `CONNECT <name>` for the configured names only (anything else: 403;
//! any other method: 405; each logged, [`RegistryProxy::log`]), then terminates TLS on the
//! tunnel with a certificate for the name signed by its own CA ([`RegistryProxy::ca_file`]),
//! offering no ALPN (so Go's client speaks HTTP/1.1), and pipes the bytes to the registry.
//! The HTTP and TLS protocol work is hyper's (CONNECT and upgrade) and rustls's.
//!
//! ```no_run
//! # async fn f(dir: &std::path::Path) -> Result<(), realcluster::Error> {
//! let names = vec!["registry.example.local:5000".to_owned()];
//! let proxy = realcluster::oci_proxy::RegistryProxy::start(&names, "localhost:41234", dir).await?;
//! // image-reflector-controller's pod env: proxy.env() (HTTPS_PROXY, NO_PROXY, SSL_CERT_FILE)
//! # Ok(()) }
//! ```

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tokio::net::{TcpListener, TcpStream};

use crate::Error;

/// What the proxy serves: the names, where they lead, and its log.
struct State {
    /// `host:port` authorities a CONNECT may name.
    names: Vec<String>,
    /// The registry's `host:port` (plain HTTP).
    upstream: String,
    acceptor: tokio_rustls::TlsAcceptor,
    log: Mutex<Vec<String>>,
}

impl State {
    fn note(&self, line: String) {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }
}

/// A running proxy on `127.0.0.1:<port from the kernel>`; dropping it stops the listener
/// (tunnels in flight end with the cluster's runtime).
pub struct RegistryProxy {
    url: String,
    ca_file: PathBuf,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RegistryProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RegistryProxy {
    /// Serves `names` (each `host:port`; a name without a port means `:443`, as in an image
    /// reference) as the plain-HTTP registry at `upstream` (`host:port`), on the current tokio
    /// runtime. Writes its CA to `dir/registry-proxy-ca.crt`. Errors: [`Error::Setup`] for an
    /// empty or malformed name, the certificates, the file or the listener.
    pub async fn start(
        names: &[String],
        upstream: &str,
        dir: &Path,
    ) -> Result<RegistryProxy, Error> {
        let setup = |what: &str, e: &dyn std::fmt::Display| {
            Error::Setup(format!("registry proxy: {what}: {e}"))
        };
        let names: Vec<String> = names
            .iter()
            .map(|n| with_port(n))
            .collect::<Result<_, _>>()?;
        if names.is_empty() {
            return Err(Error::Setup("registry proxy: no registry names".into()));
        }
        let hosts: Vec<String> = names
            .iter()
            .filter_map(|n| n.rsplit_once(':').map(|(h, _)| h.to_owned()))
            .collect();
        let (ca_pem, cert_der, key_der) =
            certificates(hosts).map_err(|e| setup("certificate", &e))?;
        let ca_file = dir.join("registry-proxy-ca.crt");
        std::fs::write(&ca_file, ca_pem).map_err(|e| setup(&ca_file.display().to_string(), &e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // No ALPN protocols: the client's `h2` offer is ignored and it speaks HTTP/1.1, which
        // the bytes piped to the registry (a plain HTTP/1.1 server) must be.
        let tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| setup("TLS", &e))?
            .with_no_client_auth()
            .with_single_cert(
                vec![cert_der.into()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key_der.into()),
            )
            .map_err(|e| setup("TLS", &e))?;
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| setup("bind", &e))?;
        let port = listener.local_addr().map_err(|e| setup("bind", &e))?.port();
        let state = Arc::new(State {
            names,
            upstream: upstream.to_owned(),
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(tls)),
            log: Mutex::new(Vec::new()),
        });
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let st = st.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| handle(req, st.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc)
                        .with_upgrades()
                        .await;
                });
            }
        });
        Ok(RegistryProxy {
            url: format!("http://127.0.0.1:{port}"),
            ca_file,
            state,
            task,
        })
    }

    /// `http://127.0.0.1:<port>`: the proxy's URL, for `HTTPS_PROXY`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The PEM file of the CA that signed the names' certificate (for `SSL_CERT_FILE`).
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// The names served, each `host:port`.
    pub fn names(&self) -> &[String] {
        &self.state.names
    }

    /// The environment a Go client needs to reach the names through this proxy:
    /// `HTTPS_PROXY` (this proxy), `NO_PROXY` (the in-cluster suffixes Flux's proxy docs
    /// list: `.cluster.local.,.cluster.local,.svc`) and `SSL_CERT_FILE` (the CA).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("HTTPS_PROXY".to_owned(), self.url.clone()),
            (
                "NO_PROXY".to_owned(),
                ".cluster.local.,.cluster.local,.svc".to_owned(),
            ),
            (
                "SSL_CERT_FILE".to_owned(),
                self.ca_file.to_string_lossy().into_owned(),
            ),
        ]
    }

    /// One line per request: `CONNECT <name> -> <registry>` for a tunnel opened, with `: 403`
    /// or `: 405` for a refusal, and a line for a tunnel that failed (TLS handshake, registry
    /// unreachable).
    pub fn log(&self) -> Vec<String> {
        self.state
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// `host:port` from a registry name (`host` alone is `host:443`). Errors: an empty host or a
/// port that is not a number.
fn with_port(name: &str) -> Result<String, Error> {
    let bad = || {
        Error::Setup(format!(
            "registry proxy: bad registry name {name:?} (want host:port)"
        ))
    };
    match name.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
            Ok(name.to_owned())
        }
        Some(_) => Err(bad()),
        None if !name.is_empty() && !name.contains('/') => Ok(format!("{name}:443")),
        None => Err(bad()),
    }
}

/// A fresh CA (PEM) and a serving certificate and PKCS#8 key (DER) for `hosts`, signed by it.
fn certificates(hosts: Vec<String>) -> Result<(String, Vec<u8>, Vec<u8>), rcgen::Error> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(
        DnType::CommonName,
        "cluster-loop realcluster registry proxy CA",
    );
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
    let mut leaf = CertificateParams::new(hosts)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "cluster-loop realcluster OCI registry");
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let cert = leaf.signed_by(&key, &ca)?;
    Ok((ca.pem(), cert.der().to_vec(), key.serialize_der()))
}

fn text(code: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = code;
    r
}

/// One request on the proxy: a CONNECT to a served name opens a TLS tunnel to the registry
/// (answered 200 at once; the tunnel runs on a task of its own once hyper hands over the
/// connection); anything else is refused.
async fn handle(
    req: Request<hyper::body::Incoming>,
    st: Arc<State>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != Method::CONNECT {
        st.note(format!("{} {}: 405", req.method(), req.uri()));
        return Ok(text(
            StatusCode::METHOD_NOT_ALLOWED,
            "registry proxy: only CONNECT is served\n".into(),
        ));
    }
    let target = req
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .unwrap_or_default();
    if !st.names.contains(&target) {
        st.note(format!("CONNECT {target}: 403"));
        return Ok(text(
            StatusCode::FORBIDDEN,
            format!(
                "registry proxy: {target} is not a registry of this cluster (served: {})\n",
                st.names.join(", ")
            ),
        ));
    }
    st.note(format!("CONNECT {target} -> {}", st.upstream));
    tokio::spawn(async move {
        if let Err(e) = tunnel(req, &st).await {
            st.note(format!("CONNECT {target}: tunnel failed: {e}"));
        }
    });
    Ok(Response::new(Full::new(Bytes::new())))
}

/// The tunnel of an accepted CONNECT: TLS as the name, then bytes both ways to the registry.
async fn tunnel(req: Request<hyper::body::Incoming>, st: &State) -> Result<(), String> {
    let upgraded = hyper::upgrade::on(req)
        .await
        .map_err(|e| format!("upgrade: {e}"))?;
    let mut tls = st
        .acceptor
        .accept(TokioIo::new(upgraded))
        .await
        .map_err(|e| format!("TLS handshake: {e}"))?;
    let mut registry = TcpStream::connect(&st.upstream)
        .await
        .map_err(|e| format!("connect {}: {e}", st.upstream))?;
    tokio::io::copy_bidirectional(&mut tls, &mut registry)
        .await
        .map(|_| ())
        .map_err(|e| format!("copy: {e}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::{RegistryProxy, with_port};

    /// A plain HTTP/1.1 server answering every request `200 tags` once, closing after it.
    async fn upstream() -> String {
        let l = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]).into_owned();
                let line = req.lines().next().unwrap_or_default().to_owned();
                let body = format!("upstream saw: {line}");
                let _ = s
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .await;
            }
        });
        addr
    }

    /// Sends `CONNECT target` to the proxy; its status line and the open stream.
    async fn connect(proxy: &RegistryProxy, target: &str) -> (String, TcpStream) {
        let mut s = TcpStream::connect(proxy.url().trim_start_matches("http://"))
            .await
            .unwrap();
        s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut b).await.unwrap() == 0 {
                break;
            }
            head.push(b[0]);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        (head.lines().next().unwrap_or_default().to_owned(), s)
    }

    /// The tunnel a Go client opens: CONNECT to the name, TLS verified against the proxy's CA
    /// for that name, then HTTP/1.1 that reaches the plain-HTTP upstream unchanged.
    #[tokio::test]
    async fn a_connect_to_a_served_name_is_tls_for_that_name_to_the_registry() {
        let dir = tempfile::tempdir().unwrap();
        let up = upstream().await;
        let names = vec!["registry.example.local:5000".to_owned()];
        let proxy = RegistryProxy::start(&names, &up, dir.path()).await.unwrap();
        let (status, tcp) = connect(&proxy, "registry.example.local:5000").await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        let mut roots = rustls::RootCertStore::empty();
        let pem = std::fs::read(proxy.ca_file()).unwrap();
        for c in rustls_pemfile::certs(&mut &pem[..]) {
            roots.add(c.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("registry.example.local").unwrap();
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .expect("the name's certificate verifies against the proxy's CA");
        tls.write_all(b"GET /v2/ HTTP/1.1\r\nHost: registry.example.local:5000\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        tls.read_to_string(&mut answer).await.unwrap_or_default();
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(
            answer.ends_with("upstream saw: GET /v2/ HTTP/1.1"),
            "{answer}"
        );
        assert_eq!(
            proxy.log(),
            [format!("CONNECT registry.example.local:5000 -> {up}")]
        );
        let env = proxy.env();
        assert_eq!(env[0], ("HTTPS_PROXY".to_owned(), proxy.url().to_owned()));
        assert_eq!(env[2].1, proxy.ca_file().to_string_lossy());
    }

    /// Another name, or a plain request, is refused and logged: the proxy is no open relay.
    #[tokio::test]
    async fn other_names_and_methods_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let up = upstream().await;
        let names = vec!["registry.example.local:5000".to_owned()];
        let proxy = RegistryProxy::start(&names, &up, dir.path()).await.unwrap();
        let (status, _) = connect(&proxy, "ghcr.io:443").await;
        assert_eq!(status, "HTTP/1.1 403 Forbidden");
        let (status, _) = connect(&proxy, "registry.example.local:5001").await;
        assert_eq!(status, "HTTP/1.1 403 Forbidden");
        let mut s = TcpStream::connect(proxy.url().trim_start_matches("http://"))
            .await
            .unwrap();
        s.write_all(b"GET http://registry.example.local:5000/v2/ HTTP/1.1\r\nHost: registry.example.local:5000\r\n\r\n")
            .await
            .unwrap();
        let mut b = [0u8; 12];
        s.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"HTTP/1.1 405");
        assert_eq!(
            proxy.log(),
            [
                "CONNECT ghcr.io:443: 403",
                "CONNECT registry.example.local:5001: 403",
                "GET http://registry.example.local:5000/v2/: 405",
            ]
        );
    }

    #[test]
    fn a_registry_name_gets_the_port_an_image_reference_implies() {
        assert_eq!(
            with_port("registry.example.local:5000").unwrap(),
            "registry.example.local:5000"
        );
        assert_eq!(with_port("ghcr.io").unwrap(), "ghcr.io:443");
        assert!(with_port("registry.example.local:http").is_err());
        assert!(with_port(":5000").is_err());
        assert!(with_port("").is_err());
        assert!(with_port("ghcr.io/fluxcd").is_err());
    }
}
