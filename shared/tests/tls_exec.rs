//! A real HTTPS API endpoint on 127.0.0.1 (self-signed certificate from rcgen, served with
//! rustls): the kubeconfig's certificate-authority-data is honoured, a missing CA gives a TLS
//! error naming the server, and exec credential plugins (client.authentication.k8s.io/v1)
//! supply the bearer token; a failing plugin gives an actionable error.

use base64::Engine;
use cluster_loop::cli::ClusterArgs;
use cluster_loop::error::KubeResultExt;
use cluster_loop::flux::Kustomization;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

struct Tls {
    port: u16,
    ca_pem: String,
    auth_headers: Arc<Mutex<Vec<String>>>,
}

const TOKEN: &str = "exec-token-123";

async fn start_tls() -> Tls {
    let ck =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap();
    let ca_pem = ck.cert.pem();
    let cert_der = ck.cert.der().clone();
    let key_der =
        rustls::pki_types::PrivateKeyDer::try_from(ck.signing_key.serialize_der()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert_der], key_der)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let auth_headers = Arc::new(Mutex::new(Vec::new()));
    let seen = auth_headers.clone();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(sock).await else {
                    return;
                };
                loop {
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match tls.read(&mut b).await {
                            Ok(1) => head.push(b[0]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&head).to_string();
                    let auth = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("authorization")
                                .then(|| v.trim().to_string())
                        })
                        .unwrap_or_default();
                    seen.lock().unwrap().push(auth.clone());
                    let (code, body) = if auth == format!("Bearer {TOKEN}") {
                        (
                            200,
                            json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                                     "metadata": {"name": "apps", "namespace": "flux-system"},
                                     "spec": {"interval": "10m"}}),
                        )
                    } else {
                        (
                            401,
                            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                     "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
                        )
                    };
                    let body = body.to_string();
                    let resp = format!(
                        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if tls.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Tls {
        port,
        ca_pem,
        auth_headers,
    }
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn kubeconfig(dir: &Path, port: u16, ca_pem: Option<&str>, exec: &Path) -> PathBuf {
    let ca = ca_pem
        .map(|pem| {
            format!(
                "    certificate-authority-data: {}\n",
                base64::engine::general_purpose::STANDARD.encode(pem)
            )
        })
        .unwrap_or_default();
    let p = dir.join("kubeconfig");
    std::fs::write(
        &p,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: t\n  cluster:\n    server: https://127.0.0.1:{port}\n{ca}contexts:\n- name: t\n  context: {{cluster: t, user: u}}\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      interactiveMode: Never\n",
            exec.display()
        ),
    )
    .unwrap();
    p
}

const GOOD_PLUGIN: &str = "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"exec-token-123\"}}'\n";

async fn get(kc: PathBuf) -> cluster_loop::Result<Kustomization> {
    let conn = ClusterArgs {
        kubeconfig: Some(kc),
        ..Default::default()
    }
    .connect()
    .await?;
    let api = kube::Api::<Kustomization>::namespaced(conn.client.clone(), "flux-system");
    api.get("apps").await.api_context(|| {
        conn.ctx()
            .verb("get")
            .resource_of::<Kustomization>()
            .namespace(Some("flux-system"))
            .name("apps")
    })
}

#[tokio::test]
async fn ca_from_kubeconfig_and_exec_credentials() {
    let srv = start_tls().await;
    let dir = tempfile::tempdir().unwrap();
    let plugin = script(dir.path(), "cred-plugin", GOOD_PLUGIN);
    let k = get(kubeconfig(dir.path(), srv.port, Some(&srv.ca_pem), &plugin))
        .await
        .unwrap();
    assert_eq!(k.spec.interval, "10m");
    assert!(
        srv.auth_headers
            .lock()
            .unwrap()
            .iter()
            .all(|h| h == &format!("Bearer {TOKEN}"))
    );
}

#[tokio::test]
async fn unknown_certificate_is_a_tls_error_naming_the_server() {
    let srv = start_tls().await;
    let dir = tempfile::tempdir().unwrap();
    let plugin = script(dir.path(), "cred-plugin", GOOD_PLUGIN);
    let e = get(kubeconfig(dir.path(), srv.port, None, &plugin))
        .await
        .unwrap_err();
    let m = e.to_string();
    assert!(
        m.starts_with(&format!(
            "TLS failure talking to https://127.0.0.1:{}",
            srv.port
        )),
        "{m}"
    );
    assert!(m.contains("certificate-authority-data"), "{m}");
    assert_eq!(e.exit_code(), 3);
    assert!(
        srv.auth_headers.lock().unwrap().is_empty(),
        "no request got through"
    );
}

#[tokio::test]
async fn failing_exec_plugin_is_reported() {
    let srv = start_tls().await;
    let dir = tempfile::tempdir().unwrap();
    let plugin = script(
        dir.path(),
        "cred-plugin",
        "#!/bin/sh\necho 'token expired, run: login' >&2\nexit 1\n",
    );
    let e = get(kubeconfig(dir.path(), srv.port, Some(&srv.ca_pem), &plugin))
        .await
        .unwrap_err();
    let m = e.to_string();
    assert!(
        m.starts_with(&format!(
            "could not get credentials for https://127.0.0.1:{}",
            srv.port
        )),
        "{m}"
    );
    assert!(
        m.contains("exec credential plugin failed (exit status: 1): token expired, run: login"),
        "{m}"
    );
    assert_eq!(e.exit_code(), 3);
}

#[tokio::test]
async fn wrong_token_is_unauthorized() {
    let srv = start_tls().await;
    let dir = tempfile::tempdir().unwrap();
    let plugin = script(
        dir.path(),
        "cred-plugin",
        "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"stale\"}}'\n",
    );
    let e = get(kubeconfig(dir.path(), srv.port, Some(&srv.ca_pem), &plugin))
        .await
        .unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "credentials rejected by https://127.0.0.1:{}",
            srv.port
        )),
        "{e}"
    );
}
