//! kubectl-gatewaycheck: is this Gateway really serving, whatever its status says.
//! The engine lives in the `gatewaycheck` library (src/lib.rs).
use clap::CommandFactory;

#[tokio::main]
async fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if gatewaycheck::run::is_completion_command(&argv)
        && let Some(code) = cluster_loop::completion::handle(
            "gatewaycheck",
            gatewaycheck::run::Cli::command(),
            |req| match req.flag.as_deref() {
                None => cluster_loop::completion::Want::Nothing,
                _ => cluster_loop::completion::Want::Default,
            },
        )
    {
        std::process::exit(code);
    }
    let cli: gatewaycheck::run::Cli = cluster_loop::cli::parse("gatewaycheck");
    let format = cli.output.output;
    match gatewaycheck::run::run(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // -o json|yaml keeps a stable shape on stdout when the run ends without a report
            // (an API error); usage errors (exit 2) print none.
            if format.is_machine() && e.exit_code() != cluster_loop::error::EXIT_USAGE {
                let _ = cluster_loop::output::print_machine(
                    format,
                    &gatewaycheck::report::error_report(&e.to_string(), e.exit_code()),
                );
            }
            cluster_loop::error::exit_with(&e)
        }
    }
}
