//! CoreDNS Corefile parsing and "which plugin answers this FQDN".
//!
//! No maintained Rust crate parses Corefiles (Caddyfile syntax), so this is a small
//! tokenizer + block parser covering what a Kubernetes `kube-system/coredns` ConfigMap uses:
//! server blocks (`ZONE[:PORT] ...  { ... }`, `dns://`-style schemes), `import` (reported,
//! not followed), comments, quotes and nested blocks.
//!
//! Evaluation follows CoreDNS v1.14 (read at coredns/coredns 4b26cced, v1.14.7-15):
//! - Server block choice: the block on the port whose zone is the longest suffix match of
//!   the query name (`core/dnsserver/server.go` ServeDNS walks labels off the left).
//! - Plugins run in the FIXED order of `plugin.cfg`, not the Corefile order. The relevant
//!   part: `... rewrite, autopath, acl, cache, header, dnssec, tls, minimal, template,
//!   transfer, hosts, route53, azure, clouddns, k8s_external, kubernetes, file, auto,
//!   secondary, etcd, loop, forward, grpc, ...`.
//! - `rewrite name [exact|prefix|suffix|substring|regex] FROM TO` changes the question
//!   before anything below sees it (`plugin/rewrite/name.go`; default match type exact).
//! - `template CLASS TYPE [ZONE...] { match REGEX...; answer ...; rcode ...; fallthrough }`
//!   answers a matching name; a name in its zones that matches no regex gets SERVFAIL
//!   unless `fallthrough` (`plugin/template/template.go` ServeDNS/match).
//! - `hosts [FILE] [ZONES...] { INLINE ENTRIES; fallthrough [ZONES] }`: a name in its zones
//!   without an entry gets SERVFAIL (not NXDOMAIN: "we don't have a SOA") unless it falls
//!   through (`plugin/hosts/hosts.go` ServeDNS). Entries from FILE cannot be seen here.
//! - `kubernetes [ZONES...] { pods insecure|verified|disabled; fallthrough [ZONES] }`:
//!   authoritative for its zones; NXDOMAIN for unknown names unless fallthrough.
//! - `forward FROM TO... { except IGNORED... }`: forwards names under FROM except
//!   IGNORED (`plugin/forward/forward.go` match); several forward lines chain in order.
//! - `cache [TTL] [ZONES...]`: caches whatever the plugins below answered.

use serde::Serialize;

/// One directive line (possibly with a block).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Directive {
    /// Plugin name (`hosts`, `forward`, ...).
    pub name: String,
    /// Arguments on the directive line.
    pub args: Vec<String>,
    /// Lines inside `{ }`, each as words (nested blocks flattened, braces dropped).
    pub block: Vec<Vec<String>>,
    /// 1-based line number in the Corefile.
    pub line: usize,
}

/// One server block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerBlock {
    /// Zones served, normalized to lower case FQDN with trailing dot (`.` for root).
    pub zones: Vec<String>,
    /// Port (53 when not given).
    pub port: u16,
    /// Directives in Corefile order.
    pub directives: Vec<Directive>,
    /// 1-based line of the block's key.
    pub line: usize,
}

/// A parsed Corefile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Corefile {
    /// Server blocks in file order.
    pub servers: Vec<ServerBlock>,
    /// Top-level `import` lines (not followed: the files live in the CoreDNS pod).
    pub imports: Vec<String>,
}

/// A Corefile syntax error, with its line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Corefile line {line}: {message}")]
pub struct CorefileError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Open,
    Close,
    Newline,
}

fn tokenize(text: &str) -> Result<Vec<(Tok, usize)>, CorefileError> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    let mut word = String::new();
    // Caddyfile lexing (caddyserver/caddy v1 caddyfile/lexer.go, used by CoreDNS): tokens are
    // whitespace separated; a token that is exactly `{` or `}` is a brace, so `{1}` in a
    // rewrite replacement stays a word. Quoted tokens only unescape `\"`.
    let flush = |word: &mut String, quoted: &mut bool, out: &mut Vec<(Tok, usize)>, line: usize| {
        if !word.is_empty() || *quoted {
            let w = std::mem::take(word);
            let tok = match (w.as_str(), *quoted) {
                ("{", false) => Tok::Open,
                ("}", false) => Tok::Close,
                _ => Tok::Word(w),
            };
            out.push((tok, line));
        }
        *quoted = false;
    };
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                flush(&mut word, &mut quoted, &mut out, line);
                out.push((Tok::Newline, line));
                line += 1;
            }
            '#' if word.is_empty() => {
                while let Some(&n) = chars.peek() {
                    if n == '\n' {
                        break;
                    }
                    chars.next();
                }
            }
            '"' | '`' => {
                quoted = true;
                let quote = c;
                let start = line;
                loop {
                    match chars.next() {
                        Some('\\') if quote == '"' && chars.peek() == Some(&'"') => {
                            chars.next();
                            word.push('"');
                        }
                        Some(n) if n == quote => break,
                        Some(n) => {
                            if n == '\n' {
                                line += 1;
                            }
                            word.push(n);
                        }
                        None => {
                            return Err(CorefileError {
                                line: start,
                                message: "unterminated quoted string".into(),
                            });
                        }
                    }
                }
            }
            c if c.is_whitespace() => flush(&mut word, &mut quoted, &mut out, line),
            c => word.push(c),
        }
    }
    flush(&mut word, &mut quoted, &mut out, line);
    Ok(out)
}

/// Normalize a server block key or zone argument: strip `dns://`, split the port, lower
/// case, add the trailing dot.
fn split_key(key: &str) -> (String, Option<u16>) {
    let k = key
        .strip_prefix("dns://")
        .or_else(|| key.strip_prefix("tls://"))
        .or_else(|| key.strip_prefix("grpc://"))
        .or_else(|| key.strip_prefix("https://"))
        .unwrap_or(key);
    let (zone, port) = match k.rsplit_once(':') {
        Some((z, p)) if p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty() => {
            (z, p.parse().ok())
        }
        _ => (k, None),
    };
    (normalize_zone(zone), port)
}

/// Lower case with trailing dot; empty means root.
pub fn normalize_zone(z: &str) -> String {
    let z = z.trim().to_ascii_lowercase();
    if z.is_empty() || z == "." {
        ".".into()
    } else if z.ends_with('.') {
        z
    } else {
        format!("{z}.")
    }
}

/// True when `name` (FQDN) is `zone` or under it.
pub fn in_zone(name: &str, zone: &str) -> bool {
    let name = normalize_zone(name);
    zone == "." || name == zone || name.ends_with(&format!(".{zone}"))
}

impl Corefile {
    /// Parse Corefile text.
    ///
    /// Errors: unbalanced braces, a directive outside a server block, unterminated quotes.
    pub fn parse(text: &str) -> Result<Corefile, CorefileError> {
        let toks = tokenize(text)?;
        let mut servers = Vec::new();
        let mut imports = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            match &toks[i].0 {
                Tok::Newline => i += 1,
                Tok::Close => {
                    return Err(CorefileError {
                        line: toks[i].1,
                        message: "'}' without a matching '{'".into(),
                    });
                }
                Tok::Open => {
                    return Err(CorefileError {
                        line: toks[i].1,
                        message: "'{' without a server block key before it".into(),
                    });
                }
                Tok::Word(w) if w == "import" => {
                    let mut args = Vec::new();
                    i += 1;
                    while let Some((Tok::Word(a), _)) = toks.get(i) {
                        args.push(a.clone());
                        i += 1;
                    }
                    imports.push(args.join(" "));
                }
                Tok::Word(_) => {
                    let line = toks[i].1;
                    let mut keys = Vec::new();
                    while let Some((t, _)) = toks.get(i) {
                        match t {
                            Tok::Word(w) => {
                                for k in w.split(',').filter(|k| !k.is_empty()) {
                                    keys.push(k.to_string());
                                }
                                i += 1;
                            }
                            Tok::Newline => i += 1,
                            _ => break,
                        }
                    }
                    if !matches!(toks.get(i), Some((Tok::Open, _))) {
                        return Err(CorefileError {
                            line,
                            message: format!(
                                "server block {} has no '{{ ... }}' body",
                                keys.join(" ")
                            ),
                        });
                    }
                    i += 1;
                    let (directives, next) = parse_directives(&toks, i)?;
                    i = next;
                    let mut zones = Vec::new();
                    let mut port = 53;
                    for k in &keys {
                        let (z, p) = split_key(k);
                        if let Some(p) = p {
                            port = p;
                        }
                        zones.push(z);
                    }
                    servers.push(ServerBlock {
                        zones,
                        port,
                        directives,
                        line,
                    });
                }
            }
        }
        Ok(Corefile { servers, imports })
    }

    /// The server block that serves `fqdn` on `port`: longest zone suffix wins.
    pub fn server_for(&self, fqdn: &str, port: u16) -> Option<(&ServerBlock, String)> {
        let mut best: Option<(&ServerBlock, String)> = None;
        for s in self.servers.iter().filter(|s| s.port == port) {
            for z in &s.zones {
                if in_zone(fqdn, z) && best.as_ref().is_none_or(|(_, bz)| z.len() > bz.len()) {
                    best = Some((s, z.clone()));
                }
            }
        }
        best
    }
}

fn parse_directives(
    toks: &[(Tok, usize)],
    mut i: usize,
) -> Result<(Vec<Directive>, usize), CorefileError> {
    let mut out = Vec::new();
    loop {
        match toks.get(i) {
            None => {
                let line = toks.last().map(|t| t.1).unwrap_or(1);
                return Err(CorefileError {
                    line,
                    message: "server block is not closed with '}'".into(),
                });
            }
            Some((Tok::Close, _)) => return Ok((out, i + 1)),
            Some((Tok::Newline, _)) => i += 1,
            Some((Tok::Open, line)) => {
                return Err(CorefileError {
                    line: *line,
                    message: "'{' without a directive".into(),
                });
            }
            Some((Tok::Word(name), line)) => {
                let mut d = Directive {
                    name: name.clone(),
                    args: Vec::new(),
                    block: Vec::new(),
                    line: *line,
                };
                i += 1;
                while let Some((Tok::Word(a), _)) = toks.get(i) {
                    d.args.push(a.clone());
                    i += 1;
                }
                if let Some((Tok::Open, _)) = toks.get(i) {
                    i += 1;
                    let mut depth = 1;
                    let mut cur: Vec<String> = Vec::new();
                    while depth > 0 {
                        match toks.get(i) {
                            None => {
                                return Err(CorefileError {
                                    line: d.line,
                                    message: format!("block of '{}' is not closed", d.name),
                                });
                            }
                            Some((Tok::Open, _)) => depth += 1,
                            Some((Tok::Close, _)) => depth -= 1,
                            Some((Tok::Newline, _)) => {
                                if !cur.is_empty() {
                                    d.block.push(std::mem::take(&mut cur));
                                }
                            }
                            Some((Tok::Word(w), _)) => cur.push(w.clone()),
                        }
                        i += 1;
                    }
                    if !cur.is_empty() {
                        d.block.push(cur);
                    }
                }
                out.push(d);
            }
        }
    }
}

/// CoreDNS plugin execution order (coredns/coredns `plugin.cfg`, v1.14.7-15 4b26cced),
/// restricted to plugins that can change or answer a query.
pub const PLUGIN_ORDER: &[&str] = &[
    "rewrite",
    "autopath",
    "acl",
    "cache",
    "header",
    "dnssec",
    "minimal",
    "template",
    "transfer",
    "hosts",
    "route53",
    "azure",
    "clouddns",
    "k8s_external",
    "kubernetes",
    "file",
    "auto",
    "secondary",
    "etcd",
    "loop",
    "forward",
    "grpc",
    "erratic",
    "whoami",
];

/// What happened to one query inside CoreDNS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The FQDN asked (after the pod's search expansion).
    pub query: String,
    /// The name after `rewrite` rules (same as `query` when none applied).
    pub rewritten: String,
    /// Server block chosen: `ZONE:PORT` and its Corefile line; None when no block serves it
    /// (CoreDNS answers REFUSED).
    pub server_block: Option<String>,
    /// The plugin that produces the answer (`hosts`, `template`, `kubernetes`, `forward`,
    /// `file`, ...), or None when the chain ends without one (SERVFAIL from CoreDNS).
    pub answered_by: Option<String>,
    /// What that plugin does: inline hosts addresses, forward upstreams, template answer...
    pub detail: String,
    /// Each step, in plugin.cfg order, as a human line.
    pub steps: Vec<String>,
    /// The Corefile line of the answering directive.
    pub line: Option<usize>,
    /// True when `cache` sits in front (answers may be up to its TTL old).
    pub cached: bool,
}

fn zones_of(args: &[String], block_zone: &str) -> Vec<String> {
    if args.is_empty() {
        vec![block_zone.to_string()]
    } else {
        args.iter().map(|a| normalize_zone(a)).collect()
    }
}

/// Does `fallthrough [ZONES]` in `block` let `name` through?
fn falls_through(block: &[Vec<String>], name: &str) -> bool {
    block.iter().any(|l| {
        l.first().map(String::as_str) == Some("fallthrough")
            && (l.len() == 1 || l[1..].iter().any(|z| in_zone(name, &normalize_zone(z))))
    })
}

fn apply_rewrite(d: &Directive, name: &str) -> Option<String> {
    // rewrite [continue|stop] name [exact|prefix|suffix|substring|regex] FROM TO [answer ...]
    let mut args: Vec<&str> = d.args.iter().map(String::as_str).collect();
    if matches!(args.first(), Some(&"continue") | Some(&"stop")) {
        args.remove(0);
    }
    if args.first() != Some(&"name") {
        return None;
    }
    let args = &args[1..];
    let (mtype, from, to) = match args {
        [m, f, t, ..] if matches!(*m, "exact" | "prefix" | "suffix" | "substring" | "regex") => {
            (*m, *f, *t)
        }
        [f, t, ..] => ("exact", *f, *t),
        _ => return None,
    };
    let n = name.to_ascii_lowercase();
    let fqdn = |s: &str| normalize_zone(s);
    match mtype {
        "exact" => (n == fqdn(from)).then(|| fqdn(to)),
        "prefix" => n
            .strip_prefix(&from.to_ascii_lowercase())
            .map(|rest| format!("{}{rest}", to.to_ascii_lowercase())),
        "suffix" => {
            let f = from.to_ascii_lowercase();
            let f = if f.ends_with('.') { f } else { format!("{f}.") };
            let t = to.to_ascii_lowercase();
            let t = if t.ends_with('.') { t } else { format!("{t}.") };
            n.strip_suffix(&f).map(|head| format!("{head}{t}"))
        }
        "substring" => n
            .contains(&from.to_ascii_lowercase())
            .then(|| n.replacen(&from.to_ascii_lowercase(), &to.to_ascii_lowercase(), 1)),
        "regex" => {
            let re = regex::Regex::new(from).ok()?;
            // CoreDNS uses {1}-style group references in the replacement.
            re.captures(&n).map(|c| {
                let mut out = to.to_string();
                for i in (0..c.len()).rev() {
                    let g = c.get(i).map(|m| m.as_str()).unwrap_or("");
                    out = out.replace(&format!("{{{i}}}"), g);
                }
                normalize_zone(&out)
            })
        }
        _ => None,
    }
}

/// Inline `hosts` entries: `(address, names)`.
pub fn hosts_entries(d: &Directive) -> Vec<(String, Vec<String>)> {
    d.block
        .iter()
        .filter(|l| {
            l.first()
                .is_some_and(|w| w.parse::<std::net::IpAddr>().is_ok())
        })
        .map(|l| {
            (
                l[0].clone(),
                l[1..].iter().map(|n| normalize_zone(n)).collect(),
            )
        })
        .collect()
}

impl ServerBlock {
    fn ordered(&self) -> Vec<&Directive> {
        let mut ds: Vec<&Directive> = self
            .directives
            .iter()
            .filter(|d| PLUGIN_ORDER.contains(&d.name.as_str()))
            .collect();
        // Stable: several lines of one plugin (rewrite, forward) keep their Corefile order.
        ds.sort_by_key(|d| {
            PLUGIN_ORDER
                .iter()
                .position(|p| *p == d.name)
                .unwrap_or(usize::MAX)
        });
        ds
    }

    /// Explain how this block handles an A/AAAA query for `fqdn`: the plugins in CoreDNS's
    /// order ([`PLUGIN_ORDER`]), each one step ([`step`]), until one answers.
    pub fn explain(&self, fqdn: &str, block_zone: &str) -> Explanation {
        let query = normalize_zone(fqdn);
        let mut w = Walk {
            name: query.clone(),
            steps: Vec::new(),
            cached: false,
            rewrite_done: false,
        };
        let answer = self
            .ordered()
            .into_iter()
            .find_map(|d| step(d, &mut w, block_zone));
        let (answered_by, detail, line) = match answer {
            Some((by, detail, line)) => (Some(by), detail, line),
            None => {
                w.steps
                    .push("no plugin answers: CoreDNS replies SERVFAIL".into());
                (
                    None,
                    "no plugin in the chain answers this name".into(),
                    None,
                )
            }
        };
        Explanation {
            query,
            rewritten: w.name,
            server_block: Some(format!("{block_zone}:{} (line {})", self.port, self.line)),
            answered_by,
            detail,
            steps: w.steps,
            line,
            cached: w.cached,
        }
    }
}

/// The state of a query's walk through a server block's plugins.
struct Walk {
    /// The name as rewritten so far.
    name: String,
    /// One line per plugin that acted.
    steps: Vec<String>,
    /// A cache plugin covers the name.
    cached: bool,
    /// A rewrite rule matched without `continue`: later rules are skipped.
    rewrite_done: bool,
}

/// The plugin that answered, what it answers, and its Corefile line.
type Answer = (String, String, Option<usize>);

/// One plugin's step for the walk: `Some` when it answers.
fn step(d: &Directive, w: &mut Walk, block_zone: &str) -> Option<Answer> {
    match d.name.as_str() {
        "rewrite" => {
            rewrite_step(d, w);
            None
        }
        "cache" => {
            cache_step(d, w, block_zone);
            None
        }
        "template" => template_step(d, w, block_zone),
        "hosts" => hosts_step(d, w, block_zone),
        "kubernetes" => kubernetes_step(d, w, block_zone),
        "file" | "auto" | "secondary" | "etcd" | "route53" | "azure" | "clouddns"
        | "k8s_external" => zone_plugin_step(d, w, block_zone),
        "forward" => forward_step(d, w),
        "whoami" | "erratic" => Some((d.name.clone(), String::new(), Some(d.line))),
        _ => None,
    }
}

/// `rewrite`: rules run in Corefile order; the first match ends the rewriting unless it says
/// `continue` (plugin/rewrite/rewrite.go ServeDNS: RewriteDone + Stop). The default next
/// action is `stop`.
fn rewrite_step(d: &Directive, w: &mut Walk) {
    if w.rewrite_done {
        return;
    }
    if let Some(new) = apply_rewrite(d, &w.name) {
        w.steps
            .push(format!("rewrite (line {}): {} -> {new}", d.line, w.name));
        w.name = new;
        w.rewrite_done = d.args.first().map(String::as_str) != Some("continue");
    }
}

/// `cache [TTL] [ZONES...]`: answers for a name in its zones are cached.
fn cache_step(d: &Directive, w: &mut Walk, block_zone: &str) {
    let zone_args: Vec<String> = d
        .args
        .iter()
        .filter(|a| !a.chars().all(|c| c.is_ascii_digit()))
        .cloned()
        .collect();
    let zs = zones_of(&zone_args, block_zone);
    if zs.iter().any(|z| in_zone(&w.name, z)) {
        w.cached = true;
        w.steps.push(format!(
            "cache (line {}): answers below are cached{}",
            d.line,
            d.args
                .first()
                .map(|t| format!(" up to {t}s"))
                .unwrap_or_default()
        ));
    }
}

/// `template CLASS TYPE [ZONES...]`: answers (or SERVFAIL without fallthrough) a name in its zones that matches a regex. `Some` when it answers (the walk stops there).
fn template_step(d: &Directive, w: &mut Walk, block_zone: &str) -> Option<Answer> {
    let name = w.name.clone();
    // template CLASS TYPE [ZONES...]
    let class = d.args.first().map(String::as_str).unwrap_or("IN");
    let qtype = d.args.get(1).map(String::as_str).unwrap_or("ANY");
    let zs = zones_of(d.args.get(2..).unwrap_or(&[]), block_zone);
    if !zs.iter().any(|z| in_zone(&name, z))
        || !matches!(class, "IN" | "ANY")
        || !matches!(qtype, "A" | "AAAA" | "ANY")
    {
        return None;
    }
    let regexes: Vec<&String> = d
        .block
        .iter()
        .filter(|l| l.first().map(String::as_str) == Some("match"))
        .flat_map(|l| l[1..].iter())
        .collect();
    let matched = if regexes.is_empty() {
        true
    } else {
        regexes.iter().any(|r| {
            regex::Regex::new(r)
                .map(|re| re.is_match(&name))
                .unwrap_or(false)
        })
    };
    let detail = d
        .block
        .iter()
        .filter(|l| matches!(l.first().map(String::as_str), Some("answer" | "rcode")))
        .map(|l| l.join(" "))
        .collect::<Vec<_>>()
        .join("; ");
    if matched {
        w.steps.push(format!(
            "template {class} {qtype} (line {}): matches {name}",
            d.line
        ));
        return Some(("template".to_string(), detail, Some(d.line)));
    }
    if !falls_through(&d.block, &name) {
        w.steps.push(format!(
            "template {class} {qtype} (line {}): {name} is in its zone but matches no regex and there is no fallthrough: SERVFAIL",
            d.line
        ));
        return Some((
            "template".to_string(),
            "SERVFAIL (no match, no fallthrough)".into(),
            Some(d.line),
        ));
    }
    None
}

/// `hosts [FILE] [ZONES...]`: an inline entry pins the name; without one and without fallthrough, SERVFAIL (the file inside the CoreDNS pod is not visible here). `Some` when it answers (the walk stops there).
fn hosts_step(d: &Directive, w: &mut Walk, block_zone: &str) -> Option<Answer> {
    let name = w.name.clone();
    // hosts [FILE] [ZONES...]: the first arg is the file.
    let (file, zone_args) = match d.args.split_first() {
        Some((f, rest)) => (Some(f.as_str()), rest),
        None => (None, &[][..]),
    };
    let zs = zones_of(zone_args, block_zone);
    if !zs.iter().any(|z| in_zone(&name, z)) {
        return None;
    }
    let hits: Vec<String> = hosts_entries(d)
        .into_iter()
        .filter(|(_, names)| names.contains(&name))
        .map(|(a, _)| a)
        .collect();
    if !hits.is_empty() {
        w.steps.push(format!(
            "hosts (line {}): inline entry {name} -> {}",
            d.line,
            hits.join(", ")
        ));
        return Some((
            "hosts".to_string(),
            format!("pinned to {}", hits.join(", ")),
            Some(d.line),
        ));
    }
    let file = file.unwrap_or("/etc/hosts");
    if falls_through(&d.block, &name) {
        w.steps.push(format!(
            "hosts (line {}): no inline entry for {name} (entries in {file} inside the CoreDNS pod are not visible here); fallthrough",
            d.line
        ));
    } else {
        w.steps.push(format!(
            "hosts (line {}): no inline entry for {name} and no fallthrough: SERVFAIL unless {file} in the CoreDNS pod has it",
            d.line
        ));
        return Some((
            "hosts".to_string(),
            format!("SERVFAIL (no entry, no fallthrough; {file} not visible)"),
            Some(d.line),
        ));
    }
    None
}

/// `kubernetes [ZONES...]`: authoritative for its zones unless fallthrough. `Some` when it answers (the walk stops there).
fn kubernetes_step(d: &Directive, w: &mut Walk, block_zone: &str) -> Option<Answer> {
    let name = w.name.clone();
    let zs = zones_of(&d.args, block_zone);
    if !zs.iter().any(|z| in_zone(&name, z)) {
        return None;
    }
    let pods = d
        .block
        .iter()
        .find(|l| l.first().map(String::as_str) == Some("pods"))
        .and_then(|l| l.get(1).cloned())
        .unwrap_or_else(|| "disabled".into());
    let ft = falls_through(&d.block, &name);
    w.steps.push(format!(
        "kubernetes (line {}): {name} is in its zones ({}); pods {pods}{}",
        d.line,
        zs.join(" "),
        if ft {
            "; fallthrough if not found"
        } else {
            "; authoritative: NXDOMAIN if no such Service/Pod"
        }
    ));
    if !ft {
        return Some((
            "kubernetes".to_string(),
            format!("cluster records (pods {pods})"),
            Some(d.line),
        ));
    }
    None
}

/// Plugins that serve whole zones (file, auto, secondary, etcd, route53, azure, clouddns, k8s_external). `Some` when it answers (the walk stops there).
fn zone_plugin_step(d: &Directive, w: &mut Walk, block_zone: &str) -> Option<Answer> {
    let name = w.name.clone();
    let zs = match d.name.as_str() {
        // file DBFILE [ZONES...]
        "file" => zones_of(d.args.get(1..).unwrap_or(&[]), block_zone),
        // auto/secondary/etcd/k8s_external [ZONES...]
        "auto" | "secondary" | "etcd" | "k8s_external" => zones_of(&d.args, block_zone),
        // route53 ZONE:ID..., azure ZONE:RG..., clouddns ZONE:PROJECT:ID...
        _ => {
            let z: Vec<String> = d
                .args
                .iter()
                .filter_map(|a| a.split(':').next().map(str::to_string))
                .collect();
            zones_of(&z, block_zone)
        }
    };
    if zs.iter().any(|z| in_zone(&name, z)) {
        w.steps
            .push(format!("{} (line {}): serves {name}", d.name, d.line));
        return Some((d.name.clone(), d.args.join(" "), Some(d.line)));
    }
    None
}

/// `forward FROM TO...`: a name under FROM (and not under `except`) goes upstream. `Some` when it answers (the walk stops there).
fn forward_step(d: &Directive, w: &mut Walk) -> Option<Answer> {
    let name = w.name.clone();
    let from = d.args.first()?;
    let from = normalize_zone(from);
    let except: Vec<String> = d
        .block
        .iter()
        .filter(|l| l.first().map(String::as_str) == Some("except"))
        .flat_map(|l| l[1..].iter().map(|z| normalize_zone(z)))
        .collect();
    if in_zone(&name, &from) && !except.iter().any(|z| in_zone(&name, z)) {
        let to = d.args[1..].join(" ");
        w.steps
            .push(format!("forward {from} (line {}): to {to}", d.line));
        return Some((
            "forward".to_string(),
            format!("upstream {to}"),
            Some(d.line),
        ));
    }
    None
}

impl Corefile {
    /// Explain an A/AAAA query for `fqdn` arriving on `port` (53 for kube-dns).
    pub fn explain(&self, fqdn: &str, port: u16) -> Explanation {
        match self.server_for(fqdn, port) {
            Some((block, zone)) => block.explain(fqdn, &zone),
            None => Explanation {
                query: normalize_zone(fqdn),
                rewritten: normalize_zone(fqdn),
                server_block: None,
                answered_by: None,
                detail: format!("no server block serves this name on port {port}: REFUSED"),
                steps: vec![format!(
                    "no server block for {fqdn} on port {port}: REFUSED"
                )],
                line: None,
                cached: false,
            },
        }
    }
}

/// A kube-system Service that may be a DNS forward target (from one LIST of kube-system
/// Services).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsService {
    /// `kube-system/NAME`.
    pub name: String,
    /// `spec.clusterIPs` (else `spec.clusterIP`).
    pub cluster_ips: Vec<String>,
    /// It selects the CoreDNS pods: it is `kube-dns`, or its selector equals kube-dns's (the
    /// NodeLocal DNSCache manifest's `kube-dns-upstream` selects `k8s-app: kube-dns`, kubernetes
    /// cluster/addons/dns/nodelocaldns/nodelocaldns.yaml).
    pub fronts_coredns: bool,
}

/// One `forward` of the node-local-dns Corefile and where it really goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLocalForward {
    /// The server block's zones.
    pub zones: Vec<String>,
    /// The targets as written.
    pub to: String,
    /// The kube-system Service that owns a literal target IP, when one does.
    pub owner: Option<String>,
    /// The target is CoreDNS (`__PILLAR__CLUSTER__DNS__`, or a ClusterIP of a Service that
    /// fronts CoreDNS); `None` when that cannot be told (a literal IP and Services unreadable).
    pub reaches_coredns: Option<bool>,
}

/// NodeLocal DNSCache findings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLocal {
    /// The pod's first nameserver is 169.254.20.10, or a node-local-dns ConfigMap exists.
    pub detected: bool,
    /// Why we think so.
    pub evidence: Vec<String>,
    /// Zones node-local-dns sends to CoreDNS: server blocks whose `forward` reaches it
    /// ([`NodeLocalForward::reaches_coredns`] true: `__PILLAR__CLUSTER__DNS__`, or the ClusterIP
    /// of a Service that fronts CoreDNS), e.g. `cluster.local.`, `in-addr.arpa.`, `ip6.arpa.`.
    /// A block forwarding elsewhere (or to an IP no Service owns) is not listed.
    pub to_coredns_zones: Vec<String>,
    /// Where node-local-dns sends every other name (`__PILLAR__UPSTREAM__SERVERS__`, i.e. the
    /// node's /etc/resolv.conf, or explicit servers) when that is NOT CoreDNS.
    pub other_upstream: Option<String>,
    /// Every `forward` of the ConfigMap with its owner.
    pub forwards: Vec<NodeLocalForward>,
}

impl NodeLocal {
    /// Does a query for `fqdn` skip CoreDNS (and so its hosts/rewrite/template blocks)?
    /// Judged per zone, as CoreDNS serves a query from the server block with the most specific
    /// zone that contains it (coredns core/dnsserver: longest zone match): that block's
    /// `forward` must be known not to reach CoreDNS ([`NodeLocalForward::reaches_coredns`]
    /// false). Unknown targets claim nothing.
    pub fn bypasses_coredns(&self, fqdn: &str) -> bool {
        self.bypass_upstream(fqdn).is_some()
    }

    /// Where node-local-dns sends `fqdn` when that skips CoreDNS (the `forward` targets as
    /// written, e.g. `__PILLAR__UPSTREAM__SERVERS__` or `10.96.0.11`); `None` when it reaches
    /// CoreDNS or that cannot be told (see [`NodeLocal::bypasses_coredns`]).
    pub fn bypass_upstream(&self, fqdn: &str) -> Option<&str> {
        if !self.detected {
            return None;
        }
        let zone_len = |f: &NodeLocalForward| {
            f.zones
                .iter()
                .filter(|z| in_zone(fqdn, &normalize_zone(z)))
                .map(|z| normalize_zone(z).len())
                .max()
        };
        let best = self
            .forwards
            .iter()
            .filter_map(|f| zone_len(f).map(|l| (l, f)))
            .max_by_key(|(l, _)| *l)?
            .1;
        (best.reaches_coredns == Some(false)).then_some(best.to.as_str())
    }

    /// Read the node-local-dns ConfigMap `Corefile` (kubernetes/dns
    /// cluster/addons/dns/nodelocaldns/nodelocaldns.yaml): the cluster-domain and reverse
    /// blocks forward to `__PILLAR__CLUSTER__DNS__` (rendered: the kube-dns-upstream
    /// ClusterIP, i.e. CoreDNS); the `.:53` block forwards to `__PILLAR__UPSTREAM__SERVERS__`
    /// (rendered: `/etc/resolv.conf` of the node), bypassing CoreDNS.
    ///
    /// A literal IP target is resolved to the kube-system Service in `services` that owns it
    /// before judging: a Service that fronts CoreDNS (kube-dns, kube-dns-upstream) means no
    /// bypass. `complete` is false when `services` is not the full list of kube-system
    /// Services (the LIST failed): a literal IP no known Service owns is then not judged a
    /// bypass (the evidence says so).
    pub fn from_corefile(
        text: &str,
        services: &[DnsService],
        complete: bool,
    ) -> Result<NodeLocal, CorefileError> {
        let cf = Corefile::parse(text)?;
        let mut nl = NodeLocal {
            detected: true,
            evidence: vec!["ConfigMap kube-system/node-local-dns exists".into()],
            ..Default::default()
        };
        for s in &cf.servers {
            for d in s.directives.iter().filter(|d| d.name == "forward") {
                let to = d.args[1..].join(" ");
                let mut owner = None;
                let mut reaches = if to.contains("__PILLAR__CLUSTER__DNS__") {
                    Some(true)
                } else {
                    None
                };
                let mut literal = false;
                for t in to.split_whitespace() {
                    let host = t
                        .trim_start_matches("dns://")
                        .trim_start_matches('[')
                        .split(']')
                        .next()
                        .unwrap_or("");
                    let host = if host.matches(':').count() == 1 {
                        host.split(':').next().unwrap_or(host)
                    } else {
                        host
                    };
                    if host.parse::<std::net::IpAddr>().is_err() {
                        continue;
                    }
                    literal = true;
                    if let Some(svc) = services
                        .iter()
                        .find(|svc| svc.cluster_ips.iter().any(|ip| ip == host))
                    {
                        owner = Some(svc.name.clone());
                        if svc.fronts_coredns {
                            reaches = Some(true);
                        }
                    }
                }
                if reaches.is_none() && (!literal || complete) {
                    reaches = Some(false);
                }
                let root = s.zones.iter().any(|z| z == ".");
                match (reaches, root) {
                    (Some(true), _) => nl.to_coredns_zones.extend(s.zones.iter().cloned()),
                    (Some(false), true) => nl.other_upstream = Some(to.clone()),
                    (Some(false), false) => nl.evidence.push(format!(
                        "the {} block forwards to {to}, which is not CoreDNS{}: its names \
                         skip CoreDNS",
                        s.zones.join(" "),
                        if literal && owner.is_none() {
                            " (no kube-system Service owns that IP)"
                        } else {
                            ""
                        }
                    )),
                    (None, false) => nl.evidence.push(format!(
                        "the {} block forwards to {to}; Services in kube-system could not be \
                         listed, so whether that is CoreDNS cannot be told: no bypass is claimed",
                        s.zones.join(" ")
                    )),
                    (None, true) => nl.evidence.push(format!(
                        "the . block forwards to {to}; Services in kube-system could not be \
                         listed, so whether that is CoreDNS (kube-dns-upstream) cannot be told: \
                         no bypass is claimed"
                    )),
                }
                if let Some(o) = &owner {
                    nl.evidence.push(format!(
                        "forward . {to} ({}) is Service {o}{}",
                        s.zones.join(" "),
                        if reaches == Some(true) {
                            ", which fronts CoreDNS: no bypass"
                        } else {
                            ", which does not select the CoreDNS pods"
                        }
                    ));
                }
                nl.forwards.push(NodeLocalForward {
                    zones: s.zones.clone(),
                    to,
                    owner,
                    reaches_coredns: reaches,
                });
            }
        }
        Ok(nl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: &str = r#"
.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    # pins for the lab
    hosts {
       192.168.2.20 gitea.example.local registry
       10.0.0.5 gitea.prod.example.dev
       fallthrough
    }
    forward corp.example 10.1.1.1 {
       except public.corp.example
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
    rewrite name old.example.dev gitea.prod.example.dev
    rewrite name suffix .legacy.example. .example.dev.
    rewrite name regex (.*)\.svc\.old\.local {1}.svc.cluster.local
    template IN A tmpl.example {
       match "^wild[0-9]+\.tmpl\.example\.$"
       answer "{{ .Name }} 60 IN A 10.9.9.9"
       fallthrough
    }
    loop
    reload
    loadbalance
}
consul.local:53 {
    errors
    cache 30
    forward . 10.150.0.1
}
"#;

    #[test]
    fn parses_blocks() {
        let cf = Corefile::parse(KIND).unwrap();
        assert_eq!(cf.servers.len(), 2);
        assert_eq!(cf.servers[0].zones, vec!["."]);
        assert_eq!(cf.servers[0].port, 53);
        assert_eq!(cf.servers[1].zones, vec!["consul.local."]);
        let hosts = cf.servers[0]
            .directives
            .iter()
            .find(|d| d.name == "hosts")
            .unwrap();
        assert_eq!(hosts_entries(hosts).len(), 2);
        assert_eq!(hosts.line, 9);
        let multi =
            Corefile::parse("example.org:1053 dns://example.net:1053 {\n whoami\n}\n").unwrap();
        assert_eq!(multi.servers[0].zones, vec!["example.org.", "example.net."]);
        assert_eq!(multi.servers[0].port, 1053);
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let e = Corefile::parse(".:53 {\n hosts {\n  1.2.3.4 a\n}\n").unwrap_err();
        assert!(e.message.contains("not closed"), "{e}");
        let e = Corefile::parse("}\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = Corefile::parse(".:53\n").unwrap_err();
        assert!(e.message.contains("no '{"), "{e}");
    }

    #[test]
    fn hosts_pin_beats_kubernetes_and_forward_regardless_of_corefile_order() {
        let cf = Corefile::parse(KIND).unwrap();
        let e = cf.explain("gitea.prod.example.dev.", 53);
        assert_eq!(e.answered_by.as_deref(), Some("hosts"));
        assert_eq!(e.detail, "pinned to 10.0.0.5");
        assert!(e.cached);
        // Not pinned: hosts falls through, kubernetes is not its zone, forward . answers.
        let e = cf.explain("github.com.", 53);
        assert_eq!(e.answered_by.as_deref(), Some("forward"));
        assert_eq!(e.detail, "upstream /etc/resolv.conf");
    }

    #[test]
    fn rewrite_runs_before_hosts_even_when_written_after() {
        let cf = Corefile::parse(KIND).unwrap();
        let e = cf.explain("old.example.dev", 53);
        assert_eq!(e.rewritten, "gitea.prod.example.dev.");
        assert_eq!(e.answered_by.as_deref(), Some("hosts"));
        let e = cf.explain("gitea.legacy.example.", 53);
        assert_eq!(e.rewritten, "gitea.example.dev.");
        let e = cf.explain("api.team.svc.old.local.", 53);
        assert_eq!(e.rewritten, "api.team.svc.cluster.local.");
        assert_eq!(e.answered_by.as_deref(), Some("kubernetes"));
    }

    #[test]
    fn first_matching_rewrite_stops_unless_continue_and_cache_zones() {
        let cf = Corefile::parse(
            ".:53 {\n rewrite name exact a.example. b.example.\n rewrite name exact b.example. c.example.\n rewrite continue name suffix .x.example. .y.example.\n rewrite name suffix .y.example. .z.example.\n cache 30 cached.example\n forward . 9.9.9.9\n}\n",
        )
        .unwrap();
        assert_eq!(cf.explain("a.example.", 53).rewritten, "b.example.");
        assert_eq!(cf.explain("q.x.example.", 53).rewritten, "q.z.example.");
        assert!(!cf.explain("a.example.", 53).cached);
        assert!(cf.explain("w.cached.example.", 53).cached);
        let etcd = Corefile::parse(
            ".:53 {\n etcd skydns.local {\n  path /skydns\n }\n forward . 1.1.1.1\n}\n",
        )
        .unwrap();
        assert_eq!(
            etcd.explain("a.skydns.local.", 53).answered_by.as_deref(),
            Some("etcd")
        );
        assert_eq!(
            etcd.explain("a.example.", 53).answered_by.as_deref(),
            Some("forward")
        );
    }

    #[test]
    fn kubernetes_zone_search_expansion_and_template() {
        let cf = Corefile::parse(KIND).unwrap();
        // An external name expanded with a cluster search domain dies in kubernetes (NXDOMAIN).
        let e = cf.explain("gitea.example.dev.team.svc.cluster.local.", 53);
        assert_eq!(e.answered_by.as_deref(), Some("kubernetes"));
        assert_eq!(e.detail, "cluster records (pods insecure)");
        let e = cf.explain("wild7.tmpl.example.", 53);
        assert_eq!(e.answered_by.as_deref(), Some("template"));
        assert!(e.detail.contains("10.9.9.9"));
        // In template zone, no regex match, fallthrough: on to forward.
        let e = cf.explain("other.tmpl.example.", 53);
        assert_eq!(e.answered_by.as_deref(), Some("forward"));
    }

    #[test]
    fn per_zone_forward_except_and_server_block_choice() {
        let cf = Corefile::parse(KIND).unwrap();
        assert_eq!(
            cf.explain("vault.corp.example", 53).detail,
            "upstream 10.1.1.1"
        );
        assert_eq!(
            cf.explain("www.public.corp.example", 53).detail,
            "upstream /etc/resolv.conf"
        );
        let e = cf.explain("db.service.consul.local.", 53);
        assert_eq!(
            e.server_block.as_deref(),
            Some("consul.local.:53 (line 39)")
        );
        assert_eq!(e.detail, "upstream 10.150.0.1");
        let e = cf.explain("x.example.", 5353);
        assert!(e.server_block.is_none());
    }

    #[test]
    fn hosts_without_fallthrough_servfails_and_template_without_fallthrough_too() {
        let cf = Corefile::parse(
            ".:53 {\n forward . 8.8.8.8\n hosts {\n  10.0.0.1 a.example\n }\n}\nt.example:53 {\n template IN A {\n  match ^x\\.\n  answer \"{{ .Name }} 5 IN A 1.1.1.1\"\n }\n forward . 1.1.1.1\n}\n",
        )
        .unwrap();
        let e = cf.explain("b.example.", 53);
        assert_eq!(e.answered_by.as_deref(), Some("hosts"));
        assert!(e.detail.starts_with("SERVFAIL"));
        let e = cf.explain("y.t.example.", 53);
        assert_eq!(e.answered_by.as_deref(), Some("template"));
        assert!(e.detail.starts_with("SERVFAIL"));
        let e = cf.explain("x.t.example.", 53);
        assert_eq!(e.answered_by.as_deref(), Some("template"));
    }

    fn kube_dns(name: &str, ip: &str, fronts: bool) -> DnsService {
        DnsService {
            name: name.into(),
            cluster_ips: vec![ip.into()],
            fronts_coredns: fronts,
        }
    }

    /// kubernetes/dns#592: a rendered node-local-dns whose `.:53` forwards to a literal IP that
    /// is the kube-dns-upstream Service (selector k8s-app: kube-dns) does not bypass CoreDNS;
    /// the same IP unknown (Services unreadable) is not judged; an IP of another Service is.
    #[test]
    fn nodelocal_literal_ip_is_resolved_to_its_service_before_judging() {
        let cf = "cluster.local:53 {\n forward . 10.96.200.1 {\n  force_tcp\n }\n}\n.:53 {\n forward . 10.96.200.1\n}\n";
        let svcs = [
            kube_dns("kube-system/kube-dns", "10.96.0.10", true),
            kube_dns("kube-system/kube-dns-upstream", "10.96.200.1", true),
        ];
        let nl = NodeLocal::from_corefile(cf, &svcs, true).unwrap();
        assert!(!nl.bypasses_coredns("gitea.prod.example.dev."));
        assert_eq!(nl.other_upstream, None);
        assert_eq!(
            nl.forwards[1].owner.as_deref(),
            Some("kube-system/kube-dns-upstream")
        );
        assert_eq!(nl.forwards[1].reaches_coredns, Some(true));
        assert!(
            nl.evidence
                .iter()
                .any(|e| e
                    .contains("is Service kube-system/kube-dns-upstream, which fronts CoreDNS")),
            "{:?}",
            nl.evidence
        );
        let unknown = NodeLocal::from_corefile(cf, &[], false).unwrap();
        assert!(!unknown.bypasses_coredns("gitea.prod.example.dev."));
        assert!(
            unknown
                .evidence
                .iter()
                .any(|e| e.contains("cannot be told"))
        );
        // Both blocks forward to a Service that does not select CoreDNS: every name skips it,
        // the cluster domain too (judged per zone; it was listed as reaching CoreDNS).
        let other = [kube_dns("kube-system/dnsmasq", "10.96.200.1", false)];
        let nl = NodeLocal::from_corefile(cf, &other, true).unwrap();
        assert!(nl.bypasses_coredns("x.cluster.local."));
        assert!(nl.bypasses_coredns("gitea.prod.example.dev."));
        assert!(nl.to_coredns_zones.is_empty(), "{:?}", nl.to_coredns_zones);
    }

    #[test]
    fn nodelocal_bypass() {
        // Shape of kubernetes/dns cluster/addons/dns/nodelocaldns/nodelocaldns.yaml.
        let nl = NodeLocal::from_corefile(
            r#"
cluster.local:53 {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
    reload
    loop
    bind 169.254.20.10 10.96.0.10
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    health 169.254.20.10:8080
    }
in-addr.arpa:53 {
    errors
    cache 30
    bind 169.254.20.10 10.96.0.10
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    }
.:53 {
    errors
    cache 30
    bind 169.254.20.10 10.96.0.10
    forward . __PILLAR__UPSTREAM__SERVERS__
    }
"#,
            &[],
            true,
        )
        .unwrap();
        assert!(nl.bypasses_coredns("gitea.prod.example.dev."));
        assert!(!nl.bypasses_coredns("gitea.team.svc.cluster.local."));
        assert_eq!(
            nl.other_upstream.as_deref(),
            Some("__PILLAR__UPSTREAM__SERVERS__")
        );
        let rendered = NodeLocal::from_corefile(
            ".:53 {\n forward . 10.96.0.10\n}\n",
            &[kube_dns("kube-system/kube-dns", "10.96.0.10", true)],
            true,
        )
        .unwrap();
        assert!(!rendered.bypasses_coredns("anything.example."));
        let cf = "cluster.local:53 {\n forward . 10.96.200.1 {\n  force_tcp\n }\n}\n.:53 {\n forward . /etc/resolv.conf\n}\n";
        let rendered = NodeLocal::from_corefile(
            cf,
            &[kube_dns(
                "kube-system/kube-dns-upstream",
                "10.96.200.1",
                true,
            )],
            true,
        )
        .unwrap();
        assert!(rendered.bypasses_coredns("gitea.prod.example.dev."));
        assert_eq!(
            rendered.bypass_upstream("gitea.prod.example.dev."),
            Some("/etc/resolv.conf")
        );
        assert!(!rendered.bypasses_coredns("api.default.svc.cluster.local."));
        assert_eq!(rendered.to_coredns_zones, vec!["cluster.local."]);
    }

    /// Session 6 trial: the JSON listed `cluster.local.` in toCorednsZones while that zone's
    /// forward said reachesCoredns false (a literal IP no kube-system Service owns). The
    /// zone list, the forward and the bypass judgement now agree, per zone.
    #[test]
    fn a_cluster_zone_forwarding_to_an_unowned_ip_is_not_listed_as_reaching_coredns() {
        let cf = "cluster.local:53 {\n forward . 10.96.0.11\n}\n.:53 {\n forward . 10.96.0.10\n}\n";
        let svcs = [kube_dns("kube-system/kube-dns", "10.96.0.10", true)];
        let nl = NodeLocal::from_corefile(cf, &svcs, true).unwrap();
        assert_eq!(nl.forwards[0].zones, vec!["cluster.local."]);
        assert_eq!(nl.forwards[0].reaches_coredns, Some(false));
        assert_eq!(nl.forwards[0].owner, None);
        assert_eq!(nl.forwards[1].reaches_coredns, Some(true));
        assert_eq!(nl.to_coredns_zones, vec!["."]);
        assert_eq!(nl.other_upstream, None);
        assert!(nl.bypasses_coredns("api.default.svc.cluster.local."));
        assert_eq!(
            nl.bypass_upstream("api.default.svc.cluster.local."),
            Some("10.96.0.11")
        );
        assert!(!nl.bypasses_coredns("gitea.prod.example.dev."));
        assert!(
            nl.evidence.contains(
                &"the cluster.local. block forwards to 10.96.0.11, which is not CoreDNS (no \
                  kube-system Service owns that IP): its names skip CoreDNS"
                    .to_string()
            ),
            "{:?}",
            nl.evidence
        );
        // Services unreadable: nothing is claimed for either block.
        let unknown = NodeLocal::from_corefile(cf, &[], false).unwrap();
        assert!(!unknown.bypasses_coredns("api.default.svc.cluster.local."));
        assert!(unknown.to_coredns_zones.is_empty());
    }
}
