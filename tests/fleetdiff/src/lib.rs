//! fleetdiff: fleetlint's build verdicts against the real kustomize-controller.
//!
//! For each fleet checkout, [`plan`] runs fleetlint (its library, markers off) and takes every
//! Flux Kustomization it finds with its verdict ([`fleetlint::verdict`]). [`run`] then serves
//! each checkout from the cluster's Git server (one commit of the working tree; source-controller
//! makes the artifact, with its default excludes and `.sourceignore`), and creates each
//! Kustomization on a real cluster (tests/realcluster: real kube-apiserver, source- and
//! kustomize-controller) so the real controller builds it:
//!
//! - its build fields as fleetlint read them (after its parent's substitution): `path`,
//!   `targetNamespace`, `components`, `ignoreMissingComponents`, `patches`, `images`,
//!   `namePrefix`, `nameSuffix`, `commonMetadata`, `postBuild`;
//! - its source the harness's GitRepository of that checkout; no `dependsOn` (nothing is
//!   applied, so nothing would ever be ready), no `decryption` (no keys here), no `kubeConfig`;
//! - `serviceAccountName` a ServiceAccount with no rights: kustomize-controller v1.9 reads
//!   substitution inputs with its own client (`SubstituteVariables(ctx, r.Client, ...)`) and
//!   applies under impersonation, so the apply is refused after a finished build and nothing
//!   of the fleet is applied ([`check_impersonation`] proves both);
//! - the fleet's own substituteFrom ConfigMaps and Secrets, as fleetlint found them in the
//!   overlay, created first in its namespace (a SOPS-encrypted one is not: unknown).
//!
//! Each Kustomization's namespace on the cluster is one per (fleet, overlay, namespace), so
//! overlays that define the same Kustomization differently build side by side.
//!
//! The outcome ([`real_outcome`]): `BuildFailed` (or `ArtifactFailed` "kustomization path not
//! found") is a failed build; `ReconciliationFailed` (the refused apply) or Ready is a build that
//! passed. A failure fetching a remote resource (no network here) or reading an input the fleet
//! does not define is `unknown`, as fleetlint's FL001-offline and FL033 are. [`compare`] puts
//! both side by side.

use fleetlint::verdict::{Build, BuildVerdict};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The label every object the harness creates carries (value: the run's prefix).
pub const RUN_LABEL: &str = "fleetdiff.cluster-loop.dev/run";
/// The ServiceAccount with no rights the Kustomizations apply as.
pub const NO_RIGHTS_SA: &str = "fleetdiff-no-rights";

/// One fleet checkout to compare.
#[derive(Debug, Clone)]
pub struct FleetInput {
    /// A name for the report (the directory's name by default).
    pub name: String,
    /// The checkout (a directory of the fleet repository; Flux paths are relative to its
    /// repository root).
    pub path: PathBuf,
}

/// One Kustomization to build on the cluster.
#[derive(Debug, Clone)]
pub struct Case {
    /// Index in the fleets given.
    pub fleet: usize,
    /// fleetlint's overlay directory.
    pub overlay: String,
    /// fleetlint's graph node (id, spec, inputs, verdict).
    pub node: fleetlint::GraphNode,
    /// Its namespace on the cluster.
    pub cluster_ns: String,
}

/// What the real controller did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// The build finished (the apply was refused, or there was nothing to apply).
    Built,
    /// The build failed (`BuildFailed`, `ArtifactFailed` "kustomization path not found", or the
    /// API server refused the Kustomization itself).
    Failed,
    /// Not knowable here: a remote resource, an input made at run time, SOPS.
    Unknown,
    /// No outcome (not created, no build within the timeout, a source problem).
    NotRun,
}

/// The real controller's outcome for one Kustomization.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Real {
    /// The outcome.
    pub outcome: Outcome,
    /// The Ready condition's reason (`BuildFailed`, `ReconciliationFailed`, ...).
    pub reason: Option<String>,
    /// The Ready condition's message (or why it is unknown / not run).
    pub message: Option<String>,
}

/// fleetlint and the controller side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Agreement {
    /// Both say the build fails or both say it passes.
    Agree,
    /// They differ: a false error or a missed failure of fleetlint.
    Disagree,
    /// One side cannot know (counted, never an agreement).
    Unknown,
    /// Not compared: fleetlint does not build it (another source) or the cluster gave no
    /// outcome.
    NotCompared,
}

/// One Kustomization's row.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// fleetlint's overlay.
    pub overlay: String,
    /// `namespace/name` in the fleet.
    pub kustomization: String,
    /// Its file in the fleet.
    pub file: String,
    /// Its namespace on the cluster.
    pub cluster_namespace: String,
    /// fleetlint's verdict.
    pub fleetlint: BuildVerdict,
    /// The real controller's outcome.
    pub real: Real,
    /// The comparison.
    pub agreement: Agreement,
}

/// Counts of one fleet (or all).
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Kustomizations found by fleetlint.
    pub kustomizations: usize,
    /// Agreements.
    pub agree: usize,
    /// ... of which both said the build fails.
    pub agree_failed: usize,
    /// Disagreements.
    pub disagree: usize,
    /// ... fleetlint error, real build passed (a false error).
    pub false_errors: usize,
    /// ... fleetlint pass, real build failed (a missed failure).
    pub missed_failures: usize,
    /// Unknown on one side or both.
    pub unknown: usize,
    /// Not compared.
    pub not_compared: usize,
}

impl Summary {
    fn add(&mut self, r: &Row) {
        self.kustomizations += 1;
        match r.agreement {
            Agreement::Agree => {
                self.agree += 1;
                if r.real.outcome == Outcome::Failed {
                    self.agree_failed += 1;
                }
            }
            Agreement::Disagree => {
                self.disagree += 1;
                if r.fleetlint.verdict == Build::Fail {
                    self.false_errors += 1;
                } else {
                    self.missed_failures += 1;
                }
            }
            Agreement::Unknown => self.unknown += 1,
            Agreement::NotCompared => self.not_compared += 1,
        }
    }
}

/// One fleet's result.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetResult {
    /// Its name.
    pub name: String,
    /// Its checkout.
    pub path: String,
    /// Why it was not compared at all (fleetlint found nothing to lint, the Git server...).
    pub error: Option<String>,
    /// Counts.
    pub summary: Summary,
    /// Every Kustomization, disagreements first.
    pub rows: Vec<Row>,
}

/// The whole comparison (`-o json`).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffReport {
    /// `fleetdiff.cluster-loop.dev/v1`.
    pub api_version: &'static str,
    /// kustomize-controller's release on the cluster.
    pub controller: String,
    /// Per fleet.
    pub fleets: Vec<FleetResult>,
    /// All fleets.
    pub summary: Summary,
}

/// Options of [`run`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Prefix of every namespace and Git repository the run makes (keeps runs on one cluster
    /// apart), at most 20 characters of `[a-z0-9-]`.
    pub prefix: String,
    /// How long to wait for every outcome.
    pub timeout: Duration,
    /// The kubectl fleetlint renders with.
    pub kubectl: String,
    /// kustomize-controller's release on the cluster (for the report).
    pub controller: String,
    /// fleetlint's render cache (`None`: in memory).
    pub cache_dir: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            prefix: "fd-".into(),
            timeout: Duration::from_secs(600),
            kubectl: "kubectl".into(),
            controller: realcluster::bins::KC_CURRENT.into(),
            cache_dir: fleetlint::render::default_cache_dir(),
        }
    }
}

fn short_hash(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize()
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// fleetlint's Kustomizations of one fleet, each with its namespace on the cluster.
/// Errors: fleetlint's (a path that is not a directory, nothing to lint).
pub fn plan(fi: usize, fleet: &FleetInput, opts: &Options) -> Result<Vec<Case>, String> {
    let cfg = fleetlint::Config {
        path: fleet.path.clone(),
        markers: false,
        kubectl: opts.kubectl.clone(),
        cache_dir: opts.cache_dir.clone(),
        ..Default::default()
    };
    let report = fleetlint::run(&cfg).map_err(|e| match e {
        fleetlint::RunError::Usage(m) | fleetlint::RunError::Other(m) => m,
    })?;
    if report.overlays.is_empty() {
        // `kubectl fleetlint` says the same (exit 2): 0 rows would read as agreement, and a
        // fleet whose overlays are not found is a discovery gap to see, not a pass
        return Err(format!(
            "nothing to lint under {}: fleetlint found no overlay",
            fleet.path.display()
        ));
    }
    let mut out = Vec::new();
    for ov in &report.overlays {
        for k in &ov.kustomizations {
            let ns = k.id.split_once('/').map(|(n, _)| n).unwrap_or("default");
            let cluster_ns = format!(
                "{}{fi}-{}",
                opts.prefix,
                short_hash(&[&fi.to_string(), &ov.dir, ns])
            );
            out.push(Case {
                fleet: fi,
                overlay: ov.dir.clone(),
                node: k.clone(),
                cluster_ns,
            });
        }
    }
    Ok(out)
}

/// The Kustomization the harness creates for `c` (see the module docs), reading the fleet's
/// source `source` (`namespace`, `name` of the harness's GitRepository).
pub fn cluster_kustomization(c: &Case, source: (&str, &str), prefix: &str) -> Value {
    let name = c
        .node
        .id
        .split_once('/')
        .map(|(_, n)| n)
        .unwrap_or(&c.node.id);
    let mut spec = serde_json::Map::new();
    for key in [
        "path",
        "targetNamespace",
        "components",
        "ignoreMissingComponents",
        "patches",
        "images",
        "namePrefix",
        "nameSuffix",
        "commonMetadata",
        "postBuild",
    ] {
        if let Some(v) = c.node.spec.get(key).filter(|v| !v.is_null()) {
            spec.insert(key.into(), v.clone());
        }
    }
    // the directory fleetlint built: the harness serves the whole repository, where an
    // ArtifactGenerator's artifact path (`./production`) is the directory it packs
    // (`apps/production`)
    if let Some(d) = &c.node.dir {
        spec.insert("path".into(), json!(format!("./{d}")));
    }
    spec.insert(
        "sourceRef".into(),
        json!({"kind": "GitRepository", "namespace": source.0, "name": source.1}),
    );
    spec.insert("interval".into(), json!("60m"));
    spec.insert("retryInterval".into(), json!("60m"));
    spec.insert("timeout".into(), json!("2m"));
    spec.insert("prune".into(), json!(false));
    spec.insert("serviceAccountName".into(), json!(NO_RIGHTS_SA));
    json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": c.cluster_ns, "labels": {RUN_LABEL: prefix.trim_matches('-')}},
        "spec": spec,
    })
}

/// The fleet's own substitution input as the harness creates it in `ns` (data only; a Secret
/// as `Opaque`): `Err` with why it cannot be (SOPS-encrypted: unknown).
pub fn input_object(obj: &Value, ns: &str, prefix: &str) -> Result<Value, String> {
    let kind = obj["kind"].as_str().unwrap_or("");
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    if fleetlint::verdict::sops_encrypted(obj) {
        return Err(format!(
            "{kind} {name} is SOPS-encrypted: its values are unknown without the fleet's keys"
        ));
    }
    let mut o = json!({
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, "labels": {RUN_LABEL: prefix.trim_matches('-')}},
    });
    let keys: &[&str] = if kind == "Secret" {
        &["data", "stringData"]
    } else {
        &["data", "binaryData"]
    };
    for k in keys {
        if let Some(v) = obj.get(*k).filter(|v| v.is_object()) {
            o[*k] = v.clone();
        }
    }
    if kind == "Secret" {
        o["type"] = json!("Opaque");
    }
    Ok(o)
}

/// Errors of a run against the cluster (exit 3).
#[derive(Debug)]
pub struct ClusterError(pub String);

impl std::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn cerr(what: &str) -> impl Fn(realcluster::Error) -> ClusterError + '_ {
    move |e| ClusterError(format!("{what}: {e}"))
}

/// Proves what the harness relies on: kustomize-controller's identity (the cluster's admin
/// credentials, which its process runs with) may impersonate ServiceAccounts, and
/// [`NO_RIGHTS_SA`] of `ns` may create nothing (a ConfigMap, a Namespace), so the apply of a
/// finished build is refused. Errors: either is not so.
pub fn check_impersonation(cluster: &realcluster::Cluster, ns: &str) -> Result<(), ClusterError> {
    let can = |args: &[&str]| -> Result<String, ClusterError> {
        // `kubectl auth can-i` exits 1 for "no"
        let out = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig())
            .args(["auth", "can-i"])
            .args(args)
            .output()
            .map_err(|e| ClusterError(format!("kubectl auth can-i: {e}")))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let imp = can(&["impersonate", "serviceaccounts"])?;
    if imp != "yes" {
        return Err(ClusterError(format!(
            "kustomize-controller's identity cannot impersonate ServiceAccounts (kubectl auth can-i impersonate serviceaccounts: {imp:?})"
        )));
    }
    let sa = format!("--as=system:serviceaccount:{ns}:{NO_RIGHTS_SA}");
    for what in [["create", "configmaps"], ["create", "namespaces"]] {
        let a = can(&[what[0], what[1], "-n", ns, &sa])?;
        if a != "no" {
            return Err(ClusterError(format!(
                "ServiceAccount {ns}/{NO_RIGHTS_SA} may {} {} ({a:?}): the harness would apply the fleet",
                what[0], what[1]
            )));
        }
    }
    Ok(())
}

/// Markers of a failure to fetch a remote resource (no network here).
const REMOTE: &[&str] = &[
    "no such host",
    "Could not resolve host",
    "dial tcp",
    "network is unreachable",
    "Network is unreachable",
    "failed to run '/usr/bin/git",
    "git cmd =",
    "unable to fetch",
    "couldn't make target for",
];

/// The real outcome of one Kustomization from the object the cluster holds (`None`: never
/// created; `refused`: the API server's refusal), in one ordered table:
/// 1. refused by the API server: `failed` (the controller never builds it);
/// 2. a substitution input the harness withheld (`withheld`: SOPS): `unknown`;
/// 3. no Ready condition of this generation yet: `notRun`;
/// 4. Ready True, or `ReconciliationFailed` (the apply, after the build): `built`;
/// 5. `BuildFailed` fetching a remote resource: `unknown`; reading a substituteFrom input the
///    fleet does not define (`not found`): `unknown` (made at run time); else `failed`;
/// 6. `ArtifactFailed` "kustomization path not found": `failed`;
/// 7. anything else (a source problem, a dependency): `notRun`.
pub fn real_outcome(ks: Option<&Value>, refused: Option<&str>, withheld: Option<&str>) -> Real {
    let real = |outcome, reason: Option<&str>, message: Option<String>| Real {
        outcome,
        reason: reason.map(str::to_string),
        message,
    };
    if let Some(r) = refused {
        return real(Outcome::Failed, Some("Invalid"), Some(r.to_string()));
    }
    if let Some(w) = withheld {
        return real(Outcome::Unknown, None, Some(w.to_string()));
    }
    let Some(ks) = ks else {
        return real(Outcome::NotRun, None, Some("not created".into()));
    };
    let generation = ks["metadata"]["generation"].as_i64().unwrap_or(0);
    let ready = ks["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
    let observed = ks["status"]["observedGeneration"].as_i64().unwrap_or(-1);
    let Some(ready) = ready else {
        return real(Outcome::NotRun, None, Some("no Ready condition".into()));
    };
    let reason = ready["reason"].as_str().unwrap_or("");
    let message = ready["message"].as_str().unwrap_or("").to_string();
    // the controller sets observedGeneration on success only; the harness never changes a
    // Kustomization, so a Ready condition with a final reason is the outcome
    let done =
        observed >= generation || !matches!(reason, "" | "Progressing" | "ProgressingWithRetry");
    if !done {
        return real(
            Outcome::NotRun,
            Some(reason),
            Some(format!("no outcome yet: {message}")),
        );
    }
    if ready["status"] == "True" || reason == "ReconciliationFailed" {
        return real(Outcome::Built, Some(reason), Some(message));
    }
    match reason {
        "BuildFailed" if REMOTE.iter().any(|m| message.contains(m)) => real(
            Outcome::Unknown,
            Some(reason),
            Some(format!("a remote resource (no network here): {message}")),
        ),
        "BuildFailed" if message.contains("substitute from") && message.contains("not found") => {
            real(
                Outcome::Unknown,
                Some(reason),
                Some(format!(
                    "an input the fleet does not define (made at run time): {message}"
                )),
            )
        }
        "BuildFailed" => real(Outcome::Failed, Some(reason), Some(message)),
        "ArtifactFailed" if message.contains("kustomization path not found") => {
            real(Outcome::Failed, Some(reason), Some(message))
        }
        _ => real(Outcome::NotRun, Some(reason), Some(message)),
    }
}

/// fleetlint's verdict against the real outcome, in one ordered table: fleetlint does not
/// build it, or the cluster gave no outcome: `notCompared`; either side unknown: `unknown`;
/// fail/failed or pass/built: `agree`; otherwise `disagree`.
pub fn compare(fleetlint: &BuildVerdict, real: &Real) -> Agreement {
    match (fleetlint.verdict, real.outcome) {
        (Build::NotBuilt, _) | (_, Outcome::NotRun) => Agreement::NotCompared,
        (Build::Unknown, _) | (_, Outcome::Unknown) => Agreement::Unknown,
        (Build::Fail, Outcome::Failed) | (Build::Pass, Outcome::Built) => Agreement::Agree,
        _ => Agreement::Disagree,
    }
}

fn yaml_docs(objs: &[Value]) -> String {
    objs.iter()
        .map(|o| format!("---\n{o}\n"))
        .collect::<String>()
}

/// Applies `objs` server-side in one kubectl run; when that fails, one at a time, returning
/// each refused object's index and the API server's message.
fn apply_all(
    cluster: &realcluster::Cluster,
    objs: &[Value],
) -> Result<BTreeMap<usize, String>, ClusterError> {
    let mut refused = BTreeMap::new();
    if objs.is_empty() || cluster.apply_yaml(&yaml_docs(objs)).is_ok() {
        return Ok(refused);
    }
    for (i, o) in objs.iter().enumerate() {
        if let Err(e) = cluster.apply_yaml(&yaml_docs(std::slice::from_ref(o))) {
            refused.insert(i, e.to_string());
        }
    }
    Ok(refused)
}

/// Runs the comparison for `fleets` on `cluster` (see the module docs); `progress` gets one
/// line per step. Errors: the cluster refused the harness's own objects or cannot
/// impersonate ([`ClusterError`], exit 3). A fleet fleetlint cannot lint is a fleet result
/// with its error, not a run error.
pub fn run(
    cluster: &realcluster::Cluster,
    fleets: &[FleetInput],
    opts: &Options,
    progress: &dyn Fn(&str),
) -> Result<DiffReport, ClusterError> {
    let p = &opts.prefix;
    // a label value starts and ends with an alphanumeric character
    let label = p.trim_matches('-');
    let mut results: Vec<FleetResult> = fleets
        .iter()
        .map(|f| FleetResult {
            name: f.name.clone(),
            path: f.path.display().to_string(),
            error: None,
            summary: Summary::default(),
            rows: Vec::new(),
        })
        .collect();
    let mut cases: Vec<Case> = Vec::new();
    for (fi, f) in fleets.iter().enumerate() {
        progress(&format!("fleetlint {}", f.name));
        match plan(fi, f, opts) {
            Ok(c) => cases.extend(c),
            Err(e) => results[fi].error = Some(format!("fleetlint: {e}")),
        }
    }
    // the fleets' sources: one repository, namespace and GitRepository per fleet
    let mut namespaces: BTreeSet<String> = cases.iter().map(|c| c.cluster_ns.clone()).collect();
    let source_ns = |fi: usize| format!("{p}{fi}");
    let with_cases: BTreeSet<usize> = cases.iter().map(|c| c.fleet).collect();
    for &fi in &with_cases {
        namespaces.insert(source_ns(fi));
    }
    let mut setup: Vec<Value> = Vec::new();
    for ns in &namespaces {
        setup.push(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {RUN_LABEL: label}}}));
        setup.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": NO_RIGHTS_SA, "namespace": ns, "labels": {RUN_LABEL: label}}}));
    }
    let mut sources = Vec::new();
    for &fi in &with_cases {
        let repo = format!("fleetdiff/{p}{fi}");
        progress(&format!("serving {} as {repo}", fleets[fi].name));
        let root =
            markercheck::repo::git_root_of(&fleets[fi].path).unwrap_or(fleets[fi].path.clone());
        cluster
            .git()
            .create_repo_from_dir(&repo, &root, "main", "fleet checkout")
            .map_err(|e| ClusterError(format!("git server: {repo}: {e}")))?;
        sources.push(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "fleet", "namespace": source_ns(fi), "labels": {RUN_LABEL: label}},
            "spec": {"interval": "60m", "url": cluster.git().url_http(&repo), "ref": {"branch": "main"}},
        }));
    }
    if cases.is_empty() {
        // nothing fleetlint found to build (every fleet "nothing to lint"): each fleet result
        // carries its error; kubectl apply refuses an empty list
        return Ok(report(results, opts));
    }
    progress(&format!("creating {} namespaces", namespaces.len()));
    cluster
        .apply_yaml(&yaml_docs(&setup))
        .map_err(cerr("namespaces"))?;
    if let Some(ns) = namespaces.iter().next() {
        check_impersonation(cluster, ns)?;
    }
    // the fleet's substitution inputs, and the ones withheld
    let mut inputs: BTreeMap<(String, String, String), Value> = BTreeMap::new();
    let mut withheld: BTreeMap<usize, String> = BTreeMap::new();
    for (ci, c) in cases.iter().enumerate() {
        for i in &c.node.inputs {
            let Some(obj) = &i.object else { continue };
            match input_object(obj, &c.cluster_ns, p) {
                Ok(o) => {
                    inputs
                        .entry((
                            c.cluster_ns.clone(),
                            i.reference.kind.clone(),
                            i.reference.name.clone(),
                        ))
                        .or_insert(o);
                }
                Err(why) => {
                    withheld.entry(ci).or_insert(why);
                }
            }
        }
    }
    let input_list: Vec<Value> = inputs.into_values().collect();
    progress(&format!(
        "creating {} substitution inputs",
        input_list.len()
    ));
    let refused_inputs = apply_all(cluster, &input_list)?;
    for (i, why) in &refused_inputs {
        let o = &input_list[*i];
        let (ns, kind, name) = (
            o["metadata"]["namespace"].as_str().unwrap_or(""),
            o["kind"].as_str().unwrap_or(""),
            o["metadata"]["name"].as_str().unwrap_or(""),
        );
        for (ci, c) in cases.iter().enumerate() {
            if c.cluster_ns == ns
                && c.node
                    .inputs
                    .iter()
                    .any(|x| x.reference.kind == kind && x.reference.name == name)
            {
                withheld
                    .entry(ci)
                    .or_insert(format!("its input {kind} {name} was refused: {why}"));
            }
        }
    }
    // the sources, ready before any Kustomization reads them
    cluster
        .apply_yaml(&yaml_docs(&sources))
        .map_err(cerr("GitRepositories"))?;
    let until = Instant::now() + opts.timeout;
    for &fi in &with_cases {
        let ns = source_ns(fi);
        loop {
            let out = cluster
                .kubectl(&["get", "gitrepository", "fleet", "-n", &ns, "-o", "json"])
                .map_err(cerr("GitRepository"))?;
            let v: Value = serde_json::from_str(&out).unwrap_or_default();
            let ready = v["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
            if ready.is_some_and(|r| r["status"] == "True") {
                break;
            }
            if Instant::now() > until {
                return Err(ClusterError(format!(
                    "GitRepository {ns}/fleet of {} not Ready: {}",
                    fleets[fi].name,
                    ready.map(|r| r["message"].to_string()).unwrap_or_default()
                )));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    // the Kustomizations (fleetlint builds those it follows; a name twice in one namespace
    // is built once)
    let mut seen = BTreeSet::new();
    let mut objs = Vec::new();
    let mut obj_case = Vec::new();
    for (ci, c) in cases.iter().enumerate() {
        if c.node.build.verdict == Build::NotBuilt {
            continue;
        }
        let o = cluster_kustomization(c, (&source_ns(c.fleet), "fleet"), p);
        let key = (
            c.cluster_ns.clone(),
            o["metadata"]["name"].as_str().unwrap_or("").to_string(),
        );
        if seen.insert(key) {
            objs.push(o);
            obj_case.push(ci);
        }
    }
    progress(&format!("creating {} Kustomizations", objs.len()));
    let refused = apply_all(cluster, &objs)?;
    let refused_case: BTreeMap<usize, String> =
        refused.into_iter().map(|(i, e)| (obj_case[i], e)).collect();
    // wait for every outcome
    let mut held: BTreeMap<(String, String), Value>;
    loop {
        let out = cluster
            .kubectl(&[
                "get",
                "kustomizations",
                "-A",
                "-l",
                &format!("{RUN_LABEL}={label}"),
                "-o",
                "json",
            ])
            .map_err(cerr("Kustomizations"))?;
        let v: Value = serde_json::from_str(&out).unwrap_or_default();
        held = v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|k| {
                (
                    (
                        k["metadata"]["namespace"]
                            .as_str()
                            .unwrap_or("")
                            .to_string(),
                        k["metadata"]["name"].as_str().unwrap_or("").to_string(),
                    ),
                    k.clone(),
                )
            })
            .collect();
        let pending = held
            .values()
            .filter(|k| real_outcome(Some(k), None, None).outcome == Outcome::NotRun)
            .count();
        progress(&format!(
            "{} of {} Kustomizations have an outcome",
            held.len() - pending,
            objs.len()
        ));
        if pending == 0 || Instant::now() > until {
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    for (ci, c) in cases.iter().enumerate() {
        let name = c
            .node
            .id
            .split_once('/')
            .map(|(_, n)| n)
            .unwrap_or(&c.node.id);
        let real = if c.node.build.verdict == Build::NotBuilt {
            Real {
                outcome: Outcome::NotRun,
                reason: None,
                message: Some("not built: fleetlint does not follow its source".into()),
            }
        } else {
            real_outcome(
                held.get(&(c.cluster_ns.clone(), name.to_string())),
                refused_case.get(&ci).map(String::as_str),
                withheld.get(&ci).map(String::as_str),
            )
        };
        let agreement = compare(&c.node.build, &real);
        let row = Row {
            overlay: c.overlay.clone(),
            kustomization: c.node.id.clone(),
            file: c.node.file.clone(),
            cluster_namespace: c.cluster_ns.clone(),
            fleetlint: c.node.build.clone(),
            real,
            agreement,
        };
        results[c.fleet].summary.add(&row);
        results[c.fleet].rows.push(row);
    }
    Ok(report(results, opts))
}

/// The report of the fleets' results: rows sorted (disagreements first) and the counts.
fn report(mut results: Vec<FleetResult>, opts: &Options) -> DiffReport {
    let mut summary = Summary::default();
    for r in &mut results {
        r.rows.sort_by(|a, b| {
            (a.agreement, &a.overlay, &a.kustomization).cmp(&(
                b.agreement,
                &b.overlay,
                &b.kustomization,
            ))
        });
        r.rows.sort_by_key(|r| r.agreement != Agreement::Disagree);
        for row in &r.rows {
            summary.add(row);
        }
    }
    DiffReport {
        api_version: "fleetdiff.cluster-loop.dev/v1",
        controller: opts.controller.clone(),
        fleets: results,
        summary,
    }
}

fn one_line(s: &str, n: usize) -> String {
    let l = s.replace('\n', " ");
    if l.chars().count() > n {
        format!("{}…", l.chars().take(n).collect::<String>())
    } else {
        l
    }
}

/// The report as tables: per fleet its counts and its rows (`all`: every row; otherwise the
/// rows that are not a plain agreement that the build passes).
pub fn table(r: &DiffReport, all: bool) -> String {
    use comfy_table::{Table, presets::NOTHING};
    let mut out = String::new();
    let word = |b: Build| match b {
        Build::Pass => "pass",
        Build::Fail => "fail",
        Build::Unknown => "unknown",
        Build::NotBuilt => "not built",
    };
    let real_word = |o: Outcome| match o {
        Outcome::Built => "built",
        Outcome::Failed => "failed",
        Outcome::Unknown => "unknown",
        Outcome::NotRun => "no outcome",
    };
    let agree_word = |a: Agreement| match a {
        Agreement::Agree => "agree",
        Agreement::Disagree => "DISAGREE",
        Agreement::Unknown => "unknown",
        Agreement::NotCompared => "not compared",
    };
    for f in &r.fleets {
        let s = &f.summary;
        out.push_str(&format!(
            "fleet {} ({}): {} Kustomizations, {} agree ({} failed on both), {} disagree ({} false errors, {} missed failures), {} unknown, {} not compared\n",
            f.name, f.path, s.kustomizations, s.agree, s.agree_failed, s.disagree, s.false_errors, s.missed_failures, s.unknown, s.not_compared
        ));
        if let Some(e) = &f.error {
            out.push_str(&format!("  not compared: {e}\n"));
        }
        let mut t = Table::new();
        t.load_style(NOTHING);
        t.set_header([
            "RESULT",
            "KUSTOMIZATION",
            "OVERLAY",
            "FLEETLINT",
            "REAL",
            "WHY",
        ]);
        let mut n = 0;
        for row in &f.rows {
            let plain = row.agreement == Agreement::Agree && row.real.outcome == Outcome::Built;
            if plain && !all {
                continue;
            }
            n += 1;
            let why = match row.agreement {
                Agreement::Agree if row.real.outcome == Outcome::Built => String::new(),
                _ => {
                    let fl = row
                        .fleetlint
                        .reason
                        .as_deref()
                        .map(|m| {
                            format!(
                                "fleetlint {}: {}",
                                row.fleetlint.rules.join(","),
                                one_line(m, 140)
                            )
                        })
                        .unwrap_or_default();
                    let real = row
                        .real
                        .message
                        .as_deref()
                        .map(|m| {
                            format!(
                                "real {}: {}",
                                row.real.reason.as_deref().unwrap_or("-"),
                                one_line(m, 200)
                            )
                        })
                        .unwrap_or_default();
                    [fl, real]
                        .into_iter()
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join(" | ")
                }
            };
            t.add_row([
                agree_word(row.agreement).to_string(),
                row.kustomization.clone(),
                if row.overlay.is_empty() {
                    ".".into()
                } else {
                    row.overlay.clone()
                },
                word(row.fleetlint.verdict).to_string(),
                real_word(row.real.outcome).to_string(),
                why,
            ]);
        }
        if n > 0 {
            for line in t.to_string().lines() {
                out.push_str("  ");
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
    }
    let s = &r.summary;
    out.push_str(&format!(
        "all {} fleet(s) on kustomize-controller {}: {} Kustomizations, {} agree ({} failed on both), {} disagree ({} false errors, {} missed failures), {} unknown, {} not compared\n",
        r.fleets.len(), r.controller, s.kustomizations, s.agree, s.agree_failed, s.disagree, s.false_errors, s.missed_failures, s.unknown, s.not_compared
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ks(reason: &str, status: &str, message: &str) -> Value {
        json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1,
            "conditions": [{"type": "Ready", "status": status, "reason": reason, "message": message}]}})
    }

    #[test]
    fn outcomes_follow_the_ready_condition() {
        let o = |k: &Value| real_outcome(Some(k), None, None).outcome;
        assert_eq!(
            o(&ks(
                "ReconciliationFailed",
                "False",
                "forbidden: User \"system:serviceaccount:x:y\" cannot"
            )),
            Outcome::Built
        );
        assert_eq!(
            o(&ks("ReconciliationSucceeded", "True", "Applied")),
            Outcome::Built
        );
        assert_eq!(
            o(&ks(
                "BuildFailed",
                "False",
                "kustomize build failed: accumulating resources"
            )),
            Outcome::Failed
        );
        assert_eq!(
            o(&ks(
                "BuildFailed",
                "False",
                "kustomize build failed: git cmd = '/usr/bin/git fetch'"
            )),
            Outcome::Unknown
        );
        assert_eq!(
            o(&ks(
                "BuildFailed",
                "False",
                "substitute from 'Secret/x' error: secrets \"x\" not found"
            )),
            Outcome::Unknown
        );
        assert_eq!(
            o(&ks(
                "ArtifactFailed",
                "False",
                "kustomization path not found: stat"
            )),
            Outcome::Failed
        );
        assert_eq!(
            o(&ks("ArtifactFailed", "False", "Source artifact not found")),
            Outcome::NotRun
        );
        assert_eq!(
            o(&ks("Progressing", "Unknown", "Building")),
            Outcome::NotRun
        );
        assert_eq!(
            real_outcome(None, Some("invalid"), None).outcome,
            Outcome::Failed
        );
    }

    #[test]
    fn a_sops_input_is_withheld_and_a_plain_one_keeps_only_its_data() {
        let s = json!({"kind": "Secret", "metadata": {"name": "s", "namespace": "a", "annotations": {"x": "y"}},
            "type": "kubernetes.io/tls", "stringData": {"A": "1"}, "sops": {"mac": "ENC[...]"}});
        assert!(input_object(&s, "ns", "fd-").is_err());
        let c = json!({"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a"}, "data": {"A": "1"}});
        let o = input_object(&c, "ns", "fd-").unwrap();
        assert_eq!(o["metadata"]["namespace"], "ns");
        assert_eq!(o["data"]["A"], "1");
    }
}
