//! kubectl-gitops-verify: prove the whole GitOps loop from inside the cluster, link by link.
//! The engine lives in the `gitops_verify` library (src/lib.rs).

#[tokio::main]
async fn main() {
    let cli: gitops_verify::run::Cli = cluster_loop::cli::parse("gitops-verify");
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
