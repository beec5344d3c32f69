//! The two HTTP endpoints, as the Flux controllers have them: the metrics address serves
//! `/metrics` (Prometheus text) and `/diagnoses` (the live `kubectl unstick --all -o json`
//! document, `application/json`); the health address serves `/healthz` (200 while the
//! process runs) and `/readyz` (200 once every watch has had its first list and a diagnosis
//! ran, else 503).
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::run::Shutdown;
use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// Shared with the handlers.
#[derive(Clone)]
pub struct State {
    /// The metrics.
    pub metrics: Metrics,
    /// The latest diagnosis document (JSON), empty before the first.
    pub diagnoses: Arc<RwLock<Bytes>>,
    /// Ready: every watch listed and one diagnosis done.
    pub ready: Arc<AtomicBool>,
}

fn reply(code: StatusCode, ctype: &str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = code;
    if let Ok(v) = header::HeaderValue::from_str(ctype) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

fn route(state: &State, metrics_server: bool, path: &str) -> Response<Full<Bytes>> {
    let text = "text/plain; charset=utf-8";
    match (metrics_server, path) {
        (true, "/metrics") => reply(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Bytes::from(state.metrics.encode()),
        ),
        (true, "/diagnoses") => {
            let doc = state
                .diagnoses
                .read()
                .map(|d| d.clone())
                .unwrap_or_default();
            if doc.is_empty() {
                reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    text,
                    Bytes::from_static(b"no diagnosis yet: the watches are listing\n"),
                )
            } else {
                reply(StatusCode::OK, "application/json", doc)
            }
        }
        (false, "/healthz") => reply(StatusCode::OK, text, Bytes::from_static(b"ok\n")),
        (false, "/readyz") if state.ready.load(Ordering::Relaxed) => {
            reply(StatusCode::OK, text, Bytes::from_static(b"ok\n"))
        }
        (false, "/readyz") => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            text,
            Bytes::from_static(b"not ready: the watches are listing\n"),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            text,
            Bytes::from_static(b"not found\n"),
        ),
    }
}

/// Binds `addr` now (errors name it: in use, not allowed) and serves in a task until
/// `shutdown` fires. `metrics_server`: the metrics endpoints, else the health ones.
pub async fn serve(
    addr: SocketAddr,
    state: State,
    metrics_server: bool,
    shutdown: Shutdown,
) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let bound = listener.local_addr().unwrap_or(addr);
    tokio::spawn(async move {
        loop {
            let conn = tokio::select! {
                c = listener.accept() => c,
                _ = shutdown.wait() => break,
            };
            let Ok((stream, _)) = conn else { continue };
            let state = state.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let r = route(&state, metrics_server, req.uri().path());
                    async move { Ok::<_, Infallible>(r) }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(bound)
}
