//! `kubectl get svc` against the twin: the EXTERNAL-IP column as kube-apiserver's table
//! printer writes it (ingress IPs of a LoadBalancer, `<pending>` without, `<none>` for a
//! ClusterIP Service), read through the real kubectl binary.
use serde_json::json;
use std::time::Duration;
use twin::{Twin, TwinOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_svc_external_ip_column() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    let svcs = twin.store().gvr("", "v1", "services").unwrap();
    let mk = |name: &str, ty: &str| {
        twin.store()
            .create(
                &svcs,
                json!({"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": name, "namespace": "default"},
                       "spec": {"type": ty, "ports": [{"port": 443, "protocol": "TCP"}]}}),
            )
            .unwrap()
    };
    let mut gw = mk("gw", "LoadBalancer");
    gw["status"] = json!({"loadBalancer": {"ingress": [{"ip": "192.168.2.20"}]}});
    twin.store().update_status(&svcs, gw).unwrap();
    mk("waiting", "LoadBalancer");
    mk("internal", "ClusterIP");

    let cache = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("/usr/bin/kubectl")
            .arg("--kubeconfig")
            .arg(twin.kubeconfig_path())
            .arg("--cache-dir")
            .arg(cache.path())
            .args(["get", "svc", "-n", "default"])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("kubectl did not finish within 60s")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let col = lines[0].iter().position(|h| *h == "EXTERNAL-IP").unwrap();
    let cell = |name: &str| {
        lines
            .iter()
            .find(|l| l[0] == name)
            .unwrap_or_else(|| panic!("{name} not listed:\n{stdout}"))[col]
    };
    assert_eq!(cell("gw"), "192.168.2.20", "{stdout}");
    assert_eq!(cell("waiting"), "<pending>", "{stdout}");
    assert_eq!(cell("internal"), "<none>", "{stdout}");
    twin.shutdown().await;
}
