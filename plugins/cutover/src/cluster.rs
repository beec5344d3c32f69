//! What the preflight and the execution both use on the cluster: the field manager of every
//! write, and whether a Flux controller runs, with the lever that starts one. A module of its
//! own so that [`crate::preflight`] does not import [`crate::execute`] (which reads the
//! preflight's report).

use cluster_loop::cli::Connection;
use kube::Api;

/// Field manager of every write (the brief: a field manager of the plugin's own name, so
/// kustomize-controller's takeover of `kubectl`-owned fields does not apply).
pub const FIELD_MANAGER: &str = "kubectl-cutover";

/// The field manager of the patch that ends a proven run and writes the cutover record
/// (`cutover.cluster-loop.dev/cut-over`). Not [`FIELD_MANAGER`]: kustomize-controller's
/// server-side apply removes every field owned by an Update whose manager name starts with
/// `kubectl` (v1.9.6 kustomization_controller.go `applyOpts.Cleanup` lists `kubectl`;
/// fluxcd/pkg/ssa `matchFieldManager` matches by prefix), so the root's run that reverts a
/// cutover would delete the record that tells `--finish` about it (seen on the real
/// controller).
pub const RECORD_FIELD_MANAGER: &str = "cluster-loop.dev/cutover";

/// Why the Flux controller Deployment `name` in `flux-system` (the flux CLI's default
/// namespace) runs no controller, e.g. `0 replicas` or `no ready pod, 0 of 1 ready`, by the
/// rule unstick uses ([`cluster_loop::flux::deployment_not_running`]). `None` when it runs, or
/// when the Deployment is missing or unreadable (Flux installed elsewhere, no RBAC to read
/// Deployments): best effort, never an error.
pub async fn controller_not_running(conn: &Connection, name: &str) -> Option<String> {
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(
        conn.client.clone(),
        cluster_loop::cli::FLUX_DEFAULT_NAMESPACE,
    );
    let d = api.get_opt(name).await.ok()??;
    serde_json::to_value(&d)
        .ok()
        .and_then(|v| cluster_loop::flux::deployment_not_running(&v))
}

/// The lever for a controller `name` (Deployment in `flux-system`) that runs none, by `why`
/// ([`cluster_loop::flux::deployment_not_running`], the rule unstick's `start-controller`
/// lever follows, in its spelling): at `0 replicas`, `kubectl -n flux-system scale
/// deployment/NAME --replicas=1`; with replicas wanted but no ready pod, scaling changes
/// nothing, so `kubectl -n flux-system describe deployment/NAME` (why its pod is not ready).
pub fn start_command(name: &str, why: &str) -> String {
    let ns = cluster_loop::cli::FLUX_DEFAULT_NAMESPACE;
    if why == "0 replicas" {
        format!("kubectl -n {ns} scale deployment/{name} --replicas=1")
    } else {
        format!("kubectl -n {ns} describe deployment/{name}")
    }
}
