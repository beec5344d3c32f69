//! Helpers for tests on the real cluster: polling with a deadline and reading Flux objects the
//! way the assertions need them.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{Cluster, FLUX_NS};

/// Polls `f` every 500 ms until it returns `Some`, and returns that.
/// Panics with `what` after `timeout` (a test helper: the panic is the test failure).
pub fn eventually<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < until,
            "timed out after {timeout:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The condition `type_` of `obj` (`status.conditions[]`), or `Value::Null`.
pub fn condition(obj: &Value, type_: &str) -> Value {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["type"] == type_).cloned())
        .unwrap_or(Value::Null)
}

impl Cluster {
    /// `kubectl ARGS -o json`, parsed; `Value::Null` when kubectl fails or prints no JSON.
    pub fn get_json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        self.kubectl(&a)
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or(Value::Null)
    }

    /// The Kustomization `name` in flux-system as JSON (`Value::Null` when absent).
    pub fn kustomization(&self, name: &str) -> Value {
        self.get_json(&["-n", FLUX_NS, "get", "kustomization", name])
    }
}
