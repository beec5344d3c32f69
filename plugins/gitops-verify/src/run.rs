//! The command line and one run: validate (before any kubeconfig is read), connect, check the
//! chain once or `--wait` for it ([`crate::wait`]), print.

use std::time::Duration;

use cluster_loop::cli::ClusterArgs;
use cluster_loop::error::{Error, Result};
use cluster_loop::output::{OutputArgs, print_machine, write_stdout};
use cluster_loop::signals::EXIT_INTERRUPTED;
use tokio::sync::RwLock;
use unstick::live::Interrupt;

use crate::chain::{self, ChainReport};
use crate::links;
use crate::round::{interrupted, report, round};
use crate::session::{Options, Session, Target};

const EXAMPLES: &str = "\
Examples:
  # The whole chain for the Flux objects of flux-system
  kubectl gitops verify

  # Only what reads one source
  kubectl gitops verify --source gitrepository/flux-system

  # Read the source's remote from a pod, as source-controller does
  kubectl gitops verify --probe-source

  # Wait until the chain holds (deadline: the objects' own timeouts + margin)
  kubectl gitops verify --wait

  # CI: GitHub Actions annotations, or the ChainReport document
  kubectl gitops verify --wait --format github
  kubectl gitops verify -A -o json

Exit codes:
  0   every link holds (ok, or nothing to check there)
  1   a link is broken, or could not be judged (unknown)
  2   usage error (bad argument or flag)
  3   cluster/API error
  4   a link is still waiting (with --wait: at the deadline)
  130 interrupted (probe pods deleted)";

/// `--format` values besides `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// GitHub Actions workflow annotations (`::error title=...::...`) on stdout.
    Github,
}

/// `kubectl gitops verify`: prove the whole GitOps loop from inside the cluster, link by link.
#[derive(Debug, clap::Parser)]
#[command(
    name = "kubectl-gitops-verify",
    bin_name = "kubectl gitops verify",
    version,
    about = "Prove the whole GitOps loop from inside the cluster, link by link",
    long_about = "Walks the chain a change takes and names the first link that does not hold: \
1 the source (Ready, its artifact at the remote's branch head), 2 every Kustomization reading it \
(Ready at that revision: kubectl unstick's diagnosis), 3 the workloads of their inventories \
(Current by kstatus, with pod reasons), 4 the images (each ImagePolicy's latestRef against what \
runs, and bare tags), then DNS, Gateway and HTTP(S) from a pod. Each link is ok, waiting (with \
its deadline), broken (with what to do), unknown or not-applicable (with why). Read-only, \
except the probe Job of --probe-source, which is deleted.",
    after_help = EXAMPLES
)]
pub struct Cli {
    /// Hosts or URLs for the DNS and HTTP(S) links (none: the Gateways', HTTPRoutes' and
    /// Ingresses' of the applied inventory)
    #[arg(value_name = "HOST|URL")]
    pub targets: Vec<String>,
    /// Only this source and the Kustomizations that read it (gitrepository/NAME,
    /// ocirepository/NAME, bucket/NAME)
    #[arg(long, value_name = "KIND/NAME")]
    pub source: Option<String>,
    /// Every namespace
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Read each GitRepository's remote head from a pod in its namespace (DNS, TLS with the CA
    /// Flux holds, auth), as source-controller does, instead of from this workstation. Creates
    /// one probe Job per source (deleted; needs create jobs)
    #[arg(long)]
    pub probe_source: bool,
    /// Image of the --probe-source Job (needs sh, getent, base64 and git)
    #[arg(long, value_name = "IMAGE", default_value = cluster_loop::probe::GIT_IMAGE)]
    pub probe_image: String,
    /// Deadline of each probe Job
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
    pub probe_timeout: Duration,
    /// Watch until the chain holds, a link breaks, or the deadline passes
    #[arg(long)]
    pub wait: bool,
    /// The --wait deadline (default: the largest of the objects' own timeouts + --margin)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "wait")]
    pub timeout: Option<Duration>,
    /// Added to the largest own timeout for the default --wait deadline
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    pub margin: Duration,
    /// github: GitHub Actions annotations instead of the table
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<Format>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub output: OutputArgs,
}

fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    cluster_loop::duration::parse_go_duration(s).map_err(|e| format!("{s:?}: {e} (e.g. 90s, 5m)"))
}

/// Parses `--source`: `gitrepository/NAME` (also `gitrepositories`, `gitrepo`),
/// `ocirepository/NAME`, `bucket/NAME`, kind case-insensitive. Errors: usage (exit 2).
pub fn parse_source(s: &str) -> Result<(String, String)> {
    let (kind, name) = s.split_once('/').ok_or_else(|| {
        Error::usage(format!(
            "--source {s:?}: expected KIND/NAME, e.g. gitrepository/flux-system"
        ))
    })?;
    cluster_loop::refs::validate_name(name)
        .map_err(|e| Error::usage(format!("--source {s:?}: {e}")))?;
    let kind = kind.to_ascii_lowercase();
    let kind = kind
        .strip_suffix(".source.toolkit.fluxcd.io")
        .unwrap_or(&kind);
    let k = match kind {
        "gitrepository" | "gitrepositories" | "gitrepo" => "GitRepository",
        "ocirepository" | "ocirepositories" | "ocirepo" => "OCIRepository",
        "bucket" | "buckets" => "Bucket",
        _ => {
            return Err(Error::usage(format!(
                "--source {s:?}: kind {kind:?} is not a Flux source (gitrepository, ocirepository or bucket)"
            )));
        }
    };
    Ok((k.to_string(), name.to_string()))
}

/// Parses a `HOST|URL` argument: a URL with scheme http or https, else a DNS name.
/// Errors: usage (exit 2) for another scheme or a name that is not a DNS name.
pub fn parse_target(t: &str) -> Result<Target> {
    if t.contains("://") {
        let u = url::Url::parse(t).map_err(|e| {
            Error::usage(format!(
                "{t:?} is not a URL ({e}): give http(s)://HOST[:PORT][/PATH] or a bare host name"
            ))
        })?;
        if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
            return Err(Error::usage(format!(
                "{t:?}: only http:// and https:// URLs with a host"
            )));
        }
        return Ok(Target::Url(u));
    }
    let ok = !t.is_empty()
        && t.len() <= 253
        && t.trim_end_matches('.').split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if !ok {
        return Err(Error::usage(format!(
            "{t:?} is neither a DNS name nor an http(s) URL"
        )));
    }
    Ok(Target::Host(t.to_ascii_lowercase()))
}

/// Everything decided before any kubeconfig is read. Errors: usage (exit 2).
pub fn options(cli: &Cli) -> Result<Options> {
    let source = cli.source.as_deref().map(parse_source).transpose()?;
    if cli.all_namespaces && cli.source.is_some() {
        return Err(Error::usage(
            "--source names a source in one namespace (-n): drop -A",
        ));
    }
    if cli.format.is_some() && cli.output.output.is_machine() {
        return Err(Error::usage(
            "--format github replaces the table: give it without -o json|yaml",
        ));
    }
    let targets = cli
        .targets
        .iter()
        .map(|t| parse_target(t))
        .collect::<Result<Vec<_>>>()?;
    if cli.probe_image.trim().is_empty() {
        return Err(Error::usage("--probe-image is empty"));
    }
    Ok(Options {
        targets,
        all_namespaces: cli.all_namespaces,
        source,
        probe_source: cli.probe_source,
        probe_image: cli.probe_image.clone(),
        probe_timeout: cli.probe_timeout,
        wait: cli.wait,
        timeout: cli.timeout,
        margin: cli.margin,
    })
}

/// The end of an interrupted run: 130, and with `-o json|yaml` the `ChainError` document
/// docs/gitops-verify.md promises for a run that ends without a report.
fn interrupted_exit(cli: &Cli) -> Result<i32> {
    if cli.output.output.is_machine() {
        print_machine(
            cli.output.output,
            &chain::error_report(
                "interrupted: nothing changed, no probe pod left behind",
                EXIT_INTERRUPTED,
            ),
        )?;
    }
    Ok(EXIT_INTERRUPTED)
}

/// Prints `r` in the chosen format.
pub fn print(cli_output: &OutputArgs, format: Option<Format>, r: &ChainReport) -> Result<()> {
    if cli_output.output.is_machine() {
        return print_machine(cli_output.output, r);
    }
    match format {
        Some(Format::Github) => write_stdout(&crate::render::github(r)),
        None => write_stdout(&crate::render::table(r, &cli_output.stdout_painter())),
    }
}

/// One run. Returns the exit code (0, 1, 4, or 130 once interrupted with its probe pods
/// deleted). Errors: usage (2), API (3).
pub async fn run(cli: Cli) -> Result<i32> {
    let opts = options(&cli)?;
    let intr = Interrupt::install()?;
    let probes = RwLock::new(());
    let conn = tokio::select! {
        c = cli.cluster.connect() => c?,
        _ = interrupted(&intr, &probes) => return interrupted_exit(&cli),
    };
    let s = Session::new(conn, opts);
    let chain = links::chain();
    let r = if s.opts.wait {
        match crate::wait::wait(&s, &chain, &intr, &probes).await? {
            Some(r) => r,
            None => return interrupted_exit(&cli),
        }
    } else {
        let (links, notes, now, _) = tokio::select! {
            r = round(&s, &chain, &intr, &probes) => r?,
            _ = interrupted(&intr, &probes) => return interrupted_exit(&cli),
        };
        report(&s, links, notes, now)
    };
    print(&cli.output, cli.format, &r)?;
    Ok(r.exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources() {
        assert_eq!(
            parse_source("gitrepository/flux-system").unwrap(),
            ("GitRepository".into(), "flux-system".into())
        );
        assert_eq!(
            parse_source("OCIRepository/app").unwrap().0,
            "OCIRepository"
        );
        assert_eq!(parse_source("ks/app").unwrap_err().exit_code(), 2);
        assert_eq!(
            parse_source("gitrepository/Bad_Name")
                .unwrap_err()
                .exit_code(),
            2
        );
        assert_eq!(parse_source("flux-system").unwrap_err().exit_code(), 2);
    }

    #[test]
    fn targets() {
        assert_eq!(
            parse_target("PodInfo.example.com").unwrap(),
            Target::Host("podinfo.example.com".into())
        );
        assert!(matches!(
            parse_target("https://podinfo.example.com/healthz").unwrap(),
            Target::Url(_)
        ));
        assert_eq!(parse_target("ftp://x").unwrap_err().exit_code(), 2);
        assert_eq!(parse_target("a_b").unwrap_err().exit_code(), 2);
    }
}
