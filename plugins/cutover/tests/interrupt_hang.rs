//! SIGINT/SIGTERM while the API server hangs: an endpoint that accepts connections and never
//! answers, with no `--request-timeout`. The read-only phases (preflight, --finish) must end at
//! once with exit 130 and one stderr line, not wait for a client timeout and exit 3.
use std::path::PathBuf;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// A listener on 127.0.0.1 that accepts and holds every connection, never writing a byte;
/// `accepted` receives one message per connection. The kubeconfig names it as an http server.
struct HangingServer {
    kubeconfig: PathBuf,
    accepted: mpsc::UnboundedReceiver<()>,
    _dir: tempfile::TempDir,
}

async fn hanging_server() -> HangingServer {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, accepted) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
            let _ = tx.send(());
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hang\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: hang\n  context: {{cluster: hang, user: u}}\ncurrent-context: hang\n"
        ),
    )
    .unwrap();
    HangingServer {
        kubeconfig,
        accepted,
        _dir: dir,
    }
}

/// Starts the plugin against the hanging server, waits until it has connected (so it is
/// inside the request, past installing its listeners), sends `signal` and returns
/// (exit code, stderr). The plugin must exit within 10 s of the signal.
async fn signal_while_hanging(args: &[&str], signal: &str) -> (Option<i32>, String) {
    let mut srv = hanging_server().await;
    let child =
        twin::testkit::plugin_command(env!("CARGO_BIN_EXE_kubectl-cutover"), &srv.kubeconfig, args)
            .spawn()
            .unwrap();
    tokio::time::timeout(Duration::from_secs(60), srv.accepted.recv())
        .await
        .expect("the plugin never connected to the API server")
        .unwrap();
    let pid = child.id().unwrap();
    let st = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("kubectl-cutover {args:?} ignored {signal} for 10s"))
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn sigint_during_hanging_preflight_exits_130() {
    let (code, err) = signal_while_hanging(
        &[
            "gitrepo/flux-system",
            "--to",
            "https://git.example.test/org/fleet.git",
            "--dry-run",
        ],
        "-INT",
    )
    .await;
    assert_eq!(code, Some(130), "stderr: {err}");
    assert!(
        err.contains("interrupted by SIGINT: preflight stopped, nothing changed"),
        "stderr: {err}"
    );
}

#[tokio::test]
async fn sigterm_during_hanging_preflight_exits_130() {
    let (code, err) = signal_while_hanging(
        &[
            "gitrepo/flux-system",
            "--to",
            "https://git.example.test/org/fleet.git",
            "--yes",
        ],
        "-TERM",
    )
    .await;
    assert_eq!(code, Some(130), "stderr: {err}");
    assert!(err.contains("interrupted by SIGTERM"), "stderr: {err}");
}

#[tokio::test]
async fn sigint_during_hanging_finish_exits_130() {
    let (code, err) = signal_while_hanging(&["gitrepo/flux-system", "--finish"], "-INT").await;
    assert_eq!(code, Some(130), "stderr: {err}");
    assert!(
        err.contains("interrupted by SIGINT: --finish stopped"),
        "stderr: {err}"
    );
}

#[tokio::test]
async fn sigint_during_hanging_reads_before_the_in_cluster_probe_exits_130() {
    let (code, err) = signal_while_hanging(
        &[
            "gitrepo/flux-system",
            "--to",
            "https://git.example.test/org/fleet.git",
            "--dry-run",
            "--verify-in-cluster",
        ],
        "-INT",
    )
    .await;
    assert_eq!(code, Some(130), "stderr: {err}");
    assert!(
        err.contains("interrupted by SIGINT: preflight stopped, nothing changed"),
        "stderr: {err}"
    );
}
