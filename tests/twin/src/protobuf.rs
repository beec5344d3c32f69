//! Decoding of `application/vnd.kubernetes.protobuf` request bodies for the few kinds kubectl's
//! typed generators send that way (`kubectl create namespace|configmap|secret|serviceaccount`,
//! `kubectl auth can-i`).
//!
//! Wire format (k8s.io/apimachinery pkg/runtime/serializer/protobuf/protobuf.go): the 4-byte
//! magic `k8s\0`, then a `runtime.Unknown` message {1: TypeMeta{1: apiVersion, 2: kind}, 2: raw,
//! 3: contentEncoding, 4: contentType}; `raw` is the object in the field numbering of
//! k8s.io/api core/v1 generated.proto and apimachinery meta/v1 generated.proto (ObjectMeta: 1
//! name, 2 generateName, 3 namespace, 11 labels, 12 annotations, 14 finalizers; maps are
//! repeated {1: key, 2: value} entries). Other kinds get 415, as the twin answers in JSON only.

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::error::StatusError;

/// One decoded field: number and payload.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = *b.get(*i)?;
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

fn fields(b: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i)?;
        let (num, wt) = (key >> 3, key & 7);
        match wt {
            0 => out.push((num, Field::Varint(varint(b, &mut i)?))),
            1 => i += 8,
            2 => {
                let len = varint(b, &mut i)? as usize;
                let end = i.checked_add(len)?;
                out.push((num, Field::Bytes(b.get(i..end)?)));
                i = end;
            }
            5 => i += 4,
            _ => return None,
        }
    }
    Some(out)
}

fn string(f: &Field<'_>) -> String {
    match f {
        Field::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Field::Varint(v) => v.to_string(),
    }
}

fn map_entry(f: &Field<'_>, bytes_value: bool) -> Option<(String, Value)> {
    let Field::Bytes(b) = f else { return None };
    let mut k = String::new();
    let mut v = Value::String(String::new());
    for (n, x) in fields(b)? {
        match n {
            1 => k = string(&x),
            2 => {
                v = if bytes_value {
                    match x {
                        Field::Bytes(raw) => {
                            json!(base64::engine::general_purpose::STANDARD.encode(raw))
                        }
                        _ => Value::Null,
                    }
                } else {
                    json!(string(&x))
                }
            }
            _ => {}
        }
    }
    Some((k, v))
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let mut finalizers = Vec::new();
    for (n, f) in fields(b)? {
        match n {
            1 => {
                m.insert("name".into(), json!(string(&f)));
            }
            2 => {
                m.insert("generateName".into(), json!(string(&f)));
            }
            3 => {
                m.insert("namespace".into(), json!(string(&f)));
            }
            6 => {
                m.insert("resourceVersion".into(), json!(string(&f)));
            }
            11 => {
                let (k, v) = map_entry(&f, false)?;
                labels.insert(k, v);
            }
            12 => {
                let (k, v) = map_entry(&f, false)?;
                annotations.insert(k, v);
            }
            14 => finalizers.push(json!(string(&f))),
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Some(Value::Object(m))
}

fn unsupported() -> StatusError {
    StatusError::new(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
    )
}

/// Decodes a protobuf request body into the JSON object, or 415 for kinds the twin does not
/// decode, 400 for a malformed body.
pub fn decode(body: &[u8]) -> Result<Value, StatusError> {
    let bad = || StatusError::bad_request("the protobuf body could not be decoded");
    let rest = body.strip_prefix(b"k8s\0").ok_or_else(bad)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (n, f) in fields(rest).ok_or_else(bad)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (tn, tf) in fields(tm).ok_or_else(bad)? {
                    match tn {
                        1 => api_version = string(&tf),
                        2 => kind = string(&tf),
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(r)) => raw = r,
            _ => {}
        }
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    let mut data = Map::new();
    let mut binary = Map::new();
    let mut string_data = Map::new();
    let fs = fields(raw).ok_or_else(bad)?;
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => {
            for (n, f) in fs {
                match (n, &f) {
                    (1, Field::Bytes(b)) => {
                        obj.insert("metadata".into(), object_meta(b).ok_or_else(bad)?);
                    }
                    (2, Field::Bytes(b)) => {
                        let fin: Vec<Value> = fields(b)
                            .ok_or_else(bad)?
                            .iter()
                            .filter(|(n, _)| *n == 1)
                            .map(|(_, f)| json!(string(f)))
                            .collect();
                        obj.insert("spec".into(), json!({"finalizers": fin}));
                    }
                    _ => {}
                }
            }
        }
        ("v1", "ConfigMap") => {
            for (n, f) in fs {
                match (n, &f) {
                    (1, Field::Bytes(b)) => {
                        obj.insert("metadata".into(), object_meta(b).ok_or_else(bad)?);
                    }
                    (2, _) => {
                        let (k, v) = map_entry(&f, false).ok_or_else(bad)?;
                        data.insert(k, v);
                    }
                    (3, _) => {
                        let (k, v) = map_entry(&f, true).ok_or_else(bad)?;
                        binary.insert(k, v);
                    }
                    (4, Field::Varint(v)) => {
                        obj.insert("immutable".into(), json!(*v != 0));
                    }
                    _ => {}
                }
            }
        }
        ("v1", "Secret") => {
            for (n, f) in fs {
                match (n, &f) {
                    (1, Field::Bytes(b)) => {
                        obj.insert("metadata".into(), object_meta(b).ok_or_else(bad)?);
                    }
                    (2, _) => {
                        let (k, v) = map_entry(&f, true).ok_or_else(bad)?;
                        data.insert(k, v);
                    }
                    (3, _) => {
                        obj.insert("type".into(), json!(string(&f)));
                    }
                    (4, _) => {
                        let (k, v) = map_entry(&f, false).ok_or_else(bad)?;
                        string_data.insert(k, v);
                    }
                    (5, Field::Varint(v)) => {
                        obj.insert("immutable".into(), json!(*v != 0));
                    }
                    _ => {}
                }
            }
        }
        ("v1", "ServiceAccount") => {
            for (n, f) in fs {
                if let (1, Field::Bytes(b)) = (n, &f) {
                    obj.insert("metadata".into(), object_meta(b).ok_or_else(bad)?);
                }
            }
        }
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            // spec = 2 {resourceAttributes = 1 {namespace 1, verb 2, group 3, version 4,
            // resource 5, subresource 6, name 7}, nonResourceAttributes = 2 {path 1, verb 2}}
            // (k8s.io/api authorization/v1 generated.proto).
            for (n, f) in fs {
                if let (2, Field::Bytes(spec)) = (n, &f) {
                    let mut spec_json = Map::new();
                    for (sn, sf) in fields(spec).ok_or_else(bad)? {
                        let (key, names): (&str, &[&str]) = match sn {
                            1 => (
                                "resourceAttributes",
                                &[
                                    "",
                                    "namespace",
                                    "verb",
                                    "group",
                                    "version",
                                    "resource",
                                    "subresource",
                                    "name",
                                ],
                            ),
                            2 => ("nonResourceAttributes", &["", "path", "verb"]),
                            _ => continue,
                        };
                        let Field::Bytes(ab) = sf else { continue };
                        let mut attrs = Map::new();
                        for (an, af) in fields(ab).ok_or_else(bad)? {
                            if let Some(name) = names.get(an as usize).filter(|n| !n.is_empty()) {
                                attrs.insert((*name).to_string(), json!(string(&af)));
                            }
                        }
                        spec_json.insert(key.into(), Value::Object(attrs));
                    }
                    obj.insert("spec".into(), Value::Object(spec_json));
                }
            }
        }
        _ => return Err(unsupported()),
    }
    if !data.is_empty() {
        obj.insert("data".into(), Value::Object(data));
    }
    if !binary.is_empty() {
        obj.insert("binaryData".into(), Value::Object(binary));
    }
    // stringData is write-only: merged into data (base64) like the Secret REST strategy.
    if !string_data.is_empty() {
        let d = obj
            .entry("data")
            .or_insert_with(|| Value::Object(Map::new()));
        for (k, v) in string_data {
            let enc = base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or(""));
            d[k] = json!(enc);
        }
    }
    Ok(Value::Object(obj))
}
