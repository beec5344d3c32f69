//! kubectl-gitops-pull: bring image automation's commits home from the server Flux reads.
//! The engine lives in the `gitops_pull` library (src/lib.rs).

use clap::CommandFactory;
use cluster_loop::completion::{self, ObjectKind, Want};
use cluster_loop::error::Error;
use gitops_pull::run::{Cli, run};

/// A run that ends without a report: with -o json|yaml the `PullError` document on stdout
/// (none for usage errors, exit 2), then `error: MESSAGE` on stderr.
fn exit_with(format: cluster_loop::output::OutputFormat, e: &Error) -> ! {
    cluster_loop::output::exit_with_document(
        format,
        gitops_pull::report::API_VERSION,
        "PullError",
        e,
    )
}

fn main() {
    // Shell completion (`kubectl gitops-pull completion install`, `__complete`): GitRepository
    // names from the cluster, directories for --repo, flags, contexts and namespaces.
    if let Some(code) = completion::handle("gitops-pull", Cli::command(), |req| {
        match (req.flag.as_deref(), req.positionals.len()) {
            (None, 0) => Want::Refs(vec![ObjectKind::GIT_REPOSITORY]),
            (None, _) | (Some("remote"), _) => Want::Nothing,
            (Some("repo"), _) => Want::Dirs,
            _ => Want::Default,
        }
    }) {
        std::process::exit(code);
    }
    let cli: Cli = cluster_loop::cli::parse("gitops pull");
    let format = cli.output.output;
    // Multi-thread: the signal watcher of a read phase runs while git holds a worker.
    let rt = match cluster_loop::signals::runtime() {
        Ok(rt) => rt,
        Err(e) => exit_with(format, &e),
    };
    match rt.block_on(run(cli)) {
        Ok(code) => std::process::exit(code),
        Err(e) => exit_with(format, &e),
    }
}
