//! Rules on each scanned file: what could not be read (MC026, MC061, MC062), problem files
//! (MC023), every marker's rules ([`super::site_rules`]), and the rewrite the automation would
//! commit (MC070, MC071).

use super::site_rules::{SiteCtx, check_site};
use super::{
    Applicable, Change, Config, FileChange, PolicyIndex, Report, Scanned, Setters, Sink,
    automation_policies, display, setters_for, unified_diff, values_replaced_equals,
};
use crate::objects::{
    FluxKustomization, ImagePolicy, ImageUpdateAutomation, Objects, TreeFacts, path_covers,
};
use crate::scan::{FileScan, Site};
use crate::simulate::{self, Replacement};
use std::path::Path;

/// What every file's rules read: the run's objects, and the policies (with their setter
/// table) of each distinct set of covering automations, built once per set: linear in files
/// + policies, not files x policies.
struct Files<'a> {
    cfg: &'a Config,
    objects: &'a Objects,
    facts: &'a TreeFacts,
    index: PolicyIndex,
    applicable: std::collections::HashMap<Vec<usize>, std::rc::Rc<Applicable>>,
}

/// Applies the per-file rules to every file of `scans`, adding the rewrites to `report`.
pub(super) fn check_files(
    cfg: &Config,
    scans: &[Scanned],
    objects: &Objects,
    facts: &TreeFacts,
    report: &mut Report,
    out: &mut Sink,
) {
    let mut files = Files {
        cfg,
        objects,
        facts,
        index: PolicyIndex::new(&objects.policies),
        applicable: std::collections::HashMap::new(),
    };
    for s in scans {
        report.stats.files_selected += s.res.selected_files;
        report.stats.files_scanned += s.res.files_read;
        unread(s, report, out);
        for f in &s.res.files {
            files.check(s, f, report, out);
        }
    }
}

/// MC061, MC062 and MC026: files the scan could not read, too large, or not YAML; special
/// files go to `report.skipped_special`.
fn unread(s: &Scanned, report: &mut Report, out: &mut Sink) {
    for e in &s.res.read_errors {
        let id = if e.symlink { "MC062" } else { "MC061" };
        if e.symlink {
            continue; // Flux ignores unreadable symlinks (filereader.go)
        }
        out.push(
            id,
            display(&s.base.join(&e.rel)),
            0,
            0,
            format!(
                "cannot read: {} (Flux's ScreeningLocalReader fails the whole run on a read error)",
                e.message
            ),
            "fix the permissions or remove the file".into(),
        );
    }
    for (rel, kind) in &s.res.special {
        report
            .skipped_special
            .push((display(&s.base.join(rel)), kind));
    }
    for (rel, why) in &s.res.not_yaml {
        out.push(
            "MC026",
            display(&s.base.join(rel)),
            0,
            0,
            format!("not YAML: the file is {why}; nothing in it to check"),
            "remove the file or give it YAML content".into(),
        );
    }
    for (rel, size) in &s.res.too_large {
        out.push(
            "MC062",
            display(&s.base.join(rel)),
            0,
            0,
            format!("{size} bytes, above the scan limit: not checked"),
            "raise --max-file-size".into(),
        );
    }
}

/// The value changes the markers of one file make, and the unchanged values kyaml re-quotes
/// when the file is rewritten anyway.
#[derive(Default)]
struct Planned {
    reps: Vec<Replacement>,
    changes: Vec<Change>,
    requote: Vec<Replacement>,
    /// `--normalize`: a marker Flux would act on, outside a kind: List item.
    normalizable: bool,
}

impl Files<'_> {
    /// The rules on one file `f` of scan `s`.
    fn check(&mut self, s: &Scanned, f: &FileScan, report: &mut Report, out: &mut Sink) {
        if f.has_token && f.selected {
            report.stats.files_with_token += 1;
        }
        let file = display(&f.abs);
        // the path as upstream walks it (symlinks not resolved), relative to the repo root:
        // one join per file instead of a canonicalize (a readlink per path component)
        let rel_repo = s
            .base
            .join(&f.rel)
            .strip_prefix(&s.repo_root)
            .map(Path::to_path_buf)
            .unwrap_or(f.rel.clone());
        let objects = self.objects;
        let covering_ix: Vec<usize> = objects
            .automations
            .iter()
            .enumerate()
            .filter(|(_, a)| path_covers(&a.update_path, &rel_repo))
            .map(|(i, _)| i)
            .collect();
        let covering: Vec<&ImageUpdateAutomation> = covering_ix
            .iter()
            .map(|&i| &objects.automations[i])
            .collect();
        let app = self.applicable(covering_ix, &covering);
        let appliers = appliers(self.facts, s, f, &rel_repo);
        let mut outside_reported = false;
        let mut planned = Planned::default();
        problem_file(f, &file, out);
        for site in &f.sites {
            let c = SiteCtx {
                site,
                f,
                file: &file,
                objects,
                facts: self.facts,
                index: &self.index,
                covering: &covering,
                app: &app,
                appliers: &appliers,
            };
            check_site(&c, &mut outside_reported, out);
            if site.effective() && f.has_token && f.selected && f.problem.is_none() {
                report.stats.markers += 1;
                planned.add(site, &app.setters);
            }
        }
        simulate_file(self.cfg, f, &file, planned, report, out);
    }

    /// The policies (and setter table) of the automations `covering_ix` (indexes into the
    /// run's automations), built once per distinct set.
    fn applicable(
        &mut self,
        covering_ix: Vec<usize>,
        covering: &[&ImageUpdateAutomation],
    ) -> std::rc::Rc<Applicable> {
        let objects = self.objects;
        let all_policies = &objects.policies;
        self.applicable
            .entry(covering_ix)
            .or_insert_with(|| {
                let list: Vec<ImagePolicy> = if objects.automations.is_empty() {
                    all_policies.clone()
                } else {
                    let mut seen = std::collections::HashSet::new();
                    let mut v: Vec<ImagePolicy> = Vec::new();
                    for a in covering {
                        for p in automation_policies(a, all_policies) {
                            if seen.insert((p.namespace.clone(), p.name.clone())) {
                                v.push(p.clone());
                            }
                        }
                    }
                    v
                };
                let setters = setters_for(&list);
                let keys = list
                    .iter()
                    .map(|p| (p.namespace.clone(), p.name.clone()))
                    .collect();
                std::rc::Rc::new(Applicable { keys, setters })
            })
            .clone()
    }
}

/// Flux Kustomizations of the tree whose build includes file `f` (only for files with a Job:
/// MC040).
fn appliers<'a>(
    facts: &'a TreeFacts,
    s: &Scanned,
    f: &FileScan,
    rel_repo: &Path,
) -> Vec<&'a FluxKustomization> {
    if f.sites.iter().any(|x| x.object.kind == "Job") {
        facts
            .kustomizations
            .iter()
            .filter(|k| {
                let Some(dir) =
                    crate::kustomize::normalize(Path::new(k.path.trim_start_matches("./")))
                else {
                    return false;
                };
                match s.repo_root.join(&dir).strip_prefix(&s.base) {
                    Ok(d) => s.tree.builds(d, &f.rel),
                    Err(_) => rel_repo.starts_with(&dir),
                }
            })
            .collect()
    } else {
        Vec::new()
    }
}

/// MC023: a file holding "$imagepolicy" that Flux skips as a problem file, with no marker
/// site of its own (the sites report it themselves).
fn problem_file(f: &FileScan, file: &str, out: &mut Sink) {
    let file = file.to_string();
    if let Some(p) = &f.problem
        && f.has_token
        && f.selected
        && f.sites.is_empty()
    {
        out.push(
            "MC023",
            file.clone(),
            p.line(),
            1,
            format!(
                "the file contains \"$imagepolicy\" but Flux skips it as a \"problem file\" ({p})"
            ),
            "make the file valid UTF-8 YAML with a mapping at the top of each document".into(),
        );
    }
}

impl Planned {
    /// Plans the change of one marker Flux acts on, from the setter table.
    fn add(&mut self, site: &Site, setters: &Setters) {
        self.normalizable |= site.target.is_some() && !site.in_list_item;
        let name = site.setter.as_deref().unwrap_or("");
        if let (Some((v, _)), Some(t)) = (setters.table.get(name), &site.target) {
            if site.in_list_item {
                return;
            }
            if *v != t.value {
                self.reps.push(Replacement {
                    start: t.start,
                    end: t.end,
                    value: v.clone(),
                    style: t.style,
                });
                self.changes.push(Change {
                    line: t.line,
                    setter: name.to_string(),
                    old: t.value.clone(),
                    new: v.clone(),
                });
            } else if t.style == crate::yamltree::Style::Plain
                && simulate::is_yaml11_non_string(v)
                && simulate::go_yaml_v3_tag(v) != "null"
            {
                // the same value: no change of its own, but when the file is
                // rewritten for another marker the setter has set this one too
                // (filter.go `set` runs for every marked field) and
                // `FormatNonStringStyle` double-quotes a YAML 1.1 non-string
                // (`yes`, `1.10`); go-yaml drops the kept tag, which the value
                // still resolves to (markercheck's differential test: `tag: yes`)
                self.requote.push(Replacement {
                    start: t.start,
                    end: t.end,
                    value: v.clone(),
                    style: t.style,
                });
            }
        }
    }
}

/// Simulates the rewrite of file `f` with the planned changes: MC070 (the whole file is
/// rewritten), MC071 (the simulation is not exact), and the change in `report.changes`.
fn simulate_file(
    cfg: &Config,
    f: &FileScan,
    file: &str,
    planned: Planned,
    report: &mut Report,
    out: &mut Sink,
) {
    let file = file.to_string();
    let Planned {
        mut reps,
        mut changes,
        mut requote,
        normalizable,
    } = planned;
    if !reps.is_empty() {
        reps.append(&mut requote);
    }
    if cfg.normalize {
        // the layout kyaml writes, every value as it is: no replacements at all
        reps.clear();
        changes.clear();
    }
    if reps.is_empty() && !(cfg.normalize && normalizable) {
        return;
    }
    let rw = simulate::rewrite(f, &reps);
    if reps.is_empty() && rw.text == f.text && !f.crlf {
        // already laid out as kyaml writes it
        return;
    }
    let old = f.original().into_owned();
    // what else changes besides the values: the text with only the values
    // replaced, compared piecewise (a large file is not copied once more)
    let only_values = match values_replaced_equals(&f.text, &reps, &rw.text) {
        Some(eq) => eq,
        None => {
            let mut t = f.text.clone();
            let mut rs = reps.clone();
            rs.sort_by_key(|r| std::cmp::Reverse(r.start));
            for r in &rs {
                t.replace_range(r.start..r.end, &simulate::render_scalar(&r.value, r.style));
            }
            t == rw.text
        }
    };
    if !only_values || f.crlf {
        let mut what = Vec::new();
        if f.crlf {
            what.push("CRLF line endings become LF".to_string());
        }
        let blank_before = f.text.lines().filter(|l| l.trim().is_empty()).count();
        let blank_after = rw.text.lines().filter(|l| l.trim().is_empty()).count();
        if blank_after < blank_before {
            what.push(format!(
                "{} blank line(s) removed",
                blank_before - blank_after
            ));
        }
        if reps.iter().any(|r| {
            matches!(
                r.style,
                crate::yamltree::Style::Literal | crate::yamltree::Style::Folded
            )
        }) {
            what.push("a marked block scalar is written anew (header `|-`/`>-`: the value loses its final newline, so this rewrite happens even when the image is unchanged)".into());
        }
        if what.is_empty() {
            what.push("layout normalized (document separators, spacing)".into());
        }
        out.push("MC070", file.clone(), 1, 1,
                    format!("the automation rewrites the whole file with kyaml: {}", what.join(", ")),
                    "to keep this out of the image commits, normalize the file in a commit of its own: `kubectl markercheck FILE --normalize --write` rewrites it as kyaml does with every value unchanged (--write alone also writes the new image values)".into());
    }
    if !rw.exact {
        out.push(
            "MC071",
            file.clone(),
            1,
            1,
            format!(
                "simulated rewrite may differ from Flux's: {}",
                rw.caveats.join("; ")
            ),
            "treat the diff for these lines as approximate".into(),
        );
    }
    let mut fc = FileChange {
        file: file.clone(),
        abs: f.abs.clone(),
        old,
        new: rw.text,
        changes,
        exact: rw.exact,
        caveats: rw.caveats,
        diff: String::new(),
    };
    fc.diff = unified_diff(&fc);
    report.changes.push(fc);
}
