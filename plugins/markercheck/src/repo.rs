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

/// The root to read `dirs` (directories) against outside a Git checkout. Two readings are
/// possible and real runs need each: the repository is PATH itself (`markercheck fleet` run
/// from fleet's parent: a root taken from the current directory put every
/// `spec.update.path` outside the files, a thousand false MC013), or the current directory
/// above it (`fleetlint clusters/` run at the top of a copy of the repository: a root taken
/// from PATH put every `spec.path: ./clusters/...` below itself). So the candidates are the
/// common directory of `dirs` (one directory: itself) and, when every one is below it, the
/// current directory; the tree's own Flux paths decide: the `./`-relative `path:` values in
/// its YAML files ([`declared_paths`]: a Kustomization's `spec.path`, an
/// ImageUpdateAutomation's `spec.update.path`) are counted where they name an existing
/// directory, and the current directory is taken only when more of them resolve from it.
/// Canonical paths; `None` when none of `dirs` can be canonicalized. The plugins say which
/// root they took in a note, with `--repo-root` to set it.
pub fn root_outside_git(dirs: &[PathBuf]) -> Option<PathBuf> {
    let abs: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    let (first, rest) = abs.split_first()?;
    let mut common = first.clone();
    for d in rest {
        while !d.starts_with(&common) {
            common = common.parent()?.to_path_buf();
        }
    }
    let Ok(cwd) = std::env::current_dir().and_then(std::fs::canonicalize) else {
        return Some(common);
    };
    if cwd == common || !common.starts_with(&cwd) {
        return Some(common);
    }
    let declared = declared_paths(&common);
    let resolving = |root: &Path| declared.iter().filter(|p| root.join(p).is_dir()).count();
    if resolving(&cwd) > resolving(&common) {
        Some(cwd)
    } else {
        Some(common)
    }
}

/// The `./`-relative values of `path:` keys in one YAML text, without the `./` and a trailing
/// `/` (`spec.path: ./apps/staging` gives `apps/staging`), read line by line: a Flux
/// Kustomization's `spec.path` or an ImageUpdateAutomation's `spec.update.path` (a kustomize
/// patch's `path: /spec/x` is not relative and is left out).
pub fn declared_paths_in(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines().filter_map(|line| {
        let v = line.trim_start().strip_prefix("path:")?;
        let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
        let rel = v.strip_prefix("./").filter(|r| !r.is_empty())?;
        Some(rel.trim_end_matches('/').to_string())
    })
}

/// The `./`-relative values of `path:` keys in the YAML files below `dir` (a Flux
/// Kustomization's `spec.path`, an ImageUpdateAutomation's `spec.update.path`), read line by
/// line, only to choose a root in [`root_outside_git`]: at most 5,000 files of at most 1 MiB,
/// 12 directories deep, hidden directories skipped.
pub fn declared_paths(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut files = 0usize;
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if depth < 12 && !name.to_string_lossy().starts_with('.') {
                    stack.push((path, depth + 1));
                }
                continue;
            }
            let yaml = path.extension().is_some_and(|x| x == "yaml" || x == "yml");
            if !ft.is_file() || !yaml || e.metadata().map_or(true, |m| m.len() > 1 << 20) {
                continue;
            }
            files += 1;
            if files > 5_000 {
                return out;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            out.extend(declared_paths_in(&text));
        }
    }
    out
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

    #[test]
    fn the_declared_flux_paths_are_the_relative_path_values() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("flux/.hidden")).unwrap();
        std::fs::write(
            dir.path().join("flux/ks.yaml"),
            "spec:\n  path: ./clusters/prod/\n  patches:\n  - path: /spec/x\n---\nspec:\n  update:\n    path: \"./apps\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("flux/.hidden/x.yaml"), "path: ./no\n").unwrap();
        std::fs::write(dir.path().join("flux/notes.txt"), "path: ./no\n").unwrap();
        let mut got = declared_paths(dir.path());
        got.sort();
        assert_eq!(got, ["apps", "clusters/prod"]);
    }
}
