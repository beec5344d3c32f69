//! `wait::wait_for`, `cli::ClusterArgs::connect` and API error mapping against a local HTTP
//! API endpoint (127.0.0.1, ephemeral port) that speaks the kube-apiserver list/watch wire
//! format: a JSON list with `metadata.resourceVersion`, then a chunked watch stream of
//! `{"type": ..., "object": ...}` lines. No sleeps: the test pushes watch events through a
//! channel and deadlines are generous except where a timeout is the point.

use cluster_loop::cli::ClusterArgs;
use cluster_loop::flux::{FluxObject, Kustomization};
use cluster_loop::wait::{Progress, wait_for};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A pseudo event: the server ends the current watch response.
const CLOSE: &str = "CLOSE";

/// What the fake API server answers to a non-watch request.
#[derive(Clone)]
struct Plan {
    /// Successive list answers (status, body); the last one repeats.
    lists: Vec<(u16, Value)>,
}

struct Server {
    port: u16,
    events: mpsc::UnboundedSender<String>,
    requests: Arc<Mutex<Vec<String>>>,
}

async fn read_head(sock: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match sock.read(&mut byte).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => buf.push(byte[0]),
        }
        if buf.ends_with(b"\r\n\r\n") {
            return Some(String::from_utf8_lossy(&buf).into_owned());
        }
    }
}

fn status_reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        _ => "Error",
    }
}

async fn start(plan: Plan) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let list_count = Arc::new(Mutex::new(0usize));
    let reqs = requests.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let plan = plan.clone();
            let rx = rx.clone();
            let reqs = reqs.clone();
            let list_count = list_count.clone();
            tokio::spawn(async move {
                while let Some(head) = read_head(&mut sock).await {
                    let line = head.lines().next().unwrap_or("").to_string();
                    reqs.lock().unwrap().push(line.clone());
                    if line.contains("watch=true") {
                        let hdr = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
                        if sock.write_all(hdr.as_bytes()).await.is_err() {
                            return;
                        }
                        let mut rx = rx.lock().await;
                        while let Some(ev) = rx.recv().await {
                            if ev == CLOSE {
                                // End this watch response cleanly, as the apiserver does when a
                                // watch's timeoutSeconds expires or it restarts.
                                let _ = sock.write_all(b"0\r\n\r\n").await;
                                return;
                            }
                            let data = format!("{ev}\n");
                            let chunk = format!("{:x}\r\n{data}\r\n", data.len());
                            if sock.write_all(chunk.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                        let _ = sock.write_all(b"0\r\n\r\n").await;
                        return;
                    }
                    let (code, body) = {
                        let mut n = list_count.lock().unwrap();
                        let i = (*n).min(plan.lists.len() - 1);
                        *n += 1;
                        plan.lists[i].clone()
                    };
                    let body = body.to_string();
                    let resp = format!(
                        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        status_reason(code),
                        body.len()
                    );
                    if sock.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Server {
        port,
        events: tx,
        requests,
    }
}

fn kubeconfig(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let p = dir.join("kubeconfig");
    std::fs::write(
        &p,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: t\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\ncontexts:\n- name: t\n  context: {{cluster: t, user: u, namespace: apps}}\nusers:\n- name: u\n  user: {{token: test-token}}\n"
        ),
    )
    .unwrap();
    p
}

fn ks(generation: i64, observed: i64, ready: &str, rv: &str) -> Value {
    json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system", "generation": generation,
                     "resourceVersion": rv},
        "spec": {"interval": "10m", "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": {"observedGeneration": observed, "conditions": [
            {"type": "Ready", "status": ready, "reason": "Progressing", "message": "Reconciliation in progress"}]}
    })
}

fn list(items: Vec<Value>, rv: &str) -> Value {
    json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "KustomizationList",
           "metadata": {"resourceVersion": rv}, "items": items})
}

fn status(code: u16, reason: &str, message: &str, name: Option<&str>) -> Value {
    let mut v = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "message": message, "reason": reason, "code": code});
    if let Some(n) = name {
        v["details"] =
            json!({"name": n, "group": "kustomize.toolkit.fluxcd.io", "kind": "kustomizations"});
    }
    v
}

async fn connect(
    dir: &tempfile::TempDir,
    port: u16,
) -> (cluster_loop::cli::Connection, kube::Api<Kustomization>) {
    let args = ClusterArgs {
        kubeconfig: Some(kubeconfig(dir.path(), port)),
        ..Default::default()
    };
    let conn = args.connect().await.unwrap();
    assert_eq!(conn.namespace, "apps", "context namespace");
    assert_eq!(conn.flux_namespace(), "flux-system");
    let api = kube::Api::<Kustomization>::namespaced(conn.client.clone(), "flux-system");
    (conn, api)
}

fn ready_and_observed(k: Option<&Kustomization>) -> bool {
    k.is_some_and(|k| k.generation_observed() && k.ready().is_some_and(|c| c.is_true()))
}

fn far() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(120)
}

#[tokio::test]
async fn satisfied_by_a_watch_event() {
    let srv = start(Plan {
        lists: vec![(200, list(vec![ks(2, 1, "Unknown", "10")], "10"))],
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (conn, api) = connect(&dir, srv.port).await;
    // Not yet: generation observed but not Ready.
    srv.events
        .send(json!({"type": "MODIFIED", "object": ks(2, 2, "Unknown", "11")}).to_string())
        .unwrap();
    srv.events
        .send(json!({"type": "MODIFIED", "object": ks(2, 2, "True", "12")}).to_string())
        .unwrap();
    let out = wait_for(
        &api,
        "apps",
        ready_and_observed,
        far(),
        &Progress::hidden(),
        conn.ctx(),
    )
    .await
    .unwrap();
    assert!(out.satisfied && !out.timed_out);
    let k = out.object.unwrap();
    assert_eq!(k.metadata.resource_version.as_deref(), Some("12"));
    let reqs = srv.requests.lock().unwrap().clone();
    assert!(
        reqs[0].starts_with(
            "GET /apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations?"
        ),
        "{reqs:?}"
    );
    assert!(
        reqs[0].contains("fieldSelector=metadata.name%3Dapps"),
        "{reqs:?}"
    );
    assert!(
        reqs.iter()
            .any(|r| r.contains("watch=true") && r.contains("resourceVersion=10")),
        "{reqs:?}"
    );
    // exactly one list: no polling
    assert_eq!(
        reqs.iter().filter(|r| !r.contains("watch=true")).count(),
        1,
        "{reqs:?}"
    );
}

#[tokio::test]
async fn already_true_needs_no_watch_event() {
    let srv = start(Plan {
        lists: vec![(200, list(vec![ks(1, 1, "True", "5")], "5"))],
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (conn, api) = connect(&dir, srv.port).await;
    let out = wait_for(
        &api,
        "apps",
        ready_and_observed,
        far(),
        &Progress::hidden(),
        conn.ctx(),
    )
    .await
    .unwrap();
    assert!(out.satisfied);
}

#[tokio::test]
async fn deadline_returns_last_object() {
    let srv = start(Plan {
        lists: vec![(200, list(vec![ks(2, 1, "Unknown", "10")], "10"))],
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (conn, api) = connect(&dir, srv.port).await;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(1500);
    let out = wait_for(
        &api,
        "apps",
        ready_and_observed,
        deadline,
        &Progress::hidden(),
        conn.ctx(),
    )
    .await
    .unwrap();
    assert!(out.timed_out && !out.satisfied);
    let k = out.object.expect("the listed object is returned");
    assert_eq!(k.status.observed_generation, Some(1));
    drop(srv.events);
}

#[tokio::test]
async fn deletion_is_seen_as_none() {
    let srv = start(Plan {
        lists: vec![(200, list(vec![ks(1, 1, "True", "7")], "7"))],
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (conn, api) = connect(&dir, srv.port).await;
    srv.events
        .send(json!({"type": "DELETED", "object": ks(1, 1, "True", "8")}).to_string())
        .unwrap();
    let out = wait_for(
        &api,
        "apps",
        |k| k.is_none(),
        far(),
        &Progress::hidden(),
        conn.ctx(),
    )
    .await
    .unwrap();
    assert!(out.satisfied && out.object.is_none());
}

#[tokio::test]
async fn gone_watch_relists() {
    // The watch answers 410 Gone (expired resourceVersion): the watcher lists again.
    let srv = start(Plan {
        lists: vec![
            (200, list(vec![ks(2, 1, "Unknown", "10")], "10")),
            (200, list(vec![ks(2, 2, "True", "20")], "20")),
        ],
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (conn, api) = connect(&dir, srv.port).await;
    srv.events
        .send(
            json!({"type": "ERROR", "object": status(410, "Expired", "too old resource version: 10 (15)", None)})
                .to_string(),
        )
        .unwrap();
    let out = wait_for(
        &api,
        "apps",
        ready_and_observed,
        far(),
        &Progress::hidden(),
        conn.ctx(),
    )
    .await
    .unwrap();
    assert!(out.satisfied);
    assert_eq!(
        out.object.unwrap().metadata.resource_version.as_deref(),
        Some("20")
    );
}

async fn first_error(plan: Plan) -> (cluster_loop::Error, u16) {
    let srv = start(plan).await;
    let dir = tempfile::tempdir().unwrap();
    let (conn, api) = connect(&dir, srv.port).await;
    let e = wait_for(
        &api,
        "apps",
        ready_and_observed,
        far(),
        &Progress::hidden(),
        conn.ctx(),
    )
    .await
    .unwrap_err();
    (e, srv.port)
}

#[tokio::test]
async fn forbidden_names_verb_resource_namespace() {
    let msg = r#"kustomizations.kustomize.toolkit.fluxcd.io is forbidden: User "dev" cannot list resource "kustomizations" in API group "kustomize.toolkit.fluxcd.io" in the namespace "flux-system""#;
    let (e, _) = first_error(Plan {
        lists: vec![(403, status(403, "Forbidden", msg, None))],
    })
    .await;
    assert_eq!(e.exit_code(), 3);
    let m = e.to_string();
    assert!(m.starts_with("RBAC denied: cannot list kustomizations.kustomize.toolkit.fluxcd.io in namespace \"flux-system\""), "{m}");
    assert!(
        m.ends_with(
            "kubectl auth can-i list kustomizations.kustomize.toolkit.fluxcd.io -n flux-system"
        ),
        "{m}"
    );
}

#[tokio::test]
async fn unauthorized_names_server() {
    let (e, port) = first_error(Plan {
        lists: vec![(401, status(401, "Unauthorized", "Unauthorized", None))],
    })
    .await;
    assert_eq!(
        e.to_string().split(" (401").next().unwrap(),
        format!("credentials rejected by http://127.0.0.1:{port}")
    );
    assert_eq!(e.exit_code(), 3);
}

#[tokio::test]
async fn missing_crd_is_named() {
    let (e, _) = first_error(Plan {
        lists: vec![(
            404,
            status(
                404,
                "NotFound",
                "the server could not find the requested resource",
                None,
            ),
        )],
    })
    .await;
    let m = e.to_string();
    assert!(
        m.starts_with("Flux CRD not installed or API version not served (kustomize.toolkit.fluxcd.io/v1 kustomizations)"),
        "{m}"
    );
}

#[tokio::test]
async fn connection_refused_names_server() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let (conn, api) = connect(&dir, port).await;
    assert_eq!(conn.server, format!("http://127.0.0.1:{port}/"));
    let e = wait_for(
        &api,
        "apps",
        ready_and_observed,
        far(),
        &Progress::hidden(),
        conn.ctx(),
    )
    .await
    .unwrap_err();
    let m = e.to_string();
    assert!(
        m.starts_with(&format!("connection refused by http://127.0.0.1:{port}")),
        "{m}"
    );
    assert_eq!(e.exit_code(), 3);
}

fn group_list(versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("kustomize.toolkit.fluxcd.io/{v}"), "version": v}))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}},
        {"name": "kustomize.toolkit.fluxcd.io", "versions": vs.clone(), "preferredVersion": vs[0].clone()}
    ]})
}

#[tokio::test]
async fn served_version_prefers_v1_then_older() {
    use cluster_loop::flux::served_version;
    use cluster_loop::refs::Kind;
    for (served, want) in [
        (vec!["v1", "v1beta2"], Some("v1")),
        (vec!["v1beta2", "v1beta1"], Some("v1beta2")),
        (vec!["v1beta1"], None),
    ] {
        let srv = start(Plan {
            lists: vec![(200, group_list(&served))],
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        let (conn, _) = connect(&dir, srv.port).await;
        let got = served_version(&conn.client, &conn.server, Kind::Kustomization)
            .await
            .unwrap();
        assert_eq!(got.as_deref(), want, "{served:?}");
        assert_eq!(srv.requests.lock().unwrap()[0], "GET /apis HTTP/1.1");
    }
    // Flux not installed at all: no group.
    let srv = start(Plan {
        lists: vec![(
            200,
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}),
        )],
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (conn, _) = connect(&dir, srv.port).await;
    assert_eq!(
        served_version(&conn.client, &conn.server, Kind::GitRepository)
            .await
            .unwrap(),
        None
    );
    // Core kinds need no discovery.
    assert_eq!(
        served_version(&conn.client, &conn.server, Kind::Pod)
            .await
            .unwrap()
            .as_deref(),
        Some("v1")
    );
}

#[tokio::test]
async fn watch_ended_by_server_resumes_from_last_resource_version() {
    let srv = start(Plan {
        lists: vec![(200, list(vec![ks(2, 1, "Unknown", "10")], "10"))],
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (conn, api) = connect(&dir, srv.port).await;
    srv.events
        .send(json!({"type": "MODIFIED", "object": ks(2, 2, "Unknown", "11")}).to_string())
        .unwrap();
    srv.events.send(CLOSE.to_string()).unwrap();
    srv.events
        .send(json!({"type": "MODIFIED", "object": ks(2, 2, "True", "12")}).to_string())
        .unwrap();
    let out = wait_for(
        &api,
        "apps",
        ready_and_observed,
        far(),
        &Progress::hidden(),
        conn.ctx(),
    )
    .await
    .unwrap();
    assert!(out.satisfied);
    let reqs = srv.requests.lock().unwrap().clone();
    let watches: Vec<&String> = reqs.iter().filter(|r| r.contains("watch=true")).collect();
    assert_eq!(watches.len(), 2, "{reqs:?}");
    assert!(watches[1].contains("resourceVersion=11"), "{reqs:?}");
    assert_eq!(reqs.len() - watches.len(), 1, "no re-list: {reqs:?}");
}

#[tokio::test]
async fn request_timeout_on_an_idle_watch_is_survived_until_the_deadline() {
    // --request-timeout 1s: an idle watch read times out; the wait re-watches and ends at its
    // own deadline with timed_out, not with an error.
    let srv = start(Plan {
        lists: vec![(200, list(vec![ks(2, 1, "Unknown", "10")], "10"))],
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let args = ClusterArgs {
        kubeconfig: Some(kubeconfig(dir.path(), srv.port)),
        request_timeout: cluster_loop::cli::parse_request_timeout("1s").unwrap(),
        ..Default::default()
    };
    let conn = args.connect().await.unwrap();
    assert_eq!(conn.request_timeout, Some(Duration::from_secs(1)));
    let api = kube::Api::<Kustomization>::namespaced(conn.client.clone(), "flux-system");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
    let out = wait_for(
        &api,
        "apps",
        ready_and_observed,
        deadline,
        &Progress::hidden(),
        conn.ctx(),
    )
    .await
    .unwrap();
    assert!(out.timed_out && !out.satisfied);
    assert!(out.object.is_some());
    let reqs = srv.requests.lock().unwrap().clone();
    assert!(
        reqs.iter().filter(|r| r.contains("watch=true")).count() >= 2,
        "the idle watch was cut by the 1s read timeout and resumed: {reqs:?}"
    );
    drop(srv.events);
}
