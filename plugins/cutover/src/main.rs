//! kubectl-cutover: see README.md.
use clap::Parser;

/// kubectl cutover (skeleton).
#[derive(Parser, Debug)]
#[command(name = "kubectl-cutover", version)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
