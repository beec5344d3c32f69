//! Facts of pods: why a pod of a blocking workload (or of a HelmRelease's release) is not
//! ready ([`PodReason`]), and the catalogue's image signatures ([`Signature`]).

use crate::obj;
use jiff::SignedDuration;
use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

use crate::diagnose::*;

/// Why a pod of a blocking workload is not ready.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodReason {
    /// Pod name.
    pub pod: String,
    /// Container name.
    pub container: String,
    /// `ImagePullBackOff`, `ErrImagePull`, `CrashLoopBackOff`, `Unschedulable`, ...
    pub reason: String,
    /// The image reference the node tried, for image errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Last exit code, for CrashLoopBackOff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_exit_code: Option<i64>,
    /// Last termination reason (`Error`, `OOMKilled`), for CrashLoopBackOff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_exit_reason: Option<String>,
    /// Restart count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarts: Option<i64>,
    /// When the last failed run ended (`lastState.terminated.finishedAt`), for
    /// [`RECENT_RESTART`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_exit_at: Option<Timestamp>,
    /// Message of the waiting state or the latest Warning event of the pod.
    pub message: String,
    /// For a CrashLoopBackOff container: a Service link variable whose value its last run's
    /// log shows (failure catalogue row 5, fleetlint FL061 live;
    /// [`cluster_loop::servicelinks::log_collision`]), read from the snapshot's
    /// `workload_logs` and `services`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_link: Option<cluster_loop::servicelinks::LinkCollision>,
}

/// [`PodReason::reason`] of a container running again after a failed run less than
/// [`CRASH_LOOP_RESET`] ago ([`Engine::pod_reasons`]): not a kubelet reason (its status says
/// Running), the crash loop between two restarts.
pub const RECENT_RESTART: &str = "RestartedAfterCrash";

/// How long after a container's failed run the kubelet still counts it in the crash-loop
/// back-off (k8s.io/kubernetes v1.36 pkg/kubelet/kubelet.go: the back-off entry expires when
/// `eventTime.Sub(lastUpdate) > 600*time.Second`): a container that ran this long since its
/// last exit is no longer in a crash loop; before that, Running is a pause between restarts.
pub const CRASH_LOOP_RESET: std::time::Duration = std::time::Duration::from_secs(600);

/// A known failure signature from the catalogue.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Signature {
    /// Stable id: `bare-tag-image` or `image-without-registry`.
    pub id: String,
    /// The object carrying it.
    pub object: String,
    /// The offending image reference.
    pub image: String,
    /// What it means and what to run.
    pub message: String,
}

impl<'a> Engine<'a> {
    /// Pod-level reasons for a workload: its pods by owner (a Job's pods carry an
    /// ownerReference to it) or by `spec.selector.matchLabels` (Deployments, StatefulSets,
    /// DaemonSets, ReplicaSets). Reads the snapshot's `pods` and `events` (a Warning event's
    /// message when the waiting state has none); `[]` when no pod of it is in the snapshot.
    pub fn pod_reasons(&self, w: &Value) -> Vec<PodReason> {
        self.workload_pods(w)
            .into_iter()
            .flat_map(|p| self.reasons_of_pod(p))
            .collect()
    }

    /// The pods of a workload: by owner (a Job's pods carry an ownerReference to it), else by
    /// `spec.selector.matchLabels` (Deployments, StatefulSets, DaemonSets, ReplicaSets).
    pub(in crate::diagnose) fn workload_pods(&self, w: &Value) -> Vec<&Value> {
        let ns = obj::namespace(w);
        if let Some(pods) = self.idx.pods_by_owner.get(&(
            ns.to_string(),
            obj::kind(w).to_string(),
            obj::name(w).to_string(),
        )) {
            return pods.to_vec();
        }
        let Some(sel) = obj::at(w, &["spec", "selector", "matchLabels"]).and_then(Value::as_object)
        else {
            return Vec::new();
        };
        let Some((k0, v0)) = sel.iter().next() else {
            return Vec::new();
        };
        self.idx
            .pods_by_label
            .get(&(
                ns.to_string(),
                k0.clone(),
                v0.as_str().unwrap_or("").to_string(),
            ))
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .copied()
            .filter(|p| {
                let labels = obj::at(p, &["metadata", "labels"]).and_then(Value::as_object);
                labels.is_some_and(|l| sel.iter().all(|(k, v)| l.get(k) == Some(v)))
            })
            .collect()
    }

    /// Pod-level reasons below the workloads of a HelmRelease's release: the Deployments,
    /// StatefulSets, DaemonSets and Jobs of the snapshot that carry helm-controller's origin
    /// labels for it ([`cluster_loop::helm::ORIGIN_NAME_LABEL`], helm-controller v1.4
    /// internal/postrender/build.go `NewOriginLabels`).
    pub(in crate::diagnose) fn release_pods(&self, hr: &Value) -> Vec<PodReason> {
        let (name, ns) = (obj::name(hr), obj::namespace(hr));
        let mut out = Vec::new();
        for o in &self.idx.snap.objects {
            let labels = obj::at(o, &["metadata", "labels"]);
            let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
            if label(cluster_loop::helm::ORIGIN_NAME_LABEL) != Some(name)
                || label(cluster_loop::helm::ORIGIN_NAMESPACE_LABEL) != Some(ns)
                || !matches!(
                    obj::kind(o),
                    "Deployment" | "StatefulSet" | "DaemonSet" | "Job"
                )
            {
                continue;
            }
            for p in self.pod_reasons(o) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// The Service link variable a crashing container read, when its last run's log
    /// (`workload_logs`) shows one of the values the kubelet injected into it from the
    /// Services read (`services`).
    pub(in crate::diagnose) fn service_link(
        &self,
        p: &Value,
        container: &str,
    ) -> Option<cluster_loop::servicelinks::LinkCollision> {
        let key = format!("{}/{}/{container}", obj::namespace(p), obj::name(p));
        let log = self.idx.snap.workload_logs.get(&key)?;
        cluster_loop::servicelinks::log_collision(p, container, &self.idx.snap.services, log)
    }

    fn reasons_of_pod(&self, p: &Value) -> Vec<PodReason> {
        let pod = obj::name(p).to_string();
        let warning = self
            .idx
            .events
            .get(&(
                "Pod".to_string(),
                obj::namespace(p).to_string(),
                pod.clone(),
            ))
            .and_then(|evs| {
                evs.iter()
                    .rev()
                    .find(|e| obj::s(e, &["type"]) == Some("Warning"))
            })
            .and_then(|e| obj::s(e, &["message"]))
            .map(String::from);
        let mut out = Vec::new();
        for list in ["initContainerStatuses", "containerStatuses"] {
            for cs in obj::arr(p, &["status", list]) {
                if let Some(r) = self.recent_restart(&pod, cs) {
                    out.push(r);
                    continue;
                }
                let Some(w) = obj::at(cs, &["state", "waiting"]) else {
                    continue;
                };
                let reason = obj::s(w, &["reason"]).unwrap_or("").to_string();
                if reason.is_empty() || reason == "ContainerCreating" || reason == "PodInitializing"
                {
                    continue;
                }
                let container = obj::s(cs, &["name"]).unwrap_or("").to_string();
                let image_err = matches!(
                    reason.as_str(),
                    "ImagePullBackOff" | "ErrImagePull" | "InvalidImageName" | "ErrImageNeverPull"
                );
                let image = if image_err {
                    // The spec image is what the node tried; status.image echoes it while waiting.
                    spec_image(p, &container).or_else(|| obj::s(cs, &["image"]).map(String::from))
                } else {
                    None
                };
                let term = obj::at(cs, &["lastState", "terminated"]);
                let crash = reason == "CrashLoopBackOff";
                let mut message = obj::s(w, &["message"]).unwrap_or("").to_string();
                if let Some(wm) = &warning
                    && (message.is_empty() || image_err)
                {
                    message = wm.clone();
                }
                let service_link = if crash {
                    self.service_link(p, &container)
                } else {
                    None
                };
                out.push(PodReason {
                    pod: pod.clone(),
                    container,
                    reason,
                    image,
                    last_exit_code: if crash {
                        term.and_then(|t| obj::i(t, &["exitCode"]))
                    } else {
                        None
                    },
                    last_exit_reason: if crash {
                        term.and_then(|t| obj::s(t, &["reason"])).map(String::from)
                    } else {
                        None
                    },
                    restarts: obj::i(cs, &["restartCount"]).filter(|_| crash),
                    last_exit_at: None,
                    service_link,
                    message,
                });
            }
        }
        if out.is_empty()
            && let Some(c) = obj::condition(p, "PodScheduled")
            && c.is_false()
        {
            out.push(PodReason {
                pod,
                container: String::new(),
                reason: if c.reason().is_empty() {
                    "Unschedulable".into()
                } else {
                    c.reason().to_string()
                },
                image: None,
                last_exit_code: None,
                last_exit_reason: None,
                restarts: None,
                last_exit_at: None,
                message: c.message().to_string(),
                service_link: None,
            });
        }
        out
    }

    /// A container running again after a failed run that ended less than
    /// [`CRASH_LOOP_RESET`] ago (`state.running` with `lastState.terminated.exitCode` != 0,
    /// its `finishedAt` within the window): a crash loop caught between two restarts, when
    /// the kubelet's status says Running and ready and kstatus reads the workload Current.
    /// Reason [`RECENT_RESTART`], with the last exit code and reason, the restart count, and
    /// a message saying how long it has run and when the last run ended (what
    /// `kubectl get pod` shows as `RESTARTS 3 (40s ago)`). `None` for any other container.
    fn recent_restart(&self, pod: &str, cs: &Value) -> Option<PodReason> {
        let started = obj::parse_time(obj::s(cs, &["state", "running", "startedAt"])?)?;
        let term = obj::at(cs, &["lastState", "terminated"])?;
        let code = obj::i(term, &["exitCode"]).filter(|c| *c != 0)?;
        let finished = obj::parse_time(obj::s(term, &["finishedAt"])?)?;
        let now = self.now();
        let ago = now.duration_since(finished);
        if ago > SignedDuration::try_from(CRASH_LOOP_RESET).ok()? {
            return None;
        }
        let restarts = obj::i(cs, &["restartCount"]);
        let secs = |d: SignedDuration| d.as_secs().max(0);
        Some(PodReason {
            pod: pod.to_string(),
            container: obj::s(cs, &["name"]).unwrap_or("").to_string(),
            reason: RECENT_RESTART.to_string(),
            image: None,
            last_exit_code: Some(code),
            last_exit_reason: obj::s(term, &["reason"]).map(String::from),
            restarts,
            last_exit_at: Some(finished),
            message: format!(
                "running for {}s, restarted {} time(s), the last run exited {code} ({}) {}s ago; the kubelet forgets a crash after {} min without one",
                secs(now.duration_since(started)),
                restarts.unwrap_or(0),
                obj::s(term, &["reason"]).unwrap_or("Error"),
                secs(ago),
                CRASH_LOOP_RESET.as_secs() / 60,
            ),
            service_link: None,
        })
    }

    /// Catalogue signature: an image reference that is a bare tag, or that has no registry
    /// host while the other images of the fleet use one (image-automation `:tag` marker on an
    /// `image:` field, failure catalogue section 2).
    pub(in crate::diagnose) fn signatures_for(&self, b: &BlockingObject) -> Vec<Signature> {
        let mut images: Vec<String> = b.pods.iter().filter_map(|p| p.image.clone()).collect();
        // Also the workload's own template (works without pods, e.g. a Deployment whose
        // ReplicaSet cannot create pods yet).
        let parts: Vec<&str> = b.object.split('/').collect();
        if parts.len() == 3
            && let Some(o) = self.idx.objects_by_id.get(&(
                parts[0].to_string(),
                parts[1].to_string(),
                parts[2].to_string(),
            ))
        {
            for c in template_containers(o) {
                if let Some(i) = obj::s(c, &["image"]) {
                    images.push(i.to_string());
                }
            }
        }
        images.sort();
        images.dedup();
        let hosts = self
            .hosts
            .get_or_init(|| registry_hosts(&self.idx.snap.objects));
        let mut out = Vec::new();
        for img in images {
            let id;
            let why;
            if markercheck::render::looks_like_bare_tag(&img) {
                id = "bare-tag-image";
                why = format!("image reference `{img}` is a bare tag");
            } else if registry_host(&img).is_none()
                && let Some((host, _)) = hosts.iter().max_by_key(|(_, n)| **n)
            {
                id = "image-without-registry";
                why = format!(
                    "image reference `{img}` has no registry host while the other images use `{host}`"
                );
            } else {
                continue;
            }
            out.push(Signature {
                id: id.into(),
                object: b.object.clone(),
                image: img,
                message: format!(
                    "{why}: looks like an image-automation `:tag` marker on an `image:` field; run kubectl markercheck"
                ),
            });
        }
        out
    }
}

/// Registry hosts used by workload templates in `objects`, with counts (computed once per
/// [`Engine`]).
fn registry_hosts(objects: &[Value]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for o in objects {
        for c in template_containers(o) {
            if let Some(h) = obj::s(c, &["image"]).and_then(registry_host) {
                *m.entry(h.to_string()).or_insert(0) += 1;
            }
        }
    }
    m
}

/// The init and regular containers of a workload's pod template (a CronJob's job template, a
/// Pod's own spec).
fn template_containers(o: &Value) -> Vec<&Value> {
    let mut v = Vec::new();
    let base: &[&str] = if obj::kind(o) == "CronJob" {
        &["spec", "jobTemplate", "spec", "template", "spec"]
    } else if obj::kind(o) == "Pod" {
        &["spec"]
    } else {
        &["spec", "template", "spec"]
    };
    for k in ["initContainers", "containers"] {
        let mut p: Vec<&str> = base.to_vec();
        p.push(k);
        v.extend(obj::arr(o, &p));
    }
    v
}

/// The image `container` of pod `p` is specified with.
fn spec_image(p: &Value, container: &str) -> Option<String> {
    template_containers(p)
        .into_iter()
        .find(|c| obj::s(c, &["name"]) == Some(container))
        .and_then(|c| obj::s(c, &["image"]))
        .map(String::from)
}

/// The registry host of an image reference, following the docker reference grammar: the
/// first path component when it has a `.` or `:` or is `localhost`.
pub fn registry_host(image: &str) -> Option<&str> {
    let (first, _) = image.split_once('/')?;
    (first.contains('.') || first.contains(':') || first == "localhost").then_some(first)
}
