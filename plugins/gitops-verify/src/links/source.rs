//! Link 1, the source: each source the in-scope Kustomizations read (or `--source`) exists,
//! is not suspended, is Ready, and its artifact revision is the remote's branch head.
//!
//! The Ready reading is source-controller's (api/v1 conditions: `Ready`, `Reconciling`,
//! `Stalled`, and the negative-polarity `FetchFailed` that stays True across a retry). The
//! remote's head is `git ls-remote URL refs/heads/BRANCH` with the credentials Flux holds
//! (the GitRepository's `spec.secretRef`, read as source-controller reads it: cutover's
//! `read_credentials` and `GitRunner`):
//! - by default from this workstation: it proves which commit the remote has, not that the
//!   pod plane reaches it (the evidence says so);
//! - with `--probe-source`, from a pod in the GitRepository's namespace (cutover's in-cluster
//!   preflight: DNS, TLS with the CA Flux holds, authentication, the head), which is what
//!   source-controller's own fetch needs. It creates one Job per source and pulls a git
//!   image, so it is a flag, not the default: seconds to minutes, and `create jobs` RBAC in
//!   a run that otherwise only reads.
//!   A `spec.url` on the loopback (`localhost`, `127.0.0.1`, `[::1]`) is not probed: in a
//!   pod it is the pod itself, so the probe would prove nothing. source-controller reaches
//!   such a URL only when it shares the server's network, and a Ready source says it did; the
//!   head is read from this workstation and the evidence says so.
//!
//! A head ahead of the artifact is `waiting` (source-controller fetches it at its next
//! interval run: the deadline is now + `spec.interval` + `spec.timeout`) and marks the link
//! moving ([`LinkReport::moving`]), as does a source not Ready yet (a fetch in progress,
//! Ready=Unknown: it may bring a new revision). Only a branch is compared: a source pinned to a tag,
//! semver range or commit follows no head, and OCIRepository and Bucket heads are not read
//! (the evidence says so).

use std::time::Duration;

use cluster_loop::conditions::{self, Condition};
use cluster_loop::error::Result;
use cluster_loop::probe::{GitSecret, ProbeOwner};
use futures::future::BoxFuture;
use jiff::Timestamp;
use serde_json::Value;
use unstick::obj;

use super::{Context, Link};
use crate::chain::{Evidence, LinkReport, Verdict};

/// Link 1.
pub struct SourceLink;

impl Link for SourceLink {
    fn position(&self) -> u8 {
        1
    }

    fn id(&self) -> &'static str {
        "source"
    }

    fn check<'a>(&'a self, cx: &'a Context<'a>) -> BoxFuture<'a, Result<LinkReport>> {
        Box::pin(async move {
            let mut members = Vec::new();
            let mut moving = false;
            let mut moving_only: Vec<String> = Vec::new();
            for (kind, ns, name, o) in &cx.facts.sources {
                let (e, behind) = one(cx, kind, ns, name, o.as_ref()).await?;
                if behind {
                    moving = true;
                    // What this source moves: the Kustomizations that read it (trial4: one
                    // source behind held every host in scope, also hosts it never touches).
                    moving_only.extend(
                        cx.facts
                            .readers_of(kind, ns, name)
                            .into_iter()
                            .map(unstick::diagnose::key_of),
                    );
                }
                members.push(e);
            }
            let mut l = LinkReport::from_members(
                1,
                "source",
                members,
                "no Kustomization in scope, so no source to check (pass --source or -n)",
            );
            // A source behind that no in-scope Kustomization reads moves nothing downstream.
            l.moving = moving && !moving_only.is_empty();
            l.moving_only = moving_only;
            Ok(l)
        })
    }

    fn watches(&self) -> Vec<kube::api::ApiResource> {
        ["GitRepository", "OCIRepository", "Bucket"]
            .into_iter()
            .filter_map(|k| unstick::live::api_resource("source.toolkit.fluxcd.io", k))
            .collect()
    }
}

/// `spec.interval` + `spec.timeout` (source-controller's defaults: timeout 60s) from `now`:
/// when the next fetch has ended at the latest.
pub(crate) fn next_fetch(src: &Value, now: Timestamp) -> Option<Timestamp> {
    let d = |p: &str, default: Duration| {
        obj::s(src, &["spec", p])
            .and_then(|s| cluster_loop::duration::parse_go_duration(s).ok())
            .unwrap_or(default)
    };
    let secs = d("interval", Duration::from_secs(600)) + d("timeout", Duration::from_secs(60));
    now.checked_add(jiff::SignedDuration::try_from(secs).ok()?)
        .ok()
}

fn cond<'c>(cs: &'c [Condition], t: &str) -> Option<&'c Condition> {
    conditions::find(cs, t)
}

/// One source's member and whether it is behind its remote.
async fn one(
    cx: &Context<'_>,
    kind: &str,
    ns: &str,
    name: &str,
    o: Option<&Value>,
) -> Result<(Evidence, bool)> {
    let id = format!("{kind}/{ns}/{name}");
    let flux_kind = match kind {
        "GitRepository" => "git",
        "OCIRepository" => "oci",
        "Bucket" => "bucket",
        _ => "",
    };
    let Some(src) = o else {
        return Ok((
            Evidence::new(
                &id,
                Verdict::Broken,
                "not found: the Kustomizations reading it cannot fetch anything",
            )
            .fix(format!(
                "create it, or fix spec.sourceRef; list what exists: kubectl get {} -A",
                kind.to_lowercase()
            )),
            false,
        ));
    };
    if obj::b(src, &["spec", "suspend"]) {
        return Ok((
            Evidence::new(
                &id,
                Verdict::Broken,
                "suspended: source-controller fetches no new commit",
            )
            .fix(format!("flux resume source {flux_kind} {name} -n {ns}")),
            false,
        ));
    }
    if let Some(e) = controller_stopped(cx, &id) {
        return Ok((e, false));
    }
    if let Some(e) = not_watched(cx, src, &id) {
        return Ok((e, false));
    }
    if let Some(e) = not_leading(cx, &id) {
        return Ok((e, false));
    }
    let cs = conditions::from_object(src);
    if let Some(c) = cond(&cs, "Stalled").filter(|c| c.is_true()) {
        return Ok((
            Evidence::new(
                &id,
                Verdict::Broken,
                format!("Stalled ({}): {}", c.reason(), c.message()),
            )
            .fix("fix the spec: source-controller does not retry a stalled source"),
            false,
        ));
    }
    let ready = cond(&cs, "Ready");
    if let Some(c) = ready
        .filter(|c| c.is_false())
        .or(cond(&cs, "FetchFailed").filter(|c| c.is_true()))
    {
        let said = format!("{} ({}): {}", c.type_, c.reason(), c.message());
        let refetch = format!("flux reconcile source {flux_kind} {name} -n {ns}");
        if kind == "GitRepository" && cluster_loop::gitauth::is_auth_refused(c.message()) {
            // The Git server's 401: the Secret, its key and the rotation (the one rule,
            // shared with kubectl unstick), never a bare refetch that fails the same way.
            let secret = obj::s(src, &["spec", "secretRef", "name"]);
            let keys = secret.and_then(|n| cx.facts.snap.secret_keys.get(&format!("{ns}/{n}")));
            let r = cluster_loop::gitauth::refused(
                secret.map(|n| (ns, n)),
                keys.map(Vec::as_slice),
                &refetch,
            );
            return Ok((
                Evidence::new(&id, Verdict::Broken, format!("{said}: {}", r.why)).fix(r.fix),
                false,
            ));
        }
        return Ok((
            Evidence::new(&id, Verdict::Broken, said).fix(format!(
                "kubectl describe {}/{name} -n {ns}; then {refetch}",
                kind.to_lowercase()
            )),
            false,
        ));
    }
    let revision = obj::s(src, &["status", "artifact", "revision"]);
    let (Some(revision), true) = (revision, ready.is_some_and(Condition::is_true)) else {
        let why = ready
            .map(|c| format!("{} ({})", c.message(), c.reason()))
            .unwrap_or_else(|| "no Ready condition yet".into());
        return Ok((
            Evidence::new(&id, Verdict::Waiting, format!("not Ready yet: {why}"))
                .until(next_fetch(src, cx.facts.now)),
            // A fetch in progress may bring a new revision: what is below may be replaced.
            true,
        ));
    };
    if kind != "GitRepository" {
        return Ok((
            Evidence::new(
                &id,
                Verdict::Ok,
                format!(
                    "Ready at {revision} (the {kind}'s newest artifact upstream is not compared)"
                ),
            ),
            false,
        ));
    }
    let Some(branch) = cluster_loop::flux::git_branch(src) else {
        return Ok((
            Evidence::new(
                &id,
                Verdict::Ok,
                format!(
                    "Ready at {revision}; pinned by spec.ref to a tag, semver range or commit, so no branch head to compare"
                ),
            ),
            false,
        ));
    };
    let (_, commit) = cutover::preflight::split_revision(revision);
    let loopback = loopback_url(src);
    let seen = if let (true, Some(lo)) = (cx.session.opts.probe_source, &loopback) {
        // A pod's loopback is the pod itself: a probe there proves nothing about how
        // source-controller reached this URL. Ready at a revision says it did, so it shares
        // the server's network (hostNetwork, or a controller run on the host).
        from_workstation(cx, src, ns, &branch)
            .await?
            .map(|(head, _)| {
                (
                    head,
                    format!(
                        "seen from this workstation, not from a pod: {lo}, and in a pod the \
                     loopback is the pod itself; source-controller reaches it only when it \
                     shares the server's network (hostNetwork, or run on the host), and its \
                     Ready says it does"
                    ),
                )
            })
    } else if cx.session.opts.probe_source {
        from_pod(cx, src, ns, &branch, &commit).await?
    } else {
        from_workstation(cx, src, ns, &branch).await?
    };
    Ok(judge_head(cx, src, &id, revision, &branch, &commit, seen))
}

/// Why `spec.url`'s host is the loopback wherever it is resolved (`localhost`, a loopback or
/// unspecified literal: cutover's [`cutover::incluster::loopback_fact`] without a DNS answer),
/// or `None`.
fn loopback_url(src: &Value) -> Option<String> {
    cutover::incluster::url_loopback_fact(obj::s(src, &["spec", "url"])?)
}

/// source-controller not running (unstick's read of its Deployment, beside
/// kustomize-controller: 0 replicas, or no ready pod, with the pod's reason): nothing fetches,
/// so a source behind its remote stays behind and its conditions are what it last wrote:
/// `broken` with the lever (as `kubectl unstick` says `controller-not-running`). Not judged
/// when the Deployment was not found or not readable.
fn controller_stopped(cx: &Context<'_>, id: &str) -> Option<Evidence> {
    let snap = &cx.facts.snap;
    let dep = snap.source_controller.as_ref()?;
    let (why, pod) = unstick::controller::not_running_with_pods(
        dep,
        &snap.controller_pods,
        &snap.controller_logs,
    )?;
    let (ns, name) = (obj::namespace(dep), obj::name(dep));
    let pod_why = pod
        .map(|p| format!("; pod {} {}", p.pod, p.reason))
        .unwrap_or_default();
    let fix = if why == "0 replicas" {
        format!("kubectl -n {ns} scale deployment/{name} --replicas=1")
    } else {
        format!(
            "kubectl -n {ns} describe deployment/{name}; kubectl -n {ns} logs deployment/{name}"
        )
    };
    Some(
        Evidence::new(
            id,
            Verdict::Broken,
            format!(
                "Deployment/{ns}/{name} is not running ({why}{pod_why}): nothing fetches, so no new commit reaches this source and its status is what it last wrote"
            ),
        )
        .fix(fix),
    )
}

/// No running source-controller watches the source (its `--watch-label-selector` or namespace
/// scope excludes it: unstick's [`unstick::diagnose::source_not_watched`], the one rule): it
/// never gets a status or a new artifact, so nothing will come to wait for. `broken`, with the
/// command that lifts it when one does (a stopped shard's scale), else the label to set.
fn not_watched(cx: &Context<'_>, src: &Value, id: &str) -> Option<Evidence> {
    let b = unstick::diagnose::source_not_watched(&cx.facts.snap, src)?;
    let fix = b.command.clone().unwrap_or_else(|| {
        "label it for a running source-controller's --watch-label-selector (or run the shard that would watch it)"
            .into()
    });
    Some(
        Evidence::new(
            id,
            Verdict::Broken,
            format!(
                "no running source-controller watches it, so nothing fetches it: {}",
                b.because
            ),
        )
        .fix(fix),
    )
}

/// source-controller runs but its ready pod does not lead (leader election on, the Lease held
/// by another identity: unstick's [`unstick::controller::ControllerFacts::read_leadership`],
/// the one rule): nothing fetches while another identity keeps renewing the Lease (`broken`,
/// naming the Lease and its holder); a holder that stopped renewing is `waiting` until the
/// ready pod can take it.
fn not_leading(cx: &Context<'_>, id: &str) -> Option<Evidence> {
    let snap = &cx.facts.snap;
    let dep = snap.source_controller.as_ref()?;
    let mut f = unstick::controller::ControllerFacts::with_pods(
        dep,
        &snap.controller_pods,
        &snap.controller_logs,
    );
    f.read_leadership(dep, &snap.leases, &snap.controller_pods, snap.now);
    let t = f.leader?;
    let (ns, lease) = t.lease.split_once('/').unwrap_or(("", &t.lease));
    Some(match t.until {
        Some(until) => Evidence::new(id, Verdict::Waiting, t.why).until(Some(until)),
        None => Evidence::new(id, Verdict::Broken, t.why).fix(format!(
            "kubectl -n {ns} get lease {lease} -o yaml names the holder: stop the other source-controller that holds it, or give each install its own shard (--watch-label-selector)"
        )),
    })
}

/// What the remote said: `Ok((head, where))` or `Err((verdict, message, fix))`.
type Seen = std::result::Result<(String, String), (Verdict, String, String)>;

fn judge_head(
    cx: &Context<'_>,
    src: &Value,
    id: &str,
    revision: &str,
    branch: &str,
    commit: &str,
    seen: Seen,
) -> (Evidence, bool) {
    let short = |s: &str| s.chars().take(12).collect::<String>();
    match seen {
        Ok((head, from)) if head == commit => (
            Evidence::new(
                id,
                Verdict::Ok,
                format!("Ready at {revision} == the remote's {branch} head ({from})"),
            ),
            false,
        ),
        Ok((head, from)) => {
            let by = next_fetch(src, cx.facts.now);
            (
                Evidence::new(
                    id,
                    Verdict::Waiting,
                    format!(
                        "behind the remote: the artifact is {} but {branch} is at {} ({from}); source-controller fetches it at its next interval run",
                        short(commit),
                        short(&head)
                    ),
                )
                .until(by),
                true,
            )
        }
        Err((v, message, fix)) => (
            Evidence::new(id, v, format!("Ready at {revision}, but {message}")).fix(fix),
            false,
        ),
    }
}

/// The GitRepository's credentials, or `None` without `spec.secretRef`. Errors: the Secret
/// cannot be read (403, 404) as a member message.
async fn credentials(
    cx: &Context<'_>,
    src: &Value,
    ns: &str,
) -> std::result::Result<Option<(String, cutover::git::GitCredentials)>, String> {
    let Some(secret) = obj::s(src, &["spec", "secretRef", "name"]) else {
        return Ok(None);
    };
    cx.session.count(1);
    cutover::preflight::read_credentials(&cx.session.conn, ns, secret)
        .await
        .map(|c| Some((secret.to_string(), c)))
        .map_err(|e| format!("secret {ns}/{secret} could not be read: {e}"))
}

async fn from_workstation(cx: &Context<'_>, src: &Value, ns: &str, branch: &str) -> Result<Seen> {
    let url = obj::s(src, &["spec", "url"])
        .unwrap_or_default()
        .to_string();
    let creds = match credentials(cx, src, ns).await {
        Ok(c) => c.map(|(_, c)| c).unwrap_or_default(),
        Err(m) => {
            return Ok(Err((
                Verdict::Unknown,
                format!("the remote head was not read: {m}"),
                "grant get on that Secret, or pass --probe-source".into(),
            )));
        }
    };
    let head = cutover::git::remote_head_here(creds, &url, branch).await;
    Ok(match head {
        Ok(h) => Ok((
            h,
            "seen from this workstation; --probe-source proves the pod plane reaches it".into(),
        )),
        Err(f) => Err((
            Verdict::Unknown,
            format!(
                "this workstation cannot read the remote's head: {}",
                f.explain(&url, None)
            ),
            "pass --probe-source to read it from a pod, as source-controller does".into(),
        )),
    })
}

async fn from_pod(
    cx: &Context<'_>,
    src: &Value,
    ns: &str,
    branch: &str,
    commit: &str,
) -> Result<Seen> {
    let url = obj::s(src, &["spec", "url"])
        .unwrap_or_default()
        .to_string();
    let secret = match credentials(cx, src, ns).await {
        Ok(c) => c.map(|(name, c)| GitSecret { name, keys: c.keys }),
        Err(m) => {
            return Ok(Err((
                Verdict::Unknown,
                format!("the probe was not started: {m}"),
                "grant get on that Secret".into(),
            )));
        }
    };
    let v = cutover::incluster::Verify {
        namespace: ns.to_string(),
        url,
        branch: branch.to_string(),
        commit: commit.to_string(),
        secret,
        image: cx.session.opts.probe_image.clone(),
        timeout: cx.session.opts.probe_timeout,
        owner: ProbeOwner::GITOPS_VERIFY,
    };
    let guard = cx.probes.read().await;
    let progress = cluster_loop::wait::Progress::hidden();
    let mut signals = cluster_loop::signals::Signals::install();
    let probed = cutover::incluster::verify(&cx.session.conn, &v, &progress, &mut signals).await?;
    drop(guard);
    Ok(match probed {
        None => Err((
            Verdict::Unknown,
            "interrupted; the probe Job was deleted".into(),
            String::new(),
        )),
        Some((ic, verdict)) => {
            cx.session.count(ic.api_requests as usize);
            let from = format!(
                "seen from pod {}",
                ic.pod.clone().unwrap_or(ic.probe.clone())
            );
            match (verdict, ic.head) {
                (Ok(_), Some(h)) => Ok((h, from)),
                (Err(_), Some(h)) if ic.matches_cluster == Some(false) => Ok((h, from)),
                (Ok(m) | Err(m), _) => Err((
                    Verdict::Broken,
                    format!("from the pod plane: {m}"),
                    format!(
                        "kubectl podresolve {} -n {ns} explains the pod's DNS answer",
                        ic.host
                    ),
                )),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn next_fetch_is_interval_plus_timeout() {
        let now: Timestamp = "2026-12-03T18:00:00Z".parse().unwrap();
        let src = json!({"spec": {"interval": "5m", "timeout": "30s"}});
        assert_eq!(
            next_fetch(&src, now).unwrap().to_string(),
            "2026-12-03T18:05:30Z"
        );
        // Defaults: timeout 60s.
        let src = json!({"spec": {"interval": "1m"}});
        assert_eq!(
            next_fetch(&src, now).unwrap().to_string(),
            "2026-12-03T18:02:00Z"
        );
    }
}
