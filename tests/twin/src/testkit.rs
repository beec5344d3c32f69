//! Helpers for tests and benchmarks that drive a twin scenario: the keys of Flux objects in
//! `flux-system`, condition checks the way Flux controllers write conditions, starting a
//! scenario and waiting for a state, pushing to a scenario's Git server, and running a plugin
//! binary against the twin.
//!
//! Shared by this crate's tests and the plugins' end-to-end tests (a dev-dependency on
//! `twin` is enough; no feature). Every helper panics on failure, as a test should: the panic
//! carries the scenario's error, which names the object and its last status. Product code
//! must not use them.
//!
//! ```no_run
//! use std::time::Duration;
//! use twin::testkit::{cond_is, ks, start_shipped, wait};
//! # async fn demo() {
//! let run = start_shipped("bare-tag-rollout").await;
//! let w1 = wait(&run, &ks("apps-wave-1"), Duration::from_secs(120), |o| {
//!     cond_is(o, "Ready", "True", "ReconciliationSucceeded")
//! })
//! .await;
//! assert!(twin::testkit::cond(&w1, "Reconciling").is_none());
//! # }
//! ```

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use crate::flux::cluster::{ObjKey, s};
use crate::git::Change;
use crate::scenario::{RunOptions, RunningScenario, Scenario};

/// The namespace `flux install` creates and the shipped scenarios put their Flux objects in.
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

/// Starts a bare twin (no scenario, no models) as after `flux install` (the Flux CRDs and the
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

/// Starts `sc` with the scenario's own options ([`RunOptions::default`]). Panics when it cannot
/// start.
pub async fn start(sc: Scenario) -> RunningScenario {
    start_with(sc, RunOptions::default()).await
}

/// Starts the shipped scenario `name` (`tests/twin/scenarios/<name>.yaml`) with its own
/// options. Panics when it does not parse or cannot start.
pub async fn start_shipped(name: &str) -> RunningScenario {
    start(Scenario::shipped(name).unwrap_or_else(|e| panic!("{e}"))).await
}

/// Starts `sc` at `time_scale` (real seconds per nominal second, e.g. 0.05: a 5m health-check
/// timeout lasts 15 real seconds), overriding the scenario's `timeScale`. Panics when it
/// cannot start.
pub async fn start_scaled(sc: Scenario, time_scale: f64) -> RunningScenario {
    let opts = RunOptions {
        time_scale: Some(time_scale),
        ..Default::default()
    };
    start_with(sc, opts).await
}

/// Starts `sc` with `opts`. Panics when it cannot start.
pub async fn start_with(sc: Scenario, opts: RunOptions) -> RunningScenario {
    RunningScenario::start(sc, opts)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// [`RunningScenario::wait_for`]: waits (watch-driven, `timeout` in real time) until `pred`
/// holds for the object `key` (an absent object reads as `Value::Null`) and returns it.
/// Panics on timeout with the object and its last status.
pub async fn wait(
    run: &RunningScenario,
    key: &ObjKey,
    timeout: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    run.wait_for(key, timeout, pred)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The object `key` as it is now (`Value::Null` when absent): a [`wait`] whose predicate
/// holds at once.
pub async fn get(run: &RunningScenario, key: &ObjKey) -> Value {
    wait(run, key, Duration::from_secs(60), |_| true).await
}

/// For the shipped `bare-tag-rollout` scenarios: waits until `apps-wave-2` is Ready
/// (`ReconciliationSucceeded`) at the first revision and the scenario's `automation-commit`
/// event (the bare image tag) has fired; returns that first revision (`main@sha1:<sha>`).
/// Panics on timeout.
pub async fn bare_tag_first_rollout(run: &RunningScenario, timeout: Duration) -> String {
    let w2 = wait(run, &ks("apps-wave-2"), timeout, ready_succeeded).await;
    run.wait_fired("automation-commit", timeout)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    s(&w2, "/status/lastAppliedRevision").to_string()
}

/// For the shipped `bare-tag-rollout` scenarios whose `fix-commit` event is manual: fires it,
/// waits until it has run, then until source-controller has fetched a revision other than
/// `bad` (the GitRepository `flux-system` artifact); returns that revision. Panics on timeout.
pub async fn bare_tag_fix_fetched(run: &RunningScenario, bad: &str, timeout: Duration) -> String {
    run.fire("fix-commit");
    run.wait_fired("fix-commit", timeout)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let repo = wait(run, &gitrepo(FLUX_SYSTEM), timeout, |o| {
        let r = s(o, "/status/artifact/revision");
        !r.is_empty() && r != bad
    })
    .await;
    s(&repo, "/status/artifact/revision").to_string()
}

/// Writes the status kustomize-controller leaves after a health check ran out of time on
/// `object` (`Kind/namespace/name`): Kustomization `name` gets the single condition `Ready=False`
/// reason `HealthCheckFailed`, message `health check failed after 5m0.01s: timeout waiting
/// for: [<object> status: 'InProgress']` (kustomize-controller v1 health-check failure
/// wording), as field manager `kustomize-controller`. For scenarios without models (e.g. the
/// generated fleet), where nothing else writes status. Panics when the patch fails.
pub fn fail_health_check(run: &RunningScenario, name: &str, object: &str) {
    let message = format!(
        "health check failed after 5m0.01s: timeout waiting for: [{object} status: 'InProgress']"
    );
    let status = serde_json::json!({"status": {"conditions": [{"type": "Ready",
        "status": "False", "reason": "HealthCheckFailed",
        "lastTransitionTime": "2026-11-30T07:00:00Z", "message": message}]}});
    run.cluster()
        .merge_patch_status(&ks(name), status, "kustomize-controller")
        .unwrap_or_else(|e| panic!("{e}"));
}

/// `(reason, message)` of every Event in `namespace` whose `involvedObject.name` is `name`,
/// in list order.
pub fn events_about(run: &RunningScenario, namespace: &str, name: &str) -> Vec<(String, String)> {
    run.cluster()
        .list("v1", "Event", Some(namespace))
        .unwrap_or_else(|e| panic!("listing Events in {namespace}: {e}"))
        .iter()
        .filter(|e| s(e, "/involvedObject/name") == name)
        .map(|e| (s(e, "/reason").to_string(), s(e, "/message").to_string()))
        .collect()
}

/// Commits `changes` on the default branch of `repo` on the scenario's Git server `server`
/// (off the async runtime: git runs as a child process); returns the new commit SHA. Panics
/// when the server or repository is unknown or the commit fails.
pub async fn commit(
    run: &RunningScenario,
    server: &str,
    repo: &str,
    changes: Vec<Change>,
    message: &str,
) -> String {
    let g = run
        .git
        .get(server)
        .unwrap_or_else(|| panic!("no Git server '{server}' in the scenario"))
        .clone();
    let (repo, message) = (repo.to_string(), message.to_string());
    tokio::task::spawn_blocking(move || g.commit(&repo, &changes, &message))
        .await
        .expect("the commit task panicked")
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
        let script = OsStr::new("exec sleep 600");
        let child = wrapped_plugin_command(
            &[OsStr::new("sh"), OsStr::new("-c"), script],
            "x",
            Path::new("/k"),
            &[],
        )
        .spawn()
        .unwrap();
        let r = interrupt(child, Duration::from_secs(60)).await;
        assert_eq!(r.code, -1, "ended by the signal: {r:?}");
    }
}
