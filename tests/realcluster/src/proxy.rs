//! A fault-injecting TLS proxy in front of the real kube-apiserver, for reliability tests and
//! request-count benchmarks.
//!
//! Clients talk HTTPS to `127.0.0.1:<port>` (the cluster CA's serving certificate, so the same
//! `certificate-authority` works) with no credentials; the proxy forwards each request as the
//! cluster admin through kube-rs `Client::send` and streams the answer back, watches included.
//! [`Fault`]s answer a matching request with a status (a `metav1.Status` body, as the apiserver
//! writes one), add latency, end a watch stream early, or close the connection. Every request
//! is logged ([`FaultProxy::requests`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use crate::Error;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type RespBody = UnsyncBoxBody<Bytes, BoxError>;

/// What a fault does to the request it matches.
#[derive(Debug, Clone)]
pub enum FaultAction {
    /// Answer with this HTTP status and a `metav1.Status` body; the apiserver never sees it.
    Status(u16),
    /// Wait this long, then forward.
    Latency(Duration),
    /// Forward, but end the response body after this long (a dropped watch).
    DropAfter(Duration),
    /// Close the connection without an answer.
    Close,
    /// Forward (the apiserver acts on it, e.g. commits a create), then hold the answer this
    /// long: a request the client never hears back about.
    HoldAnswer(Duration),
}

/// One fault: requests whose method equals `method` (if set) and whose path and query contain
/// `path_contains`; the `nth` such request (1-based; 0 = every one) gets `action`.
#[derive(Debug, Clone)]
pub struct Fault {
    /// HTTP method (`GET`, `PATCH`, ...), or any.
    pub method: Option<String>,
    /// Substring of `path?query`.
    pub path_contains: String,
    /// Which match fires (1-based), 0 for every match.
    pub nth: usize,
    /// The effect.
    pub action: FaultAction,
}

/// One logged request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// Method.
    pub method: String,
    /// `path?query`.
    pub path: String,
    /// Status sent back (0 when the connection was closed).
    pub status: u16,
}

#[derive(Default)]
struct State {
    faults: Vec<(Fault, usize)>,
    log: Vec<Logged>,
}

/// The running proxy; stops when dropped (its task is aborted).
pub struct FaultProxy {
    port: u16,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
    kubeconfig: std::path::PathBuf,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// Starts the proxy for `cluster` on the current tokio runtime and writes a kubeconfig for
    /// it (`<cluster dir>/proxy-<port>.kubeconfig`, no credentials).
    /// Errors: [`Error::Setup`] for the listener, the TLS config or the file.
    pub async fn start(cluster: &crate::Cluster) -> Result<FaultProxy, Error> {
        let client = cluster.client().await?;
        let dir = cluster.dir();
        let read = |n: &str| {
            std::fs::read(dir.join(n)).map_err(|e| Error::Setup(format!("proxy: read {n}: {e}")))
        };
        let certs: Vec<_> = rustls_pemfile::certs(&mut &read("apiserver.crt")?[..])
            .collect::<Result<_, _>>()
            .map_err(|e| Error::Setup(format!("proxy: cert: {e}")))?;
        let key = rustls_pemfile::private_key(&mut &read("apiserver.key")?[..])
            .map_err(|e| Error::Setup(format!("proxy: key: {e}")))?
            .ok_or_else(|| Error::Setup("proxy: no key".into()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Setup(format!("proxy: TLS: {e}")))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| Error::Setup(format!("proxy: TLS: {e}")))?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| Error::Setup(format!("proxy: bind: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::Setup(e.to_string()))?
            .port();
        let state: Arc<Mutex<State>> = Arc::default();
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let client = client.clone();
                let st = st.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = service_fn(move |req| handle(req, client.clone(), st.clone()));
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        let kubeconfig = dir.join(format!("proxy-{port}.kubeconfig"));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {}\nusers:\n- name: anonymous\n  user: {{}}\ncontexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: anonymous\n    namespace: {}\ncurrent-context: proxy\n",
            dir.join("ca.crt").display(),
            crate::FLUX_NS
        );
        std::fs::write(&kubeconfig, text)
            .map_err(|e| Error::Setup(format!("proxy kubeconfig: {e}")))?;
        Ok(FaultProxy {
            port,
            state,
            task,
            kubeconfig,
        })
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// A kubeconfig pointing at the proxy.
    pub fn kubeconfig(&self) -> &std::path::Path {
        &self.kubeconfig
    }

    /// Adds a fault; returns its index for [`FaultProxy::matched`].
    pub fn add(&self, fault: Fault) -> usize {
        let mut st = self.state.lock().unwrap();
        st.faults.push((fault, 0));
        st.faults.len() - 1
    }

    /// How many requests have matched fault `index` so far (counted when they arrive, before
    /// the fault acts: a held request counts while it is held).
    pub fn matched(&self, index: usize) -> usize {
        self.state
            .lock()
            .unwrap()
            .faults
            .get(index)
            .map_or(0, |(_, n)| *n)
    }

    /// Removes every fault.
    pub fn clear(&self) {
        self.state.lock().unwrap().faults.clear();
    }

    /// The requests so far, in order.
    pub fn requests(&self) -> Vec<Logged> {
        self.state.lock().unwrap().log.clone()
    }

    /// Forgets the logged requests.
    pub fn reset_requests(&self) {
        self.state.lock().unwrap().log.clear();
    }
}

fn status_body(code: u16) -> Bytes {
    let reason = match code {
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    };
    Bytes::from(
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("injected by the realcluster fault proxy: HTTP {code}"),
            "reason": reason, "code": code,
        })
        .to_string(),
    )
}

fn full(b: Bytes) -> RespBody {
    Full::new(b).map_err(|e| match e {}).boxed_unsync()
}

async fn handle(
    req: hyper::Request<hyper::body::Incoming>,
    client: kube::Client,
    state: Arc<Mutex<State>>,
) -> Result<hyper::Response<RespBody>, BoxError> {
    let method = req.method().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let action = {
        let mut st = state.lock().unwrap();
        let mut hit = None;
        for (f, count) in st.faults.iter_mut() {
            if f.method.as_deref().is_some_and(|m| m != method) || !path.contains(&f.path_contains)
            {
                continue;
            }
            *count += 1;
            if f.nth == 0 || f.nth == *count {
                hit = Some(f.action.clone());
                break;
            }
        }
        hit
    };
    let log = |status: u16| {
        state.lock().unwrap().log.push(Logged {
            method: method.clone(),
            path: path.clone(),
            status,
        })
    };
    let mut drop_after = None;
    let mut hold_answer = None;
    match action {
        Some(FaultAction::Status(code)) => {
            log(code);
            return Ok(hyper::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(full(status_body(code)))?);
        }
        Some(FaultAction::Close) => {
            log(0);
            return Err("closed by the realcluster fault proxy".into());
        }
        Some(FaultAction::Latency(d)) => tokio::time::sleep(d).await,
        Some(FaultAction::DropAfter(d)) => drop_after = Some(d),
        Some(FaultAction::HoldAnswer(d)) => hold_answer = Some(d),
        None => {}
    }
    let (parts, body) = req.into_parts();
    let bytes = body.collect().await?.to_bytes();
    let mut fwd = http::Request::builder().method(parts.method).uri(
        parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/"),
    );
    for (k, v) in &parts.headers {
        if k != http::header::AUTHORIZATION && k != http::header::HOST {
            fwd = fwd.header(k, v);
        }
    }
    let fwd = fwd.body(kube::client::Body::from(bytes.to_vec()))?;
    let resp = match client.send(fwd).await {
        Ok(r) => r,
        Err(e) => {
            log(502);
            return Ok(hyper::Response::builder()
                .status(502)
                .body(full(Bytes::from(e.to_string())))?);
        }
    };
    log(resp.status().as_u16());
    if let Some(d) = hold_answer {
        tokio::time::sleep(d).await;
    }
    let (parts, body) = resp.into_parts();
    let body: RespBody = match drop_after {
        None => body.map_err(|e| -> BoxError { Box::new(e) }).boxed_unsync(),
        Some(d) => {
            // Forward frames until `d` has passed, then end the stream.
            let (tx, rx) =
                tokio::sync::mpsc::channel::<Result<http_body::Frame<Bytes>, BoxError>>(16);
            tokio::spawn(async move {
                let mut body = std::pin::pin!(body);
                let deadline = tokio::time::sleep(d);
                tokio::pin!(deadline);
                loop {
                    tokio::select! {
                        _ = &mut deadline => break,
                        f = body.frame() => match f {
                            Some(Ok(f)) => if tx.send(Ok(f)).await.is_err() { break },
                            _ => break,
                        }
                    }
                }
            });
            http_body_util::StreamBody::new(tokio_stream_from(rx)).boxed_unsync()
        }
    };
    Ok(hyper::Response::from_parts(parts, body))
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
