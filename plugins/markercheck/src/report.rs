//! Output formats: table grouped by file (shared `cluster_loop::output`), GitHub workflow
//! annotations and SARIF 2.1.0 for code scanning.

use crate::check::{FileChange, Finding, RULES, Severity, Stats};
use crate::render::Rendered;
use cluster_loop::output::{Painter, Style, render_table};

/// `apiVersion` of the `-o json|yaml` document.
pub const SCHEMA: &str = "markercheck.cluster-loop.dev/v1";

/// `-o json|yaml` of a run (`kind: MarkerCheckReport`), camelCase keys like the other plugins'
/// reports:
/// `{apiVersion, kind, paths[], stats{filesScanned, filesSelected, filesWithToken, markers},
/// findings[{rule, name, severity, file, line, column, message, fix}],
/// changes[{file, changes[{line, setter, old, new}], exact, caveats[], diff}],
/// rendered[{dir, beforeError, afterError, images[{object, container, before, after}]}]}`.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineReport<'a> {
    /// [`SCHEMA`].
    pub api_version: &'static str,
    /// `MarkerCheckReport`.
    pub kind: &'static str,
    /// The paths scanned, as given.
    pub paths: Vec<String>,
    /// Counters (`filesScanned` is the number of files read).
    pub stats: &'a Stats,
    /// Findings sorted by file, line, column, rule.
    pub findings: &'a [Finding],
    /// Files the automation would rewrite (`--simulate` adds the diff to the table output; the
    /// machine output always carries them).
    pub changes: &'a [FileChange],
    /// `--render` results.
    pub rendered: &'a [Rendered],
}

impl<'a> MachineReport<'a> {
    /// The report document for one run.
    pub fn new(
        paths: &[std::path::PathBuf],
        stats: &'a Stats,
        findings: &'a [Finding],
        changes: &'a [FileChange],
        rendered: &'a [Rendered],
    ) -> Self {
        MachineReport {
            api_version: SCHEMA,
            kind: "MarkerCheckReport",
            paths: paths.iter().map(|p| p.display().to_string()).collect(),
            stats,
            findings,
            changes,
            rendered,
        }
    }
}

/// Table output: one block per file, rows `LINE:COL SEVERITY RULE MESSAGE`, the fix below.
pub fn table(findings: &[Finding], p: &Painter) -> String {
    let mut out = String::new();
    let mut files: Vec<&str> = findings.iter().map(|f| f.file.as_str()).collect();
    files.dedup();
    for file in files {
        let title = if file.is_empty() { "(run)" } else { file };
        out.push_str(&p.bold(title));
        out.push('\n');
        let mut t = p.table(&["pos", "severity", "rule", "message"]);
        for f in findings.iter().filter(|f| f.file == file) {
            let (style, sev) = match f.severity {
                Severity::Error => (Style::Err, "error"),
                Severity::Warning => (Style::Warn, "warning"),
                Severity::Info => (Style::Dim, "info"),
            };
            t.add_row(vec![
                p.cell(
                    Style::Plain,
                    if f.line > 0 {
                        format!("{}:{}", f.line, f.column)
                    } else {
                        "-".into()
                    },
                ),
                p.cell(style, sev),
                p.cell(Style::Plain, format!("{} {}", f.rule, f.name)),
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

fn gh_escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn gh_escape_prop(s: &str) -> String {
    gh_escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// One finding as the annotation printers ([`github_annotations`], [`sarif_log`]) see it: the
/// shape markercheck's and fleetlint's findings share.
#[derive(Debug, Clone, Copy)]
pub struct Annotation<'a> {
    /// Rule ID (`MC003`, `FL040`).
    pub rule: &'a str,
    /// Rule name.
    pub name: &'a str,
    /// Severity (`Info` is a GitHub `notice` and a SARIF `note`).
    pub severity: Severity,
    /// File the finding is in (empty: none). A name with a space and no line is a
    /// description (markercheck's cluster or policy sources), not a path, and is not given
    /// as a location.
    pub file: &'a str,
    /// 1-based line (0: the whole file).
    pub line: usize,
    /// 1-based column, when the producer knows it.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: &'a str,
    /// How to fix it.
    pub fix: &'a str,
}

impl Annotation<'_> {
    fn located(&self) -> bool {
        !self.file.is_empty() && (self.line > 0 || !self.file.contains(' '))
    }

    fn text(&self) -> String {
        format!("{}\nfix: {}", self.message, self.fix)
    }
}

/// A rule as a SARIF driver lists it.
#[derive(Debug, Clone, Copy)]
pub struct SarifRule<'a> {
    /// Rule ID.
    pub id: &'a str,
    /// Rule name.
    pub name: &'a str,
    /// One line (`shortDescription`).
    pub summary: &'a str,
    /// The rule's story (`fullDescription`), when there is one.
    pub explain: Option<&'a str>,
    /// Default severity.
    pub severity: Severity,
}

/// GitHub Actions workflow commands, one per finding
/// (`::error file=..,line=..,col=..,title=RULE name::message%0Afix: ..`), escaped as the
/// runner's `toolkit/core` `escapeData`/`escapeProperty` do; `Info` is a `notice`.
pub fn github_annotations<'a>(items: impl IntoIterator<Item = Annotation<'a>>) -> String {
    let mut out = String::new();
    for f in items {
        let level = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let mut props = Vec::new();
        if f.located() {
            props.push(format!("file={}", gh_escape_prop(f.file)));
        }
        if f.line > 0 {
            props.push(format!("line={}", f.line));
            if let Some(c) = f.column {
                props.push(format!("col={c}"));
            }
        }
        props.push(format!(
            "title={}",
            gh_escape_prop(&format!("{} {}", f.rule, f.name))
        ));
        out.push_str(&format!(
            "::{level} {}::{}\n",
            props.join(","),
            gh_escape_data(&f.text())
        ));
    }
    out
}

/// SARIF 2.1.0 log (OASIS sarif-v2.1.0) with one run of `tool`: the driver lists `rules`;
/// each result names its rule by ID and index, a location when it has a file (a region from
/// its line and column), and the message with the fix.
pub fn sarif_log(
    tool: &str,
    rules: &[SarifRule<'_>],
    items: &[Annotation<'_>],
) -> serde_json::Value {
    use serde_json::json;
    let level = |s: Severity| match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    };
    let driver_rules: Vec<_> = rules
        .iter()
        .map(|r| {
            let mut v = json!({
                "id": r.id,
                "name": r.name,
                "shortDescription": {"text": r.summary},
                "defaultConfiguration": {"level": level(r.severity)},
            });
            if let Some(e) = r.explain {
                v["fullDescription"] = json!({"text": e});
            }
            v
        })
        .collect();
    let results: Vec<_> = items
        .iter()
        .map(|f| {
            let mut r = json!({
                "ruleId": f.rule,
                "ruleIndex": rules.iter().position(|r| r.id == f.rule).unwrap_or(0),
                "level": level(f.severity),
                "message": {"text": f.text()},
            });
            if f.located() {
                let mut loc = json!({"artifactLocation": {"uri": f.file.replace('\\', "/")}});
                if f.line > 0 {
                    loc["region"] = json!({"startLine": f.line});
                    if let Some(c) = f.column {
                        loc["region"]["startColumn"] = json!(c.max(1));
                    }
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
                "name": tool,
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/cluster-loop/cluster-loop",
                "rules": driver_rules,
            }},
            "results": results,
        }]
    })
}

/// markercheck's findings as [`Annotation`]s.
fn annotations(findings: &[Finding]) -> Vec<Annotation<'_>> {
    findings
        .iter()
        .map(|f| Annotation {
            rule: f.rule,
            name: f.name,
            severity: f.severity,
            file: &f.file,
            line: f.line,
            column: Some(f.column),
            message: &f.message,
            fix: &f.fix,
        })
        .collect()
}

/// markercheck's rules ([`RULES`]) as SARIF driver rules.
pub fn sarif_rules() -> Vec<SarifRule<'static>> {
    RULES
        .iter()
        .map(|(id, name, severity, summary)| SarifRule {
            id,
            name,
            summary,
            explain: None,
            severity: *severity,
        })
        .collect()
}

/// GitHub Actions workflow commands (`::error file=..,line=..,col=..,title=..::message`).
pub fn github(findings: &[Finding]) -> String {
    github_annotations(annotations(findings))
}

/// SARIF 2.1.0 log with one run; every rule in [`RULES`] is listed in the driver.
pub fn sarif(findings: &[Finding]) -> serde_json::Value {
    sarif_log(
        "kubectl-markercheck",
        &sarif_rules(),
        &annotations(findings),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f() -> Finding {
        Finding {
            rule: "MC003",
            name: "tag-on-full-ref",
            severity: Severity::Error,
            file: "apps/a.yaml".into(),
            line: 3,
            column: 5,
            message: "50% bad, really".into(),
            fix: "a:b".into(),
        }
    }

    #[test]
    fn github_escapes() {
        let s = github(&[f()]);
        assert_eq!(
            s,
            "::error file=apps/a.yaml,line=3,col=5,title=MC003 tag-on-full-ref::50%25 bad, really%0Afix: a:b\n"
        );
    }

    #[test]
    fn sarif_shape() {
        let v = sarif(&[f()]);
        assert_eq!(v["version"], "2.1.0");
        let r = &v["runs"][0]["results"][0];
        assert_eq!(r["ruleId"], "MC003");
        assert_eq!(
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
            3
        );
        let idx = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(v["runs"][0]["tool"]["driver"]["rules"][idx]["id"], "MC003");
    }
}
