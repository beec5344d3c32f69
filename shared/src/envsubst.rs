//! Post-build variable substitution exactly as kustomize-controller runs it.
//!
//! Source: fluxcd/pkg `envsubst` (a fork of drone/envsubst; `parse/scan.go`, `parse/parse.go`,
//! `template.go`) as called by fluxcd/pkg `kustomize/kustomize_varsub.go` `varSubstitution`
//! (kustomize-controller v1.9 pins fluxcd/pkg/kustomize v1.39, envsubst v1.7). The rules this
//! module reproduces:
//!
//! - Only `${...}` is an expression; a bare `$VAR` is text (`scanLbrack` needs `${`).
//! - `$$` is an escape for one `$`, so `$${VAR}` ships the literal `${VAR}`.
//! - `${NAME}` reads NAME; NAME is letters, digits and `_`; anything else after `${` is the
//!   error "unable to parse variable name".
//! - Default operators `:=`, `:-`, `:?`, `:+` and `=` (`parseFunc` knows `:` and `=`; a bare
//!   `-`, `?` or `+` after the name is "missing closing brace") return their argument when the
//!   value is empty (`toDefault`) and tolerate an unset variable in strict mode (`isDefaultOp`).
//! - Strict mode (feature gate `StrictPostBuildSubstitutions`, on by default since
//!   kustomize-controller v1.9): a variable read without a default operator that is not defined
//!   fails the whole Kustomization with `variable not set (strict mode): "NAME"`. Without it the
//!   variable becomes the empty string.
//! - Variable names in `substitute`/`substituteFrom` must match `^[_[:alpha:]][_[:alpha:][:digit:]]*$`
//!   (`varsubRegex`), else the Kustomization fails ("var name is invalid").

/// One `${...}` expression found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expr {
    /// Variable name read (`NAME` in `${NAME:=x}`).
    pub name: String,
    /// Operator after the name: "" (plain), ":=", ":-", ":?", ":+", "=", or another function
    /// ("^", ",,", "#", "/", ":" substring, "len" for `${#NAME}`).
    pub op: String,
    /// Byte offset of the `$` in the text.
    pub start: usize,
    /// Byte offset just past the closing `}`.
    pub end: usize,
    /// The expression text (`${NAME:=x}`).
    pub text: String,
    /// Expressions nested in the default argument (`${A:=${B}}`).
    pub nested: Vec<Expr>,
}

impl Expr {
    /// True when the operator supplies a fallback for an unset variable (`isDefaultOp`).
    pub fn has_default(&self) -> bool {
        matches!(
            self.op.as_str(),
            "-" | "+" | "=" | "?" | ":-" | ":+" | ":=" | ":?"
        )
    }
}

/// A parse error: the Kustomization fails with `envsubst error: ...` naming this message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset of the `${` that failed.
    pub at: usize,
    /// Upstream's error text (`unable to parse variable name`, `missing closing brace`,
    /// `bad substitution`, `unable to parse substitution within function`).
    pub message: &'static str,
}

#[derive(Debug, Clone)]
enum Piece {
    Text(String),
    Func {
        name: String,
        op: String,
        args: Vec<Vec<Piece>>,
    },
}

/// A parsed text: pieces to evaluate plus the expressions with their positions.
#[derive(Debug, Clone)]
pub struct Template {
    pieces: Vec<Piece>,
    /// Every top-level expression, in order.
    pub exprs: Vec<Expr>,
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

struct P<'a> {
    s: &'a str,
    i: usize,
}

impl P<'_> {
    fn peek(&self) -> Option<char> {
        self.s[self.i..].chars().next()
    }
    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.i += c.len_utf8();
        Some(c)
    }
    fn starts(&self, t: &str) -> bool {
        self.s[self.i..].starts_with(t)
    }

    /// Top level (`parseAny`): text with `$$` escapes, and `${...}`.
    fn any(&mut self) -> Result<(Vec<Piece>, Vec<Expr>), ParseError> {
        let mut pieces = Vec::new();
        let mut exprs = Vec::new();
        let mut text = String::new();
        while self.i < self.s.len() {
            if self.starts("${") {
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                let (p, e) = self.func()?;
                pieces.push(p);
                exprs.push(e);
            } else if self.starts("$$") {
                // scanEscaped: the first `$` is dropped, the second is literal text
                self.i += 2;
                text.push('$');
            } else {
                text.push(self.bump().unwrap_or_default());
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok((pieces, exprs))
    }

    /// After `${` (`parseFunc`).
    fn func(&mut self) -> Result<(Piece, Expr), ParseError> {
        let start = self.i;
        self.i += 2;
        let err = |message| ParseError { at: start, message };
        if self.peek() == Some('#') {
            // ${#NAME}: length
            self.bump();
            let name = self.ident();
            if name.is_empty() || self.bump() != Some('}') {
                return Err(err("bad substitution"));
            }
            return Ok(self.done(start, name, "len".into(), vec![], vec![]));
        }
        let name = self.ident();
        if name.is_empty() {
            return Err(err("unable to parse variable name"));
        }
        match self.peek() {
            Some('}') => {
                self.bump();
                Ok(self.done(start, name, String::new(), vec![], vec![]))
            }
            Some(':')
                if matches!(
                    self.s[self.i + 1..].chars().next(),
                    Some('=' | '-' | '?' | '+')
                ) =>
            {
                let op = self.s[self.i..self.i + 2].to_string();
                self.i += 2;
                self.default_args(start, name, op)
            }
            Some('=') => {
                self.bump();
                self.default_args(start, name, "=".into())
            }
            Some(':' | ',' | '^' | '/' | '#' | '%') => {
                // substring, casing, replace, remove: the operator characters, then text up to
                // the closing brace (nested `${` counted)
                let op_start = self.i;
                while matches!(self.peek(), Some(':' | ',' | '^' | '/' | '#' | '%')) {
                    self.bump();
                }
                let op = self.s[op_start..self.i].to_string();
                let arg_start = self.i;
                let mut depth = 0usize;
                loop {
                    if self.starts("${") {
                        depth += 1;
                        self.i += 2;
                        continue;
                    }
                    match self.bump() {
                        None => return Err(err("bad substitution")),
                        Some('}') if depth == 0 => break,
                        Some('}') => depth -= 1,
                        _ => {}
                    }
                }
                let arg = self.s[arg_start..self.i - 1].to_string();
                Ok(self.done(start, name, op, vec![vec![Piece::Text(arg)]], vec![]))
            }
            _ => Err(err("missing closing brace")),
        }
    }

    fn default_args(
        &mut self,
        start: usize,
        name: String,
        op: String,
    ) -> Result<(Piece, Expr), ParseError> {
        let mut args = Vec::new();
        let mut nested = Vec::new();
        loop {
            match self.peek() {
                Some('}') => {
                    self.bump();
                    return Ok(self.done(start, name, op, args, nested));
                }
                None => {
                    return Err(ParseError {
                        at: start,
                        message: "unable to parse substitution within function",
                    });
                }
                _ => {}
            }
            if self.starts("${") {
                let (p, e) = self.func()?;
                nested.push(e);
                args.push(vec![p]);
            } else {
                // text up to `}` or `${` (no escapes in a parameter: parseParam's mode has no
                // scanEscape)
                let s = self.i;
                while let Some(c) = self.peek() {
                    if c == '}' || self.starts("${") {
                        break;
                    }
                    self.bump();
                }
                args.push(vec![Piece::Text(self.s[s..self.i].to_string())]);
            }
        }
    }

    fn ident(&mut self) -> String {
        let s = self.i;
        while self.peek().is_some_and(is_ident) {
            self.bump();
        }
        self.s[s..self.i].to_string()
    }

    fn done(
        &self,
        start: usize,
        name: String,
        op: String,
        args: Vec<Vec<Piece>>,
        nested: Vec<Expr>,
    ) -> (Piece, Expr) {
        let e = Expr {
            name: name.clone(),
            op: op.clone(),
            start,
            end: self.i,
            text: self.s[start..self.i].to_string(),
            nested,
        };
        (Piece::Func { name, op, args }, e)
    }
}

/// Parses `s` the way `envsubst.Parse` does.
///
/// Errors: the first [`ParseError`] (upstream stops there too: the whole object fails).
pub fn parse(s: &str) -> Result<Template, ParseError> {
    let mut p = P { s, i: 0 };
    let (pieces, exprs) = p.any()?;
    Ok(Template { pieces, exprs })
}

/// Why an evaluation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalError {
    /// Strict mode: `variable not set (strict mode): "NAME"`.
    NotSet(String),
}

impl Template {
    /// Evaluates with `vars` (`Template.Execute`). `strict`: an unset variable read without a
    /// default operator is an error (the first one, as upstream).
    pub fn eval(
        &self,
        vars: &std::collections::BTreeMap<String, String>,
        strict: bool,
    ) -> Result<String, EvalError> {
        let mut out = String::new();
        eval_pieces(&self.pieces, vars, strict, &mut out)?;
        Ok(out)
    }
}

fn eval_pieces(
    pieces: &[Piece],
    vars: &std::collections::BTreeMap<String, String>,
    strict: bool,
    out: &mut String,
) -> Result<(), EvalError> {
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Func { name, op, args } => {
                let mut a = Vec::new();
                for arg in args {
                    let mut s = String::new();
                    eval_pieces(arg, vars, strict, &mut s)?;
                    a.push(s);
                }
                let v = vars.get(name);
                let is_default = matches!(
                    op.as_str(),
                    "-" | "+" | "=" | "?" | ":-" | ":+" | ":=" | ":?"
                );
                if v.is_none() && strict && !is_default {
                    return Err(EvalError::NotSet(name.clone()));
                }
                let v = v.cloned().unwrap_or_default();
                let r = match op.as_str() {
                    "" => v,
                    "len" => v.chars().count().to_string(),
                    "^" => {
                        let mut c = v.chars();
                        c.next()
                            .map(|f| f.to_uppercase().chain(c).collect())
                            .unwrap_or_default()
                    }
                    "^^" => v.to_uppercase(),
                    "," => {
                        let mut c = v.chars();
                        c.next()
                            .map(|f| f.to_lowercase().chain(c).collect())
                            .unwrap_or_default()
                    }
                    ",," => v.to_lowercase(),
                    _ if is_default => {
                        // toDefault: the first argument when the value is empty
                        if v.is_empty() { a.concat() } else { v }
                    }
                    // substring/replace/remove: not modelled; the value unchanged
                    _ => v,
                };
                out.push_str(&r);
            }
        }
    }
    Ok(())
}

/// `varsubRegex` (`^[_[:alpha:]][_[:alpha:][:digit:]]*$`, ASCII classes in Go's RE2).
pub fn valid_var_name(n: &str) -> bool {
    let mut c = n.chars();
    matches!(c.next(), Some(f) if f == '_' || f.is_ascii_alphabetic())
        && c.all(|x| x == '_' || x.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn vars(p: &[(&str, &str)]) -> BTreeMap<String, String> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn plain_default_escape() {
        let t = parse("a ${X} b ${Y:=dflt} c $${Z} d $HOME $$").unwrap();
        let names: Vec<_> = t.exprs.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["X", "Y"]);
        assert!(t.exprs[1].has_default());
        assert_eq!(
            t.eval(&vars(&[("X", "1")]), true).unwrap(),
            "a 1 b dflt c ${Z} d $HOME $"
        );
        assert_eq!(t.eval(&vars(&[]), true), Err(EvalError::NotSet("X".into())));
        assert_eq!(
            t.eval(&vars(&[]), false).unwrap(),
            "a  b dflt c ${Z} d $HOME $"
        );
    }

    #[test]
    fn nested_default_and_errors() {
        let t = parse("${A:=${B}}").unwrap();
        assert_eq!(t.exprs[0].nested[0].name, "B");
        assert_eq!(t.eval(&vars(&[("B", "b")]), true).unwrap(), "b");
        assert_eq!(
            parse("${}").unwrap_err().message,
            "unable to parse variable name"
        );
        assert_eq!(
            parse("${A-x}").unwrap_err().message,
            "missing closing brace"
        );
        assert_eq!(
            parse("${A B}").unwrap_err().message,
            "missing closing brace"
        );
        assert_eq!(
            parse("${A:=x").unwrap_err().message,
            "unable to parse substitution within function"
        );
    }

    #[test]
    fn var_names() {
        assert!(valid_var_name("GATEWAY_VIP"));
        assert!(valid_var_name("_x1"));
        assert!(!valid_var_name("1x"));
        assert!(!valid_var_name("my-var"));
    }
}
