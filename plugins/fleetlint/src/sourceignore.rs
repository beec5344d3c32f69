//! What source-controller leaves out of every artifact it builds from a Git repository, so
//! fleetlint never reads (or renders) a file Flux never ships.
//!
//! Source: fluxcd/pkg `sourceignore/sourceignore.go` (commit e2cfd1a2, read for this module):
//! - `ExcludeVCS = ".git/,.gitignore,.gitmodules,.gitattributes"`;
//! - `ExcludeExt = "*.jpg,*.jpeg,*.gif,*.png,*.wmv,*.flv,*.tar.gz,*.zip"`;
//! - `ExcludeCI = ".github/,.circleci/,.travis.yml,.gitlab-ci.yml,appveyor.yml,.drone.yml,
//!   cloudbuild.yaml,codeship-services.yml,codeship-steps.yml"`;
//! - `ExcludeExtra = "**/.goreleaser.yml,**/.sops.yaml,**/.flux.yaml"`;
//! - `NewDefaultMatcher`: those patterns first (lowest priority), then the repository's own;
//! - `LoadIgnorePatterns`: the `.sourceignore` file of every directory, each pattern scoped to
//!   the directory holding it (its "domain"), parents before children; gitignore syntax, `#`
//!   lines and blank lines skipped (`ReadPatterns`), the last matching pattern wins.
//!
//! The matching itself is gitignore's, done by the `ignore` crate (the one ripgrep uses).

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use std::collections::BTreeSet;
use std::path::Path;

/// source-controller's default exclusions, in `NewDefaultMatcher`'s order, each with the
/// fluxcd/pkg constant it comes from.
pub const DEFAULT_PATTERNS: &[(&str, &str)] = &[
    (".git/", "ExcludeVCS"),
    (".gitignore", "ExcludeVCS"),
    (".gitmodules", "ExcludeVCS"),
    (".gitattributes", "ExcludeVCS"),
    ("*.jpg", "ExcludeExt"),
    ("*.jpeg", "ExcludeExt"),
    ("*.gif", "ExcludeExt"),
    ("*.png", "ExcludeExt"),
    ("*.wmv", "ExcludeExt"),
    ("*.flv", "ExcludeExt"),
    ("*.tar.gz", "ExcludeExt"),
    ("*.zip", "ExcludeExt"),
    (".github/", "ExcludeCI"),
    (".circleci/", "ExcludeCI"),
    (".travis.yml", "ExcludeCI"),
    (".gitlab-ci.yml", "ExcludeCI"),
    ("appveyor.yml", "ExcludeCI"),
    (".drone.yml", "ExcludeCI"),
    ("cloudbuild.yaml", "ExcludeCI"),
    ("codeship-services.yml", "ExcludeCI"),
    ("codeship-steps.yml", "ExcludeCI"),
    ("**/.goreleaser.yml", "ExcludeExtra"),
    ("**/.sops.yaml", "ExcludeExtra"),
    ("**/.flux.yaml", "ExcludeExtra"),
];

/// `.sourceignore`, the file name source-controller reads in every directory.
pub const IGNORE_FILE: &str = ".sourceignore";

/// The exclusions of one repository: the defaults plus its `.sourceignore` files.
#[derive(Debug)]
pub struct SourceIgnore {
    /// One matcher per directory holding a `.sourceignore` (repository-relative, "" for the
    /// root), deepest first; the root's matcher also holds the defaults, added before the root
    /// file's own patterns (so a root `!pattern` can re-include a default exclusion).
    matchers: Vec<(String, Gitignore)>,
    /// The `.sourceignore` files read (repository-relative).
    pub files: Vec<String>,
}

impl SourceIgnore {
    /// The exclusions of the repository at `root` (absolute), reading the `.sourceignore` of
    /// `root` and of every directory of `dirs` (repository-relative directories; the callers pass
    /// every directory that holds a file fleetlint reads, and its ancestors: a `.sourceignore`
    /// elsewhere cannot exclude anything fleetlint reads).
    ///
    /// An unreadable or malformed pattern is skipped (gitignore's own behaviour).
    pub fn load<'a>(root: &Path, dirs: impl IntoIterator<Item = &'a str>) -> SourceIgnore {
        let mut with_file: BTreeSet<String> = BTreeSet::new();
        for d in dirs {
            if root.join(d).join(IGNORE_FILE).is_file() {
                with_file.insert(d.to_string());
            }
        }
        if root.join(IGNORE_FILE).is_file() {
            with_file.insert(String::new());
        }
        let mut root_b = GitignoreBuilder::new(root);
        for (p, _) in DEFAULT_PATTERNS {
            let _ = root_b.add_line(None, p);
        }
        let mut matchers = Vec::new();
        let mut files = Vec::new();
        for d in &with_file {
            let file = if d.is_empty() {
                IGNORE_FILE.to_string()
            } else {
                format!("{d}/{IGNORE_FILE}")
            };
            files.push(file.clone());
            if d.is_empty() {
                let _ = root_b.add(root.join(&file));
            } else {
                let mut b = GitignoreBuilder::new(root.join(d));
                let _ = b.add(root.join(&file));
                if let Ok(g) = b.build() {
                    matchers.push((d.clone(), g));
                }
            }
        }
        if let Ok(g) = root_b.build() {
            matchers.push((String::new(), g));
        }
        // deepest first: a child's pattern comes after its parent's in LoadIgnorePatterns, so
        // it wins
        matchers.sort_by_key(|(d, _)| {
            std::cmp::Reverse(d.matches('/').count() + !d.is_empty() as usize)
        });
        SourceIgnore { matchers, files }
    }

    /// True when source-controller leaves the repository-relative file `rel` out of the
    /// artifact.
    pub fn excluded(&self, root: &Path, rel: &str) -> bool {
        let abs = root.join(rel);
        for (d, g) in &self.matchers {
            if !d.is_empty() && !rel.starts_with(&format!("{d}/")) {
                continue;
            }
            match g.matched_path_or_any_parents(&abs, false) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_sourceignore_files_exclude_what_source_controller_excludes() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("apps/docs")).unwrap();
        std::fs::write(root.join(".sourceignore"), "# comment\nscripts/\n*.md\n").unwrap();
        std::fs::write(root.join("apps/.sourceignore"), "docs/\n!keep.md\n").unwrap();
        let ig = SourceIgnore::load(root, ["apps", "apps/docs"]);
        assert_eq!(ig.files, vec![".sourceignore", "apps/.sourceignore"]);
        for f in [
            ".github/workflows/ci.yaml",
            "clusters/dev/.sops.yaml",
            ".sops.yaml",
            ".gitlab-ci.yml",
            "scripts/x.yaml",
            "apps/docs/a.yaml",
            "README.md",
        ] {
            assert!(ig.excluded(root, f), "{f}");
        }
        for f in [
            "clusters/dev/kustomization.yaml",
            "apps/keep.md",
            "apps/app.yaml",
            "github/x.yaml",
        ] {
            assert!(!ig.excluded(root, f), "{f}");
        }
    }
}
