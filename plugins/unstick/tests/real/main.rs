//! kubectl-unstick (the real binary and its engine) against the real control plane and the real
//! Flux controllers (tests/realcluster): one test binary, so one link and as few cluster starts
//! as the scenarios allow.
//!
//! Two clusters serve most tests: [`cluster`] (`Cluster::shared()`, the default options:
//! `cluster`, `checks`, `situations`) and [`quiet_cluster`] (`race`, `moving_fleet`), for the
//! tests whose assertions need kustomize-controller's workers free (the shared cluster holds
//! several health checks to their timeouts at once). `levers` and the worker-starvation
//! situation start clusters of their own (another controller generation or flags), and so does
//! `e2e` (`--concurrent=10 --requeue-dependency=5s`, its scenarios at once) and `helm` (the real
//! helm-controller v1.4.3 beside them).
//! Tests stay apart by namespace and object names.
mod checks;
mod cluster;
mod e2e;
mod helm;
mod levers;
mod moving_fleet;
mod race;
mod situations;
mod stopped;

use std::sync::OnceLock;

use realcluster::{Cluster, ClusterOptions};

/// The plugin binary this build made.
pub const BIN: &str = env!("CARGO_BIN_EXE_kubectl-unstick");

/// The shared cluster of this binary (`Cluster::shared()`, default options). Panics with the
/// start error.
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

pub fn cluster() -> &'static Cluster {
    Cluster::shared().unwrap_or_else(|e| panic!("{e}"))
}

/// A second cluster of this binary (`registry.example.local:5000/podinfo:6.7.0` pullable;
/// kustomize-controller with `--requeue-dependency=5s`), started on first use, for tests that
/// must not wait behind the shared cluster's held health checks. Its tests walk dependsOn
/// chains: the flag (kustomize-controller main.go `requeue-dependency`, default 30s) is how
/// soon a Kustomization whose dependency is not Ready looks again, and unstick reads it from
/// the Deployment's args, so 5s only makes the chains move sooner. Panics with the start error.
pub fn quiet_cluster() -> &'static Cluster {
    static QUIET: OnceLock<Result<Cluster, String>> = OnceLock::new();
    QUIET
        .get_or_init(|| {
            // On a thread of its own: start() runs a runtime of its own, which tokio refuses
            // inside a caller's runtime.
            std::thread::spawn(|| {
                Cluster::start(ClusterOptions {
                    images: vec!["registry.example.local:5000/podinfo:6.7.0".into()],
                    kustomize_controller_args: vec!["--requeue-dependency=5s".into()],
                    ..ClusterOptions::default()
                })
            })
            .join()
            .unwrap_or_else(|_| Err(realcluster::Error::Setup("cluster start panicked".into())))
            .map_err(|e| e.to_string())
        })
        .as_ref()
        .unwrap_or_else(|e| panic!("{e}"))
}
