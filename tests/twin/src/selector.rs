//! Label and field selectors, with the syntax of k8s.io/apimachinery pkg/labels/selector.go
//! (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`) and pkg/fields/selector.go
//! (`f=v`, `f==v`, `f!=v`, comma-separated, all must hold).

use serde_json::Value;

use crate::error::StatusError;

#[derive(Clone, Debug, PartialEq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<Req>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c)
            }
            ')' => {
                depth -= 1;
                cur.push(c)
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

fn parse_set(s: &str) -> Option<Vec<String>> {
    let s = s.trim();
    let inner = s.strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    /// Parses `s`; errors are 400 BadRequest `unable to parse requirement: ...` like upstream.
    pub fn parse(s: &str) -> Result<Self, StatusError> {
        let bad = |r: &str| {
            StatusError::bad_request(format!(
                "unable to parse requirement: found '{r}', expected: identifier"
            ))
        };
        let mut reqs = Vec::new();
        for part in split_top(s) {
            if let Some(k) = part.strip_prefix('!') {
                reqs.push(Req::NotExists(k.trim().to_string()));
            } else if let Some((k, v)) = part.split_once("!=") {
                reqs.push(Req::Ne(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = part.split_once("==") {
                reqs.push(Req::Eq(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = part.split_once('=') {
                reqs.push(Req::Eq(k.trim().into(), v.trim().into()));
            } else if let Some(idx) = part.find(" notin ") {
                let set = parse_set(&part[idx + 7..]).ok_or_else(|| bad(&part))?;
                reqs.push(Req::NotIn(part[..idx].trim().into(), set));
            } else if let Some(idx) = part.find(" in ") {
                let set = parse_set(&part[idx + 4..]).ok_or_else(|| bad(&part))?;
                reqs.push(Req::In(part[..idx].trim().into(), set));
            } else if part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                reqs.push(Req::Exists(part));
            } else {
                return Err(bad(&part));
            }
        }
        Ok(LabelSelector(reqs))
    }

    /// True if the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::Ne(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, set) => get(k).is_some_and(|x| set.iter().any(|s| s == x)),
            Req::NotIn(k, set) => get(k).is_none_or(|x| !set.iter().any(|s| s == x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }

    /// True when the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A parsed field selector: `(path, want, equal)` terms that must all hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, String, bool)>);

impl FieldSelector {
    /// Parses `s`. `allow_any_field` false restricts fields to `metadata.name` and
    /// `metadata.namespace` (the CRD rule, apiextensions-apiserver
    /// pkg/registry/customresource/strategy.go GetAttrs): anything else is 400 BadRequest
    /// `field label not supported: <f>`.
    pub fn parse(s: &str, allow_any_field: bool) -> Result<Self, StatusError> {
        let mut terms = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (f, v, eq) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, true)
            } else {
                return Err(StatusError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let f = f.trim();
            if !allow_any_field && f != "metadata.name" && f != "metadata.namespace" {
                return Err(StatusError::bad_request(format!(
                    "field label not supported: {f}"
                )));
            }
            terms.push((f.to_string(), v.trim().to_string(), eq));
        }
        Ok(FieldSelector(terms))
    }

    /// True if every term holds; a missing field compares as `""`.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(f, want, eq)| {
            let ptr = format!("/{}", f.replace('.', "/"));
            let got = match obj.pointer(&ptr) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(v) => v.to_string(),
            };
            (got == *want) == *eq
        })
    }

    /// The value required for `metadata.name` by an `=` term, if any (used for watch by name).
    pub fn name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, _, eq)| f == "metadata.name" && *eq)
            .map(|(_, v, _)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors() {
        let o = json!({"metadata": {"labels": {"app": "web", "tier": "fe"}}});
        for (sel, want) in [
            ("app=web", true),
            ("app==web,tier=fe", true),
            ("app!=web", false),
            ("app in (web, api)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("missing notin (x)", true),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn field_selectors() {
        let o = json!({"metadata": {"name": "a", "namespace": "n"}, "spec": {"nodeName": "x"}});
        assert!(
            FieldSelector::parse("metadata.name=a", false)
                .unwrap()
                .matches(&o)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=a", false)
                .unwrap()
                .matches(&o)
        );
        assert!(FieldSelector::parse("spec.nodeName=x", false).is_err());
        assert!(
            FieldSelector::parse("spec.nodeName=x", true)
                .unwrap()
                .matches(&o)
        );
    }
}
