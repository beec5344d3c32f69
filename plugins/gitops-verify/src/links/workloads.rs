//! Link 3, the workloads: each Deployment, StatefulSet, DaemonSet and Job in the inventory
//! of an in-scope Kustomization (`status.inventory`, kustomize-controller's record of what
//! it applied) is Current by kstatus as kustomize-controller's health check reads it
//! ([`cluster_loop::kstatus::compute_health_at`], for the controller version read: a Job is
//! InProgress until it completes, where plain kstatus calls a running Job Current), with pod
//! reasons when not (unstick's [`unstick::diagnose::Engine::pod_reasons`]).
//!
//! - A container of the current template running again after a failed run that ended less
//!   than [`unstick::diagnose::CRASH_LOOP_RESET`] ago (reason
//!   [`unstick::diagnose::RECENT_RESTART`]), whatever kstatus reads (Current included: between
//!   back-offs the kubelet says Running and ready): `broken` from its
//!   [`CRASH_LOOP_RESTARTS`]th restart (a crash loop caught between restarts), else `waiting`
//!   until that run's end + the window.
//! - Current: `ok`.
//! - Failed (ProgressDeadlineExceeded, a failed Job), or in the inventory but absent: `broken`.
//! - InProgress with a pod of the current pod template (its containers' images are the
//!   template's) that cannot get better by itself (ImagePullBackOff, ErrImagePull,
//!   InvalidImageName, CrashLoopBackOff, CreateContainerConfigError, RunContainerError:
//!   the failure catalogue's "certain" states): `broken`, naming the pod, container, reason
//!   and image; a crashing container whose last run's log shows a Service link variable's
//!   value names it, with `enableServiceLinks: false` as the fix (catalogue row 5). The
//!   same reason on a pod of an older template (a rollout replacing it) is
//!   `waiting`: the rollout removes that pod.
//! - InProgress otherwise, or Terminating: `waiting`, until a Deployment's Progressing
//!   `lastUpdateTime` + `spec.progressDeadlineSeconds` (default 600 s, kubernetes
//!   deployment controller `DeploymentTimedOut`), else now + the owning Kustomization's
//!   timeout.

use cluster_loop::error::Result;
use cluster_loop::kstatus::{self, Status};
use futures::future::BoxFuture;
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use unstick::diagnose::{Engine, PodReason};
use unstick::obj;
use unstick::snapshot::Snapshot;

use super::{Context, Link};
use crate::chain::{Evidence, LinkReport, Verdict};
use crate::facts::{WORKLOAD_KINDS, inventory_workloads};

/// Pod waiting reasons that do not end by themselves.
pub const CERTAIN_REASONS: &[&str] = &[
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "RunContainerError",
];

/// Link 3.
pub struct WorkloadsLink;

impl Link for WorkloadsLink {
    fn position(&self) -> u8 {
        3
    }

    fn id(&self) -> &'static str {
        "workloads"
    }

    fn check<'a>(&'a self, cx: &'a Context<'a>) -> BoxFuture<'a, Result<LinkReport>> {
        Box::pin(async move {
            let f = cx.facts;
            let snap = Snapshot {
                now: f.now,
                pods: f.pods.clone(),
                objects: f.workloads.clone(),
                // A crashing container's last run and its namespace's Services, as the
                // Kustomizations' diagnosis read them: a Service link variable the app read
                // is the cause (catalogue row 5).
                workload_logs: f.snap.workload_logs.clone(),
                services: f.snap.services.clone(),
                ..Snapshot::default()
            };
            let engine = Engine::new(&snap);
            let version = Engine::new(&f.snap)
                .controller
                .and_then(|c| c.version)
                .map(|v| (v.major, v.minor));
            let reader = kstatus::HealthReader::for_version(version);
            let mut seen = std::collections::BTreeSet::new();
            let mut members = Vec::new();
            for ks in &f.kustomizations {
                let timeout = cluster_loop::flux::Kustomization::effective_timeout_of(ks)
                    .unwrap_or(std::time::Duration::from_secs(300));
                for (_, kind, ns, name) in inventory_workloads(ks) {
                    if !seen.insert((kind.clone(), ns.clone(), name.clone())) {
                        continue;
                    }
                    let id = format!("{kind}/{ns}/{name}");
                    let appliers = f.appliers(&kind, &ns, &name);
                    members.push(match f.workload(&kind, &ns, &name) {
                        None => Evidence::new(
                            id,
                            Verdict::Broken,
                            format!("in the inventory of Kustomization {} but not in the cluster (deleted out of band)", unstick::diagnose::key_of(ks)),
                        )
                        .fix(format!(
                            "flux reconcile ks {} -n {} re-applies it",
                            obj::name(ks),
                            obj::namespace(ks)
                        )),
                        Some(w) => member(&engine, reader, &f.pods, w, id, f.now, timeout),
                    }.applied_by(appliers));
                }
            }
            Ok(LinkReport::from_members(
                3,
                "workloads",
                members,
                "no Deployment, StatefulSet, DaemonSet or Job in the in-scope Kustomizations' inventories",
            ))
        })
    }

    fn watches(&self) -> Vec<kube::api::ApiResource> {
        WORKLOAD_KINDS
            .iter()
            .chain(&[("", "Pod")])
            .filter_map(|(g, k)| unstick::live::api_resource(g, k))
            .collect()
    }

    fn watch_all(&self) -> bool {
        true
    }
}

fn reason_text(p: &PodReason) -> String {
    let mut s = format!("pod {} container {}: {}", p.pod, p.container, p.reason);
    if let Some(i) = &p.image {
        s.push_str(&format!(" (image {i})"));
    }
    if let Some(c) = p.last_exit_code {
        s.push_str(&format!(" (last exit {c})"));
    }
    if !p.message.is_empty() {
        s.push_str(&format!(": {}", p.message));
    }
    if let Some(c) = &p.service_link {
        s.push_str(&format!("; {}", c.describe()));
    }
    s
}

/// A Deployment's progress deadline: Progressing `lastUpdateTime` +
/// `spec.progressDeadlineSeconds` (default 600).
fn progress_deadline(w: &Value) -> Option<Timestamp> {
    if obj::kind(w) != "Deployment" {
        return None;
    }
    let secs = obj::i(w, &["spec", "progressDeadlineSeconds"]).unwrap_or(600);
    let c = obj::arr(w, &["status", "conditions"])
        .iter()
        .find(|c| obj::s(c, &["type"]) == Some("Progressing"))?;
    let t = obj::parse_time(obj::s(c, &["lastUpdateTime"])?)?;
    t.checked_add(SignedDuration::from_secs(secs)).ok()
}

/// The ReplicaSet of a Deployment's current pod template, as the deployment controller names
/// it in the Progressing condition's message (kubernetes pkg/controller/deployment/util:
/// `ReplicaSet "NAME" is progressing.`, `... has successfully progressed.`, `... has timed out
/// progressing.`, `Created new replica set "NAME"`, `Found new replica set "NAME"`).
fn new_replica_set(w: &Value) -> Option<&str> {
    if obj::kind(w) != "Deployment" {
        return None;
    }
    let c = obj::arr(w, &["status", "conditions"])
        .iter()
        .find(|c| obj::s(c, &["type"]) == Some("Progressing"))?;
    let m = obj::s(c, &["message"])?;
    let m = m
        .strip_prefix("ReplicaSet \"")
        .or_else(|| m.strip_prefix("Created new replica set \""))
        .or_else(|| m.strip_prefix("Found new replica set \""))?;
    m.split_once('"').map(|(name, _)| name)
}

/// Whether pod `name` (in `w`'s namespace) runs `w`'s current pod template. For a Deployment
/// whose Progressing condition names its new ReplicaSet ([`new_replica_set`]): the pod is
/// owned by that ReplicaSet (a fix that changes no image, `enableServiceLinks: false`, leaves
/// the old pods with the same images while the rollout replaces them). Otherwise: each of its
/// containers has the template's image for that name (a pod of an older ReplicaSet or
/// revision does not).
fn of_template(w: &Value, pods: &[Value], name: &str) -> bool {
    let Some(p) = pods
        .iter()
        .find(|p| obj::name(p) == name && obj::namespace(p) == obj::namespace(w))
    else {
        return false;
    };
    if let Some(rs) = new_replica_set(w) {
        return obj::arr(p, &["metadata", "ownerReferences"])
            .iter()
            .any(|o| {
                obj::s(o, &["kind"]) == Some("ReplicaSet") && obj::s(o, &["name"]) == Some(rs)
            });
    }
    let template = obj::arr(w, &["spec", "template", "spec", "containers"]);
    obj::arr(p, &["spec", "containers"]).iter().all(|c| {
        template.iter().any(|t| {
            obj::s(t, &["name"]) == obj::s(c, &["name"])
                && obj::s(t, &["image"]) == obj::s(c, &["image"])
        })
    })
}

fn member(
    engine: &Engine<'_>,
    reader: kstatus::HealthReader,
    pods: &[Value],
    w: &Value,
    id: String,
    now: Timestamp,
    timeout: std::time::Duration,
) -> Evidence {
    let st = kstatus::compute_health_at(w, now, reader);
    let reasons = engine.pod_reasons(w);
    let text = |base: String| {
        if reasons.is_empty() {
            base
        } else {
            format!(
                "{base}; {}",
                reasons
                    .iter()
                    .map(reason_text)
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
    };
    // A container of the current template running again after a failed run within the
    // kubelet's crash-loop window: Running and ready (kstatus may read Current), but a crash
    // loop caught between restarts is not proven healthy.
    let restarted = reasons
        .iter()
        .find(|r| r.reason == unstick::diagnose::RECENT_RESTART && of_template(w, pods, &r.pod));
    match st.status {
        Status::Failed | Status::Unknown => {}
        _ if let Some(r) = restarted => {
            let logs = format!(
                "kubectl logs -n {} {} -c {} --previous",
                obj::namespace(w),
                r.pod,
                r.container
            );
            return if r.restarts.unwrap_or(0) >= CRASH_LOOP_RESTARTS {
                Evidence::new(
                    id,
                    Verdict::Broken,
                    text(format!(
                        "a crash loop between two restarts (kstatus {}: {})",
                        st.status, st.message
                    )),
                )
                .fix(format!("{logs} shows why the last run exited"))
            } else {
                // One failed run: proven once it has run the kubelet's window without
                // another (a second exit makes it a loop).
                let by = r.last_exit_at.and_then(|t| {
                    t.checked_add(
                        SignedDuration::try_from(unstick::diagnose::CRASH_LOOP_RESET)
                            .unwrap_or_default(),
                    )
                    .ok()
                });
                Evidence::new(
                    id,
                    Verdict::Waiting,
                    text(format!(
                        "restarted once after a failed run; healthy when it runs {} min without exiting (kstatus {}: {})",
                        unstick::diagnose::CRASH_LOOP_RESET.as_secs() / 60,
                        st.status,
                        st.message
                    )),
                )
                .until(by)
            };
        }
        _ => {}
    }
    match st.status {
        Status::Current => Evidence::new(id, Verdict::Ok, format!("Current: {}", st.message)),
        Status::Unknown => Evidence::new(
            id,
            Verdict::Unknown,
            format!("kstatus Unknown: {}", st.message),
        ),
        Status::Failed => {
            Evidence::new(id, Verdict::Broken, text(format!("Failed: {}", st.message))).fix(
                format!("kubectl describe {} -n {}", id_ref(w), obj::namespace(w)),
            )
        }
        _ if reasons.iter().any(|r| {
            CERTAIN_REASONS.contains(&r.reason.as_str()) && of_template(w, pods, &r.pod)
        }) =>
        {
            let images: Vec<&str> = reasons.iter().filter_map(|r| r.image.as_deref()).collect();
            let fix = if let Some(c) = reasons.iter().find_map(|r| r.service_link.as_ref()) {
                c.fix()
            } else if images
                .iter()
                .any(|i| markercheck::render::looks_like_bare_tag(i))
            {
                "a bare tag is what a ':tag' marker on an image: field writes: fix the marker in Git (kubectl markercheck PATH), see the images link".to_string()
            } else if !images.is_empty() {
                format!(
                    "the node cannot pull {}: fix the reference in Git (tag, registry) or the pull secret",
                    images.join(", ")
                )
            } else {
                format!(
                    "kubectl logs -n {} {} --previous",
                    obj::namespace(w),
                    reasons[0].pod
                )
            };
            // The pod's reason first: it is the cause; kstatus's message ("Pending
            // termination: 1", the old ReplicaSet's pod kept while the new one fails) reads
            // as something else at a glance.
            let pods_say = reasons
                .iter()
                .map(reason_text)
                .collect::<Vec<_>>()
                .join("; ");
            Evidence::new(
                id,
                Verdict::Broken,
                format!("{pods_say}; kstatus {}: {}", st.status, st.message),
            )
            .fix(fix)
        }
        _ => {
            let by = progress_deadline(w).or_else(|| {
                now.checked_add(SignedDuration::try_from(timeout).unwrap_or_default())
                    .ok()
            });
            Evidence::new(
                id,
                Verdict::Waiting,
                text(format!("{}: {}", st.status, st.message)),
            )
            .until(by)
        }
    }
}

/// Restarts after which a container running again within the kubelet's crash-loop window is
/// a crash loop (`broken`) rather than one failed run (`waiting`): the kubelet backs off from
/// the second exit on (the first restart is immediate, pkg/kubelet/kuberuntime
/// `doBackOff`).
const CRASH_LOOP_RESTARTS: i64 = 2;

fn id_ref(w: &Value) -> String {
    format!("{}/{}", obj::kind(w).to_lowercase(), obj::name(w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy(image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "apps", "generation": 2},
               "spec": {"template": {"spec": {"containers": [{"name": "web", "image": image}]}}}})
    }

    fn pod(name: &str, image: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "apps"},
               "spec": {"containers": [{"name": "web", "image": image}]}})
    }

    #[test]
    fn only_a_pod_of_the_current_template_is_certain() {
        let w = deploy("reg/web:2");
        let pods = [pod("new", "reg/web:2"), pod("old", "0.1.1")];
        assert!(of_template(&w, &pods, "new"));
        // The old ReplicaSet's pod: the rollout removes it, its pull error is not final.
        assert!(!of_template(&w, &pods, "old"));
        assert!(!of_template(&w, &pods, "gone"));
    }

    #[test]
    fn the_new_replica_set_decides_over_the_images() {
        // A fix that changes no image (enableServiceLinks: false): the old ReplicaSet's pod
        // has the template's images but is being replaced.
        let mut w = deploy("reg/web:2");
        w["status"] = json!({"conditions": [{"type": "Progressing", "status": "True",
            "reason": "ReplicaSetUpdated", "message": "ReplicaSet \"web-new\" is progressing."}]});
        let owned = |n: &str, rs: &str| {
            let mut p = pod(n, "reg/web:2");
            p["metadata"]["ownerReferences"] = json!([{"kind": "ReplicaSet", "name": rs}]);
            p
        };
        let pods = [owned("new-1", "web-new"), owned("old-1", "web-old")];
        assert_eq!(new_replica_set(&w), Some("web-new"));
        assert!(of_template(&w, &pods, "new-1"));
        assert!(!of_template(&w, &pods, "old-1"));
        for m in [
            "Created new replica set \"web-new\"",
            "Found new replica set \"web-new\"",
            "ReplicaSet \"web-new\" has timed out progressing.",
        ] {
            w["status"]["conditions"][0]["message"] = json!(m);
            assert_eq!(new_replica_set(&w), Some("web-new"), "{m}");
        }
        // No Progressing condition yet: the images decide.
        w["status"] = json!({});
        assert!(of_template(&w, &pods, "old-1"));
    }

    #[test]
    fn progress_deadline_is_the_progressing_update_plus_the_spec() {
        let mut w = deploy("reg/web:2");
        w["spec"]["progressDeadlineSeconds"] = json!(120);
        w["status"] = json!({"conditions": [{"type": "Progressing", "status": "True",
            "lastUpdateTime": "2026-12-03T18:00:00Z"}]});
        assert_eq!(
            progress_deadline(&w).unwrap().to_string(),
            "2026-12-03T18:02:00Z"
        );
        w["kind"] = json!("StatefulSet");
        assert_eq!(progress_deadline(&w), None);
    }
}

#[cfg(test)]
mod restart_tests {
    use super::*;
    use serde_json::json;

    /// A Deployment kstatus reads Current, and its one pod, running `web` again after a run
    /// that exited 1 at `finished`, restarted `restarts` times.
    fn current_with_restarts(restarts: i64, finished: &str) -> (Value, Vec<Value>) {
        let w = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "apps", "generation": 1},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "web", "image": "reg/web:1"}]}}},
            "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                "readyReplicas": 1, "availableReplicas": 1,
                "conditions": [{"type": "Available", "status": "True"}]}});
        let pod = json!({"metadata": {"name": "web-1", "namespace": "apps",
                "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "reg/web:1"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "web", "ready": true,
                "restartCount": restarts,
                "state": {"running": {"startedAt": "2026-12-03T18:09:50Z"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                    "startedAt": "2026-12-03T18:09:00Z", "finishedAt": finished}}}]}});
        (w, vec![pod])
    }

    fn judge(restarts: i64, finished: &str) -> Evidence {
        let (w, pods) = current_with_restarts(restarts, finished);
        let now: Timestamp = "2026-12-03T18:10:00Z".parse().unwrap();
        let snap = Snapshot {
            now,
            pods: pods.clone(),
            objects: vec![w.clone()],
            ..Snapshot::default()
        };
        let engine = Engine::new(&snap);
        let st = kstatus::compute_health_at(&w, now, kstatus::HealthReader::for_version(None));
        assert_eq!(
            st.status,
            Status::Current,
            "the fixture is Current by kstatus"
        );
        member(
            &engine,
            kstatus::HealthReader::for_version(None),
            &pods,
            &w,
            "Deployment/apps/web".into(),
            now,
            std::time::Duration::from_secs(300),
        )
    }

    #[test]
    fn a_crash_loop_caught_running_is_broken_not_ok() {
        let e = judge(3, "2026-12-03T18:09:40Z");
        assert_eq!(e.verdict, Verdict::Broken, "{e:?}");
        assert!(e.detail.contains("RestartedAfterCrash"), "{}", e.detail);
        assert!(
            e.detail.contains("exited 1 (Error) 20s ago"),
            "{}",
            e.detail
        );
        assert!(
            e.fix.as_deref().unwrap_or("").contains("--previous"),
            "{e:?}"
        );
    }

    #[test]
    fn one_failed_run_waits_out_the_kubelets_window() {
        let e = judge(1, "2026-12-03T18:09:40Z");
        assert_eq!(e.verdict, Verdict::Waiting, "{e:?}");
        assert_eq!(
            e.deadline.map(|t| t.to_string()).as_deref(),
            Some("2026-12-03T18:19:40Z")
        );
    }

    #[test]
    fn a_failed_run_past_the_window_is_ok() {
        let e = judge(5, "2026-12-03T17:59:59Z");
        assert_eq!(e.verdict, Verdict::Ok, "{e:?}");
    }
}
