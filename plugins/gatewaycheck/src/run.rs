//! The command line and the orchestration of one run.

use crate::report::{ObjectReport, Report, render};
use crate::rules;
use crate::snapshot::{self, Snapshot};
use cluster_loop::cli::ClusterArgs;
use cluster_loop::error::{Error, Result};
use cluster_loop::output::{OutputArgs, print_machine, write_stdout};
use cluster_loop::signals::ExitOnSignal;
use serde_json::Value;

const EXAMPLES: &str = "\
Examples:
  # Every Gateway and HTTPRoute in the namespace
  kubectl gatewaycheck -n infra

  # One Gateway: status against its class, controller, Service, pool and
  # data-plane pods
  kubectl gatewaycheck gateway/eg -n infra

  # One HTTPRoute: its status.parents against spec.parentRefs
  kubectl gatewaycheck httproute/podinfo -n apps

  # The repository's GATEWAY_VIP against the Gateway's address and the pools
  kubectl gatewaycheck gateway/eg -n infra --vip 192.168.2.20

  # Everything in every namespace, machine output
  kubectl gatewaycheck -A -o json

  # Install shell completion (kubectl 1.26+)
  kubectl gatewaycheck completion install

Exit codes:
  0  no finding (the status agrees with the objects behind it; not proof
     of serving)
  1  a finding: stale or missing observedGeneration, no controller, a
     parent left behind, a listener not programmed, no address, a VIP
     outside the pools, data-plane pods not ready
  2  usage error (bad reference or flag)
  3  cluster/API error (the object or the Gateway API CRDs do not exist)
  130 interrupted";

/// `kubectl gatewaycheck`: is this Gateway really serving, whatever its status says.
#[derive(Debug, clap::Parser)]
#[command(
    name = "kubectl-gatewaycheck",
    bin_name = "kubectl gatewaycheck",
    version,
    about = "Is this Gateway really serving, whatever its status says",
    long_about = "Checks Gateway API status against what is behind it: each condition's observedGeneration \
against metadata.generation, the GatewayClass and whether its controller runs, an HTTPRoute's \
status.parents against spec.parentRefs, listener conditions, status.addresses against the \
implementation's LoadBalancer Service, AddressNotAssigned explained (pending Services, MetalLB \
and Cilium pools, the way out), the VIP against the pools, and the data-plane pods with the \
kubelet's reason. Read-only.",
    after_help = EXAMPLES
)]
pub struct Cli {
    /// gateway/NAME (gw/NAME) or httproute/NAME; none: every Gateway and HTTPRoute of the
    /// namespace (-A: of every namespace)
    #[arg(value_name = "gateway/NAME|httproute/NAME")]
    pub target: Option<String>,
    /// Every namespace
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// The address the Gateway should have (e.g. the repository's GATEWAY_VIP): checked against
    /// the pools and status.addresses
    #[arg(long, value_name = "IP")]
    pub vip: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub output: OutputArgs,
}

/// What to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every Gateway and HTTPRoute in scope.
    All,
    /// One Gateway.
    Gateway(String),
    /// One HTTPRoute.
    HttpRoute(String),
}

/// Parses `gateway/NAME`, `gateways/NAME`, `gw/NAME`, `httproute/NAME`, `httproutes/NAME`
/// (kind case-insensitive, `.gateway.networking.k8s.io` allowed). Errors: usage (exit 2).
pub fn parse_target(t: Option<&str>) -> Result<Target> {
    let Some(t) = t else { return Ok(Target::All) };
    let (kind, name) = t
        .split_once('/')
        .ok_or_else(|| Error::usage(format!("{t:?}: expected gateway/NAME or httproute/NAME")))?;
    cluster_loop::refs::validate_name(name).map_err(|e| Error::usage(format!("{t:?}: {e}")))?;
    let kind = kind.to_ascii_lowercase();
    let kind = kind
        .strip_suffix(".gateway.networking.k8s.io")
        .unwrap_or(&kind);
    match kind {
        "gateway" | "gateways" | "gw" => Ok(Target::Gateway(name.into())),
        "httproute" | "httproutes" => Ok(Target::HttpRoute(name.into())),
        _ => Err(Error::usage(format!(
            "{t:?}: kind {kind:?} is not checked here (gateway/NAME or httproute/NAME)"
        ))),
    }
}

/// Whether `argv` is for the shared completion handler: `__complete*`, or `completion` followed
/// by `install`, `script`, `help`, `-h` or `--help`.
pub fn is_completion_command(argv: &[std::ffi::OsString]) -> bool {
    let word = |i: usize| argv.get(i).and_then(|w| w.to_str());
    match word(1) {
        Some("__complete" | "__completeNoDesc") => true,
        Some("completion") => matches!(
            word(2),
            Some("install" | "script" | "help" | "-h" | "--help")
        ),
        _ => false,
    }
}

fn in_ns<'a>(items: &'a [Value], ns: Option<&str>) -> impl Iterator<Item = &'a Value> {
    items
        .iter()
        .filter(move |o| ns.is_none_or(|n| o["metadata"]["namespace"] == n))
}

/// Checks the objects of `target` in `ns` (`None`: every namespace) against `snap`.
/// Errors: the named object does not exist (exit 3, naming namespace and name).
pub fn check(
    snap: &Snapshot,
    target: &Target,
    ns: Option<&str>,
    vip: Option<&str>,
) -> Result<Report> {
    let named = |o: &&Value, n: &str| o["metadata"]["name"] == n;
    let gws: Vec<&Value> = match target {
        Target::All => in_ns(&snap.gateways, ns).collect(),
        Target::Gateway(n) => in_ns(&snap.gateways, ns).filter(|o| named(o, n)).collect(),
        Target::HttpRoute(_) => vec![],
    };
    let routes: Vec<&Value> = match target {
        Target::All => in_ns(&snap.routes, ns).collect(),
        Target::HttpRoute(n) => in_ns(&snap.routes, ns).filter(|o| named(o, n)).collect(),
        Target::Gateway(_) => vec![],
    };
    let missing = |kind: &str, n: &str| {
        Error::Cluster(format!(
            "{kind} {n:?} not found in namespace {}",
            ns.unwrap_or("(all)")
        ))
    };
    match target {
        Target::Gateway(n) if gws.is_empty() => return Err(missing("Gateway", n)),
        Target::HttpRoute(n) if routes.is_empty() => return Err(missing("HTTPRoute", n)),
        _ => {}
    }
    let mut objects = Vec::new();
    for gw in gws {
        let f = rules::gateway(gw, snap, vip);
        objects.push(ObjectReport::new(
            "Gateway",
            gw["metadata"]["namespace"].as_str().unwrap_or_default(),
            gw["metadata"]["name"].as_str().unwrap_or_default(),
            f,
            false,
        ));
    }
    for r in routes {
        let f = rules::route_parents(r, snap);
        objects.push(ObjectReport::new(
            "HTTPRoute",
            r["metadata"]["namespace"].as_str().unwrap_or_default(),
            r["metadata"]["name"].as_str().unwrap_or_default(),
            f,
            false,
        ));
    }
    let exit_code = i32::from(objects.iter().any(|o| o.verdict == "findings"));
    Ok(Report {
        api_version: crate::report::API_VERSION,
        kind: crate::report::KIND,
        objects,
        exit_code,
    })
}

/// One run: validate (before any kubeconfig is read), read, check, print. Returns the exit
/// code (0 or 1). Errors: usage (2), API (3).
pub async fn run(cli: Cli) -> Result<i32> {
    let target = parse_target(cli.target.as_deref())?;
    if let Some(v) = &cli.vip {
        v.parse::<std::net::IpAddr>()
            .map_err(|_| Error::usage(format!("--vip {v:?} is not an IP address")))?;
    }
    if cli.all_namespaces && target != Target::All {
        return Err(Error::usage(
            "-A/--all-namespaces checks every object: give no gateway/NAME or httproute/NAME with it",
        ));
    }
    let _signals = ExitOnSignal::start("nothing changed (gatewaycheck only reads)");
    let conn = cli.cluster.connect().await?;
    let ns = (!cli.all_namespaces).then(|| conn.namespace.clone());
    let snap = snapshot::take(&conn, &conn.namespace).await?;
    let report = check(&snap, &target, ns.as_deref(), cli.vip.as_deref())?;
    if cli.output.output.is_machine() {
        print_machine(cli.output.output, &report)?;
    } else {
        write_stdout(&render(&report, &cli.output.stdout_painter()))?;
    }
    Ok(report.exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(parse_target(None).unwrap(), Target::All);
        assert_eq!(
            parse_target(Some("gw/eg")).unwrap(),
            Target::Gateway("eg".into())
        );
        assert_eq!(
            parse_target(Some("HTTPRoute.gateway.networking.k8s.io/web")).unwrap(),
            Target::HttpRoute("web".into())
        );
        assert_eq!(parse_target(Some("svc/x")).unwrap_err().exit_code(), 2);
        assert_eq!(
            parse_target(Some("gateway/Bad_Name"))
                .unwrap_err()
                .exit_code(),
            2
        );
        assert_eq!(parse_target(Some("eg")).unwrap_err().exit_code(), 2);
    }
}
