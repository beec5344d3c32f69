//! What the automation would commit: setter values applied and each changed file re-serialized
//! the way kyaml's `kio.LocalPackageWriter` / `ByteWriter` (go-yaml v3 encoder, 2-space indent,
//! sequence indent preserved per document) writes it.
//!
//! Modelled exactly (kyaml v0.21.1): CRLF -> LF (`ByteReader.Read`), documents re-joined with
//! `---` and empty documents dropped (`splitDocuments` + `IsMissingOrNull`), a leading `---`
//! dropped, blank lines removed (go-yaml v3 keeps no blank lines; fluxcd/image-automation-controller
//! issue 844) except after the document's head comment (not after an explicit leading `---`),
//! unchanged YAML 1.1 non-string values of other markers double-quoted (check.rs), trailing
//! spaces removed, one space before a line comment, one final newline, and the new value
//! quoted per kyaml
//! `yaml.FormatNonStringStyle` (YAML 1.1 non-strings such as `1.10`, `123`, `yes` double-quoted,
//! quoted values stay quoted) and go-yaml's plain-scalar analysis.
//!
//! Flow collections already written as go-yaml writes them (`[a, "b"]`, `{k: v}`, one line,
//! by column 80) are kept as they are.
//!
//! Not modelled: go-yaml re-indentation of non-canonical layouts, other flow collections,
//! multi-line flow scalars, folded scalars, re-escaping of double-quoted escapes, comments
//! after the document's last node (except after a flow scalar at column 0), a block scalar
//! ending a file without a final newline, an empty value with a line comment. A file with any of those gets `exact = false` and
//! the reasons, instead of a claim of byte-exactness. Each rule is checked against the real
//! image-automation-controller v1.1.2 by the differential test
//! (tests/real/tests/real/long/markercheck).

use crate::scan::{FileScan, split_documents};
use crate::yamltree::{Lines, Node, Style};

/// One scalar replacement.
#[derive(Debug, Clone)]
pub struct Replacement {
    /// Byte range of the scalar token in the normalized text.
    pub start: usize,
    /// End (exclusive).
    pub end: usize,
    /// The new scalar value.
    pub value: String,
    /// The source style of the scalar.
    pub style: Style,
}

/// A simulated rewrite of one file.
#[derive(Debug, Clone)]
pub struct Rewrite {
    /// New file contents.
    pub text: String,
    /// True when every construct in the file is one this model reproduces byte for byte.
    pub exact: bool,
    /// Why not exact (line: reason).
    pub caveats: Vec<String>,
}

/// kyaml `yaml.IsValueNonString`: would `value`, unquoted, read as a non-string in YAML 1.1
/// (go-yaml v2 resolve)?
pub fn is_yaml11_non_string(value: &str) -> bool {
    if value.is_empty() || value.contains('\n') {
        return false;
    }
    const BOOL_NULL: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false",
        "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", "~", "null", "Null", "NULL",
        ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
        ".NaN", ".NAN", "<<",
    ];
    if BOOL_NULL.contains(&value) {
        return true;
    }
    // flow collections, mappings, sequences, comments also decode to non-strings
    if value.starts_with(['[', '{', '#'])
        || value.contains(": ")
        || value.ends_with(':')
        || value.starts_with("- ")
        || value == "-"
    {
        return true;
    }
    let plain = value.replace('_', "");
    let (neg, digits) = match plain.strip_prefix(['-', '+']) {
        Some(d) => (true, d),
        None => (false, plain.as_str()),
    };
    let _ = neg;
    if !digits.is_empty() {
        let int = if let Some(h) = digits.strip_prefix("0x") {
            !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit())
        } else if let Some(b) = digits.strip_prefix("0b") {
            !b.is_empty() && b.chars().all(|c| c == '0' || c == '1')
        } else if digits.len() > 1 && digits.starts_with('0') {
            digits.chars().all(|c| ('0'..='7').contains(&c))
        } else {
            digits.chars().all(|c| c.is_ascii_digit())
        };
        if int {
            return true;
        }
    }
    // go-yaml v2 float: ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$
    let b = digits.as_bytes();
    let mut i = 0;
    let mut mant = false;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
        mant = true;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if !mant && i == s {
            return false;
        }
        mant = true;
    }
    if !mant {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == s {
            return false;
        }
    }
    i == b.len()
}

/// go-yaml v3 `yaml_emitter_analyze_scalar` (block context): may `value` be written plain?
pub fn plain_allowed(value: &str) -> bool {
    if value.is_empty() || value.starts_with("---") || value.starts_with("...") {
        return false;
    }
    let b = value.as_bytes();
    if b[0] == b' ' || b[b.len() - 1] == b' ' || value.contains('\n') || value.contains('\t') {
        return false;
    }
    for (i, &c) in b.iter().enumerate() {
        let next_ws = b.get(i + 1).is_none_or(|&n| n == b' ');
        if i == 0 {
            match c {
                b'#' | b',' | b'[' | b']' | b'{' | b'}' | b'&' | b'*' | b'!' | b'|' | b'>'
                | b'\'' | b'"' | b'%' | b'@' | b'`' => return false,
                b'?' | b':' | b'-' if next_ws => return false,
                _ => {}
            }
        } else {
            match c {
                b':' if next_ws => return false,
                b'#' if b[i - 1] == b' ' => return false,
                _ => {}
            }
        }
        if c < 0x20 || c == 0x7f {
            return false;
        }
    }
    value.chars().all(go_printable)
}

/// go-yaml v3 `is_printable` (yamlprivateh.go): LF, 0x20-0x7E, U+00A0-U+D7FF,
/// U+E000-U+FFFD except the BOM. Everything else (tabs, C0/C1 controls, U+0085, characters
/// outside the BMP) is a "special character" that only a double-quoted scalar can hold.
fn go_printable(c: char) -> bool {
    matches!(c as u32, 0x0A | 0x20..=0x7E | 0xA0..=0xD7FF | 0xE000..=0xFFFD) && c != '\u{FEFF}'
}

/// go-yaml v3 `yaml_emitter_write_double_quoted_scalar` escapes (upper-case hex).
fn double_quote(v: &str) -> String {
    let mut s = String::with_capacity(v.len() + 2);
    s.push('"');
    for c in v.chars() {
        let esc = !go_printable(c)
            || matches!(
                c,
                '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}' | '"' | '\\'
            );
        if !esc {
            s.push(c);
            continue;
        }
        match c {
            '\0' => s.push_str("\\0"),
            '\u{07}' => s.push_str("\\a"),
            '\u{08}' => s.push_str("\\b"),
            '\t' => s.push_str("\\t"),
            '\n' => s.push_str("\\n"),
            '\u{0B}' => s.push_str("\\v"),
            '\u{0C}' => s.push_str("\\f"),
            '\r' => s.push_str("\\r"),
            '\u{1B}' => s.push_str("\\e"),
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\u{85}' => s.push_str("\\N"),
            '\u{2028}' => s.push_str("\\L"),
            '\u{2029}' => s.push_str("\\P"),
            c if (c as u32) <= 0xFF => s.push_str(&format!("\\x{:02X}", c as u32)),
            c if (c as u32) <= 0xFFFF => s.push_str(&format!("\\u{:04X}", c as u32)),
            c => s.push_str(&format!("\\U{:08X}", c as u32)),
        }
    }
    s.push('"');
    s
}

/// go-yaml v3 `yaml_emitter_analyze_scalar`: may `value` be single-quoted? Not with special
/// characters, tabs or line breaks (breaks are not modelled: always double-quoted here).
fn single_quote_allowed(value: &str) -> bool {
    value
        .chars()
        .all(|c| go_printable(c) && c != '\t' && c != '\n')
}

/// How go-yaml writes the new value of a scalar whose source style was `style`, after kyaml's
/// `FormatNonStringStyle` for a string-typed setter schema (`setters.go` `setterSchema` uses
/// `spec.StringProperty()`).
pub fn render_scalar(value: &str, style: Style) -> String {
    let mut style = style;
    // FormatNonStringStyle (YAML 1.1 non-strings), and go-yaml's forceQuoting for a !!str node
    // whose new value resolves to another tag in YAML 1.2 (`0o17`, empty = null)
    if style == Style::Plain && (is_yaml11_non_string(value) || go_yaml_v3_tag(value) != "str") {
        style = Style::DoubleQuoted;
    }
    match style {
        Style::SingleQuoted if single_quote_allowed(value) => {
            format!("'{}'", value.replace('\'', "''"))
        }
        Style::DoubleQuoted | Style::SingleQuoted => double_quote(value),
        _ => {
            if plain_allowed(value) {
                value.to_string()
            } else if single_quote_allowed(value) {
                format!("'{}'", value.replace('\'', "''"))
            } else {
                double_quote(value)
            }
        }
    }
}

/// The tag go-yaml v3 `resolve` gives a plain scalar (`null`, `bool`, `int`, `float` or
/// `str`); go-yaml v3 resolves YAML 1.2 core forms, `_` ignored in numbers (resolve.go).
pub fn go_yaml_v3_tag(v: &str) -> &'static str {
    match v {
        "" | "~" | "null" | "Null" | "NULL" => return "null",
        "true" | "True" | "TRUE" | "false" | "False" | "FALSE" => return "bool",
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => return "float",
        _ => {}
    }
    if !v.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+' || c == '.') {
        return "str";
    }
    let plain = v.replace('_', "");
    let digits = plain.strip_prefix(['-', '+']).unwrap_or(&plain);
    let radix = |p: &str, ok: fn(char) -> bool| {
        digits
            .strip_prefix(p)
            .or_else(|| digits.strip_prefix(&p.to_uppercase()))
            .is_some_and(|d| !d.is_empty() && d.chars().all(ok))
    };
    // Go strconv.ParseInt(s, 0, 64): 0x, 0o, 0b prefixes, a leading 0 means octal
    let int = radix("0x", |c| c.is_ascii_hexdigit())
        || radix("0o", |c| ('0'..='7').contains(&c))
        || radix("0b", |c| c == '0' || c == '1')
        || (!digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit())
            && (!digits.starts_with('0') || digits.chars().all(|c| ('0'..='7').contains(&c))));
    if int {
        return "int";
    }
    // yamlStyleFloat ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ (sans `_`)
    if !digits.contains('_')
        && is_yaml11_non_string(&plain)
        && plain.contains(|c: char| c.is_ascii_digit())
    {
        return "float";
    }
    "str"
}

/// Why a plain scalar's new value is written with an explicit tag: kyaml keeps the node's
/// resolved tag (`!!float` for `1.0`), `FormatNonStringStyle` retags only YAML 1.1
/// non-strings, and go-yaml v3 `encoder.node` writes a kept tag explicitly when the new value
/// no longer resolves to it (`newTag: !!float v1.1`). Read from source, not reproduced.
pub fn kept_tag_caveat(old: &str, new: &str) -> Option<String> {
    let t = go_yaml_v3_tag(old);
    if t == "str" {
        return None;
    }
    let retagged = is_yaml11_non_string(new) && t != "null";
    if retagged || go_yaml_v3_tag(new) == t {
        return None;
    }
    Some(format!(
        "the old value {old:?} is a plain {t} (go-yaml tag !!{t}); kyaml keeps that tag, so go-yaml may write it explicitly (`!!{t} {new}`), which kustomize then fails to decode; quote the old value (not modelled)"
    ))
}

/// go-yaml v3's text of a flow collection whose elements it writes as they are in `text`:
/// `{k: v, ...}` / `[a, ...]` with one blank after `:` and `,`, scalars plain (allowed plain
/// in flow context, no flow indicators), single-quoted or double-quoted exactly as go-yaml
/// quotes their value, untagged and without anchors; `None` for anything else (multi-line,
/// tags, anchors, aliases, block scalars, an empty scalar, a re-escaped quoted scalar).
fn canonical_flow(text: &str, n: &Node) -> Option<String> {
    let elem = |e: &Node| -> Option<String> {
        match e {
            Node::Scalar(s) => {
                if s.tagged || s.anchored {
                    return None;
                }
                let raw = &text[s.start..s.end];
                let ok = match s.style {
                    Style::Plain => {
                        plain_allowed(&s.value)
                            && !s.value.contains([',', '[', ']', '{', '}'])
                            && raw == s.value
                    }
                    Style::SingleQuoted => {
                        single_quote_allowed(&s.value)
                            && raw == format!("'{}'", s.value.replace('\'', "''"))
                    }
                    Style::DoubleQuoted => raw == double_quote(&s.value),
                    _ => false,
                };
                ok.then(|| raw.to_string())
            }
            Node::Map { flow: true, .. } | Node::Seq { flow: true, .. } => canonical_flow(text, e),
            _ => None,
        }
    };
    match n {
        Node::Map {
            entries,
            flow: true,
            ..
        } => {
            let mut parts = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                parts.push(format!("{}: {}", elem(k)?, elem(v)?));
            }
            Some(format!("{{{}}}", parts.join(", ")))
        }
        Node::Seq {
            items, flow: true, ..
        } => {
            let parts: Option<Vec<String>> = items.iter().map(elem).collect();
            Some(format!("[{}]", parts?.join(", ")))
        }
        _ => None,
    }
}

/// A comment line after the document's last content (a foot comment), unless that content is
/// a flow scalar on a line at column 0: go-yaml v3 attaches such a comment to the innermost
/// node that ends there and writes it at that node's indentation, in ways not modelled (the
/// real image-automation-controller v1.1.2 moved `# end` at column 0 after `images:` items to
/// column 2 or 4, after a `containers:` item of a file without a final newline to column 8,
/// and put a blank line before it after a block scalar; the differential test, class
/// foot-comment). Returns the comment's 0-based line in `text`, or `None`.
fn unsure_foot_comment(
    text: &str,
    lines: &Lines,
    root: &Node,
    comments: &[crate::yamltree::Comment],
) -> Option<usize> {
    let mut n = root;
    loop {
        match n {
            Node::Map {
                entries,
                flow: false,
                ..
            } if !entries.is_empty() => n = &entries[entries.len() - 1].1,
            Node::Seq {
                items, flow: false, ..
            } if !items.is_empty() => n = &items[items.len() - 1],
            _ => break,
        }
    }
    let (end, safe) = match n {
        Node::Scalar(s) => (
            s.end.saturating_sub(1).max(s.start),
            !matches!(s.style, Style::Literal | Style::Folded),
        ),
        other => (other.start(), false),
    };
    let end = end.min(text.len().saturating_sub(1));
    let after = lines.line(end);
    let ls = lines.start_of(end);
    let safe = safe && !text[ls..].starts_with(' ') && !text[ls..].starts_with('-');
    comments
        .iter()
        .map(|c| lines.line(c.start))
        .find(|l| *l > after)
        .filter(|_| !safe)
}

/// How go-yaml v3 writes a new single-line value into a node that was a block scalar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockRender {
    /// Still a block scalar: this header (`|-` / `>-`, no trailing newline so chomping `-`),
    /// the line comment after it, the value on the next line at the parent's indentation + 2
    /// (`yaml_emitter_write_literal_scalar` / `_folded_scalar`, `write_block_scalar_hints`).
    Header(&'static str),
    /// Written as this flow scalar on the key's line instead.
    Inline(String),
    /// Outside what is modelled byte for byte (reason).
    NotModelled(&'static str),
}

/// The new value of a marked block scalar (`key: | # {"$imagepolicy": ...}`).
///
/// kyaml's setter keeps the node's style and sets only the value (image-automation-controller
/// `internal/update/filter.go` `set`); `yaml.FormatNonStringStyle` then makes a YAML 1.1
/// non-string (`1.10`) double-quoted; go-yaml's `yaml_emitter_select_scalar_style` falls back
/// to double quotes when a block is not allowed (empty value, trailing space, control
/// characters). The old value ended in a newline (clip chomping) and the new one does not, so
/// the header becomes `|-`: such a marker always changes the file once, even for the same
/// image.
pub fn render_block(value: &str, style: Style) -> BlockRender {
    let block_allowed = !value.is_empty()
        && !value.ends_with([' ', '\t'])
        && !value.chars().any(|c| c.is_control());
    if is_yaml11_non_string(value) || !block_allowed {
        if value.contains('\n') {
            return BlockRender::NotModelled("multi-line value for a block scalar (not modelled)");
        }
        return BlockRender::Inline(double_quote(value));
    }
    if value.starts_with([' ', '\t']) {
        return BlockRender::NotModelled(
            "value with leading blanks for a block scalar (go-yaml adds an indentation indicator; not modelled)",
        );
    }
    if value.contains('\n') {
        return BlockRender::NotModelled("multi-line value for a block scalar (not modelled)");
    }
    match style {
        Style::Literal => BlockRender::Header("|-"),
        // folding only breaks lines at blanks: a value without blanks stays one line
        Style::Folded if !value.contains(' ') => BlockRender::Header(">-"),
        _ => BlockRender::NotModelled(
            "folded block scalar with blanks in the new value (go-yaml may fold it; not modelled)",
        ),
    }
}

/// kyaml `yaml.DeriveSeqIndentStyle` (kyaml/yaml/util.go): "wide" or "compact" from the first
/// block sequence entry whose key line is `key:`.
pub fn derive_seq_indent(original: &str) -> &'static str {
    let lines: Vec<&str> = original.split('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        let Some((pre, _)) = line.split_once("- ") else {
            continue;
        };
        if !pre.trim_matches(' ').is_empty() {
            continue;
        }
        let mut key_line = "";
        for j in (0..i).rev() {
            let l = lines[j];
            if l.trim_matches(' ').starts_with('#') {
                continue;
            }
            key_line = l.split('#').next().unwrap_or("");
            break;
        }
        if key_line.is_empty() {
            continue;
        }
        let key_ind = key_line.len() - key_line.trim_start_matches(' ').len();
        let t = key_line.trim_matches(' ');
        if t.matches(':').count() != 1 || !t.ends_with(':') {
            continue;
        }
        if pre.len() == key_ind {
            return "compact";
        }
        if pre.len() as isize - key_ind as isize == 2 {
            return "wide";
        }
    }
    "compact"
}

fn col_at(text: &str, off: usize) -> usize {
    let ls = text[..off].rfind('\n').map(|i| i + 1).unwrap_or(0);
    off - ls
}

struct Layout<'a> {
    text: &'a str,
    lines: &'a Lines,
    split: &'a [&'a str],
    wide: bool,
    caveats: Vec<String>,
    /// (first content line, last line) 0-based line indices of block scalar content.
    block_lines: Vec<(usize, usize)>,
    line_base: usize,
    /// Chunk offsets of block scalars the change replaces (go-yaml writes them anew).
    replaced_blocks: Vec<usize>,
    /// For each replaced block scalar: (start offset, content indentation go-yaml writes).
    block_indent: Vec<(usize, usize)>,
    /// Text go-yaml writes before a node that the source does not have: (offset, text).
    inserts: Vec<(usize, String)>,
    /// Plain scalars go-yaml writes quoted: (start, end, quoted text).
    quoted: Vec<(usize, usize, String)>,
}

impl Layout<'_> {
    /// A plain scalar (key or value) go-yaml writes differently from the source:
    /// - `<<` untagged: go-yaml v3 decode.go gives a plain `<<` the tag `!!merge`, and
    ///   encode.go drops a tag only when `resolve("", value)` gives it back, which it does not
    ///   for `<<` (resolve.go: `resolveTable['<']` is 0, so the value resolves to `!!str`):
    ///   the key is written `!!merge <<`.
    /// - a value starting with `---` or `...`: `yaml_emitter_analyze_scalar` forbids plain,
    ///   so it is written single-quoted (double-quoted if single quotes are not allowed).
    /// - anything else our plain analysis would not write plain: flagged, not modelled.
    fn plain_scalar(&mut self, s: &crate::yamltree::Scalar) {
        if s.style != Style::Plain || s.tagged || s.value.is_empty() {
            return;
        }
        if s.value == "<<" {
            self.inserts.push((s.start, "!!merge ".to_string()));
        } else if s.value.contains('\n') || self.text[s.start..s.end].contains('\n') {
            // multi-line plain scalars are flagged elsewhere (fuzz regression
            // multi-line-plain-dots-key-quoted-across-lines: a replacement across lines)
        } else if s.value.starts_with("---") || s.value.starts_with("...") {
            let q = if single_quote_allowed(&s.value) {
                format!("'{}'", s.value.replace('\'', "''"))
            } else {
                double_quote(&s.value)
            };
            self.quoted.push((s.start, s.end, q));
        } else if !plain_allowed(&s.value) {
            self.caveat(
                s.start,
                "plain scalar go-yaml may write quoted (not modelled)",
            );
        }
    }

    /// Is the flow collection `n` at `start` written in the source exactly as go-yaml v3
    /// writes it: on one line, `{k: v, k: v}` / `[a, b]`, every element a scalar (or such a
    /// collection) in a style go-yaml keeps as it is, ending by column 80 (go-yaml's
    /// `best_width`: past it `yaml_emitter_emit_flow_*_item` breaks the line)? Then the rewrite
    /// keeps it byte for byte (the differential test, classes flow-seq and flow-map).
    fn canonical_flow_here(&self, n: &Node, start: usize) -> bool {
        let Some(r) = canonical_flow(self.text, n) else {
            return false;
        };
        self.text[start..].starts_with(&r) && col_at(self.text, start) + r.chars().count() <= 80
    }

    fn caveat(&mut self, off: usize, why: &str) {
        let l = self.lines.line(off) + 1 + self.line_base;
        if self.caveats.len() < 20 {
            self.caveats.push(format!("line {l}: {why}"));
        }
    }

    /// Check go-yaml's canonical indentation: mappings indent 2, sequences per seq style.
    fn check(&mut self, n: &Node, expect: Option<usize>, parent_key_col: usize) {
        match n {
            Node::Map {
                entries,
                flow,
                start,
            } => self.check_map(n, entries, *flow, *start, expect),
            Node::Seq { items, flow, start } => self.check_seq(n, items, *flow, *start, expect),
            Node::Scalar(s) => self.check_scalar(s, parent_key_col),
            Node::Alias { .. } => {}
        }
    }

    /// A mapping `n` (its `entries`) whose keys go-yaml writes at column `expect`.
    fn check_map(
        &mut self,
        n: &Node,
        entries: &[(Node, Node)],
        flow: bool,
        start: usize,
        expect: Option<usize>,
    ) {
        if flow {
            if !entries.is_empty() && !self.canonical_flow_here(n, start) {
                self.caveat(start, "flow mapping (go-yaml re-spaces flow collections)");
            }
            return;
        }
        for (k, v) in entries {
            if let Node::Scalar(ks) = k {
                self.plain_scalar(ks);
            }
            // a tagged key (`!!merge <<`) starts at its tag
            let kstart = match k {
                Node::Scalar(ks) if ks.tagged => {
                    let pre = self.text[..ks.start].trim_end_matches(' ');
                    pre.rfind([' ', '\n']).map_or(0, |i| i + 1)
                }
                _ => k.start(),
            };
            let kc = col_at(self.text, kstart);
            if let Some(e) = expect
                && kc != e
            {
                self.caveat(k.start(), &format!("key indented {kc}, go-yaml writes {e}"));
            }
            if !matches!(k, Node::Scalar(s) if matches!(s.style, Style::Plain | Style::DoubleQuoted | Style::SingleQuoted) && !s.value.contains('\n'))
            {
                self.caveat(k.start(), "complex mapping key");
            } else if matches!(k, Node::Scalar(s) if s.start == s.end) {
                self.caveat(k.start(), "empty mapping key (not modelled)");
            }
            match v {
                Node::Map { flow: false, .. } => self.check(v, Some(kc + 2), kc),
                Node::Seq { flow: false, .. } => {
                    let e = if self.wide { kc + 2 } else { kc };
                    self.check(v, Some(e), kc)
                }
                _ => self.check(v, None, kc),
            }
        }
    }

    /// A sequence `n` (its `items`) whose dashes go-yaml writes at column `expect`.
    fn check_seq(
        &mut self,
        n: &Node,
        items: &[Node],
        flow: bool,
        start: usize,
        expect: Option<usize>,
    ) {
        if flow {
            if !items.is_empty() && !self.canonical_flow_here(n, start) {
                self.caveat(start, "flow sequence (go-yaml re-spaces flow collections)");
            }
            return;
        }
        // granit starts an indentless sequence at its first item: use the `-`.
        let mut dstart = start;
        if self.text.as_bytes().get(dstart) != Some(&b'-') {
            let ls = self.text[..dstart].rfind('\n').map(|i| i + 1).unwrap_or(0);
            if let Some(i) = self.text[ls..dstart].rfind('-') {
                dstart = ls + i;
            }
        }
        let dash = col_at(self.text, dstart);
        if let Some(e) = expect
            && dash != e
        {
            self.caveat(
                dstart,
                &format!("sequence indented {dash}, go-yaml writes {e}"),
            );
        }
        for it in items {
            match it {
                Node::Map { flow: false, .. } => self.check(it, Some(dash + 2), dash),
                Node::Seq { flow: false, .. } => self.check(it, Some(dash + 2), dash),
                _ => self.check(it, None, dash),
            }
        }
    }

    /// A scalar: empty values with comments, block scalars, escapes, tags.
    fn check_scalar(&mut self, s: &crate::yamltree::Scalar, parent_key_col: usize) {
        let raw = &self.text[s.start..s.end];
        // (an empty plain scalar has an empty span; granit gives it the value `~`)
        if s.style == Style::Plain && s.start == s.end && !s.tagged {
            // `key: &a # {"$imagepolicy": ...}` with an empty value: the real
            // image-automation-controller v1.1.2 wrote `key: &a` and dropped the
            // comment (the differential test, empty value + anchor); go-yaml's
            // comment placement on an empty (null) node is not modelled
            let le = self.text[s.start..]
                .find('\n')
                .map_or(self.text.len(), |i| s.start + i);
            if self.text[s.start..le].contains(" #") || self.text[s.start..le].starts_with('#') {
                self.caveat(
                    s.start,
                    "empty value with a line comment (go-yaml may drop the comment; not modelled)",
                );
            }
        }
        match s.style {
            Style::Literal | Style::Folded if self.replaced_blocks.contains(&s.start) => {
                // written anew by go-yaml: the old header and content do not matter
                self.block_indent.push((s.start, parent_key_col + 2));
                let first = self.lines.line(s.start) + 1;
                let last = self.lines.line(s.end.saturating_sub(1).max(s.start));
                if last >= first {
                    self.block_lines.push((first, last));
                }
            }
            Style::Literal | Style::Folded => self.check_block(s, raw, parent_key_col),
            Style::DoubleQuoted if raw.contains('\\') => {
                self.caveat(s.start, "double-quoted scalar with escapes");
            }
            _ if raw.contains('\n') => self.caveat(s.start, "multi-line flow scalar"),
            _ => {}
        }
        if s.tagged {
            let raw_tag_merge =
                s.value == "<<" && self.text[..s.start].trim_end().ends_with("!!merge");
            if !raw_tag_merge {
                self.caveat(s.start, "explicit tag");
            }
        }
        self.plain_scalar(s);
    }

    /// A block scalar (`|`, `>`) the change does not replace: its header and chomping, its
    /// indentation, and its content lines (kept as they are).
    fn check_block(&mut self, s: &crate::yamltree::Scalar, raw: &str, parent_key_col: usize) {
        if s.style == Style::Folded {
            self.caveat(s.start, "folded block scalar");
        }
        let header = raw.split('\n').next().unwrap_or("");
        let header = header.split('#').next().unwrap_or("").trim_end();
        if header.chars().any(|c| c.is_ascii_digit()) {
            self.caveat(s.start, "block scalar with an indentation indicator");
        }
        // kyaml parses the file's last document without a final newline as it
        // is: a block scalar ending there has none (the real controller wrote
        // `|-` for `|`; the differential test, no-final-newline)
        let eof_without_newline = s.end >= self.text.len() && !self.text.ends_with('\n');
        let chomp = if s.value.is_empty() || !s.value.ends_with('\n') || eof_without_newline {
            "-"
        } else if s.value.ends_with("\n\n") {
            "+"
        } else {
            ""
        };
        if !header.starts_with(['|', '>']) {
            self.caveat(s.start, "block scalar header not found");
        } else if header.get(1..).unwrap_or("") != chomp {
            self.caveat(
                s.start,
                "block scalar chomping indicator differs from go-yaml's choice",
            );
        }
        let first = self.lines.line(s.start) + 1;
        let mut last = self.lines.line(s.end.saturating_sub(1).max(s.start));
        // go-yaml writes the value, so with clip or strip chomping the blank
        // lines after the content are not part of it and are not written
        // (emitterc.go yaml_emitter_write_literal_scalar writes the value's
        // lines only); with keep (`|+`) they are the value's final newlines
        if chomp != "+" {
            while last >= first && self.split.get(last).is_some_and(|l| l.trim().is_empty()) {
                last -= 1;
            }
        }
        let want = parent_key_col + 2;
        // the first non-empty line fixes the block indentation
        if let Some(l) = self
            .split
            .iter()
            .skip(first)
            .take((last + 1).saturating_sub(first))
            .find(|l| !l.trim().is_empty())
            && l.len() - l.trim_start_matches(' ').len() != want
        {
            self.caveat(
                s.start,
                &format!("block scalar content not indented {want}"),
            );
        }
        if last >= first {
            self.block_lines.push((first, last));
        }
    }
}

/// Blank lines after a comment block that go-yaml v3 keeps, by their line index: `true` =
/// written as one blank line, `false` = go-yaml may keep it but this layout is not modelled.
///
/// go-yaml v3 `yaml_parser_scan_comments` (scannerc.go) makes comment lines that start on the
/// line right after content and are followed by a blank line a *foot* comment of that content
/// (`first_empty && start_mark.line == foot_line && token.typ != yaml_VALUE_TOKEN`); the
/// encoder moves a key's foot to the next key as a tail comment (encode.go), and the emitter,
/// after writing a foot or tail comment, sets `foot_indent` so that the next
/// `yaml_emitter_write_indent` at that indentation writes one extra line break (emitterc.go
/// `yaml_emitter_process_foot_comment`, `yaml_emitter_write_indent`). So
/// `a: 1\n# c\n\nb: 2` keeps its blank line, while `a: 1\n\n# c\nb: 2` (a head comment of
/// `b`) and a comment after `key:` lose it. Modelled exactly only for a mapping key followed
/// by comments at the next key's column; other shapes are flagged.
fn foot_blanks(
    lines: &[&str],
    nlines: usize,
    first_content_line: usize,
    in_block: &[bool],
    comment_starts: &std::collections::HashMap<usize, usize>,
) -> std::collections::HashMap<usize, bool> {
    let blank = |i: usize| lines[i].trim().is_empty();
    let comment = |i: usize| !in_block[i] && lines[i].trim_start().starts_with('#');
    let indent = |i: usize| lines[i].len() - lines[i].trim_start().len();
    let mut out = std::collections::HashMap::new();
    for li in 1..nlines {
        if in_block[li] || !blank(li) || blank(li - 1) || !comment(li - 1) {
            continue;
        }
        let mut top = li - 1;
        while top > 0 && comment(top - 1) {
            top -= 1;
        }
        if top == 0 || top <= first_content_line || blank(top - 1) {
            continue; // document head comment, or a comment after a blank line (head)
        }
        let prev = top - 1;
        let mut nx = li;
        while nx < nlines && blank(nx) {
            nx += 1;
        }
        if nx >= nlines {
            continue; // end of the document: no blank line is written
        }
        let c = indent(top);
        let same_col = (top..li).all(|i| indent(i) == c);
        let code = match comment_starts.get(&prev) {
            Some(&cs) if cs <= lines[prev].len() => &lines[prev][..cs],
            _ => lines[prev],
        };
        let code = code.trim_end();
        let after_key = code.ends_with(':');
        if after_key && c > indent(prev) {
            continue; // a head comment of the nested content: not kept
        }
        let sure = same_col
            && !after_key
            && !in_block[prev]
            && !code.ends_with(['|', '>', '-', '+'])
            && indent(prev) >= c
            && !lines[prev].trim_start().starts_with("- ")
            && !lines[nx].trim_start().starts_with('-')
            && indent(nx) == c
            && !comment(nx)
            && indent(prev) == c;
        out.insert(li, sure);
    }
    out
}

/// Re-serialize `f` with `reps` applied, the way kyaml writes a changed file.
pub fn rewrite(f: &FileScan, reps: &[Replacement]) -> Rewrite {
    let text = &f.text;
    let mut caveats = Vec::new();
    let chunks = split_documents(text).unwrap_or_default();
    let n = chunks.len();
    let mut out_docs: Vec<String> = Vec::new();
    let file_lines = Lines::new(text);
    // linear in documents and replacements: docs by offset, replacements sorted by start
    let docs = f.documents();
    let docs_at: std::collections::HashMap<usize, &crate::scan::Doc> =
        docs.iter().map(|d| (d.offset, d)).collect();
    let mut sorted: Vec<&Replacement> = reps.iter().collect();
    sorted.sort_by_key(|r| (r.start, r.end));
    for (i, (cs, ce)) in chunks.iter().enumerate() {
        let Some(doc) = docs_at.get(cs).copied() else {
            continue;
        };
        let Some(root) = &doc.tree.root else { continue };
        if root.is_null() {
            continue;
        }
        if doc.tree.extra_documents {
            caveats.push(format!(
                "document at offset {cs}: a second document in one chunk"
            ));
        }
        let chunk = Chunk {
            doc,
            root,
            start: *cs,
            end: *ce,
            last: i == n - 1,
            line_base: file_lines.line(*cs),
        };
        out_docs.push(rewrite_chunk(text, &chunk, &sorted, &mut caveats));
    }
    let text = out_docs.join("---\n");
    Rewrite {
        exact: caveats.is_empty(),
        text,
        caveats,
    }
}

/// One document chunk of a file (kyaml's splitDocuments) and its parsed tree.
struct Chunk<'a> {
    doc: &'a crate::scan::Doc,
    root: &'a Node,
    /// Byte range of the chunk in the file's text.
    start: usize,
    end: usize,
    /// The file's last chunk (no separator follows it).
    last: bool,
    /// Number of lines before the chunk.
    line_base: usize,
}

/// One chunk re-serialized with the replacements `sorted` (sorted by range, the whole file's)
/// that fall into it; what is not modelled goes to `caveats`.
fn rewrite_chunk(
    text: &str,
    c: &Chunk<'_>,
    sorted: &[&Replacement],
    caveats: &mut Vec<String>,
) -> String {
    let (cs, ce, line_base, root, doc) = (c.start, c.end, c.line_base, c.root, c.doc);
    let mut chunk = text[cs..ce].to_string();
    if !c.last {
        chunk.push('\n');
    }
    let wide = derive_seq_indent(&chunk) == "wide";
    let cl = Lines::new(&chunk);
    let lines: Vec<&str> = chunk.split('\n').collect();
    // the chunk was parsed with a `\n` appended when a separator follows it, so a block
    // scalar's span can end one byte past `ce` (dropping such a replacement made a
    // rewrite that changed nothing: fuzz regression block-scalar-then-second-document)
    let chunk_end = if !c.last { ce + 1 } else { ce };
    let from = sorted.partition_point(|r| r.start < cs);
    let to = sorted.partition_point(|r| r.start <= chunk_end);
    let mine: Vec<&Replacement> = sorted[from..to.max(from)]
        .iter()
        .copied()
        .filter(|r| r.end <= chunk_end)
        .collect();
    let mut lay = Layout {
        text: &chunk,
        lines: &cl,
        split: &lines,
        wide,
        caveats: Vec::new(),
        block_lines: Vec::new(),
        line_base,
        replaced_blocks: mine
            .iter()
            .filter(|r| matches!(r.style, Style::Literal | Style::Folded))
            .map(|r| r.start - cs)
            .collect(),
        block_indent: Vec::new(),
        inserts: Vec::new(),
        quoted: Vec::new(),
    };
    lay.check(root, Some(0), 0);
    caveats.append(&mut lay.caveats);
    if let Some(l) = unsure_foot_comment(&chunk, &cl, root, &doc.tree.comments) {
        caveats.push(format!(
            "line {}: comment after the document's last node (go-yaml may move it into that node's indentation; not modelled)",
            line_base + l + 1
        ));
    }
    let layout_inserts = std::mem::take(&mut lay.inserts);
    let layout_quoted = std::mem::take(&mut lay.quoted);
    let mut block_lines = lay.block_lines;
    let block_indent = lay.block_indent;
    let mut placed = Placed {
        chunk: &chunk,
        cl: &cl,
        line_base,
        block_indent: &block_indent,
        by_line: Default::default(),
        after_line: Default::default(),
        dropped_blocks: Vec::new(),
    };
    let mut prev: Option<(usize, usize)> = None;
    for r in mine {
        // one replacement per scalar: a second one for the same (or an overlapping) range
        // cannot be applied to the text and would be a no-op upstream
        if prev.is_some_and(|(ps, pe)| (ps, pe) == (r.start, r.end) || r.start < pe) {
            continue;
        }
        prev = Some((r.start, r.end));
        let s = r.start - cs;
        let e = r.end - cs;
        if matches!(r.style, Style::Literal | Style::Folded) {
            placed.block(r, s, e, &mut block_lines, caveats);
        } else {
            placed.flow(r, s, e, caveats);
        }
    }
    placed.layout_edits(layout_inserts, layout_quoted);
    let Placed {
        by_line,
        after_line,
        dropped_blocks,
        ..
    } = placed;
    let comment_starts: std::collections::HashMap<usize, usize> = doc
        .tree
        .comments
        .iter()
        .map(|c| (cl.line(c.start), c.start - cl.start_of(c.start)))
        .collect();
    let first_content_line = cl.line(root.start());
    let nlines = if chunk.ends_with('\n') {
        lines.len() - 1
    } else {
        lines.len()
    };
    let (next_is_comment, next_content_indent) = lookahead(&lines, nlines);
    block_lines.sort_unstable();
    block_lines.dedup();
    // first content lines of replaced block scalars (their old content is dropped)
    let replaced_content = dropped_blocks;
    let mut in_block = vec![false; nlines + 1];
    for &(a, b) in &block_lines {
        for x in in_block.iter_mut().take((b + 1).min(nlines)).skip(a) {
            *x = true;
        }
    }
    let foot = foot_blanks(
        &lines,
        nlines,
        first_content_line,
        &in_block,
        &comment_starts,
    );
    Emit {
        lines: &lines,
        nlines,
        line_base,
        first_content_line,
        block_lines,
        replaced_content,
        by_line,
        after_line,
        comment_starts,
        next_is_comment,
        next_content_indent,
        foot,
        caveats,
        out: String::with_capacity(chunk.len()),
        blank_run_done: false,
        saw_blank_after_comment: false,
        saw_doc_start: false,
    }
    .run()
}

/// For each of the first `nlines` lines (and one past them): whether the next non-blank line
/// is a comment, and the indentation of the next non-blank, non-comment line (reverse pass,
/// linear).
fn lookahead(lines: &[&str], nlines: usize) -> (Vec<bool>, Vec<Option<usize>>) {
    let mut next_is_comment = vec![false; nlines + 1];
    let mut next_content_indent: Vec<Option<usize>> = vec![None; nlines + 1];
    for li in (0..nlines).rev() {
        let t = lines[li].trim();
        if t.is_empty() {
            next_is_comment[li] = next_is_comment[li + 1];
            next_content_indent[li] = next_content_indent[li + 1];
        } else {
            next_is_comment[li] = t.starts_with('#');
            next_content_indent[li] = if t.starts_with('#') {
                next_content_indent[li + 1]
            } else {
                Some(lines[li].len() - lines[li].trim_start().len())
            };
        }
    }
    (next_is_comment, next_content_indent)
}

/// The replacements of one chunk placed on its lines.
struct Placed<'a> {
    chunk: &'a str,
    cl: &'a Lines,
    line_base: usize,
    /// For each replaced block scalar: (start offset, content indentation go-yaml writes).
    block_indent: &'a [(usize, usize)],
    /// Replacements in this chunk, by line: (start column, end column, text).
    by_line: std::collections::BTreeMap<usize, Vec<(usize, usize, String)>>,
    /// A block scalar written anew: the value line go-yaml puts after its header line.
    after_line: std::collections::HashMap<usize, String>,
    /// First content lines of replaced block scalars (their old content is dropped).
    dropped_blocks: Vec<usize>,
}

impl Placed<'_> {
    /// A block scalar (`|`, `>`) replaced at chunk offsets `s..e`: its header, and its content
    /// written anew (or kept, with a caveat, when not modelled).
    fn block(
        &mut self,
        r: &Replacement,
        s: usize,
        e: usize,
        block_lines: &mut Vec<(usize, usize)>,
        caveats: &mut Vec<String>,
    ) {
        let (chunk, cl, line_base, block_indent) =
            (self.chunk, self.cl, self.line_base, self.block_indent);
        let (by_line, after_line, dropped_blocks) = (
            &mut self.by_line,
            &mut self.after_line,
            &mut self.dropped_blocks,
        );
        let l = cl.line(s);
        let ls = cl.start_of(s);
        // the header token (`|`, `>-`, `|+2`...) ends at a blank or the line end
        let hdr_end = chunk[s..]
            .find([' ', '\t', '\n'])
            .map_or(chunk.len(), |i| s + i);
        let indent = block_indent
            .iter()
            .find(|(o, _)| *o == s)
            .map_or(0, |(_, i)| *i);
        match render_block(&r.value, r.style) {
            BlockRender::Header(h) => {
                dropped_blocks.push(l + 1);
                after_line.insert(l, format!("{}{}", " ".repeat(indent), r.value));
                by_line
                    .entry(l)
                    .or_default()
                    .push((s - ls, hdr_end - ls, h.to_string()));
            }
            BlockRender::Inline(v) => {
                dropped_blocks.push(l + 1);
                by_line
                    .entry(l)
                    .or_default()
                    .push((s - ls, hdr_end - ls, v));
            }
            BlockRender::NotModelled(why) => {
                caveats.push(format!("line {}: {why}", line_base + l + 1));
                // keep the old block as it is
                block_lines.retain(|(a, _)| *a != l + 1);
                block_lines.push((l + 1, cl.line(e.saturating_sub(1).max(s))));
            }
        }
    }

    /// A flow scalar replaced at chunk offsets `s..e`.
    fn flow(&mut self, r: &Replacement, s: usize, e: usize, caveats: &mut Vec<String>) {
        let (chunk, cl, line_base) = (self.chunk, self.cl, self.line_base);
        if r.style == Style::Plain
            && let Some(why) = kept_tag_caveat(&chunk[s..e], &r.value)
        {
            caveats.push(format!("line {}: {why}", line_base + cl.line(s) + 1));
        }
        if chunk[s..e].contains('\n') {
            caveats.push(format!(
                "line {}: marker on a multi-line {} scalar: go-yaml writes the new value on one line and drops the continuation lines (not modelled)",
                line_base + cl.line(s) + 1,
                match r.style {
                    Style::DoubleQuoted => "double-quoted",
                    Style::SingleQuoted => "single-quoted",
                    _ => "plain",
                }
            ));
            return;
        }
        let l = cl.line(s);
        let ls = cl.start_of(s);
        let v = render_scalar(&r.value, r.style);
        // go-yaml folds a flow scalar at a blank past column 80 (best_width)
        if v.contains(' ') && chunk[ls..s].chars().count() + v.chars().count() > 80 {
            caveats.push(format!(
                "line {}: new value with blanks past column 80 (go-yaml folds it; not modelled)",
                line_base + l + 1
            ));
        }
        self.by_line.entry(l).or_default().push((s - ls, e - ls, v));
    }

    /// Text the layout inserts, and plain scalars go-yaml writes quoted (unless replaced).
    fn layout_edits(&mut self, inserts: Vec<(usize, String)>, quoted: Vec<(usize, usize, String)>) {
        let (cl, by_line) = (self.cl, &mut self.by_line);
        for (at, t) in inserts {
            let ls = cl.start_of(at);
            by_line
                .entry(cl.line(at))
                .or_default()
                .push((at - ls, at - ls, t));
        }
        for (a, b, q) in quoted {
            if by_line
                .get(&cl.line(a))
                .is_some_and(|v| v.iter().any(|r| r.0 == a - cl.start_of(a)))
            {
                continue; // the value is replaced anyway
            }
            let ls = cl.start_of(a);
            by_line
                .entry(cl.line(a))
                .or_default()
                .push((a - ls, b - ls, q));
        }
    }
}

/// Writes one chunk's lines the way go-yaml does, with the replacements placed on them.
struct Emit<'a> {
    lines: &'a [&'a str],
    nlines: usize,
    line_base: usize,
    first_content_line: usize,
    block_lines: Vec<(usize, usize)>,
    /// First content lines of replaced block scalars (their old content is dropped).
    replaced_content: Vec<usize>,
    by_line: std::collections::BTreeMap<usize, Vec<(usize, usize, String)>>,
    after_line: std::collections::HashMap<usize, String>,
    /// Line comments: line -> column.
    comment_starts: std::collections::HashMap<usize, usize>,
    /// For each line: is the next non-blank line a comment.
    next_is_comment: Vec<bool>,
    /// For each line: indentation of the next non-blank, non-comment line.
    next_content_indent: Vec<Option<usize>>,
    /// Blank lines after a comment block go-yaml keeps ([`foot_blanks`]).
    foot: std::collections::HashMap<usize, bool>,
    caveats: &'a mut Vec<String>,
    out: String,
    blank_run_done: bool,
    saw_blank_after_comment: bool,
    saw_doc_start: bool,
}

impl Emit<'_> {
    fn run(mut self) -> String {
        let (lines, nlines) = (self.lines, self.nlines);
        let mut bi = 0;
        for (li, line) in lines.iter().take(nlines).enumerate() {
            let (block_lines, replaced_content, out) =
                (&self.block_lines, &self.replaced_content, &mut self.out);
            while bi < block_lines.len() && block_lines[bi].1 < li {
                bi += 1;
            }
            if bi < block_lines.len() && block_lines[bi].0 <= li && li <= block_lines[bi].1 {
                if replaced_content.contains(&block_lines[bi].0) {
                    continue; // old content of a block scalar go-yaml writes anew
                }
                if line.trim().is_empty() {
                    out.push('\n');
                } else {
                    out.push_str(line);
                    out.push('\n');
                }
                continue;
            }
            let t = line.trim();
            if li < self.first_content_line {
                self.head_line(li, line, t);
            } else if t.is_empty() {
                self.blank_line(li);
            } else if t == "..." {
                self.caveats.push(format!(
                    "line {}: document end marker",
                    self.line_base + li + 1
                ));
            } else {
                self.content_line(li, line);
            }
        }
        self.out
    }

    /// A line before the root: head comments, `---`, directives.
    fn head_line(&mut self, li: usize, line: &str, t: &str) {
        let (line_base, out, caveats) = (self.line_base, &mut self.out, &mut *self.caveats);
        if t.is_empty() {
            if !out.is_empty() && !self.saw_blank_after_comment {
                self.saw_blank_after_comment = true;
                // after an explicit `---` go-yaml v3 reads the comment as the head
                // comment of the first key, not of the document, and writes no blank
                // line after it (the differential test, leading-separator +
                // head-comment-blank)
                if !self.saw_doc_start {
                    out.push('\n');
                }
            }
            return;
        }
        if t == "---" || t.starts_with("--- #") || t.starts_with("---\t") {
            if t != "---" {
                caveats.push(format!(
                    "line {}: comment on a `---` line",
                    line_base + li + 1
                ));
            }
            // (only the file's first line can be a `---` here: kyaml's
            // splitDocuments cuts at every other one)
            self.saw_doc_start = true;
            return;
        }
        if t.starts_with('%') {
            caveats.push(format!("line {}: YAML directive", line_base + li + 1));
            return;
        }
        if !t.starts_with('#') {
            caveats.push(format!(
                "line {}: content before the document root",
                line_base + li + 1
            ));
        }
        if self.saw_blank_after_comment {
            caveats.push(format!(
                "line {}: several comment blocks above the document",
                line_base + li + 1
            ));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }

    /// A blank line after the root starts.
    fn blank_line(&mut self, li: usize) {
        let (line_base, lines, out, caveats) = (
            self.line_base,
            self.lines,
            &mut self.out,
            &mut *self.caveats,
        );
        match self.foot.get(&li) {
            Some(true) => {
                out.push('\n');
                self.blank_run_done = true;
                return;
            }
            Some(false) => {
                caveats.push(format!(
                    "line {}: blank line after a comment block in a layout where go-yaml may keep it (self.foot comment; not modelled)",
                    line_base + li + 1
                ));
                self.blank_run_done = true;
                return;
            }
            None => {}
        }
        if self.blank_run_done && li > 0 && lines[li - 1].trim().is_empty() {
            return;
        }
        self.blank_run_done = false;
        if self.next_is_comment[li + 1] {
            caveats.push(format!(
                "line {}: blank line before a comment (go-yaml may keep it)",
                line_base + li + 1
            ));
        }
    }

    /// A content line: its replacements, and one space before its line comment.
    fn content_line(&mut self, li: usize, line: &str) {
        let (line_base, out, caveats) = (self.line_base, &mut self.out, &mut *self.caveats);
        let mut l = line.to_string();
        if let Some(rs) = self.by_line.get_mut(&li) {
            rs.sort_by_key(|r| std::cmp::Reverse(r.0));
            for (a, b, v) in rs.iter() {
                if *a <= *b && *b <= l.len() && l.is_char_boundary(*a) && l.is_char_boundary(*b) {
                    l.replace_range(*a..*b, v);
                } else {
                    caveats.push(format!(
                        "line {}: a change spanning lines (not modelled)",
                        line_base + li + 1
                    ));
                }
            }
        }
        // one space before a line comment
        if let Some(&cstart) = self.comment_starts.get(&li) {
            let orig_before = &line[..cstart];
            if !orig_before.trim().is_empty() {
                let delta = l.len() as isize - line.len() as isize;
                let cpos = (cstart as isize + delta) as usize;
                let content = l[..cpos].trim_end().to_string();
                let comment = l[cpos..].to_string();
                l = format!("{content} {comment}");
            } else {
                let next_ind = self.next_content_indent[li + 1];
                let ind = line.len() - line.trim_start().len();
                if next_ind.is_some_and(|n| n != ind) {
                    caveats.push(format!(
                    "line {}: comment not aligned with the next key (go-yaml re-indents comments)",
                    line_base + li + 1
                ));
                }
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
        if let Some(v) = self.after_line.get(&li) {
            out.push_str(v);
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml11() {
        for v in [
            "1.10", "123", "yes", "on", "~", "1e3", "0x1f", "-1", ".5", "1_000", "0777",
        ] {
            assert!(is_yaml11_non_string(v), "{v}");
        }
        for v in [
            "v1.0.1",
            "0.1.1",
            "image:v1",
            "latest",
            "1.2.3-rc1",
            "sha256:abc",
            "",
        ] {
            assert!(!is_yaml11_non_string(v), "{v}");
        }
    }

    #[test]
    fn render() {
        assert_eq!(render_scalar("1.10", Style::Plain), "\"1.10\"");
        assert_eq!(render_scalar("v1", Style::Plain), "v1");
        assert_eq!(render_scalar("v1", Style::SingleQuoted), "'v1'");
        assert_eq!(render_scalar("v1", Style::DoubleQuoted), "\"v1\"");
        assert_eq!(render_scalar("", Style::Plain), "\"\"");
        assert_eq!(render_scalar("a: b", Style::Plain), "\"a: b\"");
        assert_eq!(render_scalar("-x", Style::Plain), "-x");
    }

    #[test]
    fn block_scalar_values() {
        assert_eq!(
            render_block("ghcr.io/a:v1", Style::Literal),
            BlockRender::Header("|-")
        );
        assert_eq!(render_block("v1", Style::Folded), BlockRender::Header(">-"));
        // FormatNonStringStyle quotes a YAML 1.1 non-string; go-yaml needs a block-safe value
        assert_eq!(
            render_block("1.10", Style::Literal),
            BlockRender::Inline("\"1.10\"".into())
        );
        assert_eq!(
            render_block("", Style::Literal),
            BlockRender::Inline("\"\"".into())
        );
        assert!(matches!(
            render_block(" a", Style::Literal),
            BlockRender::NotModelled(_)
        ));
    }

    #[test]
    fn go_yaml_tags() {
        for (v, t) in [
            ("1.0", "float"),
            ("1e3", "float"),
            ("08", "float"),
            ("10", "int"),
            ("0x1F", "int"),
            ("1_000", "int"),
            ("true", "bool"),
            ("~", "null"),
            ("1.0.0", "str"),
            ("v1.1", "str"),
            ("yes", "str"),
        ] {
            assert_eq!(go_yaml_v3_tag(v), t, "{v}");
        }
        assert!(kept_tag_caveat("1.0", "v1.1").is_some());
        assert!(kept_tag_caveat("1.0", "1.1").is_none()); // retagged !!str and quoted
        assert!(kept_tag_caveat("1.0.0", "v2").is_none());
        assert!(kept_tag_caveat("~", "1.10").is_some());
    }

    fn scan(t: &str) -> crate::scan::FileScan {
        crate::scan::scan_bytes(
            "f.yaml".into(),
            "f.yaml".into(),
            true,
            t.as_bytes().to_vec(),
        )
        .unwrap()
    }

    fn set_all(t: &str, v: &str) -> Rewrite {
        let f = scan(t);
        let reps: Vec<_> = f
            .sites
            .iter()
            .filter(|s| s.effective())
            .map(|s| {
                let t = s.target.as_ref().unwrap();
                Replacement {
                    start: t.start,
                    end: t.end,
                    value: v.into(),
                    style: t.style,
                }
            })
            .collect();
        rewrite(&f, &reps)
    }

    #[test]
    fn block_scalar_rewrite() {
        let m = r#"# {"$imagepolicy": "ns:p"}"#;
        let t = format!(
            "data:\n  b: | {m}\n    old:1\n    more\n  c: |\n    keep\nitems:\n- >+ {m}\n  x\n\n- y\n"
        );
        let r = set_all(&t, "ghcr.io/o/a:v2");
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(
            r.text,
            format!(
                "data:\n  b: |- {m}\n    ghcr.io/o/a:v2\n  c: |\n    keep\nitems:\n- >- {m}\n  ghcr.io/o/a:v2\n- y\n"
            )
        );
        let r = set_all(&t, "1.10");
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(
            r.text,
            format!("data:\n  b: \"1.10\" {m}\n  c: |\n    keep\nitems:\n- \"1.10\" {m}\n- y\n")
        );
    }

    /// A head comment and a blank line after an explicit `---`: go-yaml v3 writes no blank
    /// line (the real image-automation-controller v1.1.2, the differential test, layout
    /// classes leading-separator + head-comment-blank); without `---` it keeps one.
    #[test]
    fn blank_after_the_head_comment_goes_after_an_explicit_document_start() {
        let m = r#"# {"$imagepolicy": "ns:p"}"#;
        let r = set_all(&format!("---\n# head\n\na: old {m}\n"), "v2");
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(r.text, format!("# head\na: v2 {m}\n"));
        let r = set_all(&format!("# head\n\na: old {m}\n"), "v2");
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(r.text, format!("# head\n\na: v2 {m}\n"));
    }

    /// A flow collection written as go-yaml writes it is kept and claimed exact; any other
    /// spacing, or one that ends past column 80, is not (the real image-automation-controller
    /// v1.1.2, the differential test, classes flow-seq, flow-map, flow-noncanonical,
    /// flow-long).
    #[test]
    fn only_canonical_flow_collections_are_claimed_exact() {
        let m = r#"# {"$imagepolicy": "ns:p"}"#;
        let t = format!(
            "a: old {m}\nargs: [\"--a\", 'b', c]\nlabels: {{k: v, n: {{x: \"1\"}}, s: [1, 2]}}\ne: {{}}\n"
        );
        let r = set_all(&t, "v2");
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(r.text, t.replace("a: old", "a: v2"));
        for other in [
            "args: [ \"--a\" ]",
            "args: [\"--a\",\"--b\"]",
            "labels: {k: v,n: w}",
            "labels: {k:  v}",
            "labels: {k: v, n: !!str w}",
            "labels: {k: v, n: &x w}",
            "labels: {k: \"\\x41\"}",
        ] {
            let r = set_all(&format!("a: old {m}\n{other}\n"), "v2");
            assert!(!r.exact, "{other}");
        }
        let long: Vec<String> = (0..12).map(|n| format!("\"--flag-{n}\"")).collect();
        let r = set_all(&format!("a: old {m}\nargs: [{}]\n", long.join(", ")), "v2");
        assert!(!r.exact);
    }

    /// A comment after the document's last node is moved by go-yaml into that node's
    /// indentation in ways not modelled: not claimed exact, unless the node is a flow scalar
    /// at column 0 (the differential test, class foot-comment).
    #[test]
    fn a_foot_comment_is_claimed_exact_only_after_a_root_level_scalar() {
        let m = r#"# {"$imagepolicy": "ns:p"}"#;
        for t in [
            format!("images:\n- name: a\n  newTag: old {m}\n# end\n"),
            format!("images:\n  - name: a\n    newTag: old {m}\n# end"),
        ] {
            assert!(!set_all(&t, "v2").exact, "{t}");
        }
        // also nested, and after a block scalar
        let t = format!("spec:\n  containers:\n  - name: a\n    image: old {m}\n# end");
        assert!(!set_all(&t, "v2").exact);
        let t = format!("a: old {m}\nb: |\n  x\n# end\n");
        assert!(!set_all(&t, "v2").exact);
        // after a flow scalar at column 0 it stays (a foot comment of the root mapping)
        let t = format!("spec:\n  a: old {m}\nb: c\n# end\n");
        let r = set_all(&t, "v2");
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(r.text, t.replace("old", "v2"));
    }

    /// A literal block scalar ending a file without a final newline has no final newline in
    /// the value kyaml reads, so go-yaml writes `|-`: not claimed exact with `|`.
    #[test]
    fn a_block_scalar_at_the_end_of_a_file_without_newline_is_not_claimed_exact() {
        let m = r#"# {"$imagepolicy": "ns:p"}"#;
        assert!(!set_all(&format!("a: old {m}\nb: |\n  x\n  y"), "v2").exact);
        let r = set_all(&format!("a: old {m}\nb: |\n  x\n  y\n"), "v2");
        assert!(r.exact, "{:?}", r.caveats);
    }

    /// An empty value with a line comment (here an unchanged empty `:digest` marker beside a
    /// changed one): go-yaml dropped the comment (the real image-automation-controller v1.1.2,
    /// the differential test, seed 15): not claimed exact.
    #[test]
    fn an_empty_value_with_a_line_comment_is_not_claimed_exact() {
        let m = r#"# {"$imagepolicy": "ns:p"}"#;
        let f = scan(&format!(
            "a: old {m}\nd: &x  # {{\"$imagepolicy\": \"ns:q:digest\"}}\n"
        ));
        let t = f
            .sites
            .iter()
            .find(|s| s.effective())
            .unwrap()
            .target
            .as_ref()
            .unwrap();
        let reps = vec![Replacement {
            start: t.start,
            end: t.end,
            value: "v2".into(),
            style: t.style,
        }];
        assert!(!rewrite(&f, &reps).exact);
    }

    #[test]
    fn empty_block_scalar_keeps_the_next_key() {
        // granit's span of an empty block scalar reaches into the next key's indentation
        let m = r#"# {"$imagepolicy": "ns:p"}"#;
        let r = set_all(&format!("a:\n  b: | {m}\n  c: d\n"), "v1");
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(r.text, format!("a:\n  b: |- {m}\n    v1\n  c: d\n"));
    }

    #[test]
    fn kept_tag_is_not_claimed_exact() {
        let r = set_all("newTag: 1.0 # {\"$imagepolicy\": \"ns:p:tag\"}\n", "v1.1");
        assert!(!r.exact);
        assert!(r.caveats[0].contains("!!float v1.1"), "{:?}", r.caveats);
        let r = set_all("newTag: 1.0.0 # {\"$imagepolicy\": \"ns:p:tag\"}\n", "v1.1");
        assert!(r.exact, "{:?}", r.caveats);
    }

    #[test]
    fn quoting_like_go_yaml() {
        // special characters: only double quotes, go-yaml escapes
        assert_eq!(render_scalar("a\0\u{4}b", Style::Plain), "\"a\\0\\x04b\"");
        assert_eq!(render_scalar("a\tb", Style::SingleQuoted), "\"a\\tb\"");
        assert_eq!(
            render_scalar("x\u{1F600}", Style::Plain),
            "\"x\\U0001F600\""
        );
        // leading blank: not plain, single quotes allowed
        assert_eq!(render_scalar(" a", Style::Plain), "' a'");
        // YAML 1.2 int that is no YAML 1.1 int: the !!str node forces quotes
        assert_eq!(render_scalar("0o17", Style::Plain), "\"0o17\"");
        assert_eq!(render_scalar("caf\u{e9}", Style::Plain), "caf\u{e9}");
    }

    #[test]
    fn blank_line_after_a_foot_comment_is_kept() {
        // go-yaml: `# about a` is a foot comment of `a` (comment right after content, then a
        // blank line); the emitter writes one blank line after a foot comment
        let m = r#"# {"$imagepolicy": "ns:p"}"#;
        let r = set_all(
            &format!("a: 1\n# about a\n\n\nb: old {m}\nc: 2\n\nd: 3\n"),
            "v2",
        );
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(
            r.text,
            format!("a: 1\n# about a\n\nb: v2 {m}\nc: 2\nd: 3\n")
        );
        // a head comment (blank line before it) loses the blank lines around it
        let r = set_all(&format!("a: 1\n\n# about b\nb: old {m}\n"), "v2");
        assert_eq!(r.text, format!("a: 1\n# about b\nb: v2 {m}\n"));
        // after `key:` the comment heads the nested content: its blank line goes
        let r = set_all(&format!("a:\n  # c\n\n  b: old {m}\n"), "v2");
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(r.text, format!("a:\n  # c\n  b: v2 {m}\n"));
        // a shape not modelled is flagged, never claimed exact
        let r = set_all(&format!("a:\n  x: 1\n  # c\n\nb: old {m}\n"), "v2");
        assert!(!r.exact);
    }

    #[test]
    fn blank_line_after_a_block_scalar_is_removed() {
        let m = r#"# {"$imagepolicy": "ns:p"}"#;
        let r = set_all(
            &format!("s: |\n  echo hi\n\nb: old {m}\nk: |+\n  kept\n\nz: 1\n"),
            "v2",
        );
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(
            r.text,
            format!("s: |\n  echo hi\nb: v2 {m}\nk: |+\n  kept\n\nz: 1\n")
        );
    }

    #[test]
    fn merge_key_is_written_with_its_tag() {
        let m = r#"# {"$imagepolicy": "ns:p"}"#;
        let r = set_all(
            &format!("base: &b\n  x: 1\nc:\n  <<: *b\n  image: old {m}\nd:\n  !!merge <<: *b\n"),
            "v2",
        );
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(
            r.text,
            format!(
                "base: &b\n  x: 1\nc:\n  !!merge <<: *b\n  image: v2 {m}\nd:\n  !!merge <<: *b\n"
            )
        );
    }

    #[test]
    fn block_scalar_marker_then_a_second_document() {
        // fuzz: the block's span ends one byte past the chunk, and the replacement was dropped
        let m = r#"# {"$imagepolicy": "ns:p"}"#;
        let r = set_all(&format!("a: | {m}\n  old\n---\nb: 1\n"), "v2");
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(r.text, format!("a: |- {m}\n  v2\n---\nb: 1\n"));
    }

    #[test]
    fn dash_key_after_a_block_scalar_without_final_newline() {
        // no final newline: `---:` is no separator for kyaml (`\n---.*\n`), it is the key
        // `---`, which go-yaml writes quoted; with the newline it is an invalid separator
        let m = r#"# {"$imagepolicy": "ns:p"}"#;
        let r = set_all(&format!("a: | {m}\n  old\n---:"), "v2");
        assert!(r.exact, "{:?}", r.caveats);
        assert_eq!(r.text, format!("a: |- {m}\n  v2\n'---':\n"));
        let again = scan(&r.text);
        assert!(again.problem.is_none(), "{:?}", again.problem);
        assert!(scan(&format!("a: | {m}\n  old\n---:\n")).problem.is_some());
    }

    #[test]
    fn seq_indent() {
        assert_eq!(derive_seq_indent("a:\n  - b\n"), "wide");
        assert_eq!(derive_seq_indent("a:\n- b\n"), "compact");
        assert_eq!(derive_seq_indent("a: b\n"), "compact");
    }
}
