//! Link 4, the images: each ImagePolicy's `status.latestRef` against the images the
//! in-scope workloads run (their pod templates), and any image that is a bare tag.
//!
//! Image names are compared as go-containerregistry normalises them and policies are matched
//! to automations by markercheck's engine (`normalize_name`, `value_name`,
//! `automation_policies`: the automation's namespace and `spec.policySelector`). Per policy:
//! - no workload in scope runs its image: `not-applicable` for that policy;
//! - every container running it runs the latestRef tag (and digest, when the policy reflects
//!   one): `ok`;
//! - an older tag: what image-automation-controller v1 records decides. No automation selects
//!   the policy, or all that do are suspended: `broken`. The automation has not yet run with
//!   this latestRef (`status.observedPolicies[policy]` differs): `waiting` "automation has not
//!   committed yet", until its last run + `spec.interval`. It has: its `lastPushCommit` not yet
//!   the source's artifact, or the Kustomizations link not yet ok, is `waiting` (the commit is
//!   on its way); else `broken`: the automation saw the tag and nothing it writes changes
//!   this image, i.e. no marker for it under `spec.update.path` (markercheck simulates it on
//!   the repository).
//!
//! Controller liveness decides first (as `kubectl unstick` does for kustomize-, source- and
//! helm-controller: `cluster_loop::flux::deployment_not_running` with the pod that says why,
//! unstick's `StoppedController`): with an ImagePolicy whose image an in-scope workload runs
//! and the image-reflector-controller Deployment (`FLUX_NS/image-reflector-controller`) not
//! installed, at 0 replicas or with no ready pod, nothing will ever write a latestRef: the link
//! is `broken` naming the Deployment, and a policy with no latestRef is `broken`, not
//! `waiting`. The same for image-automation-controller with such a policy and an
//! ImageUpdateAutomation that is not suspended: a container waiting on the automation's commit
//! is `broken`. One Deployment GET each, plus its Pods when it has no ready pod.
//!
//! Each in-scope ImageUpdateAutomation (every one read; with `--source`, those pushing to it)
//! and each ImageRepository of a policy that matters here (one an in-scope workload runs or
//! an in-scope automation selects) is a member of its own, judged from its conditions
//! ([`super::automation`]): a refused automation (a removed template field, a failed push, an
//! auth error) or a failed scan is `broken` with the controller's message and the fix, one
//! that has not run yet is `waiting`. A container behind its latestRef whose every automation
//! is refused is `broken` too (nothing will commit it), not `waiting`.
//!
//! A container image that is a bare tag (`image: 6.5.1`, markercheck's
//! `looks_like_bare_tag`) is `broken` whatever the policies: the node cannot pull it, and it
//! is what a `:tag` marker on an `image:` field writes (failure catalogue section 2).

use cluster_loop::error::Result;
use cluster_loop::flux::StoppedController;
use cluster_loop::flux::{ImagePolicy, ImageUpdateAutomation};
use cluster_loop::refs::Kind;
use futures::future::BoxFuture;
use jiff::SignedDuration;
use kube::Api;
use kube::api::ListParams;
use markercheck::check::{automation_policies, normalize_name, value_name};
use markercheck::cluster::{automation_from_api, policy_from_api};
use serde_json::Value;
use unstick::obj;

use super::{Context, Link, automation};
use crate::chain::{Evidence, LinkReport, Verdict};

/// Link 4.
pub struct ImagesLink;

impl Link for ImagesLink {
    fn position(&self) -> u8 {
        4
    }

    fn id(&self) -> &'static str {
        "images"
    }

    fn check<'a>(&'a self, cx: &'a Context<'a>) -> BoxFuture<'a, Result<LinkReport>> {
        Box::pin(async move {
            let Some((policies, automations, repositories)) = read(cx).await? else {
                return Ok(LinkReport::not_applicable(
                    4,
                    "images",
                    "image automation is not installed (ImagePolicy is not served)",
                ));
            };
            let containers = containers(&cx.facts.workloads);
            let mut members = bare_tags(&containers, &policies);
            // The automations that write to this chain's sources, and the ImageRepositories
            // of the policies that matter to it: those an in-scope workload runs, and those
            // an in-scope automation selects.
            let in_scope: Vec<&ImageUpdateAutomation> = automations
                .iter()
                .filter(|a| automation_in_scope(cx, a))
                .collect();
            let converted: Vec<_> = policies.iter().map(policy_from_api).collect();
            let selected: Vec<String> = in_scope
                .iter()
                .flat_map(|a| automation_policies(&automation_from_api(a), &converted))
                .map(|p| format!("{}/{}", p.namespace, p.name))
                .collect();
            let matters = |p: &ImagePolicy| {
                !runners(p, &repositories, &containers).1.is_empty()
                    || selected.contains(&format!(
                        "{}/{}",
                        p.metadata.namespace.as_deref().unwrap_or_default(),
                        p.metadata.name.as_deref().unwrap_or_default()
                    ))
            };
            let scanned: Vec<&cluster_loop::flux::ImageRepository> = repositories
                .iter()
                .filter(|r| policies.iter().any(|p| matters(p) && refers_to(p, r)))
                .collect();
            // The controllers matter only to a policy whose image an in-scope workload runs
            // or that an in-scope automation selects (every other policy is not-applicable
            // to this chain).
            let relevant = policies.iter().any(matters);
            let stopped = Stopped {
                reflector: match relevant {
                    false => None,
                    true => stopped_controller(cx, REFLECTOR).await?,
                },
                automation: match relevant && automations.iter().any(|a| !a.spec.suspend) {
                    false => None,
                    true => stopped_controller(cx, AUTOMATION).await?,
                },
            };
            members.extend(stopped.members());
            // A stopped controller writes no status: its objects' conditions are the last it
            // wrote, so they are judged only while it runs (its Deployment's member says why
            // they will not move).
            if stopped.automation.is_none() {
                members.extend(
                    in_scope
                        .iter()
                        .map(|a| automation::automation_member(a, cx.facts.now)),
                );
            }
            if stopped.reflector.is_none() {
                members.extend(
                    scanned
                        .iter()
                        .map(|r| automation::repository_member(r, cx.facts.now)),
                );
            }
            for p in &policies {
                members.extend(policy_members(
                    cx,
                    p,
                    &automations,
                    &repositories,
                    &containers,
                    &stopped,
                ));
            }
            for e in &mut members {
                e.applied_by = appliers(cx, &containers, &e.object);
            }
            Ok(LinkReport::from_members(
                4,
                "images",
                members,
                "no ImagePolicy in scope and no bare-tag image",
            ))
        })
    }

    fn watches(&self) -> Vec<kube::api::ApiResource> {
        vec![
            kube::api::ApiResource::erase::<ImagePolicy>(&()),
            kube::api::ApiResource::erase::<ImageUpdateAutomation>(&()),
            kube::api::ApiResource::erase::<cluster_loop::flux::ImageRepository>(&()),
        ]
    }
}

/// Whether automation `a` is in scope: every automation read (the session's namespace, or
/// all) without `--source`; with `--source GitRepository/NAME`, those that push to it.
fn automation_in_scope(cx: &Context<'_>, a: &ImageUpdateAutomation) -> bool {
    let Some((kind, name)) = &cx.session.opts.source else {
        return true;
    };
    let ns = a.metadata.namespace.as_deref().unwrap_or_default();
    let src_ns = a
        .spec
        .source_ref
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(ns);
    let src_kind = match a.spec.source_ref.kind.as_str() {
        "" => "GitRepository",
        k => k,
    };
    src_kind == kind.as_str()
        && &a.spec.source_ref.name == name
        && cx.session.namespace.as_deref().is_none_or(|n| n == src_ns)
}

/// Whether policy `p` reads ImageRepository `r` (`spec.imageRepositoryRef`, namespace
/// defaulting to the policy's).
fn refers_to(p: &ImagePolicy, r: &cluster_loop::flux::ImageRepository) -> bool {
    let pns = p.metadata.namespace.as_deref().unwrap_or_default();
    let rf = &p.spec.image_repository_ref;
    let rns = rf
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(pns);
    r.metadata.name.as_deref() == Some(rf.name.as_str())
        && r.metadata.namespace.as_deref() == Some(rns)
}

/// The Deployment that writes ImagePolicies' latestRef, and what stops when it does not run.
const REFLECTOR: (&str, &str) = (
    "image-reflector-controller",
    "nothing scans the ImageRepositories or selects a latestRef for the ImagePolicies",
);
/// The Deployment that commits latestRefs to Git, and what stops when it does not run.
const AUTOMATION: (&str, &str) = (
    "image-automation-controller",
    "nothing runs the ImageUpdateAutomations or commits a new latestRef to Git",
);
/// How `flux install` adds both image controllers (flux2 docs, image automation guide).
const INSTALL: &str =
    "flux install --components-extra=image-reflector-controller,image-automation-controller";

/// The image controllers that are not running (`None`: running, or not read because nothing
/// needs them).
#[derive(Debug, Default)]
struct Stopped {
    reflector: Option<StoppedController>,
    automation: Option<StoppedController>,
}

impl Stopped {
    /// One `broken` member per stopped controller: `Deployment/NS/NAME`, why, what stops,
    /// and its lever.
    fn members(&self) -> Vec<Evidence> {
        [&self.reflector, &self.automation]
            .into_iter()
            .flatten()
            .map(|s| {
                Evidence::new(
                    format!("Deployment/{}/{}", s.namespace, s.controller),
                    Verdict::Broken,
                    s.line(),
                )
                .fix(s.effect())
            })
            .collect()
    }
}

/// Whether controller `(name, consequence)` runs in the Flux namespace, from its Deployment
/// (`None`: not installed) and the pods of its selector ([`StoppedController`] as unstick
/// builds it; not installed: the `flux install` lever). `None` when it runs.
fn judge_controller(
    (name, consequence): (&str, &str),
    ns: &str,
    deployment: Option<&Value>,
    pods: &[Value],
) -> Option<StoppedController> {
    let Some(d) = deployment else {
        let mut s = StoppedController::new(
            name,
            ns,
            format!("not installed (no Deployment {ns}/{name})"),
            consequence,
            None,
        );
        s.command = INSTALL.to_string();
        return Some(s);
    };
    let (why, pod) = unstick::controller::not_running_with_pods(d, pods, &Default::default())?;
    Some(StoppedController::new(name, ns, why, consequence, pod))
}

/// Reads controller `c`'s Deployment in the Flux namespace, and its pods when it has replicas
/// but no ready pod (one GET, one list), and judges it ([`judge_controller`]). A 403 on the
/// Deployment: not judged (`None`); on the pods: judged from the Deployment alone. Errors:
/// other API errors.
async fn stopped_controller(
    cx: &Context<'_>,
    c: (&str, &str),
) -> Result<Option<StoppedController>> {
    let (s, conn) = (cx.session, &cx.session.conn);
    // Where Flux runs, whatever `-n` reads objects from (see crate::facts::read).
    let ns = cluster_loop::cli::FLUX_DEFAULT_NAMESPACE.to_string();
    let dep_ar = Kind::Deployment.api_resource("v1");
    let d = match s.reader.get(conn, &dep_ar, &ns, c.0).await {
        Ok(d) => d,
        Err(e) if e.status_code() == Some(403) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut pods = Vec::new();
    if let Some(d) = &d
        && cluster_loop::flux::deployment_not_running(d).is_some_and(|w| w != "0 replicas")
        && let Some(sel) = obj::at(d, &["spec", "selector", "matchLabels"])
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
    {
        let sel: Vec<String> = sel
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        let pod_ar = Kind::Pod.api_resource("v1");
        let lp = ListParams::default().labels(&sel.join(","));
        match s.reader.list(conn, &pod_ar, Some(&ns), &lp).await {
            Ok(p) => pods = p,
            Err(e) if e.status_code() == Some(403) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(judge_controller(c, &ns, d.as_ref(), &pods))
}

/// A policy with no latestRef and no failing Ready condition: `waiting` while
/// image-reflector-controller runs, `broken` naming it when it does not.
fn no_latest_ref(id: &str, reflector: Option<&StoppedController>) -> Evidence {
    match reflector {
        Some(s) => Evidence::new(
            id,
            Verdict::Broken,
            format!("no latestRef, and none will come: {}", s.line()),
        )
        .fix(s.effect()),
        None => Evidence::new(
            id,
            Verdict::Waiting,
            "no latestRef yet: image-reflector-controller has not selected a tag",
        ),
    }
}

/// What the images link reads: ImagePolicies, ImageUpdateAutomations, ImageRepositories.
type ImageObjects = (
    Vec<ImagePolicy>,
    Vec<ImageUpdateAutomation>,
    Vec<cluster_loop::flux::ImageRepository>,
);

/// ImagePolicies, ImageUpdateAutomations and ImageRepositories in scope (the last two only
/// when there is a policy; one list each); `None` when the cluster does not serve ImagePolicy
/// (404). Errors: other API errors.
async fn read(cx: &Context<'_>) -> Result<Option<ImageObjects>> {
    let c = cx.session.conn.client.clone();
    let ns = cx.session.namespace.as_deref();
    let ctx = || cx.session.conn.ctx().verb("list").namespace(ns);
    cx.session.count(1);
    let pol: Api<ImagePolicy> = match ns {
        Some(n) => Api::namespaced(c.clone(), n),
        None => Api::all(c.clone()),
    };
    let policies = match pol.list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) => {
            let e = cluster_loop::Error::from_kube(e, ctx().resource_of::<ImagePolicy>());
            if e.status_code() == Some(404) {
                return Ok(None);
            }
            return Err(e);
        }
    };
    if policies.is_empty() {
        return Ok(Some((policies, Vec::new(), Vec::new())));
    }
    cx.session.count(1);
    let aut: Api<ImageUpdateAutomation> = match ns {
        Some(n) => Api::namespaced(c, n),
        None => Api::all(c),
    };
    let automations = aut
        .list(&ListParams::default())
        .await
        .map_err(|e| {
            cluster_loop::Error::from_kube(e, ctx().resource_of::<ImageUpdateAutomation>())
        })?
        .items;
    cx.session.count(1);
    let rep: Api<cluster_loop::flux::ImageRepository> = match ns {
        Some(n) => Api::namespaced(cx.session.conn.client.clone(), n),
        None => Api::all(cx.session.conn.client.clone()),
    };
    let repositories = rep
        .list(&ListParams::default())
        .await
        .map_err(|e| {
            cluster_loop::Error::from_kube(
                e,
                ctx().resource_of::<cluster_loop::flux::ImageRepository>(),
            )
        })?
        .items;
    Ok(Some((policies, automations, repositories)))
}

/// A container of a workload: (`Kind/ns/name container C`, image).
type Container = (String, String);

fn containers(workloads: &[Value]) -> Vec<Container> {
    let mut out = Vec::new();
    for w in workloads {
        for list in ["initContainers", "containers"] {
            for c in obj::arr(w, &["spec", "template", "spec", list]) {
                out.push((
                    format!(
                        "{}/{}/{} container {}",
                        obj::kind(w),
                        obj::namespace(w),
                        obj::name(w),
                        obj::s(c, &["name"]).unwrap_or("")
                    ),
                    obj::s(c, &["image"]).unwrap_or("").to_string(),
                ));
            }
        }
    }
    out
}

/// The Kustomizations applying the workload a member is about (its object ends with the
/// container's `Kind/ns/name container C`); empty for a member about no container.
fn appliers(cx: &Context<'_>, containers: &[Container], object: &str) -> Vec<String> {
    let Some((who, _)) = containers
        .iter()
        .find(|(who, _)| object.ends_with(who.as_str()))
    else {
        return Vec::new();
    };
    let workload = who.split(" container ").next().unwrap_or_default();
    match workload.splitn(3, '/').collect::<Vec<_>>()[..] {
        [kind, ns, name] => cx.facts.appliers(kind, ns, name),
        _ => Vec::new(),
    }
}

fn bare_tags(containers: &[Container], policies: &[ImagePolicy]) -> Vec<Evidence> {
    containers
        .iter()
        .filter(|(_, image)| markercheck::render::looks_like_bare_tag(image))
        .map(|(who, image)| {
            let of = policies
                .iter()
                .filter(|p| p.status.latest_ref.as_ref().is_some_and(|l| &l.tag == image))
                .map(|p| {
                    format!(
                        "; it is ImagePolicy {}/{}'s latestRef tag: a ':tag' marker on an image: field wrote it",
                        p.metadata.namespace.as_deref().unwrap_or_default(),
                        p.metadata.name.as_deref().unwrap_or_default()
                    )
                })
                .next()
                .unwrap_or_default();
            Evidence::new(
                who,
                Verdict::Broken,
                format!("runs image {image:?}, a bare tag with no repository: the node cannot pull it{of}"),
            )
            .fix("use the plain marker {\"$imagepolicy\": \"NS:POLICY\"} on image: (name:tag), ':tag' only on a separate tag field (kustomize images: newTag); kubectl markercheck PATH finds and simulates it")
        })
        .collect()
}

/// The tag and digest of a full image reference (`""` when absent).
fn tag_digest(image: &str) -> (&str, &str) {
    let name = value_name(image);
    let rest = &image[name.len()..];
    let (tag, digest) = rest.split_once('@').unwrap_or((rest, ""));
    (tag.trim_start_matches(':'), digest)
}

/// The image policy `p` selects for (latestRef's name, else its ImageRepository's
/// `spec.image`; `None` when neither is known) and the containers that run it (names as
/// go-containerregistry normalises them).
fn runners<'c>(
    p: &ImagePolicy,
    repositories: &[cluster_loop::flux::ImageRepository],
    containers: &'c [Container],
) -> (Option<String>, Vec<&'c Container>) {
    let pns = p.metadata.namespace.clone().unwrap_or_default();
    let r = &p.spec.image_repository_ref;
    let rns = r.namespace.clone().filter(|n| !n.is_empty()).unwrap_or(pns);
    let name = p
        .status
        .latest_ref
        .as_ref()
        .map(|l| l.name.clone())
        .or_else(|| {
            repositories
                .iter()
                .find(|x| {
                    x.metadata.name.as_deref() == Some(r.name.as_str())
                        && x.metadata.namespace.as_deref() == Some(rns.as_str())
                })
                .map(|x| x.spec.image.clone())
        });
    let want = name.as_deref().map(normalize_name);
    let running = containers
        .iter()
        .filter(|(_, image)| want.as_deref() == Some(normalize_name(value_name(image)).as_str()))
        .collect();
    (name, running)
}

fn policy_members(
    cx: &Context<'_>,
    p: &ImagePolicy,
    automations: &[ImageUpdateAutomation],
    repositories: &[cluster_loop::flux::ImageRepository],
    containers: &[Container],
    stopped: &Stopped,
) -> Vec<Evidence> {
    let id = format!(
        "ImagePolicy/{}/{}",
        p.metadata.namespace.as_deref().unwrap_or_default(),
        p.metadata.name.as_deref().unwrap_or_default()
    );
    let (name, running) = runners(p, repositories, containers);
    if running.is_empty() {
        return vec![Evidence::new(
            &id,
            Verdict::NotApplicable,
            format!(
                "no in-scope workload runs {}",
                name.as_deref()
                    .unwrap_or("its image (its ImageRepository was not found)")
            ),
        )];
    }
    let Some(latest) = &p.status.latest_ref else {
        let cs = &p.status.conditions;
        return vec![
            match cluster_loop::conditions::find(cs, "Ready").filter(|c| c.is_false()) {
                Some(c) => Evidence::new(
                    &id,
                    Verdict::Broken,
                    format!("no latestRef: {} ({})", c.message(), c.reason()),
                )
                .fix(format!(
                    "kubectl describe imagepolicy {} -n {}",
                    p.metadata.name.as_deref().unwrap_or_default(),
                    p.metadata.namespace.as_deref().unwrap_or_default()
                )),
                None => no_latest_ref(&id, stopped.reflector.as_ref()),
            },
        ];
    };
    let want_digest = latest.digest.clone().unwrap_or_default();
    running
        .into_iter()
        .map(|(who, image)| {
            let (tag, digest) = tag_digest(image);
            if tag == latest.tag && (want_digest.is_empty() || digest == want_digest) {
                Evidence::new(
                    format!("{id} {who}"),
                    Verdict::Ok,
                    format!("runs {image} == latestRef"),
                )
            } else {
                behind(
                    cx,
                    p,
                    latest,
                    automations,
                    stopped.automation.as_ref(),
                    format!("{id} {who}"),
                    image,
                )
            }
        })
        .collect()
}

/// A container running an older image than the policy's latestRef: what the automations say.
fn behind(
    cx: &Context<'_>,
    p: &ImagePolicy,
    latest: &cluster_loop::flux::ImageRef,
    automations: &[ImageUpdateAutomation],
    automation_stopped: Option<&StoppedController>,
    who: String,
    image: &str,
) -> Evidence {
    let converted: Vec<_> = [policy_from_api(p)].into_iter().collect();
    let covering: Vec<&ImageUpdateAutomation> = automations
        .iter()
        .filter(|a| !automation_policies(&automation_from_api(a), &converted).is_empty())
        .collect();
    let seen = format!("runs {image}, latestRef is {}", latest.full());
    if covering.is_empty() {
        return Evidence::new(who, Verdict::Broken, format!("{seen}; no ImageUpdateAutomation selects this ImagePolicy (its namespace and spec.policySelector), so nothing writes it to Git"))
            .fix("add an ImageUpdateAutomation in the policy's namespace whose policySelector matches it");
    }
    let active: Vec<&&ImageUpdateAutomation> =
        covering.iter().filter(|a| !a.spec.suspend).collect();
    if active.is_empty() {
        return Evidence::new(
            who,
            Verdict::Broken,
            format!("{seen}; every ImageUpdateAutomation selecting it is suspended"),
        )
        .fix("flux resume image update NAME -n NS");
    }
    // With --source, the automations that push to it are the ones that commit this chain's
    // workloads: an automation without a policySelector selects (and lists in
    // status.observedPolicies) every policy of its namespace, but it writes only to its own
    // repository, so its push says nothing of this one (seen on the real
    // image-automation-controller v1.2.0 with two fleets in flux-system).
    let pushing: Vec<&&ImageUpdateAutomation> = active
        .iter()
        .copied()
        .filter(|a| automation_in_scope(cx, a))
        .collect();
    let active = if pushing.is_empty() { active } else { pushing };
    let name = p.metadata.name.clone().unwrap_or_default();
    let observed = active
        .iter()
        .find(|a| a.status.observed_policies.get(&name) == Some(latest));
    let Some(a) = observed else {
        if let Some(s) = automation_stopped {
            return not_committing(who, &seen, s);
        }
        // Every automation that would commit it is refused (Ready=False, Stalled): nothing
        // commits it until its cause is fixed, so not a wait.
        let refused: Vec<Evidence> = active
            .iter()
            .map(|a| automation::automation_member(a, cx.facts.now))
            .collect();
        if refused.iter().all(|e| e.verdict == Verdict::Broken) {
            let e = &refused[0];
            let mut out = Evidence::new(
                who,
                Verdict::Broken,
                format!(
                    "{seen}; the automation will not commit it: {} is {}",
                    e.object, e.detail
                ),
            );
            out.fix = e.fix.clone();
            return out;
        }
        let a = active[0];
        let last = a
            .status
            .last_automation_run_time
            .as_deref()
            .and_then(obj::parse_time);
        let interval = cluster_loop::duration::parse_go_duration(&a.spec.interval).ok();
        let by = last
            .unwrap_or(cx.facts.now)
            .checked_add(SignedDuration::try_from(interval.unwrap_or_default()).unwrap_or_default())
            .ok()
            .map(|t| t.max(cx.facts.now));
        return Evidence::new(
            who,
            Verdict::Waiting,
            format!(
                "{seen}; the automation has not committed yet: ImageUpdateAutomation {} has not run with this latestRef (last run {}, every {})",
                a.metadata.name.as_deref().unwrap_or_default(),
                last.map(|t| t.to_string()).unwrap_or_else(|| "never".into()),
                a.spec.interval
            ),
        )
        .until(by);
    };
    pushed(cx, a, who, seen)
}

/// A container behind its latestRef whose automation has not run with it while
/// image-automation-controller does not run: `broken` naming the Deployment.
fn not_committing(who: String, seen: &str, s: &StoppedController) -> Evidence {
    Evidence::new(
        who,
        Verdict::Broken,
        format!("{seen}; the automation will not commit it: {}", s.line()),
    )
    .fix(s.effect())
}

/// The automation ran with the latestRef: its push on its way, or no marker.
fn pushed(cx: &Context<'_>, a: &ImageUpdateAutomation, who: String, seen: String) -> Evidence {
    let ns = a.metadata.namespace.clone().unwrap_or_default();
    let src_ns = a
        .spec
        .source_ref
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or(ns.clone());
    let src = cx.facts.snap.sources.iter().find(|s| {
        obj::kind(s) == "GitRepository"
            && obj::namespace(s) == src_ns
            && obj::name(s) == a.spec.source_ref.name
    });
    let src_rev = src
        .and_then(|s| obj::s(s, &["status", "artifact", "revision"]))
        .map(|r| cutover::preflight::split_revision(r).1);
    // The commit reaches the workloads by the source's next fetch and the Kustomizations'
    // deadline, whichever is later.
    let upstream = cx.upstream.iter().filter_map(|l| l.deadline).max();
    let by = src
        .and_then(|s| super::source::next_fetch(s, cx.facts.now))
        .into_iter()
        .chain(upstream)
        .max();
    let soon =
        |why: String| Evidence::new(&who, Verdict::Waiting, format!("{seen}; {why}")).until(by);
    if let Some(c) = &a.status.last_push_commit
        && src_rev.as_deref() != Some(c.as_str())
    {
        return soon(format!(
            "the automation pushed {} at {}; source {src_ns}/{} has not fetched it yet",
            &c[..c.len().min(12)],
            a.status.last_push_time.as_deref().unwrap_or("?"),
            a.spec.source_ref.name
        ));
    }
    if cx
        .upstream
        .iter()
        .any(|l| l.id == "kustomizations" && !l.verdict.holds())
    {
        return soon("the Kustomizations have not applied the newest revision yet (link 2)".into());
    }
    Evidence::new(
        &who,
        Verdict::Broken,
        format!(
            "{seen}; ImageUpdateAutomation {ns}/{} ran with this latestRef (status.observedPolicies) and everything it pushed is applied, so no marker under its spec.update.path updates this image",
            a.metadata.name.as_deref().unwrap_or_default()
        ),
    )
    .fix("add {\"$imagepolicy\": \"NS:POLICY\"} to the image field in Git; kubectl markercheck PATH simulates the automation on the repository")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_digests_of_references() {
        assert_eq!(tag_digest("reg:5000/app:1.2.3"), ("1.2.3", ""));
        assert_eq!(
            tag_digest("reg:5000/app:1.2.3@sha256:ab"),
            ("1.2.3", "sha256:ab")
        );
        assert_eq!(tag_digest("reg:5000/app"), ("", ""));
    }

    #[test]
    fn a_bare_tag_names_the_policy_whose_tag_it_is() {
        let mut p = ImagePolicy::default();
        p.metadata.name = Some("app".into());
        p.metadata.namespace = Some("flux-system".into());
        p.status.latest_ref = Some(cluster_loop::flux::ImageRef {
            name: "reg/app".into(),
            tag: "1.1.0".into(),
            digest: None,
        });
        let containers = vec![
            (
                "Deployment/a/app container app".to_string(),
                "1.1.0".to_string(),
            ),
            (
                "Deployment/a/ok container ok".to_string(),
                "reg/app:1.1.0".to_string(),
            ),
        ];
        let e = bare_tags(&containers, &[p]);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].verdict, Verdict::Broken);
        assert!(
            e[0].detail
                .contains("ImagePolicy flux-system/app's latestRef tag"),
            "{}",
            e[0].detail
        );
    }

    fn deployment(replicas: i64, ready: Option<i64>) -> Value {
        let mut d = serde_json::json!({
            "metadata": {"name": "image-reflector-controller", "namespace": "flux-system"},
            "spec": {"replicas": replicas,
                     "selector": {"matchLabels": {"app": "image-reflector-controller"}}},
            "status": {"observedGeneration": 1}
        });
        if let Some(r) = ready {
            d["status"]["readyReplicas"] = r.into();
        }
        d
    }

    #[test]
    fn a_missing_reflector_is_not_installed_with_the_install_lever() {
        let s = judge_controller(REFLECTOR, "flux-system", None, &[]).unwrap();
        assert_eq!(
            s.why,
            "not installed (no Deployment flux-system/image-reflector-controller)"
        );
        assert_eq!(s.command, INSTALL);
        let m = Stopped {
            reflector: Some(s),
            automation: None,
        }
        .members();
        assert_eq!(m.len(), 1);
        assert_eq!(
            m[0].object,
            "Deployment/flux-system/image-reflector-controller"
        );
        assert_eq!(m[0].verdict, Verdict::Broken);
        assert!(
            m[0].fix.as_deref().unwrap().contains(INSTALL),
            "{:?}",
            m[0].fix
        );
    }

    #[test]
    fn a_reflector_at_zero_replicas_is_stopped_with_the_scale_lever() {
        let d = deployment(0, None);
        let s = judge_controller(REFLECTOR, "flux-system", Some(&d), &[]).unwrap();
        assert_eq!(s.why, "0 replicas");
        assert_eq!(
            s.command,
            "kubectl -n flux-system scale deployment/image-reflector-controller --replicas=1"
        );
        // A policy with no latestRef: broken naming the controller, not waiting.
        let e = no_latest_ref("ImagePolicy/flux-system/app", Some(&s));
        assert_eq!(e.verdict, Verdict::Broken);
        assert!(
            e.detail
                .contains("image-reflector-controller is not running (0 replicas)"),
            "{}",
            e.detail
        );
    }

    #[test]
    fn a_reflector_with_no_ready_pod_says_why_from_its_pod() {
        let d = deployment(1, None);
        let pod = serde_json::json!({
            "metadata": {"name": "image-reflector-controller-5d9-x", "namespace": "flux-system",
                         "labels": {"app": "image-reflector-controller"},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"containerStatuses": [{"name": "manager", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}
        });
        let s = judge_controller(REFLECTOR, "flux-system", Some(&d), &[pod]).unwrap();
        assert!(s.why.starts_with("no ready pod, 0 of 1 ready"), "{}", s.why);
        assert!(s.why.contains("CrashLoopBackOff"), "{}", s.why);
        assert!(s.command.contains("logs"), "{}", s.command);
    }

    #[test]
    fn a_running_reflector_keeps_waiting_for_a_latest_ref() {
        let d = deployment(1, Some(1));
        assert!(judge_controller(REFLECTOR, "flux-system", Some(&d), &[]).is_none());
        // No status yet: not judged, as unstick does.
        let mut fresh = deployment(1, None);
        fresh["status"] = serde_json::json!({});
        assert!(judge_controller(REFLECTOR, "flux-system", Some(&fresh), &[]).is_none());
        let e = no_latest_ref("ImagePolicy/flux-system/app", None);
        assert_eq!(e.verdict, Verdict::Waiting);
        assert!(Stopped::default().members().is_empty());
    }

    #[test]
    fn a_stopped_automation_controller_breaks_the_wait_for_a_commit() {
        let mut d = deployment(0, None);
        d["metadata"]["name"] = "image-automation-controller".into();
        let s = judge_controller(AUTOMATION, "flux-system", Some(&d), &[]).unwrap();
        let e = not_committing(
            "ImagePolicy/flux-system/app Deployment/apps/app container app".into(),
            "runs reg/app:1.0.0, latestRef is reg/app:1.1.0",
            &s,
        );
        assert_eq!(e.verdict, Verdict::Broken);
        assert!(
            e.detail
                .contains("image-automation-controller is not running (0 replicas)"),
            "{}",
            e.detail
        );
        assert!(
            e.fix
                .as_deref()
                .unwrap()
                .contains("scale deployment/image-automation-controller"),
            "{:?}",
            e.fix
        );
        let m = Stopped {
            reflector: None,
            automation: Some(s),
        }
        .members();
        assert_eq!(
            m[0].object,
            "Deployment/flux-system/image-automation-controller"
        );
    }
}
