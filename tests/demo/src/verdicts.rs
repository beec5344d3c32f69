//! Catalogue rows 7 and 6 live on the demo's real cluster (issue 40): failures that come back
//! the same way every time, each named with its fix by the command the catalogue points to.
//!
//! - `immutable` (row 7): a Job's pod template changed in Git; the real kube-apiserver refuses
//!   it (`field is immutable`) on every apply of the real kustomize-controller. `kubectl
//!   unstick` names the Job, the field and the catalogue's fix and plans no rerun; `kubectl
//!   gitops verify` says the same fix. The fix it names (the per-object force annotation) is
//!   pushed and the real controller recreates the Job.
//! - `automation` (row 6): an ImageUpdateAutomation whose commit template uses the removed
//!   `.Updated`; the real image-automation-controller refuses it. `kubectl gitops verify`
//!   names it on link 4 with the controller's message and the fix, `kubectl markercheck` flags
//!   the same manifest offline, and with `.Changed` the real controller commits.

use super::*;

/// Row 7's fleet: Kustomization, GitRepository and namespace.
const JOB_FLEET: &str = "migrations";

fn migrate_job(version: &str, annotations: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: {JOB_FLEET}\n{annotations}spec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: migrate\n        image: {REAL_GOOD}\n        env:\n        - name: SCHEMA_VERSION\n          value: \"{version}\"\n"
    )
}

/// The Kustomization's Ready condition (status, reason, message) and lastAttemptedRevision.
fn ks_ready(c: &realcluster::Cluster, name: &str) -> (String, String, String, String) {
    let k = kget(c, &["get", "ks", name, "-n", "flux-system", "-o", "json"]);
    let r = k["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or_default();
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        s(&r["status"]),
        s(&r["reason"]),
        s(&r["message"]),
        s(&k["status"]["lastAttemptedRevision"]),
    )
}

/// Until Kustomization `name` is Ready at `sha`.
fn ready_at(c: &realcluster::Cluster, name: &str, sha: &str) -> bool {
    poll(T, || {
        let (status, _, _, attempted) = ks_ready(c, name);
        status == "True" && attempted.ends_with(sha)
    })
}

/// Step 8, catalogue row 7.
pub(crate) fn step_immutable(ctx: &Ctx, real: &Real) -> Step {
    let mut st = Step::new(
        "immutable: a Job's changed template, refused by the real API server on every run, named with its fix (catalogue row 7)",
    );
    let Some(c) = real_cluster(real, &mut st) else {
        return st;
    };
    let kc = c.kubeconfig().to_path_buf();
    let ns = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {JOB_FLEET}\n");
    let first = match c.fleet(
        JOB_FLEET,
        &[("ns.yaml", &ns), ("job.yaml", &migrate_job("41", ""))],
        "  interval: 10m\n  retryInterval: 30s\n  path: ./\n  prune: true\n",
    ) {
        Ok(sha) => sha,
        Err(e) => {
            st.check(false, format!("push the fleet: {e}"));
            return st;
        }
    };
    if !st.check(
        ready_at(c, JOB_FLEET, &first),
        "the real kustomize-controller applies the migrate Job",
    ) {
        return st;
    }
    let uid = kget(c, &["get", "job", "migrate", "-n", JOB_FLEET, "-o", "json"])["metadata"]["uid"]
        .clone();
    let second = match c.push(
        JOB_FLEET,
        &[("job.yaml", &migrate_job("42", ""))],
        "migrations: schema 42",
    ) {
        Ok(sha) => sha,
        Err(e) => {
            st.check(false, format!("push the next migration: {e}"));
            return st;
        }
    };
    request_reconcile(c, "flux-system", "gitrepository", JOB_FLEET);
    let refused = poll(T, || {
        let (status, reason, message, attempted) = ks_ready(c, JOB_FLEET);
        status == "False"
            && reason == "ReconciliationFailed"
            && message.contains("field is immutable")
            && attempted.ends_with(&second)
    });
    st.check(
        refused,
        "the real API server refuses the changed Job: spec.template field is immutable",
    );
    let u = ctx.kubectl(Some(&kc), &["unstick", &format!("ks/{JOB_FLEET}")]);
    st.check(
        u.code == 1
            && u.stdout.contains(&format!("refused: Job/{JOB_FLEET}/migrate (immutable: spec.template)"))
            && u.stdout.contains("Lever: fix-in-git")
            && u.stdout.contains("initContainer")
            && u.stdout.contains("kustomize.toolkit.fluxcd.io/force: enabled")
            && !u.stdout.contains("steps:"),
        "kubectl unstick names the Job, the field and the fix (an initContainer, or recreate with force: it runs again); no rerun planned, nothing written, exit 1",
    );
    let v = ctx.kubectl(
        Some(&kc),
        &[
            "gitops",
            "verify",
            "--source",
            &format!("gitrepository/{JOB_FLEET}"),
        ],
    );
    st.check(
        v.code == 1
            && v.stdout.contains("initContainer")
            && !v
                .stdout
                .contains(&format!("kubectl unstick ks/{JOB_FLEET}")),
        "kubectl gitops verify's fix is the same (not 'run kubectl unstick'), exit 1",
    );
    // The fix it names: the per-object force annotation.
    let third = match c.push(
        JOB_FLEET,
        &[(
            "job.yaml",
            &migrate_job(
                "42",
                "  annotations:\n    kustomize.toolkit.fluxcd.io/force: enabled\n",
            ),
        )],
        "migrations: recreate the migrate Job",
    ) {
        Ok(sha) => sha,
        Err(e) => {
            st.check(false, format!("push the fix: {e}"));
            return st;
        }
    };
    request_reconcile(c, "flux-system", "gitrepository", JOB_FLEET);
    let recreated = ready_at(c, JOB_FLEET, &third) && {
        let j = kget(c, &["get", "job", "migrate", "-n", JOB_FLEET, "-o", "json"]);
        j["metadata"]["uid"] != uid && !j["metadata"]["uid"].is_null()
    };
    st.check(
        recreated,
        format!(
            "with kustomize.toolkit.fluxcd.io/force: enabled (main@sha1:{}) the real controller deletes and recreates the Job (a new uid) and is Ready",
            &third[..12]
        ),
    );
    st
}

/// Row 6's fleet: Kustomization, GitRepository, namespace and the image objects.
const IMAGE_FLEET: &str = "imagebot";

fn automation(template: &str) -> String {
    format!(
        "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageUpdateAutomation\nmetadata:\n  name: {IMAGE_FLEET}\n  namespace: flux-system\nspec:\n  interval: 1m\n  sourceRef:\n    kind: GitRepository\n    name: {IMAGE_FLEET}\n  git:\n    checkout:\n      ref:\n        branch: main\n    commit:\n      author:\n        name: fluxcdbot\n        email: fluxcdbot@users.noreply.github.com\n      messageTemplate: '{template}'\n    push:\n      branch: main\n  update:\n    path: ./deploy\n    strategy: Setters\n"
    )
}

/// Step 9, catalogue row 6.
pub(crate) fn step_automation(ctx: &Ctx, real: &Real) -> Step {
    let mut st = Step::new(
        "automation: a commit template using the removed '.Updated', refused by the real image-automation-controller, named with its fix (catalogue row 6)",
    );
    let Some(c) = real_cluster(real, &mut st) else {
        return st;
    };
    let kc = c.kubeconfig().to_path_buf();
    let Some(oci) = c.oci() else {
        st.check(
            false,
            "the real OCI registry runs beside image-reflector-controller",
        );
        return st;
    };
    let image = format!("{}/imagebot/app", oci.host());
    if let Err(e) = oci.push("imagebot/app", &["1.0.0", "1.1.0"]) {
        st.check(false, format!("push the image tags: {e}"));
        return st;
    }
    c.registry().add(&format!("{image}:*"));
    let app = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: {IMAGE_FLEET}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: app}}\n  template:\n    metadata:\n      labels: {{app: app}}\n    spec:\n      containers:\n        - name: app\n          image: {image}:1.0.0 # {{\"$imagepolicy\": \"flux-system:{IMAGE_FLEET}\"}}\n"
    );
    let ns = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {IMAGE_FLEET}\n");
    let first = match c.fleet(
        IMAGE_FLEET,
        &[("ns.yaml", &ns), ("deploy/app.yaml", &app)],
        "  interval: 1m\n  path: ./\n  prune: true\n",
    ) {
        Ok(sha) => sha,
        Err(e) => {
            st.check(false, format!("push the fleet: {e}"));
            return st;
        }
    };
    let bad = automation("{{ range .Updated.Images }}{{ println . }}{{ end }}");
    let objects = format!(
        "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageRepository\nmetadata:\n  name: {IMAGE_FLEET}\n  namespace: flux-system\nspec:\n  image: {image}\n  interval: 1m\n  insecure: true\n---\napiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata:\n  name: {IMAGE_FLEET}\n  namespace: flux-system\nspec:\n  imageRepositoryRef:\n    name: {IMAGE_FLEET}\n  policy:\n    semver:\n      range: '>=1.0.0'\n---\n{bad}"
    );
    if let Err(e) = c.apply_yaml(&objects) {
        st.check(false, format!("apply the image objects: {e}"));
        return st;
    }
    let refused = poll(T, || {
        let a = kget(
            c,
            &[
                "get",
                "imageupdateautomation",
                IMAGE_FLEET,
                "-n",
                "flux-system",
                "-o",
                "json",
            ],
        );
        a["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "Ready"
                    && c["status"] == "False"
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("template uses removed '.Updated' field"))
            })
        })
    });
    st.check(
        refused,
        "the real image-automation-controller refuses the template (Ready=False, template uses removed '.Updated' field) once 1.1.0 is selected",
    );
    let source = format!("gitrepository/{IMAGE_FLEET}");
    let v = ctx.kubectl(Some(&kc), &["gitops", "verify", "--source", &source]);
    st.check(
        v.code == 1
            && v.stdout.contains(&format!("ImageUpdateAutomation/flux-system/{IMAGE_FLEET}"))
            && v.stdout.contains("template uses removed '.Updated' field")
            && v.stdout.contains("use .Changed")
            && v.stdout.contains("kubectl markercheck"),
        "kubectl gitops verify: link 4 broken, naming the automation with the controller's message and the fix (.Changed, kubectl markercheck), exit 1",
    );
    // The same manifest offline.
    let dir = ctx.work.path().join("imagebot");
    let written = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("automation.yaml"), &bad));
    if let Err(e) = written {
        st.check(false, format!("write the automation manifest: {e}"));
        return st;
    }
    let m = ctx.kubectl(None, &["markercheck", &dir.to_string_lossy()]);
    st.check(
        m.code == 1 && m.stdout.contains("MC050"),
        "kubectl markercheck flags the same template offline (MC050), exit 1",
    );
    // The fix: .Changed. The real controller commits 1.1.0.
    if let Err(e) = c.apply_yaml(&automation(
        "{{ range .Changed.Changes }}{{ println .NewValue }}{{ end }}",
    )) {
        st.check(false, format!("apply the fixed automation: {e}"));
        return st;
    }
    let pushed = poll(T, || {
        c.git()
            .head(&format!("org/{IMAGE_FLEET}"), "main")
            .is_ok_and(|h| h != first)
    });
    st.check(
        pushed,
        "with .Changed the real image-automation-controller commits the new tag to Git",
    );
    st
}
