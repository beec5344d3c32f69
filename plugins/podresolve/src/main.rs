//! kubectl-podresolve: resolve a name from inside the pod network and explain the answer.
//! The engine lives in the `podresolve` library (src/lib.rs).
use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = podresolve::run::Cli::parse();
    match podresolve::run::run(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => cluster_loop::error::exit_with(&e),
    }
}
