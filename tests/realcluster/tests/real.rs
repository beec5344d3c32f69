//! The real control plane and the real Flux controllers, end to end: what the harness promises
//! (real release, etcd, controllers as processes, released CRDs) and the upstream behaviour the
//! plugins rely on, observed rather than modelled.

use std::time::{Duration, Instant};

use realcluster::testkit::{condition, eventually};

use realcluster::{Cluster, FLUX_NS, bins};
use serde_json::Value;

fn cluster() -> &'static Cluster {
    Cluster::shared().unwrap_or_else(|e| panic!("{e}"))
}
#[test]
fn the_control_plane_is_the_real_release_on_etcd() {
    let c = cluster();
    let v: Value =
        serde_json::from_str(&c.kubectl(&["get", "--raw", "/version"]).unwrap()).unwrap();
    assert_eq!(v["gitVersion"], bins::KUBE_VERSION, "{v}");
    let ready = c.kubectl(&["get", "--raw", "/readyz?verbose"]).unwrap();
    assert!(ready.contains("[+]etcd ok"), "{ready}");
    assert!(ready.contains("readyz check passed"), "{ready}");
}

#[test]
fn flux_controllers_run_as_real_processes_with_released_crds() {
    let c = cluster();
    let procs = c.host_processes();
    for name in ["source-controller", "kustomize-controller"] {
        let (pod, pid) = procs
            .iter()
            .find(|(k, _)| k.starts_with(&format!("{FLUX_NS}/{name}-")))
            .unwrap_or_else(|| panic!("no {name} process: {procs:?}"));
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        assert!(
            exe.to_string_lossy().contains(name),
            "{pod}: pid {pid} runs {}",
            exe.display()
        );
    }
    let crd = c.get_json(&["get", "crd", "kustomizations.kustomize.toolkit.fluxcd.io"]);
    assert!(
        crd["metadata"]["annotations"]["controller-gen.kubebuilder.io/version"].is_string(),
        "generated CRD: {}",
        crd["metadata"]
    );
    let est = condition(&crd, "Established");
    assert_eq!(est["status"], "True");
}

/// The CRDs of the controllers the Go module proxy refuses are generated with controller-gen
/// from their api modules (build.sh, crds/ module) and Established; their controllers do not run,
/// so an object of theirs is stored as written and no controller writes its status.
#[test]
fn generated_crds_are_established_and_their_objects_are_stored_with_the_real_schema() {
    let c = cluster();
    let dir = bins::generated_crd_dir().unwrap();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "helm.toolkit.fluxcd.io_helmreleases.yaml",
            "image.toolkit.fluxcd.io_imagepolicies.yaml",
            "image.toolkit.fluxcd.io_imagerepositories.yaml",
            "image.toolkit.fluxcd.io_imageupdateautomations.yaml",
        ]
    );
    for (crd, storage) in [
        ("helmreleases.helm.toolkit.fluxcd.io", "v2"),
        ("imagerepositories.image.toolkit.fluxcd.io", "v1"),
        ("imagepolicies.image.toolkit.fluxcd.io", "v1"),
        ("imageupdateautomations.image.toolkit.fluxcd.io", "v1"),
    ] {
        let crd = c.get_json(&["get", "crd", crd]);
        assert_eq!(
            crd["metadata"]["annotations"]["controller-gen.kubebuilder.io/version"], "v0.21.0",
            "{}",
            crd["metadata"]
        );
        assert_eq!(condition(&crd, "Established")["status"], "True", "{crd}");
        let stored: Vec<&str> = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["storage"] == true)
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(stored, [storage], "{}", crd["metadata"]["name"]);
    }
    // The real schema validates: a HelmRelease without spec.chart or spec.chartRef is refused by
    // the CEL rule of helm-controller api/v2 (HelmReleaseSpec: "either chart or chartRef must be set").
    let bad = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: no-chart\n  namespace: default\nspec:\n  interval: 1m\n";
    let err = c.apply_yaml(bad).unwrap_err().to_string();
    assert!(
        err.contains("either chart or chartRef must be set"),
        "{err}"
    );
    let procs = c.host_processes();
    for name in [
        "helm-controller",
        "image-reflector-controller",
        "image-automation-controller",
    ] {
        assert!(
            !procs.iter().any(|(k, _)| k.contains(name)),
            "{name} does not run here: {procs:?}"
        );
    }
}

fn fleet(c: &Cluster, name: &str, files: &[(&str, &str)], timeout: &str) -> String {
    c.fleet(
        name,
        files,
        &format!(
            "  interval: 10m\n  path: ./\n  prune: true\n  wait: true\n  timeout: {timeout}\n"
        ),
    )
    .unwrap()
}

/// kustomize-controller (since v1.2.0) reads Jobs with fluxcd/pkg runtime/statusreaders' Job
/// reader: InProgress until Complete. A Job whose pod cannot pull its image holds `wait: true`
/// for the whole timeout and then fails the health check naming the Job; plain kstatus would
/// call the started Job Current and the check would pass at once.
#[test]
fn a_job_that_cannot_pull_holds_the_health_check_until_the_timeout() {
    let c = cluster();
    let ns = "job-pull";
    let sha = fleet(
        c,
        "job-pull",
        &[
            (
                "ns.yaml",
                &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"),
            ),
            (
                "job.yaml",
                &format!(
                    "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: {ns}\nspec:\n  backoffLimit: 2\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: migrate\n        image: registry.example.local:5000/db-migrate:0.1.1\n"
                ),
            ),
        ],
        "40s",
    );
    let started = Instant::now();
    // The controller applies, then holds: Reconciling with the health-check message.
    let msg = eventually(Duration::from_secs(60), "health check running", || {
        let ks = c.get_json(&["-n", FLUX_NS, "get", "kustomization", "job-pull"]);
        let r = condition(&ks, "Reconciling");
        let m = r["message"].as_str()?.to_owned();
        m.starts_with("Running health checks").then_some(m)
    });
    assert!(msg.contains(&sha), "{msg}");
    assert!(msg.contains("with a timeout of 40s"), "{msg}");
    // The pod really fails to pull (node agent, kubelet messages).
    let reason = eventually(
        Duration::from_secs(30),
        "the Job's pod fails to pull",
        || {
            let pods = c.get_json(&["-n", ns, "get", "pods", "-l", "job-name=migrate"]);
            let waiting = &pods["items"][0]["status"]["containerStatuses"][0]["state"]["waiting"];
            waiting["reason"].as_str().map(str::to_owned)
        },
    );
    assert!(
        matches!(reason.as_str(), "ErrImagePull" | "ImagePullBackOff"),
        "{reason}"
    );
    // Still held well after the pod failed: not Ready=True.
    std::thread::sleep(Duration::from_secs(15));
    let ks = c.get_json(&["-n", FLUX_NS, "get", "kustomization", "job-pull"]);
    assert_ne!(
        condition(&ks, "Ready")["status"],
        "True",
        "{}",
        ks["status"]
    );
    // At the timeout: HealthCheckFailed naming the Job as InProgress.
    let ready = eventually(Duration::from_secs(60), "health check failed", || {
        let ks = c.get_json(&["-n", FLUX_NS, "get", "kustomization", "job-pull"]);
        let r = condition(&ks, "Ready");
        (r["status"] == "False").then_some(r)
    });
    let elapsed = started.elapsed();
    assert_eq!(ready["reason"], "HealthCheckFailed", "{ready}");
    let m = ready["message"].as_str().unwrap();
    assert!(
        m.contains(&format!("Job/{ns}/migrate status: 'InProgress'")),
        "{m}"
    );
    assert!(
        elapsed >= Duration::from_secs(35),
        "ended after {elapsed:?}: {m}"
    );
}
