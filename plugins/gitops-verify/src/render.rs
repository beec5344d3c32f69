//! Rendering: the chain table (`-o table`, the first link that does not hold marked), the
//! GitHub Actions annotations (`--format github`), and the one-line change messages of
//! `--wait` (stderr).

use cluster_loop::output::Painter;
use jiff::Timestamp;

use crate::chain::{ChainReport, LinkReport, Verdict};

/// `by 17:45:03Z (in 2m10s)` for a deadline after `now`, `by 17:45:03Z (overdue 10s)` else.
pub fn by(deadline: Timestamp, now: Timestamp) -> String {
    let secs = deadline.as_second() - now.as_second();
    let t = deadline.strftime("%H:%M:%SZ");
    let human = |s: i64| {
        cluster_loop::duration::format_go_duration(std::time::Duration::from_secs(s.unsigned_abs()))
    };
    if secs >= 0 {
        format!("by {t} (in {})", human(secs))
    } else {
        format!("by {t} (overdue {})", human(secs))
    }
}

fn verdict_cell(p: &Painter, v: Verdict) -> String {
    match v {
        Verdict::Ok => p.ok("ok"),
        Verdict::NotApplicable => p.dim("n/a"),
        Verdict::Waiting => p.warn("waiting"),
        Verdict::Unknown => p.warn("unknown"),
        Verdict::Broken => p.err("BROKEN"),
    }
}

fn what(l: &LinkReport, now: Timestamp) -> String {
    let mut s = l.summary.clone();
    if let Some(d) = l.deadline {
        s.push_str(&format!(", {}", by(d, now)));
    }
    for e in &l.evidence {
        let mut line = format!("\n{} {}: {}", e.verdict.as_str(), e.object, e.detail);
        if let Some(d) = e.deadline.filter(|_| e.verdict == Verdict::Waiting) {
            line.push_str(&format!(" ({})", by(d, now)));
        }
        s.push_str(&line);
    }
    if let Some(f) = &l.fix {
        s.push_str(&format!("\nfix: {f}"));
    }
    s
}

/// The chain table: `#`, LINK, VERDICT, WHAT (summary, deadline, one line per member, fix),
/// the first link that does not hold marked `<- first broken` (or `<- first waiting`), then
/// the scope, the `--wait` deadline and the notes.
pub fn table(r: &ChainReport, p: &Painter) -> String {
    let mut t = p.table(&["#", "LINK", "VERDICT", "WHAT"]);
    for l in &r.links {
        let first = r.first_broken == Some(l.id);
        let name = if first {
            p.bold(&format!(
                "{} <- first {}",
                l.id,
                if l.verdict == Verdict::Broken {
                    "broken"
                } else {
                    l.verdict.as_str()
                }
            ))
        } else {
            l.id.to_string()
        };
        t.add_row(vec![
            l.position.to_string(),
            name,
            verdict_cell(p, l.verdict),
            what(l, r.checked_at),
        ]);
    }
    let mut out = cluster_loop::output::render_table(&t);
    out.push('\n');
    out.push_str(&format!(
        "scope: namespace {}{}; {} API requests\n",
        r.scope.namespace,
        r.scope
            .source
            .as_ref()
            .map(|s| format!(", source {s}"))
            .unwrap_or_default(),
        r.api_requests
    ));
    if let Some(w) = &r.wait {
        out.push_str(&format!(
            "wait: deadline {} ({}){}\n",
            w.deadline,
            w.why,
            if w.expired {
                ": passed, still waiting"
            } else {
                ""
            }
        ));
    }
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out.push_str(&match r.exit_code {
        0 => p.ok("the chain holds"),
        4 => p.warn("the chain is not there yet: a link is still waiting"),
        _ => p.err(&format!(
            "the chain is broken at link {}",
            r.first_broken.unwrap_or("?")
        )),
    });
    out.push('\n');
    out
}

/// Escapes a GitHub Actions workflow command's message (`%`, CR, LF) or property (also `:`
/// and `,`), as actions/toolkit `command.ts` escapeData/escapeProperty do.
fn esc(s: &str, property: bool) -> String {
    let mut o = s
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A");
    if property {
        o = o.replace(':', "%3A").replace(',', "%2C");
    }
    o
}

/// GitHub Actions annotations, one per link: `::error` for broken and unknown, `::warning`
/// for waiting, `::notice` for ok and not-applicable; title `gitops verify: <id>`, message
/// the summary, members and fix.
pub fn github(r: &ChainReport) -> String {
    let mut out = String::new();
    for l in &r.links {
        let level = match l.verdict {
            Verdict::Broken | Verdict::Unknown => "error",
            Verdict::Waiting => "warning",
            Verdict::Ok | Verdict::NotApplicable => "notice",
        };
        out.push_str(&format!(
            "::{level} title={}::{}\n",
            esc(
                &format!("gitops verify: {} {}", l.id, l.verdict.as_str()),
                true
            ),
            esc(&what(l, r.checked_at), false)
        ));
    }
    out
}

/// The `--wait` line for a link whose verdict changed: `link 2 kustomizations: waiting ->
/// ok: 3 of 3 ok`.
pub fn change_line(old: Option<Verdict>, l: &LinkReport) -> String {
    match old {
        Some(o) => format!(
            "link {} {}: {} -> {}: {}",
            l.position,
            l.id,
            o.as_str(),
            l.verdict.as_str(),
            l.summary
        ),
        None => format!(
            "link {} {}: {}: {}",
            l.position,
            l.id,
            l.verdict.as_str(),
            l.summary
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_escapes_newlines_and_properties() {
        assert_eq!(esc("a\nb%", false), "a%0Ab%25");
        assert_eq!(esc("a: b, c", true), "a%3A b%2C c");
    }

    #[test]
    fn deadlines_read_relative_to_now() {
        let now: Timestamp = "2026-12-03T18:00:00Z".parse().unwrap();
        let d: Timestamp = "2026-12-03T18:02:10Z".parse().unwrap();
        assert_eq!(by(d, now), "by 18:02:10Z (in 2m10s)");
        assert_eq!(by(now, d), "by 18:00:00Z (overdue 2m10s)");
    }
}
