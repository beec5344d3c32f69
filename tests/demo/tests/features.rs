//! `./demo` builds its offline steps' packages first (`cargo build -p ... --bins`, the line in
//! the script itself), then the whole workspace (`cargo build --workspace --bins`). Cargo
//! resolves features over the packages it is asked to build, so when the two resolutions
//! differ the second build compiles the differing crates (and everything above them) again:
//! 46 crates on a fresh clone, found by a fresh-user trial. This test asks the real `cargo
//! tree` for both resolutions and fails on any crate whose features differ, naming the
//! feature to add to tests/demo/Cargo.toml's unification block.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// The repository root (two levels above this crate).
fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The `-p PACKAGE` arguments of the demo script's first `cargo build -p` line.
fn offline_packages() -> Vec<String> {
    let script = std::fs::read_to_string(root().join("demo")).unwrap();
    let line = script
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("cargo build -p "))
        .expect("./demo has a `cargo build -p ...` line for its offline steps");
    let words: Vec<&str> = line.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0] == "-p")
        .map(|w| w[1].to_owned())
        .collect()
}

/// `cargo tree` of `selection` (normal and build edges, as `cargo build --bins` resolves
/// them): each package (`name vX.Y.Z`) with the set of feature lists it is built with (a
/// package built for the host and for the target may have two).
fn resolution(selection: &[String]) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .current_dir(root())
        .args(["tree", "--locked", "--offline", "-e", "normal,build"])
        .args(["--prefix", "none", "--format", "{p}|{f}"])
        .args(selection)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo tree {selection:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let line = line.trim_end_matches(" (*)");
        if let Some((p, f)) = line.split_once('|') {
            // local packages print their path after the version
            let p = p.split(" (").next().unwrap_or(p).trim();
            m.entry(p.to_owned()).or_default().insert(f.to_owned());
        }
    }
    m
}

#[test]
fn the_demos_first_build_resolves_the_features_the_workspace_build_does() {
    let packages = offline_packages();
    assert!(
        packages.iter().any(|p| p == "cluster-loop-demo"),
        "{packages:?}"
    );
    let selection: Vec<String> = packages
        .iter()
        .flat_map(|p| ["-p".to_owned(), p.clone()])
        .collect();
    let first = resolution(&selection);
    let workspace = resolution(&["--workspace".to_owned()]);
    let mut differ = Vec::new();
    for (pkg, sets) in &first {
        let Some(ws) = workspace.get(pkg) else {
            differ.push(format!("{pkg}: not in the workspace build"));
            continue;
        };
        for f in sets.difference(ws) {
            differ.push(format!(
                "{pkg}: first build [{f}], workspace build {:?}",
                ws
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "./demo's first build ({}) resolves features the workspace build does not, so the \
         workspace build compiles these again; add the workspace's features to \
         tests/demo/Cargo.toml's unification block:\n{}",
        selection.join(" "),
        differ.join("\n")
    );
}
