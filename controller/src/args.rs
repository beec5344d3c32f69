//! The flags, named as the Flux controllers name theirs (fluxcd/pkg runtime: `--metrics-addr`,
//! `--health-addr`, `--watch-all-namespaces`, `--watch-label-selector`,
//! `--enable-leader-election`, `--log-encoding`, `--log-level`), plus the opt-in levers.
use std::time::Duration;

use clap::{ArgAction, Parser};
use cluster_loop::cli::ClusterArgs;

/// The annotation a Kustomization's owners set to let the controller pull unstick's lever on
/// it: `cluster-loop.dev/levers: enabled` (any other value: off). Without it (and without a
/// matching `--levers-label-selector`), the controller only diagnoses.
pub const LEVERS_ANNOTATION: &str = "cluster-loop.dev/levers";

const EXAMPLES: &str = "\
Examples:
  # Outside the cluster, against the current kubeconfig context (diagnose, Events, metrics)
  cluster-loop-controller --kubeconfig ~/.kube/config --metrics-addr :8080 --health-addr :9440

  # Two replicas: only the Lease holder writes Events and pulls levers
  cluster-loop-controller --enable-leader-election

  # Levers on, for Kustomizations annotated cluster-loop.dev/levers=enabled only
  cluster-loop-controller --enable-levers

  # What it sees now (the live `kubectl unstick --all -o json` document)
  curl -s localhost:8080/diagnoses | jq '.items[] | select(.class != \"healthy\")'

Exit codes: 0 after SIGTERM/SIGINT (graceful), 2 usage, 3 cluster/API error at start";

/// kubectl unstick's diagnosis of every Flux Kustomization, as an in-cluster controller:
/// an Event on a Kustomization when its class changes, Prometheus metrics, the live
/// diagnosis document, and (opt-in) unstick's lever on annotated Kustomizations.
#[derive(Parser, Debug, Clone)]
#[command(name = "cluster-loop-controller", version, after_help = EXAMPLES)]
pub struct Args {
    /// The address the metric endpoint binds to (/metrics, /diagnoses)
    #[arg(long, default_value = ":8080", value_name = "ADDR")]
    pub metrics_addr: String,
    /// The address the health endpoint binds to (/healthz, /readyz)
    #[arg(long, default_value = ":9440", value_name = "ADDR")]
    pub health_addr: String,
    /// Watch Flux objects in all namespaces; false: only the runtime namespace
    /// ($RUNTIME_NAMESPACE, else the kubeconfig's)
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub watch_all_namespaces: bool,
    /// Watch only the Kustomizations and sources matching this label selector
    #[arg(long, value_name = "SELECTOR")]
    pub watch_label_selector: Option<String>,
    /// Enable leader election: only the holder of Lease cluster-loop-controller (in the
    /// runtime namespace) writes Events and pulls levers; every replica serves metrics
    #[arg(long)]
    pub enable_leader_election: bool,
    /// The Lease's duration; the holder renews it 5s before it ends
    #[arg(long, default_value = "15s", value_parser = parse_duration, value_name = "DURATION")]
    pub leader_election_lease_duration: Duration,
    /// Namespace of the Flux controllers (kustomize-controller, source-controller,
    /// helm-controller Deployments and their Leases)
    #[arg(long, default_value = "flux-system", value_name = "NAMESPACE", value_parser = cluster_loop::refs::parse_namespace)]
    pub controller_namespace: String,
    /// Name of the kustomize-controller Deployment
    #[arg(long, default_value = "kustomize-controller", value_name = "NAME", value_parser = cluster_loop::refs::parse_object_name)]
    pub controller_name: String,
    /// The namespace this controller runs in (its Lease); default $RUNTIME_NAMESPACE, else the
    /// kubeconfig's namespace
    #[arg(long, env = "RUNTIME_NAMESPACE", value_name = "NAMESPACE", value_parser = cluster_loop::refs::parse_namespace)]
    pub runtime_namespace: Option<String>,
    /// Log encoding: json or console
    #[arg(long, default_value = "json", value_parser = ["json", "console"])]
    pub log_encoding: String,
    /// Log level: error, info, debug or trace
    #[arg(long, default_value = "info", value_parser = ["error", "warn", "info", "debug", "trace"])]
    pub log_level: String,

    /// Pull unstick's lever (only the writes `kubectl unstick` proves on this controller
    /// version) on Kustomizations annotated cluster-loop.dev/levers=enabled, or matching
    /// --levers-label-selector. Off by default; needs the write RBAC (levers.enabled in the
    /// chart)
    #[arg(long)]
    pub enable_levers: bool,
    /// With --enable-levers: also the Kustomizations matching this label selector
    #[arg(long, requires = "enable_levers", value_name = "SELECTOR")]
    pub levers_label_selector: Option<String>,
    /// With --enable-levers: the least time between two levers on one Kustomization
    #[arg(long, default_value = "10m", value_parser = parse_duration, value_name = "DURATION")]
    pub levers_min_interval: Duration,
    /// With --enable-levers: a lever acts only on a diagnosis at most this old
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    pub levers_max_diagnosis_age: Duration,

    #[command(flatten)]
    /// `--kubeconfig`, `--context` (outside the cluster).
    pub cluster: ClusterArgs,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    cluster_loop::duration::parse_go_duration(s).map_err(|e| e.to_string())
}

/// `:8080` -> `0.0.0.0:8080` (a Go listen address: empty host is every interface).
pub fn socket_addr(addr: &str) -> Result<std::net::SocketAddr, String> {
    let full = if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr.to_string()
    };
    full.parse()
        .map_err(|e| format!("{addr:?} is not a listen address (host:port or :port): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_default_as_the_flux_controllers_do() {
        let a = Args::try_parse_from(["cluster-loop-controller"]).unwrap();
        assert_eq!(a.metrics_addr, ":8080");
        assert_eq!(a.health_addr, ":9440");
        assert!(a.watch_all_namespaces);
        assert!(!a.enable_leader_election && !a.enable_levers);
        let a = Args::try_parse_from(["x", "--watch-all-namespaces=false"]).unwrap();
        assert!(!a.watch_all_namespaces);
        assert_eq!(socket_addr(":8080").unwrap().port(), 8080);
        assert!(socket_addr("nope").is_err());
        assert!(Args::try_parse_from(["x", "--levers-label-selector", "a=b"]).is_err());
    }
}
