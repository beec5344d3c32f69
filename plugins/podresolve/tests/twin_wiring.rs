//! The real binary against the twin API server (tests/twin) under API faults the real
//! cluster's fault proxy cannot make yet: a forbidden create, a server that accepts and never
//! answers, a create that is committed but never answered. What is tested is podresolve's
//! side: the requests it makes (and does not make), its exit codes and what it says.
//! Everything else (the probe really running, pods/log, cleanup on success, failure and
//! SIGINT, --from with and without ephemeral-container permission, the Job spec and the
//! request budget) runs on the real cluster: tests/real_cluster.rs.

use std::process::Stdio;
use std::time::Duration;
use twin::{Twin, TwinOptions};

const COREFILE: &str = ".:53 {\n    errors\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n    }\n    forward . /etc/resolv.conf\n    cache 30\n    hosts {\n       192.168.2.20 gitea.example.dev\n       fallthrough\n    }\n}\n";

async fn start_twin() -> Twin {
    let twin = Twin::start(TwinOptions {
        install_flux_crds: true,
        namespaces: vec!["team".into()],
        ..Default::default()
    })
    .await
    .expect("twin starts");
    twin.load_yaml(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coredns\n  namespace: kube-system\ndata:\n  Corefile: |\n{}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: kube-dns\n  namespace: kube-system\nspec:\n  clusterIP: 127.0.0.77\n  clusterIPs: [127.0.0.77]\n  ports:\n  - name: dns\n    port: 53\n    protocol: UDP\n",
        COREFILE
            .lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    ))
    .expect("load coredns");
    twin
}

struct RunOut {
    code: Option<i32>,
    stderr: String,
}

async fn run_bin(kubeconfig: &std::path::Path, args: &[&str]) -> RunOut {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("binary finishes")
        .unwrap();
    RunOut {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_create_exits_3_without_cleanup_noise() {
    let twin = start_twin().await;
    let rules = vec![twin::Rule::new(
        &["get", "list", "watch"],
        &[""],
        &["pods", "pods/log", "configmaps", "services"],
    )];
    let token = twin.add_token("readonly", rules);
    let kc = twin.kubeconfig_for(&token, "readonly").unwrap();
    let r = run_bin(&kc, &["gitea.example.dev", "-n", "team"]).await;
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert!(r.stderr.contains("jobs"), "{}", r.stderr);
    assert!(!r.stderr.contains("cleanup failed"), "{}", r.stderr);
    assert_eq!(twin.request_log().count("delete", Some("jobs")), 0);
}

/// Start the binary, wait until fault `id` has fired `n` times (the requests reached the
/// server and are being held), then SIGINT it; its exit code and stderr.
async fn interrupt_when_fired(
    twin: &Twin,
    id: twin::FaultId,
    n: u64,
    args: &[&str],
) -> (Option<i32>, String) {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"))
        .arg("--kubeconfig")
        .arg(twin.kubeconfig_path())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    while twin.faults().fired(id) < n {
        assert!(
            tokio::time::Instant::now() < until,
            "requests never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("exits promptly after SIGINT")
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// An API server that accepts requests and never answers: the create is held back until the
/// server has answered something, so SIGINT finds nothing created, sends no DELETE and does
/// not wait for one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_server_sigint_reports_nothing_created_and_sends_no_delete() {
    let twin = start_twin().await;
    let hang = twin.faults().add(twin::Fault {
        matcher: Default::default(),
        trigger: twin::Trigger::Always,
        action: twin::FaultAction::Latency(Duration::from_secs(3600)),
    });
    let (code, stderr) = interrupt_when_fired(
        &twin,
        hang,
        3,
        &["gitea.example.dev", "-n", "team", "--timeout", "5m"],
    )
    .await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted by SIGINT: nothing was created\n"),
        "{stderr}"
    );
    assert!(!stderr.contains("NOT deleted"), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    // Only the three kube-system GETs reached the server: no POST, no DELETE.
    assert_eq!(twin.faults().fired(hang), 3);
}

/// The same hung server without an interrupt: the run ends at --timeout + 15s with exit 3 and
/// says nothing was created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_server_run_is_bounded_by_the_deadline() {
    let twin = start_twin().await;
    let hang = twin.faults().add(twin::Fault {
        matcher: Default::default(),
        trigger: twin::Trigger::Always,
        action: twin::FaultAction::Latency(Duration::from_secs(3600)),
    });
    let r = run_bin(
        twin.kubeconfig_path(),
        &["gitea.example.dev", "-n", "team", "--timeout", "5s"],
    )
    .await;
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    let server = twin.server_url().trim_end_matches('/').to_string();
    assert!(
        r.stderr.ends_with(&format!(
            "error: the API server {server} did not answer within 20s (--timeout + 15s): nothing was created\n"
        )),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("deleted"), "{}", r.stderr);
    assert_eq!(twin.faults().fired(hang), 3, "no POST, no DELETE");
}

/// The server answers, but not the create: the probe may exist, so one DELETE by name is
/// sent (bounded), and the message says the create had no answer rather than claiming a
/// deletion of something known to exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_create_sigint_sends_one_delete_and_says_so() {
    let twin = start_twin().await;
    let hang = twin.faults().add(twin::Fault::on_verb(
        "create",
        Some("jobs"),
        twin::Trigger::Always,
        twin::FaultAction::Latency(Duration::from_secs(3600)),
    ));
    let (code, stderr) = interrupt_when_fired(
        &twin,
        hang,
        1,
        &["gitea.example.dev", "-n", "team", "--timeout", "5m"],
    )
    .await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted by SIGINT: the create of job team/podresolve-"),
        "{stderr}"
    );
    assert!(
        stderr.contains("had no answer yet; its DELETE succeeded (or found nothing); should the create still land, it stops at its activeDeadlineSeconds (300s) and ttlSecondsAfterFinished (300s) removes it, or run `kubectl podresolve --cleanup -n team`"),
        "{stderr}"
    );
    assert_eq!(twin.request_log().count("delete", Some("jobs")), 1);
}
