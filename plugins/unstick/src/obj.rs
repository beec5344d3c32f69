//! Read-only accessors over Kubernetes objects held as raw JSON (`serde_json::Value`), the
//! shape the API server returns. The engine works on raw JSON so that a snapshot can be
//! written as a fixture straight from upstream shapes and so that unknown fields never make
//! a diagnosis fail.

use cluster_loop::conditions::Condition;
use jiff::Timestamp;
use serde_json::Value;

/// Follow `path` (object keys) into `v`.
pub fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    Some(cur)
}

/// String at `path`, if present and a string.
pub fn s<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path)?.as_str()
}

/// Integer at `path`.
pub fn i(v: &Value, path: &[&str]) -> Option<i64> {
    at(v, path)?.as_i64()
}

/// Boolean at `path`; absent is `false`.
pub fn b(v: &Value, path: &[&str]) -> bool {
    at(v, path).and_then(Value::as_bool).unwrap_or(false)
}

/// Array at `path`; absent is empty.
pub fn arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// `metadata.name` (empty when absent).
pub fn name(v: &Value) -> &str {
    s(v, &["metadata", "name"]).unwrap_or("")
}

/// `metadata.namespace` (empty for cluster-scoped objects).
pub fn namespace(v: &Value) -> &str {
    s(v, &["metadata", "namespace"]).unwrap_or("")
}

/// `kind` (empty when absent, e.g. items of a typed list).
pub fn kind(v: &Value) -> &str {
    s(v, &["kind"]).unwrap_or("")
}

/// API group of `apiVersion` (`apps/v1` -> `apps`, `v1` -> ``).
pub fn group(v: &Value) -> &str {
    let av = s(v, &["apiVersion"]).unwrap_or("");
    match av.split_once('/') {
        Some((g, _)) => g,
        None => "",
    }
}

/// A metadata annotation.
pub fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    at(v, &["metadata", "annotations", key])?.as_str()
}

/// Parse an RFC 3339 time as written by the API server (`metav1.Time`) or by the flux CLI
/// (`time.RFC3339Nano`, possibly with a non-UTC offset).
pub fn parse_time(t: &str) -> Option<Timestamp> {
    t.parse::<Timestamp>().ok()
}

/// Find condition `type_` in `status.conditions` (parsed by `cluster_loop::conditions`).
pub fn condition(v: &Value, type_: &str) -> Option<Condition> {
    let all = cluster_loop::conditions::from_object(v);
    cluster_loop::conditions::find(&all, type_).cloned()
}

/// Format a timestamp the way Go's `time.Now().UTC().Format(time.RFC3339Nano)` does:
/// `2006-01-02T15:04:05.999999999Z` with trailing zeros of the fraction trimmed (and no
/// fraction at all when it is zero). flux2 cmd/flux/reconcile.go (`requestReconciliation`)
/// writes `reconcile.fluxcd.io/requestedAt` in this format (in local time; we use UTC).
pub fn rfc3339_nano(t: Timestamp) -> String {
    let secs = t.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = t.subsec_nanosecond();
    if nanos == 0 {
        format!("{secs}Z")
    } else {
        let frac = format!("{nanos:09}");
        format!("{secs}.{}Z", frac.trim_end_matches('0'))
    }
}

/// Human "3m12s" for a number of seconds (negative values get a leading `-`).
pub fn human_secs(secs: i64) -> String {
    let neg = secs < 0;
    let mut n = secs.unsigned_abs();
    let h = n / 3600;
    n %= 3600;
    let m = n / 60;
    let s = n % 60;
    let body = if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    };
    if neg { format!("-{body}") } else { body }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc3339_nano_trims_like_go() {
        let t: Timestamp = "2026-11-30T07:05:01.120000000Z".parse().unwrap();
        assert_eq!(rfc3339_nano(t), "2026-11-30T07:05:01.12Z");
        let t: Timestamp = "2026-11-30T07:05:01Z".parse().unwrap();
        assert_eq!(rfc3339_nano(t), "2026-11-30T07:05:01Z");
        let t: Timestamp = "2026-11-30T07:05:01.000000001Z".parse().unwrap();
        assert_eq!(rfc3339_nano(t), "2026-11-30T07:05:01.000000001Z");
    }

    #[test]
    fn parses_flux_cli_local_offsets() {
        let a = parse_time("2026-11-30T08:05:01.5+01:00").unwrap();
        let b = parse_time("2026-11-30T07:05:01.5Z").unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn condition_lookup() {
        let v = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "HealthCheckFailed", "message": "m",
             "lastTransitionTime": "2026-11-30T07:00:00Z", "observedGeneration": 3}]}});
        let c = condition(&v, "Ready").unwrap();
        assert!(c.is_false());
        assert_eq!(c.reason(), "HealthCheckFailed");
        assert_eq!(c.observed_generation, Some(3));
        assert!(condition(&v, "Reconciling").is_none());
    }

    #[test]
    fn human_durations() {
        assert_eq!(human_secs(0), "0s");
        assert_eq!(human_secs(192), "3m12s");
        assert_eq!(human_secs(3725), "1h2m5s");
        assert_eq!(human_secs(-65), "-1m5s");
    }
}
