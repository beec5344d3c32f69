//! kubectl-gitops-verify: prove the whole GitOps loop from inside the cluster, link by link.
//! The engine lives in the `gitops_verify` library (src/lib.rs).

use clap::CommandFactory;

#[tokio::main]
async fn main() {
    // Shell completion (`kubectl gitops-verify completion install`, `__complete`): flags,
    // contexts and namespaces; HOST|URL arguments are the user's own.
    if let Some(code) = cluster_loop::completion::handle(
        "gitops-verify",
        gitops_verify::run::Cli::command(),
        |req| match req.flag.as_deref() {
            None | Some("source") => cluster_loop::completion::Want::Nothing,
            _ => cluster_loop::completion::Want::Default,
        },
    ) {
        std::process::exit(code);
    }
    let cli: gitops_verify::run::Cli = cluster_loop::cli::parse("gitops verify");
    let format = cli.output.output;
    match gitops_verify::run::run(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // -o json|yaml keeps a stable shape on stdout when the run ends without a report
            // (an API error); usage errors (exit 2) print none.
            if format.is_machine() && e.exit_code() != cluster_loop::error::EXIT_USAGE {
                let _ = cluster_loop::output::print_machine(
                    format,
                    &gitops_verify::chain::error_report(&e.to_string(), e.exit_code()),
                );
            }
            cluster_loop::error::exit_with(&e)
        }
    }
}
