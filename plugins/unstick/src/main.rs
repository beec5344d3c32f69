//! kubectl-unstick: see docs/unstick.md. The flow lives in the `unstick` library ([`unstick::run`]).
use std::time::Duration;

use clap::CommandFactory;
use cluster_loop::completion::{self, ObjectKind, Want};
use cluster_loop::error::Error;
use unstick::report;
use unstick::run::{Cli, run};

fn main() {
    // kubectl plugin completion (`kubectl_complete-unstick` runs `kubectl-unstick __complete`).
    if let Some(code) = completion::handle("unstick", Cli::command(), |req| {
        match (req.flag.as_deref(), req.positionals.len()) {
            (None, 0) => Want::Refs(vec![ObjectKind::KUSTOMIZATION]),
            (None, _) => Want::Nothing,
            (Some("controller-namespace"), _) => Want::Namespaces,
            _ => Want::Default,
        }
    }) {
        std::process::exit(code);
    }
    let cli: Cli = cluster_loop::cli::parse("unstick");
    let format = cli.output.output;
    // -o json|yaml: a run that ends in an error still prints one document on stdout
    // (kind UnstickError, the shape every plugin shares); usage errors (exit 2) print none.
    let fail = |e: &Error| -> ! {
        cluster_loop::output::exit_with_document(format, report::SCHEMA, "UnstickError", e)
    };
    let rt = match cluster_loop::signals::runtime() {
        Ok(rt) => rt,
        Err(e) => fail(&e),
    };
    match rt.block_on(run(cli)) {
        Ok(code) => {
            rt.shutdown_timeout(Duration::from_millis(100));
            std::process::exit(code)
        }
        Err(e) => fail(&e),
    }
}
