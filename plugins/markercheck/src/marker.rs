//! Marker comment parsing, the way kyaml `fieldmeta.FieldMeta.Read` / `processShortHand`
//! (kyaml v0.21.1 `fieldmeta/fieldmeta.go`) reads a node's comment.
//!
//! Upstream: the comment text (go-yaml v3 keeps the `#`) has all leading `#` removed
//! (`strings.TrimLeft(c, "#")`), then must decode with Go `encoding/json` into
//! `map[string]string`; the value under the exact key `$imagepolicy` names a setter. Anything
//! else is "not metadata" and silently ignored.

/// The setter suffix of a marker (`ns:policy[:tag|:name|:digest]`); image-automation-controller
/// `internal/update/setters.go` `UpdateWithSetters` defines exactly these four setters per policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Field {
    /// `ns:p` — the full reference `name:tag[@digest]` (`LatestRef.String()`).
    Full,
    /// `ns:p:tag` — `LatestRef.Tag`.
    Tag,
    /// `ns:p:name` — `LatestRef.Name` (ImageRepository `spec.image` verbatim).
    Name,
    /// `ns:p:digest` — `LatestRef.Digest` (may be empty).
    Digest,
}

/// A setter name split into policy namespace, policy name and field.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SetterRef {
    /// Policy namespace.
    pub namespace: String,
    /// Policy name.
    pub name: String,
    /// Which part of the reference the marker sets.
    pub field: Field,
}

impl SetterRef {
    /// Split a setter name `ns:p[:suffix]`. Returns `None` when it cannot name any upstream
    /// setter (no `:`, empty parts, unknown suffix, more than three parts).
    pub fn parse(s: &str) -> Option<SetterRef> {
        let parts: Vec<&str> = s.split(':').collect();
        let (ns, name, field) = match parts.as_slice() {
            [ns, name] => (ns, name, Field::Full),
            [ns, name, "tag"] => (ns, name, Field::Tag),
            [ns, name, "name"] => (ns, name, Field::Name),
            [ns, name, "digest"] => (ns, name, Field::Digest),
            _ => return None,
        };
        if ns.is_empty() || name.is_empty() {
            return None;
        }
        Some(SetterRef {
            namespace: ns.to_string(),
            name: name.to_string(),
            field,
        })
    }

    /// `ns:name`.
    pub fn policy_key(&self) -> String {
        format!("{}:{}", self.namespace, self.name)
    }
}

/// Result of reading one comment the way `fieldmeta.FieldMeta.Read` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// A JSON object of strings with a non-empty `$imagepolicy`: the setter name (Flux then
    /// applies it only if a setter of that exact name exists).
    Marker(String),
    /// Not a marker for Flux. The string explains why, for lint messages.
    NotMarker(NotMarker),
}

/// Why a comment that mentions `$imagepolicy` is not a marker Flux reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotMarker {
    /// Not valid JSON (single quotes, missing braces...); carries the JSON error.
    BadJson(String),
    /// Valid JSON value followed by more text (`{...} # note`).
    TrailingText(String),
    /// JSON but not an object of strings (a number/bool/object value, or an array).
    NotStringObject,
    /// Object without the exact key `$imagepolicy` (e.g. `$imagePolicy`).
    WrongKey(String),
    /// `$imagepolicy` is empty or null.
    Empty,
}

impl std::fmt::Display for NotMarker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotMarker::BadJson(e) => write!(f, "not valid JSON ({e})"),
            NotMarker::TrailingText(t) => write!(f, "text after the JSON object: {t:?}"),
            NotMarker::NotStringObject => write!(f, "not a JSON object of strings"),
            NotMarker::WrongKey(k) => write!(f, "key {k:?} is not \"$imagepolicy\" (case matters)"),
            NotMarker::Empty => write!(f, "\"$imagepolicy\" is empty"),
        }
    }
}

/// Read a comment (including its `#`) like `fieldmeta.FieldMeta.Read` + `processShortHand`.
pub fn parse_comment(comment: &str) -> Parsed {
    let c = comment.trim_start_matches('#');
    // Go json.Unmarshal: the whole input must be exactly one JSON value plus whitespace.
    let mut de = serde_json::Deserializer::from_str(c);
    let value: serde_json::Value = match serde::Deserialize::deserialize(&mut de) {
        Ok(v) => v,
        Err(e) => return Parsed::NotMarker(NotMarker::BadJson(e.to_string())),
    };
    if de.end().is_err() {
        // find the offset of the trailing text for the message
        let trimmed = c.trim_start();
        let mut stream =
            serde_json::Deserializer::from_str(trimmed).into_iter::<serde_json::Value>();
        let _ = stream.next();
        let off = stream.byte_offset();
        return Parsed::NotMarker(NotMarker::TrailingText(trimmed[off..].trim().to_string()));
    }
    let obj = match value {
        serde_json::Value::Object(o) => o,
        // `null` decodes into a nil map without error; any other type is a type error.
        serde_json::Value::Null => return Parsed::NotMarker(NotMarker::Empty),
        _ => return Parsed::NotMarker(NotMarker::NotStringObject),
    };
    if obj.values().any(|v| !v.is_string() && !v.is_null()) {
        return Parsed::NotMarker(NotMarker::NotStringObject);
    }
    match obj.get("$imagepolicy") {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Parsed::Marker(s.clone()),
        Some(_) => Parsed::NotMarker(NotMarker::Empty),
        None => {
            let k = obj
                .keys()
                .find(|k| k.to_ascii_lowercase().contains("imagepolicy"))
                .or_else(|| obj.keys().next())
                .cloned()
                .unwrap_or_default();
            Parsed::NotMarker(NotMarker::WrongKey(k))
        }
    }
}

/// True if a text looks like an attempt at a marker: a `{` and `$imagepolicy` in any case, or
/// a quoted `"imagepolicy"` key without the `$`. Prose that merely names `$imagepolicy` (no
/// brace) is not an attempt.
pub fn mentions_marker(text: &str) -> bool {
    let b = text.as_bytes();
    if memchr::memchr(b'{', b).is_none() {
        return false;
    }
    let ci = |needle: &[u8]| {
        b.windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
    };
    memchr::memchr(b'$', b).is_some() && ci(b"$imagepolicy")
        || ci(b"\"imagepolicy\"")
        || ci(b"'imagepolicy'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flux_shapes() {
        assert_eq!(
            parse_comment(r#"# {"$imagepolicy": "ns:p"}"#),
            Parsed::Marker("ns:p".into())
        );
        assert_eq!(
            parse_comment(r#"## {"$imagepolicy":"ns:p:tag"}  "#),
            Parsed::Marker("ns:p:tag".into())
        );
        assert!(matches!(
            parse_comment(r#"# {"$imagepolicy": "ns:p"} bump me"#),
            Parsed::NotMarker(NotMarker::TrailingText(t)) if t == "bump me"
        ));
        assert!(matches!(
            parse_comment(r#"# {'$imagepolicy': 'ns:p'}"#),
            Parsed::NotMarker(NotMarker::BadJson(_))
        ));
        assert!(matches!(
            parse_comment(r#"# {"$imagePolicy": "ns:p"}"#),
            Parsed::NotMarker(NotMarker::WrongKey(k)) if k == "$imagePolicy"
        ));
        assert!(matches!(
            parse_comment(r#"# {"$imagepolicy": "ns:p", "n": 1}"#),
            Parsed::NotMarker(NotMarker::NotStringObject)
        ));
        // duplicate keys: last wins (Go map decoding)
        assert_eq!(
            parse_comment(r#"# {"$imagepolicy": "a:b", "$imagepolicy": "c:d"}"#),
            Parsed::Marker("c:d".into())
        );
        // escapes are decoded
        assert_eq!(
            parse_comment(r#"# {"\u0024imagepolicy": "a:b"}"#),
            Parsed::Marker("a:b".into())
        );
    }

    #[test]
    fn setter_names() {
        assert_eq!(SetterRef::parse("ns:p").unwrap().field, Field::Full);
        assert_eq!(SetterRef::parse("ns:p:tag").unwrap().field, Field::Tag);
        assert!(SetterRef::parse("ns/p").is_none());
        assert!(SetterRef::parse("ns:p:version").is_none());
        assert!(SetterRef::parse("p").is_none());
    }
}
