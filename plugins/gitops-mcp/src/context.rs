//! The kubeconfig context the server is pinned to.

use cluster_loop::error::Error;
use kube::config::Kubeconfig;

fn kubeconfig(cluster_args: &[String]) -> Result<Kubeconfig, Error> {
    let path = cluster_args
        .iter()
        .position(|a| a == "--kubeconfig")
        .and_then(|i| cluster_args.get(i + 1));
    match path {
        Some(p) => Kubeconfig::read_from(p)
            .map_err(|e| Error::usage(format!("kubeconfig {p}: {e}"))),
        None => Kubeconfig::read().map_err(|e| {
            Error::usage(format!(
                "cannot read the kubeconfig (KUBECONFIG or ~/.kube/config): {e}; pass --kubeconfig PATH"
            ))
        }),
    }
}

/// `cluster_args` with the context pinned: unchanged when they name one (`--context`), else
/// with `--context <current-context>` of the kubeconfig appended, so a later `kubectl config
/// use-context` never moves the server to another cluster. A kubeconfig that cannot be read
/// or has no current-context pins nothing (said on stderr): the offline tools still work, and
/// each cluster-facing call fails with the plugin's own kubeconfig error (exit 3). Errors
/// (usage): a `--context` the readable kubeconfig does not have.
pub fn pin(mut cluster_args: Vec<String>) -> Result<Vec<String>, Error> {
    if let Some(i) = cluster_args.iter().position(|a| a == "--context") {
        // A context named on the command line must exist (kubectl refuses it at once too).
        if let (Some(name), Ok(cfg)) = (cluster_args.get(i + 1), kubeconfig(&cluster_args))
            && !cfg.contexts.iter().any(|c| &c.name == name)
        {
            return Err(Error::usage(format!(
                "--context {name:?} is not in the kubeconfig (contexts: {})",
                cfg.contexts
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        return Ok(cluster_args);
    }
    match kubeconfig(&cluster_args).map(|c| c.current_context) {
        Ok(Some(current)) if !current.is_empty() => {
            cluster_args.extend(["--context".to_string(), current]);
        }
        Ok(_) => eprintln!(
            "kubectl gitops mcp: the kubeconfig has no current-context and no --context was given: the cluster tools will fail until one is"
        ),
        Err(e) => eprintln!("kubectl gitops mcp: {e}; only the offline tools will work"),
    }
    Ok(cluster_args)
}

/// Ok when `name` is a context of the server's kubeconfig. Errors (usage): it is not, naming
/// the contexts there are.
pub fn check(cluster_args: &[String], name: &str) -> Result<(), Error> {
    let cfg = kubeconfig(cluster_args)?;
    if cfg.contexts.iter().any(|c| c.name == name) {
        return Ok(());
    }
    let known: Vec<&str> = cfg.contexts.iter().map(|c| c.name.as_str()).collect();
    Err(Error::usage(format!(
        "context {name:?} is not in the server's kubeconfig (contexts: {})",
        known.join(", ")
    )))
}
