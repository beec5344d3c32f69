//! /metrics: Prometheus metrics with the `prometheus-client` crate, named after the Prometheus
//! conventions (`cluster_loop_` prefix, base units, `_total` counters, `_timestamp_seconds`).
//!
//! Per Kustomization (from the latest diagnosis, encoded at each scrape by a [`Collector`], so
//! a Kustomization that changed class or was deleted leaves no stale series):
//! - `cluster_loop_kustomization_class{namespace,name,class}` 1: its class (unstick's);
//! - `cluster_loop_kustomization_stuck_seconds{namespace,name}`: seconds since its Ready
//!   condition last changed, for one that is not healthy (0 when healthy);
//! - `cluster_loop_kustomization_health_check_deadline_timestamp_seconds{namespace,name}`:
//!   when a held health check ends by itself (its predicted end: fail-fast or timeout), only
//!   while one is held;
//! - `cluster_loop_kustomization_lever{namespace,name,lever}` 1: the lever unstick suggests,
//!   for one that is not healthy.
//!
//! The controller's own: `cluster_loop_watch_events_total{kind,type}`,
//! `cluster_loop_watch_errors_total{kind}`, `cluster_loop_diagnoses_total`,
//! `cluster_loop_diagnosis_duration_seconds` (histogram), `cluster_loop_kustomizations`
//! (read in the latest diagnosis), `cluster_loop_events_total{reason}`,
//! `cluster_loop_event_errors_total`, `cluster_loop_levers_total{lever,result}`,
//! `cluster_loop_leader` (1 while this replica holds the Lease or runs without election).
use std::sync::{Arc, RwLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use unstick::diagnose::Class;
use unstick::report::FleetReport;

type Labels = Vec<(&'static str, String)>;

/// One Kustomization's row of the per-Kustomization metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// unstick's class (kebab-case).
    pub class: &'static str,
    /// Seconds since the Ready condition last changed, when not healthy; 0 when healthy.
    pub stuck_secs: f64,
    /// A held health check's predicted end, Unix seconds.
    pub deadline: Option<f64>,
    /// The suggested lever (kebab-case), when not healthy.
    pub lever: Option<&'static str>,
}

/// The rows of a fleet report at `now`.
pub fn rows(report: &FleetReport, now: jiff::Timestamp) -> Vec<Row> {
    report
        .items
        .iter()
        .map(|i| {
            let (namespace, name) = i.kustomization.split_once('/').unwrap_or(("", ""));
            let healthy = i.class == Class::Healthy;
            let since = i
                .diagnosis
                .ready
                .as_ref()
                .and_then(|c| c.last_transition_time());
            let stuck_secs = match since {
                Some(t) if !healthy => now.duration_since(t).as_secs_f64().max(0.0),
                _ => 0.0,
            };
            let deadline = i
                .diagnosis
                .health_check
                .as_ref()
                .filter(|_| i.class == Class::HealthCheckInFlight)
                .and_then(|h| h.ends_at.or(h.deadline))
                .map(|t| t.as_millisecond() as f64 / 1000.0);
            Row {
                namespace: namespace.into(),
                name: name.into(),
                class: i.class.as_str(),
                stuck_secs,
                deadline,
                lever: (!healthy).then(|| i.lever.as_str()),
            }
        })
        .collect()
}

#[derive(Debug, Default)]
struct Fleet {
    rows: RwLock<Vec<Row>>,
}

impl Collector for Fleet {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let rows = self.rows.read().map(|r| r.clone()).unwrap_or_default();
        let base = |r: &Row| -> Labels {
            vec![("namespace", r.namespace.clone()), ("name", r.name.clone())]
        };
        {
            let mut m = encoder.encode_descriptor(
                "cluster_loop_kustomization_class",
                "The Kustomization's class as kubectl unstick diagnoses it (1 for its class)",
                None,
                MetricType::Gauge,
            )?;
            for r in &rows {
                let mut l = base(r);
                l.push(("class", r.class.to_string()));
                ConstGauge::new(1i64).encode(m.encode_family(&l)?)?;
            }
        }
        {
            let mut m = encoder.encode_descriptor(
                "cluster_loop_kustomization_stuck_seconds",
                "Seconds since the Ready condition of a Kustomization that is not healthy last changed (0 when healthy)",
                None,
                MetricType::Gauge,
            )?;
            for r in &rows {
                ConstGauge::new(r.stuck_secs).encode(m.encode_family(&base(r))?)?;
            }
        }
        {
            let mut m = encoder.encode_descriptor(
                "cluster_loop_kustomization_health_check_deadline_timestamp_seconds",
                "When the health check a Kustomization holds ends by itself (fail-fast or its timeout), Unix seconds; only while one is held",
                None,
                MetricType::Gauge,
            )?;
            for r in &rows {
                if let Some(d) = r.deadline {
                    ConstGauge::new(d).encode(m.encode_family(&base(r))?)?;
                }
            }
        }
        {
            let mut m = encoder.encode_descriptor(
                "cluster_loop_kustomization_lever",
                "The lever kubectl unstick suggests for a Kustomization that is not healthy (1 for that lever)",
                None,
                MetricType::Gauge,
            )?;
            for r in &rows {
                if let Some(lever) = r.lever {
                    let mut l = base(r);
                    l.push(("lever", lever.to_string()));
                    ConstGauge::new(1i64).encode(m.encode_family(&l)?)?;
                }
            }
        }
        Ok(())
    }
}

struct Inner {
    registry: Registry,
    fleet: Arc<Fleet>,
    watch_events: Family<Labels, Counter>,
    watch_errors: Family<Labels, Counter>,
    diagnoses: Counter,
    diagnosis_seconds: Histogram,
    kustomizations: Gauge,
    events: Family<Labels, Counter>,
    event_errors: Counter,
    levers: Family<Labels, Counter>,
    leader: Gauge,
}

/// The metrics registry and handles (cheap to clone).
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let fleet = Arc::new(Fleet::default());
        registry.register_collector(Box::new(fleet.clone()));
        let watch_events = Family::<Labels, Counter>::default();
        registry.register(
            "cluster_loop_watch_events",
            "Watch events received, by kind and type (apply, delete, init, init-apply, init-done)",
            watch_events.clone(),
        );
        let watch_errors = Family::<Labels, Counter>::default();
        registry.register(
            "cluster_loop_watch_errors",
            "Watch errors, by kind (each retried with backoff)",
            watch_errors.clone(),
        );
        let diagnoses = Counter::default();
        registry.register(
            "cluster_loop_diagnoses",
            "Diagnoses of the fleet run (one per batch of watch changes or deadline)",
            diagnoses.clone(),
        );
        let diagnosis_seconds =
            Histogram::new([0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]);
        registry.register(
            "cluster_loop_diagnosis_duration_seconds",
            "Time to build the snapshot from the stores and diagnose the fleet",
            diagnosis_seconds.clone(),
        );
        let kustomizations = Gauge::default();
        registry.register(
            "cluster_loop_kustomizations",
            "Kustomizations in the latest diagnosis",
            kustomizations.clone(),
        );
        let events = Family::<Labels, Counter>::default();
        registry.register(
            "cluster_loop_events",
            "Kubernetes Events published, by reason",
            events.clone(),
        );
        let event_errors = Counter::default();
        registry.register(
            "cluster_loop_event_errors",
            "Kubernetes Events the API server refused",
            event_errors.clone(),
        );
        let levers = Family::<Labels, Counter>::default();
        registry.register(
            "cluster_loop_levers",
            "Levers pulled, by lever and result (recovered, failed-again, timed-out, error, ...)",
            levers.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "cluster_loop_leader",
            "Whether this replica writes Events and pulls levers: it holds the Lease or runs without leader election (1), or not (0)",
            leader.clone(),
        );
        Metrics(Arc::new(Inner {
            registry,
            fleet,
            watch_events,
            watch_errors,
            diagnoses,
            diagnosis_seconds,
            kustomizations,
            events,
            event_errors,
            levers,
            leader,
        }))
    }

    /// A watch event of `kind` of type `what`.
    pub fn watch_event(&self, kind: &str, what: &str) {
        self.0
            .watch_events
            .get_or_create(&vec![
                ("kind", kind.to_string()),
                ("type", what.to_string()),
            ])
            .inc();
    }

    /// A watch error of `kind`.
    pub fn watch_error(&self, kind: &str) {
        self.0
            .watch_errors
            .get_or_create(&vec![("kind", kind.to_string())])
            .inc();
    }

    /// A diagnosis that took `secs`, with its rows.
    pub fn diagnosed(&self, secs: f64, rows: Vec<Row>) {
        self.0.diagnoses.inc();
        self.0.diagnosis_seconds.observe(secs);
        self.0.kustomizations.set(rows.len() as i64);
        if let Ok(mut r) = self.0.fleet.rows.write() {
            *r = rows;
        }
    }

    /// An Event published with `reason`, or refused.
    pub fn event(&self, reason: &str, ok: bool) {
        if ok {
            self.0
                .events
                .get_or_create(&vec![("reason", reason.to_string())])
                .inc();
        } else {
            self.0.event_errors.inc();
        }
    }

    /// A lever pulled, with its result.
    pub fn lever(&self, lever: &str, result: &str) {
        self.0
            .levers
            .get_or_create(&vec![
                ("lever", lever.to_string()),
                ("result", result.to_string()),
            ])
            .inc();
    }

    /// Whether this replica leads.
    pub fn set_leader(&self, leads: bool) {
        self.0.leader.set(i64::from(leads));
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut s, &self.0.registry);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_encoded_and_replaced_whole() {
        let m = Metrics::new();
        let row = |class: &'static str, lever: Option<&'static str>| Row {
            namespace: "apps".into(),
            name: "web".into(),
            class,
            stuck_secs: 12.0,
            deadline: Some(1_800_000_000.0),
            lever,
        };
        m.diagnosed(
            0.01,
            vec![row("health-check-in-flight", Some("suspend-resume"))],
        );
        let t = m.encode();
        assert!(
            t.contains(r#"cluster_loop_kustomization_class{namespace="apps",name="web",class="health-check-in-flight"} 1"#),
            "{t}"
        );
        assert!(t.contains(r#"cluster_loop_kustomization_lever{namespace="apps",name="web",lever="suspend-resume"} 1"#), "{t}");
        assert!(t.contains("cluster_loop_kustomization_health_check_deadline_timestamp_seconds{namespace=\"apps\",name=\"web\"} 1800000000"), "{t}");
        assert!(t.contains("cluster_loop_diagnoses_total 1"), "{t}");
        m.diagnosed(0.01, vec![row("healthy", None)]);
        let t = m.encode();
        assert!(
            !t.contains("health-check-in-flight"),
            "a stale series stayed: {t}"
        );
        assert!(!t.contains("cluster_loop_kustomization_lever{"), "{t}");
    }
}
