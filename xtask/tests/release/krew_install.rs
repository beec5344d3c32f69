//! What `kubectl krew install --manifest=F --archive=A` does, for linux/amd64, with the real
//! archives and manifests `xtask dist` writes (dev profile, for speed), then real `kubectl`:
//! `kubectl plugin list` finds all four under KREW_ROOT/bin and `kubectl <name> --help` runs
//! each through kubectl's plugin dispatch.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use xtask::manifest;
use xtask::plugins::PLUGINS;

/// Absolute path of the real kubectl (CI installs it; `.ci/run` checks).
fn kubectl() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap();
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .expect("kubectl must be on PATH for the install test")
}

/// Environment of a user whose PATH is KREW_ROOT/bin plus the system directories only.
fn user_cmd(krew_root: &Path, home: &Path) -> Command {
    let mut c = Command::new(kubectl());
    c.env_clear()
        .env(
            "PATH",
            format!(
                "{}:/usr/local/bin:/usr/bin:/bin",
                krew_root.join("bin").display()
            ),
        )
        .env("HOME", home)
        .env("KREW_ROOT", krew_root);
    c
}

fn archive_of(name: &str) -> PathBuf {
    let built = common::built();
    let plugin = PLUGINS.iter().find(|p| p.name == name).unwrap();
    built.dist_dir.join(manifest::archive_name(
        plugin,
        &built.report.version,
        &built.report.platform,
    ))
}

#[test]
fn krew_install_then_kubectl_finds_and_runs_all_four() {
    let built = common::built();
    let tmp = tempfile::tempdir().unwrap();
    let krew_root = tmp.path().join("krew");
    let home = tmp.path().join("home");
    fs::create_dir_all(&home).unwrap();

    for (manifest_path, _) in &built.report.manifests {
        let m = manifest::parse(manifest_path).unwrap();
        let name = m.metadata.name.clone();
        let inst = xtask::install::install(
            &krew_root,
            manifest_path,
            &archive_of(&name),
            "linux",
            "amd64",
        )
        .unwrap();
        // KREW_ROOT layout (krew internal/environment Paths).
        assert_eq!(
            inst.install_dir,
            krew_root.join("store").join(&name).join("v0.1.0")
        );
        assert_eq!(
            inst.files,
            vec![
                "LICENSE".to_owned(),
                "README.md".into(),
                format!("kubectl-{name}")
            ]
        );
        let bin = inst.install_dir.join(format!("kubectl-{name}"));
        assert_eq!(
            fs::metadata(&bin).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert_eq!(
            inst.link,
            krew_root.join("bin").join(format!("kubectl-{name}"))
        );
        assert_eq!(fs::read_link(&inst.link).unwrap(), bin);
        assert_eq!(
            fs::read(inst.install_dir.join("LICENSE")).unwrap(),
            fs::read(common::root().join("LICENSE")).unwrap()
        );
        // The receipt is the manifest plus status.source, and still a valid manifest.
        let receipt = krew_root.join("receipts").join(format!("{name}.yaml"));
        let text = fs::read_to_string(&receipt).unwrap();
        assert!(
            text.ends_with("status:\n  source:\n    name: detached\n"),
            "{text}"
        );
        xtask::validate::validate_file(&receipt).unwrap();
        // krew refuses a second install of the same plugin.
        let again = xtask::install::install(
            &krew_root,
            manifest_path,
            &archive_of(&name),
            "linux",
            "amd64",
        )
        .unwrap_err();
        assert!(again.contains("already installed"), "{again}");
    }

    let out = user_cmd(&krew_root, &home)
        .args(["plugin", "list"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "kubectl plugin list failed:\n{stdout}\n{stderr}"
    );
    for p in PLUGINS {
        let want = krew_root.join("bin").join(p.package);
        assert!(
            stdout.lines().any(|l| l.trim() == want.to_string_lossy()),
            "kubectl plugin list does not show {}:\n{stdout}\n{stderr}",
            want.display()
        );
    }

    for p in PLUGINS {
        let out = user_cmd(&krew_root, &home)
            .args([p.name, "--help"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "kubectl {} --help: {}\n{stdout}\n{}",
            p.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        // clap's usage line names the binary, as `kubectl-<name>` or (with bin_name set) as
        // `kubectl <name>`.
        assert!(
            stdout.contains("Usage:")
                && (stdout.contains(p.package) || stdout.contains(&format!("kubectl {}", p.name))),
            "kubectl {} --help did not run {}:\n{stdout}",
            p.name,
            p.package
        );
    }
}

#[test]
fn krew_install_refuses_an_archive_whose_sha256_differs() {
    let built = common::built();
    let tmp = tempfile::tempdir().unwrap();
    let (manifest_path, _) = &built.report.manifests[0];
    let m = manifest::parse(manifest_path).unwrap();
    let mut bytes = fs::read(archive_of(&m.metadata.name)).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    let tampered = tmp.path().join("tampered.tar.gz");
    fs::write(&tampered, bytes).unwrap();
    let krew_root = tmp.path().join("krew");
    let err = xtask::install::install(&krew_root, manifest_path, &tampered, "linux", "amd64")
        .unwrap_err();
    assert!(err.contains("checksum does not match"), "{err}");
    assert!(
        !krew_root.join("store").exists(),
        "nothing may be installed"
    );
    assert!(
        !krew_root.join("receipts").exists(),
        "no receipt may be written"
    );
    assert!(!krew_root.join("bin").exists(), "no link may be created");
}

#[test]
fn krew_install_refuses_a_platform_the_manifest_lacks() {
    let built = common::built();
    let tmp = tempfile::tempdir().unwrap();
    let (manifest_path, listed) = &built.report.manifests[0];
    assert_eq!(
        listed.len(),
        1,
        "a local build lists only the host platform"
    );
    let m = manifest::parse(manifest_path).unwrap();
    let err = xtask::install::install(
        &tmp.path().join("krew"),
        manifest_path,
        &archive_of(&m.metadata.name),
        "darwin",
        "arm64",
    )
    .unwrap_err();
    assert!(
        err.contains("does not offer installation for darwin/arm64"),
        "{err}"
    );
}

/// The user flow the krew caveats describe, on the four real plugins: after the krew install,
/// `kubectl <name> completion install` (dispatched by kubectl) writes `kubectl_complete-<name>`
/// into KREW_ROOT/bin (where PATH finds `kubectl-<name>`), and kubectl's completion then relays
/// the plugin's flag names.
#[test]
fn krew_installed_plugins_complete_through_kubectl() {
    let built = common::built();
    let tmp = tempfile::tempdir().unwrap();
    let krew_root = tmp.path().join("krew");
    let home = tmp.path().join("home");
    fs::create_dir_all(&home).unwrap();
    for (manifest_path, _) in &built.report.manifests {
        let m = manifest::parse(manifest_path).unwrap();
        let name = m.metadata.name;
        xtask::install::install(
            &krew_root,
            manifest_path,
            &archive_of(&name),
            "linux",
            "amd64",
        )
        .unwrap();
        let out = user_cmd(&krew_root, &home)
            .args([name.as_str(), "completion", "install"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubectl {name} completion install: {out:?}"
        );
        let helper = krew_root
            .join("bin")
            .join(format!("kubectl_complete-{name}"));
        assert!(
            helper.is_file(),
            "{} not written: {out:?}",
            helper.display()
        );
        let out = user_cmd(&krew_root, &home)
            .args(["__complete", name.as_str(), "--he"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.starts_with("--help") && stdout.ends_with(":4\n"),
            "kubectl __complete {name} --he:\n{stdout}"
        );
    }
}
