//! Every manifest in krew-manifests/ obeys krew's rules (krew internal/index/validation and
//! cmd/validate-krew-manifest), its files globs match the real archive, the archive carries a
//! license file, and each rule really rejects a manifest that breaks it.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use xtask::manifest::{self, Manifest};
use xtask::plugins::PLUGINS;
use xtask::validate::{self, has_license_file};

fn committed() -> Vec<PathBuf> {
    let dir = common::root().join("krew-manifests");
    let mut v: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

#[test]
fn committed_manifests_follow_krew_rules() {
    let files = committed();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut want: Vec<String> = PLUGINS.iter().map(|p| format!("{}.yaml", p.name)).collect();
    want.sort();
    assert_eq!(
        names, want,
        "krew-manifests/ must hold one manifest per plugin"
    );
    for f in &files {
        let m = validate::validate_file(f).unwrap_or_else(|e| panic!("{}", e.join("\n")));
        assert!(
            m.spec
                .caveats
                .contains(&format!("kubectl {} completion install", m.metadata.name)),
            "{}: caveats must explain completion install",
            f.display()
        );
        for p in &m.spec.platforms {
            let file = p.uri.rsplit('/').next().unwrap();
            assert_eq!(
                p.uri,
                manifest::archive_uri(file, &m.spec.version),
                "uri must be the GitHub release download URL"
            );
        }
    }
}

/// Applies krew's `files` rules of `m`'s platform for the host to the freshly built archive of
/// the same plugin and platform: each `from` must match, `bin` must exist, a license file must
/// be installed.
fn check_against_archive(path: &Path, m: &Manifest) {
    let built = common::built();
    let host = built.report.platform;
    let plugin = PLUGINS.iter().find(|p| p.name == m.metadata.name).unwrap();
    let spec = m
        .spec
        .platforms
        .iter()
        .find(|p| p.selector.as_ref().unwrap().matches(host.os, host.arch))
        .unwrap_or_else(|| panic!("{}: no platform for the host {host}", path.display()));
    let archive = built
        .dist_dir
        .join(manifest::archive_name(plugin, &built.report.version, &host));
    let files = xtask::archive::list(&archive).unwrap();
    for op in spec
        .files
        .as_ref()
        .expect("our manifests list files explicitly")
    {
        let pat = glob::Pattern::new(&op.from).unwrap();
        assert!(
            files.iter().any(|f| pat.matches(f)),
            "{}: files.from {:?} matches nothing in {} ({files:?})",
            path.display(),
            op.from,
            archive.display()
        );
    }
    assert!(
        files.contains(&spec.bin),
        "{}: bin {} not in archive",
        path.display(),
        spec.bin
    );
    assert!(
        has_license_file(&files),
        "{}: no license file in {files:?}",
        path.display()
    );
}

#[test]
fn committed_manifests_match_the_archive_layout() {
    for f in committed() {
        let m = validate::validate_file(&f).unwrap_or_else(|e| panic!("{}", e.join("\n")));
        check_against_archive(&f, &m);
    }
}

#[test]
fn generated_manifests_are_valid_and_carry_real_shas() {
    let built = common::built();
    for (path, listed) in &built.report.manifests {
        assert_eq!(
            listed,
            &vec![built.report.platform],
            "a local build lists the host only"
        );
        let m = validate::validate_file(path).unwrap_or_else(|e| panic!("{}", e.join("\n")));
        check_against_archive(path, &m);
        let (plugin, archive, sha, _) = built
            .report
            .archives
            .iter()
            .find(|(p, ..)| p.name == m.metadata.name)
            .unwrap();
        assert_eq!(m.spec.platforms[0].sha256, *sha, "{}", plugin.name);
        assert_eq!(xtask::archive::sha256_file(archive).unwrap(), *sha);
    }
}

#[test]
fn archives_are_reproducible() {
    let built = common::built();
    // Snapshot one binary (the shared target dir may be rebuilt by a concurrent cargo), then
    // pack the snapshot twice into other directories: byte-identical archives, and identical
    // to the archive dist packed from the same bytes. One plugin is enough: every archive is
    // packed by the same code.
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bins = scratch.path().join("bins");
    fs::create_dir_all(&bins).unwrap();
    let (plugin, built_archive, built_sha, _) = built.report.archives[0].clone();
    let exe = built.report.platform.exe_name(plugin.package);
    fs::copy(built.report.bin_dir.join(&exe), bins.join(&exe)).unwrap();
    let pack = |dir: &str| {
        xtask::dist::pack(
            &common::root(),
            &bins,
            &[plugin],
            &built.report.version,
            &built.report.platform,
            &scratch.path().join(dir),
            "dev",
        )
        .unwrap()
    };
    let first = pack("again-1");
    let second = pack("again-2");
    assert_eq!(first.len(), 1);
    let ((p1, a1, sha1, _), (p2, a2, sha2, _)) = (&first[0], &second[0]);
    assert_eq!(p1, p2);
    assert_eq!(
        sha1,
        sha2,
        "{}: {} and {} differ",
        p1.name,
        a1.display(),
        a2.display()
    );
    assert_eq!(fs::read(a1).unwrap(), fs::read(a2).unwrap());
    if xtask::archive::sha256_file(&built.report.bin_dir.join(&exe)).ok()
        == xtask::archive::sha256_file(&bins.join(&exe)).ok()
    {
        assert_eq!(
            sha1,
            &built_sha,
            "{} differs from {}",
            a1.display(),
            built_archive.display()
        );
    }
}

#[test]
fn zip_archives_are_reproducible_and_unpack_like_krew() {
    let dir = tempfile::tempdir().unwrap();
    let entries = vec![
        xtask::archive::Entry {
            name: "kubectl-x.exe".into(),
            mode: 0o755,
            data: b"MZ not really".to_vec(),
        },
        xtask::archive::Entry {
            name: "LICENSE".into(),
            mode: 0o644,
            data: b"Apache".to_vec(),
        },
    ];
    let a = dir.path().join("a.zip");
    let b = dir.path().join("b.zip");
    xtask::archive::write_zip(&a, &entries, 1_700_000_000).unwrap();
    xtask::archive::write_zip(&b, &entries, 1_700_000_000).unwrap();
    assert_eq!(fs::read(&a).unwrap(), fs::read(&b).unwrap());
    let out = dir.path().join("out");
    let files = xtask::archive::extract_like_krew(&a, &out).unwrap();
    assert_eq!(files, vec!["kubectl-x.exe", "LICENSE"]);
    assert_eq!(fs::read(out.join("LICENSE")).unwrap(), b"Apache");
}

/// A valid manifest text for `unstick` with every release platform, to break one rule at a time.
fn full_manifest() -> String {
    let plugin = xtask::plugins::find("unstick").unwrap();
    let mut sums = manifest::Sums::new();
    for p in xtask::platform::RELEASE_PLATFORMS {
        sums.insert(
            manifest::archive_name(&plugin, "v1.2.3", &p),
            format!("{:064x}", p.arch.len() * 7 + p.os.len()),
        );
    }
    manifest::render(&plugin, "v1.2.3", &sums).unwrap().0
}

fn errors_for(text: &str, file: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(file);
    fs::write(&path, text).unwrap();
    match validate::validate_file(&path) {
        Ok(_) => Vec::new(),
        Err(e) => e,
    }
}

#[test]
fn full_release_manifest_is_valid() {
    let text = full_manifest();
    assert_eq!(errors_for(&text, "unstick.yaml"), Vec::<String>::new());
    assert_eq!(text.matches("- selector:").count(), 5);
}

#[test]
fn each_rule_rejects_a_broken_manifest() {
    let good = full_manifest();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "unstick.yaml",
            good.replace("v1alpha2", "v1alpha1"),
            "apiVersion",
        ),
        (
            "unstick.yaml",
            good.replace("kind: Plugin", "kind: Plugins"),
            "kind",
        ),
        ("unstick2.yaml", good.clone(), "should be named"),
        (
            "un stick.yaml",
            good.replace("name: unstick", "name: un stick"),
            "not allowed",
        ),
        ("unstick.yml", good.clone(), "extension"),
        (
            "unstick.yaml",
            good.replace(
                "shortDescription: Unstick a Flux Kustomization, with proof",
                "shortDescription: \"Unstick\\na Flux Kustomization\"",
            ),
            "line breaks",
        ),
        (
            "unstick.yaml",
            good.replace(
                "shortDescription: Unstick a Flux Kustomization, with proof",
                "shortDescription: Unstick a Flux Kustomization, with proof, and more words",
            ),
            "50",
        ),
        (
            "unstick.yaml",
            good.replace("version: v1.2.3", "version: 1.2.3"),
            "not starting with 'v'",
        ),
        (
            "unstick.yaml",
            good.replace("version: v1.2.3", "version: v1.2"),
            "MAJOR.MINOR.PATCH",
        ),
        (
            "unstick.yaml",
            good.replace(
                "        arch: arm64\n",
                "        arch: arm64\n        libc: gnu\n",
            ),
            "not supported",
        ),
        (
            "unstick.yaml",
            good.replacen("        arch: arm64", "        arch: amd64", 1),
            "overlapping",
        ),
        (
            "unstick.yaml",
            good.replacen("        arch: arm64", "        arch: s390x", 1),
            "doesn't match any supported",
        ),
        (
            "unstick.yaml",
            good.replacen("sha256: \"", "sha256: \"A", 1),
            "sha256",
        ),
        (
            "unstick.yaml",
            good.replacen("    bin: kubectl-unstick\n", "", 1),
            "`bin` has to be set",
        ),
        (
            "unstick.yaml",
            good.replacen("    uri: https://", "    uri: http://", 1),
            "https",
        ),
        (
            "unstick.yaml",
            good.replacen("      to: .\n", "      to: \"\"\n", 1),
            "`to` field",
        ),
        (
            "unstick.yaml",
            good.replacen(
                "  - selector:\n      matchLabels:\n        os: linux\n        arch: amd64\n",
                "  - selector:\n      matchLabels: {}\n",
                1,
            ),
            "empty",
        ),
        ("unstick.yaml", cut_description(&good), "description"),
    ];
    for (file, text, want) in cases {
        if file == "unstick.yaml" {
            assert_ne!(text, good, "case {want:?} did not change the manifest");
        }
        let errs = errors_for(&text, file);
        assert!(
            errs.iter().any(|e| e.contains(want)),
            "{file}: expected an error containing {want:?}, got {errs:?}"
        );
    }
}

fn cut_description(good: &str) -> String {
    let start = good.find("  description: |\n").unwrap();
    let end = good.find("  caveats:").unwrap();
    format!("{}{}", &good[..start], &good[end..])
}
