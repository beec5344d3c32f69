//! Deterministic apply refusals: the API server answers kustomize-controller's apply of an
//! object the same way on every run, whatever the run, until the manifest in Git (or the
//! cluster's RBAC or admission policy) changes. A request, a suspend+resume or a controller
//! restart only repeats the same apply, so the plan names the fix for the cause instead
//! ([`crate::lever`]: `fix-in-git`, no write), and `gitops verify` says that same fix.
//!
//! Read from the Kustomization's Ready=False `ReconciliationFailed` message, as the real
//! controllers write it (reproduced on kube-apiserver v1.36.3 and kustomize-controller v1.9.6,
//! tests/real `unstick::refused`): fluxcd/pkg ssa wraps each object's server-side dry-run error
//! as `Kind/namespace/name dry-run failed (Reason): <API server message>` (ssa `DryRunErr`,
//! `FmtUnstructured`; `Kind/name` when cluster-scoped), and kustomize-controller's `apply`
//! appends the change log of what it applied before the error after a newline (`%w\n%s`).
//! The API server's messages
//! (k8s.io/apimachinery `errors.NewInvalid`, `NewForbidden`; the admission plugins):
//!
//! - Invalid, a field that cannot change: `Job.batch "migrate" is invalid: spec.template:
//!   Invalid value: core.PodTemplateSpec{...}: field is immutable` (apimachinery validation
//!   `ValidateImmutableField`), several fields as `is invalid: [a: ..., b: ...]`;
//! - Invalid, any other validation: `... is invalid: spec.replicas: Invalid value: -1: must be
//!   greater than or equal to 0`;
//! - an admission policy's denial: `... is forbidden: ValidatingAdmissionPolicy 'P' with
//!   binding 'B' denied request: MESSAGE` (built-in, CEL), `admission webhook "W" denied the
//!   request: MESSAGE` (a webhook server);
//! - RBAC (kustomize-controller impersonating `spec.serviceAccountName`): `jobs.batch
//!   "migrate" is forbidden: User "system:serviceaccount:NS:SA" cannot patch resource "jobs"
//!   in API group "batch" in the namespace "NS"`.
//!
//! Not refusals (they may pass on the next run, so the request lever stays): a webhook that
//! cannot be called (`failed calling webhook`), a quota (`exceeded quota`), a namespace being
//! terminated, a conflict, an internal error.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

/// What the API server refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefusalKind {
    /// A field that cannot change once the object exists (`field is immutable`).
    Immutable,
    /// Any other validation error (`is invalid: FIELD: Invalid value ...`).
    Invalid,
    /// A ValidatingAdmissionPolicy or an admission webhook denied the request.
    AdmissionDenied,
    /// RBAC: the identity applying (the impersonated ServiceAccount) may not write it.
    Forbidden,
}

impl RefusalKind {
    /// Kebab-case name used in tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalKind::Immutable => "immutable",
            RefusalKind::Invalid => "invalid",
            RefusalKind::AdmissionDenied => "admission-denied",
            RefusalKind::Forbidden => "forbidden",
        }
    }
}

/// One object the API server refuses. JSON (`diagnosis.refused[]`): `{"kind": "immutable",
/// "object": "Job/apps/migrate", "fields": ["spec.template"], "by": null, "message": "Job.batch
/// \"migrate\" is invalid: ...", "fix": "..."}`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    /// What is refused.
    pub kind: RefusalKind,
    /// `Kind/namespace/name` (`Kind/name` when cluster-scoped), from ssa's prefix; the API
    /// server's `Kind.group "name"` when the message has no prefix.
    pub object: String,
    /// The field paths the API server names (`spec.template`); for `immutable` only the
    /// immutable ones. Empty for admission and RBAC refusals.
    pub fields: Vec<String>,
    /// Who refuses: `ValidatingAdmissionPolicy P (binding B)`, `admission webhook W`, or the
    /// user RBAC refuses (`system:serviceaccount:NS:SA`). `None` for validation.
    pub by: Option<String>,
    /// The API server's message for this object, as the controller recorded it.
    pub message: String,
    /// The fix for the cause, one paragraph.
    pub fix: String,
}

/// ssa's prefix before each object's error (`DryRunErr`, and `apply failed` for the apply
/// itself): `Kind/ns/name dry-run failed (Reason): `.
static PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?P<kind>[A-Z][A-Za-z0-9]*)/(?:(?P<ns>[a-z0-9][a-z0-9.-]*)/)?(?P<name>[a-z0-9][a-z0-9.:-]*) (?:dry-run|apply) failed(?: \((?P<reason>[A-Za-z]*)\))?: ",
    )
    .unwrap()
});
/// The object as the API server names it: `Job.batch "migrate"`, `jobs.batch "migrate"`,
/// `Service "web"`.
static API_OBJECT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?P<what>[A-Za-z][A-Za-z0-9.-]*) "(?P<name>[^"]*)" is (?:invalid|forbidden)"#)
        .unwrap()
});
/// One field error of an Invalid status (apimachinery field.Error): `FIELD: Type`, after
/// `is invalid: `, `[` or `, `.
static FIELD_ERROR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:is invalid: \[?|, )(?P<field>[A-Za-z_$][^\s:,\[\]]*(?:\[[^\]]*\][^\s:,\[\]]*)*): (?:Invalid value|Forbidden|Required value|Unsupported value|Duplicate value|Not found|Too long|Too many|Internal error)").unwrap()
});
static VAP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"ValidatingAdmissionPolicy '(?P<policy>[^']+)' with binding '(?P<binding>[^']+)' denied request: (?P<why>.*)").unwrap()
});
static WEBHOOK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"admission webhook "(?P<hook>[^"]+)" denied the request(?:: (?P<why>.*))?"#)
        .unwrap()
});
static RBAC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"is forbidden: User "(?P<user>[^"]+)" cannot (?P<verb>[a-z]+) resource "(?P<resource>[^"]+)" in API group "(?P<group>[^"]*)"(?: in the namespace "(?P<ns>[^"]+)"| at the cluster scope)?"#).unwrap()
});
/// What marks a field error as a field that cannot change: apimachinery
/// `ValidateImmutableField` (`field is immutable`) and the CEL transition rules' words, as
/// fluxcd/pkg ssa v0.76 `errors.IsImmutableError` matches them (`is immutable`, `immutable
/// field`).
const IMMUTABLE_WORDS: [&str; 2] = ["is immutable", "immutable field"];
/// The per-object annotation that makes kustomize-controller recreate an object whose apply
/// is refused as immutable (kustomize-controller docs, "Force": `spec.force` for every object
/// of the Kustomization).
pub const FORCE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/force: enabled";

/// Every refusal in `message` (a Kustomization's Ready message), in order; `[]` when the
/// failure is not one the API server repeats on every run. `ks` is the Kustomization
/// (`namespace/name`), named in the fixes (`spec.force`, `spec.serviceAccountName`).
pub fn refusals(message: &str, ks: &str) -> Vec<Refusal> {
    let starts: Vec<_> = PREFIX.captures_iter(message).collect();
    let mut out = Vec::new();
    if starts.is_empty() {
        out.extend(refusal(
            None,
            message.lines().next().unwrap_or_default(),
            ks,
        ));
        return out;
    }
    for (i, c) in starts.iter().enumerate() {
        let whole = c.get(0).unwrap();
        let end = starts
            .get(i + 1)
            .map_or(message.len(), |n| n.get(0).unwrap().start());
        // kustomize-controller v1.9.6 `apply` appends the partial apply's change log after a
        // newline (`%w\n%s`): the API server's message is the first line.
        let text = message[whole.end()..end].lines().next().unwrap_or_default();
        let object = match c.name("ns") {
            Some(ns) => format!("{}/{}/{}", &c["kind"], ns.as_str(), &c["name"]),
            None => format!("{}/{}", &c["kind"], &c["name"]),
        };
        out.extend(refusal(Some(object), text, ks));
    }
    out
}

/// The refusal in one object's error `text`, `None` when it is not one.
fn refusal(object: Option<String>, text: &str, ks: &str) -> Option<Refusal> {
    let object = object.or_else(|| {
        API_OBJECT
            .captures(text)
            .map(|c| format!("{} \"{}\"", &c["what"], &c["name"]))
    })?;
    let (ks_ns, ks_name) = ks.split_once('/').unwrap_or(("", ks));
    let message = text.trim().to_string();
    if let Some(c) = VAP.captures(text) {
        let by = format!(
            "ValidatingAdmissionPolicy {} (binding {})",
            &c["policy"], &c["binding"]
        );
        let fix = format!(
            "{by} denies {object}: {}. Change {object} in Git so that it passes the policy, or have the policy changed or its binding exclude it (kubectl get validatingadmissionpolicy {} -o yaml); every run is denied the same way until then",
            c["why"].trim_end_matches('.'),
            &c["policy"]
        );
        return Some(Refusal {
            kind: RefusalKind::AdmissionDenied,
            object,
            fields: Vec::new(),
            by: Some(by),
            message,
            fix,
        });
    }
    if let Some(c) = WEBHOOK.captures(text) {
        let by = format!("admission webhook {}", &c["hook"]);
        let why = c
            .name("why")
            .map(|w| format!(": {}", w.as_str().trim_end_matches('.')))
            .unwrap_or_default();
        let fix = format!(
            "{by} denies {object}{why}. Change {object} in Git so that the webhook admits it, or have the webhook's policy changed (kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations names its configuration); every run is denied the same way until then"
        );
        return Some(Refusal {
            kind: RefusalKind::AdmissionDenied,
            object,
            fields: Vec::new(),
            by: Some(by),
            message,
            fix,
        });
    }
    if let Some(c) = RBAC.captures(text) {
        let user = c["user"].to_string();
        let who = match user.strip_prefix("system:serviceaccount:") {
            Some(sa) => format!(
                "ServiceAccount {} (spec.serviceAccountName of Kustomization {ks}, which kustomize-controller impersonates)",
                sa.replacen(':', "/", 1)
            ),
            None => format!("User {user}"),
        };
        let group = match &c["group"] {
            "" => "the core API group".to_string(),
            g => format!("API group {g}"),
        };
        let place = c
            .name("ns")
            .map(|n| format!("in namespace {}", n.as_str()))
            .unwrap_or_else(|| "at the cluster scope".into());
        let fix = format!(
            "{who} may not {} {} ({group}) {place}: grant it that verb with a Role and RoleBinding (a ClusterRole and ClusterRoleBinding at the cluster scope), or apply {object} from a Kustomization whose ServiceAccount may; every run is refused the same way until then",
            &c["verb"], &c["resource"]
        );
        return Some(Refusal {
            kind: RefusalKind::Forbidden,
            object,
            fields: Vec::new(),
            by: Some(user),
            message,
            fix,
        });
    }
    let invalid = text.find(" is invalid: ")?;
    let errors: Vec<_> = FIELD_ERROR.captures_iter(&text[invalid..]).collect();
    let mut all = Vec::new();
    let mut immutable = Vec::new();
    for (i, c) in errors.iter().enumerate() {
        let field = c["field"].to_string();
        let end = errors
            .get(i + 1)
            .map_or(text.len() - invalid, |n| n.get(0).unwrap().start());
        let segment = &text[invalid + c.get(0).unwrap().start()..invalid + end];
        if IMMUTABLE_WORDS.iter().any(|w| segment.contains(w)) && !immutable.contains(&field) {
            immutable.push(field.clone());
        }
        if !all.contains(&field) {
            all.push(field);
        }
    }
    if immutable.is_empty() && IMMUTABLE_WORDS.iter().any(|w| text.contains(w)) {
        immutable = all.clone();
    }
    if !immutable.is_empty() {
        let fix = immutable_fix(&object, &immutable, ks_ns, ks_name);
        return Some(Refusal {
            kind: RefusalKind::Immutable,
            object,
            fields: immutable,
            by: None,
            message,
            fix,
        });
    }
    let fields = if all.is_empty() {
        "its manifest".to_string()
    } else {
        all.join(", ")
    };
    let fix = format!(
        "the API server's validation refuses {object} ({fields}): correct it in Git (the message says what it accepts); every run is refused the same way until Git changes, and recreating it (spec.force) does not help"
    );
    Some(Refusal {
        kind: RefusalKind::Invalid,
        object,
        fields: all,
        by: None,
        message,
        fix,
    })
}

/// The fix for fields that cannot change: for a Job the failure catalogue's two ways (the
/// migration in an initContainer; or let Flux recreate it, and what that means: it runs
/// again), for any other object keeping the created value or recreating it.
fn immutable_fix(object: &str, fields: &[String], ks_ns: &str, ks_name: &str) -> String {
    let f = fields.join(", ");
    let force = format!(
        "let Flux recreate it: the annotation `{FORCE_ANNOTATION}` on {object} in Git (this object only), or `spec.force: true` on Kustomization {ks_ns}/{ks_name} (every object it applies whose change is refused as immutable)"
    );
    if object.starts_with("Job/") {
        format!(
            "{object}: {f} cannot change once the Job exists, and the API server refuses the changed Job on every apply. Migrations belong in an initContainer (of the Deployment that needs them), not a Job: move it there. Or {force}. Recreating deletes the Job and creates it again: it runs again (a new pod runs the migration once more)"
        )
    } else {
        format!(
            "{object}: {f} cannot change once it exists, and the API server refuses the change on every apply. Keep the created value in Git, or {force}. Recreating deletes {object} and creates it again: what hangs on the old one starts over (its pods restart, a Service gets a new clusterIP, a claim binds a new volume)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KS: &str = "flux-system/apps";

    #[test]
    fn a_job_template_change_is_immutable_with_the_catalogue_fix() {
        let m = "Job/apps/migrate dry-run failed (Invalid): Job.batch \"migrate\" is invalid: spec.template: Invalid value: core.PodTemplateSpec{ObjectMeta:v1.ObjectMeta{Name:\"\", Labels:map[string]string{\"a\":\"b\"}}}: field is immutable";
        let r = refusals(m, KS);
        assert_eq!(r.len(), 1, "{r:#?}");
        assert_eq!(r[0].kind, RefusalKind::Immutable);
        assert_eq!(r[0].object, "Job/apps/migrate");
        assert_eq!(r[0].fields, vec!["spec.template"]);
        assert!(r[0].fix.contains("initContainer"), "{}", r[0].fix);
        assert!(
            r[0].fix
                .contains("kustomize.toolkit.fluxcd.io/force: enabled")
                && r[0]
                    .fix
                    .contains("`spec.force: true` on Kustomization flux-system/apps")
                && r[0].fix.contains("it runs again"),
            "{}",
            r[0].fix
        );
    }

    /// kustomize-controller appends the partial apply's change log after the error.
    #[test]
    fn the_change_log_after_the_error_is_not_read_as_the_message() {
        let m = "Job/apps/migrate dry-run failed (Invalid): Job.batch \"migrate\" is invalid: spec.template: Invalid value: core.PodTemplateSpec{}: field is immutable\nConfigMap/apps/settings configured\n";
        let r = refusals(m, KS);
        assert_eq!(r.len(), 1);
        assert!(
            r[0].message.ends_with("field is immutable"),
            "{}",
            r[0].message
        );
    }

    #[test]
    fn another_immutable_field_names_object_field_and_force() {
        let m = "Deployment/web/web dry-run failed (Invalid): Deployment.apps \"web\" is invalid: [spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable, spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`]";
        let r = refusals(m, KS);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].kind, RefusalKind::Immutable);
        assert_eq!(r[0].fields, vec!["spec.selector"]);
        assert!(!r[0].fix.contains("initContainer"), "{}", r[0].fix);
        assert!(
            r[0].fix
                .contains("Deployment/web/web: spec.selector cannot change")
                && r[0].fix.contains("spec.force: true"),
            "{}",
            r[0].fix
        );
    }

    #[test]
    fn other_validation_is_invalid_and_force_does_not_help() {
        let m = "Deployment/web/web dry-run failed (Invalid): Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0";
        let r = refusals(m, KS);
        assert_eq!(r[0].kind, RefusalKind::Invalid);
        assert_eq!(r[0].fields, vec!["spec.replicas"]);
        assert!(r[0].fix.contains("does not help"), "{}", r[0].fix);
    }

    #[test]
    fn admission_denials_name_the_policy_or_webhook() {
        let m = "Deployment/web/web dry-run failed (Invalid): deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'no-latest' with binding 'no-latest' denied request: images must not use the latest tag";
        let r = refusals(m, KS);
        assert_eq!(r[0].kind, RefusalKind::AdmissionDenied);
        assert_eq!(
            r[0].by.as_deref(),
            Some("ValidatingAdmissionPolicy no-latest (binding no-latest)")
        );
        assert!(
            r[0].fix.contains("images must not use the latest tag"),
            "{}",
            r[0].fix
        );
        let w = "ConfigMap/a/b dry-run failed (Forbidden): admission webhook \"deny.example.com\" denied the request: no";
        let r = refusals(w, KS);
        assert_eq!(r[0].kind, RefusalKind::AdmissionDenied);
        assert_eq!(
            r[0].by.as_deref(),
            Some("admission webhook deny.example.com")
        );
    }

    #[test]
    fn rbac_names_the_impersonated_service_account() {
        let m = "Job/apps/migrate dry-run failed (Forbidden): jobs.batch \"migrate\" is forbidden: User \"system:serviceaccount:apps:deployer\" cannot patch resource \"jobs\" in API group \"batch\" in the namespace \"apps\"";
        let r = refusals(m, KS);
        assert_eq!(r[0].kind, RefusalKind::Forbidden);
        assert!(
            r[0].fix.starts_with("ServiceAccount apps/deployer (spec.serviceAccountName of Kustomization flux-system/apps")
                && r[0].fix.contains("may not patch jobs (API group batch) in namespace apps"),
            "{}",
            r[0].fix
        );
    }

    #[test]
    fn failures_a_rerun_may_pass_are_not_refusals() {
        for m in [
            "Deployment/web/web dry-run failed (InternalError): Internal error occurred: failed calling webhook \"x.example.com\": failed to call webhook: Post \"https://x.svc:443/validate\": dial tcp 10.96.0.9:443: connect: connection refused",
            "Deployment/web/web dry-run failed (Forbidden): deployments.apps \"web\" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=10, limited: pods=10",
            "ConfigMap/web/c dry-run failed (Forbidden): configmaps \"c\" is forbidden: unable to create new content in namespace web because it is being terminated",
            "failed to decode Kubernetes YAML from /tmp/kustomization-1/x.yaml: missing Resource metadata",
        ] {
            assert_eq!(refusals(m, KS), vec![], "{m}");
        }
    }
}
