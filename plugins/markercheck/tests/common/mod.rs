//! Helpers: write a fixture tree to a temp dir and run the real binary on it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

pub const IMAGES: &str = r#"apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata:
  name: app
  namespace: flux-system
spec:
  image: ghcr.io/org/app
  interval: 5m
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata:
  name: app
  namespace: flux-system
spec:
  imageRepositoryRef:
    name: app
  policy:
    semver:
      range: 1.x
"#;

pub const SET: &str = "flux-system:app=ghcr.io/org/app:1.2.3";

pub fn write_tree(dir: &Path, files: &[(&str, &str)]) {
    for (p, c) in files {
        let p = dir.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, c).unwrap();
    }
}

pub struct Out {
    pub code: i32,
    pub json: serde_json::Value,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// (rule, file, line) of every finding.
    pub fn findings(&self) -> Vec<(String, String, u64)> {
        self.json["findings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|f| {
                        (
                            f["rule"].as_str().unwrap().to_string(),
                            f["file"].as_str().unwrap().to_string(),
                            f["line"].as_u64().unwrap(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn has(&self, rule: &str) -> bool {
        self.findings().iter().any(|f| f.0 == rule)
    }

    pub fn at(&self, rule: &str, file: &str, line: u64) -> bool {
        self.findings()
            .iter()
            .any(|f| f.0 == rule && f.1 == file && f.2 == line)
    }
}

pub fn run_in(dir: &Path, args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_kubectl-markercheck"))
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    Out {
        code: o.status.code().unwrap_or(-1),
        json: serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null),
        stdout,
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Write `files` (plus the ImageRepository/ImagePolicy of `IMAGES` under flux/) and run
/// `kubectl-markercheck . -o json --set SET <extra>`.
pub fn lint(files: &[(&str, &str)], extra: &[&str]) -> Out {
    let d = tempfile::tempdir().unwrap();
    write_tree(d.path(), &[("flux/images.yaml", IMAGES)]);
    write_tree(d.path(), files);
    let mut args = vec![".", "-o", "json", "--set", SET];
    args.extend_from_slice(extra);
    run_in(d.path(), &args)
}

pub fn deployment(image_line: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n{image_line}\n"
    )
}
