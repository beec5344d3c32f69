//! cluster-loop-controller's OCI image, made by `xtask image` (dev profile, the musl target)
//! and pushed with the real crane to the real registry (go-containerregistry's `cmd/crane`
//! and `cmd/registry` at [`GGCR_VERSION`], built by tests/realcluster/build.sh), then read
//! back with crane as a runtime would: its config (entrypoint, user, platform, labels), its
//! filesystem (`crane export`: the one binary, no shell), and the binary run alone in that
//! filesystem (`chroot`: no C library, no loader, nothing else).
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::path::Path;
use std::process::Command;

use realcluster::bins::GGCR_VERSION;
use realcluster::oci::OciRegistry;
use serde_json::Value;

use crate::common;

fn crane(crane: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new(crane).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "crane {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn the_controller_image_is_one_static_binary_with_no_shell_run_as_non_root() {
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let logs = scratch.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let reg = OciRegistry::start(&logs).expect("the real registry starts");
    let crane_bin = realcluster::bins::bin(&format!("crane-{GGCR_VERSION}")).unwrap();
    let reference = format!("{}/cluster-loop-controller:test", reg.host());

    let mut xtask = Command::new(env!("CARGO_BIN_EXE_xtask"));
    xtask.current_dir(common::root()).args([
        "image",
        "--push",
        &reference,
        "--profile",
        "dev",
        "--version",
        "v0.1.0",
        "--crane",
        crane_bin.to_str().unwrap(),
        "--out-dir",
        scratch.path().to_str().unwrap(),
    ]);
    let out = common::outer_env(&mut xtask).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "xtask image failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The pushed image by digest, as the registry names it.
    let digest = String::from_utf8(crane(&crane_bin, &["digest", &reference])).unwrap();
    let by_digest = format!("{}/cluster-loop-controller@{}", reg.host(), digest.trim());
    assert!(stdout.starts_with(&by_digest), "{stdout}");

    // The config a runtime reads.
    let cfg: Value = serde_json::from_slice(&crane(&crane_bin, &["config", &reference])).unwrap();
    assert_eq!(cfg["os"], "linux", "{cfg:#}");
    assert_eq!(cfg["architecture"], "amd64", "{cfg:#}");
    assert_eq!(
        cfg["config"]["Entrypoint"],
        serde_json::json!(["/cluster-loop-controller"]),
        "{cfg:#}"
    );
    assert_eq!(cfg["config"]["User"], "65534:65534", "{cfg:#}");
    let labels = &cfg["config"]["Labels"];
    assert_eq!(labels["org.opencontainers.image.version"], "v0.1.0");
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");

    // Its filesystem: the one binary, executable, owned by root; no shell, nothing else.
    let fs = crane(&crane_bin, &["export", &reference, "-"]);
    let mut entries = Vec::new();
    let root = scratch.path().join("rootfs");
    std::fs::create_dir_all(&root).unwrap();
    let mut ar = tar::Archive::new(&fs[..]);
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        let path = e.path().unwrap().display().to_string();
        entries.push((path, e.header().mode().unwrap(), e.header().uid().unwrap()));
        e.unpack_in(&root).unwrap();
    }
    assert_eq!(
        entries,
        vec![("cluster-loop-controller".to_string(), 0o755, 0)],
        "the image holds exactly the binary"
    );

    // Static by the system's own reading, and it runs alone in that filesystem.
    let bin = root.join("cluster-loop-controller");
    let ldd = Command::new("ldd").arg(&bin).output().unwrap();
    let ldd_says = format!(
        "{}{}",
        String::from_utf8_lossy(&ldd.stdout),
        String::from_utf8_lossy(&ldd.stderr)
    );
    assert!(
        ldd_says.contains("statically linked") || ldd_says.contains("not a dynamic executable"),
        "ldd: {ldd_says}"
    );
    // chroot's own path first: the child's environment is empty (the binary needs none).
    let path = std::env::var_os("PATH").unwrap_or_default();
    let chroot = std::env::split_paths(&path)
        .map(|d| d.join("chroot"))
        .find(|p| p.is_file())
        .expect("chroot (coreutils) must be on PATH");
    let run = Command::new(chroot)
        .arg(&root)
        .args(["/cluster-loop-controller", "--help"])
        .env_clear()
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && help.contains("--metrics-addr"),
        "the binary alone in the image's filesystem: {}\n{help}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
}
