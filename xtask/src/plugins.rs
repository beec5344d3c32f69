//! The plugins the suite ships, with the texts their krew manifests carry.

/// One kubectl plugin of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plugin {
    /// krew plugin name: `unstick` for `kubectl unstick`. krew links the binary as
    /// `kubectl-<name with - as _>` (krew internal/installation/install.go `pluginNameToBin`),
    /// so `gitops-mcp` is typed `kubectl gitops-mcp` after a krew install (and `kubectl gitops
    /// mcp` when `kubectl-gitops-mcp` itself is on PATH).
    pub name: &'static str,
    /// Flux CLI plugin name, the word after `flux` (`flux unstick`): the krew name, except for
    /// the `gitops-` commands, where `flux` already says GitOps (`flux mcp`, `flux verify`).
    pub flux_name: &'static str,
    /// Cargo package that builds it, and the binary name: `kubectl-unstick`.
    pub package: &'static str,
    /// krew `spec.shortDescription`: one line, at most 50 characters (`kubectl krew search`
    /// truncates at 50: krew cmd/krew/cmd/search.go `limitString(..., 50)`).
    pub short_description: &'static str,
    /// krew `spec.description`: what it does, a few lines.
    pub description: &'static str,
    /// What its shell completion offers, for the krew caveats: a few lines, true to the
    /// plugin's own `completion::handle` callback (only a plugin that reads a cluster may
    /// claim names from one).
    pub completes: &'static str,
}

/// The plugins, in README order.
pub const PLUGINS: [Plugin; 9] = [
    Plugin {
        name: "unstick",
        flux_name: "unstick",
        package: "kubectl-unstick",
        short_description: "Unstick a Flux Kustomization, with proof",
        description: "Explains why a Flux Kustomization is stuck (an in-flight health check, the\n\
                      dependsOn chain, its source, the controller) and pulls the lever that really\n\
                      cancels the run on the installed kustomize-controller version, with a\n\
                      deadline, then proves Ready at the new revision.",
        completes: "It completes flags, contexts, namespaces and Kustomization names, the\n\
                    names read from the cluster of the current context.",
    },
    Plugin {
        name: "podresolve",
        flux_name: "podresolve",
        package: "kubectl-podresolve",
        short_description: "Resolve a DNS name from inside the pod network",
        description: "Resolves a host name from inside the pod network instead of the workstation\n\
                      and explains the answer: the pod's resolv.conf (search list, ndots), the\n\
                      CoreDNS Corefile and the workstation's answer side by side.",
        completes: "It completes flags, contexts (from the kubeconfig) and namespaces (from\n\
                    the cluster of the current context).",
    },
    Plugin {
        name: "markercheck",
        flux_name: "markercheck",
        package: "kubectl-markercheck",
        short_description: "Lint Flux image-automation setter markers",
        description: "Offline lint and exact simulation of Flux image-automation setter markers\n\
                      (# {\"$imagepolicy\": \"ns:name[:tag|:name|:digest]\"}) in a Git checkout:\n\
                      shows what image-automation-controller would commit before it breaks a\n\
                      rollout.",
        completes: "It completes flags, files and directories, contexts (from the\n\
                    kubeconfig) and namespaces (from the cluster of the current context,\n\
                    for --from-cluster).",
    },
    Plugin {
        name: "fleetlint",
        flux_name: "fleetlint",
        package: "kubectl-fleetlint",
        short_description: "Lint a Flux fleet repository offline",
        description: "Proves a Flux fleet repository offline, reading it the way Flux would: renders\n\
                      every directory a Kustomization reaches with kubectl kustomize, walks the\n\
                      dependsOn graph, checks post-build substitution, placeholders, load-balancer\n\
                      addresses, service links, image pins and setter markers.",
        completes: "It completes flags and directories (PATH, --overlay, --repo-root,\n\
                    --cache-dir). fleetlint is offline: completion never contacts a\n\
                    cluster.",
    },
    Plugin {
        name: "cutover",
        flux_name: "cutover",
        package: "kubectl-cutover",
        short_description: "Move a Flux GitRepository to a new Git URL",
        description: "Moves a Flux GitRepository to a new Git URL without rolling the cluster\n\
                      backwards: preflights the new remote (same commit, auth, TLS), finds where\n\
                      the URL is authored (including the self-reference trap), cuts over and\n\
                      verifies the new revision.",
        completes: "It completes flags, contexts, namespaces and GitRepository names, the\n\
                    names read from the cluster of the current context.",
    },
    Plugin {
        name: "gatewaycheck",
        flux_name: "gatewaycheck",
        package: "kubectl-gatewaycheck",
        short_description: "Check a Gateway is really serving, not its status",
        description: "Checks whether a Gateway API Gateway or HTTPRoute is really serving, whatever\n\
                      its status says: observedGeneration of every condition, whether a running\n\
                      controller still owns it, route parents against parentRefs, addresses\n\
                      against the Service and the load-balancer pool, the data plane's pods, and\n\
                      with --probe an HTTP request from inside the cluster.",
        completes: "It completes flags, contexts (from the kubeconfig) and namespaces (from\n\
                    the cluster of the current context).",
    },
    Plugin {
        name: "gitops-verify",
        flux_name: "verify",
        package: "kubectl-gitops-verify",
        short_description: "Prove the GitOps loop from inside the cluster",
        description: "Proves the whole GitOps loop from inside the cluster, link by link: the\n\
                      source's revision against its remote, every Kustomization Ready at it,\n\
                      workloads Current, images against ImagePolicies, DNS, the Gateway and\n\
                      HTTP(S) from a pod; names the first broken link and what to do.",
        completes: "It completes flags, contexts (from the kubeconfig) and namespaces (from\n\
                    the cluster of the current context). Hosts and URLs are yours to type.",
    },
    Plugin {
        name: "gitops-pull",
        flux_name: "gitops-pull",
        package: "kubectl-gitops-pull",
        short_description: "Bring image automation's commits home, safely",
        description: "Fetches the branch a Flux GitRepository reads (its URL, ref and secretRef\n\
                      credentials) into your checkout, marks the commits image automation made\n\
                      with the setter lines each changed, fast-forwards when possible, refuses a\n\
                      diverged or dirty checkout, and warns before the next push goes astray.",
        completes: "It completes flags, directories (--repo), contexts, namespaces and\n\
                    GitRepository names, the names read from the cluster of the current\n\
                    context.",
    },
    Plugin {
        name: "gitops-mcp",
        flux_name: "mcp",
        package: "kubectl-gitops-mcp",
        short_description: "Serve Flux diagnoses and proofs as MCP tools",
        description: "Serves the suite's diagnoses and proofs to AI agents as Model Context\n\
                      Protocol tools (stdio, or streamable HTTP on loopback): each tool runs a\n\
                      plugin's own flow and returns its -o json document. Read-only unless\n\
                      --allow-write; the kubeconfig context is pinned at start.",
        completes: "It completes flags, directories (--repo) and contexts (from the\n\
                    kubeconfig). The server itself takes no object names.",
    },
];

impl Plugin {
    /// The link krew installs in its bin directory: `kubectl-<name with - as _>` (krew
    /// internal/installation/install.go `pluginNameToBin`), which kubectl's dispatch runs for
    /// `kubectl <name>` (`kubectl gitops-mcp` finds `kubectl-gitops_mcp`).
    pub fn krew_bin(&self) -> String {
        format!("kubectl-{}", self.name.replace('-', "_"))
    }
}

/// Looks a plugin up by krew name (`unstick`), Flux CLI plugin name (`mcp`) or
/// package/binary name (`kubectl-unstick`).
pub fn find(name: &str) -> Option<Plugin> {
    PLUGINS
        .iter()
        .copied()
        .find(|p| p.name == name || p.package == name || p.flux_name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_fit_krew() {
        for p in PLUGINS {
            assert!(p.short_description.len() <= 50, "{}", p.name);
            assert!(!p.short_description.contains('\n'), "{}", p.name);
            assert_eq!(p.package, format!("kubectl-{}", p.name));
            assert!(
                p.flux_name == p.name || p.name == format!("gitops-{}", p.flux_name),
                "{}",
                p.name
            );
        }
    }
}
