//! A position-carrying YAML node tree built from `granit-parser` events.
//!
//! Only what the setter emulation needs: scalars with their value, style, byte span and the
//! comments next to them; mappings and sequences with their children; aliases. Comments are
//! kept as a flat list of `(byte range, line)` so the marker rules can apply go-yaml v3's
//! attachment rules themselves (see [`crate::marker`]).

use granit_parser::{Event, Parser, ScalarStyle, StructureStyle};

/// Scalar presentation style (YAML 1.2 §7–8), as written in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Style {
    /// Plain (unquoted) scalar.
    Plain,
    /// `'single quoted'`.
    SingleQuoted,
    /// `"double quoted"`.
    DoubleQuoted,
    /// `|` block scalar.
    Literal,
    /// `>` block scalar.
    Folded,
}

/// One node of a parsed document.
#[derive(Debug, Clone)]
pub enum Node {
    /// A scalar.
    Scalar(Scalar),
    /// A mapping: `(key, value)` pairs in source order.
    Map {
        /// Key/value pairs.
        entries: Vec<(Node, Node)>,
        /// Flow (`{}`) or block notation.
        flow: bool,
        /// Byte offset of the start of the mapping.
        start: usize,
    },
    /// A sequence.
    Seq {
        /// Items in source order.
        items: Vec<Node>,
        /// Flow (`[]`) or block notation.
        flow: bool,
        /// Byte offset of the start of the sequence.
        start: usize,
    },
    /// An alias `*name` (never visited by the setters: go-yaml v3 AliasNode).
    Alias {
        /// Byte offset of the `*`.
        start: usize,
    },
}

/// A scalar with its source position.
#[derive(Debug, Clone)]
pub struct Scalar {
    /// The value after escape processing.
    pub value: String,
    /// Source style.
    pub style: Style,
    /// Byte range of the scalar token in the document text (quotes included; for block
    /// scalars, from the indicator to the end of the content).
    pub start: usize,
    /// End (exclusive) byte offset.
    pub end: usize,
    /// 1-based line of `start` within the document text.
    pub line: usize,
    /// 0-based column (in characters) of `start`.
    pub col: usize,
    /// An explicit tag was written (`!!str`, `!foo`).
    pub tagged: bool,
    /// Has an anchor `&a`.
    pub anchored: bool,
}

impl Node {
    /// Byte offset where this node starts.
    pub fn start(&self) -> usize {
        match self {
            Node::Scalar(s) => s.start,
            Node::Map { start, .. } | Node::Seq { start, .. } | Node::Alias { start } => *start,
        }
    }

    /// Mapping lookup by scalar key (first match, like kyaml `RNode.Field`).
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map { entries, .. } => entries.iter().find_map(|(k, v)| match k {
                Node::Scalar(s) if s.value == key => Some(v),
                _ => None,
            }),
            _ => None,
        }
    }

    /// Scalar value, if this is a scalar.
    pub fn str(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) => Some(&s.value),
            _ => None,
        }
    }

    /// Path lookup `a.b.c` through mappings.
    pub fn path(&self, keys: &[&str]) -> Option<&Node> {
        let mut n = self;
        for k in keys {
            n = n.get(k)?;
        }
        Some(n)
    }

    /// True for a YAML null (`~`, `null`, empty plain scalar).
    pub fn is_null(&self) -> bool {
        matches!(self, Node::Scalar(s) if s.style == Style::Plain && !s.tagged
            && matches!(s.value.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }
}

/// A comment: byte range of `#...` (line break excluded) and its 1-based line.
#[derive(Debug, Clone)]
pub struct Comment {
    /// Byte offset of `#`.
    pub start: usize,
    /// End (exclusive) byte offset.
    pub end: usize,
    /// 1-based line.
    pub line: usize,
}

/// A parsed YAML document: its root (None for an empty document) and all comments.
#[derive(Debug, Clone)]
pub struct Document {
    /// Root node; `None` when the document has no content (comments only / empty).
    pub root: Option<Node>,
    /// All comments in source order.
    pub comments: Vec<Comment>,
    /// More than one YAML document was found in this text (go-yaml's Decoder would read only
    /// the first one).
    pub extra_documents: bool,
}

/// A YAML syntax error with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// Parser message.
    pub message: String,
}

/// Byte offsets of line starts, for O(log n) offset -> line lookups.
pub struct Lines(Vec<usize>);

impl Lines {
    pub fn new(text: &str) -> Lines {
        let mut v = vec![0];
        v.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        Lines(v)
    }

    /// 0-based line of `off`.
    pub fn line(&self, off: usize) -> usize {
        self.0.partition_point(|&s| s <= off) - 1
    }

    /// Byte offset where the line holding `off` starts.
    pub fn start_of(&self, off: usize) -> usize {
        self.0[self.line(off)]
    }
}

/// granit's block scalar span covers the content only; widen it to start at the `|`/`>`
/// indicator and to end after the last content line break.
fn block_bounds(text: &str, start: usize, end: usize) -> (usize, usize) {
    let mut end = start + text[start..end].trim_end_matches([' ', '\t']).len();
    // granit's span can reach into the indentation of the next token (an empty block scalar
    // spans only that): the content ends at the line break before it
    let end_ls = text[..end].rfind('\n').map(|i| i + 1).unwrap_or(0);
    if end_ls < end && text[end_ls..end].trim_matches([' ', '\t']).is_empty() {
        end = end_ls;
    }
    let mut ls = text[..start].rfind('\n').map(|i| i + 1).unwrap_or(0);
    loop {
        if ls == 0 {
            return (start, end.max(start));
        }
        let prev = text[..ls - 1].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let line = &text[prev..ls - 1];
        if line.trim().is_empty() {
            ls = prev;
            continue;
        }
        let code = match line.find(" #") {
            Some(c) => &line[..c],
            None => line,
        };
        return match code.rfind(['|', '>']) {
            Some(i) => (prev + i, end.max(prev + i)),
            None => (start, end.max(start)),
        };
    }
}

/// A collection being built: a mapping's pairs so far and the key waiting for its value, or a
/// sequence's items (pairs built as they come, so no flat list of twice the size is ever held).
enum Frame {
    Map(Vec<(Node, Node)>, Option<Node>, bool, usize),
    Seq(Vec<Node>, bool, usize),
}

fn style(s: ScalarStyle) -> Style {
    match s {
        ScalarStyle::Plain => Style::Plain,
        ScalarStyle::SingleQuoted => Style::SingleQuoted,
        ScalarStyle::DoubleQuoted => Style::DoubleQuoted,
        ScalarStyle::Literal => Style::Literal,
        _ => Style::Folded,
    }
}

/// Parse the first YAML document of `text` into a [`Document`].
///
/// Errors: any scanner/parser error of the whole text (go-yaml v3's `Decoder.Decode` also
/// fails on a broken document, which makes image-automation-controller's
/// `ScreeningLocalReader.Read` record the file as a "problem file").
pub fn parse(text: &str) -> Result<Document, SyntaxError> {
    match parse_exact(text) {
        Ok(d) => Ok(d),
        Err(e) => {
            // go-yaml v3 ends an alias/anchor name at the first character outside
            // [0-9A-Za-z_-] (scannerc.go yaml_parser_scan_anchor + is_alpha), so `*app:` is the
            // alias `app` then `:`; YAML 1.2 (granit) reads the name `app:`. Split such names
            // on the failing line with a blank and parse again (at most 64 times), then map
            // every position back to the original text.
            let mut patched = text.to_string();
            let mut inserts: Vec<usize> = Vec::new();
            let mut err = e;
            for _ in 0..64 {
                let Some(at) = alias_colon_on_line(&patched, err.line) else {
                    return Err(err);
                };
                patched.insert(at, ' ');
                for i in inserts.iter_mut() {
                    if *i >= at {
                        *i += 1;
                    }
                }
                inserts.push(at);
                match parse_exact(&patched) {
                    Ok(mut d) => {
                        inserts.sort_unstable();
                        unshift(&mut d, &inserts, text);
                        return Ok(d);
                    }
                    Err(e2) => err = e2,
                }
            }
            Err(err)
        }
    }
}

/// The byte offset just after a go-yaml anchor/alias name directly followed by `:` on 1-based
/// `line` (`*app:` -> offset of `:`), outside a comment; `None` if there is none.
fn alias_colon_on_line(text: &str, line: usize) -> Option<usize> {
    let lines = Lines::new(text);
    let ls = *lines.0.get(line.checked_sub(1)?)?;
    let le = text[ls..].find('\n').map_or(text.len(), |i| ls + i);
    let b = text.as_bytes();
    let mut i = ls;
    while i < le {
        let c = b[i];
        if c == b'#' && (i == ls || b[i - 1] == b' ' || b[i - 1] == b'\t') {
            return None;
        }
        let token_start = i == ls || matches!(b[i - 1], b' ' | b'\t' | b'[' | b'{' | b',');
        if (c == b'*' || c == b'&') && token_start {
            let mut j = i + 1;
            while j < le && (b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] == b'-') {
                j += 1;
            }
            if j > i + 1 && j < le && b[j] == b':' {
                return Some(j);
            }
        }
        i += 1;
    }
    None
}

/// Map positions of a parse of `text` with blanks inserted at `inserts` (sorted offsets in
/// the patched text) back to `text`.
fn unshift(d: &mut Document, inserts: &[usize], text: &str) {
    let lines = Lines::new(text);
    let back = |p: usize| p - inserts.partition_point(|&i| i < p);
    fn node(n: &mut Node, back: &dyn Fn(usize) -> usize, text: &str, lines: &Lines) {
        match n {
            Node::Scalar(s) => {
                s.start = back(s.start);
                s.end = back(s.end);
                s.line = lines.line(s.start) + 1;
                s.col = text[lines.start_of(s.start)..s.start].chars().count();
            }
            Node::Map { entries, start, .. } => {
                *start = back(*start);
                for (k, v) in entries {
                    node(k, back, text, lines);
                    node(v, back, text, lines);
                }
            }
            Node::Seq { items, start, .. } => {
                *start = back(*start);
                for it in items {
                    node(it, back, text, lines);
                }
            }
            Node::Alias { start } => *start = back(*start),
        }
    }
    if let Some(r) = d.root.as_mut() {
        node(r, &back, text, &lines);
    }
    for c in &mut d.comments {
        c.start = back(c.start);
        c.end = back(c.end);
    }
}

/// go-yaml v3's nesting limits (scannerc.go: `max_flow_level = 10000`, `max_indents =
/// 10000`); granit's default is 255, which would make a file go-yaml reads a problem file.
fn parser_options() -> granit_parser::Options {
    let mut o = granit_parser::Options::default();
    o.flow_nesting_limit = 10_000;
    o.block_nesting_limit = 10_000;
    o
}

fn parse_exact(text: &str) -> Result<Document, SyntaxError> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Node> = None;
    let mut comments = Vec::new();
    let mut docs = 0usize;
    let mut done_first = false;
    // end of the last scalar: a block scalar's header comes after it
    let mut prev_end = 0usize;
    let lines = Lines::new(text);
    let push = |stack: &mut Vec<Frame>, root: &mut Option<Node>, n: Node| match stack.last_mut() {
        Some(Frame::Map(entries, key, _, _)) => match key.take() {
            Some(k) => entries.push((k, n)),
            None => *key = Some(n),
        },
        Some(Frame::Seq(v, _, _)) => v.push(n),
        None => *root = Some(n),
    };
    for ev in Parser::new_from_str_with_options(text, parser_options()) {
        let (ev, span) = ev.map_err(|e| SyntaxError {
            line: e.marker().line(),
            col: e.marker().col() + 1,
            message: e.info(),
        })?;
        let range = span.byte_range().unwrap_or(0..0);
        if done_first {
            if matches!(ev, Event::DocumentStart(..)) {
                docs += 1;
            }
            continue;
        }
        match ev {
            Event::DocumentStart(..) => docs += 1,
            Event::DocumentEnd => done_first = true,
            Event::Comment(..) => comments.push(Comment {
                start: range.start,
                end: range.end,
                line: span.start.line(),
            }),
            Event::Scalar(value, st, anchor, tag) => {
                let (mut start, mut end) = (range.start, range.end);
                if matches!(st, ScalarStyle::Literal | ScalarStyle::Folded) {
                    (start, end) = block_bounds(text, start, end);
                    // granit can place an empty block scalar at the end of the text (no final
                    // newline) before the previous token: its header is the first `|`/`>`
                    // after that token (fuzz regression
                    // empty-block-scalar-at-eof-takes-previous-header)
                    if start < prev_end {
                        let rest = &text[prev_end..];
                        let code = rest.split('#').next().unwrap_or(rest);
                        if let Some(i) = code.find(['|', '>']) {
                            start = prev_end + i;
                            end = end.max(start);
                        }
                    }
                }
                prev_end = end.max(prev_end);
                let n = Node::Scalar(Scalar {
                    value: value.into_owned(),
                    style: style(st),
                    start,
                    end,
                    // a line index, not a newline count from the top per scalar (quadratic)
                    line: lines.line(start) + 1,
                    col: text[lines.start_of(start)..start].chars().count(),
                    tagged: tag.is_some(),
                    anchored: anchor != 0,
                });
                push(&mut stack, &mut root, n);
            }
            Event::Alias(_) | Event::UnresolvedAlias(_) => {
                push(&mut stack, &mut root, Node::Alias { start: range.start })
            }
            Event::MappingStart(s, ..) => stack.push(Frame::Map(
                Vec::new(),
                None,
                s == StructureStyle::Flow,
                range.start,
            )),
            Event::SequenceStart(s, ..) => stack.push(Frame::Seq(
                Vec::new(),
                s == StructureStyle::Flow,
                range.start,
            )),
            Event::MappingEnd | Event::SequenceEnd => {
                let n = match stack.pop() {
                    // the parser pairs every key with a value; the trees are kept (for the
                    // simulation), so without the growth slack
                    Some(Frame::Map(mut entries, _, flow, start)) => {
                        entries.shrink_to_fit();
                        Node::Map {
                            entries,
                            flow,
                            start,
                        }
                    }
                    Some(Frame::Seq(mut items, flow, start)) => {
                        items.shrink_to_fit();
                        Node::Seq { items, flow, start }
                    }
                    None => continue,
                };
                push(&mut stack, &mut root, n);
            }
            _ => {}
        }
    }
    Ok(Document {
        root,
        comments,
        extra_documents: docs > 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cover_quotes_and_comments() {
        let t = "a: \"x:1\" # {\"k\": 1}\nb:\n  - 'y'\n  - |\n    z\n";
        let d = parse(t).unwrap();
        let root = d.root.unwrap();
        let Node::Scalar(a) = root.get("a").unwrap() else {
            panic!()
        };
        assert_eq!(&t[a.start..a.end], "\"x:1\"");
        assert_eq!(a.line, 1);
        assert_eq!(&t[d.comments[0].start..d.comments[0].end], "# {\"k\": 1}");
        let Node::Seq { items, .. } = root.get("b").unwrap() else {
            panic!()
        };
        let Node::Scalar(y) = &items[0] else { panic!() };
        assert_eq!(&t[y.start..y.end], "'y'");
        let Node::Scalar(z) = &items[1] else { panic!() };
        assert_eq!(z.style, Style::Literal);
        assert_eq!(z.value, "z\n");
    }

    #[test]
    fn empty_block_scalar_at_eof_is_on_its_own_line() {
        let t = "a: | # one\nb: | # two";
        let d = parse(t).unwrap();
        let root = d.root.unwrap();
        for (k, want) in [("a", 3), ("b", t.len() - 7)] {
            let Some(Node::Scalar(s)) = root.get(k) else {
                panic!()
            };
            assert_eq!(s.start, want, "{k}");
        }
    }

    #[test]
    fn syntax_error_has_position() {
        let e = parse("a: [b\n").unwrap_err();
        assert!(e.line >= 1);
    }
}
