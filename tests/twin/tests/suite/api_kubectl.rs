//! Conformance of the twin API server against the real `kubectl` binary: discovery, Table
//! output (`get`, short names, printer columns), `get -o yaml`, `create -f`, `patch --type
//! merge|json|strategic`, `delete` with finalizers, `get -w`, `logs`, Status errors and 403s.
//!
//! Every kubectl call uses its own discovery cache dir and the twin's kubeconfig, like a user
//! would against a real cluster.

use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use twin::{PatchKind, Rule, Twin, TwinOptions};

const KUBECTL: &str = "/usr/bin/kubectl";
const DEADLINE: Duration = Duration::from_secs(60);

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn kubectl_with(kubeconfig: &Path, cache: &Path, args: &[&str]) -> Out {
    let out = tokio::time::timeout(
        DEADLINE,
        tokio::process::Command::new(KUBECTL)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(cache)
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("kubectl did not finish within the deadline")
    .expect("running kubectl");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

struct Env {
    twin: Twin,
    cache: tempfile::TempDir,
}

impl Env {
    async fn new() -> Env {
        Env {
            twin: Twin::start(TwinOptions::default()).await.unwrap(),
            cache: tempfile::tempdir().unwrap(),
        }
    }
    async fn k(&self, args: &[&str]) -> Out {
        kubectl_with(self.twin.kubeconfig_path(), self.cache.path(), args).await
    }
    fn ks(&self) -> twin::Gvr {
        self.twin
            .store()
            .gvr("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
            .unwrap()
    }
    fn add_ks(&self, name: &str) -> Value {
        self.twin
            .store()
            .create(
                &self.ks(),
                json!({
                    "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                    "metadata": {"name": name, "namespace": "flux-system"},
                    "spec": {"interval": "10m", "path": "./apps", "prune": true,
                             "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
                }),
            )
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_by_short_name_prints_printer_columns() {
    let env = Env::new().await;
    let created = env.add_ks("apps");
    let mut with_status = created.clone();
    with_status["status"] = json!({"conditions": [{
        "type": "Ready", "status": "False", "reason": "HealthCheckFailed",
        "message": "health check failed after 5m0s", "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 1}]});
    env.twin
        .store()
        .update_status(&env.ks(), with_status)
        .unwrap();

    let out = env.k(&["get", "ks", "-n", "flux-system"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["NAME", "AGE", "READY", "STATUS"]);
    assert!(lines[1].starts_with("apps "), "{}", out.stdout);
    assert!(lines[1].contains("False"), "{}", out.stdout);
    assert!(
        lines[1].contains("health check failed after 5m0s"),
        "{}",
        out.stdout
    );

    // Full and singular names resolve through discovery too.
    for name in [
        "kustomizations",
        "kustomization",
        "kustomizations.kustomize.toolkit.fluxcd.io",
    ] {
        let out = env.k(&["get", name, "-A"]).await;
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
        assert!(out.stdout.starts_with("NAMESPACE"), "{}", out.stdout);
        assert!(out.stdout.contains("flux-system"), "{}", out.stdout);
    }
    let out = env.k(&["get", "gitrepo,ocirepo,hr", "-A"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = env.k(&["get", "ns"]).await;
    assert!(
        out.stdout
            .lines()
            .any(|l| l.split_whitespace().take(2).eq(["flux-system", "Active"])),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_yaml_create_patch_delete_roundtrip() {
    let env = Env::new().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gitrepo.yaml");
    std::fs::write(
        &file,
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: podinfo\n  namespace: flux-system\nspec:\n  interval: 1m\n  url: https://example.invalid/podinfo\n  ref:\n    branch: main\n",
    )
    .unwrap();
    let out = env.k(&["create", "-f", file.to_str().unwrap()]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout.trim(),
        "gitrepository.source.toolkit.fluxcd.io/podinfo created"
    );

    let out = env
        .k(&[
            "get",
            "gitrepo",
            "podinfo",
            "-n",
            "flux-system",
            "-o",
            "yaml",
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let obj: Value = serde_saphyr::from_str(&out.stdout).unwrap();
    assert_eq!(obj["kind"], "GitRepository");
    assert_eq!(obj["metadata"]["generation"], 1);
    assert_eq!(obj["spec"]["url"], "https://example.invalid/podinfo");
    let rv1: u64 = obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(obj["metadata"]["uid"].as_str().unwrap().len(), 36);

    // Creating it again: AlreadyExists, exit 1.
    let out = env.k(&["create", "-f", file.to_str().unwrap()]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains(
            "Error from server (AlreadyExists): error when creating \""
                .to_string()
                .as_str()
        ) && out
            .stderr
            .contains("gitrepositories.source.toolkit.fluxcd.io \"podinfo\" already exists"),
        "{}",
        out.stderr
    );

    let out = env
        .k(&[
            "patch",
            "gitrepo",
            "podinfo",
            "-n",
            "flux-system",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"ref":{"branch":"dev"}}}"#,
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = env
        .k(&[
            "patch",
            "gitrepo",
            "podinfo",
            "-n",
            "flux-system",
            "--type",
            "json",
            "-p",
            r#"[{"op":"add","path":"/spec/suspend","value":true}]"#,
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let gvr = env
        .twin
        .store()
        .gvr("source.toolkit.fluxcd.io", "v1", "gitrepositories")
        .unwrap();
    let cur = env
        .twin
        .store()
        .get(&gvr, Some("flux-system"), "podinfo")
        .unwrap();
    assert_eq!(cur["spec"]["ref"]["branch"], "dev");
    assert_eq!(cur["spec"]["suspend"], true);
    assert_eq!(cur["metadata"]["generation"], 3, "two spec patches");
    let rv3: u64 = cur["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv3 > rv1);

    // A label-only patch keeps the generation.
    let out = env
        .k(&["label", "gitrepo", "podinfo", "-n", "flux-system", "team=a"])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let cur = env
        .twin
        .store()
        .get(&gvr, Some("flux-system"), "podinfo")
        .unwrap();
    assert_eq!(cur["metadata"]["generation"], 3);
    assert_eq!(cur["metadata"]["labels"]["team"], "a");

    // kubectl patch defaults to strategic merge, which CRDs refuse (415 like upstream).
    let out = env
        .k(&[
            "patch",
            "gitrepo",
            "podinfo",
            "-n",
            "flux-system",
            "-p",
            r#"{"spec":{"suspend":false}}"#,
        ])
        .await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("application/strategic-merge-patch+json is not supported"),
        "{}",
        out.stderr
    );

    // Finalizers hold deletion; removing the last one completes it.
    env.twin
        .store()
        .patch(
            &gvr,
            Some("flux-system"),
            "podinfo",
            PatchKind::Merge,
            &json!({"metadata": {"finalizers": ["finalizers.fluxcd.io"]}}),
            "test",
        )
        .unwrap();
    let out = env
        .k(&[
            "delete",
            "gitrepo",
            "podinfo",
            "-n",
            "flux-system",
            "--wait=false",
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout.trim(),
        "gitrepository.source.toolkit.fluxcd.io \"podinfo\" deleted"
    );
    let cur = env
        .twin
        .store()
        .get(&gvr, Some("flux-system"), "podinfo")
        .unwrap();
    assert!(cur["metadata"]["deletionTimestamp"].is_string());
    let out = env
        .k(&[
            "patch",
            "gitrepo",
            "podinfo",
            "-n",
            "flux-system",
            "--type",
            "json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = env
        .k(&["get", "gitrepo", "podinfo", "-n", "flux-system"])
        .await;
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr.trim(),
        "Error from server (NotFound): gitrepositories.source.toolkit.fluxcd.io \"podinfo\" not found"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategic_merge_on_deployment_merges_containers_by_name() {
    let env = Env::new().await;
    let store = env.twin.store();
    let deploy = store.gvr("apps", "v1", "deployments").unwrap();
    store
        .create(
            &deploy,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "namespace": "default"},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [
                                             {"name": "app", "image": "web:1", "env": [{"name": "A", "value": "1"}]},
                                             {"name": "sidecar", "image": "proxy:1"}]}}}}),
        )
        .unwrap();
    let out = env
        .k(&["patch", "deploy", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"web:2","env":[{"name":"B","value":"2"}]}]}}}}"#])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let d = store.get(&deploy, Some("default"), "web").unwrap();
    let cs = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(cs.len(), 2, "sidecar kept");
    assert_eq!(cs[0]["image"], "web:2");
    assert_eq!(
        cs[0]["env"].as_array().unwrap().len(),
        2,
        "env merged by name"
    );
    assert_eq!(d["metadata"]["generation"], 2);
    let out = env.k(&["get", "deploy", "web"]).await;
    let header: Vec<&str> = out
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
}

async fn next(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> String {
    tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .expect("kubectl -w printed nothing before the deadline")
        .unwrap()
        .expect("kubectl -w ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_streams_changes() {
    let env = Env::new().await;
    env.add_ks("wave-1");
    let mut child = tokio::process::Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(env.twin.kubeconfig_path())
        .arg("--cache-dir")
        .arg(env.cache.path())
        .args([
            "get",
            "ks",
            "-n",
            "flux-system",
            "-w",
            "--output-watch-events",
            "--request-timeout=60s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let header = next(&mut lines).await;
    assert!(header.starts_with("EVENT"), "{header}");
    let first = next(&mut lines).await;
    assert!(
        first.starts_with("ADDED") && first.contains("wave-1"),
        "{first}"
    );
    // The watch request is open once the initial event has been printed.
    env.add_ks("wave-2");
    let l = next(&mut lines).await;
    assert!(l.starts_with("ADDED") && l.contains("wave-2"), "{l}");
    env.twin
        .store()
        .patch(
            &env.ks(),
            Some("flux-system"),
            "wave-1",
            PatchKind::Merge,
            &json!({"spec": {"suspend": true}}),
            "t",
        )
        .unwrap();
    let l = next(&mut lines).await;
    assert!(l.starts_with("MODIFIED") && l.contains("wave-1"), "{l}");
    env.twin
        .store()
        .delete(&env.ks(), Some("flux-system"), "wave-2")
        .unwrap();
    let l = next(&mut lines).await;
    assert!(l.starts_with("DELETED") && l.contains("wave-2"), "{l}");
    child.kill().await.unwrap();
    assert!(
        env.twin
            .request_log()
            .count("watch", Some("kustomizations"))
            >= 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_errors_and_forbidden() {
    let env = Env::new().await;
    let store = env.twin.store();
    let pods = store.gvr("", "v1", "pods").unwrap();
    store
        .create(
            &pods,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "default"},
                   "spec": {"containers": [{"name": "app", "image": "web:1"}, {"name": "proxy", "image": "proxy:1"}]}}),
        )
        .unwrap();
    store.append_pod_log("default", "web-1", "app", b"line 1\nline 2\nline 3\n");
    let out = env.k(&["logs", "web-1", "-c", "app"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "line 1\nline 2\nline 3\n");
    let out = env.k(&["logs", "web-1", "-c", "app", "--tail=1"]).await;
    assert_eq!(out.stdout, "line 3\n");
    let out = env.k(&["logs", "web-1", "-c", "nope"]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("container nope is not valid for pod web-1"),
        "{}",
        out.stderr
    );

    // kube-apiserver's NotFound shape for a namespaced CR.
    let out = env.k(&["get", "ks", "missing", "-n", "flux-system"]).await;
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr.trim(),
        "Error from server (NotFound): kustomizations.kustomize.toolkit.fluxcd.io \"missing\" not found"
    );
    // Creating in a missing namespace.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cm.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: nope\ndata:\n  a: b\n",
    )
    .unwrap();
    let out = env.k(&["create", "-f", file.to_str().unwrap()]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("namespaces \"nope\" not found"),
        "{}",
        out.stderr
    );

    // RBAC-lite: a read-only token cannot patch.
    env.add_ks("apps");
    let user = "system:serviceaccount:flux-system:reader";
    let token = env.twin.add_token(
        user,
        vec![
            Rule::new(
                &["get", "list", "watch"],
                &["kustomize.toolkit.fluxcd.io"],
                &["kustomizations"],
            )
            .in_namespaces(&["flux-system"]),
        ],
    );
    let kc = env.twin.kubeconfig_for(&token, user).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = kubectl_with(
        &kc,
        cache.path(),
        &["get", "ks", "apps", "-n", "flux-system", "-o", "name"],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout.trim(),
        "kustomization.kustomize.toolkit.fluxcd.io/apps"
    );
    let out = kubectl_with(
        &kc,
        cache.path(),
        &[
            "patch",
            "ks",
            "apps",
            "-n",
            "flux-system",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"suspend":true}}"#,
        ],
    )
    .await;
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr.trim(),
        "Error from server (Forbidden): kustomizations.kustomize.toolkit.fluxcd.io \"apps\" is forbidden: User \"system:serviceaccount:flux-system:reader\" cannot patch resource \"kustomizations\" in API group \"kustomize.toolkit.fluxcd.io\" in the namespace \"flux-system\""
    );
    let out = kubectl_with(&kc, cache.path(), &["get", "ks", "-A"]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("cannot list resource \"kustomizations\" in API group \"kustomize.toolkit.fluxcd.io\" at the cluster scope"),
        "{}",
        out.stderr
    );
    let out = kubectl_with(&kc, cache.path(), &["logs", "web-1", "-c", "app"]).await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("pods \"web-1\" is forbidden"),
        "{}",
        out.stderr
    );
    // Revoked token: 401.
    env.twin.revoke_token(&token);
    let out = kubectl_with(
        &kc,
        cache.path(),
        &["get", "ks", "apps", "-n", "flux-system"],
    )
    .await;
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("Unauthorized") || out.stderr.contains("must be logged in"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_generators_send_protobuf_and_work() {
    let env = Env::new().await;
    let out = env.k(&["create", "namespace", "apps"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "namespace/apps created");
    let out = env
        .k(&[
            "create",
            "configmap",
            "cfg",
            "-n",
            "apps",
            "--from-literal=a=1",
            "--from-literal=b=2",
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = env
        .k(&[
            "create",
            "secret",
            "generic",
            "git-auth",
            "-n",
            "flux-system",
            "--from-literal=username=git",
            "--from-literal=password=s3cret",
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let store = env.twin.store();
    let cm = store
        .get(
            &store.gvr("", "v1", "configmaps").unwrap(),
            Some("apps"),
            "cfg",
        )
        .unwrap();
    assert_eq!(cm["data"], json!({"a": "1", "b": "2"}));
    let secret = store
        .get(
            &store.gvr("", "v1", "secrets").unwrap(),
            Some("flux-system"),
            "git-auth",
        )
        .unwrap();
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(secret["data"]["password"], "czNjcmV0", "base64 of s3cret");
    let out = env
        .k(&["get", "secret", "git-auth", "-n", "flux-system"])
        .await;
    let row: Vec<&str> = out
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(&row[..3], ["git-auth", "Opaque", "2"]);
    // Deleting a namespace removes what is inside it.
    let out = env.k(&["delete", "namespace", "apps"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let cms = store.gvr("", "v1", "configmaps").unwrap();
    assert_eq!(store.get(&cms, Some("apps"), "cfg").unwrap_err().code, 404);
    // kubectl 1.33 follows a 404 with a GET of the namespace and reports that instead.
    let out = env.k(&["get", "cm", "cfg", "-n", "apps"]).await;
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr.trim(),
        "Error from server (NotFound): namespaces \"apps\" not found"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deprecated_version_warns_and_serves_the_same_object() {
    let env = Env::new().await;
    env.add_ks("apps");
    let out = env
        .k(&[
            "get",
            "kustomizations.v1beta2.kustomize.toolkit.fluxcd.io",
            "apps",
            "-n",
            "flux-system",
            "-o",
            "jsonpath={.apiVersion} {.spec.path}",
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "kustomize.toolkit.fluxcd.io/v1beta2 ./apps");
    assert!(
        out.stderr
            .contains("Warning: v1beta2 Kustomization is deprecated, upgrade to v1"),
        "{}",
        out.stderr
    );
    // kubectl apply (client-side, then server-side) on a CRD and a built-in.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("ks.yaml");
    let doc = |path: &str| {
        format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: infra\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"
        )
    };
    std::fs::write(&f, doc("./infra")).unwrap();
    let out = env.k(&["apply", "-f", f.to_str().unwrap()]).await;
    assert_eq!(
        out.stdout.trim(),
        "kustomization.kustomize.toolkit.fluxcd.io/infra created",
        "{}",
        out.stderr
    );
    std::fs::write(&f, doc("./infra/prod")).unwrap();
    let out = env.k(&["apply", "-f", f.to_str().unwrap()]).await;
    assert_eq!(
        out.stdout.trim(),
        "kustomization.kustomize.toolkit.fluxcd.io/infra configured",
        "{}",
        out.stderr
    );
    let out = env.k(&["apply", "-f", f.to_str().unwrap()]).await;
    assert_eq!(
        out.stdout.trim(),
        "kustomization.kustomize.toolkit.fluxcd.io/infra unchanged",
        "{}",
        out.stderr
    );
    let got = env
        .twin
        .store()
        .get(&env.ks(), Some("flux-system"), "infra")
        .unwrap();
    assert_eq!(got["spec"]["path"], "./infra/prod");
    assert_eq!(got["metadata"]["generation"], 2);
    assert!(
        got["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_can_i_evaluates_token_rules() {
    let env = Env::new().await;
    let user = "system:serviceaccount:flux-system:unstick";
    let token = env.twin.add_token(
        user,
        vec![
            Rule::new(
                &["get", "list", "watch", "patch"],
                &["kustomize.toolkit.fluxcd.io"],
                &["kustomizations"],
            ),
            Rule::new(&["get"], &[""], &["pods/log"]).in_namespaces(&["flux-system"]),
        ],
    );
    let kc = env.twin.kubeconfig_for(&token, user).unwrap();
    let cache = tempfile::tempdir().unwrap();
    for (args, want) in [
        (
            vec![
                "auth",
                "can-i",
                "patch",
                "kustomizations.kustomize.toolkit.fluxcd.io",
                "-n",
                "flux-system",
            ],
            "yes",
        ),
        (
            vec![
                "auth",
                "can-i",
                "delete",
                "kustomizations.kustomize.toolkit.fluxcd.io",
                "-n",
                "flux-system",
            ],
            "no",
        ),
        (
            vec![
                "auth",
                "can-i",
                "get",
                "pods",
                "--subresource=log",
                "-n",
                "flux-system",
            ],
            "yes",
        ),
        (
            vec![
                "auth",
                "can-i",
                "get",
                "pods",
                "--subresource=log",
                "-n",
                "default",
            ],
            "no",
        ),
    ] {
        let out = kubectl_with(&kc, cache.path(), &args).await;
        assert_eq!(out.stdout.trim(), want, "{args:?}: {}", out.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_subresource_sets_replicas() {
    let env = Env::new().await;
    let store = env.twin.store();
    let deploy = store.gvr("apps", "v1", "deployments").unwrap();
    store
        .create(
            &deploy,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "namespace": "default"},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [{"name": "app", "image": "web:1"}]}}}}),
        )
        .unwrap();
    let out = env.k(&["scale", "deploy/web", "--replicas=3"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "deployment.apps/web scaled");
    let d = store.get(&deploy, Some("default"), "web").unwrap();
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["metadata"]["generation"], 2);
    let out = env
        .k(&[
            "scale",
            "deploy/web",
            "--replicas=2",
            "--current-replicas=5",
        ])
        .await;
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert_eq!(
        store.get(&deploy, Some("default"), "web").unwrap()["spec"]["replicas"],
        3
    );
    let out = env
        .k(&[
            "get",
            "--raw",
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
        ])
        .await;
    let scale: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 3);
    assert_eq!(scale["status"]["selector"], "app=web");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_aggregated_for_kubectl_and_legacy_documents() {
    let env = Env::new().await;
    env.twin.reset_requests();
    let out = env.k(&["get", "ks", "-A"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let paths: Vec<String> = env.twin.requests().iter().map(|r| r.path.clone()).collect();
    assert!(
        paths.contains(&"/api".to_string()) && paths.contains(&"/apis".to_string()),
        "{paths:?}"
    );
    let per_gv = regex::Regex::new(r"^/apis/[^/]+/[^/]+$").unwrap();
    assert!(
        !paths.iter().any(|p| per_gv.is_match(p)),
        "aggregated discovery used: {paths:?}"
    );
    // Legacy documents are still served.
    let out = env
        .k(&["get", "--raw", "/apis/kustomize.toolkit.fluxcd.io/v1"])
        .await;
    let list: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(list["kind"], "APIResourceList");
    let ks = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "kustomizations")
        .unwrap();
    assert_eq!(ks["shortNames"], json!(["ks"]));
    assert_eq!(ks["namespaced"], true);
    let out = env
        .k(&["get", "--raw", "/apis/kustomize.toolkit.fluxcd.io"])
        .await;
    let group: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(group["preferredVersion"]["version"], "v1");
    let out = env.k(&["api-versions"]).await;
    assert!(
        out.stdout
            .lines()
            .any(|l| l == "kustomize.toolkit.fluxcd.io/v1beta2"),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_tables_for_services_and_pods() {
    let env = Env::new().await;
    let store = env.twin.store();
    store
        .create(
            &store.gvr("", "v1", "services").unwrap(),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
                   "spec": {"clusterIP": "10.0.0.12", "ports": [{"port": 80, "protocol": "TCP"}]}}),
        )
        .unwrap();
    let out = env.k(&["get", "svc", "web"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<Vec<&str>> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    assert_eq!(
        &lines[1][..5],
        ["web", "ClusterIP", "10.0.0.12", "<none>", "80/TCP"]
    );
    let pods = store.gvr("", "v1", "pods").unwrap();
    let p = store
        .create(
            &pods,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "default"},
                   "spec": {"containers": [{"name": "app", "image": "web:0.1.1"}]}}),
        )
        .unwrap();
    let mut st = p.clone();
    st["status"] = json!({"phase": "Pending", "containerStatuses": [{"name": "app", "ready": false, "restartCount": 0,
        "image": "web:0.1.1", "imageID": "",
        "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"web:0.1.1\""}}}]});
    store.update_status(&pods, st).unwrap();
    let out = env.k(&["get", "pods"]).await;
    let lines: Vec<Vec<&str>> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(&lines[1][..4], ["web-1", "0/1", "ImagePullBackOff", "0"]);
}
