//! The server's command line and life: parse, pin the context, serve MCP over stdio (or
//! streamable HTTP, [`crate::http`]) until the client closes it, then wait for the flows still
//! in flight (a cancelled `unstick` resuming what it suspended) before exiting.

use std::path::PathBuf;

use clap::Parser;
use cluster_loop::cli::ClusterArgs;
use cluster_loop::error::{EXIT_OK, Error};
use rmcp::ServiceExt;

use crate::session::{Session, wait_for_flows};
use crate::tools::Server;

const EXAMPLES: &str = "\
Examples:
  # Serve the read-only tools over stdio, pinned to the current context
  kubectl gitops mcp

  # Also the write tools (unstick, cutover), on one named context
  kubectl gitops mcp --allow-write --context kind-dev

  # The offline tools (lint_markers, simulate_automation, lint_fleet) read this repository
  kubectl gitops mcp --repo ~/src/fleet

  # Streamable HTTP on a loopback port the system picks (the URL is printed on stderr)
  kubectl gitops mcp --http 127.0.0.1:0

An MCP client starts it as a command, e.g. in its mcpServers settings:
  {\"mcpServers\": {\"cluster-loop\": {\"command\": \"kubectl\",
    \"args\": [\"gitops\", \"mcp\", \"--repo\", \"/home/me/src/fleet\"]}}}

Tools: diagnose_kustomization, fleet_report, resolve_from_pod, lint_markers,
  simulate_automation, lint_fleet, preflight_source_move, check_gateway; with --allow-write also
  unstick and cutover; with --allow-context-switch also use_context.

Exit codes: 0 the client closed the stdio session, 2 usage (bad flags, --repo not a
  directory, a --context the kubeconfig does not have, --http on a non-loopback address
  without --allow-non-loopback), 3 the transport failed (e.g. the --http port is taken),
  130 the --http server was stopped (Ctrl-C, SIGTERM).";

/// Serve cluster-loop's diagnoses and proofs as Model Context Protocol tools over stdio, or streamable HTTP on loopback (--http).
///
/// Every tool calls a plugin's own flow in process and returns its `-o json` document. The
/// kubeconfig and context are fixed when the server starts.
#[derive(Parser, Debug)]
#[command(
    name = "kubectl-gitops-mcp",
    bin_name = "kubectl gitops mcp",
    version,
    after_help = EXAMPLES
)]
pub struct Cli {
    /// List and allow the write tools (unstick, cutover): they change the cluster with their
    /// plugin's field manager and undo on cancellation
    #[arg(long)]
    pub allow_write: bool,
    /// List the use_context tool, which pins another context of the kubeconfig
    #[arg(long)]
    pub allow_context_switch: bool,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (IP:PORT, [IPv6]:PORT or
    /// localhost:PORT; port 0 picks a free port, the address is printed on stderr). Loopback
    /// only unless --allow-non-loopback; stop with Ctrl-C (exit 130)
    #[arg(long, value_name = "ADDR", value_parser = crate::http::parse_addr)]
    pub http: Option<std::net::SocketAddr>,
    /// Allow --http on one non-loopback address. The endpoint has no authentication and its
    /// tools act with the kubeconfig's identity: only on a network that is yours alone
    #[arg(long, requires = "http")]
    pub allow_non_loopback: bool,
    /// Repository the offline tools read (tool paths are relative to it; default: the current
    /// directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// kubectl's cluster flags (`--kubeconfig`, `--context`, ...), fixed for the session.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

fn cluster_args(c: &ClusterArgs) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(k) = &c.kubeconfig {
        v.extend(["--kubeconfig".to_string(), k.display().to_string()]);
    }
    for (flag, val) in [
        ("--context", &c.context),
        ("--cluster", &c.cluster),
        ("--user", &c.user),
    ] {
        if let Some(x) = val {
            v.extend([flag.to_string(), x.clone()]);
        }
    }
    if let Some(t) = c.request_timeout.0 {
        v.extend([
            "--request-timeout".to_string(),
            format!("{}s", t.as_secs().max(1)),
        ]);
    }
    v
}

/// The session `cli` asks for. Errors (usage): `--repo` is not a directory; `-n` (a namespace
/// is a tool argument); a `--context` the kubeconfig does not have.
pub fn session(cli: &Cli) -> Result<Session, Error> {
    if let Some(addr) = cli.http {
        crate::http::check_addr(addr, cli.allow_non_loopback)?;
    }
    if cli.cluster.namespace.is_some() {
        return Err(Error::usage(
            "-n is not a server flag: give each tool its namespace argument",
        ));
    }
    let repo = match &cli.repo {
        Some(r) => r.clone(),
        None => std::env::current_dir().map_err(|e| Error::io("<current directory>", e))?,
    };
    if let Some(problem) = cluster_loop::repo::directory_problem(&repo) {
        return Err(Error::usage(format!(
            "--repo {problem} (give the checkout the offline tools should read)"
        )));
    }
    let args = crate::context::pin(cluster_args(&cli.cluster))?;
    Ok(Session::new(
        args,
        repo,
        cli.allow_write,
        cli.allow_context_switch,
    ))
}

/// Runs the server; returns the exit code.
pub fn main(cli: Cli) -> i32 {
    let session = match session(&cli) {
        Ok(s) => s,
        Err(e) => cluster_loop::error::exit_with(&e),
    };
    let rt = match cluster_loop::signals::runtime() {
        Ok(rt) => rt,
        Err(e) => cluster_loop::error::exit_with(&e),
    };
    let served = match cli.http {
        Some(addr) => rt
            .block_on(crate::http::serve(session, addr))
            .map(|signal| {
                eprintln!("kubectl gitops mcp: stopped ({signal})");
                cluster_loop::signals::EXIT_INTERRUPTED
            }),
        None => rt.block_on(serve(session)).map(|()| EXIT_OK),
    };
    match served {
        Ok(code) => code,
        Err(e) => cluster_loop::error::exit_with(&e),
    }
}

/// Serves `session` over stdio until the client closes it, then waits (up to 10 minutes) for
/// flows still in flight, which were cancelled when the session ended and are undoing.
pub async fn serve(session: Session) -> Result<(), Error> {
    let server = Server::new(session);
    let s = server.session();
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Error::Other(format!("MCP initialize failed: {e}")))?;
    let waited = running.waiting().await;
    wait_for_flows(&s).await;
    waited
        .map(|_| ())
        .map_err(|e| Error::Other(format!("MCP session ended abnormally: {e}")))
}
