//! The real installers on the real archives. `xtask dist` (dev profile, [`common::built`])
//! packs every plugin and writes its krew and Flux CLI manifests; then
//! - the real krew (`sigs.k8s.io/krew` [`KREW_VERSION`], run as `kubectl krew` through
//!   kubectl's plugin dispatch, as krew installs itself) installs each with
//!   `kubectl krew install --manifest=M --archive=A` into a temporary `KREW_ROOT`, and
//!   `kubectl NAME --help` runs it through kubectl's dispatch;
//! - the real flux CLI (`github.com/fluxcd/flux2/v2` [`FLUX_CLI_VERSION`]) installs each with
//!   `flux plugin install NAME` from a catalog served on 127.0.0.1 (`FLUXCD_PLUGIN_CATALOG`, the
//!   manifest as written with its archive URL pointed at the same server), into a
//!   `FLUXCD_PLUGINS` directory created first (flux does not create a directory the user
//!   names), and `flux NAME --help` runs it through flux's dispatch.
//!
//! A broken manifest field fails each client: a wrong sha256 (krew) and a wrong checksum and a
//! wrong extractPath (flux). Both clients are built from Go modules by
//! tests/realcluster/build.sh (`krew/`, `fluxcli/`; realcluster's `bins::bin`).
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use crate::common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use realcluster::bins::{FLUX_CLI_VERSION, KREW_VERSION};
use xtask::manifest;
use xtask::plugins::{PLUGINS, Plugin};

/// Absolute path of the real kubectl (CI installs it; `.ci/run` checks).
fn kubectl() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap();
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .expect("kubectl must be on PATH for the install test")
}

/// The plugin of a krew or Flux CLI plugin name.
fn plugin_of(name: &str) -> Plugin {
    *PLUGINS
        .iter()
        .find(|p| p.name == name || p.flux_name == name)
        .unwrap_or_else(|| panic!("no plugin named {name}"))
}

fn archive_of(name: &str) -> PathBuf {
    let built = common::built();
    let plugin = &plugin_of(name);
    built.dist_dir.join(manifest::archive_name(
        plugin,
        &built.report.version,
        &built.report.platform,
    ))
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A user whose PATH is `bin`, then `tmp/tools` (where the krew binary is, see [`krew_root`]),
/// then the system directories, HOME in the scratch dir, and no other environment (no proxy,
/// no KUBECONFIG: `--help` reads no cluster).
fn user(program: &Path, bin: &Path, home: &Path) -> Command {
    let tools = home.parent().unwrap().join("tools");
    let mut c = Command::new(program);
    c.env_clear()
        .env(
            "PATH",
            format!(
                "{}:{}:/usr/local/bin:/usr/bin:/bin",
                bin.display(),
                tools.display()
            ),
        )
        .env("HOME", home);
    c
}

/// A scratch `KREW_ROOT` (empty: krew creates its layout) and the real krew as `kubectl-krew` in
/// `tmp/tools`, on the user's PATH after `KREW_ROOT/bin`. Not in `KREW_ROOT/bin` without its
/// receipt: krew 0.4 reads a bin directory with plugins and no receipts as a krew 0.2 home and
/// refuses to run ("krew home outdated", internal/receiptsmigration). Returns (root, home).
fn krew_root(tmp: &Path) -> (PathBuf, PathBuf) {
    let krew = realcluster::bins::bin(&format!("krew-{KREW_VERSION}")).unwrap();
    let root = tmp.join("krew");
    let home = tmp.join("home");
    let tools = tmp.join("tools");
    fs::create_dir_all(&tools).unwrap();
    fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::symlink(&krew, tools.join("kubectl-krew")).unwrap();
    (root, home)
}

/// `kubectl krew ARGS` as the user of [`krew_root`] (no upgrade check: no network here).
fn kubectl_krew(root: &Path, home: &Path, args: &[&str]) -> Output {
    user(&kubectl(), &root.join("bin"), home)
        .env("KREW_ROOT", root)
        .env("KREW_NO_UPGRADE_CHECK", "1")
        .arg("krew")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn real_krew_installs_every_plugin_and_kubectl_runs_each() {
    let built = common::built();
    let tmp = tempfile::tempdir().unwrap();
    let (root, home) = krew_root(tmp.path());
    let version = kubectl_krew(&root, &home, &["version"]);
    assert!(
        String::from_utf8_lossy(&version.stdout).contains(KREW_VERSION),
        "{}",
        show(&version)
    );
    assert_eq!(built.report.manifests.len(), PLUGINS.len());
    for (manifest_path, _) in &built.report.manifests {
        let name = manifest::parse(manifest_path).unwrap().metadata.name;
        let out = kubectl_krew(
            &root,
            &home,
            &[
                "install",
                &format!("--manifest={}", manifest_path.display()),
                &format!("--archive={}", archive_of(&name).display()),
            ],
        );
        assert!(out.status.success(), "krew install {name}: {}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!("Installed plugin: {name}")),
            "{}",
            show(&out)
        );
        // krew's own layout: the link in bin, the files in store/NAME/VERSION, a receipt.
        let link = root.join("bin").join(plugin_of(&name).krew_bin());
        assert_eq!(
            fs::read_link(&link).unwrap(),
            root.join("store")
                .join(&name)
                .join(&built.report.version)
                .join(plugin_of(&name).package)
        );
        assert!(root.join("receipts").join(format!("{name}.yaml")).is_file());
        // Through kubectl's plugin dispatch, found on PATH in krew's bin directory.
        let help = user(&kubectl(), &root.join("bin"), &home)
            .args([name.as_str(), "--help"])
            .output()
            .unwrap();
        assert!(
            help.status.success(),
            "kubectl {name} --help: {}",
            show(&help)
        );
        let text = String::from_utf8_lossy(&help.stdout);
        // The usage line reads as the user typed it (`kubectl gitops-mcp` after a krew
        // install, whose link is kubectl-gitops_mcp).
        assert!(
            text.contains(&format!("Usage: kubectl {name}")),
            "kubectl {name} --help: {}",
            show(&help)
        );
    }
    // kubectl finds every plugin in krew's bin directory (`krew list` needs the plugin index,
    // which needs the network: "krew local plugin index is not initialized").
    let list = user(&kubectl(), &root.join("bin"), &home)
        .args(["plugin", "list", "--name-only"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&list.stdout);
    for p in PLUGINS {
        assert!(
            listed.lines().any(|l| l.trim() == p.krew_bin()),
            "kubectl plugin list lacks {}: {}",
            p.krew_bin(),
            show(&list)
        );
    }
}

#[test]
fn real_krew_refuses_a_manifest_whose_sha256_is_not_the_archives() {
    let built = common::built();
    let tmp = tempfile::tempdir().unwrap();
    let (root, home) = krew_root(tmp.path());
    let (manifest_path, _) = &built.report.manifests[0];
    let name = manifest::parse(manifest_path).unwrap().metadata.name;
    let text = fs::read_to_string(manifest_path).unwrap();
    let sha = built
        .report
        .archives
        .iter()
        .find(|(p, ..)| p.name == name)
        .map(|(_, _, sha, _)| sha.clone())
        .unwrap();
    assert!(text.contains(&sha), "the manifest names its archive's sum");
    let broken = tmp.path().join(format!("{name}.yaml"));
    fs::write(&broken, text.replace(&sha, &"0".repeat(64))).unwrap();
    let out = kubectl_krew(
        &root,
        &home,
        &[
            "install",
            &format!("--manifest={}", broken.display()),
            &format!("--archive={}", archive_of(&name).display()),
        ],
    );
    assert!(!out.status.success(), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("checksum does not match"), "{}", show(&out));
    assert!(!root.join("bin").join(plugin_of(&name).krew_bin()).exists());
}

#[test]
fn real_krew_refuses_a_platform_the_manifest_lacks() {
    let built = common::built();
    let tmp = tempfile::tempdir().unwrap();
    let (root, home) = krew_root(tmp.path());
    let (manifest_path, listed) = &built.report.manifests[0];
    assert_eq!(
        listed.len(),
        1,
        "a local build lists only the host platform"
    );
    let name = manifest::parse(manifest_path).unwrap().metadata.name;
    // krew's own platform override (internal/installation/platform.go).
    let out = user(&kubectl(), &root.join("bin"), &home)
        .env("KREW_ROOT", &root)
        .env("KREW_NO_UPGRADE_CHECK", "1")
        .env("KREW_OS", "darwin")
        .env("KREW_ARCH", "arm64")
        .args([
            "krew",
            "install",
            &format!("--manifest={}", manifest_path.display()),
            &format!("--archive={}", archive_of(&name).display()),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("does not offer installation for this platform"),
        "{}",
        show(&out)
    );
}

/// A `files` glob that matches nothing fails the real krew; an archive without LICENSE installs
/// (krew does not require one: its index CI does), and xtask's own rule finds no license among
/// the installed files.
#[test]
fn real_krew_applies_the_files_rules_and_xtask_adds_the_license_rule() {
    let built = common::built();
    let tmp = tempfile::tempdir().unwrap();
    let (root, home) = krew_root(tmp.path());
    let plugin = PLUGINS[0];
    let archive = archive_of(plugin.name);
    let (path, _) = built
        .report
        .manifests
        .iter()
        .find(|(p, _)| manifest::parse(p).unwrap().metadata.name == plugin.name)
        .unwrap();
    let text = fs::read_to_string(path).unwrap();
    let bad_glob = tmp
        .path()
        .join("glob")
        .join(format!("{}.yaml", plugin.name));
    fs::create_dir_all(bad_glob.parent().unwrap()).unwrap();
    fs::write(
        &bad_glob,
        text.replace("from: README.md", "from: docs/*.md"),
    )
    .unwrap();
    let out = kubectl_krew(
        &root,
        &home,
        &[
            "install",
            &format!("--manifest={}", bad_glob.display()),
            &format!("--archive={}", archive.display()),
        ],
    );
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no files in the plugin archive matched the glob pattern=docs/*.md"),
        "{}",
        show(&out)
    );

    let extracted = tmp.path().join("x");
    let mut entries = Vec::new();
    for f in xtask::archive::extract_like_krew(&archive, &extracted).unwrap() {
        if f != "LICENSE" {
            entries.push(xtask::archive::Entry {
                data: fs::read(extracted.join(&f)).unwrap(),
                mode: 0o755,
                name: f,
            });
        }
    }
    let no_license = tmp.path().join("nolicense.tar.gz");
    xtask::archive::write_tar_gz(&no_license, &entries, 315_532_800).unwrap();
    let sha = xtask::archive::sha256_file(&no_license).unwrap();
    let orig_sha = &built
        .report
        .archives
        .iter()
        .find(|(p, ..)| p.name == plugin.name)
        .unwrap()
        .2;
    let m2 = tmp.path().join("m2").join(format!("{}.yaml", plugin.name));
    fs::create_dir_all(m2.parent().unwrap()).unwrap();
    fs::write(
        &m2,
        text.replace(orig_sha.as_str(), &sha)
            .replace("    - from: LICENSE\n      to: .\n", ""),
    )
    .unwrap();
    let out = kubectl_krew(
        &root,
        &home,
        &[
            "install",
            &format!("--manifest={}", m2.display()),
            &format!("--archive={}", no_license.display()),
        ],
    );
    assert!(out.status.success(), "{}", show(&out));
    let store = root
        .join("store")
        .join(plugin.name)
        .join(&built.report.version);
    let mut files: Vec<String> = fs::read_dir(&store)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert!(!xtask::validate::has_license_file(&files), "{files:?}");
}

/// The user flow the krew caveats describe, after the real krew install of every plugin:
/// `kubectl <name> completion install` (dispatched by kubectl) writes `kubectl_complete-<name>`
/// into KREW_ROOT/bin (where PATH finds `kubectl-<name>`), and kubectl's completion then relays
/// the plugin's flag names.
#[test]
fn real_krew_installed_plugins_complete_through_kubectl() {
    let built = common::built();
    let tmp = tempfile::tempdir().unwrap();
    let (root, home) = krew_root(tmp.path());
    for (manifest_path, _) in &built.report.manifests {
        let name = manifest::parse(manifest_path).unwrap().metadata.name;
        let out = kubectl_krew(
            &root,
            &home,
            &[
                "install",
                &format!("--manifest={}", manifest_path.display()),
                &format!("--archive={}", archive_of(&name).display()),
            ],
        );
        assert!(out.status.success(), "krew install {name}: {}", show(&out));
        let out = user(&kubectl(), &root.join("bin"), &home)
            .args([name.as_str(), "completion", "install"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubectl {name} completion install: {}",
            show(&out)
        );
        let helper = root
            .join("bin")
            .join(format!("kubectl_complete-{}", name.replace('-', "_")));
        assert!(
            helper.is_file(),
            "{} not written: {}",
            helper.display(),
            show(&out)
        );
        let out = user(&kubectl(), &root.join("bin"), &home)
            .args(["__complete", name.as_str(), "--he"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.starts_with("--help") && stdout.ends_with(":4\n"),
            "kubectl __complete {name} --he: {}",
            show(&out)
        );
    }
}

/// A static file server on 127.0.0.1 (port 0: the kernel picks a free one, never assumed):
/// `GET /NAME` answers the file `dir/NAME` (200) or 404; one thread, one request per
/// connection, for this test process's life. Returns the base URL, ending in `/`.
fn serve(dir: PathBuf) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            // The headers, up to the blank line.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let file = path
                .trim_start_matches('/')
                .split('/')
                .next_back()
                .filter(|f| !f.is_empty() && !f.starts_with('.'))
                .map(|f| dir.join(f));
            let mut out = &stream;
            let _ = match file.and_then(|f| fs::read(f).ok()) {
                Some(body) => out
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .and_then(|()| out.write_all(&body)),
                None => out.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                ),
            };
            let _ = reader.read_to_end(&mut Vec::new());
        }
    });
    base
}

/// The catalog directory, laid out as the release publishes it (.github/workflows/release.yml):
/// each flux manifest `xtask dist` wrote as `flux-<flux name>.yaml`, with its archive URL (the
/// release page's) pointed at `base`, beside the archives themselves; `edit` may break a
/// manifest's text further. Returns the `FLUXCD_PLUGIN_CATALOG` a user sets: `base` + `flux-`
/// (flux fetches the catalog value + NAME + `.yaml`, flux2 internal/plugin/catalog.go).
fn catalog(dir: &Path, base: &str, edit: impl Fn(&str, String) -> String) -> String {
    let built = common::built();
    fs::create_dir_all(dir).unwrap();
    for (path, _) in &built.report.flux_manifests {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let archive = archive_of(&name);
        let file = archive.file_name().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(path).unwrap();
        let url_line = text
            .lines()
            .find(|l| l.trim_start().starts_with("url:") && l.ends_with(&file))
            .unwrap_or_else(|| panic!("{} names no URL of {file}", path.display()))
            .to_owned();
        let indent = &url_line[..url_line.len() - url_line.trim_start().len()];
        let text = text.replace(&url_line, &format!("{indent}url: {base}{file}"));
        fs::write(dir.join(format!("flux-{name}.yaml")), edit(&name, text)).unwrap();
        fs::copy(&archive, dir.join(&file)).unwrap();
    }
    format!("{base}flux-")
}

/// `flux ARGS` as a user whose plugin directory is `plugins` and catalog is `base`.
fn flux(home: &Path, plugins: &Path, base: &str, args: &[&str]) -> Output {
    let flux = realcluster::bins::bin(&format!("flux-{FLUX_CLI_VERSION}")).unwrap();
    user(&flux, &home.join("bin"), home)
        .env("FLUXCD_PLUGINS", plugins)
        .env("FLUXCD_PLUGIN_CATALOG", base)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn real_flux_plugin_install_from_a_local_catalog_and_flux_runs_each() {
    let tmp = tempfile::tempdir().unwrap();
    let served = tmp.path().join("catalog");
    let base = catalog(&served, &serve(served.clone()), |_, t| t);
    let home = tmp.path().join("home");
    let plugins = tmp.path().join("flux-plugins");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&plugins).unwrap();
    let version = flux(&home, &plugins, &base, &["version", "--client"]);
    assert!(
        String::from_utf8_lossy(&version.stdout).contains(FLUX_CLI_VERSION.trim_start_matches('v')),
        "{}",
        show(&version)
    );
    for p in PLUGINS {
        let out = flux(&home, &plugins, &base, &["plugin", "install", p.flux_name]);
        assert!(
            out.status.success(),
            "flux plugin install {}: {}",
            p.flux_name,
            show(&out)
        );
        let bin = plugins.join(format!("flux-{}", p.flux_name));
        assert!(bin.is_file(), "{} missing: {}", bin.display(), show(&out));
        // Through flux's plugin dispatch (the plugin directory, not PATH).
        let help = flux(&home, &plugins, &base, &[p.flux_name, "--help"]);
        assert!(
            help.status.success(),
            "flux {} --help: {}",
            p.flux_name,
            show(&help)
        );
        // The plugin reads its invoked name (flux-NAME) and speaks as `flux NAME`.
        assert!(
            String::from_utf8_lossy(&help.stdout).contains(&format!("Usage: flux {}", p.flux_name)),
            "flux {} --help: {}",
            p.flux_name,
            show(&help)
        );
    }
    let list = flux(&home, &plugins, &base, &["plugin", "list"]);
    let listed = String::from_utf8_lossy(&list.stdout);
    for p in PLUGINS {
        assert!(
            listed
                .lines()
                .any(|l| l.split_whitespace().next() == Some(p.flux_name)),
            "flux plugin list lacks {}: {}",
            p.flux_name,
            show(&list)
        );
    }
}

#[test]
fn real_flux_refuses_a_wrong_checksum_and_a_wrong_extract_path() {
    let tmp = tempfile::tempdir().unwrap();
    let served = tmp.path().join("catalog");
    let name = PLUGINS[0].name;
    let other = PLUGINS[1].name;
    let base = catalog(&served, &serve(served.clone()), |n, t| {
        if n == name {
            let sum = t
                .lines()
                .find_map(|l| l.trim().strip_prefix("checksum: sha256:"))
                .unwrap()
                .to_owned();
            t.replace(&sum, &"0".repeat(64))
        } else if n == other {
            t.replace(
                &format!("extractPath: kubectl-{other}"),
                "extractPath: kubectl-missing",
            )
        } else {
            t
        }
    });
    let home = tmp.path().join("home");
    let plugins = tmp.path().join("flux-plugins");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&plugins).unwrap();
    let out = flux(&home, &plugins, &base, &["plugin", "install", name]);
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("checksum verification failed"),
        "{}",
        show(&out)
    );
    let out = flux(&home, &plugins, &base, &["plugin", "install", other]);
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("binary \"kubectl-missing\" not found in archive"),
        "{}",
        show(&out)
    );
    for n in [name, other] {
        assert!(!plugins.join(format!("flux-{n}")).exists());
    }
}

/// The README's other Flux route: a `flux-<flux name>` link in the plugin directory to a binary
/// installed otherwise (cargo, krew) runs through the real flux's dispatch and speaks as
/// `flux <flux name>` (`flux mcp`, `flux verify`).
#[test]
fn real_flux_runs_a_link_to_an_installed_binary_under_its_flux_name() {
    let built = common::built();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let plugins = home.join(".fluxcd").join("plugins");
    fs::create_dir_all(&plugins).unwrap();
    for p in PLUGINS {
        std::os::unix::fs::symlink(
            built.report.bin_dir.join(p.package),
            plugins.join(format!("flux-{}", p.flux_name)),
        )
        .unwrap();
    }
    let flux = realcluster::bins::bin(&format!("flux-{FLUX_CLI_VERSION}")).unwrap();
    // No FLUXCD_PLUGINS: the default directory, ~/.fluxcd/plugins.
    let run = |args: &[&str]| {
        user(&flux, &home.join("bin"), &home)
            .args(args)
            .output()
            .unwrap()
    };
    for p in PLUGINS {
        let help = run(&[p.flux_name, "--help"]);
        assert!(
            help.status.success()
                && String::from_utf8_lossy(&help.stdout)
                    .contains(&format!("Usage: flux {}", p.flux_name)),
            "flux {} --help: {}",
            p.flux_name,
            show(&help)
        );
    }
}
