//! Leader election of a Flux controller: a ready pod reconciles nothing unless it holds the
//! controller's Lease. What it models, from the source:
//!
//! - the flags: fluxcd/pkg runtime/leaderelection `Options.BindFlags` (v0.110.3, used by
//!   kustomize- and source-controller v1.9.6): `--enable-leader-election` (default false, but
//!   `flux install` sets it), `--leader-election-lease-duration` (35s),
//!   `--leader-election-renew-deadline` (30s), `--leader-election-retry-period` (5s),
//!   `--leader-election-release-on-cancel` (true);
//! - the Lease: coordination.k8s.io/v1, in the controller's namespace (controller-runtime
//!   reads it from the pod's service-account namespace), named `<controller>-leader-election`,
//!   and when `--watch-label-selector` is set `GenerateID(name, selector)`: the name, `-` and
//!   the first 8 hex digits of the SHA-256 of the selector string (kustomize-controller and
//!   source-controller main.go v1.9.6, fluxcd/pkg leaderelection `GenerateID`), so each shard
//!   has its own Lease;
//! - the identity: controller-runtime `NewResourceLock`: `os.Hostname() + "_" + uuid`, the pod
//!   name in a pod, and a new uuid for every process;
//! - the election: client-go leaderelection (v0.36). The leader renews every retry period; a
//!   candidate tries every jittered retry period (`wait.JitterUntil(RetryPeriod, JitterFactor
//!   1.2)`: 5s to 11s by default) and takes the Lease when its holder is empty (released:
//!   `ReleaseOnCancel` writes an empty holder on a clean stop) or when the record it last saw
//!   change is older than the lease duration by its own clock (`observedTime`); so a Lease
//!   the holder stopped renewing at R is taken between R + duration and R + duration + two
//!   jittered periods (it may see R one period late, and tries once more after the expiry),
//!   and a released one within one jittered period. controller-runtime starts no controller (and kustomize- and
//!   source-controller start no reconcile) before it is elected, while their readiness
//!   probe (`healthz.Ping`) passes: a ready pod is not proof that anything runs.
//!
//! Not modelled: clock skew between the holder (who writes `renewTime`) and this machine, and
//! coordinated leader election (`LeaseCandidate`), which Flux does not use.

use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use cluster_loop::flux::LeaderTrouble;

use crate::obj;

/// client-go leaderelection `JitterFactor`: a candidate waits a retry period times 1 to 1 +
/// 1.2 between tries (`wait.JitterUntil`), so the longest wait is 2.2 retry periods.
pub const JITTER: f64 = 2.2;

/// Leader election as a controller's args set it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderElection {
    /// The Lease's name (in the controller's namespace).
    pub lease: String,
    /// `--leader-election-lease-duration` in seconds (35).
    pub lease_duration_secs: f64,
    /// `--leader-election-retry-period` in seconds (5): how often the leader renews and a
    /// candidate tries.
    pub retry_period_secs: f64,
}

impl LeaderElection {
    /// Leader election of a controller named `controller` (`kustomize-controller`,
    /// `source-controller`: main.go's `controllerName`, not the Deployment's name) run with
    /// `args`, or `None` when `--enable-leader-election` is off (its default; the last flag
    /// wins, as in Go's flag package). `watch_label_selector` is the flag's value as given.
    pub fn from_args(
        controller: &str,
        args: &[String],
        watch_label_selector: &str,
    ) -> Option<LeaderElection> {
        let mut on = false;
        let mut lease_duration_secs = 35.0;
        let mut retry_period_secs = 5.0;
        for a in args {
            let Some(body) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else {
                continue;
            };
            let (k, v) = body.split_once('=').unwrap_or((body, ""));
            let secs = || {
                cluster_loop::duration::parse_go_duration(v)
                    .ok()
                    .map(|d| d.as_secs_f64())
            };
            match k {
                "enable-leader-election" => {
                    on = v.is_empty() || matches!(v, "true" | "1" | "t" | "T" | "TRUE" | "True")
                }
                "leader-election-lease-duration" => {
                    lease_duration_secs = secs().unwrap_or(lease_duration_secs)
                }
                "leader-election-retry-period" => {
                    retry_period_secs = secs().unwrap_or(retry_period_secs)
                }
                _ => {}
            }
        }
        on.then(|| LeaderElection {
            lease: lease_name(controller, watch_label_selector),
            lease_duration_secs,
            retry_period_secs,
        })
    }
}

/// The Lease name of `controller` run with `--watch-label-selector=selector` (empty: none):
/// fluxcd/pkg runtime/leaderelection `GenerateID("<controller>-leader-election", selector)`.
pub fn lease_name(controller: &str, selector: &str) -> String {
    let base = format!("{controller}-leader-election");
    if selector.is_empty() {
        return base;
    }
    let sum = Sha256::digest(selector.as_bytes());
    let hex: String = sum.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{base}-{hex}")
}

/// Why `deployment` (a controller Deployment that runs: a ready pod) leads nothing, from its
/// leader election `le`, the Lease as read (`None`: it does not exist), the Deployment's
/// pods (`[]`: not read; then a holder whose host name has the shape of a pod of this
/// Deployment, `<deployment>-<hash>-<5>`, counts as one) at `now`; `None` when a pod of it
/// holds a Lease that has not expired. The cases:
/// - held by another identity that renewed within three retry periods: a finding (another
///   controller with the same Lease, e.g. a second install with the same selector in this
///   namespace, leads; nothing here runs while it does);
/// - held by another identity that stopped renewing: a wait, taken between the expiry and the
///   expiry plus two jittered retry periods ([`JITTER`]);
/// - free (released, or expired) for less than three jittered retry periods: a wait of one
///   jittered period; for longer: a finding (no process takes it);
/// - no Lease: a finding (no process of it runs for election).
pub fn leader_trouble(
    controller: &str,
    deployment: &Value,
    le: &LeaderElection,
    lease: Option<&Value>,
    pods: &[Value],
    now: Timestamp,
) -> Option<LeaderTrouble> {
    let ns = obj::namespace(deployment);
    let dname = obj::name(deployment);
    let lease_ref = format!("{ns}/{}", le.lease);
    let own: Vec<&Value> = own_pods(deployment, pods);
    let ready = own
        .iter()
        .find(|p| {
            let cs = obj::arr(p, &["status", "containerStatuses"]);
            !cs.is_empty() && cs.iter().all(|c| obj::b(c, &["ready"]))
        })
        .map(|p| obj::name(p).to_string());
    let who = match &ready {
        Some(p) => format!("{controller}'s pod {p}"),
        None => format!("{controller}'s ready pod"),
    };
    let retry = le.retry_period_secs;
    let add = |t: Timestamp, s: f64| t.checked_add(secs(s)).ok();
    let mut t = LeaderTrouble {
        lease: lease_ref.clone(),
        holder: None,
        renewed_at: None,
        expires_at: None,
        pod: ready.clone(),
        keeps_renewing: false,
        until: None,
        why: String::new(),
    };
    let Some(lease) = lease else {
        t.why = format!(
            "{who} is not the leader: no Lease {lease_ref} exists, so no {controller} process runs for election (one started with --enable-leader-election creates it at once)"
        );
        return Some(t);
    };
    let holder = obj::s(lease, &["spec", "holderIdentity"]).filter(|h| !h.is_empty());
    let duration = obj::i(lease, &["spec", "leaseDurationSeconds"])
        .map(|d| d as f64)
        .unwrap_or(le.lease_duration_secs);
    let renewed = obj::s(lease, &["spec", "renewTime"])
        .or_else(|| obj::s(lease, &["spec", "acquireTime"]))
        .and_then(obj::parse_time);
    let expires = renewed.and_then(|r| add(r, duration));
    t.holder = holder.map(String::from);
    t.renewed_at = renewed;
    t.expires_at = expires;
    let host = holder.map(|h| h.split('_').next().unwrap_or(h));
    let ours = host.is_some_and(|h| {
        if own.is_empty() {
            pod_of(dname, h)
        } else {
            own.iter().any(|p| obj::name(p) == h)
        }
    });
    let valid = expires.is_some_and(|e| e > now);
    let fresh = renewed.is_some_and(|r| now.duration_since(r).as_secs_f64() <= 3.0 * retry);
    let hm = |t: Timestamp| cluster_loop::duration::short_time(t);
    match (holder, valid) {
        (Some(_), true) if ours => None,
        (Some(h), true) if fresh => {
            t.keeps_renewing = true;
            t.why = format!(
                "{who} is not the leader: Lease {lease_ref} is held by {h} (not a pod of deployment {ns}/{dname}), renewed at {} (every {retry}s) until {}, and it keeps renewing: another {controller} with the same Lease (the same --watch-label-selector in {ns}, e.g. a second install) leads, and nothing here reconciles while it runs",
                renewed.map(hm).unwrap_or_default(),
                expires.map(hm).unwrap_or_default(),
            );
            Some(t)
        }
        (Some(h), true) => {
            let e = expires?;
            t.until = add(e, 2.0 * JITTER * retry);
            t.why = format!(
                "{who} is not the leader yet: Lease {lease_ref} is held by {h}, which stopped renewing at {}; it expires at {} and the pod takes it between then and {} (a candidate tries every {retry}s to {}s)",
                renewed.map(hm).unwrap_or_default(),
                hm(e),
                t.until.map(hm).unwrap_or_default(),
                JITTER * retry
            );
            Some(t)
        }
        _ => {
            // Free: released (empty holder; the release writes renewTime) or expired.
            let since = match holder {
                None => renewed,
                Some(_) => expires,
            };
            let what = match (holder, since) {
                (None, Some(s)) => format!("was released at {}", hm(s)),
                (None, None) => "has no holder".to_string(),
                (Some(h), Some(s)) => format!("held by {h} expired at {}", hm(s)),
                (Some(h), None) => format!("held by {h} has no renew time"),
            };
            match since {
                Some(s) if now.duration_since(s).as_secs_f64() <= 3.0 * JITTER * retry => {
                    t.until = add(s, JITTER * retry).map(|u| u.max(now));
                    t.why = format!(
                        "{who} is not the leader yet: Lease {lease_ref} {what}, and a candidate takes a free Lease at its next try (every {retry}s to {}s), by {}",
                        JITTER * retry,
                        t.until.map(hm).unwrap_or_default()
                    );
                }
                _ => {
                    t.why = format!(
                        "no {controller} process leads: Lease {lease_ref} {what}{} and no process has taken it (a candidate takes a free Lease within {}s): its pod does not run for this Lease (check its --enable-leader-election, --watch-label-selector and whether it may update Leases in {ns})",
                        since
                            .map(|s| format!(
                                ", {} ago,",
                                obj::human_secs(now.duration_since(s).as_secs())
                            ))
                            .unwrap_or_default(),
                        JITTER * retry,
                    );
                }
            }
            Some(t)
        }
    }
}

/// Whether host name `h` has the shape of a pod of Deployment `d`: `<d>-<pod-template-hash>-
/// <5 characters>` (the ReplicaSet's generated name plus the pod's suffix).
fn pod_of(d: &str, h: &str) -> bool {
    let Some(rest) = h.strip_prefix(d).and_then(|r| r.strip_prefix('-')) else {
        return false;
    };
    let parts: Vec<&str> = rest.split('-').collect();
    let alnum = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    parts.len() == 2 && alnum(parts[0]) && parts[1].len() == 5 && alnum(parts[1])
}

/// The pods of `deployment` (its namespace and `spec.selector.matchLabels`) among `pods`, not
/// being deleted.
fn own_pods<'p>(deployment: &Value, pods: &'p [Value]) -> Vec<&'p Value> {
    let ns = obj::namespace(deployment);
    let Some(sel) = obj::at(deployment, &["spec", "selector", "matchLabels"])
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    else {
        return Vec::new();
    };
    pods.iter()
        .filter(|p| {
            obj::namespace(p) == ns
                && obj::at(p, &["metadata", "deletionTimestamp"]).is_none()
                && sel
                    .iter()
                    .all(|(k, v)| obj::at(p, &["metadata", "labels", k]) == Some(v))
        })
        .collect()
}

fn secs(s: f64) -> jiff::SignedDuration {
    jiff::SignedDuration::from_secs_f64(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_follow_generate_id() {
        assert_eq!(
            lease_name("kustomize-controller", ""),
            "kustomize-controller-leader-election"
        );
        let n = lease_name("kustomize-controller", "!sharding.fluxcd.io/key");
        assert!(
            n.starts_with("kustomize-controller-leader-election-"),
            "{n}"
        );
        assert_eq!(n.len(), "kustomize-controller-leader-election-".len() + 8);
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            LeaderElection::from_args("kc", &a(&["--enable-leader-election=false"]), ""),
            None
        );
        let le = LeaderElection::from_args(
            "kc",
            &a(&[
                "--enable-leader-election",
                "--leader-election-lease-duration=15s",
                "--leader-election-retry-period=2s",
            ]),
            "",
        )
        .unwrap();
        assert_eq!(le.lease, "kc-leader-election");
        assert_eq!((le.lease_duration_secs, le.retry_period_secs), (15.0, 2.0));
        assert!(pod_of(
            "kustomize-controller",
            "kustomize-controller-7d9c5b-x2b4q"
        ));
        assert!(!pod_of(
            "kustomize-controller",
            "kustomize-controller-b-7d9c5-x2b4q"
        ));
        assert!(!pod_of("kustomize-controller", "other-7d9c5-x2b4q"));
    }

    fn deploy() -> Value {
        serde_json::json!({"metadata": {"name": "kustomize-controller", "namespace": "flux-system"},
            "spec": {"selector": {"matchLabels": {"app": "kustomize-controller"}}}})
    }

    fn le() -> LeaderElection {
        LeaderElection {
            lease: "kustomize-controller-leader-election".into(),
            lease_duration_secs: 35.0,
            retry_period_secs: 5.0,
        }
    }

    fn lease(holder: &str, renewed: &str, duration: i64) -> Value {
        serde_json::json!({"spec": {"holderIdentity": holder, "renewTime": renewed,
            "leaseDurationSeconds": duration}})
    }

    fn pod(name: &str, ready: bool) -> Value {
        serde_json::json!({"metadata": {"name": name, "namespace": "flux-system",
                "labels": {"app": "kustomize-controller"}},
            "status": {"containerStatuses": [{"name": "manager", "ready": ready}]}})
    }

    fn at(t: &str) -> Timestamp {
        t.parse().unwrap()
    }

    /// Each case of [`leader_trouble`], at 00:01:00 with the default 35s/5s.
    #[test]
    fn leadership_cases() {
        let now = at("2026-12-04T00:01:00Z");
        let d = deploy();
        let mine = pod("kustomize-controller-6b8f9c-abcde", true);
        let judge = |l: Option<&Value>, pods: &[Value]| {
            leader_trouble("kustomize-controller", &d, &le(), l, pods, now)
        };
        // Our pod holds it and renews: nothing (with its pods read, and by name shape only).
        let ours = lease(
            "kustomize-controller-6b8f9c-abcde_1f2e",
            "2026-12-04T00:00:58.5Z",
            35,
        );
        assert_eq!(judge(Some(&ours), std::slice::from_ref(&mine)), None);
        assert_eq!(judge(Some(&ours), &[]), None);
        // Another identity that keeps renewing: a finding naming the pod, holder and Lease.
        let other = lease(
            "kustomize-controller-b-5d8f-q2x7z_9a",
            "2026-12-04T00:00:57Z",
            35,
        );
        let t = judge(Some(&other), std::slice::from_ref(&mine)).unwrap();
        assert!(t.keeps_renewing && t.until.is_none());
        assert!(
            t.why.starts_with("kustomize-controller's pod kustomize-controller-6b8f9c-abcde is not the leader: Lease flux-system/kustomize-controller-leader-election is held by kustomize-controller-b-5d8f-q2x7z_9a"),
            "{}",
            t.why
        );
        assert!(t.why.contains("until 00:01:32Z"), "{}", t.why);
        assert_eq!(
            t.command("flux-system", "kustomize-controller"),
            "kubectl -n flux-system get lease kustomize-controller-leader-election -o yaml"
        );
        // The same holder gone (no renewal for 20s): a wait, taken between the expiry and two
        // jittered retry periods later.
        let gone = lease(
            "kustomize-controller-b-5d8f-q2x7z_9a",
            "2026-12-04T00:00:40Z",
            35,
        );
        let t = judge(Some(&gone), std::slice::from_ref(&mine)).unwrap();
        assert!(!t.keeps_renewing);
        assert_eq!(t.until, Some(at("2026-12-04T00:01:37Z")));
        assert!(
            t.why.contains(
                "stopped renewing at 00:00:40Z; it expires at 00:01:15Z and the pod takes it between then and 00:01:37Z"
            ),
            "{}",
            t.why
        );
        // Our own pod's name but an old process, expired long ago: nobody takes it.
        let stale = lease(
            "kustomize-controller-6b8f9c-abcde_old",
            "2026-12-03T23:59:45Z",
            35,
        );
        let t = judge(Some(&stale), std::slice::from_ref(&mine)).unwrap();
        assert_eq!(t.until, None);
        assert!(t.why.starts_with("no kustomize-controller process leads: Lease flux-system/kustomize-controller-leader-election held by kustomize-controller-6b8f9c-abcde_old expired at 00:00:20Z, 40s ago, and no process has taken it"), "{}", t.why);
        assert_eq!(
            t.command("flux-system", "kustomize-controller"),
            "kubectl -n flux-system logs deployment/kustomize-controller -c manager"
        );
        // Released just now (empty holder): taken at the next jittered try.
        let released = lease("", "2026-12-04T00:00:58Z", 1);
        let t = judge(Some(&released), std::slice::from_ref(&mine)).unwrap();
        assert_eq!(t.until, Some(at("2026-12-04T00:01:09Z")));
        assert!(t.why.contains("was released at 00:00:58Z"), "{}", t.why);
        // No Lease at all: a finding.
        let t = judge(None, std::slice::from_ref(&mine)).unwrap();
        assert!(t.until.is_none() && !t.keeps_renewing);
        assert!(
            t.why
                .contains("no Lease flux-system/kustomize-controller-leader-election exists"),
            "{}",
            t.why
        );
        // A holder of our name shape that is not one of the pods read is not ours.
        let lookalike = lease(
            "kustomize-controller-7f7f7f-zzzzz_1",
            "2026-12-04T00:00:59Z",
            35,
        );
        assert!(judge(Some(&lookalike), std::slice::from_ref(&mine)).is_some());
        assert!(judge(Some(&lookalike), &[]).is_none());
    }
}
