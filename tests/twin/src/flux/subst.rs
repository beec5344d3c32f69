//! Flux post-build variable substitution, modelled on fluxcd/pkg `kustomize/kustomize_varsub.go`
//! (`SubstituteVariables`, `LoadVariables`, `varSubstitution`) and fluxcd/pkg `envsubst`
//! (a fork of drone/envsubst: `parse/scan.go`, `parse/parse.go`, `template.go`, `funcs.go`).
//!
//! The expression language (`${...}` forms, the `$$` escape, strict mode, the parse errors and
//! the variable-name rule) is [`cluster_loop::envsubst`], the workspace's one model of fluxcd/pkg
//! `envsubst` (fleetlint lints with the same code). This module adds what the controller does
//! around it:
//! - Substitution runs only when at least one variable is defined (or the v1.9
//!   `substituteStrategy: Always`), and never on a resource labelled or annotated
//!   `kustomize.toolkit.fluxcd.io/substitute: disabled`.
//! - `substituteFrom` ConfigMaps/Secrets load in order (later keys win), then inline
//!   `substitute` overrides; newlines are removed from values; a missing reference fails with
//!   `substitute from 'ConfigMap/NAME' error: configmaps "NAME" not found` unless `optional`.
//!
//! Left out: the substring, replace and pattern-trim forms (`${var:1:2}`, `${var/a/b}`,
//! `${var#pat}`, `${var%pat}`) are reported as [`SubstError::Unsupported`].

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::Value;

/// Label/annotation key that disables substitution on one resource (value `disabled`).
pub const SUBSTITUTE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/substitute";

/// The variable-name rule of fluxcd/pkg kustomize `varsubRegex`.
pub const VARSUB_REGEX: &str = "^[_[:alpha:]][_[:alpha:][:digit:]]*$";

/// A substitution failure; `Display` gives the upstream message text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubstError {
    /// envsubst `ErrBadSubstitution`.
    #[error("bad substitution")]
    BadSubstitution,
    /// envsubst `ErrMissingClosingBrace`.
    #[error("missing closing brace")]
    MissingClosingBrace,
    /// envsubst `ErrParseVariableName`.
    #[error("unable to parse variable name")]
    ParseVariableName,
    /// envsubst `ErrParseFuncSubstitution`.
    #[error("unable to parse substitution within function")]
    ParseFuncSubstitution,
    /// Strict mode and the variable is not set (`template.go` `errVarNotSet`).
    #[error("variable not set (strict mode): \"{0}\"")]
    VarNotSet(String),
    /// A form upstream supports that the twin does not model.
    #[error("substitution form '{0}' is not modelled by the twin")]
    Unsupported(String),
}

/// Expands `${...}` expressions in `input` (fluxcd/pkg `envsubst.Eval` with the mapper of
/// `varSubstitution`) with the one envsubst model of the workspace, [`cluster_loop::envsubst`]
/// (also fleetlint's): in strict mode a variable missing from `vars` is an error, in lax mode
/// it reads as the empty string. A substring, replace or pattern-trim form is
/// [`SubstError::Unsupported`]: the model parses it but does not evaluate it.
pub fn envsubst(
    input: &str,
    vars: &BTreeMap<String, String>,
    strict: bool,
) -> Result<String, SubstError> {
    use cluster_loop::envsubst as model;
    let t = model::parse(input).map_err(|e| match e.message {
        "missing closing brace" => SubstError::MissingClosingBrace,
        "unable to parse variable name" => SubstError::ParseVariableName,
        "unable to parse substitution within function" => SubstError::ParseFuncSubstitution,
        _ => SubstError::BadSubstitution,
    })?;
    fn unsupported(e: &model::Expr) -> Option<String> {
        let evaluated =
            e.has_default() || matches!(e.op.as_str(), "" | "len" | "^" | "^^" | "," | ",,");
        if evaluated {
            e.nested.iter().find_map(unsupported)
        } else {
            Some(e.text.clone())
        }
    }
    if let Some(form) = t.exprs.iter().find_map(unsupported) {
        return Err(SubstError::Unsupported(form));
    }
    t.eval(vars, strict).map_err(|e| match e {
        model::EvalError::NotSet(name) => SubstError::VarNotSet(name),
    })
}

/// True when a name satisfies [`VARSUB_REGEX`] ([`cluster_loop::envsubst::valid_var_name`]).
pub fn valid_var_name(name: &str) -> bool {
    cluster_loop::envsubst::valid_var_name(name)
}

/// fluxcd/pkg `varSubstitution`: validates the names, then expands. Errors carry the
/// upstream text (`'X' var name is invalid, must match '...'` or
/// `variable substitution failed: ...`).
pub fn var_substitution(
    data: &str,
    vars: &BTreeMap<String, String>,
    strict: bool,
) -> Result<String, String> {
    for k in vars.keys() {
        if !valid_var_name(k) {
            return Err(format!(
                "'{k}' var name is invalid, must match '{VARSUB_REGEX}'"
            ));
        }
    }
    envsubst(data, vars, strict).map_err(|e| format!("variable substitution failed: {e}"))
}

/// One `spec.postBuild.substituteFrom` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubstituteReference {
    /// `ConfigMap` or `Secret`.
    pub kind: String,
    /// Object name in the Kustomization's namespace.
    pub name: String,
    /// A missing object is skipped instead of failing.
    pub optional: bool,
}

/// Reads `spec.postBuild.substituteFrom` of a Kustomization object.
pub fn substitute_from(ks: &Value) -> Vec<SubstituteReference> {
    ks.pointer("/spec/postBuild/substituteFrom")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| SubstituteReference {
                    kind: e["kind"].as_str().unwrap_or_default().to_string(),
                    name: e["name"].as_str().unwrap_or_default().to_string(),
                    optional: e["optional"].as_bool().unwrap_or(false),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Reads a ConfigMap or Secret `(kind, name)` in the Kustomization's namespace: `Ok(None)` is
/// NotFound, `Err` any other API error message.
pub type ObjectGetter<'a> = &'a dyn Fn(&str, &str) -> Result<Option<Value>, String>;

/// fluxcd/pkg kustomize `LoadVariables` + the inline `substitute` override of
/// `SubstituteVariables`.
///
/// `get(kind, name)` reads an object in the Kustomization's namespace: `Ok(None)` is
/// NotFound. Errors: `substitute from 'ConfigMap/NAME' error: configmaps "NAME" not found`.
pub fn load_variables(
    ks: &Value,
    get: ObjectGetter<'_>,
) -> Result<BTreeMap<String, String>, String> {
    let mut vars = BTreeMap::new();
    for r in substitute_from(ks) {
        let plural = match r.kind.as_str() {
            "ConfigMap" => "configmaps",
            "Secret" => "secrets",
            _ => continue,
        };
        let obj = match get(&r.kind, &r.name) {
            Ok(Some(o)) => o,
            Ok(None) if r.optional => continue,
            Ok(None) => {
                return Err(format!(
                    "substitute from '{}/{}' error: {plural} \"{}\" not found",
                    r.kind, r.name, r.name
                ));
            }
            Err(e) => {
                return Err(format!(
                    "substitute from '{}/{}' error: {e}",
                    r.kind, r.name
                ));
            }
        };
        if let Some(data) = obj.get("data").and_then(Value::as_object) {
            for (k, v) in data {
                let s = v.as_str().unwrap_or_default();
                let val = if r.kind == "Secret" {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(s)
                        .unwrap_or_default();
                    String::from_utf8_lossy(&bytes).into_owned()
                } else {
                    s.to_string()
                };
                vars.insert(k.clone(), val.replace('\n', ""));
            }
        }
    }
    if let Some(sub) = ks
        .pointer("/spec/postBuild/substitute")
        .and_then(Value::as_object)
    {
        for (k, v) in sub {
            vars.insert(k.clone(), v.as_str().unwrap_or_default().replace('\n', ""));
        }
    }
    Ok(vars)
}

/// True when the resource opts out with `kustomize.toolkit.fluxcd.io/substitute: disabled`
/// as a label or an annotation.
pub fn substitution_disabled(res: &Value) -> bool {
    ["labels", "annotations"].iter().any(|f| {
        res.pointer(&format!("/metadata/{f}"))
            .and_then(|m| m.get(SUBSTITUTE_ANNOTATION))
            .and_then(Value::as_str)
            == Some("disabled")
    })
}

/// kustomize `resid.Gvk.String()`: `Kind.version.group` with `[noGrp]` for the core group,
/// as used in `post build failed for 'Deployment.v1.apps/NAME': ...`.
pub fn gvk_string(api_version: &str, kind: &str) -> String {
    let (g, v) = match api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => ("[noGrp]".to_string(), api_version.to_string()),
    };
    format!("{kind}.{v}.{g}")
}

/// Substitutes one built resource (its YAML text `doc` and parsed form `res`), the way
/// kustomize-controller's `build` calls `SubstituteVariables` per resource.
///
/// Returns `Ok(None)` when the resource is left unchanged (disabled, or no variables and not
/// `always`). Errors carry the full upstream text:
/// `post build failed for 'Kind.v.group/NAME': envsubst error: variable substitution failed: ...`.
pub fn substitute_resource(
    doc: &str,
    res: &Value,
    vars: &BTreeMap<String, String>,
    strict: bool,
    always: bool,
) -> Result<Option<String>, String> {
    if substitution_disabled(res) {
        return Ok(None);
    }
    if vars.is_empty() && !always {
        return Ok(None);
    }
    var_substitution(doc, vars, strict).map(Some).map_err(|e| {
        format!(
            "post build failed for '{}/{}': envsubst error: {e}",
            gvk_string(
                res["apiVersion"].as_str().unwrap_or_default(),
                res["kind"].as_str().unwrap_or_default()
            ),
            res.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn plain_and_default_forms() {
        let v = vars(&[("A", "x"), ("EMPTY", "")]);
        assert_eq!(envsubst("a=${A}", &v, true).unwrap(), "a=x");
        assert_eq!(envsubst("${B:=dflt}", &v, true).unwrap(), "dflt");
        assert_eq!(envsubst("${B:-dflt}", &v, true).unwrap(), "dflt");
        assert_eq!(envsubst("${B=dflt}", &v, true).unwrap(), "dflt");
        assert_eq!(envsubst("${EMPTY:=d}", &v, true).unwrap(), "d");
        assert_eq!(envsubst("${A:=d}", &v, true).unwrap(), "x");
        assert_eq!(envsubst("${B:=}", &v, true).unwrap(), "");
        assert_eq!(envsubst("${B:=${A}-y}", &v, true).unwrap(), "x-y");
        assert_eq!(
            envsubst("${B:=http://h/p}", &v, true).unwrap(),
            "http://h/p"
        );
    }

    #[test]
    fn escapes_and_literal_dollar() {
        let v = vars(&[("A", "x")]);
        assert_eq!(envsubst("$${A}", &v, true).unwrap(), "${A}");
        assert_eq!(envsubst("$A and $", &v, true).unwrap(), "$A and $");
        assert_eq!(envsubst("cost $$5", &v, true).unwrap(), "cost $5");
    }

    #[test]
    fn strict_vs_lax() {
        let v = vars(&[("A", "x")]);
        assert_eq!(
            envsubst("${MISSING}", &v, true).unwrap_err().to_string(),
            "variable not set (strict mode): \"MISSING\""
        );
        assert_eq!(envsubst("[${MISSING}]", &v, false).unwrap(), "[]");
        // default operators tolerate the unset variable in strict mode
        assert_eq!(envsubst("${MISSING:=d}", &v, true).unwrap(), "d");
    }

    #[test]
    fn functions_and_parse_errors() {
        let v = vars(&[("A", "hello")]);
        assert_eq!(envsubst("${#A}", &v, true).unwrap(), "5");
        assert_eq!(envsubst("${A^^}", &v, true).unwrap(), "HELLO");
        assert_eq!(envsubst("${A^}", &v, true).unwrap(), "Hello");
        assert_eq!(
            envsubst("${A-d}", &v, true).unwrap_err(),
            SubstError::MissingClosingBrace
        );
        assert_eq!(
            envsubst("${}", &v, true).unwrap_err(),
            SubstError::ParseVariableName
        );
        assert_eq!(
            envsubst("${A", &v, true).unwrap_err(),
            SubstError::MissingClosingBrace
        );
    }

    /// The forms the model parses but does not evaluate are an error of the twin, never a
    /// silently wrong value; a default's text is taken as written (fluxcd/pkg envsubst
    /// parse.go `parseDefaultFunc` scans its parameter without `scanEscape`).
    #[test]
    fn unevaluated_forms_are_unsupported_and_default_text_is_literal() {
        let v = vars(&[("A", "hello")]);
        for form in ["${A:1:2}", "${A/l/L}", "${A#he}", "${A%lo}", "${B:=${A:1}}"] {
            assert!(
                matches!(envsubst(form, &v, true), Err(SubstError::Unsupported(_))),
                "{form}"
            );
        }
        assert_eq!(envsubst("${B:=cost $$5}", &v, true).unwrap(), "cost $$5");
    }

    #[test]
    fn invalid_var_names() {
        let v = vars(&[("bad-name", "x")]);
        assert_eq!(
            var_substitution("${bad}", &v, false).unwrap_err(),
            format!("'bad-name' var name is invalid, must match '{VARSUB_REGEX}'")
        );
        assert!(valid_var_name("_a1"));
        assert!(!valid_var_name("1a"));
    }

    #[test]
    fn load_and_override_and_disabled() {
        let ks = json!({"spec": {"postBuild": {
        "substitute": {"A": "inline\n"},
        "substituteFrom": [
            {"kind": "ConfigMap", "name": "vars"},
            {"kind": "Secret", "name": "sec"},
            {"kind": "ConfigMap", "name": "absent", "optional": true}
        ]}}});
        let get = |kind: &str, name: &str| -> Result<Option<Value>, String> {
            Ok(match (kind, name) {
                ("ConfigMap", "vars") => Some(json!({"data": {"A": "cm", "B": "b"}})),
                ("Secret", "sec") => Some(json!({"data": {"T": "dG9rZW4="}})),
                _ => None,
            })
        };
        let v = load_variables(&ks, &get).unwrap();
        assert_eq!(v, vars(&[("A", "inline"), ("B", "b"), ("T", "token")]));

        let ks2 = json!({"spec": {"postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "absent"}]}}});
        assert_eq!(
            load_variables(&ks2, &get).unwrap_err(),
            "substitute from 'ConfigMap/absent' error: configmaps \"absent\" not found"
        );

        let res = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web",
            "annotations": {SUBSTITUTE_ANNOTATION: "disabled"}}});
        assert_eq!(
            substitute_resource("${X}", &res, &v, true, false).unwrap(),
            None
        );
        let res =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
        assert_eq!(
            substitute_resource("${X}", &res, &v, true, false).unwrap_err(),
            "post build failed for 'Deployment.v1.apps/web': envsubst error: variable substitution failed: variable not set (strict mode): \"X\""
        );
        assert_eq!(
            substitute_resource("${X}", &res, &BTreeMap::new(), true, false).unwrap(),
            None
        );
        assert_eq!(gvk_string("v1", "ConfigMap"), "ConfigMap.v1.[noGrp]");
    }
}
