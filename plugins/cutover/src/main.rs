//! kubectl-cutover: see docs/cutover.md. The flow lives in the `cutover` library ([`cutover::run`]).
use clap::CommandFactory;
use cluster_loop::completion::{self, ObjectKind, Want};
use cutover::run::{Cli, exit_with_document, run};

fn main() {
    // kubectl plugin completion (`kubectl_complete-cutover` runs `kubectl-cutover __complete`).
    if let Some(code) = completion::handle("cutover", Cli::command(), |req| {
        match (req.flag.as_deref(), req.positionals.len()) {
            (None, 0) => Want::Refs(vec![ObjectKind::GIT_REPOSITORY]),
            (None, _) | (Some("to" | "secret"), _) => Want::Nothing,
            (Some("repo"), _) => Want::Dirs,
            _ => Want::Default,
        }
    }) {
        std::process::exit(code);
    }
    let cli: Cli = cluster_loop::cli::parse("cutover");
    let format = cli.output.output;
    let rt = match cluster_loop::signals::runtime() {
        Ok(rt) => rt,
        Err(e) => exit_with_document(format, &e),
    };
    match rt.block_on(run(cli)) {
        Ok(code) => std::process::exit(code),
        Err(e) => exit_with_document(format, &e),
    }
}
