//! kubectl-markercheck: see README.md.
use clap::Parser;

/// kubectl markercheck (skeleton).
#[derive(Parser, Debug)]
#[command(name = "kubectl-markercheck", version)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
