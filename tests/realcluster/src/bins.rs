//! Where the Go-built binaries and the Flux CRDs are: `tests/realcluster/build.sh` builds them
//! once into a cache and prints the bin directory; `CLUSTER_LOOP_REALCLUSTER_BIN` overrides.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::Error;

/// The kube-apiserver release the kube module pins (`kube/go.mod`; a unit test keeps the two
/// in step).
pub const KUBE_VERSION: &str = "v1.36.3";

/// Current kustomize-controller release built by the flux module. v1.10.x (Flux 2.10) is listed
/// by the Go module proxy but cannot be built from it: the proxy refuses its dependencies
/// (`github.com/fluxcd/pkg/spiffe` v0.2.0, `pkg/masktoken` v0.10.0, `pkg/apis/crypto` v0.5.0,
/// `pkg/http/fetch` v0.30.1: 403, none of their versions listed), so v1.9.6 stays current
/// (tests/realcluster/README.md, "Not built here").
pub const KC_CURRENT: &str = "v1.9.6";
/// The v1.7 generation of kustomize-controller built by the kc17 module.
pub const KC_V17: &str = "v1.7.3";
/// source-controller release built by the flux module. v1.10.x: refused as
/// [`KC_CURRENT`]'s (also `pkg/artifact` v0.27.1, `sigstore/cosign/v3` v3.1.4: 403).
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
/// ImagePolicy): the one image-automation-controller [`IAC_CURRENT`] requires (its go.mod:
/// `image-reflector-controller/api v1.2.0`). The proxy refuses the later v1.2.5 (403).
pub const IRC_CURRENT: &str = "v1.2.0";
/// image-automation-controller release built by the image module (`image/go.mod`;
/// ImageUpdateAutomation). The proxy refuses the later v1.2.5 (403).
pub const IAC_CURRENT: &str = "v1.2.0";
/// helm-controller release built by the helm module (`helm/go.mod`; HelmRelease): the one the
/// flux CLI [`FLUX_CLI_VERSION`] (Flux 2.9) goes with (its go.mod: `helm-controller/api
/// v1.6.4`). Flux 2.10's v1.7.x is refused by the proxy (v1.7.0, v1.7.1: 403).
pub const HELM_CURRENT: &str = "v1.6.4";
/// Helm CLI release built by the helm module (`helm/go.mod` tool `helm.sh/helm/v4/cmd/helm`;
/// binary `helm-<v>`): the helm library helm-controller [`HELM_CURRENT`] itself requires, so
/// adding the CLI changes none of its dependencies. For the controller chart's `helm lint` and
/// `helm template` (issue 41).
pub const HELM_CLI_VERSION: &str = "v4.2.4";
/// krew release built by the krew module (`krew/go.mod`; binary `krew-<v>`), for the dist tests'
/// real `kubectl krew install`.
pub const KREW_VERSION: &str = "v0.4.3";
/// flux CLI release built from the fluxcli module's pin (`fluxcli/go.mod`; binary `flux-<v>`),
/// for the dist tests' real `flux plugin install`.
pub const FLUX_CLI_VERSION: &str = "v2.9.5";
/// go-containerregistry release whose `cmd/registry` and `cmd/crane` the image module builds
/// (binaries `registry-<v>`, `crane-<v>`): the version image-reflector-controller
/// [`IRC_CURRENT`] itself requires, so adding them changes none of its dependencies.
pub const GGCR_VERSION: &str = "v0.21.6";

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
        assert!(helm.contains(&format!("helm.sh/helm/v4 {}", super::HELM_CLI_VERSION)));
        let krew = std::fs::read_to_string(dir.join("krew/go.mod")).unwrap();
        assert!(krew.contains(&format!("sigs.k8s.io/krew {}", super::KREW_VERSION)));
        let fluxcli = std::fs::read_to_string(dir.join("fluxcli/go.mod")).unwrap();
        assert!(fluxcli.contains(&format!(
            "github.com/fluxcd/flux2/v2 {}",
            super::FLUX_CLI_VERSION
        )));
        let image_ggcr = std::fs::read_to_string(dir.join("image/go.mod")).unwrap();
        assert!(image_ggcr.contains(&format!(
            "github.com/google/go-containerregistry {}",
            super::GGCR_VERSION
        )));
        let kc17 = std::fs::read_to_string(dir.join("kc17/go.mod")).unwrap();
        assert!(kc17.contains(&format!(
            "github.com/fluxcd/kustomize-controller {}",
            super::KC_V17
        )));
    }
}
