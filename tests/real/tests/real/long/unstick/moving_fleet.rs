//! One diagnosis for `--all` and for one object, at every step of a moving fleet (issue 15
//! item 2), on the real controllers: a dependsOn chain `mv` ← `mv-w1` ← `mv-w2` runs its first
//! rollout, then a push gives `mv-w1` an image the node cannot pull yet (its real health check
//! is held and `mv-w2` waits at its dependsOn check), then the image becomes pullable and the
//! chain recovers. Meanwhile snapshots are read with the plugin's own `gather` every 300 ms. On
//! every snapshot, for every Kustomization, the `--all` row (`report::fleet_report`) and the
//! single-object diagnosis (`Engine::diagnose`, what `kubectl unstick ks/NAME` prints) agree on
//! class and root cause, and the rule holds: a dependency is named as root cause only for a
//! Kustomization held at its dependsOn check.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cluster_loop::cli::ClusterArgs;
use realcluster::testkit::{condition, eventually};
use realcluster::{Cluster, FLUX_NS};
use serde_json::Value;
use unstick::diagnose::{Class, Engine};
use unstick::lever::Options;
use unstick::live::{self, ControllerRef, Reader, Scope};
use unstick::report::{self, root_cause_cell};

use super::quiet_cluster;

const T: Duration = Duration::from_secs(180);

fn web(image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: mv\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 3600\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: web\n        image: {image}\n"
    )
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// Reads the fleet every 300 ms until a snapshot begun after `stop` was set, asserting
/// agreement on each snapshot; returns the rows seen as `ns/name class [root cause]`.
fn sample(c: &Cluster, stop: Arc<AtomicBool>) -> Vec<String> {
    let kubeconfig = c.kubeconfig().to_path_buf();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let conn = ClusterArgs {
            kubeconfig: Some(kubeconfig),
            ..Default::default()
        }
        .connect()
        .await
        .unwrap();
        let scope = Scope {
            namespace: Some(FLUX_NS.into()),
            controller: ControllerRef {
                namespace: FLUX_NS.into(),
                name: "kustomize-controller".into(),
            },
        };
        let mut seen = Vec::new();
        loop {
            // Read before the snapshot: once `stop` is set, one more snapshot, begun after it,
            // is taken, so the state the caller waited for before stopping is always seen.
            let last = stop.load(Ordering::SeqCst);
            let (snap, _) = live::gather(&conn, &scope, &Reader::default())
                .await
                .unwrap();
            let engine = Engine::new(&snap);
            let (fleet, _) = report::fleet_report(&snap, vec![], &Options::default());
            for row in &fleet.items {
                let (ns, name) = row.kustomization.split_once('/').unwrap();
                let d = engine.diagnose(ns, name).unwrap();
                assert_eq!(row.class, d.class, "{}", row.kustomization);
                assert_eq!(
                    row.root_cause.as_deref().unwrap_or("-"),
                    root_cause_cell(&d),
                    "{}: {d:#?}",
                    row.kustomization
                );
                if d.root_cause.is_some() {
                    assert_eq!(
                        d.class,
                        Class::WaitingOnDependencies,
                        "a dependency named as root cause of a Kustomization not held at its dependsOn check: {d:#?}"
                    );
                }
                seen.push(format!(
                    "{} {} [{}]",
                    row.kustomization,
                    row.class,
                    row.root_cause.as_deref().unwrap_or("-")
                ));
            }
            if last {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        seen
    })
}

#[test]
fn all_and_single_object_agree_at_every_step() {
    let c = &quiet_cluster();
    let first = "registry.example.local:5000/podinfo:6.7.0";
    let later = "registry.example.local:5000/podinfo:7.0.0-mv";
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        let c = c.clone();
        std::thread::spawn(move || sample(&c, stop))
    };
    c.fleet(
        "mv",
        &[
            (
                "w0/ns.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: mv\n",
            ),
            ("w1/web.yaml", &web(first)),
            (
                "w2/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: wave-2\n  namespace: mv\n",
            ),
        ],
        "  interval: 1h\n  path: ./w0\n  prune: true\n  wait: true\n  timeout: 2m\n",
    )
    .unwrap();
    let wave = |n: u8, dep: &str| {
        format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: mv-w{n}, namespace: {FLUX_NS}}}\nspec:\n  sourceRef: {{kind: GitRepository, name: mv}}\n  dependsOn: [{{name: {dep}}}]\n  interval: 1h\n  path: ./w{n}\n  prune: true\n  wait: true\n  timeout: 2m\n"
        )
    };
    c.apply_yaml(&format!("{}---\n{}", wave(1, "mv"), wave(2, "mv-w1")))
        .unwrap();
    eventually(T, "mv-w2 Ready after the first rollout", || {
        (condition(&c.kustomization("mv-w2"), "Ready")["status"] == "True").then_some(())
    });
    // An image the node cannot pull yet: mv-w1's real check is held, mv-w2 waits on it.
    let sha = c
        .push("mv", &[("w1/web.yaml", &web(later))], "web: 7.0.0")
        .unwrap();
    let rev = format!("main@sha1:{sha}");
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "annotate",
        "--overwrite",
        "gitrepository",
        "mv",
        &format!("reconcile.fluxcd.io/requestedAt={}", jiff::Timestamp::now()),
    ])
    .unwrap();
    eventually(T, "mv-w2 held at its dependsOn check", || {
        let k = c.kustomization("mv-w2");
        (condition(&k, "Ready")["reason"] == "DependencyNotReady").then_some(())
    });
    eventually(T, "mv-w1's real health check is held", || {
        condition(&c.kustomization("mv-w1"), "Reconciling")["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Running health checks"))
            .then_some(())
    });
    // The image becomes pullable: the check passes and the chain recovers.
    c.registry().add(later);
    eventually(T, "mv-w2 Ready at the new revision", || {
        let k = c.kustomization("mv-w2");
        (condition(&k, "Ready")["status"] == "True" && s(&k, "/status/lastAppliedRevision") == rev)
            .then_some(())
    });
    stop.store(true, Ordering::SeqCst);
    let seen = sampler.join().unwrap();
    let distinct: std::collections::BTreeSet<&String> = seen
        .iter()
        .filter(|r| r.starts_with("flux-system/mv"))
        .collect();
    eprintln!(
        "{} rows checked, {} distinct states of the mv chain: {distinct:#?}",
        seen.len(),
        distinct.len()
    );
    // The fleet really moved through the interesting states.
    for want in [
        "flux-system/mv-w1 health-check-in-flight",
        "flux-system/mv-w2 waiting-on-dependencies [flux-system/mv-w1",
        "flux-system/mv-w2 healthy",
    ] {
        assert!(
            seen.iter().any(|r| r.starts_with(want)),
            "never saw {want}: {distinct:#?}"
        );
    }
}
