//! The node agent's kubelet half for probe-image pods: the twin's pod runtime
//! ([`twin::podexec::PodExec`], one implementation) as an ordinary client of the real
//! kube-apiserver ([`KubeApi`], a [`PodApi`] over kube-rs), and the kubelet's container-log
//! endpoint served over TLS ([`LogServer`]) so `kubectl logs` and `pods/log` go through the
//! real apiserver.
//!
//! The log endpoint follows the kubelet's (k8s.io/kubernetes v1.36 pkg/kubelet/server/server.go
//! `getContainerLogs`, `GET /containerLogs/{namespace}/{pod}/{container}`), which kube-apiserver
//! calls for `pods/log` (pkg/registry/core/pod/strategy.go `LogLocation`: scheme https, host the
//! node address of the first `--kubelet-preferred-address-types` type it reports, port
//! `status.daemonEndpoints.kubeletEndpoint.Port`, query `follow`, `previous`, `timestamps`,
//! `sinceSeconds`, `sinceTime`, `tailLines`, `limitBytes`). Supported here: `follow`,
//! `tailLines`, `limitBytes` (what `kubectl logs [-f] [--tail] [--limit-bytes]` and the
//! plugins send; podresolve and cutover send `limitBytes`), and `previous` for a host-process
//! container that exited (the last terminated run's file; none yet: the kubelet's 400
//! `previous terminated container ... not found`; probe pods never restart, so it is always
//! that 400 for them); `timestamps`, `sinceSeconds` and `sinceTime` answer 400 ("not supported by
//! the realcluster node agent"), never a silently different log. Errors for a container with no
//! log use the kubelet's wording (pkg/kubelet/kubelet_pods.go `validateContainerLogStatus`).
//! Besides the probe pods' output, the Flux controllers the node agent runs as host processes
//! are served from their log files ([`LogStore::register_file`]). No authentication or
//! authorization of the caller (a kubelet asks the apiserver with SubjectAccessReviews); the
//! listener is on loopback. kube-apiserver runs without `--kubelet-certificate-authority`, so
//! it does not verify this server's certificate (the cluster CA's serving certificate for
//! 127.0.0.1).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use twin::flux::cluster::ObjKey;
use twin::podexec::{ApiEvent, PodApi};

use crate::Error;
use crate::node::NODE_NAME;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type RespBody = UnsyncBoxBody<Bytes, BoxError>;

/// `(namespace, pod, container)`.
type LogKey = (String, String, String);

#[derive(Default)]
struct LogBuf {
    data: Vec<u8>,
    closed: bool,
}

/// Container logs by `(namespace, pod, container)`, as the kubelet keeps them on its node:
/// in memory for the probe pods, a file for a host process. A pod's logs are dropped when the
/// pod is deleted.
#[derive(Clone, Default)]
pub struct LogStore {
    inner: Arc<Mutex<HashMap<LogKey, LogBuf>>>,
    files: Arc<Mutex<HashMap<LogKey, HostLog>>>,
    changed: Arc<tokio::sync::Notify>,
}

/// A host process's log files for one container: the latest container's (growing while it
/// runs, `exited` once it has ended) and, after an exit, the one `previous=true` serves.
#[derive(Clone, Default)]
struct HostLog {
    current: Option<std::path::PathBuf>,
    exited: bool,
    previous: Option<std::path::PathBuf>,
}

impl LogStore {
    /// Serves `path` (a host process's output, growing while it runs) as the log of
    /// `namespace/pod/container` until [`LogStore::forget_pod`]; a restarted container's
    /// new file replaces the old one, which stays the `previous` log if
    /// [`LogStore::container_exited`] was called.
    pub fn register_file(&self, ns: &str, pod: &str, container: &str, path: &std::path::Path) {
        let mut files = self.files.lock().unwrap();
        let e = files
            .entry((ns.into(), pod.into(), container.into()))
            .or_default();
        e.current = Some(path.to_path_buf());
        e.exited = false;
    }

    /// The host process of `namespace/pod/container` has exited: its file is complete (a
    /// follow ends) and, when `restarted` (the container will be restarted, so the kubelet
    /// reports this run as `lastState.terminated`), it is the log `previous=true` serves from
    /// now on, as the kubelet serves `lastState.terminated.containerID`'s log
    /// (pkg/kubelet/kubelet_pods.go `validateContainerLogStatus`: `previous` reads the last
    /// terminated container; without it a container waiting to restart (CrashLoopBackOff)
    /// also shows that one). A container not restarted (restartPolicy Never) has no previous
    /// log.
    pub fn container_exited(&self, ns: &str, pod: &str, container: &str, restarted: bool) {
        if let Some(e) =
            self.files
                .lock()
                .unwrap()
                .get_mut(&(ns.into(), pod.into(), container.into()))
        {
            e.exited = true;
            if restarted {
                e.previous = e.current.clone();
            }
        }
        self.changed.notify_waiters();
    }

    /// The previous (last terminated) container's log of `namespace/pod/container`, if one
    /// has exited since the pod started.
    pub fn read_previous(&self, ns: &str, pod: &str, container: &str) -> Option<Vec<u8>> {
        let path = self
            .files
            .lock()
            .unwrap()
            .get(&(ns.into(), pod.into(), container.into()))?
            .previous
            .clone()?;
        Some(std::fs::read(path).unwrap_or_default())
    }

    fn append(&self, ns: &str, pod: &str, container: &str, bytes: &[u8]) {
        self.inner
            .lock()
            .unwrap()
            .entry((ns.into(), pod.into(), container.into()))
            .or_default()
            .data
            .extend_from_slice(bytes);
        self.changed.notify_waiters();
    }

    fn close(&self, ns: &str, pod: &str, container: &str) {
        self.inner
            .lock()
            .unwrap()
            .entry((ns.into(), pod.into(), container.into()))
            .or_default()
            .closed = true;
        self.changed.notify_waiters();
    }

    /// Drops the logs of `namespace/pod` (the pod was deleted).
    pub fn forget_pod(&self, ns: &str, pod: &str) {
        self.inner
            .lock()
            .unwrap()
            .retain(|(n, p, _), _| !(n == ns && p == pod));
        self.files
            .lock()
            .unwrap()
            .retain(|(n, p, _), _| !(n == ns && p == pod));
        self.changed.notify_waiters();
    }

    /// The bytes from `offset` and whether the log is finished; `None` when the container
    /// has written nothing and not finished (not started), or its pod is gone. A host
    /// process's file is finished once the process has exited ([`LogStore::container_exited`])
    /// until its restart registers a new one.
    pub fn read(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        offset: usize,
    ) -> Option<(Vec<u8>, bool)> {
        let key: LogKey = (ns.into(), pod.into(), container.into());
        if let Some(b) = self.inner.lock().unwrap().get(&key) {
            return Some((b.data.get(offset..).unwrap_or_default().to_vec(), b.closed));
        }
        let log = self.files.lock().unwrap().get(&key).cloned()?;
        let data = std::fs::read(log.current?).unwrap_or_default();
        Some((data.get(offset..).unwrap_or_default().to_vec(), log.exited))
    }
}

/// [`PodApi`] over kube-rs against the real apiserver, for the pods bound to [`NODE_NAME`].
#[derive(Clone)]
pub struct KubeApi {
    client: kube::Client,
    logs: LogStore,
}

impl KubeApi {
    /// A client of `client`'s apiserver writing container logs into `logs`.
    pub fn new(client: kube::Client, logs: LogStore) -> KubeApi {
        KubeApi { client, logs }
    }
}

/// The REST path of `key` (core `v1` under `/api`, groups under `/apis`); the resource is the
/// lower-cased kind plus `s`, right for the kinds the runtime asks for (Pod, Secret, Job,
/// Service, ConfigMap, Node).
fn path_of(key: &ObjKey) -> String {
    let base = if key.api_version.contains('/') {
        format!("/apis/{}", key.api_version)
    } else {
        format!("/api/{}", key.api_version)
    };
    let plural = format!("{}s", key.kind.to_ascii_lowercase());
    if key.namespace.is_empty() {
        format!("{base}/{plural}/{}", key.name)
    } else {
        format!("{base}/namespaces/{}/{plural}/{}", key.namespace, key.name)
    }
}

impl PodApi for KubeApi {
    fn get(&self, key: ObjKey) -> BoxFuture<'static, Option<Value>> {
        let client = self.client.clone();
        Box::pin(async move {
            let req = http::Request::get(path_of(&key)).body(Vec::new()).ok()?;
            client.request::<Value>(req).await.ok()
        })
    }

    fn services(&self) -> BoxFuture<'static, Vec<Value>> {
        let client = self.client.clone();
        Box::pin(async move {
            let Ok(req) = http::Request::get("/api/v1/services").body(Vec::new()) else {
                return Vec::new();
            };
            let list: Value = client.request(req).await.unwrap_or_default();
            list["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|mut s| {
                    s["apiVersion"] = json!("v1");
                    s["kind"] = json!("Service");
                    s
                })
                .collect()
        })
    }

    fn patch_status(&self, key: ObjKey, patch: Value) -> BoxFuture<'static, ()> {
        let client = self.client.clone();
        Box::pin(async move {
            let req =
                http::Request::patch(format!("{}/status?fieldManager=kubelet", path_of(&key)))
                    .header("Content-Type", "application/merge-patch+json")
                    .body(serde_json::to_vec(&patch).unwrap_or_default());
            if let Ok(req) = req
                && let Err(e) = client.request::<Value>(req).await
                && std::env::var_os("REALCLUSTER_DEBUG").is_some()
            {
                eprintln!("realcluster kubelet: status of {key:?}: {e}");
            }
        })
    }

    fn event(
        &self,
        involved: Value,
        event_type: &'static str,
        reason: &'static str,
        message: String,
    ) -> BoxFuture<'static, ()> {
        let client = self.client.clone();
        Box::pin(async move {
            let ns = involved["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_owned();
            let now = jiff::Timestamp::now()
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string();
            let ev = json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": format!("{}.", involved["metadata"]["name"].as_str().unwrap_or_default()), "namespace": ns},
                "involvedObject": {"apiVersion": involved["apiVersion"], "kind": involved["kind"], "namespace": ns,
                    "name": involved["metadata"]["name"], "uid": involved["metadata"]["uid"]},
                "reason": reason, "message": message, "type": event_type,
                "source": {"component": "kubelet", "host": NODE_NAME},
                "firstTimestamp": now, "lastTimestamp": now, "count": 1,
                "reportingComponent": "kubelet", "reportingInstance": NODE_NAME,
            });
            let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client, &ns);
            if let Ok(ev) = serde_json::from_value(ev) {
                let _ = events.create(&Default::default(), &ev).await;
            }
        })
    }

    fn append_log(&self, namespace: &str, pod: &str, container: &str, bytes: &[u8]) {
        self.logs.append(namespace, pod, container, bytes);
    }

    fn close_log(&self, namespace: &str, pod: &str, container: &str) {
        self.logs.close(namespace, pod, container);
    }

    fn watch(
        &self,
    ) -> BoxFuture<'static, Result<tokio::sync::mpsc::UnboundedReceiver<ApiEvent>, String>> {
        let client = self.client.clone();
        let logs = self.logs.clone();
        Box::pin(async move {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            // Pods bound to this node (a kubelet's watch: fieldSelector spec.nodeName).
            let pods: Api<Pod> = Api::all(client.clone());
            let cfg = watcher::Config::default().fields(&format!("spec.nodeName={NODE_NAME}"));
            let t = tx.clone();
            tokio::spawn(async move {
                let stream = watcher(pods, cfg);
                futures::pin_mut!(stream);
                loop {
                    let ev = tokio::select! {
                        ev = stream.next() => ev,
                        _ = t.closed() => None,
                    };
                    let Some(ev) = ev else { break };
                    let ev = match ev {
                        Ok(ev) => ev,
                        Err(e) => {
                            if std::env::var_os("REALCLUSTER_DEBUG").is_some() {
                                eprintln!("realcluster kubelet: pod watch: {e}");
                            }
                            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                            continue;
                        }
                    };
                    if std::env::var_os("REALCLUSTER_DEBUG").is_some() {
                        eprintln!("realcluster kubelet: pod event {ev:?}");
                    }
                    let e = match ev {
                        watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                            ApiEvent::Pod(serde_json::to_value(&p).unwrap_or_default())
                        }
                        watcher::Event::Delete(p) => {
                            let v = serde_json::to_value(&p).unwrap_or_default();
                            logs.forget_pod(
                                v["metadata"]["namespace"].as_str().unwrap_or_default(),
                                v["metadata"]["name"].as_str().unwrap_or_default(),
                            );
                            ApiEvent::PodDeleted(v)
                        }
                        watcher::Event::Init | watcher::Event::InitDone => continue,
                    };
                    if t.send(e).is_err() {
                        break;
                    }
                }
            });
            // The DNS sources: every Service, and kube-system/coredns.
            let services: Api<Service> = Api::all(client.clone());
            let coredns: Api<ConfigMap> = Api::namespaced(client, "kube-system");
            let s1 = watcher(services, watcher::Config::default()).map(|e| e.is_ok());
            let s2 = watcher(
                coredns,
                watcher::Config::default().fields("metadata.name=coredns"),
            )
            .map(|e| e.is_ok());
            let t = tx.clone();
            tokio::spawn(async move {
                let stream = futures::stream::select(s1, s2);
                futures::pin_mut!(stream);
                loop {
                    let ev = tokio::select! {
                        ev = stream.next() => ev,
                        _ = t.closed() => None,
                    };
                    match ev {
                        None => break,
                        Some(true) => {
                            if t.send(ApiEvent::DnsSourceChanged).is_err() {
                                break;
                            }
                        }
                        Some(false) => {
                            tokio::time::sleep(std::time::Duration::from_millis(200)).await
                        }
                    }
                }
            });
            Ok(rx)
        })
    }
}

/// The kubelet's HTTPS endpoint for container logs, on `127.0.0.1:<port>` (port from the OS).
/// Dropping it stops the listener.
pub struct LogServer {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LogServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LogServer {
    /// Serves `logs` with the PEM certificate chain and key in `cert`/`key`.
    /// Errors: [`Error::Setup`] for the files, the TLS config or the listener.
    pub async fn start(
        logs: LogStore,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<LogServer, Error> {
        let read = |p: &std::path::Path| {
            std::fs::read(p)
                .map_err(|e| Error::Setup(format!("kubelet server: {}: {e}", p.display())))
        };
        let certs: Vec<_> = rustls_pemfile::certs(&mut &read(cert)?[..])
            .collect::<Result<_, _>>()
            .map_err(|e| Error::Setup(format!("kubelet server: cert: {e}")))?;
        let key = rustls_pemfile::private_key(&mut &read(key)?[..])
            .map_err(|e| Error::Setup(format!("kubelet server: key: {e}")))?
            .ok_or_else(|| Error::Setup("kubelet server: no key".into()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Setup(format!("kubelet server: TLS: {e}")))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| Error::Setup(format!("kubelet server: TLS: {e}")))?;
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| Error::Setup(format!("kubelet server: bind: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::Setup(e.to_string()))?
            .port();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let logs = logs.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = service_fn(move |req| serve(req, logs.clone()));
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        Ok(LogServer { port, task })
    }

    /// The port (the Node's `status.daemonEndpoints.kubeletEndpoint.Port`).
    pub fn port(&self) -> u16 {
        self.port
    }
}

fn text(code: u16, body: String) -> hyper::Response<RespBody> {
    let mut r = hyper::Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *r.status_mut() = hyper::StatusCode::from_u16(code).unwrap_or_default();
    r.headers_mut().insert(
        "Content-Type",
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The last `n` lines of `data` (a final line without newline counts).
fn tail_lines(data: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &[];
    }
    let mut seen = 0;
    let end = if data.ends_with(b"\n") {
        data.len() - 1
    } else {
        data.len()
    };
    for i in (0..end).rev() {
        if data[i] == b'\n' {
            seen += 1;
            if seen == n {
                return &data[i + 1..];
            }
        }
    }
    data
}

async fn serve(
    req: hyper::Request<hyper::body::Incoming>,
    logs: LogStore,
) -> Result<hyper::Response<RespBody>, std::convert::Infallible> {
    let path = req.uri().path().to_owned();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let [kind, ns, pod, container] = parts[..] else {
        return Ok(text(404, format!("404 page not found: {path}\n")));
    };
    if kind != "containerLogs" || req.method() != hyper::Method::GET {
        return Ok(text(404, format!("404 page not found: {path}\n")));
    }
    let q: HashMap<String, String> = req
        .uri()
        .query()
        .map(|q| {
            url_pairs(q)
                .into_iter()
                .collect::<HashMap<String, String>>()
        })
        .unwrap_or_default();
    for unsupported in ["timestamps", "sinceSeconds", "sinceTime"] {
        if q.get(unsupported).is_some_and(|v| v != "false") {
            return Ok(text(
                400,
                format!("{unsupported} is not supported by the realcluster node agent\n"),
            ));
        }
    }
    let previous = q.get("previous").is_some_and(|v| v == "true");
    let num = |k: &str| -> Result<Option<usize>, String> {
        q.get(k)
            .map(|v| {
                v.parse::<usize>()
                    .map_err(|_| format!("{k}: invalid value {v:?}"))
            })
            .transpose()
    };
    let (limit, tail) = match (num("limitBytes"), num("tailLines")) {
        (Ok(l), Ok(t)) => (l, t),
        (Err(e), _) | (_, Err(e)) => return Ok(text(400, format!("{e}\n"))),
    };
    let follow = q.get("follow").is_some_and(|v| v == "true");
    if previous {
        // kubelet validateContainerLogStatus: only a container that has terminated since the
        // pod started has a previous log; it is complete, so `follow` ends with it.
        let Some(data) = logs.read_previous(ns, pod, container) else {
            return Ok(text(
                400,
                format!(
                    "previous terminated container \"{container}\" in pod \"{pod}\" not found\n"
                ),
            ));
        };
        let mut first = match tail {
            Some(n) => tail_lines(&data, n).to_vec(),
            None => data,
        };
        if let Some(l) = limit {
            first.truncate(l);
        }
        let mut r = text(200, String::new());
        *r.body_mut() = Full::new(Bytes::from(first))
            .map_err(|never| match never {})
            .boxed_unsync();
        return Ok(r);
    }
    let Some((data, closed)) = logs.read(ns, pod, container, 0) else {
        // kubelet: the container has not started (or is unknown here).
        return Ok(text(
            400,
            format!(
                "container \"{container}\" in pod \"{pod}\" is waiting to start: ContainerCreating\n"
            ),
        ));
    };
    let first = match tail {
        Some(n) => tail_lines(&data, n).to_vec(),
        None => data.clone(),
    };
    let mut first = first;
    if let Some(l) = limit {
        first.truncate(l);
    }
    if !follow || closed || limit.is_some_and(|l| first.len() >= l) {
        let mut r = text(200, String::new());
        *r.body_mut() = Full::new(Bytes::from(first))
            .map_err(|never| match never {})
            .boxed_unsync();
        return Ok(r);
    }
    // follow: stream what arrives until the container's log is finished (or limitBytes).
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<hyper::body::Frame<Bytes>, BoxError>>(16);
    let (ns, pod, container) = (ns.to_owned(), pod.to_owned(), container.to_owned());
    tokio::spawn(async move {
        let mut sent = first.len();
        let mut offset = data.len();
        if tx
            .send(Ok(hyper::body::Frame::data(Bytes::from(first))))
            .await
            .is_err()
        {
            return;
        }
        loop {
            let notified = logs.changed.notified();
            let Some((more, closed)) = logs.read(&ns, &pod, &container, offset) else {
                return;
            };
            offset += more.len();
            let mut more = more;
            if let Some(l) = limit {
                more.truncate(l.saturating_sub(sent));
            }
            sent += more.len();
            if !more.is_empty()
                && tx
                    .send(Ok(hyper::body::Frame::data(Bytes::from(more))))
                    .await
                    .is_err()
            {
                return;
            }
            if closed || limit.is_some_and(|l| sent >= l) {
                return;
            }
            // Probe logs notify; a host process's file is re-read every 500 ms.
            let _ = tokio::time::timeout(std::time::Duration::from_millis(500), notified).await;
        }
    });
    let mut rx = rx;
    let body =
        http_body_util::StreamBody::new(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
            .boxed_unsync();
    let mut r = text(200, String::new());
    *r.body_mut() = body;
    Ok(r)
}

/// `k=v` pairs of a query string (the values here are numbers and booleans: no
/// percent-decoding needed).
fn url_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (p.to_owned(), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_lines_counts_a_last_line_without_newline() {
        assert_eq!(tail_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(tail_lines(b"a\nb\nc", 2), b"b\nc");
        assert_eq!(tail_lines(b"a\nb\n", 5), b"a\nb\n");
        assert_eq!(tail_lines(b"a\nb\n", 0), b"");
    }

    #[test]
    fn rest_paths_of_core_and_group_kinds() {
        assert_eq!(
            path_of(&ObjKey::new("v1", "Secret", "ns", "s")),
            "/api/v1/namespaces/ns/secrets/s"
        );
        assert_eq!(
            path_of(&ObjKey::new("batch/v1", "Job", "ns", "j")),
            "/apis/batch/v1/namespaces/ns/jobs/j"
        );
        assert_eq!(
            path_of(&ObjKey::new("v1", "Node", "", "n")),
            "/api/v1/nodes/n"
        );
    }
}
