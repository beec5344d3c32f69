//! Small fleets of our own, written into temporary directories.
#![allow(dead_code)]

use fleetlint::lint::Finding;
use std::path::{Path, PathBuf};

/// A temporary fleet repository.
pub struct Fleet {
    pub dir: tempfile::TempDir,
}

impl Fleet {
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Writes (or overwrites) a file.
    pub fn write(&self, rel: &str, text: &str) {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn remove(&self, rel: &str) {
        std::fs::remove_file(self.root().join(rel)).unwrap();
    }

    /// Runs the library on the whole tree (no on-disk cache, markers included).
    pub fn lint(&self) -> fleetlint::Report {
        self.lint_with(|_| {})
    }

    pub fn lint_with(&self, f: impl FnOnce(&mut fleetlint::Config)) -> fleetlint::Report {
        let mut cfg = fleetlint::Config {
            path: self.root().to_path_buf(),
            repo_root: Some(self.root().to_path_buf()),
            cache_dir: None,
            ..Default::default()
        };
        f(&mut cfg);
        fleetlint::run(&cfg).expect("run")
    }
}

/// Rule IDs of a report's findings, sorted.
pub fn rules(r: &fleetlint::Report) -> Vec<String> {
    let mut v: Vec<String> = r.findings.iter().map(|f| f.rule.clone()).collect();
    v.sort();
    v
}

pub fn show(r: &fleetlint::Report) -> String {
    r.findings
        .iter()
        .map(|f: &Finding| {
            format!(
                "{} {}:{} [{:?}] {}",
                f.rule, f.file, f.line, f.overlay, f.message
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The workspace root (holding clusters/).
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub const GOTK_SYNC: &str = r#"apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m0s
  ref:
    branch: main
  url: https://git.example.com/team/fleet.git
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m0s
  path: ./clusters/test
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
"#;

/// A one-cluster fleet that lints clean: clusters/test renders the root, a ConfigMap of
/// variables and Kustomization `app` (./apps/app, substituteFrom cluster-vars, wait).
pub fn clean_fleet() -> Fleet {
    let f = Fleet {
        dir: tempfile::tempdir().unwrap(),
    };
    f.write("clusters/test/flux-system/gotk-sync.yaml", GOTK_SYNC);
    f.write(
        "clusters/test/flux-system/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - gotk-sync.yaml\n",
    );
    f.write(
        "clusters/test/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - flux-system\n  - vars.yaml\n  - app.yaml\n",
    );
    f.write(
        "clusters/test/vars.yaml",
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: cluster-vars
  namespace: flux-system
data:
  REPLICAS: "2"
  GATEWAY_VIP: 10.20.0.100
"#,
    );
    f.write(
        "clusters/test/app.yaml",
        r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: app
  namespace: flux-system
spec:
  interval: 10m0s
  timeout: 5m0s
  path: ./apps/app
  prune: true
  wait: true
  sourceRef:
    kind: GitRepository
    name: flux-system
  postBuild:
    substituteFrom:
      - kind: ConfigMap
        name: cluster-vars
"#,
    );
    f.write(
        "apps/app/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: web\nresources:\n  - deploy.yaml\n  - gateway.yaml\n",
    );
    f.write(
        "apps/app/deploy.yaml",
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: ${REPLICAS}
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      initContainers:
        - name: init
          image: ghcr.io/example/init:1.0.0
          command: ["sh", "-c", "echo $${HOSTNAME} ready"]
      containers:
        - name: web
          image: ghcr.io/example/web:2.3.4
          env:
            - name: LOG_LEVEL
              value: ${LOG_LEVEL:=info}
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
    - name: http
      port: 80
"#,
    );
    f.write(
        "apps/app/gateway.yaml",
        r#"apiVersion: cilium.io/v2alpha1
kind: CiliumLoadBalancerIPPool
metadata:
  name: lan
spec:
  blocks:
    - start: 10.20.0.100
      stop: 10.20.0.150
---
apiVersion: v1
kind: Service
metadata:
  name: gateway
spec:
  type: LoadBalancer
  loadBalancerIP: ${GATEWAY_VIP}
  selector:
    app: web
  ports:
    - name: http
      port: 80
"#,
    );
    f
}
