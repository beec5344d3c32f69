//! kubectl-markercheck: see docs/markercheck.md. The flow lives in the `markercheck` library
//! ([`markercheck::run`]).
use clap::CommandFactory;
use cluster_loop::completion::{self, Want};
use cluster_loop::error::exit_with;
use markercheck::run::{Cli, run};

fn main() {
    // kubectl plugin completion (`kubectl_complete-markercheck` runs `kubectl-markercheck
    // __complete`).
    if let Some(code) = completion::handle("markercheck", Cli::command(), |req| {
        match req.flag.as_deref() {
            None | Some("policies") => Want::Files,
            Some("repo-root") => Want::Dirs,
            _ => Want::Default,
        }
    }) {
        std::process::exit(code);
    }
    let cli: Cli = cluster_loop::cli::parse("markercheck");
    // a large reserved stack: the YAML tree walks recurse once per nesting level and go-yaml
    // reads up to 10,000 levels (only the pages used become resident)
    let res = std::thread::Builder::new()
        .stack_size(markercheck::scan::DEEP_STACK)
        .spawn(move || run(cli))
        .map(|h| h.join());
    match res {
        Ok(Ok(Ok(code))) => std::process::exit(code),
        Ok(Ok(Err(e))) => exit_with(&e),
        Ok(Err(_)) => std::process::exit(101),
        Err(_) => std::process::exit(101),
    }
}
