//! Where the Go-built binaries and the Flux CRDs are: `tests/realcluster/build.sh` builds them
//! once into a cache and prints the bin directory; `CLUSTER_LOOP_REALCLUSTER_BIN` overrides.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::Error;

/// The kube-apiserver release the kube module pins (`kube/go.mod`; a unit test keeps the two
/// in step).
pub const KUBE_VERSION: &str = "v1.36.3";

/// Current kustomize-controller release built by the flux module.
pub const KC_CURRENT: &str = "v1.9.6";
/// The v1.7 generation of kustomize-controller built by the kc17 module.
pub const KC_V17: &str = "v1.7.3";
/// source-controller release built by the flux module.
pub const SC_CURRENT: &str = "v1.9.6";

/// The bin directory (contains `kube-apiserver`, `kube-controller-manager`, `etcd`,
/// `source-controller-<v>`, `kustomize-controller-<v>`, and as links into their own modules'
/// cache dirs `image-reflector-controller-<v>`, `image-automation-controller-<v>`,
/// `helm-controller-<v>`) and the CRD directory beside it (`../crds/<controller>-<v>/`). Builds on first use (cold: tens of minutes; progress on
/// stderr). Errors: [`Error::Setup`] when the build fails.
pub fn bin_dir() -> Result<&'static Path, Error> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(d) = std::env::var_os("CLUSTER_LOOP_REALCLUSTER_BIN") {
            return Ok(PathBuf::from(d));
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("build.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("run {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} failed ({}); run it by hand to see why (it needs Go 1.26 and the Go module proxy)",
                script.display(),
                out.status
            ));
        }
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok(PathBuf::from(dir))
    })
    .as_ref()
    .map(PathBuf::as_path)
    .map_err(|e| Error::Setup(e.clone()))
}

/// A binary in [`bin_dir`], e.g. `format!("helm-controller-{HELM_CURRENT}")`.
/// Errors: [`Error::Setup`] when it is missing.
pub fn bin(name: &str) -> Result<PathBuf, Error> {
    let p = bin_dir()?.join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(Error::Setup(format!(
            "{} is missing: rebuild with tests/realcluster/build.sh",
            p.display()
        )))
    }
}

/// CRD manifests released with `controller` at `version` (read from the controller's module in
/// the Go module cache by build.sh: `config/crd/bases/*.yaml`), as a resolved path.
pub fn crd_dir(controller: &str, version: &str) -> Result<PathBuf, Error> {
    let d = bin_dir()?
        .parent()
        .unwrap_or(Path::new("/"))
        .join("crds")
        .join(format!("{controller}-{version}"));
    // image/ and helm/ CRD dirs are symlinks into their modules' cache dirs: resolved, as
    // kubectl -f reads a symlink as a file.
    if d.is_dir()
        && let Ok(d) = std::fs::canonicalize(&d)
    {
        Ok(d)
    } else {
        Err(Error::Setup(format!("{} is missing", d.display())))
    }
}

/// image-reflector-controller release built by the image module (`image/go.mod`; ImageRepository,
/// ImagePolicy). The Go module proxy refuses the later releases tried
/// (v1.1.2, v1.2.5: 403 on 2026-12-01).
pub const IRC_CURRENT: &str = "v1.1.1";
/// image-automation-controller release built by the image module (`image/go.mod`;
/// ImageUpdateAutomation). The proxy refuses the later releases tried (v1.1.3, v1.2.5: 403).
/// Built with `github.com/fluxcd/pkg/git` v0.43.4 (required in `image/go.mod`) instead of the
/// v0.43.2 its own go.mod requires: the proxy refuses v0.43.2's zip (403); of that line it
/// lists v0.43.0 and v0.43.4.
pub const IAC_CURRENT: &str = "v1.1.2";
/// helm-controller release built by the helm module (`helm/go.mod`; HelmRelease). The newest
/// release the proxy serves of those tried (v1.4.5, v1.6.5: 403).
pub const HELM_CURRENT: &str = "v1.4.3";
/// go-containerregistry release whose `cmd/registry` and `cmd/crane` the image module builds
/// (binaries `registry-<v>`, `crane-<v>`): the version image-reflector-controller
/// [`IRC_CURRENT`] itself requires, so adding them changes none of its dependencies.
pub const GGCR_VERSION: &str = "v0.20.7";

#[cfg(test)]
mod tests {
    #[test]
    fn versions_match_the_go_modules() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let kube = std::fs::read_to_string(dir.join("kube/go.mod")).unwrap();
        assert!(kube.contains(&format!("k8s.io/kubernetes {}", super::KUBE_VERSION)));
        let flux = std::fs::read_to_string(dir.join("flux/go.mod")).unwrap();
        assert!(flux.contains(&format!(
            "github.com/fluxcd/kustomize-controller {}",
            super::KC_CURRENT
        )));
        assert!(flux.contains(&format!(
            "github.com/fluxcd/source-controller {}",
            super::SC_CURRENT
        )));
        let image = std::fs::read_to_string(dir.join("image/go.mod")).unwrap();
        assert!(image.contains(&format!(
            "github.com/fluxcd/image-reflector-controller {}",
            super::IRC_CURRENT
        )));
        assert!(image.contains(&format!(
            "github.com/fluxcd/image-automation-controller {}",
            super::IAC_CURRENT
        )));
        let helm = std::fs::read_to_string(dir.join("helm/go.mod")).unwrap();
        assert!(helm.contains(&format!(
            "github.com/fluxcd/helm-controller {}",
            super::HELM_CURRENT
        )));
        let kc17 = std::fs::read_to_string(dir.join("kc17/go.mod")).unwrap();
        assert!(kc17.contains(&format!(
            "github.com/fluxcd/kustomize-controller {}",
            super::KC_V17
        )));
    }
}
