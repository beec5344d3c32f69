//! kubectl-gitops-mcp: the MCP server of cluster-loop. The flow lives in the `gitops_mcp`
//! library ([`gitops_mcp::serve`]).

fn main() {
    let cli: gitops_mcp::serve::Cli = cluster_loop::cli::parse("gitops-mcp");
    std::process::exit(gitops_mcp::serve::main(cli))
}
