//! Link 4's judgement of the image controllers' own objects: each in-scope
//! ImageUpdateAutomation's last run and each ImageRepository's last scan, from the conditions
//! the real controllers write (image-automation-controller v1.2.0, image-reflector-controller
//! v1.2.0, fluxcd/pkg runtime conditions). Pure over the objects; [`super::images`] reads them.
//!
//! An automation is the link that rolls a new image: while it is refused, no image ever
//! arrives, whatever the workloads run now (issue 40: a `.Updated` template refused with
//! Ready=False read "images ok"). Per ImageUpdateAutomation, in order:
//! - `spec.suspend: true`: `not-applicable` (someone's freeze; a container behind its latestRef
//!   says so on its own member);
//! - Ready=False or Stalled=True: `broken` with the controller's reason and message, and the
//!   fix for the cause ([`automation_fix`]: `.Changed` for a removed template field and
//!   `kubectl markercheck`, which flags it offline; the Git credentials for an auth error; the
//!   push for a refused push);
//! - Ready=True at its generation: `ok`, with its last run;
//! - otherwise (no Ready yet, Ready=Unknown, a generation not observed yet): `waiting` until its
//!   next run (`spec.interval` after the last, or from now).
//!
//! The same per ImageRepository (a failed scan is `broken` with the fix for its cause: the
//! registry's credentials, its certificate, its name), `ok` with the tag count and scan time.

use cluster_loop::conditions::{Condition, find};
use cluster_loop::flux::{ImageRepository, ImageUpdateAutomation};
use jiff::{SignedDuration, Timestamp};

use crate::chain::{Evidence, Verdict};

/// The failure a Flux image object reports: Stalled=True first (the controller gave up until
/// the spec changes), else Ready=False.
fn failure(conditions: &[Condition]) -> Option<&Condition> {
    find(conditions, "Stalled")
        .filter(|c| c.is_true())
        .or_else(|| find(conditions, "Ready").filter(|c| c.is_false()))
}

/// `now` + the Go duration `interval` (from `last` when known and later than `now` - interval).
fn next_run(last: Option<&str>, interval: &str, now: Timestamp) -> Option<Timestamp> {
    let every = cluster_loop::duration::parse_go_duration(interval).ok()?;
    let every = SignedDuration::try_from(every).ok()?;
    let from = last
        .and_then(|t| t.parse::<Timestamp>().ok())
        .unwrap_or(now);
    from.checked_add(every).ok().map(|t| t.max(now))
}

/// The fix for an automation's failure, by its message (image-automation-controller v1.2.0's
/// words): a removed template field, a Git authentication error, a refused push; else where
/// to read more.
pub fn automation_fix(a: &ImageUpdateAutomation, c: &Condition) -> String {
    let ns = a.metadata.namespace.as_deref().unwrap_or_default();
    let name = a.metadata.name.as_deref().unwrap_or_default();
    let m = c.message();
    let lower = m.to_ascii_lowercase();
    let src_ns = a
        .spec
        .source_ref
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(ns);
    let src = format!("GitRepository {src_ns}/{}", a.spec.source_ref.name);
    if m.contains("removed '.Updated'") || m.contains("removed '.Changed.ImageResult'") {
        let (old, new) = if m.contains("'.Updated'") {
            (".Updated", ".Changed (.Changed.Changes, .Changed.Objects)")
        } else {
            (
                ".Changed.ImageResult",
                ".Changed.FileChanges or .Changed.Objects",
            )
        };
        return format!(
            "use {new} instead of {old} in spec.git.commit.messageTemplate of ImageUpdateAutomation {ns}/{name} (image-automation-controller v1.0.0 removed {old}); kubectl markercheck PATH flags it offline (MC050) before it reaches the cluster"
        );
    }
    // HTTP 401/403 as a whole word only: a commit or digest in the message may hold "401".
    let http_refused = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w == "401" || w == "403");
    if http_refused
        || [
            "authentication required",
            "authorization failed",
            "permission denied",
            "could not read username",
            "invalid credentials",
        ]
        .iter()
        .any(|w| lower.contains(w))
    {
        return format!(
            "the Git server refuses the credentials of {src} (its spec.secretRef): the automation needs a credential that may push; mint a new, uniquely named token and update the Secret"
        );
    }
    if lower.contains("push") {
        return format!(
            "the push to {src} is refused: check the branch (spec.git.push), its protection rules and that the credentials may push"
        );
    }
    format!(
        "kubectl describe imageupdateautomation {name} -n {ns}; kubectl -n flux-system logs deploy/image-automation-controller"
    )
}

/// The member of ImageUpdateAutomation `a` (see the module doc for the order).
pub fn automation_member(a: &ImageUpdateAutomation, now: Timestamp) -> Evidence {
    let ns = a.metadata.namespace.as_deref().unwrap_or_default();
    let name = a.metadata.name.as_deref().unwrap_or_default();
    let id = format!("ImageUpdateAutomation/{ns}/{name}");
    let cs = &a.status.conditions;
    if a.spec.suspend {
        return Evidence::new(
            id,
            Verdict::NotApplicable,
            "suspended (spec.suspend: true): it commits nothing until resumed",
        );
    }
    if let Some(c) = failure(cs) {
        return Evidence::new(
            id,
            Verdict::Broken,
            format!(
                "{}={} ({}): {}; no new image is committed while it fails",
                c.type_,
                c.status,
                c.reason(),
                c.message()
            ),
        )
        .fix(automation_fix(a, c));
    }
    let last = a.status.last_automation_run_time.as_deref();
    let current = a.status.observed_generation.is_some()
        && a.status.observed_generation == a.metadata.generation;
    match find(cs, "Ready") {
        Some(r) if r.is_true() && (current || a.metadata.generation.is_none()) => Evidence::new(
            id,
            Verdict::Ok,
            format!("last run {}: {}", last.unwrap_or("?"), r.message()),
        ),
        r => Evidence::new(
            id,
            Verdict::Waiting,
            match r {
                Some(r) if r.is_true() => format!(
                    "generation {} not run yet (observedGeneration {})",
                    a.metadata.generation.unwrap_or_default(),
                    a.status.observed_generation.unwrap_or_default()
                ),
                Some(r) => format!("running: {} ({})", r.message(), r.reason()),
                None => {
                    "has not run yet: image-automation-controller has written no status".to_string()
                }
            },
        )
        .until(next_run(last, &a.spec.interval, now)),
    }
}

/// The fix for an ImageRepository's failed scan, by image-reflector-controller's message.
fn scan_fix(r: &ImageRepository, c: &Condition) -> String {
    let ns = r.metadata.namespace.as_deref().unwrap_or_default();
    let name = r.metadata.name.as_deref().unwrap_or_default();
    let lower = c.message().to_ascii_lowercase();
    if ["401", "unauthorized", "authentication required", "denied"]
        .iter()
        .any(|w| lower.contains(w))
    {
        return format!(
            "the registry refuses the scan of {}: give ImageRepository {ns}/{name} a spec.secretRef (a docker-registry Secret) that may list its tags",
            r.spec.image
        );
    }
    if lower.contains("x509") || lower.contains("certificate") {
        return format!(
            "the registry's certificate is not trusted: spec.certSecretRef with its CA (ca.crt) on ImageRepository {ns}/{name}, or spec.insecure: true for a plain-HTTP registry"
        );
    }
    if lower.contains("no such host") {
        return format!(
            "{} does not resolve where image-reflector-controller runs: fix spec.image or the cluster's DNS",
            r.spec.image
        );
    }
    format!(
        "kubectl describe imagerepository {name} -n {ns}; kubectl -n flux-system logs deploy/image-reflector-controller"
    )
}

/// The member of ImageRepository `r`: its last scan.
pub fn repository_member(r: &ImageRepository, now: Timestamp) -> Evidence {
    let ns = r.metadata.namespace.as_deref().unwrap_or_default();
    let name = r.metadata.name.as_deref().unwrap_or_default();
    let id = format!("ImageRepository/{ns}/{name}");
    if r.spec.suspend {
        return Evidence::new(
            id,
            Verdict::NotApplicable,
            "suspended (spec.suspend: true): no scan until resumed",
        );
    }
    let cs = &r.status.conditions;
    if let Some(c) = failure(cs) {
        return Evidence::new(
            id,
            Verdict::Broken,
            format!(
                "scan of {} fails: {}={} ({}): {}",
                r.spec.image,
                c.type_,
                c.status,
                c.reason(),
                c.message()
            ),
        )
        .fix(scan_fix(r, c));
    }
    let scan = r.status.last_scan_result.as_ref();
    let scanned_at = scan.and_then(|s| s["scanTime"].as_str());
    match find(cs, "Ready") {
        Some(c) if c.is_true() => Evidence::new(
            id,
            Verdict::Ok,
            format!(
                "scanned {}: {} tags at {}",
                r.spec.image,
                scan.and_then(|s| s["tagCount"].as_i64())
                    .map_or("?".to_string(), |n| n.to_string()),
                scanned_at.unwrap_or("?")
            ),
        ),
        c => Evidence::new(
            id,
            Verdict::Waiting,
            match c {
                Some(c) => format!(
                    "scanning {}: {} ({})",
                    r.spec.image,
                    c.message(),
                    c.reason()
                ),
                None => format!("{} not scanned yet", r.spec.image),
            },
        )
        .until(next_run(scanned_at, &r.spec.interval, now)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn automation(status: serde_json::Value) -> ImageUpdateAutomation {
        serde_json::from_value(json!({
            "metadata": {"name": "apps", "namespace": "flux-system", "generation": 1},
            "spec": {"interval": "1m", "sourceRef": {"kind": "GitRepository", "name": "fleet"}},
            "status": status
        }))
        .unwrap()
    }

    fn now() -> Timestamp {
        "2026-12-07T12:00:00Z".parse().unwrap()
    }

    /// Row 6: the real controller's words for a `.Updated` template (Stalled and Ready=False
    /// RemovedTemplateField): broken, with the message and the `.Changed` + markercheck fix.
    #[test]
    fn a_removed_template_field_is_broken_with_changed_and_markercheck() {
        let m = "template uses removed '.Updated' field. Please use '.Changed' instead.";
        let a = automation(json!({"observedGeneration": 1, "conditions": [
            {"type": "Ready", "status": "False", "reason": "RemovedTemplateField", "message": m},
            {"type": "Stalled", "status": "True", "reason": "RemovedTemplateField", "message": m}]}));
        let e = automation_member(&a, now());
        assert_eq!(e.object, "ImageUpdateAutomation/flux-system/apps");
        assert_eq!(e.verdict, Verdict::Broken);
        assert!(e.detail.contains(m), "{}", e.detail);
        let fix = e.fix.unwrap();
        assert!(
            fix.starts_with("use .Changed") && fix.contains("kubectl markercheck"),
            "{fix}"
        );
    }

    #[test]
    fn an_auth_error_names_the_source_secret() {
        let a = automation(json!({"conditions": [
            {"type": "Ready", "status": "False", "reason": "GitOperationFailed",
             "message": "failed to checkout source: unable to clone 'http://git/org/fleet': authentication required"}]}));
        let e = automation_member(&a, now());
        assert_eq!(e.verdict, Verdict::Broken);
        assert!(
            e.fix
                .as_deref()
                .unwrap()
                .contains("GitRepository flux-system/fleet (its spec.secretRef)"),
            "{:?}",
            e.fix
        );
    }

    /// "401" inside a commit ID is not an HTTP refusal; "HTTP 403" is.
    #[test]
    fn a_status_code_counts_only_as_a_whole_word() {
        let failed = |m: &str| {
            let a = automation(json!({"conditions": [
                {"type": "Ready", "status": "False", "reason": "GitOperationFailed", "message": m}]}));
            automation_member(&a, now()).fix.unwrap()
        };
        assert!(
            failed("push of 3f401ab to main rejected: non-fast-forward").starts_with("the push")
        );
        assert!(
            failed("unable to push: unexpected HTTP status 403")
                .contains("refuses the credentials")
        );
    }

    #[test]
    fn not_run_yet_is_waiting_until_its_interval_and_ready_is_ok() {
        let e = automation_member(&automation(json!({})), now());
        assert_eq!(e.verdict, Verdict::Waiting);
        assert_eq!(e.deadline, Some("2026-12-07T12:01:00Z".parse().unwrap()));
        let ok = automation(json!({"observedGeneration": 1,
            "lastAutomationRunTime": "2026-12-07T11:59:30Z",
            "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded",
                "message": "repository up-to-date"}]}));
        assert_eq!(automation_member(&ok, now()).verdict, Verdict::Ok);
        // Ready from an older generation: not judged on it.
        let mut stale = ok.clone();
        stale.metadata.generation = Some(2);
        assert_eq!(automation_member(&stale, now()).verdict, Verdict::Waiting);
    }

    #[test]
    fn a_failed_scan_is_broken_with_the_fix_for_its_cause() {
        let r: ImageRepository = serde_json::from_value(json!({
            "metadata": {"name": "app", "namespace": "flux-system"},
            "spec": {"image": "ghcr.io/org/app", "interval": "1m"},
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "ReadOperationFailed",
                "message": "GET https://ghcr.io/token: UNAUTHORIZED: authentication required"}]}
        }))
        .unwrap();
        let e = repository_member(&r, now());
        assert_eq!(e.verdict, Verdict::Broken);
        assert!(e.fix.unwrap().contains("spec.secretRef"));
    }
}
