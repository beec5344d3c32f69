//! kubectl-unstick (the real binary and its engine) against the real control plane and the real
//! Flux controllers (tests/realcluster), with as few cluster starts as the scenarios allow.
//!
//! Two clusters serve most tests: [`cluster`] (this group's, the default options:
//! `cluster`, `checks`, `situations`) and [`quiet_cluster`] (`race`, `moving_fleet`), for the
//! tests whose assertions need kustomize-controller's workers free (the shared cluster holds
//! several health checks to their timeouts at once). `levers` and the worker-starvation
//! situation start clusters of their own (another controller generation or flags), and so does
//! `e2e` (`--concurrent=10 --requeue-dependency=5s`, its scenarios at once) and `helm` (the real
//! helm-controller v1.6.4 beside them).
//! Tests stay apart by namespace and object names.
mod auth;
mod blind;
mod checks;
mod cluster;
mod e2e;
mod helm;
mod levers;
mod moving_fleet;
mod race;
mod refused;
mod situations;
mod stopped;

use realcluster::{Cluster, ClusterOptions};

/// The plugin binary this build made.
pub const BIN: &str = crate::bin!("kubectl-unstick");

/// Runs the plugin against `c` with its admin kubeconfig and NO_COLOR; (exit code, stdout,
/// stderr), exit code -1 when ended by a signal.
pub fn unstick(c: &Cluster, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(BIN)
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The outcome of [`unstick`] run with `-o json`: (exit code, the parsed stdout, stderr).
/// Panics with stdout and stderr when stdout is not JSON.
pub fn json_of((code, stdout, stderr): (i32, String, String)) -> (i32, serde_json::Value, String) {
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    (code, v, stderr)
}

/// [`unstick`] with `-o json` after `args`, its report parsed ([`json_of`]).
pub fn unstick_json(c: &Cluster, args: &[&str]) -> (i32, serde_json::Value, String) {
    let args: Vec<&str> = args.iter().copied().chain(["-o", "json"]).collect();
    json_of(unstick(c, &args))
}

/// This group's shared cluster (default options), leased (started on first use, stopped after its last lease). Panics with the start
/// error.
pub fn cluster() -> realcluster::Lease {
    static SHARED: realcluster::ClusterCell = realcluster::ClusterCell::new();
    crate::group_cluster(&SHARED)
}

/// A second cluster of this group (`registry.example.local:5000/podinfo:6.7.0` pullable;
/// kustomize-controller with `--requeue-dependency=5s`), leased (started on first use, stopped after its last lease), for tests that
/// must not wait behind the shared cluster's held health checks, and `auth`'s fleet that requires auth
/// (its Git server has [`crate::git_user`]). Its tests walk dependsOn
/// chains: the flag (kustomize-controller main.go `requeue-dependency`, default 30s) is how
/// soon a Kustomization whose dependency is not Ready looks again, and unstick reads it from
/// the Deployment's args, so 5s only makes the chains move sooner. Panics with the start error.
pub fn quiet_cluster() -> realcluster::Lease {
    static QUIET: realcluster::ClusterCell = realcluster::ClusterCell::new();
    crate::cluster_with(&QUIET, || ClusterOptions {
        images: vec!["registry.example.local:5000/podinfo:6.7.0".into()],
        kustomize_controller_args: vec!["--requeue-dependency=5s".into()],
        // A Git user whose tokens `auth` mints and revokes (row 2 of the catalogue).
        git_user: Some(crate::git_user()),
        ..ClusterOptions::default()
    })
}

/// Seconds of a Go `time.Duration.String()` ("45.012345678s", "1m0.01s", "2h0m5s", "350ms",
/// "0s"); `None` for anything else.
pub fn go_duration_secs(s: &str) -> Option<f64> {
    if s == "0s" {
        return Some(0.0);
    }
    let mut total = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let end = rest
            .find(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
            .filter(|&i| i > 0)?;
        let n: f64 = rest[..end].parse().ok()?;
        rest = &rest[end..];
        let (unit, len) = [
            ("ns", 1e-9),
            ("us", 1e-6),
            ("µs", 1e-6),
            ("ms", 1e-3),
            ("h", 3600.0),
            ("m", 60.0),
            ("s", 1.0),
        ]
        .into_iter()
        .find_map(|(u, f)| rest.starts_with(u).then_some((f, u.len())))?;
        total += n * unit;
        rest = &rest[len..];
    }
    Some(total)
}

/// Asserts unstick's `predicted` end of a health check is within 10 % of `timeout_secs` of the
/// real controller's own deadline, read from what the controller recorded rather than from when
/// a loaded machine let it write. kustomize-controller v1.9.6 checkHealth
/// (internal/controller/kustomization_controller.go) takes `checkStart := time.Now()` before the
/// wait, and on failure returns "health check failed after {time.Since(checkStart)}: ...", which
/// reconcile marks on Ready=False (conditions.MarkFalse stamps lastTransitionTime then). So
/// `lastTransitionTime - D` is the controller's check start and `+ timeout` its deadline; how
/// late its timer fired under load (D beyond the timeout: 5-8 s at load 50-80 in session 6) is
/// the controller's delay, not an error of the prediction. Also asserts the check ran to its
/// timeout by the controller's own clock (D >= timeout). `ready` is the Ready=False condition.
pub fn assert_end_predicted(
    predicted: jiff::Timestamp,
    ready: &serde_json::Value,
    timeout_secs: f64,
) {
    let msg = ready["message"].as_str().unwrap_or_default();
    let ran = msg
        .strip_prefix("health check failed after ")
        .and_then(|m| m.split_once(": "))
        .and_then(|(d, _)| go_duration_secs(d))
        .unwrap_or_else(|| panic!("no 'health check failed after D: ' in {ready}"));
    assert!(
        ran >= timeout_secs,
        "the controller's check ran {ran}s, less than its {timeout_secs}s timeout: {ready}"
    );
    let ended: jiff::Timestamp = ready["lastTransitionTime"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no lastTransitionTime in {ready}"));
    // Milliseconds: lastTransitionTime is whole seconds (metav1.Time), D is not.
    let deadline_ms =
        ended.as_millisecond() - (ran * 1000.0) as i64 + (timeout_secs * 1000.0) as i64;
    let off = (deadline_ms - predicted.as_millisecond()).abs() as f64 / 1000.0;
    assert!(
        off <= timeout_secs * 0.10,
        "predicted {predicted}, the real controller's deadline {} (Ready=False at {ended}, its check \
         ran {ran}s of a {timeout_secs}s timeout): {off}s off, limit {}s",
        jiff::Timestamp::from_millisecond(deadline_ms).unwrap(),
        timeout_secs * 0.10
    );
}

#[test]
fn go_durations_read_as_the_controller_writes_them() {
    let secs = |s: &str| go_duration_secs(s).map(|d| (d * 1000.0).round() / 1000.0);
    assert_eq!(secs("45.01s"), Some(45.01));
    assert_eq!(secs("5m0.01s"), Some(300.01));
    assert_eq!(secs("1h2m3s"), Some(3723.0));
    assert_eq!(secs("350ms"), Some(0.35));
    assert_eq!(secs("0s"), Some(0.0));
    assert_eq!(secs("12"), None);
    assert_eq!(secs("s"), None);
}
