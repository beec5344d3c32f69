//! Object identity and JSON reads shared by the pod runtime and the API clients it runs on
//! (`tests/realcluster/src/kubelet.rs` builds REST paths from [`ObjKey`]).

use serde_json::Value;

/// Identity of an object: `apiVersion`, `kind`, namespace (`""` for cluster scope), name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjKey {
    /// `group/version` or `v1`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace, `""` when cluster-scoped.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjKey {
    /// Builds a key.
    pub fn new(api_version: &str, kind: &str, namespace: &str, name: &str) -> Self {
        ObjKey {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
    /// The key of an object value.
    pub fn of(obj: &Value) -> Self {
        ObjKey::new(
            obj["apiVersion"].as_str().unwrap_or_default(),
            obj["kind"].as_str().unwrap_or_default(),
            obj.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            obj.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        )
    }
    /// API group (`""` for core).
    pub fn group(&self) -> &str {
        self.api_version
            .split_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }
}

/// Reads a string at a JSON pointer, `""` when absent.
pub fn s<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// The current time as RFC 3339 with seconds precision (`metav1.Time`).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}
