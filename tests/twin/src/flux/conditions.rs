//! `metav1.Condition` handling as fluxcd/pkg `runtime/conditions` (setter.go) does it:
//! `Set` stamps the object's generation as `observedGeneration`, keeps `lastTransitionTime`
//! unless status/reason/message change, and sorts Stalled, Reconciling, Ready first, then the
//! rest by highest observedGeneration and type.

use serde_json::{Value, json};

use super::cluster::now_rfc3339;

/// A condition list being edited for one object of generation `generation`.
#[derive(Debug, Clone, Default)]
pub struct Conditions {
    /// The conditions, in upstream order after each change.
    pub list: Vec<Value>,
    /// `metadata.generation` of the object.
    pub generation: i64,
}

fn weight(t: &str) -> Option<u8> {
    match t {
        "Stalled" => Some(0),
        "Reconciling" => Some(1),
        "Ready" => Some(2),
        _ => None,
    }
}

impl Conditions {
    /// Reads `status.conditions` of an object.
    pub fn of(obj: &Value) -> Self {
        Conditions {
            list: obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            generation: obj
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0),
        }
    }

    /// The condition of a type.
    pub fn get(&self, t: &str) -> Option<&Value> {
        self.list.iter().find(|c| c["type"] == t)
    }

    /// True when the condition exists with status `True`.
    pub fn is_true(&self, t: &str) -> bool {
        self.get(t).is_some_and(|c| c["status"] == "True")
    }

    /// True when the condition exists with status `False`.
    pub fn is_false(&self, t: &str) -> bool {
        self.get(t).is_some_and(|c| c["status"] == "False")
    }

    /// Sets a condition (conditions.Set).
    pub fn set(&mut self, t: &str, status: &str, reason: &str, message: &str) {
        let mut new = json!({
            "type": t, "status": status, "reason": reason, "message": message,
            "observedGeneration": self.generation,
            "lastTransitionTime": now_rfc3339(),
        });
        if let Some(old) = self.list.iter_mut().find(|c| c["type"] == t) {
            if old["status"] == status && old["reason"] == reason && old["message"] == message {
                new["lastTransitionTime"] = old["lastTransitionTime"].clone();
            }
            *old = new;
        } else {
            self.list.push(new);
        }
        self.sort();
    }

    /// `MarkTrue`.
    pub fn mark_true(&mut self, t: &str, reason: &str, message: &str) {
        self.set(t, "True", reason, message)
    }
    /// `MarkFalse`.
    pub fn mark_false(&mut self, t: &str, reason: &str, message: &str) {
        self.set(t, "False", reason, message)
    }
    /// `MarkUnknown`.
    pub fn mark_unknown(&mut self, t: &str, reason: &str, message: &str) {
        self.set(t, "Unknown", reason, message)
    }
    /// `Delete`.
    pub fn delete(&mut self, t: &str) {
        self.list.retain(|c| c["type"] != t);
    }
    /// Changes only the reason of an existing condition (finalizeStatus' ProgressingWithRetry).
    pub fn set_reason(&mut self, t: &str, reason: &str) {
        if let Some(c) = self.get(t).cloned() {
            let status = c["status"].as_str().unwrap_or_default().to_string();
            let message = c["message"].as_str().unwrap_or_default().to_string();
            self.set(t, &status, reason, &message);
        }
    }

    fn sort(&mut self) {
        self.list.sort_by(|a, b| {
            let (ta, tb) = (
                a["type"].as_str().unwrap_or_default(),
                b["type"].as_str().unwrap_or_default(),
            );
            match (weight(ta), weight(tb)) {
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => {
                    let (ga, gb) = (
                        a["observedGeneration"].as_i64(),
                        b["observedGeneration"].as_i64(),
                    );
                    if ga == gb { ta.cmp(tb) } else { gb.cmp(&ga) }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_transition_time() {
        let mut c = Conditions {
            list: vec![],
            generation: 3,
        };
        c.mark_true("Healthy", "Succeeded", "ok");
        c.mark_unknown("Ready", "Progressing", "Reconciliation in progress");
        c.mark_true("Reconciling", "Progressing", "x");
        let types: Vec<_> = c.list.iter().map(|x| x["type"].clone()).collect();
        assert_eq!(types, vec!["Reconciling", "Ready", "Healthy"]);
        assert_eq!(c.get("Ready").unwrap()["observedGeneration"], 3);
        c.set_reason("Reconciling", "ProgressingWithRetry");
        assert_eq!(
            c.get("Reconciling").unwrap()["reason"],
            "ProgressingWithRetry"
        );
        c.delete("Reconciling");
        assert!(c.get("Reconciling").is_none());
    }
}
