//! kubectl-unstick: see README.md.
use clap::Parser;

/// kubectl unstick (skeleton).
#[derive(Parser, Debug)]
#[command(name = "kubectl-unstick", version)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
