//! One diagnosis for `--all` and for one object, at every step of a moving fleet (issue 15
//! item 2): the bare-tag rollout runs (first rollout, the automation commit, the in-flight
//! check, the fix, the recovery) while snapshots are read with the plugin's own `gather`
//! every few hundred milliseconds. On every snapshot, for every Kustomization, the `--all` row
//! (`report::fleet_report`) and the single-object diagnosis (`Engine::diagnose`, what
//! `kubectl unstick ks/NAME` prints) agree on class, root cause and lever, and the rule holds:
//! a dependency is named as root cause only for a Kustomization held at its dependsOn check.

use std::time::Duration;

use cluster_loop::cli::ClusterArgs;
use twin::flux::cluster::s;
use twin::scenario::Scenario;
use twin::testkit::{bare_tag_first_rollout, cond_is, ks, start_scaled, wait};
use unstick::diagnose::{Class, Engine};
use unstick::lever::Options;
use unstick::live::{self, ControllerRef, Reader, Scope};
use unstick::report::{self, root_cause_cell};

const T: Duration = Duration::from_secs(240);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn all_and_single_object_agree_at_every_step() {
    let mut sc = Scenario::shipped("bare-tag-rollout").unwrap();
    sc.controller.version = Some("v1.9.4".into());
    sc.controller.feature_gates.clear();
    for e in sc.events.iter_mut() {
        if e.name == "fix-commit" {
            e.manual = true;
        }
    }
    let run = start_scaled(sc, 0.05).await;
    let conn = ClusterArgs {
        kubeconfig: Some(run.twin.kubeconfig_path().to_path_buf()),
        ..Default::default()
    }
    .connect()
    .await
    .unwrap();
    let scope = Scope {
        namespace: Some("flux-system".into()),
        controller: ControllerRef {
            namespace: "flux-system".into(),
            name: "kustomize-controller".into(),
        },
    };
    let sampler = {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let h = tokio::spawn(async move {
            let mut seen = Vec::new();
            while !s2.load(std::sync::atomic::Ordering::SeqCst) {
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
                        row.root_cause,
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
                        row.kustomization, row.class, row.root_cause
                    ));
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            seen
        });
        (stop, h)
    };
    let first = bare_tag_first_rollout(&run, T).await;
    let w1 = wait(&run, &ks("apps-wave-1"), T, |o| {
        s(o, "/status/lastAttemptedRevision") != first
            && twin::testkit::cond(o, "Reconciling")
                .is_some_and(|c| s(c, "/message").starts_with("Running health checks"))
    })
    .await;
    let bad = s(&w1, "/status/lastAttemptedRevision").to_string();
    let fix = twin::testkit::bare_tag_fix_fetched(&run, &bad, T).await;
    let f = fix.clone();
    wait(&run, &ks("apps-wave-2"), T, move |o| {
        cond_is(o, "Ready", "True", "ReconciliationSucceeded")
            && s(o, "/status/lastAppliedRevision") == f
    })
    .await;
    sampler.0.store(true, std::sync::atomic::Ordering::SeqCst);
    let seen = sampler.1.await.unwrap();
    let distinct: std::collections::BTreeSet<&String> = seen.iter().collect();
    eprintln!(
        "{} rows checked, {} distinct states: {distinct:#?}",
        seen.len(),
        distinct.len()
    );
    // The fleet really moved through the interesting states.
    for want in [
        "health-check-in-flight",
        "waiting-on-dependencies",
        "healthy",
    ] {
        assert!(
            seen.iter().any(|r| r.contains(want)),
            "never saw {want}: {distinct:#?}"
        );
    }
}
