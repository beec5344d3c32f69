//! `cargo run -p xtask -- dist|manifests|validate`: see `--help`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use xtask::dist::{self, DistOptions};
use xtask::plugins::{self, PLUGINS, Plugin};
use xtask::{manifest, validate};

/// cluster-loop release tasks.
#[derive(Parser, Debug)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Build the plugins, pack dist/<plugin>_<version>_<os>_<arch>.tar.gz|zip with their
    /// .sha256, and write krew-manifests/<name>.yaml and flux-plugins/<name>.yaml listing every
    /// platform with a known sum.
    ///
    /// Example: cargo run -p xtask -- dist --target x86_64-unknown-linux-gnu --version v0.1.0
    Dist {
        /// Rust target triple (default: the host, built without --target).
        #[arg(long)]
        target: Option<String>,
        /// Release version, v-prefixed semver (default: v + the plugins' Cargo version).
        #[arg(long)]
        version: Option<String>,
        /// Cargo profile: release for real archives, dev for fast test builds.
        #[arg(long, default_value = "release")]
        profile: String,
        /// Output directory of archives and .sha256 files.
        #[arg(long, default_value = "dist")]
        out_dir: PathBuf,
        /// Directory of the krew manifests.
        #[arg(long, default_value = "krew-manifests")]
        manifests_dir: PathBuf,
        /// Directory of the Flux CLI plugin manifests (same archives, same sums).
        #[arg(long, default_value = xtask::flux::DEFAULT_DIR)]
        flux_manifests_dir: PathBuf,
        /// Do not write manifests (release matrix jobs; the assemble job writes them).
        #[arg(long)]
        no_manifests: bool,
        /// sha256sum-format file with other platforms' archive sums (repeatable).
        #[arg(long = "sha-file")]
        sha_files: Vec<PathBuf>,
        /// Only this plugin (repeatable; krew name or binary name).
        #[arg(long = "plugin", value_parser = parse_plugin)]
        plugins: Vec<Plugin>,
        /// Pack the binaries already in DIR (built with --profile by an earlier cargo command,
        /// e.g. target/debug after `cargo test --workspace`) instead of running cargo build.
        #[arg(long, value_name = "DIR")]
        prebuilt_bin_dir: Option<PathBuf>,
    },
    /// Write krew-manifests/<name>.yaml and flux-plugins/<name>.yaml from archive sums (dist/*.sha256 and --sha-file),
    /// re-hashing every archive present in --dist-dir.
    Manifests {
        /// Release version, v-prefixed semver.
        #[arg(long)]
        version: String,
        /// Directory with archives and their .sha256 files.
        #[arg(long, default_value = "dist")]
        dist_dir: PathBuf,
        /// sha256sum-format files (repeatable).
        #[arg(long = "sha-file")]
        sha_files: Vec<PathBuf>,
        /// Directory of the krew manifests.
        #[arg(long, default_value = "krew-manifests")]
        manifests_dir: PathBuf,
        /// Directory of the Flux CLI plugin manifests (same archives, same sums).
        #[arg(long, default_value = xtask::flux::DEFAULT_DIR)]
        flux_manifests_dir: PathBuf,
        /// Fail unless every plugin has all five release platforms.
        #[arg(long)]
        require_all: bool,
    },
    /// Build cluster-loop-controller for a musl target (statically linked; refused if it is
    /// not), and push its OCI image with crane: one layer holding /cluster-loop-controller, no
    /// shell, entrypoint the binary, user 65534:65534 (the manifests' runAsUser), OCI labels. Prints the pushed image by
    /// digest.
    ///
    /// Example: cargo run -p xtask -- image --push ghcr.io/cluster-loop/cluster-loop-controller:v0.1.0
    Image {
        /// Where to push: REGISTRY/REPOSITORY:TAG (crane's credentials, e.g. crane auth login).
        #[arg(long, value_name = "REF")]
        push: String,
        /// Release version for the image's version label (default: v + the Cargo version).
        #[arg(long)]
        version: Option<String>,
        /// Cargo profile: release for the real image, dev for a fast test build.
        #[arg(long, default_value = "release")]
        profile: String,
        /// Rust target triple: a musl one.
        #[arg(long, default_value = xtask::image::DEFAULT_TARGET)]
        target: String,
        /// The crane binary (github.com/google/go-containerregistry/cmd/crane).
        #[arg(long, default_value = "crane")]
        crane: PathBuf,
        /// Directory for the layer tarball.
        #[arg(long, default_value = "dist")]
        out_dir: PathBuf,
        /// A static binary built already for --target, instead of running cargo build.
        #[arg(long, value_name = "FILE")]
        prebuilt: Option<PathBuf>,
    },
    /// Validate manifests by krew's rules (and, without FILES, every flux-plugins/<name>.yaml
    /// by flux's); with --dist-dir, also install each platform whose archive is there with the
    /// real krew (`--krew`, its `KREW_OS`/`KREW_ARCH` override for each platform: files globs,
    /// bin, sha256) and check a license file among the installed files (our rule), and check
    /// each flux manifest's checksum and extractPath against its archive.
    ///
    /// Example: cargo run -p xtask -- validate --dist-dir dist --krew "$(go env GOPATH)/bin/krew"
    Validate {
        /// Manifest files (default: krew-manifests/*.yaml).
        files: Vec<PathBuf>,
        /// Directory holding the archives the manifests name.
        #[arg(long)]
        dist_dir: Option<PathBuf>,
        /// The real krew binary (sigs.k8s.io/krew/cmd/krew), for --dist-dir.
        #[arg(long, default_value = "krew")]
        krew: PathBuf,
    },
}

fn parse_plugin(s: &str) -> Result<Plugin, String> {
    plugins::find(s).ok_or_else(|| {
        format!(
            "unknown plugin {s:?} (one of {})",
            PLUGINS.map(|p| p.name).join(", ")
        )
    })
}

fn root() -> PathBuf {
    // xtask/ is one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn run(cli: Cli) -> Result<(), String> {
    let root = root();
    let abs = |p: PathBuf| if p.is_absolute() { p } else { root.join(p) };
    match cli.cmd {
        Cmd::Dist {
            target,
            version,
            profile,
            out_dir,
            manifests_dir,
            flux_manifests_dir,
            no_manifests,
            sha_files,
            plugins,
            prebuilt_bin_dir,
        } => {
            let report = dist::dist(&DistOptions {
                root: root.clone(),
                target,
                version,
                profile,
                out_dir: abs(out_dir),
                manifests_dir: (!no_manifests).then(|| abs(manifests_dir)),
                flux_manifests_dir: (!no_manifests).then(|| abs(flux_manifests_dir)),
                sha_files: sha_files.into_iter().map(abs).collect(),
                plugins,
                prebuilt_bin_dir: prebuilt_bin_dir.map(abs),
            })?;
            for (p, path, sha, size) in &report.archives {
                println!("{}\t{}\t{sha}\tbinary {size} bytes", p.name, path.display());
            }
            Ok(())
        }
        Cmd::Manifests {
            version,
            dist_dir,
            sha_files,
            manifests_dir,
            flux_manifests_dir,
            require_all,
        } => {
            validate::parse_semver(&version).map_err(|e| format!("--version: {e}"))?;
            let written = dist::write_manifests(
                &PLUGINS,
                &version,
                &abs(dist_dir),
                &sha_files.into_iter().map(abs).collect::<Vec<_>>(),
                &abs(manifests_dir),
                Some(&abs(flux_manifests_dir)),
                require_all,
            )?;
            for (path, listed) in written.krew.iter().chain(&written.flux) {
                println!("{}\t{} platforms", path.display(), listed.len());
            }
            Ok(())
        }
        Cmd::Image {
            push,
            version,
            profile,
            target,
            crane,
            out_dir,
            prebuilt,
        } => {
            let version = match version {
                Some(v) => v,
                None => xtask::dist::cargo_version(&root)?,
            };
            xtask::validate::parse_semver(&version).map_err(|e| format!("--version: {e}"))?;
            let report = xtask::image::image(&xtask::image::ImageOptions {
                root: root.clone(),
                version,
                profile,
                target,
                reference: push,
                crane,
                work_dir: abs(out_dir),
                prebuilt: prebuilt.map(abs),
            })?;
            println!(
                "{}\tbinary {} ({} bytes, static)",
                report.digest_reference,
                report.binary.display(),
                report.size
            );
            Ok(())
        }
        Cmd::Validate {
            files,
            dist_dir,
            krew,
        } => {
            let all = files.is_empty();
            let files = if all {
                let dir = root.join("krew-manifests");
                let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
                    .map_err(|e| format!("{}: {e}", dir.display()))?
                    .flatten()
                    .map(|e| e.path())
                    .collect();
                v.sort();
                v
            } else {
                files.into_iter().map(abs).collect()
            };
            let mut errors = Vec::new();
            for f in &files {
                match validate::validate_file(f) {
                    Ok(m) => {
                        println!(
                            "{}: valid ({} platforms)",
                            f.display(),
                            m.spec.platforms.len()
                        );
                        if let Some(dir) = &dist_dir {
                            errors.extend(check_archives(f, &m, &abs(dir.clone()), &krew));
                        }
                    }
                    Err(e) => errors.extend(e),
                }
            }
            if all {
                errors.extend(validate_flux_dir(
                    &root.join(xtask::flux::DEFAULT_DIR),
                    dist_dir.map(abs).as_deref(),
                ));
            }
            if errors.is_empty() {
                Ok(())
            } else {
                Err(errors.join("\n"))
            }
        }
    }
}

/// Validates every Flux plugin manifest in `dir` (one per plugin); with `dist`, checks each
/// platform whose archive is there: its sha256 is the `checksum` and `extractPath` names an entry
/// (what `flux plugin install` checks; flux installs only its own platform, so the other
/// platforms' archives are checked here and the host's by the real flux CLI in the tests).
fn validate_flux_dir(dir: &Path, dist: Option<&Path>) -> Vec<String> {
    let mut errors = Vec::new();
    for p in PLUGINS {
        let path = xtask::flux::manifest_path(dir, &p);
        let m = match xtask::flux::validate_file(&path) {
            Ok(m) => m,
            Err(e) => {
                errors.extend(e);
                continue;
            }
        };
        println!("{}: valid Flux plugin manifest", path.display());
        let Some(dist) = dist else { continue };
        for v in m.versions.iter().take(1) {
            for pl in &v.platforms {
                let Some(file) = pl.url.rsplit('/').next() else {
                    continue;
                };
                let archive = dist.join(file);
                if !archive.is_file() {
                    continue;
                }
                let at = format!("{}: {}/{}", path.display(), pl.os, pl.arch);
                match xtask::archive::sha256_file(&archive) {
                    Ok(sha) if format!("sha256:{sha}") == pl.checksum => {}
                    Ok(sha) => errors.push(format!(
                        "{at}: checksum {} is not {file}'s sha256:{sha}",
                        pl.checksum
                    )),
                    Err(e) => errors.push(format!("{at}: {e}")),
                }
                match xtask::archive::list(&archive) {
                    Ok(entries) if entries.contains(&pl.extract_path) => {
                        println!("{at}: {file} holds {}", pl.extract_path)
                    }
                    Ok(_) => errors.push(format!(
                        "{at}: extractPath {} is not an entry of {file}",
                        pl.extract_path
                    )),
                    Err(e) => errors.push(format!("{at}: {file}: {e}")),
                }
            }
        }
    }
    errors
}

/// Installs every platform of `m` whose archive is in `dir` with the real krew into a scratch
/// KREW_ROOT (`KREW_OS`/`KREW_ARCH` pick the platform: krew internal/installation/platform.go),
/// then checks our license rule on the installed files.
fn check_archives(path: &Path, m: &manifest::Manifest, dir: &Path, krew: &Path) -> Vec<String> {
    let mut errors = Vec::new();
    for p in &m.spec.platforms {
        let Some(file) = p.uri.rsplit('/').next() else {
            continue;
        };
        let archive_path = dir.join(file);
        if !archive_path.is_file() {
            println!(
                "{}: {file} not in {}, skipped",
                path.display(),
                dir.display()
            );
            continue;
        }
        let Some(sel) = &p.selector else { continue };
        let Some((os, arch)) = xtask::platform::KREW_SUPPORTED
            .iter()
            .find(|(os, arch)| sel.matches(os, arch))
        else {
            continue;
        };
        let scratch = std::env::temp_dir().join(format!(
            "xtask-validate-{}-{os}-{arch}-{}",
            std::process::id(),
            m.metadata.name
        ));
        let _ = std::fs::remove_dir_all(&scratch);
        let out = std::process::Command::new(krew)
            .env("KREW_ROOT", &scratch)
            .env("KREW_OS", os)
            .env("KREW_ARCH", arch)
            .env("KREW_NO_UPGRADE_CHECK", "1")
            .arg("install")
            .arg(format!("--manifest={}", path.display()))
            .arg(format!("--archive={}", archive_path.display()))
            .output();
        match out {
            Err(e) => errors.push(format!(
                "{}: run {} (the real krew, --krew): {e}",
                path.display(),
                krew.display()
            )),
            Ok(o) if !o.status.success() => errors.push(format!(
                "{}: {os}/{arch}: krew install failed: {}",
                path.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Ok(_) => {
                let store = scratch
                    .join("store")
                    .join(&m.metadata.name)
                    .join(&m.spec.version);
                let mut files: Vec<String> = std::fs::read_dir(&store)
                    .map(|d| {
                        d.flatten()
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                files.sort();
                if validate::has_license_file(&files) {
                    println!("{}: {os}/{arch} installs: {files:?}", path.display());
                } else {
                    errors.push(format!(
                        "{}: {os}/{arch}: no license file among installed files {files:?}",
                        path.display()
                    ));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&scratch);
    }
    errors
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}
