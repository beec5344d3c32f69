//! Scenario (5): the generated healthy fleet (benchmark seed).

use twin::testkit::start_shipped;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_has_300_ready_kustomizations_and_10000_inventory_objects() {
    let run = start_shipped("healthy-fleet-300").await;
    assert!(run.flux.is_none());
    let store = run.twin.store();
    let ks_gvr = store
        .gvr_for_kind("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
        .unwrap();
    let all = store.list(&ks_gvr, None, None).unwrap();
    assert_eq!(all.len(), 300);
    let mut entries = 0;
    for k in &all {
        let ready = k["status"]["conditions"][0].clone();
        assert_eq!(ready["type"], "Ready");
        assert_eq!(ready["status"], "True");
        assert_eq!(ready["reason"], "ReconciliationSucceeded");
        entries += k["status"]["inventory"]["entries"]
            .as_array()
            .unwrap()
            .len();
    }
    assert_eq!(entries, 10_000);
    let cm = store.gvr_for_kind("v1", "ConfigMap").unwrap();
    let owned = store
        .list(&cm, None, Some("kustomize.toolkit.fluxcd.io/name"))
        .unwrap();
    assert_eq!(owned.len(), 10_000);
    // waves chain through dependsOn
    let w9 = all
        .iter()
        .find(|k| k["metadata"]["name"] == "wave-9-000")
        .unwrap();
    assert_eq!(w9["spec"]["dependsOn"][0]["name"], "wave-8-000");
}
