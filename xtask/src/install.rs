//! What `kubectl krew install --manifest=F --archive=A` does, for tests on a machine without
//! krew (krew internal/installation/install.go `Install`/`install`, move.go, downloader.go):
//! read and validate the manifest, pick the platform whose selector matches `<os, arch>`,
//! verify the archive's sha256, extract it, apply the `files` operations into
//! `KREW_ROOT/store/<name>/<version>/`, link `KREW_ROOT/bin/kubectl-<name>` to `bin`, and write
//! `KREW_ROOT/receipts/<name>.yaml`.

use std::fs;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::archive;
use crate::manifest::FileOperation;
use crate::validate;

/// Where an installed plugin ended up.
#[derive(Debug, Clone)]
pub struct Installed {
    /// krew plugin name.
    pub name: String,
    /// `KREW_ROOT/store/<name>/<version>`.
    pub install_dir: PathBuf,
    /// `KREW_ROOT/bin/kubectl-<name>` (a symlink).
    pub link: PathBuf,
    /// Files in the install directory, relative, sorted.
    pub files: Vec<String>,
}

/// Lowercase hex sha256 of a file.
///
/// Errors: the file cannot be read.
pub fn sha256_file(path: &Path) -> Result<String, String> {
    let data = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(hex(&Sha256::digest(&data)))
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Installs a plugin from a local manifest and archive into `krew_root` for `<os, arch>`.
///
/// Errors (one message naming the file and the step): invalid manifest, no matching platform,
/// already installed (a receipt exists), sha256 mismatch, unpack refused, a `files` glob that
/// matches nothing, `bin` missing or outside the install directory.
pub fn install(
    krew_root: &Path,
    manifest_path: &Path,
    archive_path: &Path,
    os: &str,
    arch: &str,
) -> Result<Installed, String> {
    let m = validate::validate_file(manifest_path).map_err(|e| e.join("\n"))?;
    let name = m.metadata.name.clone();
    let receipt = krew_root.join("receipts").join(format!("{name}.yaml"));
    if receipt.exists() {
        return Err(format!(
            "can't install {name}, the newest version is already installed ({})",
            receipt.display()
        ));
    }
    // GetMatchingPlatform: the first platform whose selector matches.
    let platform = m
        .spec
        .platforms
        .iter()
        .find(|p| p.selector.as_ref().is_some_and(|s| s.matches(os, arch)))
        .ok_or_else(|| format!("plugin {name:?} does not offer installation for {os}/{arch}"))?;

    // Sha256Verifier: the archive must hash to the manifest's sum.
    let got = sha256_file(archive_path)?;
    if got != platform.sha256 {
        return Err(format!(
            "{}: checksum does not match, want: {}, got {got}",
            archive_path.display(),
            platform.sha256
        ));
    }

    let staging = tempdir(krew_root, "krew-downloads")?;
    let moved = tempdir(krew_root, "krew-temp-move")?;
    let result = (|| {
        archive::extract_like_krew(archive_path, &staging).map_err(|e| e.to_string())?;
        let default_ops = [FileOperation {
            from: "*".into(),
            to: ".".into(),
        }];
        let ops: &[FileOperation] = platform.files.as_deref().unwrap_or(&default_ops);
        for op in ops {
            move_files(&staging, &moved, op)?;
        }
        let install_dir = krew_root.join("store").join(&name).join(&m.spec.version);
        fs::create_dir_all(install_dir.parent().unwrap_or(krew_root))
            .map_err(|e| format!("{}: {e}", install_dir.display()))?;
        if install_dir.exists() {
            fs::remove_dir_all(&install_dir)
                .map_err(|e| format!("{}: {e}", install_dir.display()))?;
        }
        fs::rename(&moved, &install_dir).map_err(|e| format!("{}: {e}", install_dir.display()))?;

        let bin = clean_relative(&platform.bin)
            .ok_or_else(|| format!("bin {:?} is not inside the install directory", platform.bin))?;
        let bin_path = install_dir.join(bin);
        if !bin_path.is_file() {
            return Err(format!(
                "can't create symbolic link, source binary ({}) cannot be found in extracted archive",
                bin_path.display()
            ));
        }
        // pluginNameToBin: kubectl-<name with - replaced by _>.
        let bin_dir = krew_root.join("bin");
        fs::create_dir_all(&bin_dir).map_err(|e| format!("{}: {e}", bin_dir.display()))?;
        let link = bin_dir.join(format!("kubectl-{}", name.replace('-', "_")));
        if fs::symlink_metadata(&link).is_ok() {
            fs::remove_file(&link).map_err(|e| format!("{}: {e}", link.display()))?;
        }
        symlink(&bin_path, &link)?;

        let receipts = krew_root.join("receipts");
        fs::create_dir_all(&receipts).map_err(|e| format!("{}: {e}", receipts.display()))?;
        let mut text = fs::read_to_string(manifest_path)
            .map_err(|e| format!("{}: {e}", manifest_path.display()))?;
        if !text.ends_with('\n') {
            text.push('\n');
        }
        // receipt.New: the plugin plus status.source.name; `--manifest` installs are "detached".
        text.push_str("status:\n  source:\n    name: detached\n");
        fs::write(&receipt, text).map_err(|e| format!("{}: {e}", receipt.display()))?;

        let mut files = Vec::new();
        collect_files(&install_dir, &install_dir, &mut files);
        files.sort();
        Ok(Installed {
            name: name.clone(),
            install_dir,
            link,
            files,
        })
    })();
    let _ = fs::remove_dir_all(&staging);
    let _ = fs::remove_dir_all(&moved);
    let _ = fs::remove_dir(krew_root.join(".tmp"));
    result
}

/// krew move.go `findMoveTargets` + `moveFiles`: `to` must be clean; if `from` names an existing
/// path it is moved to `to` (`.` keeps its base name); otherwise `from` is a glob and each match
/// goes to `to/<base name>`. A glob matching nothing is an error.
fn move_files(from_dir: &Path, to_dir: &Path, op: &FileOperation) -> Result<(), String> {
    let to = clean_relative(&op.to).ok_or_else(|| {
        format!(
            "the provided path is not clean or not relative: {:?}",
            op.to
        )
    })?;
    let mut moves = Vec::new();
    let direct = from_dir.join(&op.from);
    if clean_relative(&op.from).is_some() && fs::symlink_metadata(&direct).is_ok() {
        let dest = if to.as_os_str().is_empty() {
            to_dir.join(direct.file_name().unwrap_or_default())
        } else {
            to_dir.join(&to)
        };
        moves.push((direct, dest));
    } else {
        let pattern = from_dir.join(&op.from);
        let matches: Vec<PathBuf> = glob::glob(&pattern.to_string_lossy())
            .map_err(|e| format!("could not get files using a glob string {:?}: {e}", op.from))?
            .filter_map(Result::ok)
            .collect();
        if matches.is_empty() {
            return Err(format!(
                "no files in the plugin archive matched the glob pattern={}",
                op.from
            ));
        }
        for m in matches {
            if !m.starts_with(from_dir) {
                return Err(format!(
                    "can't move, {} is not under the archive",
                    m.display()
                ));
            }
            let base = m.file_name().unwrap_or_default().to_owned();
            moves.push((m, to_dir.join(&to).join(base)));
        }
    }
    for (from, dest) in moves {
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        fs::rename(&from, &dest).map_err(|e| {
            format!(
                "could not move {} to {}: {e}",
                from.display(),
                dest.display()
            )
        })?;
    }
    Ok(())
}

/// A relative, clean path (`.` becomes empty); `None` for absolute paths or `..` components.
fn clean_relative(p: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in Path::new(p).components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

fn tempdir(root: &Path, prefix: &str) -> Result<PathBuf, String> {
    let base = root.join(".tmp");
    fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    for i in 0..1000u32 {
        let p = base.join(format!("{prefix}-{}-{i}", std::process::id()));
        if fs::create_dir(&p).is_ok() {
            return Ok(p);
        }
    }
    Err(format!(
        "cannot create a temporary directory in {}",
        base.display()
    ))
}

fn collect_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_files(root, &p, out);
        } else if let Ok(rel) = p.strip_prefix(root) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> Result<(), String> {
    std::os::unix::fs::symlink(target, link).map_err(|e| {
        format!(
            "failed to create a symlink from {} to {}: {e}",
            target.display(),
            link.display()
        )
    })
}

#[cfg(not(unix))]
fn symlink(target: &Path, link: &Path) -> Result<(), String> {
    fs::copy(target, link).map(|_| ()).map_err(|e| {
        format!(
            "failed to copy {} to {}: {e}",
            target.display(),
            link.display()
        )
    })
}
