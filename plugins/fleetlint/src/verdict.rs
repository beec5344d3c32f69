//! fleetlint's verdict on each Flux Kustomization's build: does kustomize-controller build it
//! (fetch the artifact, find `spec.path`, generate and build the kustomization, decrypt, run
//! post-build substitution), fail it, or is that unknown offline. The differential harness
//! (tests/fleetdiff) compares this verdict with the real controller's outcome.
//!
//! The build family is the rules whose error is a failed build of kustomize-controller v1.9
//! (`internal/controller/kustomization_controller.go` `reconcile`: `ArtifactFailed`
//! "kustomization path not found", `BuildFailed` for the generator, the kustomize build, the
//! decryptor and post-build substitution): FL001, FL002, FL031, FL032, FL034 and FL035 as
//! errors. FL033 (a substituteFrom input missing offline) and FL001 as a warning (a remote
//! resource that cannot be fetched here) say the build is unknown offline.

use crate::fleet::{FluxKs, SubstituteRef};
use crate::lint::Finding;
use crate::rules::Severity;
use serde_json::Value;
use std::sync::Arc;

/// The rules whose error means kustomize-controller fails the build.
pub const BUILD_RULES: &[&str] = &["FL001", "FL002", "FL031", "FL032", "FL034", "FL035"];

/// The rules whose finding leaves the build unknown offline (FL001 only as a warning).
pub const UNKNOWN_RULES: &[&str] = &["FL001", "FL033"];

/// fleetlint's verdict on one Kustomization's build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Build {
    /// The controller builds it (the apply may still fail: that is not the build).
    Pass,
    /// The controller fails the build (`BuildFailed`, or `ArtifactFailed` "kustomization path
    /// not found").
    Fail,
    /// Not knowable offline: a remote resource, an input made at run time, SOPS-encrypted
    /// content.
    Unknown,
    /// Not built here: its source is another repository (a tenant's), not followed.
    NotBuilt,
}

/// The verdict with the findings that decide it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildVerdict {
    /// The verdict.
    pub verdict: Build,
    /// The rule IDs of the deciding findings (empty for `pass` and `notBuilt`).
    pub rules: Vec<String>,
    /// Why: the first deciding finding's message, or what is unknown.
    pub reason: Option<String>,
}

/// A `postBuild.substituteFrom` input of a Kustomization and the object the overlay applies
/// under that kind, name and the Kustomization's namespace (after its own Kustomization's
/// substitution: what a cluster would hold), `None` when the overlay applies none.
#[derive(Debug, Clone)]
pub struct SubstituteInput {
    /// The reference.
    pub reference: SubstituteRef,
    /// The object, as applied.
    pub object: Option<Arc<Value>>,
}

/// True for a document SOPS encrypted (a top-level `sops` mapping with its `mac`, as `sops`
/// writes it): its values are unknown offline.
pub fn sops_encrypted(v: &Value) -> bool {
    v.get("sops").is_some_and(|s| {
        s.is_object() && (s.get("mac").is_some() || s.get("lastmodified").is_some())
    })
}

/// The verdict on Kustomization `k` from the findings of its overlay (before any suppression
/// or `--changed-since` filter; default severities), in one ordered table:
/// 1. its source is not followed: `notBuilt`;
/// 2. an error of [`BUILD_RULES`] names it (a build failure of the overlay's own directory,
///    with no Kustomization named, is the root's when `root`): `fail`;
/// 3. a finding of [`UNKNOWN_RULES`] names it (FL001 only as a warning): `unknown`;
/// 4. its `spec.path` still holds `${...}` (its parent's input is unknown offline): `unknown`;
/// 5. it applies a SOPS-encrypted object, or a `substituteFrom` input of it is one
///    (`encrypted` says which): `unknown`;
/// 6. otherwise `pass`.
pub fn decide(
    k: &FluxKs,
    root: bool,
    findings: &[Finding],
    encrypted: Option<String>,
) -> BuildVerdict {
    let id = k.id();
    let names = |f: &Finding| {
        f.kustomizations.contains(&id) || (root && f.kustomizations.is_empty() && f.rule == "FL001")
    };
    let of = |pick: &dyn Fn(&Finding) -> bool| -> Vec<&Finding> {
        findings.iter().filter(|f| names(f) && pick(f)).collect()
    };
    let verdict = |verdict: Build, fs: &[&Finding], reason: Option<String>| BuildVerdict {
        verdict,
        rules: {
            let mut r: Vec<String> = fs.iter().map(|f| f.rule.clone()).collect();
            r.dedup();
            r
        },
        reason: reason.or_else(|| fs.first().map(|f| f.message.clone())),
    };
    if !k.followed {
        return verdict(
            Build::NotBuilt,
            &[],
            Some(format!(
                "its source {}/{}/{} is not this repository",
                k.source.0, k.source.1, k.source.2
            )),
        );
    }
    let failed = of(&|f| f.severity == Severity::Error && BUILD_RULES.contains(&f.rule.as_str()));
    if !failed.is_empty() {
        return verdict(Build::Fail, &failed, None);
    }
    let unknown = of(&|f| {
        UNKNOWN_RULES.contains(&f.rule.as_str())
            && (f.rule != "FL001" || f.severity != Severity::Error)
    });
    if !unknown.is_empty() {
        return verdict(Build::Unknown, &unknown, None);
    }
    if let Some(p) = k.path.as_deref().filter(|p| p.contains("${")) {
        return verdict(
            Build::Unknown,
            &[],
            Some(format!(
                "spec.path {p:?} holds a variable its parent's substitution leaves unknown offline"
            )),
        );
    }
    if let Some(e) = encrypted {
        return verdict(
            Build::Unknown,
            &[],
            Some(format!("{e}: decryption needs keys offline lacks")),
        );
    }
    verdict(Build::Pass, &[], None)
}
