//! The real control plane and the real Flux controllers, end to end: what the harness promises
//! (real release, etcd, controllers as processes, released CRDs) and the upstream behaviour the
//! plugins rely on, observed rather than modelled.

use std::time::{Duration, Instant};

use realcluster::testkit::{condition, eventually};

use realcluster::{Cluster, FLUX_NS, bins};
use serde_json::Value;

fn cluster() -> realcluster::Lease {
    crate::assert_fresh();
    Cluster::shared().unwrap_or_else(|e| panic!("{e}"))
}
#[test]
fn the_control_plane_is_the_real_release_on_etcd() {
    let c = &cluster();
    let v: Value =
        serde_json::from_str(&c.kubectl(&["get", "--raw", "/version"]).unwrap()).unwrap();
    assert_eq!(v["gitVersion"], bins::KUBE_VERSION, "{v}");
    let ready = c.kubectl(&["get", "--raw", "/readyz?verbose"]).unwrap();
    assert!(ready.contains("[+]etcd ok"), "{ready}");
    assert!(ready.contains("readyz check passed"), "{ready}");
}

#[test]
fn flux_controllers_run_as_real_processes_with_released_crds() {
    let c = &cluster();
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

/// The CRDs of image-reflector-, image-automation- and helm-controller are the ones released
/// with the controllers build.sh builds (config/crd/bases of each controller's module), installed
/// and Established in every cluster; by default those controllers do not run (opt-in through
/// ClusterOptions), so an object of theirs is stored as written and no controller writes its
/// status.
#[test]
fn image_and_helm_crds_are_the_released_ones_and_their_objects_are_stored_with_the_real_schema() {
    let c = &cluster();
    for (controller, version, crds) in [
        (
            "image-reflector-controller",
            bins::IRC_CURRENT,
            &[
                (
                    "image.toolkit.fluxcd.io_imagepolicies.yaml",
                    "imagepolicies.image.toolkit.fluxcd.io",
                    "v1",
                ),
                (
                    "image.toolkit.fluxcd.io_imagerepositories.yaml",
                    "imagerepositories.image.toolkit.fluxcd.io",
                    "v1",
                ),
            ][..],
        ),
        (
            "image-automation-controller",
            bins::IAC_CURRENT,
            &[(
                "image.toolkit.fluxcd.io_imageupdateautomations.yaml",
                "imageupdateautomations.image.toolkit.fluxcd.io",
                "v1",
            )][..],
        ),
        (
            "helm-controller",
            bins::HELM_CURRENT,
            &[(
                "helm.toolkit.fluxcd.io_helmreleases.yaml",
                "helmreleases.helm.toolkit.fluxcd.io",
                "v2",
            )][..],
        ),
    ] {
        let dir = bins::crd_dir(controller, version).unwrap();
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml"))
            .collect();
        files.sort();
        let want: Vec<&str> = crds.iter().map(|(f, _, _)| *f).collect();
        assert_eq!(files, want, "{}", dir.display());
        for (file, crd, storage) in crds {
            // The controller-gen version the release was generated with, as the file says it.
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            let gen_version = text
                .lines()
                .find_map(|l| {
                    l.trim()
                        .strip_prefix("controller-gen.kubebuilder.io/version: ")
                })
                .unwrap_or_else(|| panic!("{file}: no controller-gen annotation"));
            let crd = c.get_json(&["get", "crd", crd]);
            assert_eq!(
                crd["metadata"]["annotations"]["controller-gen.kubebuilder.io/version"],
                gen_version,
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
            assert_eq!(stored, [*storage], "{}", crd["metadata"]["name"]);
        }
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
            "{name} does not run in the default cluster: {procs:?}"
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
    let c = &cluster();
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

/// The cluster of the image automation and helm tests: image-reflector-controller,
/// image-automation-controller and helm-controller run (ClusterOptions), with the real OCI
/// registry, and the podinfo image the chart's Deployment uses is pullable.
fn controllers_cluster() -> realcluster::Lease {
    static C: realcluster::ClusterCell = realcluster::ClusterCell::new();
    crate::cluster_with(&C, || realcluster::ClusterOptions {
        image_reflector_controller: true,
        image_automation_controller: true,
        helm_controller: true,
        images: vec![PODINFO.to_owned()],
        registry_names: vec![FLEET_REGISTRY.to_owned()],
        ..realcluster::ClusterOptions::default()
    })
}

/// A registry name as fleets write it (the example fleet's): HTTPS for go-containerregistry,
/// resolvable nowhere here, served by the harness's proxy.
const FLEET_REGISTRY: &str = "registry.example.local:5000";

const PODINFO: &str = "ghcr.io/stefanprodan/podinfo:6.7.0";

/// The opt-in controllers run as real processes of their Deployments' pods, with the
/// main-shard args `flux install` gives them.
#[test]
fn opt_in_controllers_run_as_real_processes_of_their_deployments() {
    let c = &controllers_cluster();
    let procs = c.host_processes();
    for (name, version) in [
        ("image-reflector-controller", bins::IRC_CURRENT),
        ("image-automation-controller", bins::IAC_CURRENT),
        ("helm-controller", bins::HELM_CURRENT),
    ] {
        let (pod, pid) = procs
            .iter()
            .find(|(k, _)| k.starts_with(&format!("{FLUX_NS}/{name}-")))
            .unwrap_or_else(|| panic!("no {name} process: {procs:?}"));
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        assert!(
            exe.to_string_lossy()
                .ends_with(&format!("{name}-{version}")),
            "{pod}: pid {pid} runs {}",
            exe.display()
        );
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        assert!(
            args.contains(&"--watch-label-selector=!sharding.fluxcd.io/key".to_owned()),
            "{name}: {args:?}"
        );
        let deploy = c.get_json(&["-n", FLUX_NS, "get", "deployment", name]);
        assert_eq!(
            deploy["spec"]["template"]["spec"]["containers"][0]["image"],
            format!("ghcr.io/fluxcd/{name}:{version}")
        );
    }
}

/// The real image automation loop: tags pushed to a real OCI registry (go-containerregistry's
/// cmd/registry), the real image-reflector-controller scans them into an ImageRepository and
/// its ImagePolicy (semver) selects the highest, and the real image-automation-controller
/// commits the setter change to our Git server and pushes it.
#[test]
fn image_policy_selects_the_pushed_tag_and_automation_commits_the_setter() {
    let c = &controllers_cluster();
    let oci = c
        .oci()
        .expect("the registry runs with image-reflector-controller");
    oci.push("team/app", &["1.0.0", "1.1.0", "2.0.0-rc.1"])
        .unwrap();
    let mut tags = oci.tags("team/app").unwrap();
    tags.sort();
    assert_eq!(tags, ["1.0.0", "1.1.0", "2.0.0-rc.1"]);
    let image = format!("{}/team/app", oci.host());
    let deploy = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: auto\nspec:\n  selector:\n    matchLabels: {{app: app}}\n  template:\n    metadata:\n      labels: {{app: app}}\n    spec:\n      containers:\n        - name: app\n          image: {image}:1.0.0 # {{\"$imagepolicy\": \"{FLUX_NS}:app\"}}\n"
    );
    let repo = "org/auto";
    c.git().create_repo(repo, "main").unwrap();
    let first = c
        .git()
        .commit(
            repo,
            &[twin::git::Change::write(
                "deploy/app.yaml",
                deploy.as_bytes().to_vec(),
            )],
            "app 1.0.0",
        )
        .unwrap();
    let url = c.git().url_http(repo);
    c.apply_yaml(&format!(
        r#"apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata: {{name: app, namespace: {FLUX_NS}}}
spec: {{image: "{image}", interval: 1m, insecure: true}}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata: {{name: app, namespace: {FLUX_NS}}}
spec:
  imageRepositoryRef: {{name: app}}
  policy: {{semver: {{range: ">=1.0.0"}}}}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {{name: auto, namespace: {FLUX_NS}}}
spec: {{interval: 1m, url: "{url}", ref: {{branch: main}}}}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageUpdateAutomation
metadata: {{name: auto, namespace: {FLUX_NS}}}
spec:
  interval: 1m
  sourceRef: {{kind: GitRepository, name: auto}}
  git:
    checkout: {{ref: {{branch: main}}}}
    commit:
      author: {{name: fluxcdbot, email: fluxcdbot@users.noreply.github.com}}
      messageTemplate: "automation: {{{{range .Changed.Changes}}}}{{{{.OldValue}}}} -> {{{{.NewValue}}}} {{{{end}}}}"
    push: {{branch: main}}
  update: {{path: ./deploy, strategy: Setters}}
"#
    ))
    .unwrap();
    // image-reflector-controller: the scan, then the policy's choice (2.0.0-rc.1 is a
    // pre-release, outside ">=1.0.0" by semver rules). Ready=True and the rest of the status
    // arrive in separate requests (fluxcd/pkg runtime/patch: conditions first; a run saw
    // Ready=True with observedGeneration -1 and no lastScanResult yet), so each waits for its
    // generation to be observed too.
    let observed = |o: &Value| {
        condition(o, "Ready")["status"] == "True"
            && o["status"]["observedGeneration"] == o["metadata"]["generation"]
    };
    let scanned = eventually(Duration::from_secs(120), "ImageRepository scanned", || {
        let r = c.get_json(&["-n", FLUX_NS, "get", "imagerepository", "app"]);
        observed(&r).then_some(r)
    });
    assert_eq!(
        scanned["status"]["lastScanResult"]["tagCount"], 3,
        "{scanned}"
    );
    let policy = eventually(Duration::from_secs(120), "ImagePolicy latestRef", || {
        let p = c.get_json(&["-n", FLUX_NS, "get", "imagepolicy", "app"]);
        observed(&p).then_some(p)
    });
    assert_eq!(policy["status"]["latestRef"]["name"], image, "{policy}");
    assert_eq!(policy["status"]["latestRef"]["tag"], "1.1.0", "{policy}");
    // image-automation-controller: a commit on main with the setter's new value, pushed.
    let pushed = eventually(Duration::from_secs(180), "automation push", || {
        let head = c.git().head(repo, "main").ok()?;
        (head != first).then_some(head)
    });
    let text =
        String::from_utf8(c.git().read_file(repo, &pushed, "deploy/app.yaml").unwrap()).unwrap();
    assert!(
        text.contains(&format!(
            "image: {image}:1.1.0 # {{\"$imagepolicy\": \"{FLUX_NS}:app\"}}"
        )),
        "{text}"
    );
    let log = c.git().log(repo, "main").unwrap();
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0].sha, pushed);
    assert_eq!(
        log[0].subject,
        // The template's trailing space is gone: git keeps no trailing whitespace on a line.
        format!("automation: {image}:1.0.0 -> {image}:1.1.0"),
        "{log:?}"
    );
    let auto = eventually(Duration::from_secs(60), "lastPushCommit", || {
        let a = c.get_json(&["-n", FLUX_NS, "get", "imageupdateautomation", "auto"]);
        (a["status"]["lastPushCommit"] == pushed.as_str()).then_some(a)
    });
    assert_eq!(condition(&auto, "Ready")["status"], "True", "{auto}");
}

/// A fleet's registry name with no `spec.insecure` (so HTTPS only, go-containerregistry
/// `Registry.Scheme`) reaches the real OCI registry through the harness's proxy: the real
/// image-reflector-controller runs with the proxy env its Deployment shows, scans the tags
/// pushed to the registry, and its ImagePolicy's latestRef keeps the fleet's name. A port the
/// proxy does not serve is refused, and the real controller reports the scan failed.
#[test]
fn image_repository_scans_a_fleet_registry_name_through_the_proxy() {
    let c = &controllers_cluster();
    let oci = c
        .oci()
        .expect("the registry runs with image-reflector-controller");
    let proxy = c.oci_proxy().expect("registry_names starts the proxy");
    oci.push("proxied/app", &["1.0.0", "1.2.0", "0.9.0"])
        .unwrap();
    let deploy = c.get_json(&[
        "-n",
        FLUX_NS,
        "get",
        "deployment",
        "image-reflector-controller",
    ]);
    let env = &deploy["spec"]["template"]["spec"]["containers"][0]["env"];
    let value = |name: &str| {
        env.as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    assert_eq!(value("HTTPS_PROXY"), Some(proxy.url().into()), "{env}");
    assert_eq!(
        value("SSL_CERT_FILE"),
        Some(proxy.ca_file().to_string_lossy().into()),
        "{env}"
    );
    let image = format!("{FLEET_REGISTRY}/proxied/app");
    let unserved = "registry.example.local:5001/proxied/app";
    c.apply_yaml(&format!(
        r#"apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata: {{name: proxied, namespace: {FLUX_NS}}}
spec: {{image: "{image}", interval: 1m}}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata: {{name: proxied, namespace: {FLUX_NS}}}
spec:
  imageRepositoryRef: {{name: proxied}}
  policy: {{semver: {{range: ">=1.0.0"}}}}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata: {{name: unserved, namespace: {FLUX_NS}}}
spec: {{image: "{unserved}", interval: 1m}}
"#
    ))
    .unwrap();
    let observed = |o: &Value| o["status"]["observedGeneration"] == o["metadata"]["generation"];
    let policy = eventually(Duration::from_secs(120), "ImagePolicy latestRef", || {
        let p = c.get_json(&["-n", FLUX_NS, "get", "imagepolicy", "proxied"]);
        (condition(&p, "Ready")["status"] == "True" && observed(&p)).then_some(p)
    });
    assert_eq!(policy["status"]["latestRef"]["name"], image, "{policy}");
    assert_eq!(policy["status"]["latestRef"]["tag"], "1.2.0", "{policy}");
    let repo = c.get_json(&["-n", FLUX_NS, "get", "imagerepository", "proxied"]);
    assert_eq!(repo["status"]["lastScanResult"]["tagCount"], 3, "{repo}");
    assert!(
        proxy
            .log()
            .contains(&format!("CONNECT {FLEET_REGISTRY} -> {}", oci.host())),
        "{:?}",
        proxy.log()
    );
    // The refused name: the controller's scan fails with Go's CONNECT error (the proxy's
    // status text, net/http transport `dialConn`) on an https URL, and the proxy logged the
    // refusal. A failed scan leaves observedGeneration at -1 (seen: Ready=False
    // ReadOperationFailed, Reconciling=True ProgressingWithRetry).
    let failed = eventually(Duration::from_secs(120), "unserved scan failure", || {
        let r = c.get_json(&["-n", FLUX_NS, "get", "imagerepository", "unserved"]);
        (condition(&r, "Ready")["status"] == "False").then_some(r)
    });
    let ready = condition(&failed, "Ready");
    assert_eq!(ready["reason"], "ReadOperationFailed", "{failed}");
    assert!(
        ready["message"]
            .as_str()
            .unwrap_or_default()
            .contains(r#"Get "https://registry.example.local:5001/v2/": Forbidden"#),
        "{failed}"
    );
    assert!(failed["status"]["lastScanResult"].is_null(), "{failed}");
    assert!(
        proxy
            .log()
            .contains(&"CONNECT registry.example.local:5001: 403".to_owned()),
        "{:?}",
        proxy.log()
    );
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "delete",
        "imagerepository",
        "unserved",
        "--wait=false",
    ])
    .unwrap();
}

/// A HelmRelease of a chart in a GitRepository, installed into the real cluster by the real
/// helm-controller (the chart built by the real source-controller as a HelmChart artifact):
/// the release's objects exist, the Deployment rolled out, the Helm release Secret is stored.
#[test]
fn helm_release_from_a_git_chart_installs_into_the_cluster() {
    let c = &controllers_cluster();
    let ns = "helm-demo";
    c.kubectl(&["create", "namespace", ns]).unwrap();
    let chart = "apiVersion: v2\nname: demo\nversion: 0.1.0\nappVersion: \"6.7.0\"\n";
    let values = format!("image: {PODINFO}\nmessage: from values\n");
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: {{ .Release.Name }}}\n  template:\n    metadata:\n      labels: {app: {{ .Release.Name }}}\n    spec:\n      containers:\n        - name: app\n          image: {{ .Values.image }}\n";
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\ndata:\n  message: {{ .Values.message | quote }}\n  chart: {{ .Chart.Name }}-{{ .Chart.Version }}\n";
    let repo = "org/charts";
    c.git().create_repo(repo, "main").unwrap();
    let files = [
        ("charts/demo/Chart.yaml", chart.to_owned()),
        ("charts/demo/values.yaml", values),
        ("charts/demo/templates/deployment.yaml", deploy.to_owned()),
        ("charts/demo/templates/configmap.yaml", cm.to_owned()),
    ];
    let changes: Vec<twin::git::Change> = files
        .iter()
        .map(|(p, t)| twin::git::Change::write(*p, t.as_bytes().to_vec()))
        .collect();
    c.git().commit(repo, &changes, "demo chart 0.1.0").unwrap();
    let url = c.git().url_http(repo);
    c.apply_yaml(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {{name: charts, namespace: {FLUX_NS}}}\nspec: {{interval: 10m, url: \"{url}\", ref: {{branch: main}}}}\n"
    ))
    .unwrap();
    c.apply_yaml(&format!(
        r#"apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: demo, namespace: {FLUX_NS}}}
spec:
  interval: 10m
  targetNamespace: {ns}
  chart:
    spec:
      chart: ./charts/demo
      sourceRef: {{kind: GitRepository, name: charts}}
  values:
    message: from the HelmRelease
"#
    ))
    .unwrap();
    // Ready=True alone is not the end of the reconcile: helm-controller writes Ready (with
    // status.observedGeneration still -1) before the patch that records status.history
    // (seen in CI, 2026-12-02); the reconcile is done when observedGeneration is the generation
    // (kstatus's rule for a Flux object).
    let hr = eventually(Duration::from_secs(180), "HelmRelease Ready", || {
        let hr = c.get_json(&["-n", FLUX_NS, "get", "helmrelease", "demo"]);
        (condition(&hr, "Ready")["status"] == "True"
            && hr["status"]["observedGeneration"] == hr["metadata"]["generation"])
            .then_some(hr)
    });
    let release = format!("{ns}-demo");
    let history = &hr["status"]["history"][0];
    assert_eq!(history["name"], release.as_str(), "{hr}");
    assert_eq!(history["chartName"], "demo", "{hr}");
    assert_eq!(history["chartVersion"], "0.1.0", "{hr}");
    assert_eq!(history["status"], "deployed", "{hr}");
    // The HelmChart source-controller built from the GitRepository at the pushed commit.
    let chart_obj = c.get_json(&[
        "-n",
        FLUX_NS,
        "get",
        "helmchart",
        &format!("{FLUX_NS}-demo"),
    ]);
    assert_eq!(
        condition(&chart_obj, "Ready")["status"],
        "True",
        "{chart_obj}"
    );
    assert_eq!(
        chart_obj["status"]["artifact"]["revision"], "0.1.0",
        "{chart_obj}"
    );
    let cm = c.get_json(&["-n", ns, "get", "configmap", &format!("{release}-config")]);
    assert_eq!(cm["data"]["message"], "from the HelmRelease", "{cm}");
    assert_eq!(cm["data"]["chart"], "demo-0.1.0", "{cm}");
    let d = c.get_json(&["-n", ns, "get", "deployment", &release]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        PODINFO
    );
    assert_eq!(d["status"]["readyReplicas"], 1, "{d}");
    // The Helm storage (release Secrets) is in the HelmRelease's namespace unless
    // spec.storageNamespace says otherwise (helm-controller api/v2 HelmReleaseSpec).
    let secrets = c.get_json(&[
        "-n",
        FLUX_NS,
        "get",
        "secret",
        "-l",
        &format!("owner=helm,name={release}"),
    ]);
    let names: Vec<&str> = secrets["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [format!("sh.helm.release.v1.{release}.v1")]);
}

/// The back-off of a crash-looping container after `restarts` restarts, as the kubelet words
/// it: 10 s after the second exit (the first restarts at once), doubling per restart, capped at
/// 5 min (client-go flowcontrol.Backoff with kubelet.go `initialCrashLoopBackOff` and
/// `MaxCrashLoopBackOff`), printed as a Go duration.
fn backoff_after(restarts: u64) -> String {
    let s = (10u64 << (restarts.max(1) - 1).min(5)).min(300);
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m{}s", s / 60, s % 60)
    }
}

/// A controller whose process exits is reported as a kubelet reports it: kustomize-controller
/// v1.9.6 run with an unknown feature gate exits 1 at once (main.go: `unable to load feature
/// gates`, fluxcd/pkg runtime/features `feature-gate 'NoSuchGate' not supported`). In a
/// Deployment's pod (restartPolicy Always) it is restarted, then held in CrashLoopBackOff with
/// the kubelet's message and doubling back-off, restartCount counting the restarts, lastState
/// the exit; the pod and the container are not ready, and the real deployment controller marks
/// the Deployment unavailable. `kubectl logs --previous` shows the exited run's log. A pod
/// with restartPolicy Never ends Failed, not restarted. Its own namespace of the shared
/// cluster; the cluster's own kustomize-controller is not touched.
#[test]
fn an_exited_controller_crash_loops_as_a_kubelet_reports_it() {
    let c = &cluster();
    let image = format!("ghcr.io/fluxcd/kustomize-controller:{}", bins::KC_CURRENT);
    c.apply_yaml(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: crashloop}}\n---\n\
apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: crashy, namespace: crashloop}}\n\
spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: crashy}}}}\n  template:\n    metadata: {{labels: {{app: crashy}}}}\n    spec:\n      containers:\n      - name: manager\n        image: {image}\n        args: [--log-encoding=json, --feature-gates=NoSuchGate=true]\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {{name: once, namespace: crashloop}}\n\
spec:\n  restartPolicy: Never\n  containers:\n  - name: manager\n    image: {image}\n    args: [--log-encoding=json, --feature-gates=NoSuchGate=true]\n"
    ))
    .unwrap();
    let crashing = |min_restarts: u64| {
        eventually(
            Duration::from_secs(120),
            &format!("crashy in CrashLoopBackOff after {min_restarts}+ restarts"),
            || {
                let pods = c.get_json(&["-n", "crashloop", "get", "pods", "-l", "app=crashy"]);
                let pod = pods["items"].as_array()?.first()?.clone();
                let cs = &pod["status"]["containerStatuses"][0];
                (cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
                    && cs["restartCount"].as_u64()? >= min_restarts)
                    .then_some(pod)
            },
        )
    };
    let pod = crashing(1);
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_owned();
    let cs = &pod["status"]["containerStatuses"][0];
    let n = cs["restartCount"].as_u64().unwrap();
    assert_eq!(
        cs["state"]["waiting"]["message"],
        format!(
            "back-off {} restarting failed container=manager pod={name}_crashloop({uid})",
            backoff_after(n)
        ),
        "{pod:#}"
    );
    let last = &cs["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 1, "{pod:#}");
    assert_eq!(last["reason"], "Error", "{pod:#}");
    for f in ["startedAt", "finishedAt", "containerID"] {
        assert!(last[f].is_string(), "{f}: {pod:#}");
    }
    assert_eq!(cs["ready"], false, "{pod:#}");
    assert_eq!(cs["started"], false, "{pod:#}");
    // kubelet getPhase: restartPolicy Always, every container restarting: Running.
    assert_eq!(pod["status"]["phase"], "Running", "{pod:#}");
    for t in ["Ready", "ContainersReady"] {
        let cond = condition(&pod, t);
        assert_eq!(cond["status"], "False", "{t}: {pod:#}");
        assert_eq!(cond["reason"], "ContainersNotReady", "{t}: {pod:#}");
        assert_eq!(
            cond["message"], "containers with unready status: [manager]",
            "{t}: {pod:#}"
        );
    }
    // The real deployment controller: no available replica, Available False.
    let d = eventually(Duration::from_secs(60), "crashy unavailable", || {
        let d = c.get_json(&["-n", "crashloop", "get", "deployment", "crashy"]);
        (condition(&d, "Available")["status"] == "False" && d["status"]["unavailableReplicas"] == 1)
            .then_some(d)
    });
    assert_eq!(
        condition(&d, "Available")["reason"],
        "MinimumReplicasUnavailable",
        "{d:#}"
    );
    assert!(d["status"]["readyReplicas"].is_null(), "{d:#}");
    // The next restart, and the back-off doubled.
    let pod = crashing(n + 1);
    let cs = &pod["status"]["containerStatuses"][0];
    let m = cs["restartCount"].as_u64().unwrap();
    assert_eq!(
        pod["metadata"]["uid"],
        uid.as_str(),
        "the same pod restarts"
    );
    assert_eq!(
        cs["state"]["waiting"]["message"],
        format!(
            "back-off {} restarting failed container=manager pod={name}_crashloop({uid})",
            backoff_after(m)
        ),
        "{pod:#}"
    );
    // The exited run's own log, through the real apiserver's pods/log.
    let prev = c
        .kubectl(&[
            "-n",
            "crashloop",
            "logs",
            &name,
            "-c",
            "manager",
            "--previous",
        ])
        .unwrap();
    assert!(
        prev.contains("\"msg\":\"unable to load feature gates\"")
            && prev.contains("feature-gate 'NoSuchGate' not supported"),
        "{prev}"
    );
    let events = c.get_json(&[
        "-n",
        "crashloop",
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={name},reason=BackOff"),
    ]);
    assert!(
        events["items"]
            .as_array()
            .is_some_and(|a| a.iter().any(|e| e["message"]
                == format!(
                    "Back-off restarting failed container manager in pod {name}_crashloop({uid})"
                )
                && e["type"] == "Warning")),
        "{events:#}"
    );

    // restartPolicy Never: terminated, not restarted, the pod Failed.
    let once = eventually(Duration::from_secs(60), "pod once Failed", || {
        let p = c.get_json(&["-n", "crashloop", "get", "pod", "once"]);
        (p["status"]["phase"] == "Failed").then_some(p)
    });
    let cs = &once["status"]["containerStatuses"][0];
    assert_eq!(cs["state"]["terminated"]["exitCode"], 1, "{once:#}");
    assert_eq!(cs["state"]["terminated"]["reason"], "Error", "{once:#}");
    assert_eq!(cs["restartCount"], 0, "{once:#}");
    assert_eq!(cs["lastState"], serde_json::json!({}), "{once:#}");
    let err = c
        .kubectl(&["-n", "crashloop", "logs", "once", "--previous"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("previous terminated container \"manager\" in pod \"once\" not found"),
        "{err}"
    );
    let log = c.kubectl(&["-n", "crashloop", "logs", "once"]).unwrap();
    assert!(log.contains("unable to load feature gates"), "{log}");
    c.kubectl(&["delete", "namespace", "crashloop", "--wait=false"])
        .unwrap();
}
