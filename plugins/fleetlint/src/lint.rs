//! The rule families over the discovered overlays.

use crate::fleet::{self, Applied, FluxKs, Overlay, SubstProblem};
use crate::render;
use crate::rules::{self, Severity};
use crate::tree::Repo;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

/// A finding: stable rule, position, message and fix.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Repository-relative file (empty when there is none).
    pub file: String,
    /// 1-based line (0: the whole file).
    pub line: usize,
    /// Rule ID (`FL0xx` or markercheck's `MC0xx`).
    pub rule: String,
    /// Rule name.
    pub name: String,
    /// Severity.
    pub severity: Severity,
    /// Overlay directory the finding is about (`None`: the tree, e.g. markers).
    pub overlay: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
    /// Flux Kustomizations (`namespace/name`) the finding concerns (for `--changed-since`).
    #[serde(skip)]
    pub kustomizations: Vec<String>,
}

/// Options of the rules.
#[derive(Debug, Clone)]
pub struct Options {
    /// Placeholder glob (`*` any run of non-space characters), default `TBD-*`.
    pub placeholder: String,
    /// `--source`: (source `Kind/namespace/name` or `name`, local checkout).
    pub sources: Vec<(String, std::path::PathBuf)>,
}

impl Options {
    /// The local checkout `--source` maps the source `Kind/namespace/name` to: the same id
    /// (the kind in any case, as kubectl takes `gitrepository/...`), or its name alone.
    pub fn checkout(&self, id: &str) -> Option<&std::path::Path> {
        self.sources
            .iter()
            .find(|(s, _)| source_matches(s, id))
            .map(|(_, p)| p.as_path())
    }
}

/// Whether the `--source` value `given` (`KIND/NAMESPACE/NAME`, kind in any case, or `NAME`)
/// names the source `id` (`Kind/namespace/name`).
pub fn source_matches(given: &str, id: &str) -> bool {
    if given.contains('/') {
        given.eq_ignore_ascii_case(id)
    } else {
        id.rsplit('/').next() == Some(given)
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            placeholder: "TBD-*".into(),
            sources: vec![],
        }
    }
}

fn finding(
    id: &str,
    overlay: &Overlay,
    file: &str,
    line: usize,
    message: String,
    fix: String,
    ks: Vec<String>,
) -> Finding {
    let r = rules::find(id).expect("known rule");
    Finding {
        file: file.to_string(),
        line,
        rule: r.id.into(),
        name: r.name.into(),
        severity: r.severity,
        overlay: Some(overlay.dir.clone()),
        message,
        fix,
        kustomizations: ks,
    }
}

/// Where an applied object is written: (file, line of `keys` in it).
fn locate(repo: &Repo, ov: &Overlay, o: &Applied, keys: &[&str]) -> (String, usize) {
    let kind = o.value["kind"].as_str().unwrap_or("");
    let name = o.value["metadata"]["name"].as_str().unwrap_or("");
    let inputs = o
        .owner
        .filter(|&i| ov.ks[i].dir.is_some())
        .map(|i| fleet::ks_inputs(repo, &ov.ks[i]))
        .unwrap_or_else(|| repo.closure(&ov.dir));
    match repo.find(kind, name, Some(&o.namespace), Some(&inputs)) {
        Some(d) => (d.file.clone(), d.line_of(keys)),
        None => (String::new(), 0),
    }
}

/// Where an object's text holding `needle` is written.
fn locate_text(repo: &Repo, ov: &Overlay, o: &Applied, needle: &str) -> (String, usize) {
    let kind = o.value["kind"].as_str().unwrap_or("");
    let name = o.value["metadata"]["name"].as_str().unwrap_or("");
    let inputs = o
        .owner
        .filter(|&i| ov.ks[i].dir.is_some())
        .map(|i| fleet::ks_inputs(repo, &ov.ks[i]))
        .unwrap_or_else(|| repo.closure(&ov.dir));
    if let Some(d) = repo.find(kind, name, Some(&o.namespace), Some(&inputs))
        && let Some(l) = d.line_containing(needle)
    {
        return (d.file.clone(), l);
    }
    // a patch or another input file may hold it
    for f in &inputs {
        if let Some(t) = repo.texts.get(f)
            && let Some(i) = t.find(needle)
        {
            return (f.clone(), t[..i].matches('\n').count() + 1);
        }
    }
    let (f, _) = locate(repo, ov, o, &[]);
    let line = repo
        .find(kind, name, Some(&o.namespace), Some(&inputs))
        .map(|d| d.line)
        .unwrap_or(0);
    (f, line)
}

fn owner_ids(ov: &Overlay, o: &Applied) -> Vec<String> {
    o.owner.map(|i| vec![ov.ks[i].id()]).unwrap_or_default()
}

/// Runs every fleetlint rule family over one overlay.
pub fn lint_overlay(repo: &Repo, ov: &Overlay, opts: &Options) -> Vec<Finding> {
    let mut out = Vec::new();
    render_rules(repo, ov, &mut out);
    shipped_rule(repo, ov, &mut out);
    source_rules(repo, ov, opts, &mut out);
    applied_twice_rule(repo, ov, &mut out);
    depends_rules(repo, ov, &mut out);
    subst_rules(repo, ov, &mut out);
    placeholder_rule(repo, ov, opts, &mut out);
    inherit_rule(repo, ov, &mut out);
    address_rules(repo, ov, &mut out);
    address_variable_rule(ov, opts, &mut out);
    service_link_rules(repo, ov, &mut out);
    image_rules(repo, ov, &mut out);
    out.sort();
    out.dedup_by(|a, b| {
        a.file == b.file && a.line == b.line && a.rule == b.rule && a.message == b.message
    });
    out
}

/// FL001 for a file a kustomization lists that source-controller leaves out of every
/// artifact (its default excludes and `.sourceignore`: [`crate::sourceignore`]): the working
/// tree renders, but kustomize-controller builds the artifact, where the file is missing
/// (trial4: "kustomize build failed: accumulating resources from 'cm.yaml': open ...: no
/// such file" on the real controller while fleetlint said 0 errors). Reported on the
/// kustomization file that lists it, once per file.
fn shipped_rule(repo: &Repo, ov: &Overlay, out: &mut Vec<Finding>) {
    if repo.excluded.is_empty() {
        return;
    }
    let excluded: BTreeSet<&str> = repo.excluded.iter().map(String::as_str).collect();
    let units = ov.ks.iter().filter(|k| k.followed).filter_map(|k| {
        Some((
            Some(k.id()),
            render::Unit {
                dir: k.dir.clone()?,
                target_namespace: k.target_namespace.clone(),
                kustomize: k
                    .kustomize
                    .as_ref()
                    .map(crate::kustomize_fields::KustomizeFields::to_json),
            },
        ))
    });
    let root = (
        None,
        render::Unit {
            dir: ov.dir.clone(),
            target_namespace: None,
            kustomize: None,
        },
    );
    for (ks, u) in std::iter::once(root).chain(units) {
        let inputs = render::unit_inputs(repo, &u);
        for f in inputs.iter().filter(|f| excluded.contains(f.as_str())) {
            let lister = inputs
                .iter()
                .filter(|k| {
                    k.rsplit('/').next().is_some_and(|n| {
                        matches!(
                            n,
                            "kustomization.yaml" | "kustomization.yml" | "Kustomization"
                        )
                    })
                })
                .find(|k| {
                    let dir = k.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
                    repo.kustomization_refs(dir).1.iter().any(|x| x == f)
                });
            let Some(lister) = lister else { continue };
            out.push(finding(
                "FL001",
                ov,
                lister,
                0,
                format!(
                    "{lister} lists {f}, which source-controller leaves out of every artifact ({}): kustomize-controller builds the artifact, where {f} is missing, so the build fails{}",
                    if repo.sourceignore_files.is_empty() {
                        "its default excludes".to_string()
                    } else {
                        format!("its default excludes or {}", repo.sourceignore_files.join(", "))
                    },
                    ks.as_ref().map(|k| format!(" for Kustomization {k}")).unwrap_or_default()
                ),
                format!("ship {f} (remove the pattern that excludes it) or stop listing it in {lister}"),
                ks.clone().into_iter().collect(),
            ));
        }
    }
}

fn render_rules(repo: &Repo, ov: &Overlay, out: &mut Vec<Finding>) {
    for e in &ov.render_errors {
        let (file, line, ks) = match e.ks {
            Some(i) => {
                let k = &ov.ks[i];
                (
                    k.file.clone(),
                    raw_line(repo, k, &["spec", "path"]),
                    vec![k.id()],
                )
            }
            None => (
                repo.kustomization_file(&e.unit.dir).unwrap_or_default(),
                0,
                vec![],
            ),
        };
        let who = match e.ks {
            Some(i) => format!(
                "Kustomization {} (path {})",
                ov.ks[i].id(),
                fleet::unit_dir(&e.unit)
            ),
            None if ov.unconfirmed => format!(
                "overlay candidate {} (nothing includes it, its inputs hold a Flux Kustomization, no overlay reaches it)",
                fleet::unit_dir(&e.unit)
            ),
            None => format!("overlay {}", fleet::unit_dir(&e.unit)),
        };
        // a remote resource that cannot be fetched here (no network): unknown offline, not
        // a render Flux will certainly refuse
        let offline = [
            "no such host",
            "Could not resolve host",
            "dial tcp",
            "Network is unreachable",
        ]
        .iter()
        .any(|m| e.message.contains(m));
        let mut f = finding(
            "FL001",
            ov,
            &file,
            line,
            if offline {
                format!(
                    "unknown offline: {who} reads a remote resource that could not be fetched here: {}",
                    first_lines(&e.message, 3)
                )
            } else {
                format!("{who} does not render: {}", first_lines(&e.message, 3))
            },
            if render::bound_passed(&e.message) {
                format!(
                    "look in {} for what grows without end (YAML anchors and aliases nested in one another, a generator reading itself); kustomize-controller runs out of its own memory limit on it. If the render is meant to be this large, raise --render-timeout / --render-memory",
                    fleet::unit_dir(&e.unit)
                )
            } else {
                format!(
                    "run `kubectl kustomize --load-restrictor=LoadRestrictionsNone {}` and fix what it names",
                    fleet::unit_dir(&e.unit)
                )
            },
            ks,
        );
        if offline {
            f.severity = Severity::Warning;
        }
        out.push(f);
    }
    for k in &ov.ks {
        if !k.followed {
            continue;
        }
        let missing = match &k.dir {
            None => true,
            Some(d) => !repo.is_dir(d),
        };
        // a `${...}` left in the path by a parent whose variables are unknown offline (FL033
        // says which input): the path Flux uses is unknown, not missing
        let unknown = k.path.as_deref().is_some_and(|p| p.contains("${"))
            && k.parent.is_some_and(|p| {
                ov.subst_problems
                    .iter()
                    .any(|x| matches!(x, SubstProblem::FromMissing { ks, .. } if *ks == p))
            });
        if missing && !unknown {
            out.push(finding(
                "FL002",
                ov,
                &k.file,
                raw_line(repo, k, &["spec", "path"]),
                format!(
                    "Kustomization {} spec.path {:?} does not exist in the repository: kustomize-controller fails with \"kustomization path not found\"",
                    k.id(),
                    k.path.as_deref().unwrap_or("./")
                ),
                "point spec.path at an existing directory, relative to the repository root".into(),
                vec![k.id()],
            ));
        }
    }
}

/// `n` items of a list, then "and N more": one line, never the whole list.
pub fn at_most(items: &[String], n: usize) -> String {
    if items.is_empty() {
        return "none".into();
    }
    let mut s = items.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > n {
        s.push_str(&format!(" and {} more", items.len() - n));
    }
    s
}

/// FL002 for the Kustomizations reading an external source mapped by `--source` to the local
/// checkout `co`: their `spec.path` must be a directory there; FL001 when it is one and does
/// not render there ([`fleet::Overlay::checkout_errors`]).
fn mapped_paths(
    repo: &Repo,
    ov: &Overlay,
    e: &fleet::ExternalSource,
    co: &std::path::Path,
    out: &mut Vec<Finding>,
) {
    for &i in &e.readers {
        let k = &ov.ks[i];
        let p = k.path.as_deref().unwrap_or("./");
        let ok = crate::tree::normalize(p).is_some_and(|d| co.join(d).is_dir());
        if !ok {
            out.push(finding(
                "FL002",
                ov,
                &k.file,
                raw_line(repo, k, &["spec", "path"]),
                format!(
                    "Kustomization {} spec.path {p:?} does not exist in {} (the --source checkout of {}): kustomize-controller fails with \"kustomization path not found\"",
                    k.id(),
                    co.display(),
                    e.id
                ),
                "point spec.path at an existing directory of that source, relative to its root".into(),
                vec![k.id()],
            ));
        }
        for r in ov.checkout_errors.iter().filter(|r| r.ks == Some(i)) {
            let dir = co.join(&r.unit.dir);
            out.push(finding(
                "FL001",
                ov,
                &k.file,
                raw_line(repo, k, &["spec", "path"]),
                format!(
                    "Kustomization {} (path {p:?} in the --source checkout {} of {}) does not render: {}",
                    k.id(),
                    co.display(),
                    e.id,
                    first_lines(&r.message, 3)
                ),
                format!(
                    "run `kubectl kustomize --load-restrictor=LoadRestrictionsNone {}` and fix what it names in that source",
                    dir.display()
                ),
                vec![k.id()],
            ));
        }
    }
}

/// FL003 (a source the tree defines that the overlay never applies: one per reading
/// Kustomization) and FL004 (a source made outside the tree: once per source).
fn source_rules(repo: &Repo, ov: &Overlay, opts: &Options, out: &mut Vec<Finding>) {
    let known: Vec<String> = ov
        .sources
        .iter()
        .map(|s| format!("{}/{}/{}", s.kind, s.namespace, s.name))
        .collect();
    for e in &ov.external {
        let readers: Vec<String> = e.readers.iter().map(|&i| ov.ks[i].id()).collect();
        match (&e.defined_in, &e.maker) {
            (Some(file), None) => {
                for &i in &e.readers {
                    let k = &ov.ks[i];
                    out.push(finding(
                        "FL003",
                        ov,
                        &k.file,
                        raw_line(repo, k, &["spec", "sourceRef", "name"]),
                        format!(
                            "Kustomization {} sourceRef {} is defined in {file} but overlay {} does not apply it: \"Source '{}' not found\"",
                            k.id(),
                            e.id,
                            render::display_dir(&ov.dir),
                            e.id
                        ),
                        format!(
                            "add {file} to the overlay or correct sourceRef (sources it applies: {})",
                            at_most(&known, 3)
                        ),
                        vec![k.id()],
                    ));
                }
            }
            _ => {
                if let Some(co) = opts.checkout(&e.id) {
                    mapped_paths(repo, ov, e, co, out);
                }
                let k = &ov.ks[e.readers[0]];
                out.push(finding(
                    "FL004",
                    ov,
                    &k.file,
                    raw_line(repo, k, &["spec", "sourceRef", "name"]),
                    format!(
                        "{} is read by {} and made outside this tree's renders: {}; {}",
                        e.id,
                        at_most(&readers, 2),
                        e.maker.as_deref().unwrap_or("applied by hand, by Terraform or from another repository"),
                        match opts.checkout(&e.id) {
                            Some(co) => format!("paths checked and rendered in the --source checkout {}", co.display()),
                            None => "not checked offline".into(),
                        }
                    ),
                    match opts.checkout(&e.id) {
                        Some(_) => "nothing to do when the maker is right (its paths are checked in the --source checkout)".into(),
                        None => "nothing to do when the maker is right; --source KIND/NAMESPACE/NAME=PATH maps a local checkout of it".into(),
                    },
                    readers,
                ));
            }
        }
    }
}

fn first_lines(s: &str, n: usize) -> String {
    s.lines().take(n).collect::<Vec<_>>().join(" | ")
}

fn raw_line(repo: &Repo, k: &FluxKs, keys: &[&str]) -> usize {
    repo.docs
        .iter()
        .find(|d| d.file == k.file && d.kind == "Kustomization" && d.name == k.name)
        .map(|d| d.line_of(keys))
        .unwrap_or(k.line)
}

fn wave(k: &FluxKs) -> Option<u32> {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r"(?i)(?:^|[-_/])wave[-_]?(\d+)(?:$|[-_/])").expect("regex")
    });
    re.captures(&k.name)
        .or_else(|| k.path.as_deref().and_then(|p| re.captures(p)))
        .and_then(|c| c[1].parse().ok())
}

/// Worst-case time until each Kustomization is Ready or fails: its own timeout plus the
/// longest chain of its dependencies (cycles count once).
pub fn timeout_chains(ov: &Overlay) -> Vec<Duration> {
    let idx: BTreeMap<(String, String), usize> = ov
        .ks
        .iter()
        .enumerate()
        .map(|(i, k)| ((k.namespace.clone(), k.name.clone()), i))
        .collect();
    fn chain(
        i: usize,
        ov: &Overlay,
        idx: &BTreeMap<(String, String), usize>,
        memo: &mut Vec<Option<Duration>>,
        stack: &mut BTreeSet<usize>,
    ) -> Duration {
        if let Some(d) = memo[i] {
            return d;
        }
        if !stack.insert(i) {
            return Duration::ZERO;
        }
        let mut worst = Duration::ZERO;
        for d in &ov.ks[i].depends_on {
            if let Some(&j) = idx.get(d) {
                worst = worst.max(chain(j, ov, idx, memo, stack));
            }
        }
        stack.remove(&i);
        let total = worst + ov.ks[i].timeout;
        memo[i] = Some(total);
        total
    }
    let mut memo = vec![None; ov.ks.len()];
    (0..ov.ks.len())
        .map(|i| chain(i, ov, &idx, &mut memo, &mut BTreeSet::new()))
        .collect()
}

fn fmt_dur(d: Duration) -> String {
    cluster_loop::duration::format_go_duration(d)
}

fn depends_rules(repo: &Repo, ov: &Overlay, out: &mut Vec<Finding>) {
    let idx: BTreeMap<(String, String), usize> = ov
        .ks
        .iter()
        .enumerate()
        .map(|(i, k)| ((k.namespace.clone(), k.name.clone()), i))
        .collect();
    let chains = timeout_chains(ov);
    let lockdown = cross_namespace_lockdown(repo);
    let mut dependents: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, k) in ov.ks.iter().enumerate() {
        for (n, d) in k.depends_on.iter().enumerate() {
            match idx.get(d) {
                None => out.push(finding(
                    "FL010",
                    ov,
                    &k.file,
                    dep_line(repo, k, n),
                    format!(
                        "Kustomization {} dependsOn {}/{}, which overlay {} does not apply: \"dependency '{}/{}' not found\"",
                        k.id(), d.0, d.1, ov.dir, d.0, d.1
                    ),
                    format!(
                        "correct the name/namespace (Kustomizations here: {})",
                        ov.ks.iter().map(FluxKs::id).collect::<Vec<_>>().join(", ")
                    ),
                    vec![k.id()],
                )),
                Some(&j) => {
                    dependents.entry(j).or_default().push(i);
                    if d.0 != k.namespace && lockdown {
                        out.push(finding(
                            "FL012",
                            ov,
                            &k.file,
                            dep_line(repo, k, n),
                            format!(
                                "Kustomization {} dependsOn {}/{} in another namespace: refused by a controller run with --no-cross-namespace-refs",
                                k.id(), d.0, d.1
                            ),
                            "depend on a Kustomization of the same namespace".into(),
                            vec![k.id()],
                        ));
                    }
                    if let (Some(wk), Some(wd)) = (wave(k), wave(&ov.ks[j]))
                        && wd > wk
                    {
                        out.push(finding(
                            "FL013",
                            ov,
                            &k.file,
                            dep_line(repo, k, n),
                            format!(
                                "Kustomization {} (wave {wk}) dependsOn {} (wave {wd}), a later wave",
                                k.id(),
                                ov.ks[j].id()
                            ),
                            "depend on the previous wave only".into(),
                            vec![k.id()],
                        ));
                    }
                }
            }
        }
    }
    // cycles: DFS with colours, each cycle reported once (by its smallest member)
    let n = ov.ks.len();
    let mut reported: BTreeSet<Vec<usize>> = BTreeSet::new();
    for start in 0..n {
        let mut stack = vec![(start, 0usize)];
        let mut path = vec![start];
        let mut on_path = BTreeSet::from([start]);
        while let Some((v, ei)) = stack.pop() {
            let deps: Vec<usize> = ov.ks[v]
                .depends_on
                .iter()
                .filter_map(|d| idx.get(d).copied())
                .collect();
            if ei < deps.len() {
                stack.push((v, ei + 1));
                let w = deps[ei];
                if w == start {
                    let mut cyc = path.clone();
                    let min = *cyc.iter().min().expect("non-empty");
                    let pos = cyc.iter().position(|&x| x == min).expect("member");
                    cyc.rotate_left(pos);
                    if min == start && reported.insert(cyc.clone()) {
                        cycle_findings(repo, ov, &cyc, &idx, out);
                    }
                } else if !on_path.contains(&w) && w > start {
                    on_path.insert(w);
                    path.push(w);
                    stack.push((w, 0));
                }
            } else {
                on_path.remove(&v);
                path.pop();
            }
        }
    }
    for (j, deps) in &dependents {
        let d = &ov.ks[*j];
        if d.wait || d.health_checks {
            continue;
        }
        let worst = deps.iter().map(|&i| chains[i]).max().unwrap_or_default();
        let names: Vec<String> = deps.iter().map(|&i| ov.ks[i].id()).collect();
        out.push(finding(
            "FL014",
            ov,
            &d.file,
            d.line,
            format!(
                "{} dependsOn Kustomization {}, which has neither wait: true nor healthChecks: they start once it is applied, not once its workloads are healthy (timeout chain to the last of them: up to {})",
                names.join(", "),
                d.id(),
                fmt_dur(worst)
            ),
            "set spec.wait: true (or list spec.healthChecks) on the dependency".into(),
            std::iter::once(d.id()).chain(names).collect(),
        ));
    }
}

/// True when the fleet turns on Flux's multi-tenancy lockdown, the only case FL012 is refused:
/// a `--no-cross-namespace-refs` flag anywhere in the tree (the patch `flux bootstrap` docs
/// give for kustomization.yaml) or a FluxInstance with `cluster.multitenant: true` (flux-operator
/// sets the flag then). Without either, a cross-namespace dependsOn is allowed.
fn cross_namespace_lockdown(repo: &Repo) -> bool {
    repo.texts.values().any(|t| {
        t.contains("no-cross-namespace-refs")
            || (t.contains("multitenant: true") && t.contains("FluxInstance"))
    })
}

/// FL011 for one cycle (indices in order, each depending on the next, the last on the first):
/// one finding per edge, on the dependsOn entry that makes it, so the file whose change closed
/// the cycle carries it.
fn cycle_findings(
    repo: &Repo,
    ov: &Overlay,
    cyc: &[usize],
    idx: &BTreeMap<(String, String), usize>,
    out: &mut Vec<Finding>,
) {
    let names: Vec<String> = cyc
        .iter()
        .chain(std::iter::once(&cyc[0]))
        .map(|&i| ov.ks[i].id())
        .collect();
    for (pos, &i) in cyc.iter().enumerate() {
        let next = cyc[(pos + 1) % cyc.len()];
        let k = &ov.ks[i];
        let n = k
            .depends_on
            .iter()
            .position(|d| idx.get(d) == Some(&next))
            .unwrap_or(0);
        out.push(finding(
            "FL011",
            ov,
            &k.file,
            dep_line(repo, k, n),
            format!(
                "dependsOn cycle: {} (this edge: {} dependsOn {})",
                names.join(" -> "),
                k.id(),
                ov.ks[next].id()
            ),
            "remove one dependsOn edge of the cycle".into(),
            cyc.iter().map(|&i| ov.ks[i].id()).collect(),
        ));
    }
}

/// FL005: one object (kind, namespace, name) in the renders of two Kustomizations of the
/// overlay. Both server-side apply it with the field manager kustomize-controller, so each
/// apply overwrites the other's version, and either one's garbage collection deletes it when it
/// leaves that one's inventory (kustomize-controller inventory and prune).
fn applied_twice_rule(repo: &Repo, ov: &Overlay, out: &mut Vec<Finding>) {
    // (cluster, kind.group, namespace, name): a Kustomization with spec.kubeConfig applies to
    // another cluster (hub and spokes)
    type Key = (String, String, String, String);
    let mut by_id: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (oi, o) in ov.objects.iter().enumerate() {
        let Some(owner) = o.owner else {
            continue;
        };
        let cluster = ov.ks[owner]
            .kube_config
            .as_ref()
            .map(|c| format!("{}/{c}", ov.ks[owner].namespace))
            .unwrap_or_default();
        let kind = o.value["kind"].as_str().unwrap_or("").to_string();
        let name = o.value["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let group = o.value["apiVersion"]
            .as_str()
            .and_then(|a| a.split_once('/'))
            .map_or("", |(g, _)| g);
        // the namespace after substitution (`namespace: ${TENANT}`)
        let namespace = o.value["metadata"]["namespace"]
            .as_str()
            .filter(|n| !n.is_empty() && !o.namespace.is_empty())
            .unwrap_or(&o.namespace)
            .to_string();
        by_id
            .entry((cluster, format!("{kind}.{group}"), namespace, name))
            .or_default()
            .push(oi);
    }
    for objs in by_id.values() {
        let mut owners: Vec<usize> = objs.iter().filter_map(|&oi| ov.objects[oi].owner).collect();
        owners.sort_unstable();
        owners.dedup();
        if owners.len() < 2 {
            continue;
        }
        let o = &ov.objects[objs[0]];
        let (file, line) = locate(repo, ov, o, &[]);
        let ids: Vec<String> = owners.iter().map(|&i| ov.ks[i].id()).collect();
        let unsubstituted: Vec<String> = owners
            .iter()
            .filter(|&&i| ov.ks[i].post_build.is_none())
            .map(|&i| ov.ks[i].id())
            .collect();
        let subst = if unsubstituted.is_empty() || unsubstituted.len() == owners.len() {
            String::new()
        } else {
            format!(
                "; {} applies it without substitution (no postBuild), so the two versions differ",
                unsubstituted.join(", ")
            )
        };
        out.push(finding(
            "FL005",
            ov,
            &file,
            line,
            format!(
                "{} is applied by Kustomizations {}: each apply overwrites the other's and either one's prune deletes it{subst}",
                o.describe(),
                ids.join(" and ")
            ),
            "keep the object in one Kustomization's path (remove it from the others' kustomization resources)".into(),
            ids,
        ));
    }
}

/// Line of the `n`th dependsOn entry's name in the file defining `k`.
fn dep_line(repo: &Repo, k: &FluxKs, n: usize) -> usize {
    raw_line(repo, k, &["spec", "dependsOn", &n.to_string(), "name"])
}

fn subst_rules(repo: &Repo, ov: &Overlay, out: &mut Vec<Finding>) {
    for p in &ov.subst_problems {
        match p {
            SubstProblem::NotEnabled {
                object,
                expr,
                shell,
                meant,
            } => not_enabled(repo, ov, *object, expr, *shell, *meant, out),
            SubstProblem::NoVariables { object, expr } => {
                let o = &ov.objects[*object];
                let (file, line) = locate_text(repo, ov, o, expr);
                let owner = o.owner.map(|i| ov.ks[i].id()).unwrap_or_default();
                out.push(finding(
                    "FL036",
                    ov,
                    &file,
                    line,
                    format!(
                        "{expr} in {}: Kustomization {owner} has postBuild but loads no variables (and no substituteStrategy: Always): nothing is substituted, the literal ships",
                        o.describe()
                    ),
                    "define a variable or set postBuild.substituteStrategy: Always".into(),
                    owner_ids(ov, o),
                ));
            }
            SubstProblem::Undefined {
                object,
                expr,
                name,
                shell,
                exec_arg,
            } => {
                let o = &ov.objects[*object];
                let (file, line) = locate_text(repo, ov, o, expr);
                let owner = o.owner.map(|i| ov.ks[i].id()).unwrap_or_default();
                if *shell {
                    out.push(finding(
                        "FL032",
                        ov,
                        &file,
                        line,
                        format!(
                            "{expr} in a shell script of {} is substituted by Kustomization {owner}, which defines no {name}: strict mode fails the Kustomization (\"variable not set (strict mode): {name:?}\"), otherwise the shell gets \"\"",
                            o.describe()
                        ),
                        format!("if the shell is meant to expand it, escape it as ${expr}; if Flux is, define {name} in the overlay's substituteFrom ConfigMap/Secret or postBuild.substitute"),
                        owner_ids(ov, o),
                    ));
                } else {
                    out.push(finding(
                        "FL031",
                        ov,
                        &file,
                        line,
                        format!(
                            "{expr} in {} has no default and Kustomization {owner} defines no {name} in overlay {}: \"variable not set (strict mode): {name:?}\"{}",
                            o.describe(),
                            ov.dir,
                            if *exec_arg {
                                format!(" (a container command/args element run without a shell: escaping it as ${expr} would hand the process the literal {expr})")
                            } else {
                                String::new()
                            }
                        ),
                        format!("define {name} in the overlay's substituteFrom ConfigMap/Secret or postBuild.substitute, or write ${{{name}:=default}}"),
                        owner_ids(ov, o),
                    ));
                }
            }
            SubstProblem::Syntax {
                object,
                message,
                near,
            } => {
                let o = &ov.objects[*object];
                let (file, line) = locate_text(repo, ov, o, near.trim());
                out.push(finding(
                    "FL034",
                    ov,
                    &file,
                    line,
                    format!(
                        "{} does not parse for envsubst near {near:?}: {message}",
                        o.describe()
                    ),
                    "escape a literal as $${...} or correct the expression".into(),
                    owner_ids(ov, o),
                ));
            }
            // one finding per input, below
            SubstProblem::FromMissing { .. } => {}
            SubstProblem::BadName { ks, name, origin } => {
                let k = &ov.ks[*ks];
                let (file, line) = origin.clone().unwrap_or((k.file.clone(), k.line));
                out.push(finding(
                    "FL035",
                    ov,
                    &file,
                    line,
                    format!("variable {name:?} of Kustomization {} is not a valid name: \"'{name}' var name is invalid\" fails the whole Kustomization", k.id()),
                    "rename it (letters, digits, underscore; not starting with a digit)".into(),
                    vec![k.id()],
                ));
            }
        }
    }
    missing_inputs(repo, ov, out);
}

/// FL033: one finding per `substituteFrom` input the overlay never applies (kind, the
/// readers' namespace, name), at its first reader's `substituteFrom`, naming every
/// Kustomization that reads it (a fleet had 73 findings for one cluster Secret, one per
/// reader) and how many objects' substitution it leaves unchecked.
fn missing_inputs(repo: &Repo, ov: &Overlay, out: &mut Vec<Finding>) {
    struct Input<'a> {
        readers: Vec<usize>,
        maker: Option<&'a str>,
        blocked: usize,
        elsewhere: usize,
    }
    let mut inputs: Vec<((&str, &str, &str), Input<'_>)> = Vec::new();
    for p in &ov.subst_problems {
        let SubstProblem::FromMissing {
            ks,
            kind,
            name,
            maker,
            blocked,
        } = p
        else {
            continue;
        };
        let key = (kind.as_str(), ov.ks[*ks].namespace.as_str(), name.as_str());
        let i = match inputs.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                inputs.push((
                    key,
                    Input {
                        readers: vec![],
                        maker: None,
                        blocked: 0,
                        elsewhere: 0,
                    },
                ));
                inputs.len() - 1
            }
        };
        let input = &mut inputs[i].1;
        if !input.readers.contains(ks) {
            input.readers.push(*ks);
        }
        input.maker = input.maker.or(maker.as_deref());
        input.blocked += blocked;
        input.elsewhere += usize::from(!ov.ks[*ks].followed);
    }
    for ((kind, ns, name), input) in inputs {
        let first = &ov.ks[input.readers[0]];
        let made = match input.maker {
            Some(m) => format!("{m} makes it at run time"),
            None => {
                "it may be created outside the tree (bootstrap, Terraform, by hand) or be missing"
                    .into()
            }
        };
        let ids: Vec<String> = input.readers.iter().map(|&i| ov.ks[i].id()).collect();
        let readers = if ids.len() == 1 {
            format!("Kustomization {}", ids[0])
        } else {
            const SHOWN: usize = 5;
            let mut names = ids
                .iter()
                .take(SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if ids.len() > SHOWN {
                names.push_str(&format!(" and {} more", ids.len() - SHOWN));
            }
            format!("{} Kustomizations ({names})", ids.len())
        };
        let mut unchecked = format!(
            "substitution of {} object(s) holding ${{...}} is not checked",
            input.blocked
        );
        if input.elsewhere > 0 {
            unchecked.push_str(&format!(
                " ({} of the readers' paths are in another source, not rendered here)",
                input.elsewhere
            ));
        }
        out.push(finding(
            "FL033",
            ov,
            &first.file,
            raw_line(repo, first, &["spec", "postBuild", "substituteFrom"]),
            format!(
                "unknown offline: {kind} {ns}/{name}, read by substituteFrom of {readers}, is not applied by overlay {} ({made}); if it is missing each reader's build fails (\"substitute from '{kind}/{name}' error: not found\"); {unchecked}",
                render::display_dir(&ov.dir),
            ),
            format!("nothing when {kind} {ns}/{name} exists in the cluster; otherwise add it to the overlay or mark the references optional: true"),
            ids,
        ));
    }
}

/// FL030 (no postBuild: the literal ships) for one `${...}`, a warning (what ships is what the
/// author wrote) saying whether a Kustomization of the overlay defines the variable (Flux was
/// likely meant to substitute it) or none does (a config template's own placeholder); in a
/// shell script the literal is what the shell reads,
/// so FL032 warns with the escape that keeps it working once postBuild is enabled.
fn not_enabled(
    repo: &Repo,
    ov: &Overlay,
    object: usize,
    expr: &str,
    shell: bool,
    meant: bool,
    out: &mut Vec<Finding>,
) {
    let o = &ov.objects[object];
    let (file, line) = locate_text(repo, ov, o, expr);
    let owner = o.owner.map(|i| ov.ks[i].id()).unwrap_or_default();
    if shell {
        let mut f = finding(
            "FL032",
            ov,
            &file,
            line,
            format!(
                "{expr} in a shell script of {}: Kustomization {owner} has no postBuild, so the shell gets it as written today; enabling postBuild would substitute it",
                o.describe()
            ),
            format!(
                "nothing today; if postBuild is enabled on Kustomization {owner}, escape it as ${expr} then (without postBuild Flux ships ${expr} as written and the shell reads $$, its process ID)"
            ),
            owner_ids(ov, o),
        );
        f.severity = Severity::Warning;
        out.push(f);
        return;
    }
    let f = finding(
        "FL030",
        ov,
        &file,
        line,
        if meant {
            format!(
                "{expr} in {}: Kustomization {owner} has no postBuild, so the literal ships (the overlay defines this variable for other Kustomizations)",
                o.describe()
            )
        } else {
            format!(
                "{expr} in {}: Kustomization {owner} has no postBuild, so the literal ships (no Kustomization of the overlay defines it: a template's own placeholder?)",
                o.describe()
            )
        },
        format!(
            "add postBuild.substituteFrom (or substitute) to Kustomization {owner}, or write the value; if the literal is meant nothing ships wrong (do not write ${expr}: without postBuild Flux ships the escape as written)"
        ),
        owner_ids(ov, o),
    );
    out.push(f);
}

/// Compiles a placeholder glob (`*` = a run of characters that are not space, quote, comma).
pub fn placeholder_regex(glob: &str) -> Result<regex::Regex, String> {
    let mut re = String::new();
    for c in glob.chars() {
        match c {
            '*' => re.push_str(r#"[^\s"',}\]]*"#),
            '?' => re.push_str(r#"[^\s"',}\]]"#),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    regex::Regex::new(&re).map_err(|e| format!("--placeholder {glob:?}: {e}"))
}

fn placeholder_rule(repo: &Repo, ov: &Overlay, opts: &Options, out: &mut Vec<Finding>) {
    let Ok(re) = placeholder_regex(&opts.placeholder) else {
        return;
    };
    // placeholder value -> objects/fields it reaches
    let mut reach: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for (oi, o) in ov.objects.iter().enumerate() {
        placeholder_sites(&o.value, &re, &mut Vec::new(), &mut |ph, path| {
            reach.entry(ph.to_string()).or_default().push((oi, path));
        });
    }
    if reach.is_empty() {
        return;
    }
    let own_prefix = format!("{}/", ov.dir);
    let overlay_files: BTreeSet<String> = ov
        .ks
        .iter()
        .filter_map(|k| k.dir.clone())
        .chain(std::iter::once(ov.dir.clone()))
        .flat_map(|d| repo.closure(&d))
        .collect();
    for (ph, sites) in reach {
        // where it is written: the overlay's own files first, then any input of the overlay
        let mut origins: Vec<(bool, String, usize)> = Vec::new();
        for f in &overlay_files {
            if let Some(t) = repo.texts.get(f) {
                for (i, l) in t.lines().enumerate() {
                    if l.contains(&ph) && !l.trim_start().starts_with('#') {
                        origins.push((f.starts_with(&own_prefix), f.clone(), i + 1));
                    }
                }
            }
        }
        origins.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let (file, line) = origins
            .first()
            .map(|(_, f, l)| (f.clone(), *l))
            .unwrap_or_default();
        let mut reached: Vec<String> = sites
            .iter()
            .map(|(oi, p)| format!("{} {p}", ov.objects[*oi].describe()))
            .collect();
        reached.dedup();
        let ks: BTreeSet<String> = sites
            .iter()
            .flat_map(|(oi, _)| owner_ids(ov, &ov.objects[*oi]))
            .collect();
        out.push(finding(
            "FL040",
            ov,
            &file,
            line,
            format!(
                "placeholder {ph} reaches overlay {}: {}",
                ov.dir,
                reached.join(", ")
            ),
            "decide the value and write it (never replace a placeholder with a guess)".into(),
            ks.into_iter().collect(),
        ));
    }
}

/// Every match of `re` in the string leaves of `v`, in document order, with the leaf's key
/// path joined by `.` (array items by index).
fn placeholder_sites<'a>(
    v: &'a Value,
    re: &regex::Regex,
    path: &mut Vec<std::borrow::Cow<'a, str>>,
    hit: &mut impl FnMut(&str, String),
) {
    match v {
        Value::String(s) => {
            for m in re.find_iter(s) {
                hit(m.as_str(), path.join("."));
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                path.push(std::borrow::Cow::Borrowed(k));
                placeholder_sites(x, re, path, hit);
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(std::borrow::Cow::Owned(i.to_string()));
                placeholder_sites(x, re, path, hit);
                path.pop();
            }
        }
        _ => {}
    }
}

/// True for a value that belongs to one environment: a private, loopback, link-local or CGNAT
/// IPv4 address or CIDR, an IPv6 ULA, or a `.local`/`.lan`/`.internal`/`.home.arpa`/localhost
/// host name.
pub fn env_specific(v: &str) -> bool {
    let v = v.trim();
    let ip_part = v.split('/').next().unwrap_or(v);
    if let Ok(ip) = ip_part.parse::<IpAddr>() {
        return match ip {
            IpAddr::V4(a) => {
                let o = a.octets();
                a.is_private()
                    || a.is_loopback()
                    || a.is_link_local()
                    || (o[0] == 100 && (64..128).contains(&o[1]))
            }
            IpAddr::V6(a) => (a.segments()[0] & 0xfe00) == 0xfc00 || a.is_loopback(),
        };
    }
    let host = v
        .split("://")
        .last()
        .unwrap_or(v)
        .split(['/', ':'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    host == "localhost"
        || [".local", ".lan", ".internal", ".home.arpa", ".localhost"]
            .iter()
            .any(|s| host.ends_with(s))
}

fn inherit_rule(repo: &Repo, ov: &Overlay, out: &mut Vec<Finding>) {
    let prefix = format!("{}/", ov.dir);
    let mut done = BTreeSet::new();
    for k in &ov.ks {
        let Some(pb) = &k.post_build else { continue };
        for r in &pb.substitute_from {
            if !done.insert((r.kind.clone(), r.name.clone())) {
                continue;
            }
            let Some(cands) = repo.by_kind_name.get(&(r.kind.clone(), r.name.clone())) else {
                continue;
            };
            let docs: Vec<_> = cands.iter().map(|&i| &repo.docs[i]).collect();
            let own: Vec<_> = docs
                .iter()
                .filter(|d| d.file.starts_with(&prefix))
                .collect();
            let base: Vec<_> = docs
                .iter()
                .filter(|d| !d.file.starts_with(&prefix))
                .collect();
            let overlay_files = repo.closure(&ov.dir);
            for b in base {
                // only a base this overlay actually includes
                if !overlay_files.contains(&b.file) {
                    continue;
                }
                for field in ["data", "stringData"] {
                    let Some(markercheck::yamltree::Node::Map { entries, .. }) =
                        b.root().get(field)
                    else {
                        continue;
                    };
                    for (key, val) in entries {
                        let (Some(key), Some(val)) = (key.str(), val.str()) else {
                            continue;
                        };
                        if !env_specific(val) {
                            continue;
                        }
                        let set_by_overlay =
                            own.iter().any(|d| d.root().path(&[field, key]).is_some());
                        if set_by_overlay {
                            continue;
                        }
                        out.push(finding(
                            "FL041",
                            ov,
                            &b.file,
                            b.line_of(&[field, key]),
                            format!(
                                "overlay {} does not set {} {}/{key}; it inherits the base value {val:?}, which looks environment-specific",
                                ov.dir, r.kind, r.name
                            ),
                            format!("set {key} in overlay {}'s own patch of {} {}", ov.dir, r.kind, r.name),
                            vec![k.id()],
                        ));
                    }
                }
            }
        }
    }
}

fn ip_add(ip: IpAddr, n: u128) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4(std::net::Ipv4Addr::from(
            u32::from(a).wrapping_add(n as u32),
        )),
        IpAddr::V6(a) => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(a).wrapping_add(n))),
    }
}

fn ip_num(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    }
}

/// A CIDR (`10.0.0.0/24`; not a range or a lone address) as (first, last) addresses, by the
/// suite's one parser ([`cluster_loop::net::parse_range`]).
fn cidr_range(c: &str) -> Option<(IpAddr, IpAddr)> {
    if !c.contains('/') {
        return None;
    }
    let r = cluster_loop::net::parse_range(c).ok()?;
    Some((r.start, r.end))
}

#[derive(Debug)]
struct Pool {
    what: String,
    first: IpAddr,
    last: IpAddr,
    start: IpAddr,
    file: String,
    line: usize,
}

fn pools(repo: &Repo, ov: &Overlay) -> Vec<Pool> {
    let mut out = Vec::new();
    for o in &ov.objects {
        let api = o.value["apiVersion"].as_str().unwrap_or("");
        let kind = o.value["kind"].as_str().unwrap_or("");
        let name = o.value["metadata"]["name"].as_str().unwrap_or("");
        let cilium = kind == "CiliumLoadBalancerIPPool" && api.starts_with("cilium.io/");
        let metallb = kind == "IPAddressPool" && api.starts_with("metallb.io/");
        if !cilium && !metallb {
            continue;
        }
        let (file, line) = locate(repo, ov, o, &["spec"]);
        if cilium {
            let allow_fl = o.value["spec"]["allowFirstLastIPs"] == "Yes";
            let blocks = o.value["spec"]["blocks"]
                .as_array()
                .or_else(|| o.value["spec"]["cidrs"].as_array())
                .cloned()
                .unwrap_or_default();
            for b in blocks {
                if let Some(c) = b["cidr"].as_str()
                    && let Some((first, last)) = cidr_range(c)
                {
                    // Cilium skips a CIDR's first and last address unless allowFirstLastIPs: Yes
                    let small = c.ends_with("/32")
                        || c.ends_with("/31")
                        || c.ends_with("/128")
                        || c.ends_with("/127");
                    let start = if allow_fl || small {
                        first
                    } else {
                        ip_add(first, 1)
                    };
                    out.push(Pool {
                        what: format!("CiliumLoadBalancerIPPool {name} block {c}"),
                        first,
                        last,
                        start,
                        file: file.clone(),
                        line,
                    });
                } else if let (Some(s), Some(e)) = (b["start"].as_str(), b["stop"].as_str())
                    && let (Ok(s), Ok(e)) = (s.parse::<IpAddr>(), e.parse::<IpAddr>())
                {
                    out.push(Pool {
                        what: format!("CiliumLoadBalancerIPPool {name} block {s}-{e}"),
                        first: s,
                        last: e,
                        start: s,
                        file: file.clone(),
                        line,
                    });
                }
            }
        }
        if metallb {
            let avoid = o.value["spec"]["avoidBuggyIPs"].as_bool().unwrap_or(false);
            for a in o.value["spec"]["addresses"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                let Some(a) = a.as_str() else { continue };
                if let Some((s, e)) = a.split_once('-')
                    && let (Ok(s), Ok(e)) = (s.trim().parse::<IpAddr>(), e.trim().parse::<IpAddr>())
                {
                    out.push(Pool {
                        what: format!("IPAddressPool {name} range {a}"),
                        first: s,
                        last: e,
                        start: s,
                        file: file.clone(),
                        line,
                    });
                } else if let Some((first, last)) = cidr_range(a) {
                    let start = if avoid && ip_num(first).is_multiple_of(256) {
                        ip_add(first, 1)
                    } else {
                        first
                    };
                    out.push(Pool {
                        what: format!("IPAddressPool {name} {a}"),
                        first,
                        last,
                        start,
                        file: file.clone(),
                        line,
                    });
                }
            }
        }
    }
    out
}

fn address_rules(repo: &Repo, ov: &Overlay, out: &mut Vec<Finding>) {
    let pools = pools(repo, ov);
    if pools.is_empty() {
        return;
    }
    // requested addresses: LoadBalancer Services and Gateways
    let mut vips: Vec<(String, usize, String, String, Vec<String>)> = Vec::new(); // file, line, what, ip, ks
    for o in &ov.objects {
        let kind = o.value["kind"].as_str().unwrap_or("");
        let mut push = |keys: &[&str], what: String, ip: &str| {
            let (file, line) = locate(repo, ov, o, keys);
            // a `${VAR}` in the file: report where the variable is written
            let (file, line) = var_origin_at(repo, ov, o, &file, line).unwrap_or((file, line));
            vips.push((file, line, what, ip.to_string(), owner_ids(ov, o)));
        };
        if kind == "Service" && o.value["spec"]["type"] == "LoadBalancer" {
            if let Some(ip) = o.value["spec"]["loadBalancerIP"].as_str() {
                push(
                    &["spec", "loadBalancerIP"],
                    format!("{} spec.loadBalancerIP", o.describe()),
                    ip,
                );
            }
            for ann in [
                "lbipam.cilium.io/ips",
                "io.cilium/lb-ipam-ips",
                "metallb.universe.tf/loadBalancerIPs",
                "metallb.io/loadBalancerIPs",
            ] {
                if let Some(v) = o.value["metadata"]["annotations"][ann].as_str() {
                    for ip in v.split(',') {
                        push(
                            &["metadata", "annotations", ann],
                            format!("{} annotation {ann}", o.describe()),
                            ip.trim(),
                        );
                    }
                }
            }
        }
        if kind == "Gateway"
            && o.value["apiVersion"]
                .as_str()
                .unwrap_or("")
                .starts_with("gateway.networking.k8s.io/")
        {
            for a in o.value["spec"]["addresses"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                if a["type"].as_str().is_none_or(|t| t == "IPAddress")
                    && let Some(ip) = a["value"].as_str()
                {
                    push(
                        &["spec", "addresses"],
                        format!("{} spec.addresses", o.describe()),
                        ip,
                    );
                }
            }
        }
    }
    for (file, line, what, ip, ks) in vips {
        let Ok(addr) = ip.parse::<IpAddr>() else {
            continue; // not an address: a placeholder (FL040) or the API server's validation
        };
        let inside: Vec<&Pool> = pools
            .iter()
            .filter(|p| {
                p.first.is_ipv4() == addr.is_ipv4()
                    && ip_num(p.first) <= ip_num(addr)
                    && ip_num(addr) <= ip_num(p.last)
            })
            .collect();
        let list = pools
            .iter()
            .map(|p| format!("{} ({}:{})", p.what, p.file, p.line))
            .collect::<Vec<_>>()
            .join(", ");
        if inside.is_empty() {
            out.push(finding(
                "FL050",
                ov,
                &file,
                line,
                format!("{what} = {ip} lies outside every load-balancer pool of overlay {}: {list}; it is never announced and traffic to it is blackholed", ov.dir),
                format!("use an address inside the pool, in practice its first address {}", pools[0].start),
                ks,
            ));
        } else if inside.iter().all(|p| p.start != addr) {
            out.push(finding(
                "FL051",
                ov,
                &file,
                line,
                format!(
                    "{what} = {ip} is inside {} but not its first address {}",
                    inside[0].what, inside[0].start
                ),
                format!(
                    "use {} (the pool's first address) or move the pool's start",
                    inside[0].start
                ),
                ks,
            ));
        }
    }
}

/// FL052: substitution variables meant to hold addresses that do not (see the rule's
/// explanation); one finding per written variable, naming every Kustomization that loads it.
fn address_variable_rule(ov: &Overlay, opts: &Options, out: &mut Vec<Finding>) {
    let placeholder = placeholder_regex(&opts.placeholder).ok();
    // (file, line, name) -> (value, Kustomizations)
    let mut bad: BTreeMap<(String, usize, String), (String, Vec<String>)> = BTreeMap::new();
    for k in &ov.ks {
        if k.post_build.is_none() {
            continue;
        }
        for (name, v) in &k.vars {
            let value = v.value.trim();
            if value.is_empty()
                || placeholder.as_ref().is_some_and(|re| re.is_match(value))
                || !(address_name(name) && addressy(value) || dotted_quad(value))
                || address_list(value)
            {
                continue;
            }
            let (file, line) = v.origin.clone().unwrap_or((k.file.clone(), k.line));
            bad.entry((file, line, name.clone()))
                .or_insert_with(|| (value.to_string(), Vec::new()))
                .1
                .push(k.id());
        }
    }
    for ((file, line, name), (value, ks)) in bad {
        let why = if dotted_quad(&value) {
            "an IPv4 address has four parts of 0-255"
        } else {
            "not an IPv4/IPv6 address, CIDR or a-b range"
        };
        out.push(finding(
            "FL052",
            ov,
            &file,
            line,
            format!(
                "variable {name} = {value:?} is not an address ({why}); {} {} {} it in overlay {}",
                if ks.len() == 1 {
                    "Kustomization"
                } else {
                    "Kustomizations"
                },
                ks.join(", "),
                if ks.len() == 1 {
                    "substitutes"
                } else {
                    "substitute"
                },
                ov.dir
            ),
            format!("write the address {name} is meant to hold"),
            ks,
        ));
    }
}

/// True when a variable name says it holds addresses: a `_`-separated token IP, VIP, IPS, IPV4
/// or IPV6 (case-insensitive).
fn address_name(name: &str) -> bool {
    name.split('_').any(|t| {
        ["IP", "VIP", "IPS", "VIPS", "IPV4", "IPV6"]
            .iter()
            .any(|x| t.eq_ignore_ascii_case(x))
    })
}

/// True when a value is written with address characters only (hex digits, `.:/,-`, spaces)
/// and has a digit: an attempt at an address, not a hostname or a flag.
fn addressy(v: &str) -> bool {
    v.chars().any(|c| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_hexdigit() || ".:/,- ".contains(c))
}

/// True for four dot-separated runs of digits (`192.168.2.300`).
fn dotted_quad(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.chars().all(|c| c.is_ascii_digit()))
}

/// True when every comma/space-separated item is an IP address, a CIDR (`addr/bits`, bits at
/// most 32 or 128) or a range `addr-addr` of one family.
fn address_list(v: &str) -> bool {
    let one = |s: &str| -> bool {
        if let Some((a, b)) = s.split_once('/') {
            return match (a.parse::<IpAddr>(), b.parse::<u8>()) {
                (Ok(IpAddr::V4(_)), Ok(n)) => n <= 32,
                (Ok(IpAddr::V6(_)), Ok(n)) => n <= 128,
                _ => false,
            };
        }
        if let Some((a, b)) = s.split_once('-') {
            return match (a.trim().parse::<IpAddr>(), b.trim().parse::<IpAddr>()) {
                (Ok(a), Ok(b)) => a.is_ipv4() == b.is_ipv4(),
                _ => false,
            };
        }
        s.parse::<IpAddr>().is_ok()
    };
    let items: Vec<&str> = v
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .collect();
    !items.is_empty() && items.iter().all(|s| one(s))
}

/// When the raw line at `file:line` holds `${VAR}` and the owner defines VAR, where VAR is
/// written.
fn var_origin_at(
    repo: &Repo,
    ov: &Overlay,
    o: &Applied,
    file: &str,
    line: usize,
) -> Option<(String, usize)> {
    let text = repo.texts.get(file)?;
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let t = crate::envsubst::parse(l).ok()?;
    let e = t.exprs.first()?;
    let k = &ov.ks[o.owner?];
    k.vars.get(&e.name)?.origin.clone()
}

fn pod_spec(v: &Value) -> Option<(&Value, Vec<&'static str>)> {
    match v["kind"].as_str()? {
        "Deployment"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicaSet"
        | "ReplicationController"
        | "Job" => Some((
            &v["spec"]["template"]["spec"],
            vec!["spec", "template", "spec"],
        )),
        "CronJob" => Some((
            &v["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            vec!["spec", "jobTemplate", "spec", "template", "spec"],
        )),
        "Pod" => Some((&v["spec"], vec!["spec"])),
        _ => None,
    }
    .filter(|(s, _)| s.is_object())
}

/// The variables the kubelet injects for a Service as written in Git (pkg/kubelet/envvars
/// FromServices; one home: [`cluster_loop::servicelinks::link_var_names`]); none for a
/// headless or ExternalName Service.
pub fn service_env_names(svc: &Value) -> Vec<String> {
    cluster_loop::servicelinks::link_var_names(svc)
}

/// Suffixes of connection settings: a workload declaring `<SERVICE>_HOST` reads the
/// `<SERVICE>_*` family, so it also reads `<SERVICE>_PORT` when it is left open.
const FAMILY_SUFFIXES: [&str; 8] = [
    "HOST", "HOSTNAME", "ADDR", "ADDRESS", "URL", "URI", "SERVER", "ENDPOINT",
];

/// `$(VAR)` references (Kubernetes dependent environment variables).
fn dependent_var_regex() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)").expect("regex"))
}

fn service_link_rules(repo: &Repo, ov: &Overlay, out: &mut Vec<Finding>) {
    for o in &ov.objects {
        let Some((spec, base)) = pod_spec(&o.value) else {
            continue;
        };
        if spec["enableServiceLinks"] == false {
            continue;
        }
        let services: Vec<&Applied> = ov
            .objects
            .iter()
            .filter(|s| s.value["kind"] == "Service" && s.namespace == o.namespace)
            .collect();
        let mut collisions: Vec<String> = Vec::new();
        let mut uses_env_from = false;
        for group in ["initContainers", "containers"] {
            for c in spec[group].as_array().cloned().unwrap_or_default() {
                let cname = c["name"].as_str().unwrap_or("?").to_string();
                // declared keys: name -> may be missing at run time
                let mut declared: BTreeMap<String, (String, bool)> = BTreeMap::new();
                for ef in c["envFrom"].as_array().cloned().unwrap_or_default() {
                    uses_env_from = true;
                    let prefix = ef["prefix"].as_str().unwrap_or("").to_string();
                    for (kind, key) in [("ConfigMap", "configMapRef"), ("Secret", "secretRef")] {
                        let r = &ef[key];
                        let Some(n) = r["name"].as_str() else {
                            continue;
                        };
                        let optional = r["optional"].as_bool().unwrap_or(false);
                        let src = ov.objects.iter().find(|x| {
                            x.value["kind"] == kind
                                && x.value["metadata"]["name"] == n
                                && x.namespace == o.namespace
                        });
                        if let Some(src) = src {
                            for k in fleet::object_data(&src.value).keys() {
                                declared.insert(
                                    format!("{prefix}{k}"),
                                    (format!("{kind} {n}"), optional),
                                );
                            }
                        }
                    }
                }
                for e in c["env"].as_array().cloned().unwrap_or_default() {
                    let Some(n) = e["name"].as_str() else {
                        continue;
                    };
                    let vf = &e["valueFrom"];
                    let optional = vf["configMapKeyRef"]["optional"] == true
                        || vf["secretKeyRef"]["optional"] == true;
                    declared.insert(n.to_string(), ("env".into(), optional));
                }
                // $(VAR) references in command, args and env values
                let mut refs: BTreeSet<String> = BTreeSet::new();
                let mut texts: Vec<String> = Vec::new();
                for k in ["command", "args"] {
                    for a in c[k].as_array().cloned().unwrap_or_default() {
                        if let Some(s) = a.as_str() {
                            texts.push(s.to_string());
                        }
                    }
                }
                for e in c["env"].as_array().cloned().unwrap_or_default() {
                    if let Some(s) = e["value"].as_str() {
                        texts.push(s.to_string());
                    }
                }
                let re = dependent_var_regex();
                for t in &texts {
                    for m in re.captures_iter(t) {
                        refs.insert(m[1].to_string());
                    }
                }
                for svc in &services {
                    let injected = service_env_names(&svc.value);
                    if injected.is_empty() {
                        continue;
                    }
                    let sname = svc.value["metadata"]["name"].as_str().unwrap_or("");
                    let upper = sname.to_ascii_uppercase().replace('-', "_");
                    for name in &injected {
                        if let Some((from, true)) = declared.get(name) {
                            collisions.push(format!(
                                "container {cname} declares {name} from {from} marked optional, and Service {sname} injects {name}: when the source lacks it the container reads the injected value"
                            ));
                        }
                        if refs.contains(name) && !declared.contains_key(name) {
                            collisions.push(format!(
                                "container {cname} references $({name}), which only Service {sname}'s injected {name} defines"
                            ));
                        }
                    }
                    let port = format!("{upper}_PORT");
                    if !declared.contains_key(&port) {
                        let fam: Vec<&String> = declared
                            .keys()
                            .filter(|k| {
                                k.strip_prefix(&format!("{upper}_"))
                                    .is_some_and(|s| FAMILY_SUFFIXES.contains(&s))
                            })
                            .collect();
                        if let Some(k) = fam.first() {
                            collisions.push(format!(
                                "container {cname} reads {k} ({}), so it reads the {upper}_* settings; Service {sname} in namespace {} makes the kubelet inject {port}=tcp://<ClusterIP>:<port> (and {upper}_SERVICE_HOST, ...), which the container does not set",
                                declared[*k].0,
                                o.namespace
                            ));
                        }
                    }
                }
            }
        }
        let mut keys: Vec<&str> = base.clone();
        keys.push("containers");
        if !collisions.is_empty() {
            let (file, line) = locate(repo, ov, o, &keys);
            collisions.dedup();
            out.push(finding(
                "FL061",
                ov,
                &file,
                line,
                format!("{}: {}", o.describe(), collisions.join("; ")),
                "set enableServiceLinks: false in the pod spec".into(),
                owner_ids(ov, o),
            ));
        } else if uses_env_from {
            let (file, line) = locate(repo, ov, o, &keys);
            out.push(finding(
                "FL060",
                ov,
                &file,
                line,
                format!(
                    "{} takes envFrom without enableServiceLinks: false: the kubelet also injects <SERVICE>_PORT=tcp://... for every Service of namespace {}",
                    o.describe(),
                    o.namespace
                ),
                "set enableServiceLinks: false in the pod spec".into(),
                owner_ids(ov, o),
            ));
        }
    }
}

/// (host, path, tag, digest) of an image reference; host is empty for a Docker Hub name.
pub fn split_image(image: &str) -> (String, String, Option<String>, Option<String>) {
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d.to_string())),
        None => (image, None),
    };
    let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (
            &rest[..last_slash + i],
            Some(rest[last_slash + i + 1..].to_string()),
        ),
        None => (rest, None),
    };
    let first = name.split('/').next().unwrap_or("");
    let has_host =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if has_host {
        let (h, p) = name.split_once('/').unwrap_or((name, ""));
        (h.to_string(), p.to_string(), tag, digest)
    } else {
        (String::new(), name.to_string(), tag, digest)
    }
}

fn image_rules(repo: &Repo, ov: &Overlay, out: &mut Vec<Finding>) {
    // the scanner's names: ImageRepository spec.image (host/path)
    let scanned: Vec<(String, String)> = ov
        .objects
        .iter()
        .filter(|o| {
            o.value["kind"] == "ImageRepository"
                && o.value["apiVersion"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("image.toolkit.fluxcd.io/")
        })
        .filter_map(|o| o.value["spec"]["image"].as_str())
        .map(|i| {
            let (h, p, _, _) = split_image(i);
            (h, p)
        })
        .collect();
    for o in &ov.objects {
        let Some((spec, _)) = pod_spec(&o.value) else {
            continue;
        };
        for group in ["initContainers", "containers", "ephemeralContainers"] {
            for c in spec[group].as_array().cloned().unwrap_or_default() {
                let Some(image) = c["image"].as_str() else {
                    continue;
                };
                let cname = c["name"].as_str().unwrap_or("?");
                let (host, path, tag, digest) = split_image(image);
                // where the image is written, only looked up for a finding
                let where_ = || {
                    let (file, line) =
                        locate_text(repo, ov, o, image.split(['@']).next().unwrap_or(image));
                    if line == 0 {
                        locate_text(repo, ov, o, &path)
                    } else {
                        (file, line)
                    }
                };
                if digest.is_none() && tag.as_deref().is_none_or(|t| t == "latest") {
                    let (file, line) = where_();
                    out.push(finding(
                        "FL070",
                        ov,
                        &file,
                        line,
                        format!(
                            "{} {} {cname}: image {image} is {}",
                            o.describe(),
                            &group[..group.len() - 1],
                            if tag.is_some() {
                                "tagged :latest"
                            } else {
                                "untagged (means :latest)"
                            }
                        ),
                        "pin a tag (and digest), e.g. with the kustomization's images: newTag"
                            .into(),
                        owner_ids(ov, o),
                    ));
                }
                if let Some((sh, _)) = scanned.iter().find(|(sh, sp)| *sp == path && *sh != host) {
                    let (file, line) = where_();
                    out.push(finding(
                        "FL071",
                        ov,
                        &file,
                        line,
                        format!(
                            "{} {} {cname}: image host {:?} differs from {sh:?}, the host the ImageRepository scans for {path}: automation rewrites tags, never hosts",
                            o.describe(),
                            &group[..group.len() - 1],
                            if host.is_empty() { "docker.io" } else { host.as_str() }
                        ),
                        format!("use {sh}/{path} for both the scanner and the workload"),
                        owner_ids(ov, o),
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_split() {
        assert_eq!(
            split_image("registry.example.local:5000/podinfo:6.7.0").0,
            "registry.example.local:5000"
        );
        assert_eq!(split_image("registry.example.local:5000/redis").2, None);
        assert_eq!(split_image("nginx").1, "nginx");
        assert_eq!(
            split_image("ghcr.io/a/b@sha256:00").3.as_deref(),
            Some("sha256:00")
        );
    }

    #[test]
    fn cidr_and_env() {
        let (a, b) = cidr_range("172.18.255.200/29").unwrap();
        assert_eq!(a.to_string(), "172.18.255.200");
        assert_eq!(b.to_string(), "172.18.255.207");
        assert!(env_specific("192.168.1.10"));
        assert!(env_specific("gitea.home.local"));
        assert!(!env_specific("fleet.example.com"));
        assert!(!env_specific("8.8.8.8"));
    }

    #[test]
    fn service_env() {
        let svc: Value = serde_json::json!({"kind":"Service","metadata":{"name":"redis-cache"},
            "spec":{"ports":[{"name":"redis","port":6379}]}});
        let n = service_env_names(&svc);
        assert!(n.contains(&"REDIS_CACHE_PORT".to_string()));
        assert!(n.contains(&"REDIS_CACHE_SERVICE_PORT_REDIS".to_string()));
        assert!(n.contains(&"REDIS_CACHE_PORT_6379_TCP_ADDR".to_string()));
        let headless: Value = serde_json::json!({"kind":"Service","metadata":{"name":"x"},"spec":{"clusterIP":"None"}});
        assert!(service_env_names(&headless).is_empty());
    }

    #[test]
    fn placeholder_glob() {
        let re = placeholder_regex("TBD-*").unwrap();
        assert_eq!(
            re.find("a: TBD-PROD-GATEWAY-VIP").unwrap().as_str(),
            "TBD-PROD-GATEWAY-VIP"
        );
    }
}
