//! kubectl-podresolve: resolve a name from inside the pod network and explain the answer.
//! The engine lives in the `podresolve` library (src/lib.rs).
use clap::CommandFactory;

#[tokio::main]
async fn main() {
    // kubectl plugin completion (`kubectl_complete-podresolve` runs `kubectl-podresolve
    // __complete`): hosts are free text; flags complete as usual. `completion` is a valid host
    // (a Service may be named so): it is the completion command only when followed by one of
    // its subcommands or a help flag, see `podresolve::run::is_completion_command`.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if podresolve::run::is_completion_command(&argv)
        && let Some(code) =
            cluster_loop::completion::handle("podresolve", podresolve::run::Cli::command(), |req| {
                match req.flag.as_deref() {
                    None => cluster_loop::completion::Want::Nothing,
                    _ => cluster_loop::completion::Want::Default,
                }
            })
    {
        std::process::exit(code);
    }
    let cli: podresolve::run::Cli = cluster_loop::cli::parse("podresolve");
    let format = cli.output.output;
    match podresolve::run::run(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // -o json|yaml keeps a stable shape on stdout when the run ends without a report
            // (a probe that cannot start, an API error); usage errors (exit 2) print none.
            if format.is_machine() && e.exit_code() != cluster_loop::error::EXIT_USAGE {
                let _ = cluster_loop::output::print_machine(
                    format,
                    &podresolve::report::error_report(&e.to_string(), e.exit_code()),
                );
            }
            cluster_loop::error::exit_with(&e)
        }
    }
}
