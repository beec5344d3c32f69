//! Shared set-up of the release tests: ONE dev-profile dist per `cargo test` run.
//!
//! The archives are packed from the binaries `cargo test --workspace` itself builds: the
//! set-up runs `cargo test --workspace --no-run` (the very build the outer `cargo test
//! --workspace` just did, same packages, profile and features, so cargo finds it fresh and
//! compiles nothing) and packs `<target>/debug/kubectl-*`. A `cargo build -p kubectl-...` here
//! would resolve features for the plugins alone (resolver 2), compile the dependency graph a
//! second time and take minutes. All release tests live in this one test binary, so the
//! archives are packed once per run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use xtask::dist::{self, DistOptions, DistReport};

/// Workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A dev-profile dist of every plugin for the host, into a scratch directory under cargo's
/// target tmp dir, with manifests written there too (never into krew-manifests/ or
/// flux-plugins/).
pub struct Built {
    /// Archives and `.sha256` files.
    pub dist_dir: PathBuf,
    /// What dist reported.
    pub report: DistReport,
}

/// The cargo output directory of the test build (`<target_directory>/debug`), after making
/// sure it holds the current binaries of the whole workspace.
fn test_build_bin_dir() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut inner = Command::new(&cargo);
    inner
        .current_dir(root())
        .args(["test", "--workspace", "--no-run"]);
    let status = outer_env(&mut inner)
        .status()
        .expect("run cargo test --no-run");
    assert!(status.success(), "cargo test --workspace --no-run failed");
    let out = Command::new(&cargo)
        .current_dir(root())
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .expect("run cargo metadata");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata json");
    PathBuf::from(v["target_directory"].as_str().expect("target_directory")).join("debug")
}

/// `cmd` with the environment of the `cargo test` that started this test, without what cargo
/// adds for a test process (a different environment could make a cargo run inside it rebuild
/// instead of finding its work).
pub fn outer_env(inner: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        let added = k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_BIN_EXE_")
            || matches!(
                k.as_ref(),
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_TARGET_TMPDIR"
                    | "CARGO_RUSTC_CURRENT_DIR"
                    | "OUT_DIR"
            );
        if added {
            inner.env_remove(k.as_ref());
        }
    }
    inner
}

/// Packs once per test process (see the module docs).
pub fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let scratch = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("xtask-release-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        let dist_dir = scratch.join("dist");
        let report = dist::dist(&DistOptions {
            root: root(),
            target: None,
            version: Some("v0.1.0".into()),
            profile: "dev".into(),
            out_dir: dist_dir.clone(),
            manifests_dir: Some(scratch.join("krew-manifests")),
            flux_manifests_dir: Some(scratch.join("flux-plugins")),
            sha_files: Vec::new(),
            plugins: Vec::new(),
            prebuilt_bin_dir: Some(test_build_bin_dir()),
        })
        .unwrap_or_else(|e| panic!("xtask dist --profile dev failed: {e}"));
        Built { dist_dir, report }
    })
}
