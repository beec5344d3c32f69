//! A Kustomization (`wait: true`) whose health check is held by a HelmRelease, on the real
//! control plane with the real helm-controller v1.6.4, source-controller and
//! kustomize-controller v1.9.6 (one cluster of its own with helm-controller, [`helm_cluster`]).
//! The chart is ours and tiny (`charts/web` in the fleet repository on our Git server; the
//! HelmRelease reads it through `spec.chart.spec.sourceRef` GitRepository); the node agent
//! pulls only the images its registry holds.
//!
//! - [`out_of_retries_then_a_git_fix`]: the chart's Deployment cannot pull its image; the real
//!   helm-controller's install waits, fails, retries once and stalls (`RetriesExceeded`); the
//!   real kustomize-controller reads the HelmRelease as Failed and fails the check early.
//!   unstick names the HelmRelease, its last failure, the pod and the image, and plans no write;
//!   a reconcile of the Kustomization really changes nothing; the fix pushed to Git (a pullable
//!   image in the values) and `--with-source` really free it (proof: recovered).
//! - [`out_of_retries_then_the_image_appears`]: the cause goes away outside Git (the image
//!   becomes pullable): the stalled HelmRelease stays stalled; the force request unstick prints
//!   (the `kubectl annotate` form of `flux reconcile hr --force`) really frees it, then unstick's
//!   request finishes the Kustomization (proof: recovered).
//! - [`installing_is_waiting_not_stuck`]: an install in progress with no failure (the chart's
//!   LoadBalancer Service has no ingress yet, so Helm's wait holds): unstick says waiting, exit
//!   0, lever `wait`, no write; run without `--dry-run` it watches, the ingress is set, the
//!   install succeeds and the real check passes: proof `recovered`, nothing written.

use std::io::{BufRead, BufReader};
use std::process::Command;
use std::time::Duration;

use realcluster::testkit::{condition, eventually};
use realcluster::{Cluster, ClusterOptions, FLUX_NS};
use serde_json::Value;

use super::BIN;
use super::situations::concurrently;
use super::unstick_json as unstick;

/// The cluster of this file: helm-controller runs, kustomize-controller as by default. Started
/// on first use, on a thread of its own (start() runs a runtime of its own). Panics with the
/// start error.
fn helm_cluster() -> realcluster::Lease {
    static HELM: realcluster::ClusterCell = realcluster::ClusterCell::new();
    crate::cluster_with(&HELM, || ClusterOptions {
        helm_controller: true,
        ..ClusterOptions::default()
    })
}

/// `kubectl -n NS get WHAT -o json`; `Value::Null` while it does not exist yet (or cannot be
/// read), so polls can wait for it.
fn get(c: &Cluster, ns: &str, what: &str) -> Value {
    c.kubectl(&["-n", ns, "get", what, "-o", "json"])
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null)
}

/// The chart: a Deployment of `{{ .Values.image }}` and, with `.Values.loadBalancer`, a
/// LoadBalancer Service (Helm v3.19's wait holds an install until it has an ingress,
/// pkg/kube/ready.go `serviceReady`).
const CHART_YAML: &str = "apiVersion: v2\nname: web\nversion: 0.1.0\n";
const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: {{ .Release.Name }}}\n  template:\n    metadata:\n      labels: {app: {{ .Release.Name }}}\n    spec:\n      containers:\n      - name: web\n        image: {{ .Values.image }}\n";
const SERVICE: &str = "{{- if .Values.loadBalancer }}\napiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  type: LoadBalancer\n  selector: {app: {{ .Release.Name }}}\n  ports:\n  - port: 80\n{{- end }}\n";

/// `deploy/hr.yaml`: the namespace and HelmRelease `web` reading `./charts/web` from the
/// fleet's GitRepository, install timeout `timeout`, one remediation retry.
fn hr_yaml(fleet: &str, ns: &str, image: &str, load_balancer: bool, timeout: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  interval: 1h\n  timeout: {timeout}\n  install:\n    remediation:\n      retries: 1\n  chart:\n    spec:\n      chart: ./charts/web\n      sourceRef:\n        kind: GitRepository\n        name: {fleet}\n        namespace: {FLUX_NS}\n  values:\n    image: {image}\n    loadBalancer: {load_balancer}\n"
    )
}

/// The fleet: chart and HelmRelease; the Kustomization applies `./deploy` with `wait: true`
/// and runs again only when asked (interval and retryInterval 1h).
fn fleet(c: &Cluster, fleet: &str, ns: &str, image: &str, lb: bool, hr_timeout: &str) {
    let hr = hr_yaml(fleet, ns, image, lb, hr_timeout);
    c.fleet(
        fleet,
        &[
            ("charts/web/Chart.yaml", CHART_YAML),
            ("charts/web/templates/deployment.yaml", DEPLOYMENT),
            ("charts/web/templates/service.yaml", SERVICE),
            ("deploy/hr.yaml", &hr),
        ],
        "  interval: 1h\n  retryInterval: 1h\n  path: ./deploy\n  prune: true\n  wait: true\n  timeout: 3m\n",
    )
    .unwrap();
}

/// Until the real kustomize-controller's check failed early on the stalled HelmRelease; the
/// Ready condition.
fn failed_early_on(c: &Cluster, name: &str, ns: &str) -> Value {
    eventually(
        Duration::from_secs(240),
        "the real check fails early on the stalled HelmRelease",
        || {
            let r = condition(&c.kustomization(name), "Ready");
            (r["reason"] == "HealthCheckFailed"
                && r["message"].as_str().is_some_and(|m| {
                    m.contains("failed early due to stalled resources")
                        && m.contains(&format!("HelmRelease/{ns}/web status: 'Failed'"))
                }))
            .then_some(r)
        },
    )
}

/// The HelmRelease as the real helm-controller leaves it once the retries are exhausted.
fn assert_stalled(hr: &Value) {
    let s = condition(hr, "Stalled");
    assert_eq!(s["status"], "True", "{hr:#}");
    assert_eq!(s["reason"], "RetriesExceeded", "{hr:#}");
    assert_eq!(
        s["message"], "Failed to install after 2 attempt(s)",
        "{hr:#}"
    );
    assert_eq!(condition(hr, "Ready")["reason"], "InstallFailed", "{hr:#}");
}

/// What unstick says about the stalled HelmRelease (both scenarios).
fn assert_named_as_stalled(v: &Value, ns: &str) -> String {
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "health-check-failed", "{v:#}");
    let b = &d["blocking"][0];
    assert_eq!(b["object"], format!("HelmRelease/{ns}/web"), "{v:#}");
    assert_eq!(b["kstatus"], "Failed", "{b:#}");
    let m = b["message"].as_str().unwrap();
    assert!(
        m.starts_with(&format!(
            "helm-controller gave up (Stalled RetriesExceeded: Failed to install after 2 attempt(s)): Helm install failed for release {ns}/web with chart web@0.1.0"
        )),
        "{m}"
    );
    let fix = b["fix"].as_str().unwrap().to_string();
    eprintln!("unstick on {ns}: {m}\n  fix: {fix}");
    assert!(fix.contains("fix the chart or its values in Git"), "{fix}");
    assert!(
        fix.contains(&format!("flux reconcile helmrelease web -n {ns} --force")),
        "{fix}"
    );
    let p = &v["plan"];
    assert_eq!(p["lever"], "fix-blockers", "{p:#}");
    assert_eq!(p["steps"], serde_json::json!([]), "{p:#}");
    fix
}

/// The chart's Deployment cannot pull its image. Before the stall (while the install runs or
/// is retried) and after it, unstick names the HelmRelease with the pod and the image; after
/// it, the HelmRelease's own last failure and the fix, with no write planned. A real reconcile
/// request on the Kustomization is handled and changes nothing (the same HelmRelease is
/// re-applied, helm-controller does not act on it). The Git fix and `--with-source` free it.
fn out_of_retries_then_a_git_fix() {
    let c = &helm_cluster();
    let (name, ns) = ("hr-gitfix", "hr-gitfix");
    let missing = "registry.example.local/hr-gitfix-web:1";
    fleet(c, name, ns, missing, false, "15s");
    // While helm-controller installs, retries or once it stalled: the release's pod cannot
    // pull. Between two attempts the release has no Deployment (remediation uninstalled it),
    // so this asks until a reading shows the release's pods (the stalled release keeps them).
    let (code, v, err) = eventually(
        Duration::from_secs(240),
        "unstick shows the release's pod that cannot pull",
        || {
            let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "-n", FLUX_NS, "--dry-run"]);
            v["diagnosis"]["blocking"][0]["pods"]
                .as_array()
                .is_some_and(|p| !p.is_empty())
                .then_some((code, v, err))
        },
    );
    assert_eq!(code, 1, "{v:#}\n{err}");
    let b = &v["diagnosis"]["blocking"][0];
    assert_eq!(b["object"], format!("HelmRelease/{ns}/web"), "{v:#}");
    assert_ne!(b["progressing"], true, "{b:#}");
    let p = &b["pods"][0];
    assert_eq!(p["image"], missing, "{b:#}");
    assert!(
        p["reason"] == "ErrImagePull" || p["reason"] == "ImagePullBackOff",
        "{b:#}"
    );
    assert!(
        b["fix"]
            .as_str()
            .unwrap()
            .starts_with(&format!("the release's pods cannot pull {missing}")),
        "{b:#}"
    );
    // The real controllers: install, retry, stall; the check fails early.
    failed_early_on(c, name, ns);
    let hr = get(c, ns, "helmrelease/web");
    assert_stalled(&hr);
    let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "-n", FLUX_NS, "--dry-run"]);
    assert_eq!(code, 1, "{v:#}\n{err}");
    assert_named_as_stalled(&v, ns);
    assert!(
        v["diagnosis"]["blocking"][0]["pods"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["image"] == missing),
        "{v:#}"
    );
    // Without --dry-run: nothing to write, nothing written.
    let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "-n", FLUX_NS, "--yes"]);
    assert_eq!(code, 1, "{v:#}\n{err}");
    assert_eq!(v["action"], "not-needed", "{v:#}");
    assert!(
        c.kustomization(name)["metadata"]["annotations"]["reconcile.fluxcd.io/requestedAt"]
            .is_null()
    );
    // The claim "a reconcile of the Kustomization alone changes nothing", on the real
    // controllers: `flux reconcile ks` writes requestedAt; the run handles it, re-applies the
    // same HelmRelease and fails early again; the HelmRelease keeps its generation and stall.
    let token = jiff::Timestamp::now().to_string();
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "annotate",
        "--overwrite",
        &format!("kustomization/{name}"),
        &format!("reconcile.fluxcd.io/requestedAt={token}"),
    ])
    .unwrap();
    eventually(
        Duration::from_secs(120),
        "the requested run is handled",
        || {
            let k = c.kustomization(name);
            (k["status"]["lastHandledReconcileAt"] == token.as_str()).then_some(())
        },
    );
    failed_early_on(c, name, ns);
    let after = get(c, ns, "helmrelease/web");
    assert_eq!(
        after["metadata"]["generation"],
        hr["metadata"]["generation"]
    );
    assert_stalled(&after);
    // The fix in Git: a pullable image in the HelmRelease's values.
    let fixed = "registry.example.local/hr-gitfix-web:2";
    c.registry().add(fixed);
    c.push(
        name,
        &[("deploy/hr.yaml", &hr_yaml(name, ns, fixed, false, "15s"))],
        "web: an image that exists",
    )
    .unwrap();
    let (code, v, err) = unstick(
        c,
        &[
            &format!("ks/{name}"),
            "-n",
            FLUX_NS,
            "--with-source",
            "--yes",
        ],
    );
    assert_eq!(code, 0, "{v:#}\n{err}");
    assert_eq!(v["plan"]["lever"], "reconcile-source", "{v:#}");
    assert_eq!(v["proof"], "recovered", "{v:#}");
    let hr = get(c, ns, "helmrelease/web");
    assert_eq!(condition(&hr, "Ready")["status"], "True", "{hr:#}");
    assert!(condition(&hr, "Stalled").is_null(), "{hr:#}");
}

/// The cause goes away outside Git: the image becomes pullable after the stall. The real
/// helm-controller does not try again by itself; unstick still names the stalled HelmRelease
/// (its pods are fine now) with the force request, which, run as printed (the `kubectl
/// annotate` form with a token), really makes helm-controller upgrade it; unstick then requests
/// the Kustomization's run (every object of the failed check is Current now) and proves it.
fn out_of_retries_then_the_image_appears() {
    let c = &helm_cluster();
    let (name, ns) = ("hr-force", "hr-force");
    let image = "registry.example.local/hr-force-web:1";
    fleet(c, name, ns, image, false, "15s");
    failed_early_on(c, name, ns);
    assert_stalled(&get(c, ns, "helmrelease/web"));
    c.registry().add(image);
    // The pod runs now (the node agent pulls on its next pass), the HelmRelease stays stalled.
    eventually(
        Duration::from_secs(60),
        "the release's pod runs once the image exists",
        || {
            let pods = get(c, ns, "pods");
            pods["items"]
                .as_array()?
                .iter()
                .any(|p| p["status"]["phase"] == "Running")
                .then_some(())
        },
    );
    assert_stalled(&get(c, ns, "helmrelease/web"));
    let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "-n", FLUX_NS, "--dry-run"]);
    assert_eq!(code, 1, "{v:#}\n{err}");
    let fix = assert_named_as_stalled(&v, ns);
    // Run the printed kubectl form, with its token.
    let start = fix
        .find(&format!("kubectl -n {ns} annotate"))
        .unwrap_or_else(|| panic!("no kubectl form in: {fix}"));
    let end = fix[start..].find("forceAt=$T").unwrap() + start + "forceAt=$T".len();
    let cmd = &fix[start..end];
    assert!(fix[..start].ends_with("T=$(date +%s); "), "{fix}");
    let token = jiff::Timestamp::now().to_string();
    let args: Vec<String> = cmd
        .replace("$T", &token)
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(args[0], "kubectl", "{cmd}");
    let args: Vec<&str> = args[1..].iter().map(String::as_str).collect();
    c.kubectl(&args).unwrap();
    let hr = eventually(
        Duration::from_secs(120),
        "helm-controller handles the force request",
        || {
            let hr = get(c, ns, "helmrelease/web");
            (condition(&hr, "Ready")["status"] == "True").then_some(hr)
        },
    );
    assert_eq!(hr["status"]["lastHandledForceAt"], token.as_str(), "{hr:#}");
    // The Kustomization's check failed on a status the HelmRelease no longer has: the next
    // run passes; unstick requests it and proves it.
    let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "-n", FLUX_NS, "--yes"]);
    assert_eq!(code, 0, "{v:#}\n{err}");
    assert_eq!(v["plan"]["lever"], "request-reconcile", "{v:#}");
    assert_eq!(v["proof"], "recovered", "{v:#}");
}

/// An install in progress with no failure: Helm's wait holds on the chart's LoadBalancer
/// Service (no ingress), the Deployment's pod runs. unstick: waiting, exit 0, lever `wait`, no
/// write. Run again without `--dry-run` it watches; once it printed its plan the ingress is set,
/// the install succeeds and the real check passes: it says recovered, having written nothing
/// (no request, no suspend): waiting was the right verdict.
fn installing_is_waiting_not_stuck() {
    let c = &helm_cluster();
    let (name, ns) = ("hr-wait", "hr-wait");
    let image = "registry.example.local/hr-wait-web:1";
    c.registry().add(image);
    fleet(c, name, ns, image, true, "3m");
    eventually(
        Duration::from_secs(180),
        "helm-controller is installing and the Service waits for its ingress",
        || {
            let hr = get(c, ns, "helmrelease/web");
            let installing = condition(&hr, "Reconciling")["message"]
                .as_str()
                .is_some_and(|m| m == "Running 'install' action with timeout of 3m0s");
            let svc = get(c, ns, "service/web");
            let k = c.kustomization(name);
            let checking = condition(&k, "Reconciling")["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Running health checks"));
            (installing && svc["spec"]["type"] == "LoadBalancer" && checking).then_some(())
        },
    );
    let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "-n", FLUX_NS, "--dry-run"]);
    assert_eq!(code, 0, "{v:#}\n{err}");
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "health-check-in-flight", "{v:#}");
    let b = &d["blocking"][0];
    assert_eq!(b["object"], format!("HelmRelease/{ns}/web"), "{v:#}");
    assert_eq!(b["kstatus"], "InProgress", "{b:#}");
    assert_eq!(b["progressing"], true, "{b:#}");
    assert!(b["fix"].is_null(), "{b:#}");
    assert!(
        b["message"]
            .as_str()
            .unwrap()
            .starts_with("helm-controller is running 'install' (timeout 3m0s) since "),
        "{b:#}"
    );
    assert_eq!(v["plan"]["lever"], "wait", "{v:#}");
    assert_eq!(v["plan"]["steps"], serde_json::json!([]), "{v:#}");
    // Not --dry-run: the `wait` lever writes nothing and watches. Its plan is printed (text
    // output, line-buffered) after it read the cluster, so the ingress is set only once it
    // has judged the install in progress: then Helm's wait ends, the install succeeds, the
    // real check passes, and the watch proves it.
    let mut watch = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args([&format!("ks/{name}"), "-n", FLUX_NS, "--yes"])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for l in lines.by_ref() {
        let l = l.unwrap();
        let lever = l.starts_with("Lever: ");
        seen.push(l);
        if lever {
            break;
        }
    }
    assert_eq!(
        seen.last().map(String::as_str),
        Some("Lever: wait"),
        "{seen:#?}"
    );
    // The ingress, as a cloud's service controller would write it.
    c.kubectl(&[
        "-n",
        ns,
        "patch",
        "service",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.10"}]}}}"#,
    ])
    .unwrap();
    seen.extend(lines.map(Result::unwrap));
    let status = watch.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut watch.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{seen:#?}\n{err}");
    assert!(
        seen.iter().any(|l| l
            == &format!("recovered: {FLUX_NS}/{name} is Ready at the source's current revision")),
        "{seen:#?}\n{err}"
    );
    assert!(
        !seen.iter().any(|l| l.starts_with('✓')),
        "a write was made: {seen:#?}"
    );
    assert_eq!(condition(&c.kustomization(name), "Ready")["status"], "True");
    let hr = get(c, ns, "helmrelease/web");
    assert_eq!(
        condition(&hr, "Ready")["reason"],
        "InstallSucceeded",
        "{hr:#}"
    );
    let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "-n", FLUX_NS, "--dry-run"]);
    assert_eq!(code, 0, "{v:#}\n{err}");
    assert_eq!(v["diagnosis"]["class"], "healthy", "{v:#}");
    let k = c.kustomization(name);
    assert!(
        k["metadata"]["annotations"]["reconcile.fluxcd.io/requestedAt"].is_null(),
        "{k:#}"
    );
    assert!(k["spec"]["suspend"].is_null(), "{k:#}");
}

/// The three scenarios at once on the helm-controller cluster: they wait on the real
/// controllers (installs to their timeouts), so overlapping them keeps the wall time near the
/// longest.
#[test]
fn helmrelease_holds_the_health_check() {
    concurrently(&[
        (
            "out_of_retries_then_a_git_fix",
            out_of_retries_then_a_git_fix,
        ),
        (
            "out_of_retries_then_the_image_appears",
            out_of_retries_then_the_image_appears,
        ),
        (
            "installing_is_waiting_not_stuck",
            installing_is_waiting_not_stuck,
        ),
    ]);
}
