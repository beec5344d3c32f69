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

/// GitHub Actions workflow commands (`::error file=..,line=..,col=..,title=..::message`).
pub fn github(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        let level = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let mut props = Vec::new();
        if !f.file.is_empty() && !f.file.contains(' ') || f.line > 0 {
            props.push(format!("file={}", gh_escape_prop(&f.file)));
        }
        if f.line > 0 {
            props.push(format!("line={}", f.line));
            props.push(format!("col={}", f.column));
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

/// SARIF 2.1.0 log with one run; every rule in [`RULES`] is listed in the driver.
pub fn sarif(findings: &[Finding]) -> serde_json::Value {
    use serde_json::json;
    let level = |s: Severity| match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    };
    let rules: Vec<_> = RULES
        .iter()
        .map(|(id, name, sev, desc)| {
            json!({
                "id": id,
                "name": name,
                "shortDescription": {"text": desc},
                "defaultConfiguration": {"level": level(*sev)},
            })
        })
        .collect();
    let results: Vec<_> = findings
        .iter()
        .map(|f| {
            let mut r = json!({
                "ruleId": f.rule,
                "ruleIndex": RULES.iter().position(|r| r.0 == f.rule).unwrap_or(0),
                "level": level(f.severity),
                "message": {"text": format!("{}\nfix: {}", f.message, f.fix)},
            });
            if !f.file.is_empty() && f.line > 0 {
                r["locations"] = json!([{
                    "physicalLocation": {
                        "artifactLocation": {"uri": f.file.replace('\\', "/")},
                        "region": {"startLine": f.line, "startColumn": f.column.max(1)},
                    }
                }]);
            }
            r
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "kubectl-markercheck",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/cluster-loop/cluster-loop",
                "rules": rules,
            }},
            "results": results,
        }]
    })
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
