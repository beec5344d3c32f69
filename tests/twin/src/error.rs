//! API errors shaped like the apiserver's `metav1.Status` failures.
//!
//! Messages follow k8s.io/apimachinery/pkg/api/errors/errors.go (NewNotFound, NewAlreadyExists,
//! NewConflict, NewInvalid, NewForbidden, NewMethodNotSupported, NewResourceExpired,
//! NewTooManyRequests, NewBadRequest): e.g. `kustomizations.kustomize.toolkit.fluxcd.io "x" not
//! found`, where the first part is the *qualified resource* (`resource.group`, or just
//! `resource` for the core group).

use serde_json::{Value, json};

/// A failed API call: HTTP `code`, machine `reason` (e.g. `NotFound`), human `message`, and the
/// `details` object (`name`, `group`, `kind`, `causes`) of a `metav1.Status`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message} ({reason}, {code})")]
pub struct StatusError {
    /// HTTP status code, e.g. 404.
    pub code: u16,
    /// `metav1.StatusReason`, e.g. `NotFound`, `Conflict`, `Expired`.
    pub reason: String,
    /// Human-readable message with the upstream shape.
    pub message: String,
    /// `status.details`, or `None`.
    pub details: Option<Value>,
}

/// `resource.group`, or `resource` for the core group (schema.GroupResource.String()).
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn details(group: &str, kind: &str, name: &str) -> Option<Value> {
    let mut d = serde_json::Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    if !kind.is_empty() {
        d.insert("kind".into(), json!(kind));
    }
    Some(Value::Object(d))
}

impl StatusError {
    /// A free-form error.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        StatusError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    /// 404 `<resource>.<group> "<name>" not found` (errors.NewNotFound).
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        StatusError {
            code: 404,
            reason: "NotFound".into(),
            message: format!("{} {:?} not found", qualified(group, resource), name),
            details: details(group, resource, name),
        }
    }

    /// 404 for a path the server does not serve (no name, generic message as upstream).
    pub fn path_not_found() -> Self {
        StatusError {
            code: 404,
            reason: "NotFound".into(),
            message: "the server could not find the requested resource".into(),
            details: None,
        }
    }

    /// 409 `<resource>.<group> "<name>" already exists` (errors.NewAlreadyExists).
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        StatusError {
            code: 409,
            reason: "AlreadyExists".into(),
            message: format!("{} {:?} already exists", qualified(group, resource), name),
            details: details(group, resource, name),
        }
    }

    /// 409 optimistic-concurrency conflict (errors.NewConflict with
    /// storage.ErrConflict's `the object has been modified; please apply your changes to the
    /// latest version and try again`, as returned by the generic registry's update).
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict_msg(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 `Operation cannot be fulfilled on <qr> "<name>": <msg>`.
    pub fn conflict_msg(group: &str, resource: &str, name: &str, msg: &str) -> Self {
        StatusError {
            code: 409,
            reason: "Conflict".into(),
            message: format!(
                "Operation cannot be fulfilled on {} {:?}: {}",
                qualified(group, resource),
                name,
                msg
            ),
            details: details(group, resource, name),
        }
    }

    /// 422 `<Kind>.<group> "<name>" is invalid: <field>: <detail>` (errors.NewInvalid; the
    /// qualified *kind* is used, e.g. `Kustomization.kustomize.toolkit.fluxcd.io`). `causes` are
    /// `(field, reason, message)` triples, reason like `FieldValueRequired`/`FieldValueInvalid`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: &[(&str, &str, &str)]) -> Self {
        let qk = qualified(group, kind);
        let msgs: Vec<String> = causes.iter().map(|(f, _, m)| format!("{f}: {m}")).collect();
        let aggregate = if msgs.len() == 1 {
            msgs[0].clone()
        } else {
            format!("[{}]", msgs.join(", "))
        };
        let mut d = details(group, kind, name).unwrap();
        d["causes"] = causes
            .iter()
            .map(|(f, r, m)| json!({"reason": r, "message": m, "field": f}))
            .collect();
        StatusError {
            code: 422,
            reason: "Invalid".into(),
            message: format!("{} {:?} is invalid: {}", qk, name, aggregate),
            details: Some(d),
        }
    }

    /// 403 (errors.NewForbidden): `<qr> "<name>" is forbidden: <why>` or `<qr> is forbidden:
    /// <why>` when there is no name.
    pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let qr = qualified(group, resource);
        let message = if name.is_empty() {
            format!("{qr} is forbidden: {why}")
        } else {
            format!("{qr} {name:?} is forbidden: {why}")
        };
        StatusError {
            code: 403,
            reason: "Forbidden".into(),
            message,
            details: details(group, resource, name),
        }
    }

    /// 405 (errors.NewMethodNotSupported's shape for a verb the resource does not serve).
    pub fn method_not_allowed() -> Self {
        StatusError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// 410 `too old resource version: <requested> (<oldest available - 1>)` with reason
    /// `Expired` (errors.NewResourceExpired, message from k8s.io/apiserver
    /// pkg/storage/cacher/watch_cache.go).
    pub fn gone(requested: u64, oldest: u64) -> Self {
        StatusError::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// 429 `Too many requests, please try again later.` (errors.NewTooManyRequests).
    pub fn too_many_requests() -> Self {
        let mut e = StatusError::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        );
        e.details = Some(json!({"retryAfterSeconds": 1}));
        e
    }

    /// 400 BadRequest with a free message.
    pub fn bad_request(message: impl Into<String>) -> Self {
        StatusError::new(400, "BadRequest", message)
    }

    /// 401 `Unauthorized`.
    pub fn unauthorized() -> Self {
        StatusError::new(401, "Unauthorized", "Unauthorized")
    }

    /// The error for an arbitrary status code (used by fault injection): reason and message as
    /// errors.NewGenericServerResponse would produce for that code.
    pub fn for_code(code: u16) -> Self {
        match code {
            400 => Self::bad_request("the server rejected our request for an unknown reason"),
            401 => Self::unauthorized(),
            403 => StatusError::new(403, "Forbidden", "forbidden"),
            404 => Self::path_not_found(),
            405 => Self::method_not_allowed(),
            409 => StatusError::new(409, "Conflict", "the server reported a conflict"),
            410 => StatusError::new(410, "Expired", "too old resource version"),
            429 => Self::too_many_requests(),
            500 => StatusError::new(
                500,
                "InternalError",
                "an error on the server (\"\") has prevented the request from succeeding",
            ),
            503 => StatusError::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            504 => StatusError::new(
                504,
                "Timeout",
                "the server was unable to return a response in the time allotted, but may still be processing the request",
            ),
            c => StatusError::new(
                c,
                "",
                format!("the server responded with the status code {c}"),
            ),
        }
    }

    /// The `metav1.Status` object (`kind: Status`, `status: Failure`).
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}
