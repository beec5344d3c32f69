//! Human rendering of diagnoses, plans and the fleet table, and the stable JSON shapes.

use cluster_loop::output::{Painter, Style, render_table};
use serde::Serialize;

use std::collections::HashMap;

use serde_json::Value;

use crate::controller::ControllerFacts;
use crate::diagnose::{Class, Diagnosis, Engine, key_of, short_time};
use crate::lever::{Lever, Options, Plan, Step};
use crate::obj;
use crate::snapshot::Snapshot;

/// `apiVersion` of our JSON documents.
pub const SCHEMA: &str = "unstick.cluster-loop.dev/v1";

/// Every value of `proof` in an [`UnstickReport`](Report): `recovered`, `failed-again`,
/// `timed-out`, `interrupted` (from the proof wait), `not-waited` (`--no-wait`: writes done,
/// check later), `not-handled` (`--check --token`: the controller has not handled the token
/// yet), `controller-not-running` (`--check` with kustomize-controller, or source-controller
/// for a Kustomization reading its sources, not running: the conditions read are stale, so
/// nothing is proven) and `not-attempted` (nothing was written: `--dry-run`, no lever needed,
/// or declined).
pub const PROOF_VALUES: [&str; 8] = [
    "recovered",
    "failed-again",
    "timed-out",
    "interrupted",
    "not-waited",
    "not-handled",
    "controller-not-running",
    "not-attempted",
];

/// The keys of every `UnstickReport`, whatever happened: absent facts are `null` (objects)
/// or `[]` (lists), never a missing key.
pub const REPORT_KEYS: [&str; 14] = [
    "apiVersion",
    "kind",
    "diagnosis",
    "controller",
    "holdingWorkers",
    "plan",
    "action",
    "done",
    "proof",
    "after",
    "lastSeen",
    "token",
    "cascade",
    "notes",
];

/// `-o json` of a single-Kustomization run (`kind: UnstickReport`). Stable shape: every
/// key of [`REPORT_KEYS`] is always present.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report<'a> {
    /// [`SCHEMA`].
    pub api_version: &'static str,
    /// `UnstickReport`.
    pub kind: &'static str,
    /// The diagnosis before acting.
    pub diagnosis: &'a Diagnosis,
    /// Controller facts, when read (else `null`).
    pub controller: Option<&'a ControllerFacts>,
    /// Kustomizations holding a worker.
    pub holding_workers: &'a [String],
    /// The plan (`null` for `--check`).
    pub plan: Option<&'a Plan>,
    /// `check`, `dry-run`, `not-needed`, `declined`, `executed`, `waited` (the `wait` lever:
    /// no write, the proof wait watched the run the controller had queued).
    pub action: String,
    /// Writes done (`[]` when none).
    pub done: Vec<String>,
    /// One of [`PROOF_VALUES`].
    pub proof: String,
    /// Diagnosis after a wait that did not end in recovery, else `null`.
    pub after: Option<Diagnosis>,
    /// What the proof wait saw last when it did not end in recovery: the terminal state
    /// that ended it, or what it was still waiting on at the deadline; else `null`.
    pub last_seen: Option<String>,
    /// `--check --token`: what became of the token; else `null`.
    pub token: Option<crate::diagnose::TokenState>,
    /// `--cascade`: one entry per dependent, in wave order; `[]` when nothing cascaded
    /// (no `--cascade`, or the target did not recover).
    pub cascade: Vec<CascadeItem>,
    /// Reads that were skipped (permissions, missing kinds); `[]` when none.
    pub notes: Vec<String>,
}

impl<'a> Report<'a> {
    /// A report of `diagnosis` where nothing was attempted yet: `proof: "not-attempted"`,
    /// no writes, no cascade; the caller sets `action` and what happened.
    pub fn new(
        diagnosis: &'a Diagnosis,
        controller: Option<&'a ControllerFacts>,
        holding_workers: &'a [String],
        plan: Option<&'a Plan>,
        notes: Vec<String>,
    ) -> Self {
        Report {
            api_version: SCHEMA,
            kind: "UnstickReport",
            diagnosis,
            controller,
            holding_workers,
            plan,
            action: String::new(),
            done: vec![],
            proof: "not-attempted".into(),
            after: None,
            last_seen: None,
            token: None,
            cascade: vec![],
            notes,
        }
    }
}

/// One dependent handled by `--cascade` (JSON: `{"wave": 1, "kustomization": "ns/name",
/// "proof": "recovered", "lastSeen": "..."}`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CascadeItem {
    /// Wave number, 1-based: the longest dependsOn distance from the target.
    pub wave: usize,
    /// `namespace/name`.
    pub kustomization: String,
    /// `recovered`, `failed-again`, `timed-out`, `interrupted`, or `not-unstuck` (no lever
    /// frees it; see `lastSeen`).
    pub proof: String,
    /// What the wait saw last, or why it was not unstuck; absent on recovery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<String>,
}

/// One row of the fleet view.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetItem {
    /// `namespace/name`.
    pub kustomization: String,
    /// Class.
    pub class: Class,
    /// Short root cause ([`root_cause_cell`]); `null` when there is none (the table shows
    /// `-`).
    pub root_cause: Option<String>,
    /// Recommended lever.
    pub lever: Lever,
    /// What the lever does.
    pub lever_effect: String,
    /// The summary line.
    pub summary: String,
    /// Full diagnosis.
    pub diagnosis: Diagnosis,
}

/// `-o json` of `--all` (`kind: FleetReport`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetReport {
    /// [`SCHEMA`].
    pub api_version: &'static str,
    /// `FleetReport`.
    pub kind: &'static str,
    /// Kustomizations read.
    pub total: usize,
    /// How many of them are not healthy (every class but `healthy`).
    pub not_healthy: usize,
    /// How many of them are findings ([`crate::diagnose::is_finding`]): not healthy, and
    /// neither reconciling nor waiting at dependsOn on a dependency that is progressing.
    /// Exit 1 when this is not 0.
    pub findings: usize,
    /// One item per Kustomization, sorted by namespace/name (with `--problems`, only those
    /// that are not healthy).
    pub items: Vec<FleetItem>,
    /// Controller facts.
    pub controller: Option<ControllerFacts>,
    /// Kustomizations holding a worker.
    pub holding_workers: Vec<String>,
    /// Kustomizations left suspended by an interrupted run and resumed now.
    pub healed: Vec<String>,
    /// The Flux controllers that are not running and that listed Kustomizations need
    /// ([`cluster_loop::flux::StoppedController`], kustomize-controller first), each once: every
    /// row needing one is a finding (exit 1), healthy or not. `[]` when all run.
    pub stopped_controllers: Vec<cluster_loop::flux::StoppedController>,
    /// Reads that were skipped.
    pub notes: Vec<String>,
}

/// One line per stopped controller, with its lever:
/// `source-controller is not running (0 replicas): nothing fetches; lever start-controller:
/// kubectl -n flux-system scale deployment/source-controller --replicas=1`.
pub fn stopped_text(p: &Painter, stopped: &[cluster_loop::flux::StoppedController]) -> String {
    stopped
        .iter()
        .map(|s| {
            format!(
                "{}; lever {}: {}\n{}",
                p.err(&s.line()),
                p.bold(Lever::StartController.as_str()),
                s.command,
                s.pod
                    .as_ref()
                    .map(cluster_loop::flux::PodTrouble::log_text)
                    .unwrap_or_default()
            )
        })
        .collect()
}

/// The text of a single-Kustomization run before anything is written (`kubectl unstick
/// ks/NAME`, with or without `--dry-run`): the diagnosis, the Controller line (about
/// kustomize-controller), every other stopped controller it needs (source-controller) with
/// its lever, the notes, and the plan.
pub fn single_text(
    p: &Painter,
    d: &Diagnosis,
    controller: Option<&ControllerFacts>,
    holding: &[String],
    notes: &[String],
    plan: &Plan,
) -> String {
    let mut o = diagnosis_text(p, d, "");
    o.push_str(&controller_text(controller, holding));
    let others: Vec<_> = d
        .stopped_controllers
        .iter()
        .filter(|s| controller.is_none_or(|c| c.name != s.controller))
        .cloned()
        .collect();
    o.push_str(&stopped_text(p, &others));
    for n in notes {
        o.push_str(&format!("note: {n}\n"));
    }
    o.push_str(&plan_text(p, plan));
    o
}

/// The exit code of a read-only `kubectl unstick ks/NAME` (`--dry-run`, or nothing to write):
/// 1 when the diagnosis is a finding ([`crate::diagnose::is_finding`], the rule `--all`
/// counts), or when the lever is starting a stopped controller; 0 when nothing is stuck
/// (healthy, reconciling, held at dependsOn by a dependency that is only progressing).
pub fn read_only_exit(d: &Diagnosis, plan: &Plan) -> i32 {
    if crate::diagnose::is_finding(d) || plan.lever == Lever::StartController {
        cluster_loop::error::EXIT_FINDING
    } else {
        cluster_loop::error::EXIT_OK
    }
}

/// The last line of the `--all` text: `all N Kustomizations are healthy`, or how many are not
/// healthy and how many of those need attention ([`FleetReport::findings`], the exit code's
/// rule), so the line, the rows' classes and the exit code say the same.
/// A finding is never classed healthy (a stopped controller makes a Kustomization
/// `controller-not-running`), so "all healthy" is said only when nothing needs attention.
pub fn fleet_summary(r: &FleetReport) -> String {
    if r.not_healthy == 0 {
        format!("all {} Kustomizations are healthy\n", r.total)
    } else {
        format!(
            "{} of {} Kustomizations not healthy; {}\n",
            r.not_healthy,
            r.total,
            match r.findings {
                0 => "none needs attention (reconciling, or waiting at dependsOn on a dependency that is progressing)".to_string(),
                1 => "1 needs attention".to_string(),
                n => format!("{n} need attention"),
            }
        )
    }
}

/// The short root cause of a diagnosis for a table cell.
pub fn root_cause_cell(d: &Diagnosis) -> String {
    if d.class == Class::ControllerNotRunning && !d.stopped_controllers.is_empty() {
        // `kustomize-controller is not running (0 replicas)`: each line without its
        // consequence.
        return d
            .stopped_controllers
            .iter()
            .map(|s| format!("{} is not running ({})", s.controller, s.why))
            .collect::<Vec<_>>()
            .join("; ");
    }
    if let Some(rc) = &d.root_cause {
        let what = rc
            .diagnosis
            .as_ref()
            .map(|r| {
                // A root cause that is itself held at its dependsOn check, though every
                // dependency of its own is Ready now (its Ready=False DependencyNotReady is
                // the controller's last check): it starts at its next check, by itself
                // (kustomize-controller `--requeue-dependency`). Said so, not as a bare
                // "waiting-on-dependencies" (trial 11).
                if r.class == Class::WaitingOnDependencies && r.root_cause.is_none() {
                    return format!(
                        "{}: its dependencies are Ready now; its next dependsOn check starts its run",
                        r.class
                    );
                }
                let inner = root_cause_cell(r);
                if inner == "-" {
                    r.class.as_str().to_string()
                } else {
                    format!("{}: {inner}", r.class)
                }
            })
            .unwrap_or_else(|| rc.kind.clone());
        return format!("{} ({what})", rc.kustomization);
    }
    if let Some(s) = d.signatures.first() {
        return format!("{} image {}", s.object, s.image);
    }
    if let Some(r) = d.refused.first() {
        return match r.fields.is_empty() {
            true => format!("{} {}", r.object, r.kind.as_str()),
            false => format!("{} {} {}", r.object, r.fields.join(","), r.kind.as_str()),
        };
    }
    if let Some(b) = d.blocking.first() {
        if let Some(p) = b.pods.first() {
            let extra = p
                .image
                .as_ref()
                .map(|i| format!(" {i}"))
                .or(p.last_exit_code.map(|c| format!(" exit {c}")))
                .unwrap_or_default();
            let link = p
                .service_link
                .as_ref()
                .map(|c| format!(": service link {} from Service {}", c.variable, c.service))
                .unwrap_or_default();
            return format!("{} {}{extra}{link}", b.object, p.reason);
        }
        return format!("{} {}", b.object, b.kstatus);
    }
    if matches!(d.class, Class::SourceNotReady)
        && let Some(s) = &d.source
    {
        return format!(
            "{} {}",
            s.source,
            s.failure()
                .or(s.ready.as_ref())
                .map(|c| c.reason())
                .unwrap_or(if s.found { "not ready" } else { "missing" })
        );
    }
    "-".into()
}

/// The fleet table.
pub fn fleet_table(p: &Painter, items: &[FleetItem]) -> String {
    let mut t = p.table(&["kustomization", "class", "root cause", "lever", "summary"]);
    for i in items {
        let style = match i.class {
            Class::Healthy => Style::Ok,
            Class::Reconciling | Class::RequestPending | Class::WaitingOnDependencies => {
                Style::Warn
            }
            _ => Style::Err,
        };
        let mut summary = one_line(&i.summary);
        if summary.chars().count() > 100 {
            summary = summary.chars().take(99).collect::<String>() + "…";
        }
        t.add_row(vec![
            p.cell(Style::Plain, &i.kustomization),
            p.cell(style, i.class.as_str()),
            p.cell(Style::Plain, root_cause_cell(&i.diagnosis)),
            p.cell(Style::Bold, i.lever.as_str()),
            p.cell(Style::Dim, summary),
        ]);
    }
    render_table(&t)
}

/// A diagnosis as indented text.
pub fn diagnosis_text(p: &Painter, d: &Diagnosis, indent: &str) -> String {
    let mut o = String::new();
    let style = if d.class == Class::Healthy {
        Style::Ok
    } else {
        Style::Err
    };
    o.push_str(&format!(
        "{indent}Kustomization {}: {}\n",
        p.bold(&d.kustomization),
        p.paint(style, d.class.as_str())
    ));
    o.push_str(&format!("{indent}  {}\n", one_line(&d.summary)));
    if indent.is_empty() {
        // The same cell as the `--all` table's root-cause column, from the same rule.
        let rc = root_cause_cell(d);
        if rc != "-" {
            o.push_str(&format!("  root cause: {rc}\n"));
        }
    }
    if let Some(hc) = &d.health_check {
        o.push_str(&format!(
            "{indent}  health check: revision {}, started {}, timeout {}, deadline {}\n",
            hc.revision,
            hc.started_at.map(short_time).unwrap_or("?".into()),
            obj::human_secs(hc.timeout_secs.round() as i64),
            hc.deadline.map(short_time).unwrap_or("?".into()),
        ));
        if let (Some(at), Some(w)) = (hc.fail_fast_at, &hc.fail_fast_because) {
            o.push_str(&format!(
                "{indent}  predicted end: {} (fail-fast): {w}\n",
                short_time(at)
            ));
        }
    }
    // The ETA of a run in progress is in the summary line above (`...; ETA 07:22:30Z`):
    // said once.
    if !d.blocking.is_empty() {
        o.push_str(&format!("{indent}  Blocking objects:\n"));
        for b in d.blocking.iter().take(20) {
            o.push_str(&format!(
                "{indent}    {}  {}  {}{}\n",
                b.object,
                p.paint(Style::Warn, &b.kstatus),
                if b.origin == "healthChecks" {
                    "(spec.healthChecks) "
                } else {
                    ""
                },
                b.message
            ));
            if let Some(f) = &b.fix {
                o.push_str(&format!("{indent}      fix: {f}\n"));
            }
            for r in b.pods.iter().take(5) {
                let mut line = format!(
                    "{indent}      pod {} {}: {}",
                    r.pod,
                    r.container,
                    p.paint(Style::Err, &r.reason)
                );
                if let Some(i) = &r.image {
                    line.push_str(&format!(" image {i}"));
                }
                if let Some(c) = r.last_exit_code {
                    line.push_str(&format!(
                        " last exit {c} ({})",
                        r.last_exit_reason.as_deref().unwrap_or("?")
                    ));
                }
                if let Some(n) = r.restarts {
                    line.push_str(&format!(", {n} restarts"));
                }
                if !r.message.is_empty() {
                    line.push_str(&format!(" — {}", r.message));
                }
                o.push_str(&line);
                o.push('\n');
                if let Some(c) = &r.service_link {
                    o.push_str(&format!("{indent}        cause: {}\n", c.describe()));
                }
            }
        }
        if d.blocking.len() > 20 {
            o.push_str(&format!(
                "{indent}    … {} more (see -o json)\n",
                d.blocking.len() - 20
            ));
        }
    }
    for s in &d.signatures {
        o.push_str(&format!(
            "{indent}  {} {}\n",
            p.warn("signature:"),
            s.message
        ));
    }
    // The API server's message is the summary's (the Ready message): said once.
    for r in &d.refused {
        let what = match (&r.by, r.fields.is_empty()) {
            (Some(by), _) => format!("{} by {by}", r.kind.as_str()),
            (None, false) => format!("{}: {}", r.kind.as_str(), r.fields.join(", ")),
            (None, true) => r.kind.as_str().to_string(),
        };
        o.push_str(&format!(
            "{indent}  {} {} ({what}), the same on every run\n{indent}    fix: {}\n",
            p.warn("refused:"),
            r.object,
            one_line(&r.fix)
        ));
    }
    if let Some(s) = &d.source {
        let ready = s
            .ready
            .as_ref()
            .map(|c| format!("Ready={} {}", c.status, c.reason()))
            .unwrap_or_else(|| {
                if s.found {
                    "no Ready condition".into()
                } else {
                    "NOT FOUND".into()
                }
            });
        o.push_str(&format!(
            "{indent}  source {}: {ready}; artifact {}; last attempted {}; last applied {}\n",
            s.source,
            s.artifact_revision.as_deref().unwrap_or("-"),
            s.last_attempted_revision.as_deref().unwrap_or("-"),
            s.last_applied_revision.as_deref().unwrap_or("-"),
        ));
    }
    if let Some(r) = &d.request {
        o.push_str(&format!(
            "{indent}  requestedAt {} / lastHandledReconcileAt {}{}\n",
            r.requested_at,
            r.last_handled_reconcile_at.as_deref().unwrap_or("-"),
            if r.pending { " (pending)" } else { "" }
        ));
    }
    for h in &d.hints {
        o.push_str(&format!("{indent}  - {}\n", one_line(h)));
    }
    if let Some(rc) = &d.root_cause {
        o.push_str(&format!(
            "{indent}  {} {}\n{indent}    {}\n",
            p.bold("dependsOn chain:"),
            rc.chain.join(" -> "),
            rc.message
        ));
        if let Some(rd) = &rc.diagnosis {
            o.push_str(&diagnosis_text(p, rd, &format!("{indent}    ")));
        }
    }
    o
}

/// Controller facts as one paragraph.
pub fn controller_text(c: Option<&ControllerFacts>, holding: &[String]) -> String {
    match c {
        None => "Controller: not read (see notes)\n".into(),
        // Its Deployment's version and flags describe what would run, not what runs.
        Some(c) if c.not_running.is_some() => format!(
            "Controller {}/{}: NOT RUNNING ({}): nothing reconciles; its Deployment would run {} ({}), {}={}, --concurrent={}\n{}",
            c.namespace,
            c.name,
            c.not_running.as_deref().unwrap_or_default(),
            c.version
                .map(|v| v.to_string())
                .unwrap_or("version unknown".into()),
            c.image,
            crate::controller::CANCEL_GATE,
            c.cancel_gate,
            c.concurrent,
            // The exited run's own words (a crash loop's cause is in its log).
            c.pod
                .as_ref()
                .map(cluster_loop::flux::PodTrouble::log_text)
                .unwrap_or_default(),
        ),
        Some(c) if c.leader.is_some() => format!(
            "Controller {}/{}: NOT LEADING: {}; {} ({}), --concurrent={}\n",
            c.namespace,
            c.name,
            c.leader
                .as_ref()
                .map(|l| l.why.as_str())
                .unwrap_or_default(),
            c.version
                .map(|v| v.to_string())
                .unwrap_or("version unknown".into()),
            c.image,
            c.concurrent,
        ),
        Some(c) => format!(
            "Controller {}/{}: {} ({}), {}={}, --concurrent={}; holding a worker now: {}\n",
            c.namespace,
            c.name,
            c.version
                .map(|v| v.to_string())
                .unwrap_or("version unknown".into()),
            c.image,
            crate::controller::CANCEL_GATE,
            c.cancel_gate,
            c.concurrent,
            if holding.is_empty() {
                "none".to_string()
            } else {
                holding.join(", ")
            }
        ),
    }
}

/// `s` on one line: a quoted controller message keeps its words but not its own line breaks
/// (a kustomize build error is several lines), so a bullet or a quote is never cut in two.
/// Text output only; JSON and YAML carry the message verbatim.
pub fn one_line(s: &str) -> String {
    if !s.contains('\n') {
        return s.to_string();
    }
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A plan with its exact patches.
pub fn plan_text(p: &Painter, plan: &Plan) -> String {
    let mut o = format!("Lever: {}\n", p.bold(plan.lever.as_str()));
    for w in &plan.why {
        o.push_str(&format!("  - {}\n", one_line(w)));
    }
    o.push_str(&format!("  effect: {}\n", one_line(&plan.effect)));
    if let Some(t) = plan.fresh_run_at {
        o.push_str(&format!("  fresh run expected at: {}\n", short_time(t)));
    }
    if !plan.also_cancels.is_empty() {
        o.push_str(&format!(
            "  {} {}\n",
            p.warn("also cancels:"),
            plan.also_cancels.join(", ")
        ));
    }
    if let Some(g) = &plan.recommend_gate_arg {
        o.push_str(&format!("  enable the gate: add `{g}` to the kustomize-controller manager container args (v1.8.3+)\n"));
    }
    for a in &plan.alternatives {
        o.push_str(&format!("  alternative: {a}\n"));
    }
    if !plan.steps.is_empty() {
        o.push_str("  steps:\n");
        for (i, s) in plan.steps.iter().enumerate() {
            match s {
                Step::Patch {
                    api_version,
                    kind,
                    namespace,
                    name,
                    patch,
                    why,
                } => o.push_str(&format!(
                    "    {}. PATCH {kind} {namespace}/{name} ({api_version}, application/merge-patch+json, fieldManager={})\n       {}\n       # {why}\n",
                    i + 1,
                    crate::lever::FIELD_MANAGER,
                    serde_json::to_string(patch).unwrap_or_default()
                )),
                Step::DeleteControllerPods {
                    namespace,
                    selector,
                    why,
                } => o.push_str(&format!(
                    "    {}. DELETE pods -n {namespace} -l {selector}\n       # {why}\n",
                    i + 1
                )),
            }
        }
        o.push_str(&format!(
            "  wait: up to {} for proof\n",
            obj::human_secs(plan.wait_secs.round() as i64)
        ));
    }
    o
}

/// The fleet report from a snapshot (pure): every Kustomization, healthy ones included,
/// sorted by namespace/name, with its class, root cause ([`root_cause_cell`], the same rule
/// as `kubectl unstick ks/NAME`) and the lever [`crate::lever::plan`] recommends
/// (`--problems` keeps only the rows that are not healthy). The second value is true when
/// any item is a finding ([`crate::diagnose::is_finding`], the rule of a read-only
/// `kubectl unstick ks/NAME`): exit 1.
pub fn fleet_report(snap: &Snapshot, notes: Vec<String>, o: &Options) -> (FleetReport, bool) {
    let engine = Engine::new(snap);
    let holding = engine.holding_workers();
    let token = obj::rfc3339_nano(snap.now);
    let mut all = engine.diagnose_all();
    if let Some(ns) = &snap.namespace {
        // Dependencies read from other namespaces are context, not rows.
        all.retain(|d| {
            d.kustomization
                .split_once('/')
                .is_some_and(|(n, _)| n == ns)
        });
    }
    let total = all.len();
    let by_key: HashMap<String, &Value> =
        snap.kustomizations.iter().map(|k| (key_of(k), k)).collect();
    let mut items = Vec::new();
    for d in all {
        let ks = by_key[&d.kustomization];
        let inputs = engine.lever_inputs(ks, &holding, snap.now, &token);
        let plan = crate::lever::plan(&d, &inputs, o);
        // The lever `ks/NAME` shows, from the same plan: a row that needs no attention
        // (reconciling, a dependsOn rollout, a check waiting on progress) has a lever that
        // writes nothing (none, wait), as the summary line's "none needs attention" says.
        items.push(FleetItem {
            kustomization: d.kustomization.clone(),
            class: d.class,
            root_cause: Some(root_cause_cell(&d)).filter(|c| c != "-"),
            lever: plan.lever,
            lever_effect: plan.effect,
            summary: d.summary.clone(),
            diagnosis: d,
        });
    }
    let findings = items
        .iter()
        .filter(|i| crate::diagnose::is_finding(&i.diagnosis))
        .count();
    let not_healthy = items.iter().filter(|i| i.class != Class::Healthy).count();
    let mut stopped_controllers: Vec<cluster_loop::flux::StoppedController> = Vec::new();
    for sc in items
        .iter()
        .flat_map(|i| i.diagnosis.stopped_controllers.iter())
    {
        if !stopped_controllers.contains(sc) {
            stopped_controllers.push(sc.clone());
        }
    }
    (
        FleetReport {
            api_version: SCHEMA,
            kind: "FleetReport",
            total,
            not_healthy,
            findings,
            items,
            controller: engine.controller.clone(),
            holding_workers: holding,
            healed: vec![],
            stopped_controllers,
            notes,
        },
        findings > 0,
    )
}
