//! The controller's blind spots on the real kustomize-controller (issue 28): for each, the
//! real controller's behaviour is observed first (the test fails if the controller does not
//! show it), then unstick's verdict and exit code in `ks/NAME` and in `--all`:
//! - a dependsOn cycle drops the revision event of its whole source, and a revision dropped
//!   before the cycle was broken stays dropped until a request or the interval run;
//! - a Kustomization no running kustomize-controller watches (the harness's main shard runs
//!   with `--watch-label-selector=!sharding.fluxcd.io/key`), and a GitRepository no running
//!   source-controller watches (the same selector);
//! - a suspended GitRepository while another one on the same URL and branch has moved on;
//! - a HelmRelease under `wait: true` with no helm-controller in the cluster;
//! - a `spec.path` pushed but not fetched yet;
//! - a ready kustomize-controller pod that is not the leader (its own cluster, with leader
//!   election on: another identity holds and renews the Lease).
//!
//! All on the quiet cluster ([`super::quiet_cluster`]: its workers are free, so "not picked
//! up" is the controller's choice, not a queue), each with objects of its own names.

use std::process::Command;
use std::time::{Duration, Instant};

use realcluster::testkit::{condition, eventually};
use realcluster::{Cluster, FLUX_NS, HELD_SHARD_LABEL};
use serde_json::Value;

use super::{BIN, quiet_cluster, unstick_json as unstick};

/// `unstick ks/NAME --dry-run` once no worker wait is in its diagnosis. With every worker
/// held by other tests of the group, the event may still sit in the controller's queue, and
/// unstick rightly says "waiting for a free worker": a dropped event is judged only after.
fn dry_run_with_a_free_worker(c: &Cluster, name: &str) -> (i32, Value, String) {
    eventually(
        Duration::from_secs(180),
        "a diagnosis without a worker wait",
        || {
            let r = unstick(c, &[&format!("ks/{name}"), "--dry-run"]);
            (!waits_for_a_worker(&r.1)).then_some(r)
        },
    )
}

/// Whether an unstick report says every worker is held by other runs.
fn waits_for_a_worker(v: &Value) -> bool {
    v["diagnosis"]["summary"]
        .as_str()
        .is_some_and(|s| s.contains("waiting for a free worker"))
}

/// The `--all -A` row of `flux-system/name`, with the fleet's exit code.
fn row(c: &Cluster, name: &str) -> (i32, Value) {
    let (code, all, err) = unstick(c, &["--all", "-A"]);
    let key = format!("{FLUX_NS}/{name}");
    let r = all["items"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|i| i["kustomization"] == key.as_str())
                .cloned()
        })
        .unwrap_or_else(|| panic!("no row {key}: {all:#}\n{err}"));
    (code, r)
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

fn artifact(c: &Cluster, name: &str) -> String {
    c.get_json(&["-n", FLUX_NS, "get", "gitrepository", name])["status"]["artifact"]["revision"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn cm(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n  v: \"{value}\"\n"
    )
}

/// A Kustomization of GitRepository `source` in flux-system, at `path`, with extra spec lines.
fn ks_yaml(name: &str, source: &str, path: &str, extra: &str) -> String {
    format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: {FLUX_NS}\nspec:\n  interval: 10m\n  path: {path}\n  prune: false\n  sourceRef: {{kind: GitRepository, name: {source}}}\n{extra}"
    )
}

fn ready_at(c: &Cluster, name: &str, rev: &str) -> bool {
    let k = c.kustomization(name);
    condition(&k, "Ready")["status"] == "True" && k["status"]["lastAppliedRevision"] == rev
}

/// Asserts that for `secs` seconds `what` stays true (the controller does not act).
fn stays(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        assert!(f(), "the real controller did act: {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Sets up source `p` feeding `p` (no dependsOn) and the cycle `p-a` <-> `p-b`, and source
/// `p-ctl` feeding a control; pushes a new commit on both and observes the real controller:
/// it applies the control's within 60 s, and does not run `p` for 20 s more (the revision
/// event of `p`'s source was dropped by `sortAndEnqueue`). Returns (old, new) revisions of `p`.
fn dropped_by_a_cycle(c: &Cluster, p: &str) -> (String, String) {
    let (ctl, a, b) = (format!("{p}-ctl"), format!("{p}-a"), format!("{p}-b"));
    let files = |v: &str| {
        vec![
            ("apps/cm.yaml".to_string(), cm(&format!("{p}-apps"), v)),
            ("a/cm.yaml".to_string(), cm(&a, v)),
            ("b/cm.yaml".to_string(), cm(&b, v)),
        ]
    };
    let f1 = files("1");
    let r1: Vec<(&str, &str)> = f1.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    c.fleet(p, &r1, "  interval: 10m\n  path: ./apps\n  prune: false\n")
        .unwrap();
    c.fleet(
        &ctl,
        &[("cm.yaml", &cm(&ctl, "1"))],
        "  interval: 10m\n  path: ./\n  prune: false\n",
    )
    .unwrap();
    eventually(
        Duration::from_secs(120),
        "both Ready at their first revision",
        || {
            let (x, y) = (artifact(c, p), artifact(c, &ctl));
            (!x.is_empty() && ready_at(c, p, &x) && ready_at(c, &ctl, &y)).then_some(())
        },
    );
    c.apply_yaml(&format!(
        "{}---\n{}",
        ks_yaml(&a, p, "./a", &format!("  dependsOn: [{{name: {b}}}]\n")),
        ks_yaml(&b, p, "./b", &format!("  dependsOn: [{{name: {a}}}]\n"))
    ))
    .unwrap();
    eventually(
        Duration::from_secs(60),
        "the cycle is held at dependsOn",
        || {
            [&a, &b]
                .iter()
                .all(|n| condition(&c.kustomization(n), "Ready")["reason"] == "DependencyNotReady")
                .then_some(())
        },
    );
    let old = artifact(c, p);
    let f2 = files("2");
    let r2: Vec<(&str, &str)> = f2.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let sha = c.push(p, &r2, "two").unwrap();
    let ctl_sha = c.push(&ctl, &[("cm.yaml", &cm(&ctl, "2"))], "two").unwrap();
    crate::fetch_source_now(c, p);
    crate::fetch_source_now(c, &ctl);
    let new = format!("main@sha1:{sha}");
    let ctl_new = format!("main@sha1:{ctl_sha}");
    eventually(
        Duration::from_secs(60),
        "both sources fetched the new commit",
        || (artifact(c, p) == new && artifact(c, &ctl) == ctl_new).then_some(()),
    );
    // The control: a new revision reaches its Kustomization within a minute.
    eventually(
        Duration::from_secs(60),
        "the control applies its new commit",
        || ready_at(c, &ctl, &ctl_new).then_some(()),
    );
    // The observation: the revision event of p's source was dropped.
    stays(20, "the Kustomization picked up the new commit", || {
        c.kustomization(p)["status"]["lastAttemptedRevision"] == old.as_str()
    });
    (old, new)
}

/// Issue 28 item 1 ([`dropped_by_a_cycle`]): unstick then says `source-event-dropped`, names
/// the cycle and the interval run, exit 1; the `--all` row agrees.
#[test]
fn a_dependson_cycle_silences_new_revisions_of_its_whole_source() {
    let c = &quiet_cluster();
    let p = "blind-cycle";
    let (_, new) = dropped_by_a_cycle(c, p);
    let (code, v, err) = dry_run_with_a_free_worker(c, p);
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "source-event-dropped", "{v:#}\n{err}");
    assert_eq!(code, 1, "{v:#}");
    let summary = d["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("{FLUX_NS}/{p}-a"))
            && summary.contains(&format!("{FLUX_NS}/{p}-b")),
        "{summary}"
    );
    assert!(
        summary.contains(&new) && summary.contains("interval run"),
        "{summary}"
    );
    assert!(d["blindSpot"]["nextRunAt"].is_string(), "{d:#}");
    assert_eq!(v["plan"]["lever"], "fix-in-git", "{v:#}");
    assert!(v["plan"]["steps"].as_array().unwrap().is_empty());
    let (all_code, r) = row(c, p);
    assert_eq!(r["class"], "source-event-dropped", "{r:#}");
    assert_eq!(all_code, 1);
    // The control is untouched by the verdict.
    assert_eq!(row(c, &format!("{p}-ctl")).1["class"], "healthy");
}

/// The fresh-user trial of 2026-12-03: a cycle broken after it dropped a revision
/// ([`dropped_by_a_cycle`], then `dependsOn` removed from one member). Observed first: the
/// members run (their generation changed) while the sibling `p` stays at the old revision
/// (nothing queues the dropped event again). unstick then says `source-event-dropped` with no
/// cycle and the interval run, never "the next run applies it"; the lever is a request, and
/// applying it is proven: `recovered`, Ready at the new revision.
#[test]
fn a_revision_dropped_before_the_cycle_was_broken_is_requested_and_proven() {
    let c = &quiet_cluster();
    let p = "broken-cycle";
    let (old, new) = dropped_by_a_cycle(c, p);
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "patch",
        "kustomization",
        &format!("{p}-b"),
        "--type=merge",
        "-p",
        r#"{"spec":{"dependsOn":null}}"#,
    ])
    .unwrap();
    eventually(
        Duration::from_secs(90),
        "the members apply the new revision once the cycle is broken",
        || {
            (ready_at(c, &format!("{p}-b"), &new) && ready_at(c, &format!("{p}-a"), &new))
                .then_some(())
        },
    );
    stays(
        15,
        "the sibling picked up the new commit after the cycle broke",
        || c.kustomization(p)["status"]["lastAttemptedRevision"] == old.as_str(),
    );
    let (code, v, err) = dry_run_with_a_free_worker(c, p);
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "source-event-dropped", "{v:#}\n{err}");
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(d["blindSpot"]["cycle"], serde_json::json!([]), "{d:#}");
    assert!(d["blindSpot"]["nextRunAt"].is_string(), "{d:#}");
    let summary = d["summary"].as_str().unwrap();
    assert!(
        summary.contains(&new)
            && summary.contains("interval run")
            && !summary.contains("the next run applies it"),
        "{summary}"
    );
    assert_eq!(v["plan"]["lever"], "request-reconcile", "{v:#}");
    let (all_code, r) = row(c, p);
    assert_eq!(r["class"], "source-event-dropped", "{r:#}");
    assert_eq!(all_code, 1);
    // Other tests of the group may hold every worker for a while: then the event may still
    // sit in the controller's queue, and unstick rightly says "waiting for a free worker"
    // and writes nothing. --yes is repeated (a run that writes nothing is harmless) until a
    // worker is free; the proof itself must be `recovered`.
    let mut last = Value::Null;
    let code = eventually(
        Duration::from_secs(180),
        "unstick --yes proves the sibling recovered once a worker is free",
        || {
            let (code, v, _) = unstick(c, &[&format!("ks/{p}"), "--yes"]);
            let waiting = waits_for_a_worker(&v);
            last = v.clone();
            if waiting {
                return None;
            }
            assert_eq!(v["proof"], "recovered", "{v:#}");
            Some(code)
        },
    );
    assert_eq!(last["proof"], "recovered", "{last:#}");
    assert_eq!(code, 0);
    assert!(ready_at(c, p, &new), "{:#}", c.kustomization(p));
}

/// Issue 28 item 2. A Kustomization labelled for shard `shard1` while the only
/// kustomize-controller runs the main shard: observed first, the real controller never gives
/// it a status nor handles its request while an unlabelled twin gets both; then unstick says
/// `not-watched` naming the selector (never `request-pending`), exit 1, in both views.
#[test]
fn an_object_no_running_controller_watches_is_never_request_pending() {
    let c = &quiet_cluster();
    c.fleet(
        "blind-shard",
        &[("cm.yaml", &cm("blind-shard", "1"))],
        "  interval: 10m\n  path: ./\n  prune: false\n",
    )
    .unwrap();
    let token = now();
    c.apply_yaml(&format!(
        "{}---\n{}",
        ks_yaml("blind-shard-twin", "blind-shard", "./", "")
            .replace("metadata:\n", &format!("metadata:\n  annotations: {{reconcile.fluxcd.io/requestedAt: \"{token}\"}}\n")),
        ks_yaml("blind-sharded", "blind-shard", "./", "").replace(
            "metadata:\n",
            &format!(
                "metadata:\n  labels: {{{HELD_SHARD_LABEL}: shard1}}\n  annotations: {{reconcile.fluxcd.io/requestedAt: \"{token}\"}}\n"
            )
        )
    ))
    .unwrap();
    eventually(Duration::from_secs(90), "the twin is reconciled", || {
        (c.kustomization("blind-shard-twin")["status"]["lastHandledReconcileAt"] == token.as_str())
            .then_some(())
    });
    // (The CRD defaults `status.observedGeneration: -1`: no conditions means no run.)
    stays(15, "the sharded Kustomization got a status", || {
        let k = c.kustomization("blind-sharded");
        k["status"]["conditions"].is_null() && k["status"]["lastHandledReconcileAt"].is_null()
    });
    let (code, v, err) = unstick(c, &["ks/blind-sharded", "--dry-run"]);
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "not-watched", "{v:#}\n{err}");
    assert_eq!(code, 1);
    let summary = d["summary"].as_str().unwrap();
    assert!(
        summary.contains("no running kustomize-controller watches this object")
            && summary.contains("--watch-label-selector=!sharding.fluxcd.io/key")
            && summary.contains("sharding.fluxcd.io/key=shard1"),
        "{summary}"
    );
    assert!(!v.to_string().contains("request-pending"), "{v:#}");
    assert!(v["plan"]["steps"].as_array().unwrap().is_empty());
    let (all_code, r) = row(c, "blind-sharded");
    assert_eq!(r["class"], "not-watched", "{r:#}");
    assert_eq!(all_code, 1);
}

/// Issue 28 sweep: a source no running source-controller watches. The harness's
/// source-controller runs the main shard (`--watch-label-selector=!sharding.fluxcd.io/key`),
/// so a GitRepository labelled with a shard key is out of its cache. Observed first: a
/// control GitRepository on the same URL and branch gets an artifact, the labelled one gets
/// no status at all, even when asked; the real kustomize-controller's Kustomization of it
/// waits ("Source artifact not found"). unstick then says `not-watched` naming
/// source-controller's selector and the source (never "waiting for the source"), exit 1, the
/// same in `--all`; the plan writes nothing.
#[test]
fn a_source_no_running_source_controller_watches_is_never_waited_for() {
    let c = &quiet_cluster();
    c.fleet(
        "blind-srcshard",
        &[("cm.yaml", &cm("blind-srcshard", "1"))],
        "  interval: 10m\n  path: ./\n  prune: false\n",
    )
    .unwrap();
    let url = c.git().url_http("org/blind-srcshard");
    c.apply_yaml(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {{name: blind-srcshard-held, namespace: {FLUX_NS}, labels: {{{HELD_SHARD_LABEL}: shard1}}}}\nspec: {{interval: 1m, url: \"{url}\", ref: {{branch: main}}}}\n---\n{}",
        ks_yaml("blind-srcshard-held", "blind-srcshard-held", "./", "")
    ))
    .unwrap();
    eventually(
        Duration::from_secs(90),
        "the control source is fetched and applied",
        || {
            let a = artifact(c, "blind-srcshard");
            (!a.is_empty() && ready_at(c, "blind-srcshard", &a)).then_some(())
        },
    );
    crate::fetch_source_now(c, "blind-srcshard-held");
    eventually(
        Duration::from_secs(60),
        "the real kustomize-controller waits for the held source's artifact",
        || {
            let k = c.kustomization("blind-srcshard-held");
            (condition(&k, "Ready")["status"] == "False").then_some(())
        },
    );
    stays(15, "the held source got a status", || {
        let g = c.get_json(&["-n", FLUX_NS, "get", "gitrepository", "blind-srcshard-held"]);
        g["status"]["conditions"].is_null() && g["status"]["artifact"].is_null()
    });
    let (code, v, err) = unstick(c, &["ks/blind-srcshard-held", "--dry-run"]);
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "not-watched", "{v:#}\n{err}");
    assert_eq!(code, 1);
    assert_eq!(d["blindSpot"]["kind"], "source-not-watched", "{v:#}");
    let summary = d["summary"].as_str().unwrap();
    assert!(
        summary.contains(
            "no running source-controller watches gitrepository/blind-srcshard-held in flux-system"
        ) && summary.contains("--watch-label-selector=!sharding.fluxcd.io/key")
            && summary.contains("sharding.fluxcd.io/key=shard1"),
        "{summary}"
    );
    assert!(!summary.contains("waiting"), "{summary}");
    assert_eq!(v["plan"]["lever"], "fix-in-git", "{v:#}");
    assert!(v["plan"]["steps"].as_array().unwrap().is_empty());
    let (all_code, r) = row(c, "blind-srcshard-held");
    assert_eq!(r["class"], "not-watched", "{r:#}");
    assert_eq!(r["summary"].as_str(), Some(summary), "{r:#}");
    assert_eq!(all_code, 1);
}

/// Issue 28 item 4. Two GitRepositories on the same URL and branch; one suspended. After a
/// new commit, observed first: the other fetches it, the suspended one does not (even when
/// asked). unstick then says `source-suspended` for the Kustomization of the suspended one,
/// naming the other's newer revision, exit 1, in both views; the lever writes nothing.
#[test]
fn a_suspended_source_is_a_finding_naming_the_newer_revision() {
    let c = &quiet_cluster();
    c.fleet(
        "blind-susp",
        &[("cm.yaml", &cm("blind-susp", "1"))],
        "  interval: 10m\n  path: ./\n  prune: false\n",
    )
    .unwrap();
    let url = c.git().url_http("org/blind-susp");
    c.apply_yaml(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {{name: blind-susp-mirror, namespace: {FLUX_NS}}}\nspec: {{interval: 1m, url: \"{url}\", ref: {{branch: main}}}}\n"
    ))
    .unwrap();
    eventually(
        Duration::from_secs(90),
        "Ready at the first revision",
        || {
            let a = artifact(c, "blind-susp");
            (!a.is_empty()
                && ready_at(c, "blind-susp", &a)
                && artifact(c, "blind-susp-mirror") == a)
                .then_some(())
        },
    );
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "patch",
        "gitrepository",
        "blind-susp",
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ])
    .unwrap();
    let old = artifact(c, "blind-susp");
    let sha = c
        .push("blind-susp", &[("cm.yaml", &cm("blind-susp", "2"))], "two")
        .unwrap();
    let new = format!("main@sha1:{sha}");
    crate::fetch_source_now(c, "blind-susp-mirror");
    crate::fetch_source_now(c, "blind-susp");
    eventually(
        Duration::from_secs(60),
        "the mirror fetches the new commit",
        || (artifact(c, "blind-susp-mirror") == new).then_some(()),
    );
    stays(10, "the suspended source fetched", || {
        artifact(c, "blind-susp") == old
    });
    let (code, v, err) = unstick(c, &["ks/blind-susp", "--dry-run"]);
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "source-suspended", "{v:#}\n{err}");
    assert_eq!(code, 1);
    let summary = d["summary"].as_str().unwrap();
    assert!(
        summary.contains("GitRepository/flux-system/blind-susp is suspended")
            && summary.contains(&format!(
                "GitRepository/flux-system/blind-susp-mirror at {new}"
            )),
        "{summary}"
    );
    assert_eq!(v["plan"]["lever"], "resume-source");
    assert!(v["plan"]["steps"].as_array().unwrap().is_empty());
    let (all_code, r) = row(c, "blind-susp");
    assert_eq!(r["class"], "source-suspended", "{r:#}");
    assert_eq!(all_code, 1);
    // --check-remote on a loopback spec.url (trial3: "from a pod, 127.0.0.1 resolves to
    // 127.0.0.1, but git could not fetch from it", and no head): no probe runs (in a pod the
    // loopback is the pod itself); the head is read here and names the commit held back.
    let (code, v, err) = unstick(c, &["ks/blind-susp", "--dry-run", "--check-remote"]);
    assert_eq!(code, 1, "{v:#}\n{err}");
    let head = &v["diagnosis"]["blindSpot"]["remoteHead"];
    assert_eq!(head["commit"], sha, "{v:#}\n{err}");
    assert_eq!(head["newer"], true, "{v:#}");
    let from = head["from"].as_str().unwrap();
    assert!(
        from.starts_with("seen from this workstation") && from.contains("is a loopback address"),
        "{from}"
    );
}

/// Issue 28 item 5. A HelmRelease under a `wait: true` Kustomization in a cluster with no
/// helm-controller: observed first, nothing ever writes the HelmRelease's status (the real
/// kustomize-controller reads it as Current and moves on). unstick names helm-controller as
/// not running before any lever (`start-controller`, no write), exit 1, in both views.
#[test]
fn a_helmrelease_with_no_helm_controller_names_it_before_any_lever() {
    let c = &quiet_cluster();
    let hr = format!(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: blind-web\n  namespace: default\nspec:\n  interval: 1m\n  chart:\n    spec:\n      chart: ./chart\n      sourceRef: {{kind: GitRepository, name: blind-helm, namespace: {FLUX_NS}}}\n"
    );
    c.fleet(
        "blind-helm",
        &[("hr.yaml", &hr)],
        "  interval: 10m\n  path: ./\n  prune: false\n  wait: true\n  timeout: 1m\n",
    )
    .unwrap();
    eventually(
        Duration::from_secs(120),
        "the Kustomization's run ends",
        || {
            let r = condition(&c.kustomization("blind-helm"), "Ready");
            (r["status"] == "True" || r["status"] == "False").then_some(())
        },
    );
    stays(10, "something reconciled the HelmRelease", || {
        c.get_json(&["-n", "default", "get", "helmrelease", "blind-web"])["status"]["conditions"]
            .is_null()
    });
    let (code, v, err) = unstick(c, &["ks/blind-helm", "--dry-run"]);
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "controller-not-running", "{v:#}\n{err}");
    assert_eq!(code, 1);
    assert!(
        d["summary"]
            .as_str()
            .unwrap()
            .contains("helm-controller is not running"),
        "{d:#}"
    );
    assert_eq!(v["plan"]["lever"], "start-controller", "{v:#}");
    assert!(v["plan"]["steps"].as_array().unwrap().is_empty());
    let (all_code, r) = row(c, "blind-helm");
    assert_eq!(r["class"], "controller-not-running", "{r:#}");
    assert_eq!(all_code, 1);
}

/// Issue 28 item 6. A Kustomization at `./new` applied right after `./new` was pushed, on a
/// source that has not fetched it yet: observed first, the real controller fails it with
/// ArtifactFailed `kustomization path not found`. unstick says `source-not-ready` and plans
/// the fetch (`reconcile-source`), exit 1, never `build-failed`; `--all` agrees; the fetch
/// then recovers it.
#[test]
fn a_path_not_fetched_yet_is_source_not_ready_and_the_fetch_frees_it() {
    let c = &quiet_cluster();
    c.fleet(
        "blind-path",
        &[("old/cm.yaml", &cm("blind-path-old", "1"))],
        "  interval: 10m\n  path: ./old\n  prune: false\n",
    )
    .unwrap();
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "patch",
        "gitrepository",
        "blind-path",
        "--type=merge",
        "-p",
        r#"{"spec":{"interval":"1h"}}"#,
    ])
    .unwrap();
    eventually(
        Duration::from_secs(90),
        "Ready at the first revision",
        || {
            let a = artifact(c, "blind-path");
            (!a.is_empty() && ready_at(c, "blind-path", &a)).then_some(())
        },
    );
    // Let the artifact be older than the new spec by whole seconds (metav1.Time).
    std::thread::sleep(Duration::from_secs(2));
    c.push(
        "blind-path",
        &[("new/cm.yaml", &cm("blind-path-new", "1"))],
        "new path",
    )
    .unwrap();
    c.apply_yaml(&ks_yaml("blind-path-new", "blind-path", "./new", ""))
        .unwrap();
    let ready = eventually(
        Duration::from_secs(60),
        "the real controller fails the path",
        || {
            let r = condition(&c.kustomization("blind-path-new"), "Ready");
            (r["status"] == "False").then_some(r)
        },
    );
    assert_eq!(ready["reason"], "ArtifactFailed", "{ready}");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("kustomization path not found"),
        "{ready}"
    );
    let (code, v, err) = unstick(c, &["ks/blind-path-new", "--dry-run"]);
    assert_eq!(v["diagnosis"]["class"], "source-not-ready", "{v:#}\n{err}");
    assert_eq!(code, 1);
    assert_eq!(v["plan"]["lever"], "reconcile-source", "{v:#}");
    let (all_code, r) = row(c, "blind-path-new");
    assert_eq!(r["class"], "source-not-ready", "{r:#}");
    assert_eq!(all_code, 1);
    let (code, v, err) = unstick(c, &["ks/blind-path-new", "--yes"]);
    assert_eq!(v["proof"], "recovered", "{v:#}\n{err}");
    assert_eq!(code, 0);
}

/// Issue 28 item 3. A health check held on a `spec.healthChecks` entry in the wrong namespace;
/// the fix (the right namespace) is written while the check runs (generation 2, the check of
/// generation 1 in flight, gate off). unstick names the blind spot (the running check keeps
/// its old spec; the new generation runs after it), plans `wait` with the fresh run at the
/// check's end, and its proof waits for the new generation's own run: `recovered`, never
/// "not recovered" on the old check's failure. Observed after: the real controller did fail
/// the old check (a HealthCheckFailed run in `status.history`) before the passing one.
#[test]
fn a_fix_during_the_check_waits_for_the_new_generations_own_run() {
    let c = &quiet_cluster();
    let web = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: blind-gen-web\n  namespace: default\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: blind-gen-web}\n  template:\n    metadata:\n      labels: {app: blind-gen-web}\n    spec:\n      containers:\n      - name: web\n        image: registry.example.local:5000/podinfo:6.7.0\n";
    let spec = |ns: &str| {
        format!(
            "  interval: 10m\n  path: ./\n  prune: false\n  timeout: 40s\n  healthChecks:\n  - {{apiVersion: apps/v1, kind: Deployment, name: blind-gen-web, namespace: {ns}}}\n"
        )
    };
    c.fleet("blind-gen", &[("web.yaml", web)], &spec("wrong"))
        .unwrap();
    eventually(
        Duration::from_secs(90),
        "the real check is in flight",
        || {
            condition(&c.kustomization("blind-gen"), "Reconciling")["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Running health checks"))
                .then_some(())
        },
    );
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "patch",
        "kustomization",
        "blind-gen",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/healthChecks/0/namespace","value":"default"}]"#,
    ])
    .unwrap();
    let (code, v, err) = unstick(c, &["ks/blind-gen", "--dry-run"]);
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "health-check-in-flight", "{v:#}\n{err}");
    assert_eq!(d["blindSpot"]["kind"], "spec-changed-in-flight", "{v:#}");
    assert_eq!(v["plan"]["lever"], "wait", "{v:#}");
    assert!(v["plan"]["freshRunAt"].is_string(), "{v:#}");
    assert!(!v.to_string().contains("next poll"), "{v:#}");
    assert_eq!(code, 1, "{v:#}");
    let (code, v, err) = unstick(c, &["ks/blind-gen", "--yes"]);
    assert_eq!(v["proof"], "recovered", "{v:#}\n{err}");
    assert_eq!(code, 0);
    // The real controller's own record: its Warning event for the old check's failure.
    let events = c
        .kubectl(&[
            "-n",
            FLUX_NS,
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=blind-gen",
            "-o",
            "json",
        ])
        .unwrap();
    assert!(
        events.contains("health check failed after"),
        "the real controller ran the old check to its end first: {events}"
    );
}

/// A Kustomization of its own source `name` that substitutes `${VALUE}` from ConfigMap
/// `name-vars` (created first with `labels`) into ConfigMap `name-out`.
fn substituted(c: &Cluster, name: &str, labels: &str) {
    c.apply_yaml(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-vars\n  namespace: {FLUX_NS}\n  labels: {labels}\ndata:\n  VALUE: \"one\"\n"
    ))
    .unwrap();
    let out = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-out\n  namespace: default\ndata:\n  v: \"${{VALUE}}\"\n"
    );
    c.fleet(
        name,
        &[("cm.yaml", &out)],
        &format!(
            "  interval: 10m\n  path: ./\n  prune: false\n  postBuild:\n    substituteFrom:\n    - kind: ConfigMap\n      name: {name}-vars\n"
        ),
    )
    .unwrap();
}

fn out_value(c: &Cluster, name: &str) -> String {
    c.get_json(&["-n", "default", "get", "configmap", &format!("{name}-out")])["data"]["v"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Sweep of issue 28: kustomize-controller (v1.7.0+) watches the ConfigMaps and Secrets a
/// Kustomization reads only when they match `--watch-configs-label-selector` (default
/// `reconcile.fluxcd.io/watch=Enabled`). Observed first on the real controller: after a change
/// of both `substituteFrom` ConfigMaps, the labelled control's Kustomization applies the new
/// value within 60 s, the unlabelled one's does not for 20 s more. unstick then says
/// `config-not-watched` (never healthy), exit 1, in both views; with no terminal and no
/// `--yes` it writes nothing (`not-confirmed`); with `--yes` its request is proven and the new
/// value is applied.
#[test]
fn a_changed_substitute_from_configmap_without_the_watch_label_is_named_and_requested() {
    let c = &quiet_cluster();
    let (p, ctl) = ("blind-vars", "blind-vars-ctl");
    substituted(c, p, "{}");
    substituted(c, ctl, "{reconcile.fluxcd.io/watch: Enabled}");
    eventually(
        Duration::from_secs(120),
        "both applied the first value",
        || (out_value(c, p) == "one" && out_value(c, ctl) == "one").then_some(()),
    );
    // Past the second of the last run's end (managedFields times have second resolution).
    std::thread::sleep(Duration::from_millis(1100));
    for n in [p, ctl] {
        c.kubectl(&[
            "-n",
            FLUX_NS,
            "patch",
            "configmap",
            &format!("{n}-vars"),
            "--type=merge",
            "-p",
            r#"{"data":{"VALUE":"two"}}"#,
        ])
        .unwrap();
    }
    eventually(
        Duration::from_secs(60),
        "the labelled control applies the new value",
        || (out_value(c, ctl) == "two").then_some(()),
    );
    stays(20, "the unlabelled one applied the new value", || {
        out_value(c, p) == "one"
    });
    let (code, v, err) = unstick(c, &[&format!("ks/{p}"), "--dry-run"]);
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "config-not-watched", "{v:#}\n{err}");
    assert_eq!(code, 1, "{v:#}");
    let summary = d["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!(
            "ConfigMap {FLUX_NS}/{p}-vars (postBuild.substituteFrom)"
        )) && summary.contains("reconcile.fluxcd.io/watch=Enabled")
            && summary.contains("interval run"),
        "{summary}"
    );
    assert_eq!(v["plan"]["lever"], "request-reconcile", "{v:#}");
    let (all_code, r) = row(c, p);
    assert_eq!(r["class"], "config-not-watched", "{r:#}");
    assert_eq!(all_code, 1);
    assert_eq!(row(c, ctl).1["class"], "healthy");
    // No terminal and no --yes: nothing is written (the trial's `</dev/null` case).
    let out = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args([&format!("ks/{p}"), "-o", "json"])
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(v["action"], "not-confirmed", "{v:#}\n{err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("pass --yes"), "{err}");
    let k = c.kustomization(p);
    assert!(
        k["metadata"]["annotations"]["reconcile.fluxcd.io/requestedAt"].is_null(),
        "{k:#}"
    );
    let (code, v, err) = unstick(c, &[&format!("ks/{p}"), "--yes"]);
    assert_eq!(v["proof"], "recovered", "{v:#}\n{err}");
    assert_eq!(code, 0);
    assert_eq!(out_value(c, p), "two");
}

/// A cluster whose kustomize-controller runs with leader election on, as `flux install` runs
/// it (`realcluster::ClusterOptions::kustomize_controller_leader_election`): its own Lease,
/// taken, renewed and released for real.
fn leader_cluster() -> realcluster::Lease {
    static LEADER: realcluster::ClusterCell = realcluster::ClusterCell::new();
    crate::cluster_with(&LEADER, || realcluster::ClusterOptions {
        kustomize_controller_leader_election: true,
        ..realcluster::ClusterOptions::default()
    })
}

/// A Lease time (metav1.MicroTime: RFC 3339 with 6 fractional digits) of now.
fn micro_now() -> String {
    let t = jiff::Timestamp::now();
    format!(
        "{}.{:06}Z",
        t.strftime("%Y-%m-%dT%H:%M:%S"),
        t.subsec_microsecond()
    )
}

/// `spec.holderIdentity` of Lease `name` in flux-system ("" when empty or absent).
fn lease_holder(c: &Cluster, name: &str) -> String {
    c.get_json(&["-n", FLUX_NS, "get", "lease", name])["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The name of kustomize-controller's one ready pod that is not being deleted.
fn ready_kc_pod(c: &Cluster) -> Option<String> {
    let pods = c.get_json(&[
        "-n",
        FLUX_NS,
        "get",
        "pods",
        "-l",
        "app=kustomize-controller",
    ]);
    pods["items"].as_array()?.iter().find_map(|p| {
        let ready = p["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|cs| !cs.is_empty() && cs.iter().all(|c| c["ready"] == true));
        (ready && p["metadata"]["deletionTimestamp"].is_null()).then(|| {
            p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
    })
}

/// Issue 28 sweep: a ready kustomize-controller pod that is not the leader reconciles
/// nothing. On the real kustomize-controller with leader election on, observed first: it
/// holds its Lease (the name unstick computes: fluxcd/pkg `GenerateID` of the main shard's
/// selector) as `<pod>_<uuid>`; while another identity holds the Lease and renews it (what a
/// second install with the same selector in flux-system does; the controller is stopped for
/// the take-over and started again, a candidate), its new pod is ready and a requested
/// reconcile is not run. unstick then names the pod, the Lease and the holder
/// (`controller-not-running`, exit 1, never "a new run starts as soon as a worker is free"),
/// the same in `--all`. When the other holder stops renewing (gone without a release), unstick
/// says it is a wait (exit 0) with the window in which the pod takes the Lease; the real pod
/// takes it in that window, runs the request, and unstick's verdict is `healthy`, exit 0.
#[test]
fn a_ready_controller_pod_that_is_not_the_leader_is_named_never_promised_a_run() {
    let c = &leader_cluster();
    let lease =
        unstick::leader::lease_name("kustomize-controller", &format!("!{HELD_SHARD_LABEL}"));
    let first = eventually(
        Duration::from_secs(60),
        "a ready kustomize-controller pod",
        || ready_kc_pod(c),
    );
    eventually(
        Duration::from_secs(60),
        "the real kustomize-controller holds the Lease unstick names",
        || {
            lease_holder(c, &lease)
                .starts_with(&format!("{first}_"))
                .then_some(())
        },
    );
    c.fleet(
        "blind-lead",
        &[("cm.yaml", &cm("blind-lead", "1"))],
        "  interval: 10m\n  path: ./\n  prune: false\n",
    )
    .unwrap();
    eventually(Duration::from_secs(90), "the fleet is applied", || {
        let a = artifact(c, "blind-lead");
        (!a.is_empty() && ready_at(c, "blind-lead", &a)).then_some(())
    });
    // Another identity takes the Lease and keeps renewing it.
    let other = "kustomize-controller-b-5d8f7c9b4-q2x7z_0f3c2a9e-7d1b-4c55-9a3e-2b8c1d4e5f60";
    let scale = |n: &str| {
        c.kubectl(&[
            "-n",
            FLUX_NS,
            "scale",
            "deployment/kustomize-controller",
            &format!("--replicas={n}"),
        ])
        .unwrap();
    };
    scale("0");
    eventually(
        Duration::from_secs(60),
        "the controller's pod is gone",
        || {
            let pods = c.get_json(&[
                "-n",
                FLUX_NS,
                "get",
                "pods",
                "-l",
                "app=kustomize-controller",
            ]);
            pods["items"]
                .as_array()
                .is_some_and(Vec::is_empty)
                .then_some(())
        },
    );
    let take = |holder: &str, duration: u32| {
        let now = micro_now();
        c.kubectl(&[
            "-n",
            FLUX_NS,
            "patch",
            "lease",
            &lease,
            "--type=merge",
            "-p",
            &format!(
                r#"{{"spec":{{"holderIdentity":"{holder}","leaseDurationSeconds":{duration},"acquireTime":"{now}","renewTime":"{now}"}}}}"#
            ),
        ])
        .unwrap();
    };
    take(other, 35);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let renewer = {
        let (stop, kubeconfig, lease) = (stop.clone(), c.kubeconfig().to_path_buf(), lease.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let now = micro_now();
                let _ = realcluster::kubectl(
                    &kubeconfig,
                    &[
                        "-n",
                        FLUX_NS,
                        "patch",
                        "lease",
                        &lease,
                        "--type=merge",
                        "-p",
                        &format!(r#"{{"spec":{{"renewTime":"{now}"}}}}"#),
                    ],
                );
                std::thread::sleep(Duration::from_secs(2));
            }
        })
    };
    scale("1");
    let pod = eventually(
        Duration::from_secs(90),
        "a new ready kustomize-controller pod",
        || ready_kc_pod(c).filter(|p| *p != first),
    );
    // Observed: the ready pod does not run a requested reconcile.
    let token = now();
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "annotate",
        "--overwrite",
        "kustomization",
        "blind-lead",
        &format!("reconcile.fluxcd.io/requestedAt={token}"),
    ])
    .unwrap();
    stays(
        20,
        "the request was run while another identity leads",
        || {
            c.kustomization("blind-lead")["status"]["lastHandledReconcileAt"] != token.as_str()
                && lease_holder(c, &lease) == other
        },
    );
    let (code, v, err) = unstick(c, &["ks/blind-lead", "--dry-run"]);
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "controller-not-running", "{v:#}\n{err}");
    assert_eq!(code, 1, "{v:#}");
    let summary = d["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!(
            "kustomize-controller's pod {pod} is not the leader"
        )) && summary.contains(&format!("Lease {FLUX_NS}/{lease} is held by {other}"))
            && summary.contains("keeps renewing"),
        "{summary}"
    );
    assert!(
        !v.to_string().contains("as soon as a worker is free"),
        "{v:#}"
    );
    assert_eq!(v["plan"]["lever"], "start-controller", "{v:#}");
    assert!(v["plan"]["steps"].as_array().unwrap().is_empty());
    assert_eq!(
        d["stoppedControllers"][0]["leader"]["keepsRenewing"], true,
        "{v:#}"
    );
    let (all_code, r) = row(c, "blind-lead");
    assert_eq!(r["class"], "controller-not-running", "{r:#}");
    assert_eq!(r["summary"].as_str(), Some(summary), "{r:#}");
    assert_eq!(all_code, 1);
    // The budget: one GET of the Lease, and one list of the controller's pods to name the pod
    // that does not lead (source-controller runs without leader election here: no GET).
    let (leases, pod_lists, total) = lease_requests(c);
    assert_eq!((leases, pod_lists), (1, 1), "{total} requests");

    // The other holder goes away without releasing (a second install deleted): it stops
    // renewing. After three retry periods with no renewal, unstick says it is a wait, with
    // the window in which the pod takes the Lease (expiry, then at most two jittered client-go
    // tries of 5s to 11s), exit 0 in both views.
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    renewer.join().unwrap();
    let renewed: jiff::Timestamp =
        c.get_json(&["-n", FLUX_NS, "get", "lease", &lease])["spec"]["renewTime"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
    let expires = renewed
        .checked_add(jiff::SignedDuration::from_secs(35))
        .unwrap();
    let by = renewed
        .checked_add(jiff::SignedDuration::from_secs(57))
        .unwrap();
    while jiff::Timestamp::now()
        < renewed
            .checked_add(jiff::SignedDuration::from_secs(16))
            .unwrap()
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, v, err) = unstick(c, &["ks/blind-lead", "--dry-run"]);
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "controller-not-running", "{v:#}\n{err}");
    assert_eq!(code, 0, "a wait, not a finding: {v:#}");
    let summary = d["summary"].as_str().unwrap();
    let hm = |t: jiff::Timestamp| t.strftime("%H:%M:%SZ").to_string();
    assert!(
        summary.contains(&format!(
            "kustomize-controller's pod {pod} is not the leader yet"
        )) && summary.contains(&format!("which stopped renewing at {}", hm(renewed)))
            && summary.contains(&format!(
                "it expires at {} and the pod takes it between then and {}",
                hm(expires),
                hm(by)
            )),
        "{summary}"
    );
    let (all_code, r) = row(c, "blind-lead");
    assert_eq!(r["summary"].as_str(), Some(summary), "{r:#}");
    assert_eq!(all_code, 0);
    // Observed: the real controller's pod takes the Lease in that window (polled every 200 ms).
    let taken = eventually(Duration::from_secs(90), "the pod takes the Lease", || {
        if lease_holder(c, &lease).starts_with(&format!("{pod}_")) {
            return Some(jiff::Timestamp::now());
        }
        std::thread::sleep(Duration::from_millis(200));
        None
    });
    eprintln!(
        "leader: the pod took the Lease at {taken}, {:.1}s after its expiry {expires} (window to {by})",
        taken.duration_since(expires).as_secs_f64()
    );
    assert!(
        taken >= expires && taken <= by.checked_add(jiff::SignedDuration::from_secs(1)).unwrap(),
        "taken at {taken}, predicted between {expires} and {by}"
    );
    eventually(Duration::from_secs(60), "the request is run", || {
        (c.kustomization("blind-lead")["status"]["lastHandledReconcileAt"] == token.as_str())
            .then_some(())
    });
    let (code, v, err) = unstick(c, &["ks/blind-lead", "--dry-run"]);
    assert_eq!(v["diagnosis"]["class"], "healthy", "{v:#}\n{err}");
    assert_eq!(code, 0);
    let (all_code, r) = row(c, "blind-lead");
    assert_eq!(r["class"], "healthy", "{r:#}");
    assert_eq!(all_code, 0);
    // Leading: the one GET of the Lease, no pod list.
    let (leases, pod_lists, total) = lease_requests(c);
    assert_eq!((leases, pod_lists), (1, 0), "{total} requests");
    assert!(total <= 17, "{total} requests");
}

/// `--all -A` through the fault proxy: (GETs of a Lease, lists of kustomize-controller's
/// pods, all requests).
fn lease_requests(c: &Cluster) -> (usize, usize, usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let proxy = rt
        .block_on(realcluster::proxy::FaultProxy::start(c))
        .unwrap();
    proxy.reset_requests();
    let out = Command::new(super::BIN)
        .arg("--kubeconfig")
        .arg(proxy.kubeconfig())
        .args(["--all", "-A", "-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c <= 1), "{out:?}");
    let reqs = proxy.requests();
    let leases = reqs
        .iter()
        .filter(|r| r.method == "GET" && r.path.contains("/leases/"))
        .count();
    let pods = reqs
        .iter()
        .filter(|r| {
            r.path.contains("/namespaces/flux-system/pods")
                && r.path.contains("kustomize-controller")
        })
        .count();
    (leases, pods, reqs.len())
}
