//! Output: the `-o json|yaml` document, the table, GitHub annotations and SARIF 2.1.0.

use crate::lint::Finding;
use crate::rules::{RULES, Severity};
use crate::{OverlayReport, Report, Stats};
use cluster_loop::output::{Painter, Style, render_table};

/// `apiVersion` of the `-o json|yaml` document.
pub const SCHEMA: &str = "fleetlint.cluster-loop.dev/v1";

/// `-o json|yaml` of a run (`kind: FleetLintReport`):
/// `{apiVersion, kind, root, changedFiles?, stats{files, kustomizeDirs, rendersRun,
/// kustomizations}, overlays[{dir, root, objects, kustomizations[{id, file, line, path,
/// sourceRef, dependsOn[], wait, timeout, timeoutChain, targetNamespace, postBuild,
/// variables[], followed, appliedBy, affected}]}], findings[{file, line, rule, name, severity,
/// overlay, message, fix}]}`.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineReport<'a> {
    /// [`SCHEMA`].
    pub api_version: &'static str,
    /// `FleetLintReport`.
    pub kind: &'static str,
    /// Repository root.
    pub root: String,
    /// `--changed-since`: changed files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_files: Option<&'a [String]>,
    /// Counters.
    pub stats: &'a Stats,
    /// Overlays and their Kustomization graphs.
    pub overlays: &'a [OverlayReport],
    /// Findings.
    pub findings: &'a [Finding],
    /// Notes (e.g. the repository root taken outside a Git checkout).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub notes: &'a [String],
}

impl<'a> MachineReport<'a> {
    /// The document for a report.
    pub fn new(r: &'a Report) -> Self {
        MachineReport {
            api_version: SCHEMA,
            kind: "FleetLintReport",
            root: r.root.display().to_string(),
            changed_files: r.changed_files.as_deref(),
            stats: &r.stats,
            overlays: &r.overlays,
            findings: &r.findings,
            notes: &r.notes,
        }
    }
}

fn sev(s: Severity) -> (Style, &'static str) {
    match s {
        Severity::Error => (Style::Err, "error"),
        Severity::Warning => (Style::Warn, "warning"),
        Severity::Info => (Style::Dim, "info"),
    }
}

/// Findings grouped by file: rows `LINE SEVERITY RULE OVERLAY MESSAGE`, the fix below the
/// message.
pub fn table(findings: &[Finding], p: &Painter) -> String {
    let mut out = String::new();
    let mut files: Vec<&str> = findings.iter().map(|f| f.file.as_str()).collect();
    files.dedup();
    for file in files {
        out.push_str(&p.bold(if file.is_empty() { "(tree)" } else { file }));
        out.push('\n');
        let mut t = p.table(&["line", "severity", "rule", "overlay", "message"]);
        for f in findings.iter().filter(|f| f.file == file) {
            let (style, s) = sev(f.severity);
            t.add_row(vec![
                p.cell(
                    Style::Plain,
                    if f.line > 0 {
                        f.line.to_string()
                    } else {
                        "-".into()
                    },
                ),
                p.cell(style, s),
                p.cell(Style::Plain, format!("{} {}", f.rule, f.name)),
                p.cell(Style::Plain, f.overlay.as_deref().unwrap_or("-")),
                p.cell(Style::Plain, format!("{}\nfix: {}", f.message, f.fix)),
            ]);
        }
        for line in render_table(&t).lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The dependsOn graph per overlay with the timeout chain (`--graph`).
pub fn graph(overlays: &[OverlayReport], p: &Painter) -> String {
    let mut out = String::new();
    for o in overlays {
        out.push_str(&p.bold(&format!("overlay {}", o.dir)));
        out.push('\n');
        let mut t = p.table(&[
            "kustomization",
            "path",
            "dependsOn",
            "wait",
            "timeout",
            "worst case",
        ]);
        for k in &o.kustomizations {
            t.add_row(vec![
                p.cell(Style::Plain, &k.id),
                p.cell(
                    if k.followed { Style::Plain } else { Style::Dim },
                    format!(
                        "{}{}",
                        k.path.as_deref().unwrap_or("./"),
                        if k.followed { "" } else { " (other source)" }
                    ),
                ),
                p.cell(
                    Style::Plain,
                    if k.depends_on.is_empty() {
                        "-".into()
                    } else {
                        k.depends_on.join(", ")
                    },
                ),
                p.cell(Style::Plain, if k.wait { "true" } else { "false" }),
                p.cell(Style::Plain, &k.timeout),
                p.cell(Style::Plain, &k.timeout_chain),
            ]);
        }
        for line in render_table(&t).lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn gh_escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn gh_escape_prop(s: &str) -> String {
    gh_escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// GitHub Actions workflow commands (`::error file=..,line=..,title=..::message`).
pub fn github(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        let level = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let mut props = Vec::new();
        if !f.file.is_empty() {
            props.push(format!("file={}", gh_escape_prop(&f.file)));
        }
        if f.line > 0 {
            props.push(format!("line={}", f.line));
        }
        props.push(format!(
            "title={}",
            gh_escape_prop(&format!("{} {}", f.rule, f.name))
        ));
        out.push_str(&format!(
            "::{level} {}::{}\n",
            props.join(","),
            gh_escape_data(&format!("{}\nfix: {}", f.message, f.fix))
        ));
    }
    out
}

/// SARIF 2.1.0 log with one run; the driver lists every fleetlint rule and every markercheck
/// rule.
pub fn sarif(findings: &[Finding]) -> serde_json::Value {
    use serde_json::json;
    let level = |s: Severity| match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    };
    let mut rules: Vec<serde_json::Value> = RULES
        .iter()
        .map(|r| {
            json!({"id": r.id, "name": r.name, "shortDescription": {"text": r.summary},
                   "fullDescription": {"text": r.explain},
                   "defaultConfiguration": {"level": level(r.severity)}})
        })
        .collect();
    for (id, name, s, desc) in markercheck::check::RULES {
        rules.push(
            json!({"id": id, "name": name, "shortDescription": {"text": desc},
                          "defaultConfiguration": {"level": level(*s)}}),
        );
    }
    let index = |id: &str| rules.iter().position(|r| r["id"] == id).unwrap_or(0);
    let results: Vec<_> = findings
        .iter()
        .map(|f| {
            let mut r = json!({
                "ruleId": f.rule,
                "ruleIndex": index(&f.rule),
                "level": level(f.severity),
                "message": {"text": format!("{}\nfix: {}", f.message, f.fix)},
            });
            if !f.file.is_empty() {
                let mut loc = json!({"artifactLocation": {"uri": f.file}});
                if f.line > 0 {
                    loc["region"] = json!({"startLine": f.line});
                }
                r["locations"] = json!([{"physicalLocation": loc}]);
            }
            r
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "kubectl-fleetlint",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/cluster-loop/cluster-loop",
                "rules": rules,
            }},
            "results": results,
        }]
    })
}
