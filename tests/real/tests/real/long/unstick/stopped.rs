//! A Flux controller that is not running (fresh-user trial item 1): kustomize-controller or
//! source-controller scaled to 0 on the real cluster (the node agent stops the host process
//! when the ReplicaSet deletes the pod) is the root cause in `ks/NAME` and `--all`, exit 1,
//! and the Controller line says it is not running; the same fleet with both controllers up
//! is judged healthy (exit 0, no such class). Its own cluster: scaling a controller down
//! would stop every other test's runs. Also the proof wait on a fresh run (trial item 8, on the
//! quiet cluster).

use std::time::Duration;

use realcluster::testkit::{condition, eventually};
use realcluster::{Cluster, ClusterOptions, FLUX_NS};
use serde_json::Value;

use super::unstick;

fn json(c: &Cluster, args: &[&str]) -> (i32, Value) {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    let (code, out, err) = unstick(c, &a);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    (code, v)
}

fn scale(c: &Cluster, name: &str, n: u32) {
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "scale",
        &format!("deployment/{name}"),
        &format!("--replicas={n}"),
    ])
    .unwrap();
    // Until the node agent runs (or no longer runs) its host process.
    eventually(
        Duration::from_secs(60),
        &format!("{name} host process count {n}"),
        || {
            let running = c
                .host_processes()
                .iter()
                .filter(|(p, _)| p.starts_with(&format!("{FLUX_NS}/{name}-")))
                .count();
            (running == n as usize).then_some(())
        },
    );
    if n > 0 {
        eventually(Duration::from_secs(60), "the Deployment is ready", || {
            let d = c.get_json(&["-n", FLUX_NS, "get", "deployment", name]);
            (d["status"]["readyReplicas"] == 1).then_some(())
        });
    }
}

fn ready_at(c: &Cluster, name: &str, rev: &str) {
    let until = std::time::Instant::now() + Duration::from_secs(240);
    loop {
        let k = c.kustomization(name);
        if condition(&k, "Ready")["status"] == "True"
            && k["status"]["lastAppliedRevision"]
                .as_str()
                .is_some_and(|r| r.ends_with(rev))
        {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "not Ready at {rev} after 240s: {k:#}\nhost processes: {:?}\nsource: {:#}",
            c.host_processes(),
            c.get_json(&["-n", FLUX_NS, "get", "gitrepository", name])["status"]
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Requests a fetch of GitRepository `name` (requestedAt `token`) and waits until its
/// artifact is at `rev` (source-controller runs).
fn fetch(c: &Cluster, name: &str, token: &str, rev: &str) {
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "annotate",
        "--overwrite",
        &format!("gitrepository/{name}"),
        &format!("reconcile.fluxcd.io/requestedAt={token}"),
    ])
    .unwrap();
    eventually(
        Duration::from_secs(60),
        &format!("revision {rev} fetched"),
        || {
            let g = c.get_json(&["-n", FLUX_NS, "get", "gitrepository", name]);
            g["status"]["artifact"]["revision"]
                .as_str()
                .is_some_and(|r| r.ends_with(rev))
                .then_some(())
        },
    );
}

fn row<'a>(all: &'a Value, key: &str) -> &'a Value {
    all["items"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["kustomization"] == key))
        .unwrap_or_else(|| panic!("no row {key}: {all:#}"))
}

#[test]
fn a_stopped_controller_is_the_root_cause_and_a_running_one_is_not() {
    let c = std::thread::spawn(|| crate::start_cluster(ClusterOptions::default()))
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    let name = "down";
    let cm = |v: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: down\n  namespace: default\ndata:\n  v: \"{v}\"\n"
        )
    };
    let rev1 = c
        .fleet(
            name,
            &[("cm.yaml", &cm("1"))],
            "  interval: 10m\n  path: ./\n  prune: true\n",
        )
        .unwrap();
    ready_at(&c, name, &rev1);

    // Both controllers up: healthy, exit 0, the Controller line describes a running one.
    let (code, v) = json(&c, &["--all", "-n", FLUX_NS]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(row(&v, "flux-system/down")["class"], "healthy", "{v:#}");
    let (code, out, err) = unstick(&c, &["ks/down", "-n", FLUX_NS, "--dry-run"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        !out.contains("NOT RUNNING") && !out.contains("not running"),
        "{out}"
    );

    // kustomize-controller at 0 replicas, the Kustomization still Ready as last written (the
    // s6 trial: a NOT RUNNING line, then "all 2 Kustomizations are healthy", exit 0): a
    // finding in every view, named with its lever.
    scale(&c, "kustomize-controller", 0);
    let kc_lever = "kubectl -n flux-system scale deployment/kustomize-controller --replicas=1";
    let (code, v) = json(&c, &["--all", "-n", FLUX_NS]);
    assert_eq!(code, 1, "a stopped controller is a finding: {v:#}");
    let r = row(&v, "flux-system/down");
    assert_eq!(r["class"], "controller-not-running", "{r:#}");
    assert_eq!(r["lever"], "start-controller", "{r:#}");
    assert_eq!(
        v["stoppedControllers"][0]["controller"], "kustomize-controller",
        "{v:#}"
    );
    assert_eq!(v["stoppedControllers"][0]["command"], kc_lever, "{v:#}");
    let (code, out, err) = unstick(&c, &["--all", "-n", FLUX_NS]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(!out.contains("are healthy"), "{out}");
    assert!(
        out.contains(&format!(
            "kustomize-controller is not running (0 replicas): nothing reconciles; lever start-controller: {kc_lever}"
        )),
        "{out}"
    );
    let (code, out, err) = unstick(&c, &["ks/down", "-n", FLUX_NS, "--dry-run"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains(kc_lever), "{out}");
    // --check while it is stopped (ufix3's s7 note: it said "recovered", exit 0): Ready=True
    // as last written proves nothing about now.
    let (code, v) = json(&c, &["ks/down", "-n", FLUX_NS, "--check"]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["proof"], "controller-not-running", "{v:#}");
    assert!(
        v["lastSeen"]
            .as_str()
            .is_some_and(|s| s.contains("kustomize-controller is not running (0 replicas)")),
        "{v:#}"
    );
    let (code, out, err) = unstick(&c, &["ks/down", "-n", FLUX_NS, "--check"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.contains("check: not proven: kustomize-controller is not running (0 replicas)"),
        "{out}"
    );

    // And a new revision fetched by source-controller.
    let rev2 = c.push(name, &[("cm.yaml", &cm("2"))], "two").unwrap();
    fetch(&c, name, "one", &rev2);
    let (code, v) = json(&c, &["--all", "-n", FLUX_NS]);
    assert_eq!(code, 1, "a stopped controller is a finding: {v:#}");
    let r = row(&v, "flux-system/down");
    assert_eq!(r["class"], "controller-not-running", "{r:#}");
    assert_eq!(r["lever"], "start-controller", "{r:#}");
    assert_eq!(
        r["summary"], "kustomize-controller is not running (0 replicas): nothing reconciles",
        "{r:#}"
    );
    let (code, out, err) = unstick(&c, &["ks/down", "-n", FLUX_NS, "--dry-run"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.contains("kustomize-controller is not running (0 replicas): nothing reconciles"),
        "{out}"
    );
    assert!(!out.contains("nothing is stuck"), "{out}");
    assert!(
        out.contains("Controller flux-system/kustomize-controller: NOT RUNNING (0 replicas)"),
        "{out}"
    );
    assert!(
        out.contains("kubectl -n flux-system scale deployment/kustomize-controller --replicas=1"),
        "{out}"
    );
    // --with-source --yes writes nothing while nothing reconciles (the trial waited 2m30s
    // on a request no controller handled): exit 1 at once, lever start-controller.
    let (code, v) = json(&c, &["ks/down", "-n", FLUX_NS, "--with-source", "--yes"]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["plan"]["lever"], "start-controller", "{v:#}");
    assert_eq!(v["done"], serde_json::json!([]), "{v:#}");
    // Back up: it applies the new revision by itself, and the verdict is healthy again.
    scale(&c, "kustomize-controller", 1);
    ready_at(&c, name, &rev2);
    let (code, v) = json(&c, &["--all", "-n", FLUX_NS]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(row(&v, "flux-system/down")["class"], "healthy", "{v:#}");

    // source-controller at 0, the Kustomization Ready as last written (the s6 trial: "all
    // healthy", exit 0, source-controller never named; `--with-source --dry-run` planned the
    // refetch and said "the source fetches now").
    scale(&c, "source-controller", 0);
    let sc_lever = "kubectl -n flux-system scale deployment/source-controller --replicas=1";
    let (code, v) = json(&c, &["--all", "-n", FLUX_NS]);
    assert_eq!(code, 1, "{v:#}");
    let r = row(&v, "flux-system/down");
    assert_eq!(r["class"], "controller-not-running", "{r:#}");
    assert_eq!(r["lever"], "start-controller", "{r:#}");
    assert_eq!(
        v["stoppedControllers"][0]["controller"], "source-controller",
        "{v:#}"
    );
    let (code, out, err) = unstick(&c, &["--all", "-n", FLUX_NS]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(!out.contains("are healthy"), "{out}");
    assert!(
        out.contains(&format!(
            "source-controller is not running (0 replicas): nothing fetches; lever start-controller: {sc_lever}"
        )),
        "{out}"
    );
    let (code, out, err) = unstick(
        &c,
        &["ks/down", "-n", FLUX_NS, "--with-source", "--dry-run"],
    );
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(!out.contains("fetches now"), "{out}");
    assert!(!out.contains("PATCH"), "nothing is planned: {out}");
    assert!(out.contains("Lever: start-controller"), "{out}");
    assert!(out.contains(sc_lever), "{out}");

    // And a reconcile requested: the run cannot download its manifests; nothing fetches.
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "annotate",
        "--overwrite",
        "kustomization/down",
        "reconcile.fluxcd.io/requestedAt=two",
    ])
    .unwrap();
    let (code, v) = json(&c, &["--all", "-n", FLUX_NS]);
    assert_eq!(code, 1, "{v:#}");
    let r = row(&v, "flux-system/down");
    assert_eq!(r["class"], "controller-not-running", "{r:#}");
    assert_eq!(
        r["summary"], "source-controller is not running (0 replicas): nothing fetches",
        "{r:#}"
    );
    let (code, out, err) = unstick(&c, &["ks/down", "-n", FLUX_NS, "--dry-run"]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.contains("source-controller is not running (0 replicas): nothing fetches"),
        "{out}"
    );
    assert!(!out.contains("ETA"), "no ETA while nothing runs: {out}");
    scale(&c, "source-controller", 1);

    crash_looping_controller(&c, name, &cm);
}

/// kustomize-controller's Deployment at 1 replica, its pod crash-looping (the 2 a.m. case: a
/// flag the controller refuses; kustomize-controller v1.9.6 main.go exits 1 on
/// `--feature-gates=NoSuchGate=true`, "unable to load feature gates"; the node agent reports
/// it as a kubelet does: CrashLoopBackOff, restartCount, lastState): `--all` and `ks/NAME`
/// name the controller as not running with the pod's reason, restarts and last exit, the
/// exited run's log lines and the `kubectl logs --previous` command that shows them (run here
/// as printed), exit 1, no write; healthy again once the Deployment is fixed.
fn crash_looping_controller(c: &Cluster, name: &str, cm: &dyn Fn(&str) -> String) {
    let rev3 = c.push(name, &[("cm.yaml", &cm("3"))], "three").unwrap();
    // Recreate: the running pod goes before the new one starts (with the default rolling
    // update the old pod keeps running beside the crashing one, and the controller runs).
    let patch = r#"[{"op": "replace", "path": "/spec/strategy", "value": {"type": "Recreate"}},
        {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--feature-gates=NoSuchGate=true"}]"#;
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "patch",
        "deployment/kustomize-controller",
        "--type=json",
        "-p",
        patch,
    ])
    .unwrap();
    let pod = eventually(
        Duration::from_secs(90),
        "kustomize-controller's new pod in CrashLoopBackOff",
        || {
            let pods = c.get_json(&[
                "-n",
                FLUX_NS,
                "get",
                "pods",
                "-l",
                "app=kustomize-controller",
            ]);
            let items = pods["items"].as_array()?;
            let p = items.first().filter(|_| items.len() == 1)?;
            let cs = &p["status"]["containerStatuses"][0];
            (cs["state"]["waiting"]["reason"] == "CrashLoopBackOff").then(|| p.clone())
        },
    );
    let pod_name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    eventually(
        Duration::from_secs(60),
        "the Deployment observed, none ready",
        || {
            let d = c.get_json(&["-n", FLUX_NS, "get", "deployment", "kustomize-controller"]);
            (d["status"]["observedGeneration"] == d["metadata"]["generation"]
                && d["status"]["readyReplicas"].is_null())
            .then_some(())
        },
    );
    // The new revision is fetched (source-controller runs), and nothing applies it.
    fetch(c, name, "three", &rev3);
    let logs_cmd = format!("kubectl -n flux-system logs {pod_name} -c manager --previous");
    let before = c.kustomization(name);
    let (code, v) = json(c, &["--all", "-n", FLUX_NS]);
    assert_eq!(code, 1, "a crash-looping controller is a finding: {v:#}");
    let sc = &v["stoppedControllers"][0];
    assert_eq!(sc["controller"], "kustomize-controller", "{v:#}");
    assert_eq!(sc["command"], logs_cmd.as_str(), "{v:#}");
    assert_eq!(sc["pod"]["pod"], pod_name.as_str(), "{v:#}");
    // Between two back-offs the restarted process runs (not ready) until it exits again: a
    // read in that moment sees it running with the last exit as lastState.
    let reason = sc["pod"]["reason"].as_str().unwrap_or_default().to_owned();
    assert!(
        reason == "CrashLoopBackOff" || reason == "NotReady",
        "{v:#}"
    );
    assert_eq!(sc["pod"]["lastExitCode"], 1, "{v:#}");
    assert_eq!(sc["pod"]["lastExitReason"], "Error", "{v:#}");
    let restarts = sc["pod"]["restarts"].as_i64().unwrap_or(0);
    assert!(restarts >= 1, "{v:#}");
    let s = if restarts == 1 { "" } else { "s" };
    let why = format!(
        "no ready pod, 0 of 1 ready; pod {pod_name} {reason}, {restarts} restart{s}, last exit code 1 Error"
    );
    assert_eq!(sc["why"], why.as_str(), "{v:#}");
    assert!(
        sc["pod"]["lastLogLines"]
            .as_array()
            .is_some_and(|l| l.iter().any(|l| l
                .as_str()
                .is_some_and(|l| l.contains("unable to load feature gates")))),
        "{v:#}"
    );
    let r = row(&v, "flux-system/down");
    assert_eq!(r["class"], "controller-not-running", "{r:#}");
    assert_eq!(r["lever"], "start-controller", "{r:#}");
    // The text runs read the pod again: its restart count may have grown since (the
    // kubelet restarts it every 10 s, 20 s, ...), so the count is matched by shape.
    let why_re = format!(
        r"no ready pod, 0 of 1 ready; pod {} (CrashLoopBackOff|NotReady), \d+ restarts?, last exit code 1 Error",
        regex::escape(&pod_name)
    );
    let line = regex::Regex::new(&format!(
        r"kustomize-controller is not running \({why_re}\): nothing reconciles; lever start-controller: {}\n",
        regex::escape(&logs_cmd)
    ))
    .unwrap();
    let (code, out, err) = unstick(c, &["--all", "-n", FLUX_NS]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(!out.contains("are healthy"), "{out}");
    assert!(line.is_match(&out), "{out}");
    assert!(out.contains("unable to load feature gates"), "{out}");
    let (code, out, err) = unstick(c, &["ks/down", "-n", FLUX_NS]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(!out.contains("healthy"), "{out}");
    assert!(!out.contains("nothing is stuck"), "{out}");
    let controller_line = regex::Regex::new(&format!(
        r"Controller flux-system/kustomize-controller: NOT RUNNING \({why_re}\): nothing reconciles"
    ))
    .unwrap();
    assert!(controller_line.is_match(&out), "{out}");
    assert!(out.contains(&logs_cmd), "{out}");
    assert!(
        out.contains(&format!(
            "last log lines of pod/{pod_name} container manager (exit code 1):"
        )) && out.contains("feature-gate 'NoSuchGate' not supported"),
        "{out}"
    );
    // No write: the Kustomization is as the controller last wrote it.
    let after = c.kustomization(name);
    assert_eq!(
        after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "unstick wrote to the Kustomization: {after:#}"
    );
    // The printed command runs as written and shows the exited run.
    let args: Vec<&str> = logs_cmd.split(' ').skip(1).collect();
    let prev = c.kubectl(&args).unwrap();
    assert!(prev.contains("unable to load feature gates"), "{prev}");

    // Fixed: the flag removed, the controller applies the revision, healthy again.
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "patch",
        "deployment/kustomize-controller",
        "--type=json",
        "-p",
        r#"[{"op": "test", "path": "/spec/template/spec/containers/0/args/6", "value": "--feature-gates=NoSuchGate=true"},
            {"op": "remove", "path": "/spec/template/spec/containers/0/args/6"}]"#,
    ])
    .unwrap();
    ready_at(c, name, &rev3);
    let (code, v) = json(c, &["--all", "-n", FLUX_NS]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(row(&v, "flux-system/down")["class"], "healthy", "{v:#}");
}

/// Fresh-user trial item 8, on kustomize-controller v1.9.6 with the cancel gate off: a held
/// health check (an image that never pulls, timeout 20s), `unstick --yes` plans
/// suspend+resume with the fresh run right after the held check ends. The verdict
/// (failed-again: nothing changed) comes only after that fresh run started and ended, as
/// `status.history` shows, never on the held run's own end.
#[test]
fn failed_again_only_after_the_fresh_run_it_waited_for() {
    let c = &super::quiet_cluster();
    let name = "freshrun";
    let dep = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: freshrun\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 3600\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: 0.1.1\n";
    c.fleet(
        name,
        &[
            (
                "ns.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: freshrun\n",
            ),
            ("web.yaml", dep),
        ],
        "  interval: 60m\n  path: ./\n  prune: true\n  wait: true\n  timeout: 20s\n",
    )
    .unwrap();
    eventually(Duration::from_secs(90), "the real check is held", || {
        condition(&c.kustomization(name), "Reconciling")["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Running health checks"))
            .then_some(())
    });
    let began = jiff::Timestamp::now();
    let (code, v) = json(c, &["ks/freshrun", "-n", FLUX_NS, "--yes"]);
    let ended = jiff::Timestamp::now();
    assert_eq!(v["plan"]["lever"], "suspend-resume", "{v:#}");
    assert!(v["plan"]["freshRunAt"].is_string(), "{v:#}");
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["proof"], "failed-again", "{v:#}");
    // The fresh run (started after our writes) had ended when the verdict was given.
    let k = c.kustomization(name);
    let fresh = k["status"]["history"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| {
            let end: jiff::Timestamp = h["lastReconciled"].as_str()?.parse().ok()?;
            let took =
                cluster_loop::duration::parse_go_duration(h["lastReconciledDuration"].as_str()?)
                    .ok()?;
            let start = end
                .checked_sub(jiff::SignedDuration::try_from(took).ok()?)
                .ok()?;
            (start >= began && end <= ended).then_some((start, end))
        })
        .next();
    assert!(
        fresh.is_some(),
        "no run that started after {began} ended before the verdict at {ended}: {:#}",
        k["status"]
    );
}
