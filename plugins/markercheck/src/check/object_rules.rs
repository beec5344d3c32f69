//! Rules on the objects the run found (ImageUpdateAutomation, ImageRepository, ImagePolicy),
//! one function per object kind, in the order the run applies them.

use super::{Pinned, Scanned, Sink, display, has_tag_or_digest, pinned, value_name};
use crate::check::Severity;
use crate::objects::{Objects, Origin};

/// The Flux versions pinned in the tree, oldest first: (parsed, as written, file).
type Versions = [((u32, u32, u32), String, String)];

/// MC050 (messageTemplate uses a removed field) and MC052 (unsupported update strategy), per
/// ImageUpdateAutomation.
pub(super) fn automations(
    objects: &Objects,
    scans: &[Scanned],
    flux_versions: &Versions,
    out: &mut Sink,
) {
    for a in &objects.automations {
        let (file, line) = match &a.origin {
            Origin::File { path, line } => (path.to_string_lossy().into_owned(), *line),
            _ => (format!("cluster:{}/{}", a.namespace, a.name), 0),
        };
        let file = scans
            .iter()
            .find_map(|s| s.res.files.iter().find(|f| f.rel.to_string_lossy() == file))
            .map(|f| display(&f.abs))
            .unwrap_or(file);
        if let Some((t, tl)) = &a.message_template {
            for (field, repl) in [
                (".Updated", ".Changed"),
                (
                    ".Changed.ImageResult",
                    ".Changed.FileChanges or .Changed.Objects",
                ),
            ] {
                let hit = if field == ".Updated" {
                    t.match_indices(".Updated")
                        .any(|(i, _)| !t[i + 8..].starts_with(|c: char| c.is_alphanumeric()))
                } else {
                    t.contains(field)
                };
                if hit {
                    // image-automation-controller v1.0.0 (Flux v2.7.0) removed the field; the
                    // v1 API exists only from that version on, so an automation written as v1
                    // runs on a Flux that rejects the template
                    let stall = format!(
                        "the automation stalls with reason RemovedTemplateField (\"template uses removed '{field}' field\") as soon as there is something to commit"
                    );
                    let v1 = a.api_version.ends_with("/v1");
                    let (sev, msg) = match pinned(flux_versions, (2, 7, 0)) {
                        Pinned::AllBefore(v) if !v1 => (
                            Severity::Info,
                            format!(
                                "works on the Flux {v} pinned in this repository, but image-automation-controller v1.0.0 (Flux v2.7.0) removed '{field}': after upgrading to Flux v2.7.0 or later {stall}"
                            ),
                        ),
                        Pinned::AllFrom(v) | Pinned::Mixed(_, v) => (
                            Severity::Error,
                            format!(
                                "uses '{field}', removed in image-automation-controller v1.0.0 (Flux v2.7.0); on the Flux {v} pinned in this repository {stall}"
                            ),
                        ),
                        _ if v1 => (
                            Severity::Error,
                            format!(
                                "uses '{field}', removed in image-automation-controller v1.0.0 (Flux v2.7.0), which is the first to serve apiVersion {}: {stall}",
                                a.api_version
                            ),
                        ),
                        _ => (
                            Severity::Warning,
                            format!(
                                "uses '{field}': from Flux v2.7.0 (image-automation-controller v1.0.0) {stall}; no pinned Flux version found in the tree (gotk-components.yaml)"
                            ),
                        ),
                    };
                    out.severity(sev);
                    out.push(
                        "MC050",
                        file.clone(),
                        *tl,
                        1,
                        format!(
                            "ImageUpdateAutomation {}/{}: messageTemplate {msg}",
                            a.namespace, a.name
                        ),
                        format!("use {repl} (image-automation-controller v1.0.0 removed {field})"),
                    );
                }
            }
        }
        if !a.strategy.is_empty() && a.strategy != "Setters" {
            out.push(
                "MC052",
                file.clone(),
                line,
                1,
                format!(
                    "ImageUpdateAutomation {}/{}: spec.update.strategy {:?} is not supported (only Setters)",
                    a.namespace, a.name, a.strategy
                ),
                "set spec.update.strategy: Setters".into(),
            );
        }
    }
}

/// MC051: an image API version the pinned Flux no longer serves (image-reflector-controller,
/// image-automation-controller).
pub(super) fn removed_apis(
    objects: &Objects,
    scans: &[Scanned],
    flux_versions: &Versions,
    out: &mut Sink,
) {
    for (path, line, api, kind) in &objects.removed_api {
        let file = scans
            .iter()
            .find_map(|s| s.res.files.iter().find(|f| &f.rel == path))
            .map(|f| display(&f.abs))
            .unwrap_or(path.to_string_lossy().into_owned());
        // image-reflector-controller (ImagePolicy, ImageRepository) and
        // image-automation-controller (ImageUpdateAutomation) stopped serving v1beta1 in v1.0.0
        // (Flux v2.7.0) and v1beta2 in v1.2.0 (Flux v2.9.0): their CRDs (config/crd/bases) at
        // those tags, and flux2 manifests/crds/kustomization.yaml at v2.7.0 / v2.9.0
        let controller = if kind == "ImageUpdateAutomation" {
            "image-automation-controller"
        } else {
            "image-reflector-controller"
        };
        let (ctl_v, flux_v, from) = if api.ends_with("/v1beta2") {
            ("v1.2.0", "v2.9.0", (2, 9, 0))
        } else {
            ("v1.0.0", "v2.7.0", (2, 7, 0))
        };
        let removed = format!("{controller} {ctl_v} (Flux {flux_v}) no longer serves {api}");
        let (sev, msg) = match pinned(flux_versions, from) {
            Pinned::AllBefore(v) => (
                Severity::Info,
                format!(
                    "{kind} uses {api}, which the Flux {v} pinned in this repository serves; {removed}, so the apply fails after upgrading to Flux {flux_v} or later"
                ),
            ),
            Pinned::AllFrom(v) => (
                Severity::Error,
                format!(
                    "{kind} uses {api}: {removed}, and this repository pins Flux {v}: the apply fails"
                ),
            ),
            Pinned::Mixed(old, new) => (
                Severity::Error,
                format!(
                    "{kind} uses {api}: {removed}; this repository pins Flux {old} and {new}: the apply fails on the clusters running Flux {flux_v} or later"
                ),
            ),
            Pinned::Unknown => (
                Severity::Warning,
                format!(
                    "{kind} uses {api}: the apply fails from Flux {flux_v} ({removed}); no pinned Flux version found in the tree (gotk-components.yaml)"
                ),
            ),
        };
        out.severity(sev);
        out.push(
            "MC051",
            file,
            *line,
            1,
            msg,
            "use apiVersion image.toolkit.fluxcd.io/v1 (served from Flux v2.7.0)".into(),
        );
    }
}

/// MC031: an ImageRepository whose spec.image carries a tag or digest.
pub(super) fn repositories(objects: &Objects, scans: &[Scanned], out: &mut Sink) {
    for r in &objects.repositories {
        if has_tag_or_digest(&r.image) {
            let (file, line) = match &r.origin {
                Origin::File { path, .. } => (
                    scans
                        .iter()
                        .find_map(|s| s.res.files.iter().find(|f| &f.rel == path))
                        .map(|f| display(&f.abs))
                        .unwrap_or_default(),
                    r.image_line,
                ),
                _ => (format!("cluster:{}/{}", r.namespace, r.name), 0),
            };
            out.push(
                "MC031",
                file,
                line,
                1,
                format!(
                    "ImageRepository {}/{}: spec.image {:?} carries a tag or digest (rejected since image-reflector-controller v0.35)",
                    r.namespace, r.name, r.image
                ),
                format!("set spec.image: {}", value_name(&r.image)),
            );
        }
    }
}

/// MC060 (a latestRef UpdateWithSetters rejects) and MC072 (no ImagePolicy at all).
pub(super) fn policies(objects: &Objects, out: &mut Sink) {
    for p in &objects.policies {
        if let Some(l) = &p.latest
            && let Err(e) = l.validate()
        {
            out.push(
                "MC060",
                format!("policy {}/{}", p.namespace, p.name),
                0,
                0,
                format!(
                    "ImagePolicy {}/{} latestRef {:?}: {e}; UpdateWithSetters fails the whole run (\"encountered invalid image ref\")",
                    p.namespace,
                    p.name,
                    l.full()
                ),
                "fix the policy's repository or the --set value".into(),
            );
        }
    }
    if objects.policies.is_empty() {
        out.push("MC072", String::new(), 0, 0,
            "no ImagePolicies found in the tree, --policies, --from-cluster or --set: policy names and values not checked, nothing simulated".into(),
            "add --from-cluster, --policies FILE or --set ns:policy=REF".into());
    }
}
