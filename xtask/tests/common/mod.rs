//! Shared set-up of the xtask integration tests: one dev-profile dist build per test binary.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use xtask::dist::{self, DistOptions, DistReport};

/// Workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A dev-profile dist of all four plugins for the host, into a scratch directory under
/// cargo's target tmp dir, with manifests written there too (never into krew-manifests/).
pub struct Built {
    /// Archives and `.sha256` files.
    pub dist_dir: PathBuf,
    /// What dist reported.
    pub report: DistReport,
}

/// Builds once per test process (the dev build of the plugins is shared with `cargo test`).
pub fn built(tag: &str) -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let scratch = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("xtask-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        let dist_dir = scratch.join("dist");
        let manifests_dir = scratch.join("krew-manifests");
        let report = dist::dist(&DistOptions {
            root: root(),
            target: None,
            version: Some("v0.1.0".into()),
            profile: "dev".into(),
            out_dir: dist_dir.clone(),
            manifests_dir: Some(manifests_dir.clone()),
            sha_files: Vec::new(),
            plugins: Vec::new(),
        })
        .unwrap_or_else(|e| panic!("xtask dist --profile dev failed: {e}"));
        Built { dist_dir, report }
    })
}
