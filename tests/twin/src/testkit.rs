//! Helpers for tests: the keys of Flux objects in `flux-system`, condition checks the way Flux
//! controllers write conditions, a bare twin API server, a Secret in source-controller's
//! shape, and running a plugin binary as a process (with a deadline, SIGINT, and an API
//! endpoint that never answers). The scenario helpers that drove the twin's Flux models were
//! retired with them in session 5.
//!
//! Shared by this crate's tests and the plugins' tests (a dev-dependency on `twin` is enough;
//! no feature). Every helper panics on failure, as a test should. Product code must not use
//! them.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use crate::flux::cluster::{ObjKey, s};

/// The namespace `flux install` creates.
pub const FLUX_SYSTEM: &str = "flux-system";

/// Key of the `kustomize.toolkit.fluxcd.io/v1` Kustomization `name` in `flux-system`.
pub fn ks(name: &str) -> ObjKey {
    ObjKey::new(
        "kustomize.toolkit.fluxcd.io/v1",
        "Kustomization",
        FLUX_SYSTEM,
        name,
    )
}

/// Key of the `source.toolkit.fluxcd.io/v1` GitRepository `name` in `flux-system`.
pub fn gitrepo(name: &str) -> ObjKey {
    ObjKey::new(
        "source.toolkit.fluxcd.io/v1",
        "GitRepository",
        FLUX_SYSTEM,
        name,
    )
}

/// The condition of type `type_` in `status.conditions` (the first one; Kubernetes keeps
/// types unique), as raw JSON; `None` when the object has no such condition (or none at all).
pub fn cond<'a>(o: &'a Value, type_: &str) -> Option<&'a Value> {
    o.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Whether condition `type_` exists with `status` (`True`, `False`, `Unknown`).
pub fn cond_status(o: &Value, type_: &str, status: &str) -> bool {
    cond(o, type_).is_some_and(|c| c["status"] == status)
}

/// Whether condition `type_` exists with `status` and `reason` (e.g. `Ready`, `False`,
/// `HealthCheckFailed`).
pub fn cond_is(o: &Value, type_: &str, status: &str, reason: &str) -> bool {
    cond(o, type_).is_some_and(|c| c["status"] == status && c["reason"] == reason)
}

/// Whether a Kustomization is `Ready=True` with reason `ReconciliationSucceeded`: its last run
/// applied the revision and passed its health checks (kustomize-controller v1 `meta.ReadyCondition`,
/// `meta.ReconciliationSucceededReason`). A predicate for [`wait`].
pub fn ready_succeeded(o: &Value) -> bool {
    cond_is(o, "Ready", "True", "ReconciliationSucceeded")
}

/// Whether kustomize-controller is running the health check of a revision other than
/// `applied`: `Healthy=Unknown` reason `Progressing` and `status.lastAttemptedRevision` not
/// `applied` (kustomize-controller marks Healthy Unknown when a run starts its health checks).
pub fn checking_new_revision(o: &Value, applied: &str) -> bool {
    cond_is(o, "Healthy", "Unknown", "Progressing")
        && s(o, "/status/lastAttemptedRevision") != applied
}

/// The `status.inventory.entries[].id` of a Kustomization (`<namespace>_<name>_<group>_<Kind>`,
/// fluxcd/pkg ssa `ObjMetadata` format), in order. Panics when the object has no inventory.
pub fn inventory_ids(o: &Value) -> Vec<&str> {
    o["status"]["inventory"]["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no status.inventory.entries: {o}"))
        .iter()
        .map(|e| e["id"].as_str().unwrap_or_default())
        .collect()
}

/// Starts a bare twin API server as after `flux install` (the Flux CRDs and the
/// `flux-system` namespace) with the extra `namespaces`; every other option is the default.
/// Panics when it cannot start.
pub async fn start_twin(namespaces: &[&str]) -> crate::Twin {
    let opts = crate::TwinOptions {
        namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    };
    crate::Twin::start(opts)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Creates (or replaces) the Secret `namespace/name` in the shape source-controller reads for
/// a Git source over HTTPS with basic auth: keys `username`, `password` and, when `ca_crt` is
/// given, `ca.crt` (a PEM bundle), base64 in `data`, type `Opaque` (source-controller v1
/// `GitRepository.spec.secretRef`, fluxcd/pkg git `NewAuthOptions`). An existing Secret of
/// that name is deleted first. Panics when the store refuses it.
pub fn basic_auth_secret(
    twin: &crate::Twin,
    namespace: &str,
    name: &str,
    username: &str,
    password: &str,
    ca_crt: Option<&str>,
) {
    let b = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut data = serde_json::json!({ "username": b(username), "password": b(password) });
    if let Some(ca) = ca_crt {
        data["ca.crt"] = serde_json::json!(b(ca));
    }
    let store = twin.store();
    let gvr = store.gvr("", "v1", "secrets").expect("secrets are served");
    let _ = store.delete(&gvr, Some(namespace), name);
    store
        .create(
            &gvr,
            serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": namespace},
                "type": "Opaque", "data": data}),
        )
        .unwrap_or_else(|e| panic!("creating Secret {namespace}/{name}: {e}"));
}

/// For tests that need the podexec model (probe images run for real in private namespaces):
/// `true`, after printing `SKIPPED: ...` on stderr with what is missing and how to install it,
/// when [`crate::podexec::missing_prerequisites`] names a host tool or root; the test then
/// returns early.
pub fn skip_without_podexec() -> bool {
    let m = crate::podexec::missing_prerequisites();
    if m.is_empty() {
        return false;
    }
    eprintln!(
        "SKIPPED: the twin's podexec needs {} (apt-get install -y dnsmasq busybox util-linux iproute2 bind9-dnsutils; run as root)",
        m.join(", ")
    );
    true
}

/// The stderr line every plugin prints (then exits 3) when an object the user named is not in
/// the twin: `error: <Kind> "<name>" not found in namespace "<namespace>" (context "twin",
/// <server>); list what exists with: kubectl get <short> -A --context twin` and a newline
/// (`cluster_loop::error` missing-object message; `short` is the name the user typed, e.g.
/// `ks`, `gitrepo`, `deploy`). The server is the twin's URL without its trailing slash.
pub fn not_found_line(
    twin: &crate::Twin,
    kind: &str,
    name: &str,
    namespace: &str,
    short: &str,
) -> String {
    let server = twin.server_url().trim_end_matches('/').to_string();
    format!(
        "error: {kind} \"{name}\" not found in namespace \"{namespace}\" (context \"twin\", \
         {server}); list what exists with: kubectl get {short} -A --context twin\n"
    )
}

/// What a plugin binary run left: its exit code (`-1` when a signal ended it) and its stdout
/// and stderr (lossy UTF-8).
#[derive(Debug, Clone)]
pub struct PluginRun {
    /// Exit code, `-1` when killed by a signal.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl PluginRun {
    /// Stdout parsed as JSON (for `-o json`). Panics with stdout and stderr when it is not
    /// JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }

    /// Stdout, a newline, then stderr: for assertion messages and for checking that a string
    /// appears nowhere in the output.
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

impl From<std::process::Output> for PluginRun {
    fn from(o: std::process::Output) -> PluginRun {
        PluginRun {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into(),
            stderr: String::from_utf8_lossy(&o.stderr).into(),
        }
    }
}

/// The command line `<bin> --kubeconfig <kubeconfig> <args>` for a plugin binary (e.g.
/// `env!("CARGO_BIN_EXE_kubectl-unstick")`), with `NO_COLOR=1`, stdin closed, stdout and
/// stderr piped, killed when dropped. Spawn it, or run it with [`run_plugin`].
pub fn plugin_command(bin: &str, kubeconfig: &Path, args: &[&str]) -> tokio::process::Command {
    wrapped_plugin_command(&[], bin, kubeconfig, args)
}

/// [`plugin_command`] run through `wrapper` (a program and its arguments, e.g. `unshare -m --
/// sh -c SCRIPT` to give the plugin a private /etc/hosts): the command line is
/// `<wrapper...> <bin> --kubeconfig <kubeconfig> <args>`, with the same environment and
/// pipes. An empty `wrapper` runs `bin` itself. A SIGINT sent to the child reaches the
/// plugin only when the wrapper `exec`s it.
pub fn wrapped_plugin_command(
    wrapper: &[&OsStr],
    bin: &str,
    kubeconfig: &Path,
    args: &[&str],
) -> tokio::process::Command {
    let mut c = match wrapper.split_first() {
        Some((program, rest)) => {
            let mut c = tokio::process::Command::new(program);
            c.args(rest).arg(bin);
            c
        }
        None => tokio::process::Command::new(bin),
    };
    c.arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    c
}

/// Runs [`plugin_command`] to its end and returns what it left. Panics when it cannot start
/// or has not finished after `timeout` (real time; it is killed then).
pub async fn run_plugin(
    bin: &str,
    kubeconfig: &Path,
    args: &[&str],
    timeout: Duration,
) -> PluginRun {
    run_command(plugin_command(bin, kubeconfig, args), timeout).await
}

/// Runs `cmd` (from [`plugin_command`] or [`wrapped_plugin_command`]) to its end and returns
/// what it left. Panics when it cannot start or has not finished after `timeout` (real time;
/// it is killed then, as the command is `kill_on_drop`).
pub async fn run_command(mut cmd: tokio::process::Command, timeout: Duration) -> PluginRun {
    let what = format!("{:?}", cmd.as_std());
    tokio::time::timeout(timeout, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish in {timeout:?}"))
        .unwrap_or_else(|e| panic!("running {what}: {e}"))
        .into()
}

/// Sends SIGINT to a spawned plugin (`kill -INT <pid>`, as Ctrl-C in a terminal would) and
/// waits until it exits; returns what it left (a plugin that exits on the signal without
/// handling it reads `code: -1`). Panics when the child has already been reaped, when `kill`
/// fails, or when it has not exited `timeout` (real time) after the signal.
pub async fn interrupt(child: tokio::process::Child, timeout: Duration) -> PluginRun {
    let pid = child.id().expect("the plugin has not been reaped yet");
    let st = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap_or_else(|e| panic!("running kill: {e}"));
    assert!(st.success(), "kill -INT {pid}: {st}");
    tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("pid {pid} did not exit within {timeout:?} of SIGINT"))
        .unwrap_or_else(|e| panic!("waiting for pid {pid}: {e}"))
        .into()
}

/// Runs plugin binary `bin` with `args` against an API server that accepts connections and
/// never answers a byte (no `--request-timeout`), waits until the plugin has connected (so it
/// is inside its first request, past installing its signal listeners), sends `signal` (`kill`
/// syntax: `"-INT"`, `"-TERM"`) and returns (exit code, stderr).
///
/// Panics if the plugin never connects within 60 s or is still running 10 s after the
/// signal: the property under test is that a hung API server cannot hold off Ctrl-C.
pub async fn signal_while_api_hangs(
    bin: &str,
    args: &[&str],
    signal: &str,
) -> (Option<i32>, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, mut accepted) = tokio::sync::mpsc::unbounded_channel();
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
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
    let child = plugin_command(bin, &kubeconfig, args).spawn().unwrap();
    tokio::time::timeout(Duration::from_secs(60), accepted.recv())
        .await
        .expect("the plugin never connected to the API server")
        .unwrap();
    let pid = child.id().unwrap();
    let sent = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{bin} {args:?} ignored {signal} for 10s"))
        .unwrap();
    server.abort();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_and_inventory() {
        let o = json!({"status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded"},
                {"type": "Healthy", "status": "Unknown", "reason": "Progressing"}],
            "lastAttemptedRevision": "main@sha1:b",
            "inventory": {"entries": [{"id": "apps_podinfo_apps_Deployment", "v": "v1"}]}}});
        assert_eq!(cond(&o, "Healthy").unwrap()["reason"], "Progressing");
        assert!(cond(&o, "Stalled").is_none());
        assert!(cond(&json!({}), "Ready").is_none());
        assert!(ready_succeeded(&o));
        assert!(cond_status(&o, "Healthy", "Unknown"));
        assert!(!cond_is(&o, "Ready", "True", "Progressing"));
        assert!(checking_new_revision(&o, "main@sha1:a"));
        assert!(!checking_new_revision(&o, "main@sha1:b"));
        assert_eq!(inventory_ids(&o), vec!["apps_podinfo_apps_Deployment"]);
        assert_eq!(ks("apps").namespace, FLUX_SYSTEM);
        assert_eq!(gitrepo("fleet").kind, "GitRepository");
    }

    #[tokio::test]
    async fn wrapped_command_order_and_output() {
        let script = OsStr::new("echo \"$0 $*\"; echo \"err $NO_COLOR\" >&2; exit 3");
        let wrapper = [OsStr::new("sh"), OsStr::new("-c"), script];
        let cmd = wrapped_plugin_command(&wrapper, "plug", Path::new("/k"), &["ks/a", "-o"]);
        let r = run_command(cmd, Duration::from_secs(60)).await;
        assert_eq!(r.code, 3);
        assert_eq!(r.stdout, "plug --kubeconfig /k ks/a -o\n");
        assert_eq!(r.stderr, "err 1\n");
        assert_eq!(r.all(), "plug --kubeconfig /k ks/a -o\n\nerr 1\n");
    }

    #[tokio::test]
    async fn interrupt_ends_a_running_plugin() {
        // SIGINT's default action for the stand-in plugin even when this test runs with SIGINT
        // ignored: a background job of a non-interactive shell (`cmd &` in a CI script)
        // inherits SIG_IGN, exec keeps it, and a plain `sleep` would then never end. A real
        // plugin installs its own handler, so it does not depend on the inherited disposition.
        let script = OsStr::new("exec env --default-signal=INT sleep 600");
        let child = wrapped_plugin_command(
            &[OsStr::new("sh"), OsStr::new("-c"), script],
            "x",
            Path::new("/k"),
            &[],
        )
        .spawn()
        .unwrap();
        // Signal only once `env` has reset SIGINT and exec'd sleep: with SIGINT ignored on
        // entry, a signal that reaches `sh` before that is discarded, and sleep runs on.
        let pid = child.id().unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| c.trim() != "sleep")
            .unwrap_or(true)
        {
            assert!(
                std::time::Instant::now() < until,
                "pid {pid} never became sleep"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = interrupt(child, Duration::from_secs(60)).await;
        assert_eq!(r.code, -1, "ended by the signal: {r:?}");
    }
}
