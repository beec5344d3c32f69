//! The command line and the orchestration of one run.

use crate::cluster::{self, Ephemeral, RequestCounter, WatchTarget};
use crate::parse::ProbeLog;
use crate::probe::{Carrier, DEFAULT_IMAGE, ProbeOptions, SourcePod, TOOLS_IMAGE};
use crate::report::{self, Inputs};
use crate::validate::{Host, parse_git_url, parse_host, parse_port};
use crate::workstation;
use cluster_loop::cli::ClusterArgs;
use cluster_loop::error::{Error, Result};
use cluster_loop::output::{OutputArgs, OutputFormat, print_machine, write_stdout};
use cluster_loop::refs::{Kind, ResourceRef};
use cluster_loop::signals::Signals;
use cluster_loop::wait::Progress;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

const EXAMPLES: &str = "\
Examples:
  # What does a pod in flux-system get for the Git host; is it the VIP?
  kubectl podresolve gitea.prod.example.dev --expect 192.168.2.20 \\
      -n flux-system

  # Resolve inside source-controller's own network namespace (ephemeral
  # container; falls back to a probe pod copying its namespace, node,
  # dnsPolicy, dnsConfig and hostAliases)
  kubectl podresolve gitea.prod.example.dev \\
      --from deploy/source-controller -n flux-system

  # Several names, absolute (trailing dot: no search list), machine output
  kubectl podresolve registry gitea.example.local. -o json

  # TLS handshake and git ls-remote from the pod (default image for these:
  # nicolaka/netshoot, which has openssl and git)
  kubectl podresolve gitea.prod.example.dev --tls \\
      --git https://gitea.prod.example.dev/flux/fleet.git

  # A Service named completion: only `completion install|script` is the
  # shell-completion command (`-- completion install` resolves both names)
  kubectl podresolve completion -n team

  # Install shell completion (kubectl 1.26+)
  kubectl podresolve completion install

  # Remove probe objects left behind by a killed run
  kubectl podresolve --cleanup -A

Exit codes:
  0  every name resolved in the pod (and matched --expect; TLS verified;
     git reachable)
  1  the pod cannot resolve a name, --expect mismatch, TLS not verified,
     git not reachable, or the probe container could not start (e.g. an
     image pull failure)
  2  usage error (bad host, flag, reference)
  3  cluster/API error: the -n namespace does not exist, the --from
     pod/deploy does not exist on that context (names both) or has no
     Running pod, or the probe did not finish before --timeout
  130 interrupted (the probe was deleted first)";

/// `kubectl podresolve`: resolve a name from inside the pod network and explain the answer.
#[derive(Debug, clap::Parser)]
#[command(
    name = "kubectl-podresolve",
    bin_name = "kubectl podresolve",
    version,
    about = "Resolve a name from inside the pod network and explain the answer",
    long_about = "Runs a throwaway probe (a Job by default) that prints the pod's /etc/resolv.conf, then for \
each HOST `getent ahosts` (libc: /etc/hosts, search list, ndots) and `nslookup` (DNS wire). \
Explains the answer from the pod's resolv.conf (the exact FQDNs queried, in order), the CoreDNS \
Corefile (which plugin answers, in CoreDNS's fixed plugin order), NodeLocal DNSCache, and shows \
the workstation's own answer with a verdict: same / differs / pod cannot resolve.",
    after_help = EXAMPLES
)]
pub struct Cli {
    /// Host names (RFC 1123, optional trailing dot = absolute) or IP addresses
    #[arg(value_name = "HOST", required_unless_present = "cleanup")]
    pub hosts: Vec<String>,
    /// Expected address(es) in the pod; exit 1 when the pod's addresses of those families differ
    #[arg(long, value_name = "IP[,IP]")]
    pub expect: Option<String>,
    /// Resolve from inside this pod's network (ephemeral container): pod/NAME or deploy/NAME
    #[arg(long, value_name = "pod/NAME|deploy/NAME")]
    pub from: Option<String>,
    /// Run the probe on this node (spec.nodeName)
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
    /// Probe image; needs sh, getent and nslookup, and openssl/git for --tls/--git [default:
    /// alpine:3.22 (DNS only); nicolaka/netshoot:v0.14 with --tls or --git]
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Deadline of the probe (Go duration: 30s, 2m): its activeDeadlineSeconds, and what the
    /// countdown shows. Then the command waits up to 15s more for the API server to report
    /// the probe's end and serve its log (a pod killed at its deadline still has output), and
    /// gives up (exit 3)
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub timeout: String,
    /// Probe carrier: job (TTL-cleaned) or pod
    #[arg(long = "kind", value_enum, default_value = "job")]
    pub carrier: Carrier,
    /// TLS handshake from the pod to each host (default port 443)
    #[arg(long, value_name = "PORT", num_args = 0..=1, require_equals = true, default_missing_value = "443")]
    pub tls: Option<String>,
    /// `git ls-remote URL HEAD` from the pod
    #[arg(long, value_name = "URL")]
    pub git: Option<String>,
    /// Delete leftover probe Jobs/Pods (label app.kubernetes.io/managed-by=kubectl-podresolve)
    #[arg(long, conflicts_with_all = ["hosts", "expect", "from", "tls", "git"])]
    pub cleanup: bool,
    /// With --cleanup: all namespaces
    #[arg(short = 'A', long, requires = "cleanup")]
    pub all_namespaces: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub output: OutputArgs,
}

/// The probe image of a run: `--image`, else [`DEFAULT_IMAGE`] for DNS only, else
/// [`TOOLS_IMAGE`] when `--tls` or `--git` asks for openssl or git (alpine has neither).
pub fn probe_image(cli: &Cli) -> String {
    match &cli.image {
        Some(i) => i.clone(),
        None if cli.tls.is_some() || cli.git.is_some() => TOOLS_IMAGE.to_string(),
        None => DEFAULT_IMAGE.to_string(),
    }
}

/// Extra time after `--timeout` for the API server to report the probe's end and serve its
/// log before the command gives up.
pub const COLLECT_GRACE: Duration = Duration::from_secs(15);

/// Validated arguments.
#[derive(Debug)]
pub struct Validated {
    /// Hosts.
    pub hosts: Vec<Host>,
    /// --expect.
    pub expect: Option<Vec<std::net::IpAddr>>,
    /// --tls port.
    pub tls_port: Option<u16>,
    /// --git URL.
    pub git_url: Option<String>,
    /// --timeout.
    pub timeout: Duration,
    /// --from reference.
    pub from: Option<ResourceRef>,
}

/// Validate everything before touching the cluster.
///
/// Errors: [`Error::Usage`] (exit 2) naming the bad value.
pub fn validate(cli: &Cli) -> Result<Validated> {
    let hosts = cli
        .hosts
        .iter()
        .map(|h| parse_host(h).map_err(|e| Error::usage(e.to_string())))
        .collect::<Result<Vec<_>>>()?;
    let expect = cli
        .expect
        .as_deref()
        .map(workstation::parse_expect)
        .transpose()
        .map_err(Error::usage)?;
    let tls_port = cli
        .tls
        .as_deref()
        .map(parse_port)
        .transpose()
        .map_err(|e| Error::usage(e.to_string()))?;
    let git_url = cli
        .git
        .as_deref()
        .map(parse_git_url)
        .transpose()
        .map_err(|e| Error::usage(e.to_string()))?;
    let timeout = cluster_loop::duration::parse_go_duration(&cli.timeout)
        .map_err(|e| Error::usage(format!("--timeout {:?}: {e}", cli.timeout)))?;
    if timeout < Duration::from_secs(5) {
        return Err(Error::usage(format!(
            "--timeout {} is too short: a probe pod needs at least 5s to be scheduled and run",
            cli.timeout
        )));
    }
    let from = cli
        .from
        .as_deref()
        .map(|f| ResourceRef::parse(f, &[Kind::Pod, Kind::Deployment]))
        .transpose()?;
    if let Some(node) = &cli.node {
        cluster_loop::refs::validate_name(node)
            .map_err(|e| Error::usage(format!("--node {node:?}: {e}")))?;
    }
    if let Some(image) = &cli.image {
        cluster_loop::probe::validate_image(image).map_err(|e| {
            Error::usage(format!("--image {image:?} is not an image reference: {e}"))
        })?;
    }
    Ok(Validated {
        hosts,
        expect,
        tls_port,
        git_url,
        timeout,
        from,
    })
}

/// The note about probes earlier runs left in `namespace`, with the command that removes them.
pub fn leftover_note(left: &[cluster_loop::probe::lifecycle::Leftover], namespace: &str) -> String {
    let list = left
        .iter()
        .map(|l| format!("{} ({}, created {})", l.object, l.phase, l.created))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "note: {} probe object{} left by an earlier run (killed before it could delete {}): {list}; \
         remove with: kubectl podresolve --cleanup -n {namespace}",
        left.len(),
        if left.len() == 1 { "" } else { "s" },
        if left.len() == 1 { "it" } else { "them" },
    )
}

/// Whether `argv` (program name first) is for the shared completion handler
/// ([`cluster_loop::completion::handle`]): `__complete`/`__completeNoDesc`, or `completion`
/// followed by `install`, `script`, `help`, `-h` or `--help`. A bare `completion` (or
/// `completion` followed by other hosts or flags) is a HOST: a Service may be named so.
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

/// Why no ephemeral container is added to `pod`, a pod without `spec.nodeName`: "not
/// scheduled", with its `PodScheduled=False` reason and message when the scheduler (or, for
/// `schedulingGates`, the API server: `SchedulingGated`, Kubernetes >= 1.27) set one.
pub fn not_scheduled_reason(pod: &k8s_openapi::api::core::v1::Pod) -> String {
    let why = cluster_loop::conditions::pod_not_scheduled(pod)
        .map(|c| {
            let reason = c.reason.as_deref().unwrap_or("PodScheduled=False");
            match c.message.as_deref().filter(|m| !m.is_empty()) {
                Some(m) => format!(": {reason}: {m}"),
                None => format!(": {reason}"),
            }
        })
        .unwrap_or_default();
    format!(
        "pod/{} is not scheduled (no node{why}), so an ephemeral container in it would never run",
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

pub use cluster_loop::signals::EXIT_INTERRUPTED;

/// Where the probe's create stands, for cleanup and for what the run reports.
/// Not sent (or an ephemeral container): nothing to delete.
const CREATE_NOT_SENT: u8 = 0;
/// POSTed, no answer yet (interrupted, deadline, transport error): it may exist.
const CREATE_IN_FLIGHT: u8 = 1;
/// The server answered 201: it exists until deleted.
const CREATE_DONE: u8 = 2;
/// The server answered with an error status: nothing was created.
const CREATE_REFUSED: u8 = 3;

/// Bound on the DELETE of a probe whose create was answered (it exists).
const DELETE_WITHIN: Duration = Duration::from_secs(20);
/// Bound on the DELETE of a probe whose create got no answer (it may exist; the server is
/// already not answering, so the wait is kept short).
const DELETE_IN_DOUBT_WITHIN: Duration = Duration::from_secs(5);

/// Run the command; returns the exit code (errors carry their own).
pub async fn run(cli: Cli) -> Result<i32> {
    // clap's `requires = "cleanup"` is not enforced: the flag it names has the default
    // `false`, which clap counts as present. Decided here, before any kubeconfig is read.
    if cli.all_namespaces && !cli.cleanup {
        return Err(Error::usage(
            "-A/--all-namespaces only works with --cleanup: a probe runs in one namespace (-n NAMESPACE)",
        ));
    }
    let v = validate(&cli)?;
    if cli.cleanup {
        return cleanup_mode(&cli).await;
    }

    let mut signals = Signals::install();
    let conn = cli.cluster.connect().await?;
    let progress = Progress::for_output("podresolve", &cli.output);
    let n = RequestCounter::default();
    let deadline_secs = v.timeout.as_secs().max(5) as i64;
    let mut opts = probe_options(&cli, &v, &conn, deadline_secs);
    if (v.tls_port.is_some() || v.git_url.is_some()) && opts.image == DEFAULT_IMAGE {
        progress.println(format!(
            "note: {DEFAULT_IMAGE} has no openssl/git; --tls/--git report 'not found in image' unless --image has them"
        ));
    }

    // The workstation answers and the cluster's DNS config, concurrently with the probe.
    let ws_task = on_workstation(&v.hosts);
    let started = tokio::time::Instant::now();
    let probe_deadline = started + v.timeout;
    let local_deadline = probe_deadline + COLLECT_GRACE;
    // Set once one of the kube-system GETs has completed: the create waits for it, so no probe
    // is POSTed to a server that has answered nothing (then nothing can have been created).
    let (answered_tx, mut answered_rx) = tokio::sync::watch::channel(false);
    let dns_fut = cluster_dns_until(&conn, &n, &answered_tx, local_deadline);

    let create_state = AtomicU8::new(CREATE_NOT_SENT);
    // `job NS/NAME` of the create once it is sent (for the deadline message).
    let created_ref = std::sync::OnceLock::<String>::new();
    let mut carrier_name = cli.carrier.kind();
    let mut fallback_reason: Option<String> = None;
    let mut source: Option<SourcePod> = None;
    // The countdown is --timeout; past it, the last 15s to collect the result count down.
    let grace = count_down(&progress, probe_deadline, local_deadline);
    let server = conn.server.trim_end_matches('/').to_string();
    let wait_secs = (v.timeout + COLLECT_GRACE).as_secs();

    let work = async {
        let mut ephemeral_pod: Option<(String, String)> = None;
        if let Some(target) = &v.from {
            let (pod, src, reason) =
                attach_from(&conn, target, &opts, &n, &progress, &mut carrier_name).await?;
            ephemeral_pod = pod;
            fallback_reason = reason;
            source = Some(src.clone());
            opts.source = Some(src);
        }
        let (ns, watch_target, container, is_ephemeral) = match &ephemeral_pod {
            Some((ns, pod)) => (
                ns.clone(),
                WatchTarget::PodName(pod.clone()),
                opts.name(),
                true,
            ),
            None => {
                create_job(
                    &conn,
                    &opts,
                    cli.carrier,
                    carrier_name,
                    &n,
                    &progress,
                    &mut answered_rx,
                    &create_state,
                    &created_ref,
                    &server,
                )
                .await?
            }
        };
        let watch = cluster::ProbeWatch {
            namespace: ns,
            target: watch_target,
            container,
            ephemeral: is_ephemeral,
        };
        watch_and_log(&conn, &watch, local_deadline, &progress, &n).await
    };
    // Every step is bounded by the deadline, including a create or GET the server never
    // answers (kube's own read timeout is minutes).
    let work = within(
        local_deadline,
        work,
        &create_state,
        &created_ref,
        &server,
        wait_secs,
    );

    let (outcome, dns) = {
        let sig = signals.recv();
        tokio::pin!(sig);
        tokio::pin!(work);
        let joined = async { tokio::join!(&mut work, dns_fut) };
        tokio::select! {
            (w, d) = joined => (Ok(w), Some(d)),
            s = &mut sig => (Err(s), None),
        }
    };

    // Cleanup: a DELETE by name whenever the create was answered 201 or got no answer (it may
    // exist); never for a create that was not sent or was refused.
    let state = create_state.load(Ordering::SeqCst);
    let probe_ref = format!("{carrier_name} {}/{}", opts.target_namespace(), opts.name());
    let expiry = expiry(cli.carrier, deadline_secs, opts.target_namespace());
    let cleanup_result = delete_after(
        &conn,
        &opts,
        cli.carrier,
        state,
        &n,
        &progress,
        &probe_ref,
        &expiry,
    )
    .await;
    grace.abort();
    progress.finish();

    let Some((finished, log)) = settle(outcome, carrier_name, &opts.name(), || {
        interrupted_message(state, cleanup_result, &probe_ref, &expiry)
    })?
    else {
        return Ok(EXIT_INTERRUPTED);
    };
    let workstation = ws_task
        .await
        .map_err(|e| Error::Other(format!("workstation resolver task failed: {e}")))?;
    let done = Done {
        finished,
        log,
        carrier_name,
        source,
        fallback_reason,
        dns: dns.unwrap_or_default(),
        workstation,
        api_requests: n.get(),
    };
    report_and_print(&cli, &v, &opts, done)
}

/// Creates the probe (a Job, or a Pod with --carrier pod) once the API server has answered a
/// GET, noting probes an earlier run left; records how far the create got in `create_state`
/// (and `created_ref`) for the cleanup. Returns where to watch it: (namespace, target,
/// container, ephemeral).
#[allow(clippy::too_many_arguments)]
async fn create_job(
    conn: &cluster_loop::cli::Connection,
    opts: &ProbeOptions,
    carrier: Carrier,
    carrier_name: &str,
    n: &RequestCounter,
    progress: &Progress,
    answered_rx: &mut tokio::sync::watch::Receiver<bool>,
    create_state: &AtomicU8,
    created_ref: &std::sync::OnceLock<String>,
    server: &str,
) -> Result<(String, WatchTarget, String, bool)> {
    progress.set_status(format!("waiting for the API server {server}"));
    // Err: the sender is gone, i.e. the GETs finished: go on.
    let _ = answered_rx.wait_for(|a| *a).await;
    // Probes an earlier run could not delete (killed with SIGKILL): say so, once.
    n.hit();
    if let Ok(left) = cluster_loop::probe::lifecycle::leftovers(
        conn,
        crate::probe::OWNER,
        opts.target_namespace(),
    )
    .await
        && !left.is_empty()
    {
        progress.println(leftover_note(&left, opts.target_namespace()));
    }
    if let Some(node) = &opts.node {
        cluster::check_node(conn, node, n).await?;
    }
    let _ = created_ref.set(format!(
        "{carrier_name} {}/{}",
        opts.target_namespace(),
        opts.name()
    ));
    create_state.store(CREATE_IN_FLIGHT, Ordering::SeqCst);
    progress.set_status(format!("creating {carrier_name} {}", opts.name()));
    match cluster::create_probe(conn, opts, carrier, n).await {
        Ok(()) => create_state.store(CREATE_DONE, Ordering::SeqCst),
        Err(e) => {
            // The server answered with an error status: nothing was created, so
            // there is nothing to delete. Transport errors keep the delete (it
            // may exist).
            if e.status_code().is_some() {
                create_state.store(CREATE_REFUSED, Ordering::SeqCst);
            }
            return Err(e);
        }
    }
    Ok((
        opts.target_namespace().to_string(),
        WatchTarget::RunLabel(opts.run_selector()),
        "probe".to_string(),
        false,
    ))
}

/// `--cleanup`: deletes the probe objects earlier runs left (this namespace, or every one
/// with -A) and lists them.
async fn cleanup_mode(cli: &Cli) -> Result<i32> {
    let conn = cli.cluster.connect().await?;
    let ns = (!cli.all_namespaces).then(|| conn.namespace.clone());
    let swept = cluster::sweep(&conn, ns.as_deref()).await?;
    if cli.output.output.is_machine() {
        print_machine(cli.output.output, &swept)?;
    } else if swept.is_empty() {
        write_stdout(&format!(
            "no podresolve probe objects in {}\n",
            ns.as_deref()
                .map(|n| format!("namespace {n}"))
                .unwrap_or_else(|| "any namespace".into())
        ))?;
    } else {
        write_stdout(&swept.lines())?;
    }
    Ok(0)
}

/// The error when the run's deadline (--timeout + 15s) passes, by how far the create got
/// (`state`: one of the `CREATE_*` values; `created`: `job NS/NAME` once sent).
fn deadline_error(state: u8, server: &str, wait_secs: u64, created: Option<&str>) -> Error {
    Error::Cluster(match state {
        CREATE_NOT_SENT => format!(
            "the API server {server} did not answer within {wait_secs}s (--timeout + 15s): nothing was created"
        ),
        CREATE_IN_FLIGHT => format!(
            "the API server {server} did not answer the create of {} within {wait_secs}s (--timeout + 15s)",
            created.unwrap_or("the probe")
        ),
        _ => format!(
            "the probe did not finish within {wait_secs}s (--timeout + 15s): the API server {server} stopped answering"
        ),
    })
}

/// Cleanup: a DELETE by name whenever the create was answered 201 or got no answer (it may
/// exist); never for a create that was not sent or was refused (`None`). A failed DELETE is
/// a warning line (`expiry`: how the probe goes away by itself).
#[allow(clippy::too_many_arguments)]
async fn delete_after(
    conn: &cluster_loop::cli::Connection,
    opts: &ProbeOptions,
    carrier: Carrier,
    state: u8,
    n: &RequestCounter,
    progress: &Progress,
    probe_ref: &str,
    expiry: &str,
) -> Option<Result<()>> {
    match state {
        CREATE_DONE | CREATE_IN_FLIGHT => {
            let within = if state == CREATE_DONE {
                DELETE_WITHIN
            } else {
                DELETE_IN_DOUBT_WITHIN
            };
            let r = cluster::delete_probe(
                conn,
                opts.target_namespace(),
                &opts.name(),
                carrier,
                within,
                n,
            )
            .await;
            match (&r, state) {
                (Err(e), CREATE_DONE) => progress.println(format!("warning: cleanup failed: {e}")),
                (Err(_), _) => progress.println(format!(
                    "warning: the API server answered neither the create of {probe_ref} nor its DELETE (within {}s): it may or may not exist; if it does, {expiry}",
                    within.as_secs()
                )),
                (Ok(()), _) => {}
            }
            Some(r)
        }
        _ => None,
    }
}

/// What an interrupted run left: the probe deleted, not deleted, or never created.
fn interrupted_message(
    state: u8,
    cleanup_result: Option<Result<()>>,
    probe_ref: &str,
    expiry: &str,
) -> String {
    match (state, cleanup_result) {
        (CREATE_DONE, Some(Ok(()))) => format!("probe {probe_ref} deleted"),
        (CREATE_DONE, _) => format!("probe {probe_ref} NOT deleted (see warning above)"),
        (CREATE_IN_FLIGHT, Some(Ok(()))) => format!(
            "the create of {probe_ref} had no answer yet; its DELETE succeeded (or found nothing); should the create still land, {expiry}"
        ),
        (CREATE_IN_FLIGHT, _) => {
            format!("the create of {probe_ref} had no answer; see the warning above")
        }
        _ => "nothing was created".into(),
    }
}

/// `--from pod/NAME|deploy/NAME`: an ephemeral container in that pod when its node can start
/// one, else (not scheduled, or refused) a probe copying its DNS settings. Returns the pod
/// (`namespace`, `name`) when attached, the source pod, and why it fell back; sets
/// `carrier_name` to `ephemeral` when attached.
async fn attach_from(
    conn: &cluster_loop::cli::Connection,
    target: &ResourceRef,
    opts: &ProbeOptions,
    n: &RequestCounter,
    progress: &Progress,
    carrier_name: &mut &'static str,
) -> Result<(Option<(String, String)>, SourcePod, Option<String>)> {
    let ns = conn.namespace.clone();
    let pod = cluster::resolve_from(conn, target, &ns, n).await?;
    let src = SourcePod::from_pod(&pod);
    // An ephemeral container runs only where the kubelet of the pod's node starts it:
    // a pod without spec.nodeName (not scheduled, e.g. held by schedulingGates or
    // unschedulable) would keep it waiting forever, and it could never be removed
    // from the pod spec. Probe with a copy of its DNS settings instead.
    let attached = match &src.node_name {
        Some(_) => cluster::attach_ephemeral(conn, &pod, opts, n).await?,
        None => Ephemeral::Refused(not_scheduled_reason(&pod)),
    };
    match attached {
        Ephemeral::Attached => {
            *carrier_name = "ephemeral";
            let at = Some((src.namespace.clone(), src.name.clone()));
            Ok((at, src, None))
        }
        Ephemeral::Refused(reason) => {
            progress.println(format!(
                "ephemeral container not {} pod/{} ({reason}); falling back to a probe {} copying its namespace, {}dnsPolicy, dnsConfig and hostAliases",
                if src.node_name.is_some() { "allowed on" } else { "added to" },
                src.name,
                carrier_name,
                if src.node_name.is_some() { "node, " } else { "" },
            ));
            Ok((None, src, Some(reason)))
        }
    }
}

/// What a finished probe run hands to the report.
struct Done {
    finished: cluster::Finished,
    log: String,
    carrier_name: &'static str,
    source: Option<SourcePod>,
    fallback_reason: Option<String>,
    dns: report::ClusterDns,
    workstation: Vec<workstation::WorkstationAnswer>,
    api_requests: u32,
}

/// Parses the probe's log, builds the report and prints it; returns its exit code. Errors:
/// the probe printed no podresolve output (exit 1, naming the pod and its image).
fn report_and_print(cli: &Cli, v: &Validated, opts: &ProbeOptions, d: Done) -> Result<i32> {
    let parsed = ProbeLog::parse(&d.log);
    if parsed.version.is_none() {
        return Err(Error::Finding(format!(
            "the probe pod {} printed no podresolve output (exit code {:?}{}): is {} a shell image with sh?",
            d.finished.pod,
            d.finished.exit_code,
            d.finished
                .failure
                .as_deref()
                .map(|f| format!(", {f}"))
                .unwrap_or_default(),
            opts.image
        )));
    }
    let mut info = cluster::probe_info(
        opts,
        d.carrier_name,
        Some(&d.finished),
        d.source.as_ref(),
        d.fallback_reason.clone(),
    );
    info.api_requests = d.api_requests;
    let rep = report::build(Inputs {
        log: &parsed,
        hosts: &v.hosts,
        cluster: &d.dns,
        workstation: d.workstation,
        expect: v.expect.clone(),
        probe: info,
    });
    match cli.output.output {
        OutputFormat::Table => write_stdout(&report::render_text(&rep))?,
        f => print_machine(f, &rep)?,
    }
    if d.carrier_name == "ephemeral" {
        eprintln!(
            "note: the ephemeral container {} has exited; it stays listed in pod/{} until the pod is replaced (Kubernetes cannot remove ephemeral containers)",
            opts.name(),
            d.source.as_ref().map(|s| s.name.as_str()).unwrap_or("?")
        );
    }
    Ok(rep.exit_code)
}

/// The probe's options from the flags: one pod for every host, the deadline in seconds.
fn probe_options(
    cli: &Cli,
    v: &Validated,
    conn: &cluster_loop::cli::Connection,
    deadline_secs: i64,
) -> ProbeOptions {
    ProbeOptions {
        owner: crate::probe::OWNER,
        namespace: conn.namespace.clone(),
        image: probe_image(cli),
        hosts: v.hosts.iter().map(Host::arg).collect(),
        tls_port: v.tls_port,
        git_url: v.git_url.clone(),
        git_ref: None,
        git_secret: None,
        deadline_secs,
        node: cli.node.clone(),
        run_id: crate::probe::new_run_id(),
        source: None,
        http: vec![],
    }
}

/// How a probe that could not be deleted goes away by itself (its activeDeadlineSeconds,
/// a Job's ttlSecondsAfterFinished) or by hand (`--cleanup`).
fn expiry(carrier: Carrier, deadline_secs: i64, namespace: &str) -> String {
    format!(
        "it stops at its activeDeadlineSeconds ({deadline_secs}s){}, or run `kubectl podresolve --cleanup -n {namespace}`",
        if carrier == Carrier::Job {
            format!(
                " and ttlSecondsAfterFinished ({}s) removes it",
                crate::probe::TTL_AFTER_FINISHED_SECS
            )
        } else {
            String::new()
        }
    )
}

/// The workstation's answers for `hosts`, resolved on a blocking thread beside the probe.
fn on_workstation(hosts: &[Host]) -> tokio::task::JoinHandle<Vec<workstation::WorkstationAnswer>> {
    let hosts: Vec<String> = hosts.iter().map(Host::arg).collect();
    tokio::task::spawn_blocking(move || {
        hosts
            .iter()
            .map(|h| workstation::resolve(h))
            .collect::<Vec<_>>()
    })
}

/// The cluster's DNS configuration (CoreDNS Corefile, kube-dns Service, ...), or what was
/// not answered by `deadline`; `answered` is set once the API server has answered a GET.
async fn cluster_dns_until(
    conn: &cluster_loop::cli::Connection,
    n: &RequestCounter,
    answered: &tokio::sync::watch::Sender<bool>,
    deadline: tokio::time::Instant,
) -> report::ClusterDns {
    tokio::time::timeout_at(deadline, cluster::read_cluster_dns(conn, n, answered))
        .await
        .unwrap_or_else(|_| report::ClusterDns {
            corefile: Some(Err(
                "the API server did not answer GET ConfigMap kube-system/coredns before the deadline"
                    .into(),
            )),
            ..Default::default()
        })
}

/// The countdown is --timeout; past it, the last 15s to collect the result count down.
fn count_down(
    progress: &Progress,
    probe_deadline: tokio::time::Instant,
    local_deadline: tokio::time::Instant,
) -> tokio::task::JoinHandle<()> {
    progress.set_deadline(probe_deadline);
    let p = progress.clone();
    tokio::spawn(async move {
        tokio::time::sleep_until(probe_deadline).await;
        p.set_deadline(local_deadline);
        p.set_status(format!(
            "--timeout passed: waiting up to {}s more for the probe's end and its log",
            COLLECT_GRACE.as_secs()
        ));
    })
}

/// Watches the probe to its end and reads its log.
async fn watch_and_log(
    conn: &cluster_loop::cli::Connection,
    watch: &cluster::ProbeWatch,
    deadline: tokio::time::Instant,
    progress: &Progress,
    n: &RequestCounter,
) -> Result<(cluster::Finished, String)> {
    let finished = cluster::watch_probe(conn, watch, deadline, progress, n).await?;
    let log = cluster::read_log(conn, &watch.namespace, &finished.pod, &watch.container, n).await?;
    Ok((finished, log))
}

/// `work` bounded by `deadline`, including a create or GET the server never answers (kube's
/// own read timeout is minutes): past it, [`deadline_error`] by how far the create got.
async fn within<T>(
    deadline: tokio::time::Instant,
    work: impl std::future::Future<Output = Result<T>>,
    create_state: &AtomicU8,
    created_ref: &std::sync::OnceLock<String>,
    server: &str,
    wait_secs: u64,
) -> Result<T> {
    match tokio::time::timeout_at(deadline, work).await {
        Ok(r) => r,
        Err(_) => Err(deadline_error(
            create_state.load(Ordering::SeqCst),
            server,
            wait_secs,
            created_ref.get().map(String::as_str),
        )),
    }
}

/// The probe's result, `None` when interrupted (saying what was left, from `left`), or its
/// error (with a note that an ephemeral container stays in the pod spec).
fn settle<T>(
    outcome: std::result::Result<Result<T>, &'static str>,
    carrier_name: &str,
    probe_name: &str,
    left: impl FnOnce() -> String,
) -> Result<Option<T>> {
    match outcome {
        Err(signal) => {
            eprintln!("interrupted by {signal}: {}", left());
            Ok(None)
        }
        Ok(Err(e)) => {
            if carrier_name == "ephemeral" {
                eprintln!(
                    "note: the ephemeral container {probe_name} stays listed in the pod spec (Kubernetes cannot remove ephemeral containers)"
                );
            }
            Err(e)
        }
        Ok(Ok(x)) => Ok(Some(x)),
    }
}
