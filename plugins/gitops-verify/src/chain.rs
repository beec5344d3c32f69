//! The chain model: one [`LinkReport`] per link, in chain order, and the [`ChainReport`]
//! document (`-o json|yaml`, kind `ChainReport`, documented in docs/gitops-verify.md).
//!
//! Verdicts, most severe first ([`Verdict::severity`]): `broken` (the link fails now, at the
//! newest revision, and does not end by itself: a failed health check, ImagePullBackOff on
//! the image being applied, a suspended source), `unknown` (the link could not be judged: a
//! read was denied), `waiting` (moving toward holding by itself, with the time it should be
//! done by: a fetch at the next interval, a health check within its timeout, an image
//! automation that has not committed yet), `ok` (proven to hold) and `not-applicable`
//! (nothing to check, and the link says why: no ImagePolicy, no workload in any inventory).
//! A link that has nothing to check is never `ok`.
//!
//! Exit codes ([`exit_code`]): 0 every link ok or not-applicable; 1 a link broken or unknown
//! (the chain is not proven); 4 the worst link is waiting (without `--wait`: right now; with
//! `--wait`: still at the deadline).

use jiff::Timestamp;
use serde::Serialize;

/// `apiVersion` of the machine output.
pub const API_VERSION: &str = "verify.cluster-loop.dev/v1alpha1";
/// `kind` of the machine output.
pub const KIND: &str = "ChainReport";
/// Exit code 4: a link is still waiting (at the deadline with `--wait`).
pub const EXIT_WAITING: i32 = 4;

/// A link's (or a member's) verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Proven to hold.
    Ok,
    /// Nothing to check here; [`LinkReport::summary`] says why.
    NotApplicable,
    /// Moving toward holding by itself; [`LinkReport::deadline`] says by when.
    Waiting,
    /// Could not be judged (a read denied, a state no rule knows).
    Unknown,
    /// Fails now and does not end by itself; [`LinkReport::fix`] says what to do.
    Broken,
}

impl Verdict {
    /// Order for "the worst of": ok 0, not-applicable 0, waiting 1, unknown 2, broken 3.
    pub fn severity(self) -> u8 {
        match self {
            Verdict::Ok | Verdict::NotApplicable => 0,
            Verdict::Waiting => 1,
            Verdict::Unknown => 2,
            Verdict::Broken => 3,
        }
    }

    /// The kebab-case word of tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::NotApplicable => "not-applicable",
            Verdict::Waiting => "waiting",
            Verdict::Unknown => "unknown",
            Verdict::Broken => "broken",
        }
    }

    /// Whether the link holds (ok, or nothing to check).
    pub fn holds(self) -> bool {
        self.severity() == 0
    }
}

/// One object's verdict inside a link: `Kustomization/flux-system/apps`, its verdict and what
/// was seen.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    /// `Kind/namespace/name` (or `Kind/namespace/name container C` for an image).
    pub object: String,
    /// Its verdict.
    pub verdict: Verdict,
    /// What was seen, one line (the unstick class and summary, the kstatus message, ...).
    pub detail: String,
    /// When a waiting member should be done by (its own timeout, next interval run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// What to do, for a broken or unknown member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// Keys (`namespace/name`) of the Kustomizations whose inventory holds the object this
    /// member is about (a workload, or the workload running an image; for links 5-7 what
    /// serves the host: its HTTPRoute, Gateway or Ingress and their backend Services, or every
    /// in-scope Kustomization when nothing known serves it yet); empty when it is about no
    /// applied object. [`settle`] holds a broken member only when one of them is moving.
    #[serde(skip)]
    pub applied_by: Vec<String>,
}

impl Evidence {
    /// A member with no deadline and no fix.
    pub fn new(object: impl Into<String>, verdict: Verdict, detail: impl Into<String>) -> Self {
        Evidence {
            object: object.into(),
            verdict,
            detail: detail.into(),
            deadline: None,
            fix: None,
            applied_by: Vec::new(),
        }
    }

    /// Sets [`Evidence::applied_by`].
    pub fn applied_by(mut self, kustomizations: Vec<String>) -> Self {
        self.applied_by = kustomizations;
        self
    }

    /// Sets the deadline.
    pub fn until(mut self, deadline: Option<Timestamp>) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sets the fix.
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// One link of the chain.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkReport {
    /// Position in the chain, 1-7 (1 source, 2 Kustomizations, 3 workloads, 4 images, 5 DNS,
    /// 6 Gateway, 7 HTTP).
    pub position: u8,
    /// Stable id: `source`, `kustomizations`, `workloads`, `images`, `dns`, `gateway`, `http`.
    pub id: &'static str,
    /// The worst verdict of its members ([`LinkReport::from_members`]), or the link's own when
    /// it has none.
    pub verdict: Verdict,
    /// One line a human reads first.
    pub summary: String,
    /// For `waiting`: the latest deadline of its waiting members (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// For `broken`/`unknown`: what to do, from the first such member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// A new revision is on its way through this link (a source behind its remote, a
    /// Kustomization about to apply a newer revision): a `broken` verdict further down the
    /// chain is about the revision being replaced, so it reads `waiting` until this link
    /// settles ([`settle`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub moving: bool,
    /// When not empty, the movement concerns only these Kustomizations (`namespace/name`):
    /// [`settle`] keeps a broken member below final unless it is applied by one of them.
    /// Empty with `moving`: everything below is held (a source behind its remote).
    #[serde(skip)]
    pub moving_only: Vec<String>,
    /// Its members, worst first.
    pub evidence: Vec<Evidence>,
}

impl LinkReport {
    /// A link with nothing to check: `not-applicable`, `why` as its summary.
    pub fn not_applicable(position: u8, id: &'static str, why: impl Into<String>) -> Self {
        LinkReport {
            position,
            id,
            verdict: Verdict::NotApplicable,
            summary: why.into(),
            deadline: None,
            fix: None,
            moving: false,
            moving_only: Vec::new(),
            evidence: Vec::new(),
        }
    }

    /// A link judged from its members: the worst verdict (none: `not-applicable` with
    /// `empty_why`), the latest deadline of the waiting ones, the first fix of the worst ones,
    /// and `summary` built from the counts when `None`.
    pub fn from_members(
        position: u8,
        id: &'static str,
        mut evidence: Vec<Evidence>,
        empty_why: &str,
    ) -> Self {
        if evidence.is_empty() {
            return LinkReport::not_applicable(position, id, empty_why);
        }
        evidence.sort_by_key(|e| std::cmp::Reverse(e.verdict.severity()));
        // Ok before not-applicable among the members that hold: the link is not-applicable
        // only when every member is.
        let worst = match evidence[0].verdict {
            Verdict::NotApplicable if evidence.iter().any(|e| e.verdict == Verdict::Ok) => {
                Verdict::Ok
            }
            v => v,
        };
        let deadline = evidence
            .iter()
            .filter(|e| e.verdict == Verdict::Waiting)
            .filter_map(|e| e.deadline)
            .max();
        let fix = evidence
            .iter()
            .filter(|e| e.verdict == worst)
            .find_map(|e| e.fix.clone());
        let n = |v: Verdict| evidence.iter().filter(|e| e.verdict == v).count();
        // The member named beside the link's deadline is the one that sets it (trial3: the
        // first waiting member was named with another's later deadline).
        let named = match worst {
            Verdict::Waiting => evidence
                .iter()
                .filter(|e| e.verdict == Verdict::Waiting && e.deadline.is_some())
                .max_by_key(|e| e.deadline)
                .unwrap_or(&evidence[0]),
            _ => &evidence[0],
        };
        let summary = match worst {
            // trial3: all not-applicable read "0 of 2 ok", like a failure.
            Verdict::NotApplicable => format!(
                "not applicable ({} of {}): {}",
                n(Verdict::NotApplicable),
                evidence.len(),
                evidence[0].detail
            ),
            Verdict::Ok => match n(Verdict::NotApplicable) {
                0 => format!("{} of {} ok", n(Verdict::Ok), evidence.len()),
                na => format!(
                    "{} of {} ok, {na} not applicable",
                    n(Verdict::Ok),
                    evidence.len()
                ),
            },
            _ => format!(
                "{} of {} {}: {}",
                n(worst),
                evidence.len(),
                worst.as_str(),
                named.object
            ),
        };
        LinkReport {
            position,
            id,
            verdict: worst,
            summary,
            deadline: if worst == Verdict::Waiting {
                deadline
            } else {
                None
            },
            fix,
            moving: false,
            moving_only: Vec::new(),
            evidence,
        }
    }
}

/// The whole run: the chain in order.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainReport {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// [`KIND`].
    pub kind: &'static str,
    /// When the chain was read (RFC 3339).
    pub checked_at: Timestamp,
    /// The scope: `namespace` (or `*` with `-A`) and the `source` when `--source` was given.
    pub scope: Scope,
    /// The links, in chain order.
    pub links: Vec<LinkReport>,
    /// `id` of the first link that is broken (else unknown, else waiting), `null` when the
    /// chain holds.
    pub first_broken: Option<&'static str>,
    /// The `--wait` deadline and why it was chosen, when waiting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<WaitInfo>,
    /// Notes on what was not read (RBAC) and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// API requests this run made (list/get/watch), not counting a probe pod's.
    pub api_requests: usize,
    /// The exit code ([`exit_code`]).
    pub exit_code: i32,
}

/// What the run looked at.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scope {
    /// The namespace of the Flux objects, `*` for all (`-A`).
    pub namespace: String,
    /// `Kind/namespace/name` of `--source`, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// The `--wait` deadline.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitInfo {
    /// The deadline (RFC 3339).
    pub deadline: Timestamp,
    /// Why: `largest own timeout: Kustomization/flux-system/apps spec.timeout 5m0s, + margin 1m0s`.
    pub why: String,
    /// Whether the deadline passed before the chain held.
    pub expired: bool,
}

/// The downstream rule: once a link is [`LinkReport::moving`], a `broken` verdict of a later
/// link's member is about the revision being replaced and reads `waiting` ("not final: link
/// N is moving"), with the fix kept as evidence. A link moving for some Kustomizations only
/// ([`LinkReport::moving_only`]) holds only the members they apply
/// ([`Evidence::applied_by`]); a member about no applied object stays final then. Applied in
/// order; the first moving link decides.
pub fn settle(links: &mut [LinkReport]) {
    let mut moving: Option<(&'static str, Vec<String>)> = None;
    for l in links.iter_mut() {
        if let Some((up, only)) = &moving
            && l.verdict == Verdict::Broken
        {
            let held =
                |e: &Evidence| only.is_empty() || e.applied_by.iter().any(|k| only.contains(k));
            for e in l
                .evidence
                .iter_mut()
                .filter(|e| e.verdict == Verdict::Broken && held(e))
            {
                e.verdict = Verdict::Waiting;
                e.detail = format!(
                    "{} (not final: the {up} link is still moving to a newer revision{})",
                    e.detail,
                    if only.is_empty() {
                        String::new()
                    } else {
                        format!(" for Kustomization {}", only.join(", "))
                    }
                );
            }
            let rebuilt =
                LinkReport::from_members(l.position, l.id, std::mem::take(&mut l.evidence), "");
            l.verdict = rebuilt.verdict;
            l.summary = rebuilt.summary;
            l.deadline = rebuilt.deadline;
            l.fix = rebuilt.fix;
            l.evidence = rebuilt.evidence;
        }
        if l.moving && moving.is_none() {
            moving = Some((l.id, l.moving_only.clone()));
        }
    }
}

/// The first link that is broken, else unknown, else waiting; `None` when all hold.
pub fn first_broken(links: &[LinkReport]) -> Option<&'static str> {
    [Verdict::Broken, Verdict::Unknown, Verdict::Waiting]
        .into_iter()
        .find_map(|v| links.iter().find(|l| l.verdict == v).map(|l| l.id))
}

/// 0 when every link holds, 1 when one is broken or unknown, [`EXIT_WAITING`] when the worst
/// is waiting.
pub fn exit_code(links: &[LinkReport]) -> i32 {
    match links
        .iter()
        .map(|l| l.verdict.severity())
        .max()
        .unwrap_or(0)
    {
        0 => 0,
        1 => EXIT_WAITING,
        _ => 1,
    }
}

/// The machine document of a run that ended without a report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorReport {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// `ChainError`.
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
        kind: "ChainError",
        exit_code,
        error: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(pos: u8, id: &'static str, v: Verdict) -> LinkReport {
        LinkReport::from_members(pos, id, vec![Evidence::new("X/ns/x", v, "d")], "")
    }

    /// Trial3: an images link whose ImagePolicies all have no in-scope workload read "0 of 2
    /// ok", like a failure: it is not-applicable, saying why; ok beside not-applicable is ok.
    #[test]
    fn members_that_do_not_apply_are_said_so_not_counted_as_failures() {
        let na = |o: &str| Evidence::new(o, Verdict::NotApplicable, "no in-scope workload runs it");
        let l = LinkReport::from_members(
            4,
            "images",
            vec![na("ImagePolicy/a/x"), na("ImagePolicy/a/y")],
            "",
        );
        assert_eq!(l.verdict, Verdict::NotApplicable);
        assert_eq!(
            l.summary,
            "not applicable (2 of 2): no in-scope workload runs it"
        );
        let l = LinkReport::from_members(
            4,
            "images",
            vec![
                na("ImagePolicy/a/x"),
                Evidence::new("ImagePolicy/a/z", Verdict::Ok, "runs 1.2.3"),
            ],
            "",
        );
        assert_eq!(l.verdict, Verdict::Ok);
        assert_eq!(l.summary, "1 of 2 ok, 1 not applicable");
    }

    /// Trial3: link 2's summary named the first waiting member beside another member's
    /// later deadline. The member named is the one whose deadline the link shows.
    #[test]
    fn the_waiting_member_named_is_the_one_whose_deadline_the_link_shows() {
        let at = |t: &str| Some(t.parse::<Timestamp>().unwrap());
        let l = LinkReport::from_members(
            2,
            "kustomizations",
            vec![
                Evidence::new(
                    "Kustomization/flux-system/apps-wave-1",
                    Verdict::Waiting,
                    "a",
                )
                .until(at("2026-12-03T22:32:28Z")),
                Evidence::new(
                    "Kustomization/flux-system/apps-wave-2",
                    Verdict::Waiting,
                    "b",
                )
                .until(at("2026-12-03T22:33:07Z")),
                Evidence::new("Kustomization/flux-system/infra", Verdict::Ok, "c"),
            ],
            "",
        );
        assert_eq!(l.deadline, at("2026-12-03T22:33:07Z"));
        assert_eq!(
            l.summary,
            "2 of 3 waiting: Kustomization/flux-system/apps-wave-2"
        );
    }

    #[test]
    fn the_chain_report_serialises_as_json_and_yaml() {
        let links = vec![link(1, "source", Verdict::Waiting)];
        let r = ChainReport {
            api_version: API_VERSION,
            kind: KIND,
            checked_at: "2026-12-03T18:00:00Z".parse().unwrap(),
            scope: Scope {
                namespace: "flux-system".into(),
                source: None,
            },
            first_broken: first_broken(&links),
            exit_code: exit_code(&links),
            links,
            wait: None,
            notes: vec![],
            api_requests: 7,
        };
        use cluster_loop::output::{OutputFormat, to_machine_string};
        let j: serde_json::Value =
            serde_json::from_str(&to_machine_string(OutputFormat::Json, &r).unwrap()).unwrap();
        assert_eq!(j["kind"], "ChainReport");
        assert_eq!(j["checkedAt"], "2026-12-03T18:00:00Z");
        assert_eq!(j["firstBroken"], "source");
        assert_eq!(j["exitCode"], 4);
        assert_eq!(j["links"][0]["verdict"], "waiting");
        let y = to_machine_string(OutputFormat::Yaml, &r).unwrap();
        assert!(
            y.contains("kind: ChainReport") && y.contains("verdict: waiting"),
            "{y}"
        );
    }

    #[test]
    fn nothing_to_check_is_not_ok() {
        let l = LinkReport::from_members(4, "images", vec![], "no ImagePolicy");
        assert_eq!(l.verdict, Verdict::NotApplicable);
        assert_eq!(l.summary, "no ImagePolicy");
    }

    #[test]
    fn exit_codes_follow_the_worst_link() {
        assert_eq!(exit_code(&[link(1, "source", Verdict::Ok)]), 0);
        assert_eq!(exit_code(&[link(1, "source", Verdict::NotApplicable)]), 0);
        assert_eq!(
            exit_code(&[
                link(1, "source", Verdict::Ok),
                link(2, "k", Verdict::Waiting)
            ]),
            4
        );
        assert_eq!(
            exit_code(&[
                link(1, "source", Verdict::Waiting),
                link(2, "k", Verdict::Broken)
            ]),
            1
        );
        assert_eq!(exit_code(&[link(1, "source", Verdict::Unknown)]), 1);
    }

    #[test]
    fn broken_below_a_moving_link_waits() {
        let mut up = link(1, "source", Verdict::Waiting);
        up.moving = true;
        let mut links = vec![up, link(2, "kustomizations", Verdict::Broken)];
        settle(&mut links);
        assert_eq!(links[1].verdict, Verdict::Waiting);
        assert!(
            links[1].evidence[0]
                .detail
                .contains("source link is still moving")
        );
        // Without a moving link, broken stays broken.
        let mut links = vec![
            link(1, "source", Verdict::Ok),
            link(2, "k", Verdict::Broken),
        ];
        settle(&mut links);
        assert_eq!(links[1].verdict, Verdict::Broken);
        assert_eq!(first_broken(&links), Some("k"));
    }

    #[test]
    fn a_kustomization_moving_holds_only_what_it_applies() {
        // apps/wave-2 waits for a newer revision; wave-1's pod fails on the image being applied.
        let mut ks = link(2, "kustomizations", Verdict::Waiting);
        ks.moving = true;
        ks.moving_only = vec!["apps/wave-2".into()];
        let mine = Evidence::new("Deployment/apps/backend", Verdict::Broken, "ErrImagePull")
            .applied_by(vec!["apps/wave-1".into()]);
        let theirs = Evidence::new(
            "Deployment/apps/frontend",
            Verdict::Broken,
            "CrashLoopBackOff",
        )
        .applied_by(vec!["apps/wave-2".into()]);
        let nobody = Evidence::new("ImagePolicy/apps/p", Verdict::Broken, "no latestRef");
        let workloads = LinkReport::from_members(3, "workloads", vec![mine, theirs], "");
        let images = LinkReport::from_members(4, "images", vec![nobody], "");
        let mut links = vec![ks, workloads, images];
        settle(&mut links);
        let w = &links[1];
        assert_eq!(w.verdict, Verdict::Broken);
        let by = |o: &str| w.evidence.iter().find(|e| e.object == o).unwrap();
        assert_eq!(by("Deployment/apps/backend").verdict, Verdict::Broken);
        assert_eq!(by("Deployment/apps/frontend").verdict, Verdict::Waiting);
        assert!(
            by("Deployment/apps/frontend")
                .detail
                .contains("for Kustomization apps/wave-2")
        );
        assert_eq!(links[2].verdict, Verdict::Broken);
        assert_eq!(first_broken(&links), Some("workloads"));
    }
}
