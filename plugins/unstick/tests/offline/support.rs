//! What every offline test file reads and changes the same way: one object of a snapshot by
//! name (to clone-and-mutate a fixture in place), one condition of it, a diagnosis and a plan.

use serde_json::Value;
use unstick::diagnose::{Diagnosis, Engine};
use unstick::lever::{self, Options, Plan};
use unstick::snapshot::Snapshot;

/// The unit fixture (tests/fixtures/fleet.json): one Kustomization per class, with its source,
/// controller, inventory objects and pods.
pub(crate) fn fleet() -> Snapshot {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fleet.json"
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The objects `./demo --keep` is built from: `kubectl kustomize clusters/dev` (real kubectl)
/// as JSON values, in kubectl's order.
pub(crate) fn demo_objects() -> Vec<Value> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(format!("{root}/clusters/dev"))
        .output()
        .expect("kubectl on PATH");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).unwrap()
}

/// The object named `name` in `list` (a snapshot's kustomizations, sources, objects or
/// pods), to change in place. Panics (a test bug) when there is none.
pub(crate) fn named_mut<'a>(list: &'a mut [Value], name: &str) -> &'a mut Value {
    list.iter_mut()
        .find(|o| o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no object named {name} in the fixture"))
}

/// Kustomization `name` of `snap`, to change in place.
pub(crate) fn ks_mut<'a>(snap: &'a mut Snapshot, name: &str) -> &'a mut Value {
    named_mut(&mut snap.kustomizations, name)
}

/// The `status.conditions` entry of type `type_` of `obj`, to change in place.
pub(crate) fn cond_mut<'a>(obj: &'a mut Value, type_: &str) -> &'a mut Value {
    let name = obj["metadata"]["name"].to_string();
    obj["status"]["conditions"]
        .as_array_mut()
        .and_then(|cs| cs.iter_mut().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {name}"))
}

/// The diagnosis of Kustomization `flux-system/name`.
pub(crate) fn diag(snap: &Snapshot, name: &str) -> Diagnosis {
    Engine::new(snap).diagnose("flux-system", name).unwrap()
}

/// The plan for Kustomization `flux-system/name`, as `kubectl unstick ks/NAME` computes it,
/// writing `token` as its requestedAt.
pub(crate) fn plan_with(snap: &Snapshot, name: &str, token: &str, opts: &Options) -> Plan {
    plan_by(lever::plan, snap, name, token, opts)
}

/// The plan `choose` ([`lever::plan`], [`lever::cascade_plan`]) makes for Kustomization
/// `flux-system/name` of `snap`, writing `token` as its requestedAt.
pub(crate) fn plan_by(
    choose: fn(&Diagnosis, &lever::Inputs<'_>, &Options) -> Plan,
    snap: &Snapshot,
    name: &str,
    token: &str,
    opts: &Options,
) -> Plan {
    let e = Engine::new(snap);
    let d = e.diagnose("flux-system", name).unwrap();
    let k = e.idx.kustomization("flux-system", name).unwrap();
    let holding = e.holding_workers();
    choose(
        &d,
        &lever::Inputs {
            ks: k,
            source: e.source_obj(k),
            controller: e.controller.as_ref(),
            holding: &holding,
            now: snap.now,
            token,
        },
        opts,
    )
}
