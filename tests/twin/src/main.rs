//! `twin`: run the twin cluster's API server from the command line.
//!
//! ```text
//! twin serve --state DIR --kubeconfig-out PATH [--port N] [--namespace NS] [--no-flux-crds]
//! ```
//! Prints the server URL and kubeconfig path, serves until Ctrl-C, and on exit optionally
//! dumps the store (`--dump-out FILE`). Exit codes: 0 ok, 2 usage, 3 startup/state error.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "twin",
    about = "The twin cluster: an in-memory Kubernetes API server over HTTPS on 127.0.0.1"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the API until Ctrl-C.
    ///
    /// Example: twin serve --state ./state --kubeconfig-out /tmp/twin.kubeconfig
    Serve {
        /// YAML/JSON file or directory of objects to load at start (repeatable).
        #[arg(long)]
        state: Vec<PathBuf>,
        /// Where to write the admin kubeconfig.
        #[arg(long)]
        kubeconfig_out: PathBuf,
        /// Port on 127.0.0.1 (0 = ephemeral).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Default namespace of the kubeconfig context.
        #[arg(long, default_value = "default")]
        namespace: String,
        /// Do not register the Flux CRDs.
        #[arg(long)]
        no_flux_crds: bool,
        /// Write the store as YAML to this file on exit.
        #[arg(long)]
        dump_out: Option<PathBuf>,
    },
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Serve {
            state,
            kubeconfig_out,
            port,
            namespace,
            no_flux_crds,
            dump_out,
        } => {
            let opts = twin::TwinOptions {
                install_flux_crds: !no_flux_crds,
                state,
                port,
                default_namespace: namespace,
                kubeconfig_path: Some(kubeconfig_out),
                ..Default::default()
            };
            let t = match twin::Twin::start(opts).await {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("twin: {e}");
                    std::process::exit(3);
                }
            };
            println!("server: {}", t.server_url());
            println!("kubeconfig: {}", t.kubeconfig_path().display());
            let _ = tokio::signal::ctrl_c().await;
            if let Some(p) = dump_out
                && let Err(e) = std::fs::write(&p, t.dump_yaml())
            {
                eprintln!("twin: writing {}: {e}", p.display());
            }
            t.shutdown().await;
        }
    }
}
