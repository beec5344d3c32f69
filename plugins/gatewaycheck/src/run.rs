//! The command line and the orchestration of one run.

use crate::probe::Probes;
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
  kubectl gatewaycheck gateway/eg -n infra --vip 172.18.255.200

  # Everything in every namespace, machine output
  kubectl gatewaycheck -A -o json

  # Is it really serving? One request per listener and route hostname from
  # a probe pod, and each hostname as pods resolve it
  kubectl gatewaycheck gateway/eg -n infra --probe

  # Install shell completion (kubectl 1.26+)
  kubectl gatewaycheck completion install

Exit codes:
  0  no finding (the status agrees with the objects behind it; with
     --probe every request answered: serving)
  1  a finding: stale or missing observedGeneration, no controller, a
     parent left behind, a listener not programmed, no address, a VIP
     outside the pools or not the Gateway's address, data-plane pods not
     ready; with --probe a request
     that got no answer, a refused certificate, a 404 for a route or a 5xx,
     a hostname pods resolve to another address
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
and Cilium pools, the way out), the VIP against the pools and the Gateway's address, and the \
data-plane pods with the kubelet's reason. Read-only unless --probe.",
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
    /// Send an HTTP(S) request per listener and route hostname to the Gateway's address from a
    /// probe pod (a Job in the namespace of -n, deleted at the end) and resolve each hostname
    /// there: the only way to say "serving"
    #[arg(long)]
    pub probe: bool,
    /// Probe image (needs sh, curl, openssl, getent, nslookup)
    #[arg(long, value_name = "IMAGE", default_value = cluster_loop::probe::TOOLS_IMAGE, requires = "probe")]
    pub image: String,
    /// How long the probe may take (e.g. 60s, 2m)
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "60s",
        requires = "probe"
    )]
    pub timeout: String,
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

/// The Gateways `target` names in `ns` (`None`: every namespace).
pub fn gateways_in_scope<'a>(
    snap: &'a Snapshot,
    target: &Target,
    ns: Option<&str>,
) -> Vec<&'a Value> {
    match target {
        Target::All => in_ns(&snap.gateways, ns).collect(),
        Target::Gateway(n) => in_ns(&snap.gateways, ns)
            .filter(|o| o["metadata"]["name"] == n.as_str())
            .collect(),
        Target::HttpRoute(_) => vec![],
    }
}

/// Checks the objects of `target` in `ns` (`None`: every namespace) against `snap`, with the
/// `--probe` results of its Gateways (a Gateway is "serving" only with a probe that proved it).
/// Errors: the named object does not exist (exit 3, naming namespace and name).
pub fn check(
    snap: &Snapshot,
    target: &Target,
    ns: Option<&str>,
    vip: Option<&str>,
    probes: &Probes,
) -> Result<Report> {
    let named = |o: &&Value, n: &str| o["metadata"]["name"] == n;
    let gws = gateways_in_scope(snap, target, ns);
    let routes: Vec<&Value> = match target {
        Target::All => in_ns(&snap.routes, ns).collect(),
        Target::HttpRoute(n) => in_ns(&snap.routes, ns).filter(|o| named(o, n)).collect(),
        Target::Gateway(_) => vec![],
    };
    let missing = |kind: &str, n: &str| {
        Error::Cluster(format!(
            "{kind} {n:?} not found in namespace {}; list what exists with: kubectl get {} -A",
            ns.unwrap_or("(all)"),
            kind.to_lowercase()
        ))
    };
    match target {
        Target::Gateway(n) if gws.is_empty() => return Err(missing("Gateway", n)),
        Target::HttpRoute(n) if routes.is_empty() => return Err(missing("HTTPRoute", n)),
        _ => {}
    }
    let mut objects = Vec::new();
    for gw in gws {
        let mut f = rules::gateway(gw, snap, vip);
        let probe = probes.get(&rules::object_ref("Gateway", gw));
        let served = probe.is_some_and(|p| {
            let (found, served) = crate::probe::judge(gw, p);
            f.extend(found);
            served
        });
        let mut o = ObjectReport::new(
            "Gateway",
            gw["metadata"]["namespace"].as_str().unwrap_or_default(),
            gw["metadata"]["name"].as_str().unwrap_or_default(),
            f,
            served,
        );
        o.probe = probe.cloned();
        objects.push(o);
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
    let timeout = cluster_loop::duration::parse_go_duration(&cli.timeout)
        .map_err(|e| Error::usage(format!("--timeout {:?}: {e}", cli.timeout)))?;
    if cli.probe {
        cluster_loop::probe::validate_image(&cli.image)
            .map_err(|e| Error::usage(format!("--image {:?}: {e}", cli.image)))?;
        if timeout < std::time::Duration::from_secs(5) {
            return Err(Error::usage(format!(
                "--timeout {:?}: at least 5s (a probe pod has to start)",
                cli.timeout
            )));
        }
    }
    let signals =
        (!cli.probe).then(|| ExitOnSignal::start("nothing changed (gatewaycheck only reads)"));
    let conn = cli.cluster.connect().await?;
    let ns = (!cli.all_namespaces).then(|| conn.namespace.clone());
    let snap = snapshot::take(&conn, &conn.namespace).await?;
    let probes = if cli.probe {
        drop(signals);
        let gws = gateways_in_scope(&snap, &target, ns.as_deref());
        match crate::probe::run(&conn, &gws, &snap, &cli.image, timeout, &cli.output).await? {
            Some(p) => p,
            None => return Ok(cluster_loop::signals::EXIT_INTERRUPTED),
        }
    } else {
        Probes::new()
    };
    let report = check(&snap, &target, ns.as_deref(), cli.vip.as_deref(), &probes)?;
    // Nothing matched in a namespace that does not exist is the cluster's answer (exit 3),
    // not a pass (trial4: `-n nope` exited 0).
    if report.objects.is_empty()
        && let Some(n) = &ns
    {
        conn.namespace_exists(n).await?;
    }
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
