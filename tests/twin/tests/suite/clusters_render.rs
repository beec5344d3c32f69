//! The example fleet repository (`clusters/`) renders and is wired the way the failure
//! catalogue's layout says.
//!
//! Runs the real `kubectl kustomize` (kustomize built into kubectl) on every directory under
//! `clusters/` that holds a `kustomization.yaml`, found by walking the tree, and parses each
//! output with serde-saphyr. Then checks the Flux wiring on the rendered objects: sourceRefs
//! and dependsOn names resolve, the wave chain, substitution variables are defined by every
//! overlay, overlays only patch cluster-vars, and image-automation setter markers sit on the
//! right fields (image-automation-controller internal/update setters rules, see
//! /work/shared/docs/reference.md).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Root of the fleet repository: the workspace root, which holds `clusters/`.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Every directory under `clusters/` that contains a `kustomization.yaml`, relative to the repo
/// root (e.g. `clusters/apps/wave-1`), sorted.
fn kustomization_dirs() -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        if entries
            .iter()
            .any(|p| p.file_name().unwrap() == "kustomization.yaml")
        {
            out.push(
                dir.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        for p in entries {
            if p.is_dir() {
                walk(&p, root, out);
            }
        }
    }
    let root = repo_root();
    let mut out = Vec::new();
    walk(&root.join("clusters"), &root, &mut out);
    out
}

/// `kubectl kustomize DIR`, parsed into one JSON value per YAML document.
fn render(dir: &str) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(repo_root().join(dir))
        .output()
        .unwrap_or_else(|e| panic!("cannot run `kubectl kustomize` (is kubectl on PATH?): {e}"));
    assert!(
        out.status.success(),
        "kubectl kustomize {dir} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("kustomize output is UTF-8");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("output of kubectl kustomize {dir} is not YAML: {e}"));
    assert!(
        !docs.is_empty(),
        "kubectl kustomize {dir} rendered no objects"
    );
    docs
}

fn s<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

fn kind(v: &Value) -> &str {
    s(v, "/kind").unwrap_or_default()
}

fn name(v: &Value) -> &str {
    s(v, "/metadata/name").unwrap_or_default()
}

fn namespace(v: &Value) -> &str {
    s(v, "/metadata/namespace").unwrap_or("default")
}

fn find<'a>(docs: &'a [Value], k: &str, ns: &str, n: &str) -> Option<&'a Value> {
    docs.iter()
        .find(|d| kind(d) == k && namespace(d) == ns && name(d) == n)
}

fn flux_kustomizations(docs: &[Value]) -> Vec<&Value> {
    docs.iter()
        .filter(|d| {
            kind(d) == "Kustomization"
                && s(d, "/apiVersion") == Some("kustomize.toolkit.fluxcd.io/v1")
        })
        .collect()
}

/// All renders, keyed by directory. Rendering is the expensive part; do it once per test.
fn render_all() -> BTreeMap<String, Vec<Value>> {
    kustomization_dirs()
        .into_iter()
        .map(|d| (d.clone(), render(&d)))
        .collect()
}

/// The cluster directories: those whose render holds the root Kustomization `flux-system`
/// and the `cluster-vars` ConfigMap (so not `base/flux-system` on its own).
fn cluster_dirs(renders: &BTreeMap<String, Vec<Value>>) -> Vec<String> {
    renders
        .iter()
        .filter(|(_, docs)| {
            find(docs, "Kustomization", "flux-system", "flux-system").is_some()
                && find(docs, "ConfigMap", "flux-system", "cluster-vars").is_some()
        })
        .map(|(d, _)| d.clone())
        .collect()
}

#[test]
fn every_kustomization_dir_renders_to_objects() {
    let dirs = kustomization_dirs();
    for expected in [
        "clusters/base",
        "clusters/base/flux-system",
        "clusters/dev",
        "clusters/prod",
        "clusters/platform",
        "clusters/platform-config",
        "clusters/apps/wave-0",
        "clusters/apps/wave-1",
        "clusters/apps/wave-2",
    ] {
        assert!(
            dirs.iter().any(|d| d == expected),
            "{expected} not found in {dirs:?}"
        );
    }
    for (dir, docs) in render_all() {
        for d in &docs {
            assert!(
                s(d, "/apiVersion").is_some() && !kind(d).is_empty() && !name(d).is_empty(),
                "{dir}: object without apiVersion/kind/metadata.name: {d}"
            );
        }
    }
}

#[test]
fn clusters_wire_sources_dependencies_and_waves() {
    let renders = render_all();
    let clusters = cluster_dirs(&renders);
    assert_eq!(clusters, ["clusters/base", "clusters/dev", "clusters/prod"]);
    let root = repo_root();

    for dir in &clusters {
        let docs = &renders[dir];
        let git = find(docs, "GitRepository", "flux-system", "flux-system")
            .unwrap_or_else(|| panic!("{dir}: no GitRepository flux-system/flux-system"));
        assert_eq!(
            s(git, "/apiVersion"),
            Some("source.toolkit.fluxcd.io/v1"),
            "{dir}"
        );
        assert_eq!(
            s(git, "/spec/url"),
            Some("https://gitea.example.local/org/fleet.git")
        );
        assert_eq!(s(git, "/spec/ref/branch"), Some("main"), "{dir}");
        assert_eq!(s(git, "/spec/secretRef/name"), Some("flux-system"), "{dir}");
        assert_eq!(s(git, "/spec/interval"), Some("1m0s"), "{dir}");

        let ks = flux_kustomizations(docs);
        let names: BTreeSet<&str> = ks.iter().map(|k| name(k)).collect();
        assert_eq!(
            names,
            BTreeSet::from([
                "flux-system",
                "platform",
                "platform-config",
                "apps-wave-0",
                "apps-wave-1",
                "apps-wave-2"
            ]),
            "{dir}: Kustomizations"
        );

        for k in &ks {
            let (kns, kname) = (namespace(k), name(k));
            // sourceRef: namespace defaults to the Kustomization's own (kustomize-controller
            // api/v1 CrossNamespaceSourceReference).
            let src_kind = s(k, "/spec/sourceRef/kind").expect("sourceRef.kind");
            let src_name = s(k, "/spec/sourceRef/name").expect("sourceRef.name");
            let src_ns = s(k, "/spec/sourceRef/namespace").unwrap_or(kns);
            assert!(
                find(docs, src_kind, src_ns, src_name).is_some(),
                "{dir}: Kustomization {kns}/{kname} sourceRef {src_kind}/{src_ns}/{src_name} \
                 is not in the render"
            );
            for dep in k
                .pointer("/spec/dependsOn")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let dn = s(dep, "/name").expect("dependsOn.name");
                let dns = s(dep, "/namespace").unwrap_or(kns);
                assert!(
                    find(docs, "Kustomization", dns, dn).is_some(),
                    "{dir}: {kname} dependsOn {dns}/{dn}, which is not in the render"
                );
            }
            assert_eq!(
                s(k, "/spec/interval"),
                Some("10m0s"),
                "{dir}: {kname} interval"
            );
            // spec.path is relative to the repository root and must be a kustomize directory.
            let path = s(k, "/spec/path").expect("spec.path");
            let rel = path.strip_prefix("./").unwrap_or(path);
            assert!(
                root.join(rel).join("kustomization.yaml").is_file(),
                "{dir}: {kname} spec.path {path} has no kustomization.yaml"
            );
            if kname == "flux-system" {
                assert_eq!(
                    path,
                    format!("./{dir}"),
                    "root Kustomization renders its own dir"
                );
                continue;
            }
            assert_eq!(
                k.pointer("/spec/wait"),
                Some(&Value::Bool(true)),
                "{dir}: {kname}"
            );
            let timeout = s(k, "/spec/timeout").expect("explicit timeout");
            assert!(
                ["5m0s", "15m0s"].contains(&timeout),
                "{dir}: {kname} timeout {timeout}"
            );
            assert!(
                k.pointer("/spec/healthChecks").is_none(),
                "{dir}: {kname} waits on its own objects only"
            );
            let from = k
                .pointer("/spec/postBuild/substituteFrom")
                .and_then(Value::as_array)
                .unwrap_or_else(|| panic!("{dir}: {kname} has no postBuild.substituteFrom"));
            assert!(
                from.iter().any(|f| s(f, "/kind") == Some("ConfigMap")
                    && s(f, "/name") == Some("cluster-vars")
                    && find(docs, "ConfigMap", kns, "cluster-vars").is_some()),
                "{dir}: {kname} substituteFrom must name the rendered cluster-vars ConfigMap"
            );
        }

        let deps = |n: &str| -> Vec<String> {
            let k = ks.iter().find(|k| name(k) == n).unwrap();
            k.pointer("/spec/dependsOn")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|d| s(d, "/name").unwrap().to_owned())
                .collect()
        };
        assert!(deps("platform").is_empty(), "{dir}");
        assert_eq!(deps("platform-config"), ["platform"], "{dir}");
        assert_eq!(deps("apps-wave-0"), ["platform-config"], "{dir}");
        for n in 1..=2 {
            assert_eq!(
                deps(&format!("apps-wave-{n}")),
                [format!("apps-wave-{}", n - 1)]
            );
        }
    }
}

/// Names of `${VAR}` / `${VAR:=default}` references in a rendered object, as kustomize-controller
/// postBuild substitution sees them (`$${VAR}` is an escape and is not a reference). Objects
/// annotated or labelled `kustomize.toolkit.fluxcd.io/substitute: disabled` are skipped, as
/// upstream does. Returns (name, has_default).
fn substitution_vars(docs: &[Value]) -> BTreeSet<(String, bool)> {
    let re = regex::Regex::new(r"(\$?)\$\{([A-Za-z_][A-Za-z0-9_]*)(:?=[^}]*)?\}").unwrap();
    let mut out = BTreeSet::new();
    for d in docs {
        let disabled = ["annotations", "labels"].iter().any(|m| {
            s(
                d,
                &format!("/metadata/{m}/kustomize.toolkit.fluxcd.io~1substitute"),
            ) == Some("disabled")
        });
        if disabled {
            continue;
        }
        let text = d.to_string();
        for c in re.captures_iter(&text) {
            if c[1].is_empty() {
                out.insert((c[2].to_owned(), c.get(3).is_some()));
            }
        }
    }
    out
}

#[test]
fn overlays_define_every_variable_and_only_patch_cluster_vars() {
    let renders = render_all();
    let base = &renders["clusters/base"];
    let mut tbd_seen = false;
    for dir in cluster_dirs(&renders) {
        let docs = &renders[&dir];
        let vars = find(docs, "ConfigMap", "flux-system", "cluster-vars")
            .and_then(|c| c.pointer("/data"))
            .and_then(Value::as_object)
            .unwrap_or_else(|| panic!("{dir}: cluster-vars has no data"));
        let mut used = BTreeSet::new();
        for k in flux_kustomizations(docs) {
            if name(k) == "flux-system" {
                continue;
            }
            let path = s(k, "/spec/path").unwrap().trim_start_matches("./");
            let target = renders
                .get(path)
                .unwrap_or_else(|| panic!("{dir}: {} path {path} was not rendered", name(k)));
            for (var, has_default) in substitution_vars(target) {
                used.insert(var.clone());
                assert!(
                    has_default || vars.contains_key(&var),
                    "{dir}: {} renders ${{{var}}} but cluster-vars does not define it",
                    name(k)
                );
            }
        }
        // No dead knobs: every key is substituted somewhere, so a TBD-PROD-* placeholder
        // always lands in a field and fails there instead of sitting unused.
        for key in vars.keys() {
            assert!(
                used.contains(key),
                "{dir}: cluster-vars key {key} is never substituted"
            );
        }
        for (key, value) in vars {
            let value = value
                .as_str()
                .unwrap_or_else(|| panic!("{dir}: {key} is not a string"));
            if let Some(rest) = value.strip_prefix("TBD-PROD-") {
                tbd_seen = true;
                assert_eq!(
                    dir, "clusters/prod",
                    "{key}: TBD-PROD-* placeholder outside prod"
                );
                assert!(
                    !rest.is_empty()
                        && rest
                            .chars()
                            .all(|c| c.is_ascii_uppercase() || c == '-' || c.is_ascii_digit()),
                    "{dir}: malformed placeholder {value}"
                );
            }
        }

        // Overlays never fork base: apart from cluster-vars data and the root Kustomization's
        // spec.path, the render is identical to base's.
        assert_eq!(
            docs.len(),
            base.len(),
            "{dir}: object count differs from base"
        );
        for d in docs {
            let b = find(base, kind(d), namespace(d), name(d))
                .unwrap_or_else(|| panic!("{dir}: {} {} not in base", kind(d), name(d)));
            let (mut d, mut b) = (d.clone(), b.clone());
            if kind(&d) == "ConfigMap" && name(&d) == "cluster-vars" {
                d["data"] = Value::Null;
                b["data"] = Value::Null;
                assert_eq!(
                    vars.keys().collect::<BTreeSet<_>>(),
                    base_keys(base),
                    "{dir}: cluster-vars keys differ from base's"
                );
            }
            if kind(&d) == "Kustomization" && name(&d) == "flux-system" {
                d["spec"]["path"] = Value::Null;
                b["spec"]["path"] = Value::Null;
            }
            assert_eq!(d, b, "{dir}: differs from base beyond cluster-vars");
        }
    }
    assert!(
        tbd_seen,
        "prod keeps its undecided values as TBD-PROD-* placeholders"
    );
}

fn base_keys(base: &[Value]) -> BTreeSet<&String> {
    find(base, "ConfigMap", "flux-system", "cluster-vars")
        .and_then(|c| c.pointer("/data"))
        .and_then(Value::as_object)
        .map(|m| m.keys().collect())
        .unwrap_or_default()
}

/// One `$imagepolicy` setter marker found in a source file (rendering drops comments, so the
/// markers are read from the files the automation would edit).
#[derive(Debug)]
struct Marker {
    file: PathBuf,
    line_no: usize,
    key: String,
    value: String,
    policy_ns: String,
    policy: String,
    suffix: Option<String>,
}

fn markers_under(dir: &Path) -> Vec<Marker> {
    let re = regex::Regex::new(
        r#"^\s*(?:- )?([A-Za-z]+):\s*(\S+)\s+#\s*\{"\$imagepolicy":\s*"([^"]+)"\}\s*$"#,
    )
    .unwrap();
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            // Only the files image-automation-controller reads: `.yaml`, `.yml` (case
            // sensitive) and files named `Kustomization`.
            let fname = p.file_name().unwrap().to_string_lossy();
            if !(fname.ends_with(".yaml") || fname.ends_with(".yml") || fname == "Kustomization") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            for (i, line) in text.lines().enumerate() {
                if !line.contains("\"$imagepolicy\"") {
                    continue;
                }
                let c = re.captures(line).unwrap_or_else(|| {
                    panic!(
                        "{}:{}: marker is not a line comment on a scalar",
                        p.display(),
                        i + 1
                    )
                });
                let parts: Vec<&str> = c[3].split(':').collect();
                assert!(
                    (2..=3).contains(&parts.len()),
                    "{}:{}: marker {} is not ns:name[:tag|:name|:digest]",
                    p.display(),
                    i + 1,
                    &c[3]
                );
                out.push(Marker {
                    file: p.clone(),
                    line_no: i + 1,
                    key: c[1].to_owned(),
                    value: c[2].to_owned(),
                    policy_ns: parts[0].to_owned(),
                    policy: parts[1].to_owned(),
                    suffix: parts.get(2).map(|s| (*s).to_owned()),
                });
            }
        }
    }
    out
}

#[test]
fn image_automation_markers_are_on_the_right_fields() {
    let root = repo_root();
    let platform = render("clusters/platform");
    let autos: Vec<&Value> = platform
        .iter()
        .filter(|d| kind(d) == "ImageUpdateAutomation")
        .collect();
    assert_eq!(autos.len(), 1, "one ImageUpdateAutomation");
    let auto = autos[0];
    assert_eq!(s(auto, "/apiVersion"), Some("image.toolkit.fluxcd.io/v1"));
    let template = s(auto, "/spec/git/commit/messageTemplate").expect("messageTemplate");
    assert!(template.contains(".Changed"), "template uses .Changed");
    assert!(
        !template.contains(".Updated"),
        "template must not use the removed .Updated"
    );
    let src = s(auto, "/spec/sourceRef/name").unwrap();
    assert_eq!(s(auto, "/spec/sourceRef/kind"), Some("GitRepository"));
    assert_eq!(src, "flux-system");
    let update_path = s(auto, "/spec/update/path").expect("update.path");
    let update_dir = root.join(update_path.trim_start_matches("./"));
    assert!(update_dir.is_dir(), "update.path {update_path} exists");

    let repos: BTreeMap<(&str, &str), &str> = platform
        .iter()
        .filter(|d| kind(d) == "ImageRepository")
        .map(|d| {
            (
                (namespace(d), name(d)),
                s(d, "/spec/image").expect("spec.image"),
            )
        })
        .collect();
    for ((ns, n), image) in &repos {
        let last = image.rsplit('/').next().unwrap();
        assert!(
            !last.contains(':') && !image.contains('@'),
            "ImageRepository {ns}/{n}: {image} has a tag"
        );
        assert!(image.starts_with("registry.example.local:5000/"), "{image}");
    }

    // Markers anywhere under clusters/ must be inside update.path to be honoured.
    let all = markers_under(&root.join("clusters"));
    assert!(
        all.len() >= 3,
        "expected markers in the app waves, found {all:?}"
    );
    for m in &all {
        let at = format!("{}:{}", m.file.display(), m.line_no);
        assert!(
            m.file.starts_with(&update_dir),
            "{at}: outside update.path {update_path}"
        );
        assert_eq!(
            m.policy_ns,
            namespace(auto),
            "{at}: policy not in the automation's namespace"
        );
        let policy = find(&platform, "ImagePolicy", &m.policy_ns, &m.policy)
            .unwrap_or_else(|| panic!("{at}: no ImagePolicy {}/{}", m.policy_ns, m.policy));
        assert_eq!(s(policy, "/apiVersion"), Some("image.toolkit.fluxcd.io/v1"));
        assert!(
            s(policy, "/spec/policy/semver/range").is_some(),
            "{at}: semver policy"
        );
        let repo_name = s(policy, "/spec/imageRepositoryRef/name").unwrap();
        let repo_ns = s(policy, "/spec/imageRepositoryRef/namespace").unwrap_or(&m.policy_ns);
        let image = repos[&(repo_ns, repo_name)];
        match m.suffix.as_deref() {
            None => {
                assert_eq!(
                    m.key, "image",
                    "{at}: plain marker belongs on a full image reference"
                );
                let (name_part, tag) = m.value.rsplit_once(':').expect("name:tag");
                assert_eq!(
                    name_part, image,
                    "{at}: plain marker would rewrite the host/path"
                );
                assert!(!tag.contains('/'), "{at}: {} has no tag", m.value);
            }
            Some("tag") => {
                assert_eq!(m.key, "newTag", "{at}: :tag marker belongs on newTag");
                assert!(
                    !m.value.contains(['/', ':', '@']),
                    "{at}: {} is not a tag",
                    m.value
                );
                // The kustomization's images entry names the same repository.
                let text = std::fs::read_to_string(&m.file).unwrap();
                assert!(
                    text.contains(&format!("name: {image}")),
                    "{at}: images[].name {image}"
                );
            }
            Some(other) => panic!("{at}: unexpected setter suffix :{other}"),
        }
    }
    for suffix in [None, Some("tag")] {
        assert!(
            all.iter().any(|m| m.suffix.as_deref() == suffix),
            "a {suffix:?} marker"
        );
    }

    // Every image the app waves run comes from a repository an ImageRepository scans, or is
    // deliberately pinned in platform/.
    for wave in 0..=2 {
        let docs = render(&format!("clusters/apps/wave-{wave}"));
        for d in docs.iter().filter(|d| kind(d) == "Deployment") {
            for c in d
                .pointer("/spec/template/spec/containers")
                .and_then(Value::as_array)
                .unwrap()
            {
                let img = s(c, "/image").unwrap();
                let (repo, _tag) = img.rsplit_once(':').expect("tagged image");
                assert!(
                    repos.values().any(|r| *r == repo),
                    "wave-{wave} {}: {img} not scanned by any ImageRepository",
                    name(d)
                );
            }
        }
    }
}

/// The fleet as Flux sees it: served by the twin's Git server under the URL the GitRepository
/// authors (`https://gitea.example.local/org/fleet.git`, bearer token, private CA), cloned with
/// real git, and every Kustomization path in the clone renders.
#[test]
fn fleet_served_over_git_renders_from_a_clone() {
    use twin::git::{Change, GitServer, GitServerOptions};
    let root = repo_root();
    let server = GitServer::start(GitServerOptions::default()).unwrap();
    server.create_repo("org/fleet", "main").unwrap();
    let head = server
        .commit_on(
            "org/fleet",
            "main",
            &[Change::copy_dir(root.join("clusters"), "clusters")],
            "fleet",
        )
        .unwrap();
    server
        .set_auth("org/fleet", "flux", &["fleet-token"])
        .unwrap();

    let dev = render("clusters/dev");
    let git_repo = find(&dev, "GitRepository", "flux-system", "flux-system").unwrap();
    let url = s(git_repo, "/spec/url").unwrap();
    let branch = s(git_repo, "/spec/ref/branch").unwrap();
    let host = url::Url::parse(url).unwrap().host_str().unwrap().to_owned();

    let work = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("timeout");
    cmd.args(["300", "git"]);
    for (k, v) in server.host_alias_config(&host) {
        cmd.arg("-c").arg(format!("{k}={v}"));
    }
    cmd.arg("-c")
        .arg(format!("http.sslCAInfo={}", server.ca_file().display()))
        .args(["-c", "http.extraHeader=Authorization: Bearer fleet-token"])
        .args(["clone", "--quiet", "--branch", branch, url, "fleet"])
        .current_dir(work.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", work.path())
        .env("GIT_TERMINAL_PROMPT", "0")
        // GIT_SSL_CAINFO in the environment would override http.sslCAInfo.
        .env_remove("GIT_SSL_CAINFO")
        .env_remove("GIT_SSL_NO_VERIFY")
        .env_remove("GIT_ASKPASS");
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "clone of {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let clone = work.path().join("fleet");
    let rev = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&clone)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&rev.stdout).trim(), head);

    for env in ["dev", "prod"] {
        let docs = render(&format!("clusters/{env}"));
        for k in flux_kustomizations(&docs) {
            let path = s(k, "/spec/path").unwrap();
            let dir = clone.join(path.trim_start_matches("./"));
            let out = Command::new("kubectl")
                .arg("kustomize")
                .arg(&dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{env}: {} path {path} in the clone: {}",
                name(k),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// Spec fields per Flux kind, from upstream Go types (unknown fields would be pruned by the
/// real API server's structural schema and silently do nothing):
/// kustomize-controller api/v1 KustomizationSpec, source-controller api/v1 GitRepositorySpec,
/// image-reflector-controller api/v1 ImageRepositorySpec / ImagePolicySpec,
/// image-automation-controller api/v1 ImageUpdateAutomationSpec. (kind, apiVersion, allowed
/// spec keys, required spec keys).
const FLUX_SPECS: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "Kustomization",
        "kustomize.toolkit.fluxcd.io/v1",
        &[
            "commonMetadata",
            "dependsOn",
            "decryption",
            "interval",
            "retryInterval",
            "kubeConfig",
            "path",
            "postBuild",
            "prune",
            "deletionPolicy",
            "healthChecks",
            "namePrefix",
            "nameSuffix",
            "patches",
            "images",
            "serviceAccountName",
            "sourceRef",
            "suspend",
            "targetNamespace",
            "timeout",
            "force",
            "wait",
            "components",
            "ignoreMissingComponents",
            "healthCheckExprs",
            "driftIgnoreRules",
        ],
        &["interval", "prune", "sourceRef"],
    ),
    (
        "GitRepository",
        "source.toolkit.fluxcd.io/v1",
        &[
            "url",
            "secretRef",
            "provider",
            "serviceAccountName",
            "interval",
            "timeout",
            "ref",
            "verify",
            "proxySecretRef",
            "ignore",
            "suspend",
            "recurseSubmodules",
            "include",
            "sparseCheckout",
        ],
        &["url", "interval"],
    ),
    (
        "ImageRepository",
        "image.toolkit.fluxcd.io/v1",
        &[
            "image",
            "interval",
            "timeout",
            "secretRef",
            "proxySecretRef",
            "serviceAccountName",
            "certSecretRef",
            "suspend",
            "accessFrom",
            "exclusionList",
            "provider",
            "insecure",
        ],
        &["image", "interval"],
    ),
    (
        "ImagePolicy",
        "image.toolkit.fluxcd.io/v1",
        &[
            "imageRepositoryRef",
            "policy",
            "filterTags",
            "digestReflectionPolicy",
            "interval",
            "suspend",
        ],
        &["imageRepositoryRef", "policy"],
    ),
    (
        "ImageUpdateAutomation",
        "image.toolkit.fluxcd.io/v1",
        &[
            "sourceRef",
            "git",
            "interval",
            "policySelector",
            "update",
            "suspend",
        ],
        &["sourceRef", "interval"],
    ),
];

#[test]
fn flux_objects_use_upstream_api_versions_and_spec_fields() {
    let mut seen = BTreeSet::new();
    for (dir, docs) in render_all() {
        for d in &docs {
            let Some((_, api, allowed, required)) = FLUX_SPECS
                .iter()
                .find(|(k, ..)| *k == kind(d) && d.get("spec").is_some())
            else {
                continue;
            };
            // A kustomize `Kustomization` never reaches the output; this one is Flux's.
            let at = format!("{dir}: {} {}/{}", kind(d), namespace(d), name(d));
            assert_eq!(s(d, "/apiVersion"), Some(*api), "{at}");
            let spec = d["spec"].as_object().expect("spec is a mapping");
            for key in spec.keys() {
                assert!(
                    allowed.contains(&key.as_str()),
                    "{at}: unknown spec field {key}"
                );
            }
            for key in *required {
                assert!(
                    spec.contains_key(*key),
                    "{at}: required spec field {key} missing"
                );
            }
            seen.insert(kind(d).to_owned());
        }
    }
    let all: BTreeSet<String> = FLUX_SPECS.iter().map(|(k, ..)| (*k).to_owned()).collect();
    assert_eq!(seen, all, "every Flux kind appears in the fleet");
}
