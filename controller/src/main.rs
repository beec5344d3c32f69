//! cluster-loop-controller: see docs/controller.md. The flow lives in the library
//! ([`cluster_loop_controller::run::run`]); main only parses the flags and starts logging.
use cluster_loop_controller::args::Args;

fn main() {
    let args = <Args as clap::Parser>::parse();
    cluster_loop_controller::run::init_logs(&args);
    let rt = match cluster_loop::signals::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the runtime");
            std::process::exit(3);
        }
    };
    let code = rt.block_on(cluster_loop_controller::run::run(args));
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    std::process::exit(code)
}
