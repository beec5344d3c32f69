//! The install manifests, rendered by the real `kubectl kustomize`: the base is read-only (no
//! write verb on any Flux object; only its Events and its own Lease), the levers overlay adds
//! the lever's patch rules and `--enable-levers`; the Flux-native example parses. Applying
//! them to the real API server (server-side dry run) is the real test
//! `long::controller::manifests_apply_to_the_real_api_server`.
use std::path::Path;
use std::process::Command;

fn kustomize(dir: &str) -> Vec<serde_json::Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/kustomize")
        .join(dir);
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(&root)
        .output()
        .unwrap_or_else(|e| panic!("kubectl kustomize {}: {e}", root.display()));
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.split("\n---\n")
        .map(|d| serde_saphyr::from_str::<serde_json::Value>(d).unwrap())
        .collect()
}

fn writes(docs: &[serde_json::Value]) -> Vec<String> {
    let mut w = Vec::new();
    for d in docs.iter().filter(|d| d["kind"] == "ClusterRole") {
        for r in d["rules"].as_array().unwrap() {
            for v in r["verbs"].as_array().unwrap() {
                let v = v.as_str().unwrap();
                if !matches!(v, "get" | "list" | "watch") {
                    for res in r["resources"].as_array().unwrap() {
                        w.push(format!("{v} {}", res.as_str().unwrap()));
                    }
                }
            }
        }
    }
    w.sort();
    w
}

#[test]
fn the_base_is_read_only_and_the_levers_overlay_adds_only_the_lever_writes() {
    let base = kustomize("base");
    let kinds: Vec<&str> = base.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    for k in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
    ] {
        assert!(kinds.contains(&k), "{k} missing: {kinds:?}");
    }
    assert_eq!(writes(&base), vec!["create events", "patch events"]);
    let dep = base.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let args = &dep["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(!args.to_string().contains("--enable-levers"), "{args}");

    let levers = kustomize("levers");
    let w = writes(&levers);
    assert!(w.contains(&"patch kustomizations".to_string()), "{w:?}");
    assert!(!w.iter().any(|x| x.starts_with("delete")), "{w:?}");
    let dep = levers.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let args = &dep["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(args.to_string().contains("--enable-levers"), "{args}");
}

#[test]
fn the_flux_example_is_an_ocirepository_and_a_kustomization() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/flux/cluster-loop-controller.yaml");
    let text = std::fs::read_to_string(&p).unwrap();
    let docs: Vec<serde_json::Value> = text
        .split("\n---\n")
        .map(|d| serde_saphyr::from_str(d).unwrap())
        .collect();
    assert_eq!(docs[0]["kind"], "OCIRepository");
    assert_eq!(docs[1]["kind"], "Kustomization");
    assert_eq!(
        docs[1]["spec"]["sourceRef"]["name"],
        docs[0]["metadata"]["name"]
    );
}
