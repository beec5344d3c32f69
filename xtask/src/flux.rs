//! Flux CLI plugin manifests (`flux plugin install`), from the same archives and checksums as
//! the krew manifests.
//!
//! Shape: flux2 pkg/plugin/types.go `Manifest` (`apiVersion: cli.fluxcd.io/v1beta1`,
//! `kind: Plugin`, `name`, `description`, `homepage`, `source`, `bin`, `versions[]` newest
//! first, each with `version` and `platforms[]` of `os`, `arch`, `url`, `checksum`
//! (`<algorithm>:<hex>`) and `extractPath`). How flux uses it:
//! - internal/plugin/catalog.go `FetchManifest` reads `<catalog base><name>.yaml` and checks
//!   `apiVersion` and `kind`; `ResolveVersion` takes the first version unless one is named
//!   (plain semver, `flux plugin install unstick@0.1.0`); `ResolvePlatform` matches `os`/`arch`
//!   exactly (Go's `GOOS`/`GOARCH`).
//! - internal/plugin/install.go `Install` downloads `url`, compares `sha256:<hex>` of the bytes
//!   with `checksum`, detects the format from the URL suffix (`.tar.gz`, `.zip`), extracts the
//!   first regular file whose path equals `extractPath` (when it contains `/`) or whose base name
//!   equals it, and writes it as `<plugin dir>/<bin>` (`.exe` appended on Windows) with mode
//!   0755, plus a receipt `<plugin dir>/flux-<name>.yaml`.
//! - internal/plugin/discovery.go: the plugin directory is `$FLUXCD_PLUGINS`, else
//!   `~/.fluxcd/plugins`; every executable regular file `flux-<name>` there is `flux <name>`
//!   (`plugin` and `help` are reserved), run with argv[0] = its full path (exec_unix.go).
//!
//! Our archives hold `kubectl-<name>` (krew's layout); `bin` is `flux-<name>` and
//! `extractPath` names the archived binary, so one archive serves both installers. The plugins
//! read their invoked name and print `flux <name>` usage when run as `flux-<name>`.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::manifest::{self, REPOSITORY, Sums};
use crate::platform::{Platform, RELEASE_PLATFORMS};
use crate::plugins::Plugin;

/// flux2 pkg/plugin `APIVersion`.
pub const API_VERSION: &str = "cli.fluxcd.io/v1beta1";
/// flux2 pkg/plugin `PluginKind`.
pub const KIND: &str = "Plugin";
/// Executable prefix flux discovers (internal/plugin/discovery.go `pluginPrefix`).
pub const BIN_PREFIX: &str = "flux-";
/// Plugin names flux reserves (discovery.go `reservedNames`).
pub const RESERVED: [&str; 2] = ["plugin", "help"];
/// Default directory of the committed Flux plugin manifests.
pub const DEFAULT_DIR: &str = "flux-plugins";

/// flux2 pkg/plugin `Manifest`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FluxManifest {
    /// `cli.fluxcd.io/v1beta1`.
    #[serde(rename = "apiVersion", default)]
    pub api_version: String,
    /// `Plugin`.
    #[serde(default)]
    pub kind: String,
    /// The word after `flux`: `unstick` for `flux unstick`.
    #[serde(default)]
    pub name: String,
    /// One-line summary.
    #[serde(default)]
    pub description: String,
    /// Documentation URL.
    #[serde(default)]
    pub homepage: String,
    /// Source repository URL.
    #[serde(default)]
    pub source: String,
    /// Installed file name, `flux-<name>`.
    #[serde(default)]
    pub bin: String,
    /// Versions, newest first.
    #[serde(default)]
    pub versions: Vec<FluxVersion>,
}

/// flux2 pkg/plugin `Version`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FluxVersion {
    /// Plain semantic version (no `v`): `0.1.0`.
    #[serde(default)]
    pub version: String,
    /// One entry per platform.
    #[serde(default)]
    pub platforms: Vec<FluxPlatform>,
}

/// flux2 pkg/plugin `Platform`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FluxPlatform {
    /// Go `GOOS`.
    #[serde(default)]
    pub os: String,
    /// Go `GOARCH`.
    #[serde(default)]
    pub arch: String,
    /// Download URL of the archive.
    #[serde(default)]
    pub url: String,
    /// `sha256:<64 lowercase hex>` of the archive.
    #[serde(default)]
    pub checksum: String,
    /// The binary's path inside the archive.
    #[serde(rename = "extractPath", default)]
    pub extract_path: String,
}

/// The installed file name of a plugin: `flux-<flux name>` (`flux-mcp` for gitops-mcp).
pub fn bin_name(plugin: &Plugin) -> String {
    format!("{BIN_PREFIX}{}", plugin.flux_name)
}

/// Path of a plugin's Flux manifest in a directory: `<dir>/<flux name>.yaml` (the catalog
/// layout: catalog.go fetches `<base><name>.yaml` for `flux plugin install <name>`).
pub fn manifest_path(dir: &Path, plugin: &Plugin) -> PathBuf {
    dir.join(format!("{}.yaml", plugin.flux_name))
}

fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// Renders the Flux manifest of `plugin` at `version` (`v`-prefixed, as the archives are named)
/// with one platform per release platform whose archive has a checksum in `sums`, in
/// [`RELEASE_PLATFORMS`] order; platforms without one are left out, never given a placeholder.
///
/// Returns the YAML text and the platforms listed. Errors when no platform has a checksum.
pub fn render(
    plugin: &Plugin,
    version: &str,
    sums: &Sums,
) -> Result<(String, Vec<Platform>), String> {
    let plain = version.strip_prefix('v').unwrap_or(version);
    let mut platforms = String::new();
    let mut listed = Vec::new();
    for platform in RELEASE_PLATFORMS {
        let archive = manifest::archive_name(plugin, version, &platform);
        let Some(sha) = sums.get(&archive) else {
            continue;
        };
        platforms.push_str(&format!(
            "  - os: {}\n    arch: {}\n    url: {}\n    checksum: sha256:{sha}\n    extractPath: {}\n",
            platform.os,
            platform.arch,
            manifest::archive_uri(&archive, version),
            platform.exe_name(plugin.package),
        ));
        listed.push(platform);
    }
    if listed.is_empty() {
        return Err(format!(
            "{}: no archive checksum known for version {version} on any platform",
            plugin.name
        ));
    }
    let text = format!(
        "# Generated by `cargo run -p xtask -- dist` (xtask/src/flux.rs): do not edit.\n\
         # Flux CLI plugin manifest (flux2 pkg/plugin/types.go). Same archives and checksums as\n\
         # krew-manifests/{krew}.yaml; only platforms whose archive sha256 is known are listed.\n\
         apiVersion: {API_VERSION}\n\
         kind: {KIND}\n\
         name: {name}\n\
         description: {description}\n\
         homepage: {REPOSITORY}\n\
         source: {REPOSITORY}\n\
         bin: {bin}\n\
         versions:\n\
         - version: {plain}\n\
         \x20 platforms:\n{platforms}",
        name = plugin.flux_name,
        krew = plugin.name,
        description = yaml_str(plugin.short_description),
        bin = bin_name(plugin),
    );
    Ok((text, listed))
}

/// Parses a Flux manifest file.
///
/// Errors: a message naming the file and the YAML error.
pub fn parse(path: &Path) -> Result<FluxManifest, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_saphyr::from_str(&text)
        .map_err(|e| format!("{}: invalid Flux plugin manifest YAML: {e}", path.display()))
}

/// Checks a Flux manifest for a plugin named `name` (the file name without `.yaml`) against
/// what flux2 reads (catalog.go, install.go, discovery.go; see the module docs) plus our own
/// rules: `bin` is `flux-<name>`, versions are plain semver, every platform is a release
/// platform at most once, `url` is https, `checksum` is `sha256:` + 64 lowercase hex,
/// `extractPath` is a relative path inside the archive.
///
/// Errors: every rule broken, one message each (empty means valid).
pub fn validate_manifest(name: &str, m: &FluxManifest) -> Vec<String> {
    let mut errs = Vec::new();
    if m.api_version != API_VERSION {
        errs.push(format!(
            "unsupported apiVersion {:?} (flux expects {API_VERSION:?})",
            m.api_version
        ));
    }
    if m.kind != KIND {
        errs.push(format!(
            "unexpected kind {:?} (flux expects {KIND:?})",
            m.kind
        ));
    }
    if m.name != name {
        errs.push(format!(
            "name {:?} does not match the file name {name:?} (flux fetches <name>.yaml)",
            m.name
        ));
    }
    if !crate::validate::is_safe_plugin_name(&m.name) || RESERVED.contains(&m.name.as_str()) {
        errs.push(format!(
            "name {:?} cannot be a flux command word (^[\\w-]+$, not plugin/help)",
            m.name
        ));
    }
    if m.description.trim().is_empty() || m.description.contains('\n') {
        errs.push("description must be one non-empty line".into());
    }
    let want_bin = format!("{BIN_PREFIX}{}", m.name);
    if m.bin != want_bin {
        errs.push(format!(
            "bin {:?} must be {want_bin:?}: flux discovers flux-<name> executables",
            m.bin
        ));
    }
    for url in [&m.homepage, &m.source] {
        if !url.is_empty() && !url.starts_with("https://") {
            errs.push(format!("{url:?} must be an https:// URL"));
        }
    }
    if m.versions.is_empty() {
        errs.push("no versions (flux: plugin has no versions)".into());
    }
    for (i, v) in m.versions.iter().enumerate() {
        if v.version.starts_with('v') {
            errs.push(format!(
                "versions[{i}].version {:?}: flux versions are plain semver (flux plugin install NAME@0.1.0)",
                v.version
            ));
        } else if let Err(e) = crate::validate::parse_semver(&format!("v{}", v.version)) {
            errs.push(format!("versions[{i}].version: {e}"));
        }
        if v.platforms.is_empty() {
            errs.push(format!("versions[{i}] has no platforms"));
        }
        let mut seen = Vec::new();
        for (j, p) in v.platforms.iter().enumerate() {
            let at = format!("versions[{i}].platforms[{j}]");
            if Platform::from_labels(&p.os, &p.arch).is_none() {
                errs.push(format!(
                    "{at}: {}/{} is not a release platform",
                    p.os, p.arch
                ));
            }
            if seen.contains(&(p.os.as_str(), p.arch.as_str())) {
                errs.push(format!("{at}: {}/{} listed twice", p.os, p.arch));
            }
            seen.push((p.os.as_str(), p.arch.as_str()));
            if !p.url.starts_with("https://") {
                errs.push(format!("{at}: url {:?} must be an https:// URL", p.url));
            }
            if !(p.url.ends_with(".tar.gz") || p.url.ends_with(".zip")) {
                errs.push(format!(
                    "{at}: url {:?} must end in .tar.gz or .zip (flux detects the archive format from it)",
                    p.url
                ));
            }
            match p.checksum.strip_prefix("sha256:") {
                Some(hex) if manifest::is_sha256(hex) => {}
                _ => errs.push(format!(
                    "{at}: checksum {:?} must be sha256:<64 lowercase hex>",
                    p.checksum
                )),
            }
            if p.extract_path.is_empty()
                || p.extract_path.starts_with('/')
                || p.extract_path.split('/').any(|c| c == ".." || c.is_empty())
            {
                errs.push(format!(
                    "{at}: extractPath {:?} must be a relative path inside the archive",
                    p.extract_path
                ));
            }
        }
    }
    errs
}

/// Reads and validates a Flux manifest file (name from the file name, `.yaml`).
///
/// Errors: every rule broken, each prefixed with the path.
pub fn validate_file(path: &Path) -> Result<FluxManifest, Vec<String>> {
    let shown = path.display().to_string();
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".yaml"))
        .ok_or_else(|| vec![format!("{shown}: expected a <name>.yaml file")])?
        .to_owned();
    let m = parse(path).map_err(|e| vec![e])?;
    let errs = validate_manifest(&name, &m);
    if errs.is_empty() {
        Ok(m)
    } else {
        Err(errs.into_iter().map(|e| format!("{shown}: {e}")).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sums(version: &str, plugin: &Plugin) -> Sums {
        let mut s = Sums::new();
        for p in RELEASE_PLATFORMS {
            s.insert(
                manifest::archive_name(plugin, version, &p),
                format!("{:064x}", p.os.len() * 10 + p.arch.len()),
            );
        }
        s
    }

    #[test]
    fn rendered_manifest_is_valid_and_names_the_archived_binary() {
        let plugin = crate::plugins::find("unstick").unwrap();
        let (text, listed) = render(&plugin, "v1.2.3", &sums("v1.2.3", &plugin)).unwrap();
        assert_eq!(listed.len(), 5);
        let m: FluxManifest = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(validate_manifest("unstick", &m), Vec::<String>::new());
        assert_eq!(m.bin, "flux-unstick");
        assert_eq!(m.versions[0].version, "1.2.3");
        let win = &m.versions[0].platforms[4];
        assert_eq!((win.os.as_str(), win.arch.as_str()), ("windows", "amd64"));
        assert_eq!(win.extract_path, "kubectl-unstick.exe");
        assert!(
            win.url
                .ends_with("/v1.2.3/kubectl-unstick_v1.2.3_windows_amd64.zip")
        );
    }

    #[test]
    fn each_rule_rejects() {
        let plugin = crate::plugins::find("cutover").unwrap();
        let (good, _) = render(&plugin, "v0.1.0", &sums("v0.1.0", &plugin)).unwrap();
        let cases = [
            (
                good.replace("cli.fluxcd.io/v1beta1", "cli.fluxcd.io/v1"),
                "apiVersion",
            ),
            (good.replace("kind: Plugin", "kind: PluginCatalog"), "kind"),
            (
                good.replace("bin: flux-cutover", "bin: kubectl-cutover"),
                "bin",
            ),
            (
                good.replace("- version: 0.1.0", "- version: v0.1.0"),
                "plain semver",
            ),
            (
                good.replace("- version: 0.1.0", "- version: 0.1"),
                "MAJOR.MINOR.PATCH",
            ),
            (
                good.replacen("checksum: sha256:", "checksum: ", 1),
                "checksum",
            ),
            (
                good.replacen("checksum: sha256:0", "checksum: sha256:X", 1),
                "checksum",
            ),
            (
                good.replacen("arch: arm64", "arch: amd64", 1),
                "listed twice",
            ),
            (
                good.replacen("arch: arm64", "arch: s390x", 1),
                "release platform",
            ),
            (good.replacen("url: https://", "url: http://", 1), "https"),
            (
                good.replacen("extractPath: kubectl-cutover", "extractPath: ../x", 1),
                "extractPath",
            ),
            (good.replace("name: cutover", "name: other"), "file name"),
        ];
        for (text, want) in cases {
            assert_ne!(text, good, "{want}: case did not change the manifest");
            let m: FluxManifest = serde_saphyr::from_str(&text).unwrap();
            let errs = validate_manifest("cutover", &m);
            assert!(
                errs.iter().any(|e| e.contains(want)),
                "expected an error with {want:?}, got {errs:?}"
            );
        }
    }
}
