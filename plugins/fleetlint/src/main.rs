//! kubectl-fleetlint: see docs/fleetlint.md. The flow lives in the `fleetlint` library
//! ([`fleetlint::run`] module).
use clap::CommandFactory;
use cluster_loop::completion::{self, Want};
use cluster_loop::error::exit_with;
use fleetlint::run::{Cli, run};

fn main() {
    if let Some(code) = completion::handle("fleetlint", Cli::command(), |req| {
        match req.flag.as_deref() {
            None | Some("overlay") | Some("repo-root") | Some("cache-dir") => Want::Dirs,
            _ => Want::Default,
        }
    }) {
        std::process::exit(code);
    }
    let cli: Cli = cluster_loop::cli::parse("fleetlint");
    match run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => exit_with(&e),
    }
}
