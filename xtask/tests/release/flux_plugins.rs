//! Flux CLI plugin manifests (flux2 pkg/plugin/types.go, `cli.fluxcd.io/v1beta1` `Plugin`):
//! the committed ones in flux-plugins/ name the same archives and checksums as
//! krew-manifests/, the generated ones carry the real archive sums, and a `flux-<name>` in a
//! `FLUXCD_PLUGINS` directory speaks as `flux <name>` (run as flux runs it:
//! `exec(<dir>/flux-<name>, [<dir>/flux-<name>, args...])`). The real `flux plugin install` and
//! flux's own dispatch: real_clients.rs.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use xtask::flux;
use xtask::manifest;
use xtask::plugins::PLUGINS;

fn archive_of(name: &str) -> PathBuf {
    let built = common::built();
    let plugin = PLUGINS
        .iter()
        .find(|p| p.name == name || p.flux_name == name)
        .unwrap();
    built.dist_dir.join(manifest::archive_name(
        plugin,
        &built.report.version,
        &built.report.platform,
    ))
}

#[test]
fn committed_flux_manifests_name_the_krew_archives_and_checksums() {
    let root = common::root();
    let dir = root.join(flux::DEFAULT_DIR);
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = PLUGINS
        .iter()
        .map(|p| format!("{}.yaml", p.flux_name))
        .collect();
    want.sort();
    assert_eq!(
        names, want,
        "flux-plugins/ must hold one manifest per plugin"
    );
    for p in PLUGINS {
        let path = flux::manifest_path(&dir, &p);
        let m = flux::validate_file(&path).unwrap_or_else(|e| panic!("{}", e.join("\n")));
        let krew = xtask::validate::validate_file(&manifest::manifest_path(
            &root.join("krew-manifests"),
            &p,
        ))
        .unwrap_or_else(|e| panic!("{}", e.join("\n")));
        assert_eq!(m.name, p.flux_name);
        assert_eq!(m.bin, format!("flux-{}", p.flux_name));
        assert_eq!(format!("v{}", m.versions[0].version), krew.spec.version);
        let flux_set: Vec<(String, String, String)> = m.versions[0]
            .platforms
            .iter()
            .map(|x| {
                (
                    x.url.clone(),
                    x.checksum.clone(),
                    format!("{}/{}", x.os, x.arch),
                )
            })
            .collect();
        let krew_set: Vec<(String, String, String)> = krew
            .spec
            .platforms
            .iter()
            .map(|x| {
                let labels = x.selector.as_ref().unwrap().match_labels.clone().unwrap();
                (
                    x.uri.clone(),
                    format!("sha256:{}", x.sha256),
                    format!("{}/{}", labels["os"], labels["arch"]),
                )
            })
            .collect();
        assert_eq!(
            flux_set, krew_set,
            "{}: same archives and sums as krew's",
            p.name
        );
        for x in &m.versions[0].platforms {
            assert_eq!(x.extract_path, krew.spec.platforms[0].bin.clone());
        }
    }
}

#[test]
fn generated_flux_manifests_carry_the_archive_sums() {
    let built = common::built();
    assert_eq!(built.report.flux_manifests.len(), PLUGINS.len());
    for (path, listed) in &built.report.flux_manifests {
        assert_eq!(
            listed,
            &vec![built.report.platform],
            "a local build lists the host only"
        );
        let m = flux::validate_file(path).unwrap_or_else(|e| panic!("{}", e.join("\n")));
        let archive = archive_of(&m.name);
        let sha = xtask::archive::sha256_file(&archive).unwrap();
        let pl = &m.versions[0].platforms[0];
        assert_eq!(pl.checksum, format!("sha256:{sha}"), "{}", m.name);
        assert!(pl.url.ends_with(&format!(
            "/{}",
            archive.file_name().unwrap().to_string_lossy()
        )));
        assert!(
            xtask::archive::list(&archive)
                .unwrap()
                .contains(&pl.extract_path),
            "{}: extractPath {} not in the archive",
            m.name,
            pl.extract_path
        );
    }
}

fn run(bin: &Path, args: &[&str], home: &Path, plugins_dir: &Path) -> Output {
    Command::new(bin)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("FLUXCD_PLUGINS", plugins_dir)
        .env("KUBECONFIG", home.join("no-such-kubeconfig"))
        .output()
        .unwrap()
}

/// Asserts a plugin started as `flux-<name>` speaks as `flux <name>`: usage line, examples
/// (no `kubectl <kubectl_words>` left: `kubectl gitops mcp` for gitops-mcp), and a usage error
/// (exit 2) naming `flux <name>`.
fn assert_speaks_flux(bin: &Path, name: &str, kubectl_words: &str, home: &Path, dir: &Path) {
    let out = run(bin, &["--help"], home, dir);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "flux {name} --help: {out:?}");
    assert!(
        help.contains(&format!("Usage: flux {name}")),
        "flux {name} --help:\n{help}"
    );
    assert!(
        !help.contains(&format!("kubectl {kubectl_words}")),
        "flux {name} --help still says kubectl {kubectl_words}:\n{help}"
    );
    let out = run(bin, &["--no-such-flag"], home, dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("Usage: flux {name}")), "{err}");
}

/// A `flux-<name>` symlink to the built plugin in a temporary FLUXCD_PLUGINS directory, as a
/// user who links instead of installing would have it.
#[test]
fn flux_name_link_in_fluxcd_plugins_runs_as_flux() {
    let built = common::built();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    fs::create_dir_all(&dir).unwrap();
    for p in PLUGINS {
        let link = dir.join(format!("flux-{}", p.flux_name));
        std::os::unix::fs::symlink(built.report.bin_dir.join(p.package), &link).unwrap();
        let words = p.name.replace('-', " ");
        assert_speaks_flux(&link, p.flux_name, &words, tmp.path(), &dir);
    }
}
