//! Patch application: JSON merge patch (RFC 7386) and JSON patch (RFC 6902) via the
//! `json-patch` crate, and a strategic merge patch for the built-in kinds.
//!
//! Strategic merge follows k8s.io/apimachinery pkg/util/strategicpatch/patch.go for the parts the
//! twin's built-ins use: lists with a `patchMergeKey` (from the k8s.io/api struct tags, see
//! [`merge_key`]) are merged by key, other lists are replaced; `$patch: delete|replace|merge`
//! directives in maps and list items, `$deleteFromPrimitiveList/<field>`, and
//! `$setElementOrder/<field>` / `$retainKeys` (accepted, order not enforced).

use serde_json::{Map, Value};

use crate::error::StatusError;

/// How a patch body is interpreted (the request's Content-Type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json` (built-in kinds only; 415 for CRDs).
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply; the twin merges like a merge patch
    /// and creates the object if missing, without field ownership).
    Apply,
}

impl PatchKind {
    /// From a Content-Type header value (parameters ignored).
    pub fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchKind::Apply)
            }
            _ => None,
        }
    }
}

/// 415 for an unsupported patch type, message as k8s.io/apiserver
/// pkg/endpoints/handlers/patch.go.
pub fn unsupported_media_type(allowed: &[&str]) -> StatusError {
    StatusError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            allowed.join(", ")
        ),
    )
}

/// Applies `patch` of `kind` to `doc`, returning the patched document. Errors are 400/422 with
/// the library's message (e.g. a json-patch `test` failing or a path that does not exist).
pub fn apply(doc: &Value, kind: PatchKind, patch: &Value) -> Result<Value, StatusError> {
    let mut out = doc.clone();
    match kind {
        PatchKind::Merge | PatchKind::Apply => {
            if !patch.is_object() {
                return Err(StatusError::bad_request(
                    "json: cannot unmarshal into Go value of type map[string]interface {}",
                ));
            }
            json_patch::merge(&mut out, patch);
        }
        PatchKind::Json => {
            let p: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| {
                StatusError::bad_request(format!(
                    "the server rejected our request due to an error in our request: {e}"
                ))
            })?;
            json_patch::patch(&mut out, &p).map_err(|e| {
                StatusError::new(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })?;
        }
        PatchKind::Strategic => {
            out = strategic_merge(doc, patch, "")?;
        }
    }
    Ok(out)
}

/// The strategic-merge key of a list field named `field` (k8s.io/api core/v1 and apps/v1
/// `patchMergeKey` tags), or `None` for lists that are replaced atomically.
pub fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "hostAliases"
        | "resourceClaims" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" => "containerPort",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "tolerations" | "args" | "command" | "envFrom" => return None,
        _ => return None,
    })
}

fn strategic_merge(orig: &Value, patch: &Value, _path: &str) -> Result<Value, StatusError> {
    let (Some(o), Some(p)) = (orig.as_object(), patch.as_object()) else {
        return Ok(patch.clone());
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut r = p.clone();
            r.remove("$patch");
            return Ok(Value::Object(r));
        }
        Some("delete") => return Ok(Value::Null),
        _ => {}
    }
    let mut out: Map<String, Value> = o.clone();
    for (k, pv) in p {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(cur)), Some(del)) = (out.get_mut(field), pv.as_array()) {
                cur.retain(|x| !del.contains(x));
            }
            continue;
        }
        if pv.is_null() {
            out.remove(k);
            continue;
        }
        let merged = match (out.get(k), pv) {
            (Some(ov @ Value::Object(_)), Value::Object(_)) => strategic_merge(ov, pv, k)?,
            (Some(Value::Array(oa)), Value::Array(pa)) => merge_list(k, oa, pa)?,
            (_, Value::Object(pm)) => {
                // New map: strip directives.
                let mut m = pm.clone();
                m.remove("$patch");
                Value::Object(m)
            }
            _ => pv.clone(),
        };
        if merged.is_null() {
            out.remove(k);
        } else {
            out.insert(k.clone(), merged);
        }
    }
    Ok(Value::Object(out))
}

fn merge_list(field: &str, orig: &[Value], patch: &[Value]) -> Result<Value, StatusError> {
    let Some(key) = merge_key(field) else {
        // A `$patch: replace` marker item is meaningless for atomic lists; replace wholesale.
        return Ok(Value::Array(
            patch
                .iter()
                .filter(|x| x.get("$patch").is_none())
                .cloned()
                .collect(),
        ));
    };
    if patch
        .iter()
        .any(|x| x.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Ok(Value::Array(
            patch
                .iter()
                .filter(|x| x.get("$patch").is_none())
                .cloned()
                .collect(),
        ));
    }
    let mut out: Vec<Value> = orig.to_vec();
    for item in patch {
        let Some(kv) = item.get(key) else {
            return Err(StatusError::bad_request(format!(
                "map: {item} does not contain declared merge key: {key}"
            )));
        };
        let pos = out.iter().position(|x| x.get(key) == Some(kv));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                out.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => {
                out[i] = strategic_merge(&out[i], item, field)?;
            }
            (None, false) => {
                let mut m = item.clone();
                if let Some(o) = m.as_object_mut() {
                    o.remove("$patch");
                }
                out.push(m);
            }
        }
    }
    Ok(Value::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merges_containers_and_env_by_name() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}]}});
        let p = json!({"spec": {"containers": [
            {"name": "a", "env": [{"name": "Y", "value": "2"}]},
            {"name": "c", "image": "c:1"}]}});
        let out = apply(&pod, PatchKind::Strategic, &p).unwrap();
        let cs = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs.len(), 3);
        assert_eq!(cs[0]["image"], "a:1");
        assert_eq!(cs[0]["env"].as_array().unwrap().len(), 2);
        let del = json!({"spec": {"containers": [{"name": "b", "$patch": "delete"}]}});
        let out = apply(&out, PatchKind::Strategic, &del).unwrap();
        assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn json_patch_and_merge() {
        let o = json!({"spec": {"suspend": false, "x": 1}});
        let out = apply(
            &o,
            PatchKind::Json,
            &json!([{"op": "replace", "path": "/spec/suspend", "value": true}]),
        )
        .unwrap();
        assert_eq!(out["spec"]["suspend"], true);
        let out = apply(&out, PatchKind::Merge, &json!({"spec": {"x": null}})).unwrap();
        assert!(out["spec"].get("x").is_none());
        assert!(
            apply(
                &o,
                PatchKind::Json,
                &json!([{"op": "test", "path": "/spec/x", "value": 2}])
            )
            .is_err()
        );
    }
}
