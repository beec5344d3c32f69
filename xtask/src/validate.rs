//! krew's manifest rules, reimplemented from krew's source so CI can check our manifests
//! without krew:
//! - structural rules: krew internal/index/validation/validate.go `ValidatePlugin`,
//!   `validatePlatform`, `validateFiles`, `validateSelector`, `IsSafePluginName`;
//! - version: krew internal/installation/semver `Parse` (leading `v`, then apimachinery
//!   `version.ParseSemantic`);
//! - file rules: krew cmd/validate-krew-manifest/main.go (extension `.yaml`, name from file
//!   name, every platform matches a supported `<os, arch>`, no pair matched twice, a license file
//!   among the installed files);
//! - our own additions, stricter than krew: shortDescription at most 50 characters (what
//!   `kubectl krew search` shows), a non-empty description, `https://` URIs.

use std::path::Path;

use crate::manifest::{self, Manifest, PlatformSpec, Selector};
use crate::platform::KREW_SUPPORTED;

/// apiVersion krew accepts (krew pkg/constants `CurrentAPIVersion`).
pub const API_VERSION: &str = "krew.googlecontainertools.github.com/v1alpha2";

/// License file names krew's validator looks for among installed files, compared lowercase
/// (krew cmd/validate-krew-manifest/main.go `licenseFiles`).
pub const LICENSE_FILES: [&str; 8] = [
    "license",
    "license.txt",
    "license.md",
    "licenses",
    "licenses.txt",
    "licenses.md",
    "copying",
    "copying.txt",
];

const WINDOWS_FORBIDDEN: [&str; 22] = [
    "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8",
    "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9",
];

/// krew `IsSafePluginName`: matches Go's `^[\w-]+$` (`\w` is ASCII `[0-9A-Za-z_]`) and is not
/// a reserved Windows device name (case-insensitive).
pub fn is_safe_plugin_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !WINDOWS_FORBIDDEN
            .iter()
            .any(|f| f.eq_ignore_ascii_case(name))
}

/// krew semver `Parse`: `v` + apimachinery `ParseSemantic`: exactly `MAJOR.MINOR.PATCH` with
/// no zero-prefixed component, optional `-pre.release` (dot-separated `[0-9A-Za-z-]+`
/// identifiers, numeric ones not zero-prefixed) and optional `+build` metadata.
///
/// Errors: a message saying what is wrong.
pub fn parse_semver(v: &str) -> Result<(u64, u64, u64), String> {
    let rest = v
        .strip_prefix('v')
        .ok_or_else(|| format!("version string {v:?} not starting with 'v'"))?;
    let (rest, build) = match rest.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (rest, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (rest, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() != 3 {
        return Err(format!(
            "illegal version string {v:?}: need MAJOR.MINOR.PATCH"
        ));
    }
    let mut nums = [0u64; 3];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("illegal version string {v:?}: component {p:?}"));
        }
        if p.len() > 1 && p.starts_with('0') {
            return Err(format!(
                "illegal zero-prefixed version component {p:?} in {v:?}"
            ));
        }
        nums[i] = p
            .parse()
            .map_err(|e| format!("illegal version component {p:?} in {v:?}: {e}"))?;
    }
    let ident_ok =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if let Some(pre) = pre {
        for id in pre.split('.') {
            if !ident_ok(id) {
                return Err(format!("illegal pre-release identifier {id:?} in {v:?}"));
            }
            if id.bytes().all(|b| b.is_ascii_digit()) && id.len() > 1 && id.starts_with('0') {
                return Err(format!("illegal zero-prefixed pre-release {id:?} in {v:?}"));
            }
        }
    }
    if let Some(build) = build
        && !build.split('.').all(ident_ok)
    {
        return Err(format!("illegal build metadata {build:?} in {v:?}"));
    }
    Ok((nums[0], nums[1], nums[2]))
}

fn validate_selector(sel: Option<&Selector>) -> Result<(), String> {
    let sel = sel.ok_or("invalid platform selector: nil selector is not supported")?;
    let labels_empty = sel.match_labels.is_none();
    let exprs_empty = sel.match_expressions.as_ref().is_none_or(|e| e.is_empty());
    if labels_empty && exprs_empty {
        return Err("invalid platform selector: empty selector is not supported".into());
    }
    let keys = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .chain(
            sel.match_expressions
                .iter()
                .flatten()
                .map(|r| r.key.as_str()),
        );
    for key in keys {
        if key != "os" && key != "arch" {
            return Err(format!(
                "invalid platform selector: key {key:?} not supported"
            ));
        }
    }
    if sel.match_labels.as_ref().is_some_and(|m| m.is_empty()) {
        return Err("invalid platform selector: `matchLabels` specified but empty".into());
    }
    if sel.match_expressions.as_ref().is_some_and(|m| m.is_empty()) {
        return Err("invalid platform selector: `matchExpressions` specified but empty".into());
    }
    for r in sel.match_expressions.iter().flatten() {
        match r.operator.as_str() {
            "In" | "NotIn" if r.values.is_empty() => {
                return Err(format!(
                    "invalid platform selector: operator {} on {:?} needs values",
                    r.operator, r.key
                ));
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => {
                return Err(format!(
                    "invalid platform selector: operator {other:?} is not a label selector operator"
                ));
            }
        }
    }
    Ok(())
}

fn validate_platform(p: &PlatformSpec) -> Result<(), String> {
    if p.uri.is_empty() {
        return Err("`uri` has to be set".into());
    }
    if !p.uri.starts_with("https://") {
        return Err(format!("`uri` {:?} must be an https:// URL", p.uri));
    }
    if p.sha256.is_empty() {
        return Err("`sha256` sum has to be set".into());
    }
    if !manifest::is_sha256(&p.sha256) {
        return Err(format!(
            "`sha256` value {} is not valid, must match pattern ^[a-f0-9]{{64}}$",
            p.sha256
        ));
    }
    if p.bin.is_empty() {
        return Err("`bin` has to be set".into());
    }
    if let Some(files) = &p.files {
        if files.is_empty() {
            return Err("`files` is invalid: `files` has to be unspecified or non-empty".into());
        }
        for op in files {
            if op.from.is_empty() {
                return Err("`files` is invalid: `from` field has to be set".into());
            }
            if op.to.is_empty() {
                return Err("`files` is invalid: `to` field has to be set".into());
            }
        }
    }
    validate_selector(p.selector.as_ref())
}

/// Validates a parsed manifest as krew would for a plugin named `name` (the file name without
/// `.yaml`), plus our stricter documentation rules.
///
/// Errors: every rule broken, one message each (empty `Vec` means valid).
pub fn validate_manifest(name: &str, m: &Manifest) -> Vec<String> {
    let mut errs = Vec::new();
    if m.api_version != API_VERSION {
        errs.push(format!(
            "plugin manifest has apiVersion={:?}, not supported (want {API_VERSION:?})",
            m.api_version
        ));
    }
    if m.kind != "Plugin" {
        errs.push(format!(
            "plugin manifest has kind={:?}, but only \"Plugin\" is supported",
            m.kind
        ));
    }
    if !is_safe_plugin_name(name) {
        errs.push(format!(
            "the plugin name {name:?} is not allowed, must match \"^[\\w-]+$\""
        ));
    }
    if m.metadata.name != name {
        errs.push(format!(
            "plugin should be named {name:?}, not {:?}",
            m.metadata.name
        ));
    }
    let sd = &m.spec.short_description;
    if sd.is_empty() {
        errs.push("should have a short description".into());
    }
    if sd.contains(['\r', '\n']) {
        errs.push("should not have line breaks in short description".into());
    }
    if sd.chars().count() > 50 {
        errs.push(format!(
            "shortDescription is {} characters; `kubectl krew search` shows 50",
            sd.chars().count()
        ));
    }
    if m.spec.description.trim().is_empty() {
        errs.push("should have a description".into());
    }
    if m.spec.platforms.is_empty() {
        errs.push("should have a platform specified".into());
    }
    if m.spec.version.is_empty() {
        errs.push("should have a version specified".into());
    } else if let Err(e) = parse_semver(&m.spec.version) {
        errs.push(format!("failed to parse plugin version: {e}"));
    }
    for (i, p) in m.spec.platforms.iter().enumerate() {
        if let Err(e) = validate_platform(p) {
            errs.push(format!("spec.platforms[{i}] is badly constructed: {e}"));
        }
    }
    // cmd/validate-krew-manifest: every platform is used, no <os,arch> selected twice.
    for (i, p) in m.spec.platforms.iter().enumerate() {
        if let Some(sel) = &p.selector
            && !KREW_SUPPORTED
                .iter()
                .any(|(os, arch)| sel.matches(os, arch))
        {
            errs.push(format!(
                "spec.platform[{i}]'s selector doesn't match any supported platforms"
            ));
        }
    }
    for (os, arch) in KREW_SUPPORTED {
        let idx: Vec<usize> = m
            .spec
            .platforms
            .iter()
            .enumerate()
            .filter(|(_, p)| p.selector.as_ref().is_some_and(|s| s.matches(os, arch)))
            .map(|(i, _)| i)
            .collect();
        if idx.len() > 1 {
            errs.push(format!(
                "overlapping platform selectors found: multiple spec.platforms (at indexes {idx:?}) select {os}/{arch}"
            ));
        }
    }
    errs
}

/// Reads and validates a manifest file: extension `.yaml`, plugin name from the file name, then
/// [`validate_manifest`].
///
/// Errors: every rule broken, each message prefixed with the file path.
pub fn validate_file(path: &Path) -> Result<Manifest, Vec<String>> {
    let shown = path.display().to_string();
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some(name) = file_name.strip_suffix(".yaml") else {
        return Err(vec![format!(
            "{shown}: expected manifest extension \".yaml\""
        )]);
    };
    let m = manifest::parse(path).map_err(|e| vec![e])?;
    let errs = validate_manifest(name, &m);
    if errs.is_empty() {
        Ok(m)
    } else {
        Err(errs.into_iter().map(|e| format!("{shown}: {e}")).collect())
    }
}

/// `true` when one of `files` (relative paths) has a license-file base name krew accepts.
pub fn has_license_file<S: AsRef<str>>(files: &[S]) -> bool {
    files.iter().any(|f| {
        let base = f.as_ref().rsplit(['/', '\\']).next().unwrap_or("");
        LICENSE_FILES.contains(&base.to_ascii_lowercase().as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semver_rules() {
        assert_eq!(parse_semver("v0.1.0"), Ok((0, 1, 0)));
        assert!(parse_semver("v1.2.3-rc.1+build.5").is_ok());
        for bad in [
            "0.1.0",
            "v1.2",
            "v01.2.3",
            "v1.2.3-",
            "v1.2.3-01",
            "v1.2.x",
            "v",
        ] {
            assert!(parse_semver(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn plugin_names() {
        assert!(is_safe_plugin_name("unstick"));
        assert!(is_safe_plugin_name("get-all_x"));
        assert!(!is_safe_plugin_name("a/b"));
        assert!(!is_safe_plugin_name("con"));
        assert!(!is_safe_plugin_name(""));
    }

    #[test]
    fn license_names() {
        assert!(has_license_file(&["kubectl-x", "LICENSE"]));
        assert!(has_license_file(&["doc/Copying.txt"]));
        assert!(!has_license_file(&["LICENSE-APACHE", "README.md"]));
    }
}
