//! kubectl-gitops-mcp: the MCP server of cluster-loop. The flow lives in the `gitops_mcp`
//! library ([`gitops_mcp::serve`]).

use clap::CommandFactory;

fn main() {
    // Shell completion (`kubectl gitops-mcp completion install`, `__complete`): flags, --repo
    // directories and kubeconfig contexts; the server takes no positional argument.
    if let Some(code) =
        cluster_loop::completion::handle("gitops-mcp", gitops_mcp::serve::Cli::command(), |req| {
            match req.flag.as_deref() {
                None => cluster_loop::completion::Want::Nothing,
                Some("repo") => cluster_loop::completion::Want::Dirs,
                _ => cluster_loop::completion::Want::Default,
            }
        })
    {
        std::process::exit(code);
    }
    let cli: gitops_mcp::serve::Cli = cluster_loop::cli::parse("gitops mcp");
    std::process::exit(gitops_mcp::serve::main(cli))
}
