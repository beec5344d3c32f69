//! Fault injection and the request log.
//!
//! Faults apply to HTTP requests only (not to in-process [`crate::Store`] calls). Each fault has
//! a matcher (method, path regex, verb, resource: all given parts must match), a trigger (every
//! match, only the Nth match, every Nth match, or the first N matches) and an action.

use regex::Regex;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a fault does to a matching request.
#[derive(Clone, Debug)]
pub enum FaultAction {
    /// Answer with this HTTP status and an upstream-shaped `Status` body
    /// ([`crate::StatusError::for_code`]; 429 carries `Retry-After: 1`).
    Status(u16),
    /// Wait this long, then serve the request normally.
    Latency(Duration),
    /// For watches: send the response headers and the initial/history events, then end the
    /// stream (the client sees the watch close). Other requests are served normally.
    DropWatch,
    /// Close the connection without a response.
    CloseConnection,
}

/// Which requests a fault applies to (`None` = any).
#[derive(Clone, Debug, Default)]
pub struct FaultMatch {
    /// HTTP method, e.g. `PATCH`.
    pub method: Option<String>,
    /// Regex on the URL path, e.g. `/kustomizations/`.
    pub path: Option<Regex>,
    /// API verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: Option<String>,
    /// Resource, `pods/log` style for subresources.
    pub resource: Option<String>,
}

/// When a matching request triggers the fault.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Trigger {
    /// Every matching request.
    #[default]
    Always,
    /// Only the Nth matching request (1-based).
    Nth(u64),
    /// Every Nth matching request (N, 2N, ...).
    Every(u64),
    /// The first N matching requests.
    FirstN(u64),
}

/// A fault.
#[derive(Clone, Debug)]
pub struct Fault {
    /// Matcher.
    pub matcher: FaultMatch,
    /// Trigger.
    pub trigger: Trigger,
    /// Action.
    pub action: FaultAction,
}

impl Fault {
    /// A fault on every request matching `verb` (and optionally `resource`).
    pub fn on_verb(
        verb: &str,
        resource: Option<&str>,
        trigger: Trigger,
        action: FaultAction,
    ) -> Self {
        Fault {
            matcher: FaultMatch {
                verb: Some(verb.to_string()),
                resource: resource.map(str::to_string),
                ..Default::default()
            },
            trigger,
            action,
        }
    }
}

/// The identifier of an installed fault.
pub type FaultId = u64;

struct Installed {
    id: FaultId,
    fault: Fault,
    seen: u64,
    fired: u64,
}

/// The fault table of a twin (shared with its server).
#[derive(Clone, Default)]
pub struct Faults {
    inner: Arc<Mutex<(u64, Vec<Installed>)>>,
}

impl Faults {
    /// Installs a fault; returns its id.
    pub fn add(&self, fault: Fault) -> FaultId {
        let mut g = self.inner.lock().unwrap();
        g.0 += 1;
        let id = g.0;
        g.1.push(Installed {
            id,
            fault,
            seen: 0,
            fired: 0,
        });
        id
    }
    /// Removes one fault.
    pub fn remove(&self, id: FaultId) {
        self.inner.lock().unwrap().1.retain(|f| f.id != id);
    }
    /// Removes all faults.
    pub fn clear(&self) {
        self.inner.lock().unwrap().1.clear();
    }
    /// How many times fault `id` has fired.
    pub fn fired(&self, id: FaultId) -> u64 {
        self.inner
            .lock()
            .unwrap()
            .1
            .iter()
            .find(|f| f.id == id)
            .map(|f| f.fired)
            .unwrap_or(0)
    }
    /// The actions that fire for a request (counters advance).
    pub(crate) fn check(
        &self,
        method: &str,
        path: &str,
        verb: &str,
        resource: &str,
    ) -> Vec<FaultAction> {
        let mut out = Vec::new();
        let mut g = self.inner.lock().unwrap();
        for f in g.1.iter_mut() {
            let m = &f.fault.matcher;
            if m.method
                .as_deref()
                .is_some_and(|x| !x.eq_ignore_ascii_case(method))
                || m.path.as_ref().is_some_and(|r| !r.is_match(path))
                || m.verb.as_deref().is_some_and(|x| x != verb)
                || m.resource.as_deref().is_some_and(|x| x != resource)
            {
                continue;
            }
            f.seen += 1;
            let fire = match f.fault.trigger {
                Trigger::Always => true,
                Trigger::Nth(n) => f.seen == n,
                Trigger::Every(n) => n > 0 && f.seen % n == 0,
                Trigger::FirstN(n) => f.seen <= n,
            };
            if fire {
                f.fired += 1;
                out.push(f.fault.action.clone());
            }
        }
        out
    }
}

/// One served HTTP request.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestRecord {
    /// HTTP method.
    pub method: String,
    /// URL path.
    pub path: String,
    /// Raw query string (may be empty).
    pub query: String,
    /// API verb (get, list, watch, create, update, patch, delete, deletecollection), or the
    /// lower-case method for non-resource paths.
    pub verb: String,
    /// Resource, `pods/log` style for subresources; empty for non-resource paths.
    pub resource: String,
    /// Namespace (empty if none).
    pub namespace: String,
    /// Object name (empty if none).
    pub name: String,
    /// Authenticated user (empty if authentication failed).
    pub user: String,
    /// HTTP status sent (0 when the connection was closed by a fault).
    pub status: u16,
}

/// The request log of a twin.
#[derive(Clone, Default)]
pub struct RequestLog {
    inner: Arc<Mutex<Vec<RequestRecord>>>,
}

impl RequestLog {
    pub(crate) fn push(&self, r: RequestRecord) {
        self.inner.lock().unwrap().push(r);
    }
    /// All records so far, in arrival order of completion of headers.
    pub fn all(&self) -> Vec<RequestRecord> {
        self.inner.lock().unwrap().clone()
    }
    /// Clears the log.
    pub fn reset(&self) {
        self.inner.lock().unwrap().clear();
    }
    /// Number of records with `verb` (and `resource` if given).
    pub fn count(&self, verb: &str, resource: Option<&str>) -> usize {
        self.inner
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.verb == verb && resource.is_none_or(|x| r.resource == x))
            .count()
    }
}
