//! The report: one entry per object checked, its findings, and the rendering (`-o table`:
//! one table per object on stdout; `-o json|yaml`: [`Report`]).

use crate::rules::{Finding, Level};
use cluster_loop::output::Painter;
use serde::Serialize;

/// `apiVersion` of the machine output.
pub const API_VERSION: &str = "gatewaycheck.cluster-loop.dev/v1alpha1";
/// `kind` of the machine output.
pub const KIND: &str = "GatewayCheckReport";

/// The whole run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// [`KIND`].
    pub kind: &'static str,
    /// The objects checked, Gateways first.
    pub objects: Vec<ObjectReport>,
    /// Exit code of the run: 0 no finding, 1 a finding.
    pub exit_code: i32,
}

/// One object's verdict.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReport {
    /// `Gateway` or `HTTPRoute`.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `findings` (at least one finding), `consistent, not probed` (status agrees with what
    /// was read; only --probe shows it serves) or `serving` (consistent and every probe
    /// answered).
    pub verdict: String,
    /// The findings, findings first.
    pub findings: Vec<Finding>,
    /// `--probe`: the requests, their results and the hostnames' pod answers (Gateways only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<crate::probe::GatewayProbe>,
}

impl ObjectReport {
    /// Builds the entry and its verdict (`probed`: a probe ran and none of its findings failed).
    pub fn new(
        kind: &str,
        namespace: &str,
        name: &str,
        mut findings: Vec<Finding>,
        probed: bool,
    ) -> Self {
        findings.sort_by_key(|f| std::cmp::Reverse(f.level));
        let bad = findings.iter().any(|f| f.level == Level::Finding);
        ObjectReport {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            verdict: if bad {
                "findings".into()
            } else if probed {
                "serving".into()
            } else {
                "consistent, not probed".into()
            },
            findings,
            probe: None,
        }
    }
}

/// The machine document of a run that ended without a report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorReport {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// `GatewayCheckError`.
    pub kind: &'static str,
    /// Exit code.
    pub exit_code: i32,
    /// Message.
    pub error: String,
}

/// See [`ErrorReport`].
pub fn error_report(message: &str, exit_code: i32) -> ErrorReport {
    ErrorReport {
        api_version: API_VERSION,
        kind: "GatewayCheckError",
        exit_code,
        error: message.to_string(),
    }
}

/// The table rendering: per object a heading `KIND NS/NAME: VERDICT` and a table LEVEL, RULE,
/// FIELD, WHAT (the message, then `fix:` and `source:` lines).
pub fn render(report: &Report, p: &Painter) -> String {
    let mut out = String::new();
    if report.objects.is_empty() {
        return "no Gateway or HTTPRoute matched\n".into();
    }
    for o in &report.objects {
        let verdict = match o.verdict.as_str() {
            "findings" => p.err(&o.verdict),
            "serving" => p.ok(&o.verdict),
            _ => p.warn(&o.verdict),
        };
        out.push_str(&format!(
            "{} {}/{}: {verdict}\n",
            o.kind, o.namespace, o.name
        ));
        let mut t = p.table(&["LEVEL", "RULE", "OBJECT / FIELD", "WHAT"]);
        for f in &o.findings {
            let level = match f.level {
                Level::Finding => p.err("FINDING"),
                Level::Info => p.dim("info"),
                Level::Ok => p.ok("ok"),
            };
            let mut what = f.message.clone();
            if let Some(x) = &f.fix {
                what.push_str(&format!("\nfix: {x}"));
            }
            if let Some(x) = &f.source {
                what.push_str(&format!("\nsource: {x}"));
            }
            t.add_row(vec![
                level,
                f.rule.to_string(),
                format!("{}\n{}", f.object, f.field),
                what,
            ]);
        }
        out.push_str(&cluster_loop::output::render_table(&t));
        out.push('\n');
    }
    out
}
