//! The demo's servicelinks step: failure catalogue row 5 on the real cluster.

use serde_json::Value;
use twin::flux::cluster::s;

use crate::{Ctx, Real, Step, T, poll, real_cluster};

/// Step 12's namespace, GitRepository and Kustomization (failure catalogue row 5).
const SVCLINK_KS: &str = "orders";

/// Step 12 on the real cluster: failure catalogue row 5, `invalid literal for int():
/// 'tcp://10.96…'`. A Python app that reads `REDIS_PORT` as a port number, beside a Service
/// `redis` ([`realcluster::node::redis_client_app`]): the node agent gives the container the
/// Service link variables the kubelet injects, the host's real python3 exits 1 with the
/// catalogue's message, the pod crash-loops and the real kustomize-controller's health check
/// holds on it. `kubectl unstick` and `kubectl gitops verify` name the variable, its Service
/// and the fix (`enableServiceLinks: false`, fleetlint FL061 live); the fix is pushed and
/// `gitops verify --wait` proves the chain holds at it.
pub(crate) fn step(ctx: &Ctx, real: &Real) -> Step {
    let mut st = Step::new(
        "servicelinks: REDIS_PORT=tcp://... from a Service named redis crashes a Python app; named with its fix, proven",
    );
    let Some(c) = real_cluster(real, &mut st) else {
        return st;
    };
    let kc = c.kubeconfig().to_path_buf();
    let ns = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {SVCLINK_KS}\n");
    if let Err(e) = c.fleet(
        SVCLINK_KS,
        &[
            ("ns.yaml", &ns),
            ("redis.yaml", &realcluster::node::redis_service(SVCLINK_KS)),
            (
                "api.yaml",
                &realcluster::node::redis_client_app(SVCLINK_KS, ""),
            ),
        ],
        "  interval: 10m\n  path: ./\n  prune: true\n  wait: true\n  timeout: 1m\n",
    ) {
        st.check(false, format!("push the fleet: {e}"));
        return st;
    }
    let mut pod = String::new();
    let crashing = poll(T, || {
        let p = realcluster::kubectl(&kc, &["get", "pods", "-n", SVCLINK_KS, "-o", "json"])
            .ok()
            .and_then(|o| serde_json::from_str::<Value>(&o).ok())
            .unwrap_or_default();
        let found = p["items"].as_array().into_iter().flatten().find(|p| {
            p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        });
        if let Some(f) = found {
            pod = s(f, "/metadata/name").to_owned();
        }
        found.is_some()
    });
    st.check(
        crashing,
        "the api container exits 1 and the kubelet's CrashLoopBackOff follows",
    );
    if !crashing {
        return st;
    }
    let l = ctx.kubectl(Some(&kc), &["logs", "-n", SVCLINK_KS, &pod, "--previous"]);
    st.check(
        l.stdout
            .contains("ValueError: invalid literal for int() with base 10: 'tcp://"),
        "kubectl logs --previous: the real python3's ValueError on REDIS_PORT=tcp://<ClusterIP>:6379",
    );
    let d = ctx.kubectl(
        Some(&kc),
        &["unstick", &format!("ks/{SVCLINK_KS}"), "--dry-run"],
    );
    st.check(
        d.stdout.contains("REDIS_PORT")
            && d.stdout.contains(&format!("Service {SVCLINK_KS}/redis"))
            && d.stdout.contains("enableServiceLinks: false"),
        "unstick names the Service link variable REDIS_PORT, Service redis, and the fix enableServiceLinks: false",
    );
    let source = format!("gitrepository/{SVCLINK_KS}");
    let v = ctx.kubectl(Some(&kc), &["gitops", "verify", "--source", &source]);
    st.check(
        v.code == 1
            && v.stdout.contains("service link collision: REDIS_PORT")
            && v.stdout.contains("enableServiceLinks: false"),
        "gitops verify names the crashing container's cause (service link collision: REDIS_PORT) and the fix, exit 1",
    );
    let fixed =
        realcluster::node::redis_client_app(SVCLINK_KS, "      enableServiceLinks: false\n");
    match c.push(
        SVCLINK_KS,
        &[("api.yaml", &fixed)],
        "api: enableServiceLinks: false",
    ) {
        Ok(sha) => {
            // What an operator runs after pushing (`flux reconcile source git orders`): the
            // fetch now, not at the source's next interval (on a loaded machine the check
            // below waited out its deadline with the source still behind).
            crate::request_reconcile(c, "flux-system", "gitrepository", SVCLINK_KS);
            crate::check_chain_holds(ctx, &kc, &source, &sha, &mut st)
        }
        Err(e) => {
            st.check(false, format!("push the fix: {e}"));
        }
    }
    st
}
