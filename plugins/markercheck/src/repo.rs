//! The repository a path is read against: its Git work tree's root, or, outside a Git
//! checkout (a CI export, a tarball), one rule shared by every offline plugin (fleetlint and
//! markercheck, fleet-diff), so two plugins never resolve the same `spec.path` against
//! different roots. Flux resolves a Kustomization's `spec.path` and an
//! ImageUpdateAutomation's `spec.update.path` from the root of the source's artifact, which
//! for a GitRepository is the repository's root. Here, in the offline engine, because it is
//! the lowest crate the offline plugins share (it builds without the cluster client).

use std::path::{Path, PathBuf};

/// The nearest directory at or above `p` (made absolute and canonical) that holds `.git` (a
/// directory, or a file for a worktree or submodule): the Git work tree's root. `None` outside
/// a Git checkout, or when `p` cannot be canonicalized.
pub fn git_root_of(p: &Path) -> Option<PathBuf> {
    let abs = std::fs::canonicalize(p).ok()?;
    abs.ancestors()
        .find(|c| c.join(".git").exists())
        .map(Path::to_path_buf)
}

/// The root to read `dirs` (directories) against outside a Git checkout: the current directory
/// when every one is at or below it (`fleetlint clusters/` run in a copy of the repository),
/// else their longest common ancestor (one directory: itself). Canonical paths; `None` when
/// none can be canonicalized. The plugins say which root they took in a note, with
/// `--repo-root` to set it.
pub fn root_outside_git(dirs: &[PathBuf]) -> Option<PathBuf> {
    let abs: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    if abs.is_empty() {
        return None;
    }
    if let Ok(cwd) = std::env::current_dir().and_then(std::fs::canonicalize)
        && abs.iter().all(|d| d.starts_with(&cwd))
    {
        return Some(cwd);
    }
    let mut acc = abs[0].clone();
    for d in &abs[1..] {
        while !d.starts_with(&acc) {
            acc = acc.parent()?.to_path_buf();
        }
    }
    Some(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_git_root_is_the_nearest_dot_git_above() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let sub = root.join("clusters/prod");
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(git_root_of(&sub), None);
        std::fs::create_dir(root.join(".git")).unwrap();
        assert_eq!(git_root_of(&sub), Some(root.clone()));
        // A worktree's .git is a file.
        let wt = root.join("clusters/wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), "gitdir: elsewhere\n").unwrap();
        assert_eq!(git_root_of(&wt), Some(wt.clone()));
    }

    #[test]
    fn outside_git_the_common_directory_of_the_paths_when_not_below_the_current_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (a, b) = (root.join("fleet/apps"), root.join("fleet/clusters/prod"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        // The test's current directory is the crate's, not above the temp dir.
        assert_eq!(
            root_outside_git(&[a.clone(), b.clone()]),
            Some(root.join("fleet"))
        );
        assert_eq!(root_outside_git(std::slice::from_ref(&a)), Some(a.clone()));
        assert_eq!(root_outside_git(&[root.join("missing")]), None);
    }
}
