//! One diagnosis of the fleet from the watches' stores, and when the next one is due without a
//! change ([`next_deadline`]): the earliest future time a diagnosis names (a held health check's
//! predicted end or timeout, a run's expected end, a worker freeing, an interval run, a
//! controller taking its Lease). Pure but for reading the stores.
use std::time::Instant;

use jiff::Timestamp;
use unstick::lever::Options;
use unstick::live::ControllerRef;
use unstick::report::FleetReport;
use unstick::snapshot::Snapshot;

use crate::watch::Watches;

/// What a diagnosis read and concluded, at `now`.
pub struct Diagnosed {
    /// The snapshot built from the stores (what levers plan from).
    pub snapshot: Snapshot,
    /// unstick's fleet report: the `/diagnoses` document.
    pub report: FleetReport,
    /// When the stores were read.
    pub at: Timestamp,
    /// When the stores were read, monotonic (a lever's "no older than").
    pub instant: Instant,
    /// Seconds it took (snapshot and diagnosis).
    pub secs: f64,
}

/// The engine's input from the stores: [`unstick::cache::snapshot`] of every object held.
pub fn snapshot(
    w: &Watches,
    namespace: Option<&str>,
    ctrl: &ControllerRef,
    now: Timestamp,
) -> Snapshot {
    let kustomizations = w.kustomizations.values();
    // The ConfigMaps and Secrets they reference, from the metadata stores (what `kubectl
    // unstick --all` GETs, here without a request and without its cap of 4).
    let configs = kustomizations
        .iter()
        .flat_map(unstick::diagnose::config_refs)
        .filter_map(|r| {
            let m = w.config_metadata(&r.kind, &r.namespace, &r.name)?;
            Some((format!("{}/{}/{}", r.kind, r.namespace, r.name), m))
        })
        .collect();
    let watched = unstick::cache::Watched {
        kustomizations,
        sources: w.sources.iter().flat_map(|s| s.values()).collect(),
        helm_releases: w
            .helm_releases
            .as_ref()
            .map(|h| h.values())
            .unwrap_or_default(),
        deployments: w.deployments.values(),
        leases: w.leases.values(),
        configs,
    };
    unstick::cache::snapshot(now, namespace, ctrl, watched)
}

/// Diagnoses `snap` as `kubectl unstick --all` does ([`unstick::report::fleet_report`], its
/// default options: the lever `kubectl unstick ks/NAME` would choose). `notes`: what was not
/// watched.
pub fn diagnose(snap: &Snapshot, notes: Vec<String>) -> FleetReport {
    unstick::report::fleet_report(snap, notes, &Options::default()).0
}

/// Reads the stores and diagnoses at `now`.
pub fn run(w: &Watches, namespace: Option<&str>, ctrl: &ControllerRef) -> Diagnosed {
    let instant = Instant::now();
    let at = Timestamp::now();
    let snapshot = snapshot(w, namespace, ctrl, at);
    let notes = w
        .not_served
        .iter()
        .map(|k| format!("{k} is not served by this cluster: not watched"))
        .chain(w.notes.iter().cloned())
        .collect();
    let report = diagnose(&snapshot, notes);
    Diagnosed {
        snapshot,
        report,
        at,
        instant,
        secs: instant.elapsed().as_secs_f64(),
    }
}

/// The earliest time after `now` that a diagnosis of `report` names, when the class or its
/// wording may change with no watch event: a held health check's predicted end (fail-fast)
/// and its timeout, a run's expected end, a worker freeing, an interval run, a controller pod
/// taking its Lease. `None`: nothing is due (only a change wakes the next diagnosis).
pub fn next_deadline(report: &FleetReport, now: Timestamp) -> Option<Timestamp> {
    let mut times = Vec::new();
    for i in &report.items {
        let d = &i.diagnosis;
        if let Some(h) = &d.health_check {
            times.extend([h.deadline, h.ends_at, h.fail_fast_at]);
        }
        times.extend([d.eta, d.worker_free_at]);
        times.push(d.blind_spot.as_ref().and_then(|b| b.next_run_at));
        times.extend(
            d.stopped_controllers
                .iter()
                .map(|s| s.leader.as_ref().and_then(|l| l.until)),
        );
    }
    times.into_iter().flatten().filter(|t| *t > now).min()
}
