//! Thin adapters from the engine's raw-JSON view to `cluster_loop` (durations, effective
//! timeout, kstatus), so the engine keeps working on `serde_json::Value`.

use cluster_loop::duration::parse_go_duration;
use cluster_loop::flux::Kustomization;
use cluster_loop::kstatus::{self, Status};
use jiff::Timestamp;
use serde_json::Value;

/// Parse a Go `time.Duration` string (`5m0s`, `1h`, `5m0.012s`) into seconds
/// (`cluster_loop::duration::parse_go_duration`).
pub fn go_duration_secs(s: &str) -> Option<f64> {
    parse_go_duration(s).ok().map(|d| d.as_secs_f64())
}

/// Effective health-check timeout of a Kustomization in seconds: kustomize-controller api/v1
/// kustomization_types.go `GetTimeout` (`spec.timeout`, else `spec.interval - 30s`, floor
/// 30s), via `cluster_loop::flux::Kustomization::effective_timeout`. An object that does not
/// parse falls back to the CRD's usual 10m interval (9m30s).
pub fn effective_timeout_secs(ks: &Value) -> f64 {
    serde_json::from_value::<Kustomization>(ks.clone())
        .ok()
        .and_then(|k| k.effective_timeout().ok())
        .map(|d| d.as_secs_f64())
        .unwrap_or(570.0)
}

/// kstatus of one object at `now` (cli-utils pkg/kstatus/status, via
/// `cluster_loop::kstatus::compute_at`).
pub fn kstatus(o: &Value, now: Timestamp) -> (Status, String) {
    let r = kstatus::compute_at(o, now);
    (r.status, r.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_durations() {
        assert_eq!(go_duration_secs("5m0s"), Some(300.0));
        assert_eq!(go_duration_secs("9m30s"), Some(570.0));
        assert!((go_duration_secs("5m0.012s").unwrap() - 300.012).abs() < 1e-9);
        assert_eq!(go_duration_secs("10"), None);
    }

    #[test]
    fn effective_timeout_follows_get_timeout() {
        let ks = |spec: Value| json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": "x"}, "spec": spec});
        assert_eq!(
            effective_timeout_secs(&ks(json!({"interval": "10m"}))),
            570.0
        );
        assert_eq!(
            effective_timeout_secs(&ks(json!({"interval": "10m", "timeout": "15m"}))),
            900.0
        );
        assert_eq!(
            effective_timeout_secs(&ks(json!({"interval": "45s"}))),
            30.0
        );
        assert_eq!(
            effective_timeout_secs(&ks(json!({"interval": "1m", "timeout": "5s"}))),
            30.0
        );
    }
}
