//! kubectl-podresolve: see README.md.
use clap::Parser;

/// kubectl podresolve (skeleton).
#[derive(Parser, Debug)]
#[command(name = "kubectl-podresolve", version)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
