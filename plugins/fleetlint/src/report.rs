//! Output: the `-o json|yaml` document, the table, GitHub annotations and SARIF 2.1.0.

use crate::lint::Finding;
use crate::rules::{RULES, Severity};
use crate::{OverlayReport, Report, Stats};
use cluster_loop::output::{Painter, Style, render_table};

/// `apiVersion` of the `-o json|yaml` document.
pub const SCHEMA: &str = "fleetlint.cluster-loop.dev/v1";

/// `-o json|yaml` of a run (`kind: FleetLintReport`):
/// `{apiVersion, kind, root, changedFiles?, stats{files, kustomizeDirs, rendersRun,
/// kustomizations, affected, candidates}, overlays[{dir, root, objects, rendered, kustomizations[{id, file, line, path,
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
    /// Findings suppressed by `.fleetlint.yaml` or `# fleetlint:ignore`, each with `by`.
    pub suppressed: &'a [crate::config::Suppressed],
    /// Sources read and not applied per overlay: `overlay`, `id`, `maker`, `definedIn`.
    pub external_sources: Vec<ExternalOut<'a>>,
}

/// One external source of [`MachineReport::external_sources`].
#[derive(Debug, serde::Serialize)]
pub struct ExternalOut<'a> {
    /// The overlay directory.
    pub overlay: &'a str,
    /// The source.
    #[serde(flatten)]
    pub source: &'a crate::fleet::ExternalSource,
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
            suppressed: &r.suppressed,
            external_sources: r
                .external_sources
                .iter()
                .map(|(o, s)| ExternalOut {
                    overlay: o,
                    source: s,
                })
                .collect(),
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

fn annotations(findings: &[Finding]) -> Vec<markercheck::report::Annotation<'_>> {
    findings
        .iter()
        .map(|f| markercheck::report::Annotation {
            rule: &f.rule,
            name: &f.name,
            severity: f.severity,
            file: &f.file,
            line: f.line,
            column: None,
            message: &f.message,
            fix: &f.fix,
        })
        .collect()
}

/// GitHub Actions workflow commands (`::error file=..,line=..,title=..::message`), printed by
/// markercheck's [`markercheck::report::github_annotations`].
pub fn github(findings: &[Finding]) -> String {
    markercheck::report::github_annotations(annotations(findings))
}

/// SARIF 2.1.0 log with one run ([`markercheck::report::sarif_log`]); the driver lists every
/// fleetlint rule (with its `--explain` story) and every markercheck rule.
pub fn sarif(findings: &[Finding]) -> serde_json::Value {
    let mut rules: Vec<markercheck::report::SarifRule<'_>> = RULES
        .iter()
        .map(|r| markercheck::report::SarifRule {
            id: r.id,
            name: r.name,
            summary: r.summary,
            explain: Some(r.explain),
            severity: r.severity,
        })
        .collect();
    rules.extend(markercheck::report::sarif_rules());
    markercheck::report::sarif_log("kubectl-fleetlint", &rules, &annotations(findings))
}
