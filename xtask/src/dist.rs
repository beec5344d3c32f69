//! `xtask dist` and `xtask manifests`: build the plugins, pack reproducible archives, record
//! their sha256 and write the krew manifests.
//!
//! Checksums never get invented: each archive's sum goes to `<archive>.sha256` next to it
//! (`sha256sum` format), and a manifest lists exactly the platforms whose sum is known, from
//! those files and from `--sha-file`s. A local build therefore yields manifests with the local
//! platform only; the release workflow gathers all five platforms' `.sha256` files and runs
//! `xtask manifests --require-all` to write complete manifests.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::archive::sha256_file;
use crate::archive::{self, Entry};
use crate::manifest::{self, Sums};
use crate::platform::{Platform, RELEASE_PLATFORMS};
use crate::plugins::{PLUGINS, Plugin};
use crate::validate;

/// Options of [`dist`].
#[derive(Debug, Clone)]
pub struct DistOptions {
    /// Workspace root (holds Cargo.toml, LICENSE, README.md).
    pub root: PathBuf,
    /// Rust target triple; `None` builds for the host without `--target`.
    pub target: Option<String>,
    /// `v`-prefixed release version; `None` uses `v` + the plugins' Cargo version.
    pub version: Option<String>,
    /// Cargo profile: `release` for real releases, `dev` for fast test builds.
    pub profile: String,
    /// Where archives and `.sha256` files go (default `<root>/dist`).
    pub out_dir: PathBuf,
    /// Where krew manifests go; `None` writes none (matrix jobs of the release workflow).
    pub manifests_dir: Option<PathBuf>,
    /// Where Flux CLI plugin manifests go ([`crate::flux`]); written only with
    /// `manifests_dir`, from the same sums.
    pub flux_manifests_dir: Option<PathBuf>,
    /// Extra `sha256sum`-format files with sums of other platforms' archives.
    pub sha_files: Vec<PathBuf>,
    /// Plugins to build (default: all of them).
    pub plugins: Vec<Plugin>,
    /// A cargo output directory that already holds the plugin binaries for `target`/`profile`:
    /// pack those instead of running `cargo build` (the tests pack what `cargo test` built).
    pub prebuilt_bin_dir: Option<PathBuf>,
}

/// What [`dist`] produced.
#[derive(Debug, Clone)]
pub struct DistReport {
    /// The release version used, e.g. `v0.1.0`.
    pub version: String,
    /// The platform built.
    pub platform: Platform,
    /// Cargo output directory holding the binaries that were packed.
    pub bin_dir: PathBuf,
    /// `(plugin, archive path, sha256, binary size in bytes)` per plugin.
    pub archives: Vec<(Plugin, PathBuf, String, u64)>,
    /// krew manifests written, with the platforms each lists.
    pub manifests: Vec<(PathBuf, Vec<Platform>)>,
    /// Flux CLI plugin manifests written, with the platforms each lists.
    pub flux_manifests: Vec<(PathBuf, Vec<Platform>)>,
}

/// Manifests written by [`write_manifests`], with the platforms each lists.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// krew manifests.
    pub krew: Vec<(PathBuf, Vec<Platform>)>,
    /// Flux CLI plugin manifests.
    pub flux: Vec<(PathBuf, Vec<Platform>)>,
}

/// Cargo to run: `$CARGO` (set by `cargo run`/`cargo test`) or `cargo` from PATH.
pub(crate) fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// `cargo metadata --no-deps`: the target directory and the version of the plugin packages
/// (`v`-prefixed). Errors: cargo metadata fails or prints neither.
pub(crate) fn metadata(root: &Path) -> Result<(PathBuf, String), String> {
    let out = cargo()
        .current_dir(root)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata output: {e}"))?;
    let target_dir = v["target_directory"]
        .as_str()
        .ok_or("cargo metadata: no target_directory")?;
    let version = v["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == PLUGINS[0].package)
        .and_then(|p| p["version"].as_str())
        .ok_or_else(|| format!("cargo metadata: package {} not found", PLUGINS[0].package))?;
    Ok((PathBuf::from(target_dir), format!("v{version}")))
}

/// `v` + the plugins' Cargo version (the release version when none is given).
/// Errors: as [`metadata`].
pub fn cargo_version(root: &Path) -> Result<String, String> {
    metadata(root).map(|(_, v)| v)
}

/// The host target triple from `rustc -vV`.
fn host_triple() -> Result<String, String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .arg("-vV")
        .output()
        .map_err(|e| format!("cannot run rustc -vV: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .ok_or_else(|| "rustc -vV printed no host triple".into())
}

/// Cargo's output directory name of a profile (`dev` and `test` build into `debug`).
pub(crate) fn profile_dir(profile: &str) -> &str {
    match profile {
        "dev" | "test" => "debug",
        "bench" => "release",
        other => other,
    }
}

/// Builds the plugins, packs one archive per plugin for the platform, writes the `.sha256`
/// files and (unless `manifests_dir` is `None`) the manifests.
///
/// Errors: a message naming the failed step (cargo build, a missing LICENSE/README.md, an
/// unknown target, an invalid version, a manifest that fails krew validation).
pub fn dist(opts: &DistOptions) -> Result<DistReport, String> {
    let (target_dir, cargo_version) = metadata(&opts.root)?;
    let version = opts.version.clone().unwrap_or(cargo_version);
    validate::parse_semver(&version).map_err(|e| format!("--version: {e}"))?;
    let triple = match &opts.target {
        Some(t) => t.clone(),
        None => host_triple()?,
    };
    let platform = Platform::from_triple(&triple).ok_or_else(|| {
        format!(
            "target {triple} is not a release platform (one of: {})",
            RELEASE_PLATFORMS.map(|p| p.triple).join(", ")
        )
    })?;
    let plugins = if opts.plugins.is_empty() {
        PLUGINS.to_vec()
    } else {
        opts.plugins.clone()
    };

    let bin_dir = match &opts.prebuilt_bin_dir {
        Some(dir) => dir.clone(),
        None => {
            let mut build = cargo();
            build
                .current_dir(&opts.root)
                .args(["build", "--profile", &opts.profile]);
            for p in &plugins {
                build.args(["-p", p.package]);
            }
            if let Some(t) = &opts.target {
                build.args(["--target", t]);
            }
            eprintln!("xtask: {:?}", build);
            let status = build
                .status()
                .map_err(|e| format!("cannot run cargo build: {e}"))?;
            if !status.success() {
                return Err(format!("cargo build failed ({status})"));
            }
            let mut bin_dir = target_dir;
            if let Some(t) = &opts.target {
                bin_dir.push(t);
            }
            bin_dir.push(profile_dir(&opts.profile));
            bin_dir
        }
    };

    let archives = pack(
        &opts.root,
        &bin_dir,
        &plugins,
        &version,
        &platform,
        &opts.out_dir,
        &opts.profile,
    )?;

    let written = match &opts.manifests_dir {
        Some(dir) => write_manifests(
            &plugins,
            &version,
            &opts.out_dir,
            &opts.sha_files,
            dir,
            opts.flux_manifests_dir.as_deref(),
            false,
        )?,
        None => Written::default(),
    };
    Ok(DistReport {
        version,
        platform,
        bin_dir,
        archives,
        manifests: written.krew,
        flux_manifests: written.flux,
    })
}

/// Packs one reproducible archive per plugin from the binaries in `bin_dir` (a cargo output
/// directory) plus `<root>/LICENSE` and `<root>/README.md`, and writes `<archive>.sha256`
/// next to each. Entry order: binary (0755), LICENSE (0644), README.md (0644); mtime from
/// [`archive::source_date_epoch`].
///
/// Compression: best for the `release` profile, fastest for others (test builds pack ~190 MB
/// debug binaries; the bytes still depend only on the inputs).
///
/// Returns `(plugin, archive path, sha256, binary size in bytes)` per plugin. Errors: a missing
/// binary, LICENSE or README.md, or an I/O error, naming the file.
pub fn pack(
    root: &Path,
    bin_dir: &Path,
    plugins: &[Plugin],
    version: &str,
    platform: &Platform,
    out_dir: &Path,
    profile: &str,
) -> Result<Vec<(Plugin, PathBuf, String, u64)>, String> {
    let best = profile == "release";
    let license = read(&root.join("LICENSE"))?;
    let readme = read(&root.join("README.md"))?;
    fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let mtime = archive::source_date_epoch();
    let mut archives = Vec::new();
    for p in plugins {
        let exe = platform.exe_name(p.package);
        let binary = read(&bin_dir.join(&exe))?;
        let size = binary.len() as u64;
        let entries = [
            Entry {
                name: exe,
                mode: 0o755,
                data: binary,
            },
            Entry {
                name: "LICENSE".into(),
                mode: 0o644,
                data: license.clone(),
            },
            Entry {
                name: "README.md".into(),
                mode: 0o644,
                data: readme.clone(),
            },
        ];
        let name = manifest::archive_name(p, version, platform);
        let path = out_dir.join(&name);
        if platform.is_windows() {
            archive::write_zip_level(&path, &entries, mtime, if best { 9 } else { 1 })
        } else {
            let level = if best {
                flate2::Compression::best()
            } else {
                flate2::Compression::fast()
            };
            archive::write_tar_gz_level(&path, &entries, mtime, level)
        }
        .map_err(|e| e.to_string())?;
        let sha = sha256_file(&path)?;
        let sum_path = out_dir.join(format!("{name}.sha256"));
        fs::write(&sum_path, format!("{sha}  {name}\n"))
            .map_err(|e| format!("{}: {e}", sum_path.display()))?;
        eprintln!("xtask: {} {sha} ({size} byte binary)", path.display());
        archives.push((*p, path, sha, size));
    }

    Ok(archives)
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Gathers archive sums from `<dist_dir>/*.sha256` and `sha_files`, re-hashes every archive of
/// `version` present in `dist_dir` (a sum that disagrees with its archive is an error), then
/// writes `<manifests_dir>/<name>.yaml` for each plugin and validates it by krew's rules, and,
/// with `flux_dir`, `<flux_dir>/<name>.yaml` from the same sums, validated by
/// [`crate::flux::validate_file`].
///
/// With `require_all`, a plugin missing any of the five release platforms is an error (the
/// release workflow); otherwise such platforms are left out of its manifests.
pub fn write_manifests(
    plugins: &[Plugin],
    version: &str,
    dist_dir: &Path,
    sha_files: &[PathBuf],
    manifests_dir: &Path,
    flux_dir: Option<&Path>,
    require_all: bool,
) -> Result<Written, String> {
    let mut sums = Sums::new();
    for f in sha_files {
        manifest::read_sums(f, &mut sums)?;
    }
    if let Ok(rd) = fs::read_dir(dist_dir) {
        let mut files: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "sha256"))
            .collect();
        files.sort();
        for f in files {
            manifest::read_sums(&f, &mut sums)?;
        }
    }
    for (name, sha) in &sums {
        let path = dist_dir.join(name);
        if path.is_file() {
            let actual = sha256_file(&path)?;
            if &actual != sha {
                return Err(format!(
                    "{}: sha256 is {actual} but a sum file says {sha}; rebuild or remove the stale .sha256",
                    path.display()
                ));
            }
        }
    }
    fs::create_dir_all(manifests_dir).map_err(|e| format!("{}: {e}", manifests_dir.display()))?;
    let mut written = Vec::new();
    for p in plugins {
        let (text, listed) = manifest::render(p, version, &sums)?;
        if require_all && listed.len() != RELEASE_PLATFORMS.len() {
            let missing: Vec<String> = RELEASE_PLATFORMS
                .iter()
                .filter(|x| !listed.contains(x))
                .map(|x| manifest::archive_name(p, version, x))
                .collect();
            return Err(format!("{}: no sha256 for {}", p.name, missing.join(", ")));
        }
        let path = manifest::manifest_path(manifests_dir, p);
        fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        validate::validate_file(&path).map_err(|e| e.join("\n"))?;
        eprintln!(
            "xtask: wrote {} ({})",
            path.display(),
            listed
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        written.push((path, listed));
    }
    let mut flux = Vec::new();
    if let Some(dir) = flux_dir {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for p in plugins {
            let (text, listed) = crate::flux::render(p, version, &sums)?;
            let path = crate::flux::manifest_path(dir, p);
            fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            crate::flux::validate_file(&path).map_err(|e| e.join("\n"))?;
            eprintln!("xtask: wrote {}", path.display());
            flux.push((path, listed));
        }
    }
    Ok(Written {
        krew: written,
        flux,
    })
}
