//! kubectl's error text without klog's line header.
//!
//! kubectl 1.32 reports a failed command through klog (`kubectl kustomize` with a missing
//! resource: `E1201 18:28:48.123456   2729 run.go:72] "command failed" err="accumulating
//! resources: ..."`). The header carries the time and process of one run, which means nothing
//! to the reader and, from a cache, is another run's; the structured value around the message
//! is klog's serialization, not kubectl's message. Every plugin that shows a `kubectl` error
//! (fleetlint's render, cutover's authored-file check) shows it through [`strip_klog`].

use std::sync::OnceLock;

/// klog's line header (k8s.io/klog/v2 `formatHeader`): severity letter (`I`, `W`, `E`, `F`),
/// `MMDD`, `hh:mm:ss.uuuuuu`, spaces, the thread id, `file:line`, `] `.
fn header() -> &'static regex::Regex {
    static HEADER: OnceLock<regex::Regex> = OnceLock::new();
    HEADER.get_or_init(|| {
        regex::Regex::new(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+ [^\s\]]+:\d+\] ")
            .expect("klog header regex")
    })
}

/// `s` (kubectl's stderr) with every klog line header removed, trimmed.
///
/// - `HEADER "command failed" err="MESSAGE"` (klog/v2 `KObj`-style key/value with a one-line
///   value, Go-quoted) becomes `MESSAGE`, unquoted (`\"` → `"`, `\n` → a new line).
/// - `HEADER "command failed" err=<` followed by tab-indented lines and a line ` >` (klog/v2
///   internal/serialize's multi-line value) becomes those lines without the tab.
/// - `HEADER anything else` becomes `anything else`.
/// - Lines without a header (e.g. `error: ...` from kubectl's `cmdutil.CheckErr`) are kept as
///   they are; text without any header is returned unchanged (but trimmed).
pub fn strip_klog(s: &str) -> String {
    let header = header();
    let mut out: Vec<String> = Vec::new();
    let mut lines = s.lines();
    while let Some(line) = lines.next() {
        let Some(m) = header.find(line) else {
            out.push(line.to_string());
            continue;
        };
        let rest = &line[m.end()..];
        if let Some(msg) = rest.strip_suffix("err=<") {
            // "command failed" err=<\n\t<message lines>\n >
            let msg = msg.trim().trim_matches('"');
            let mut block = Vec::new();
            for l in lines.by_ref() {
                if l.trim() == ">" {
                    break;
                }
                block.push(l.strip_prefix('\t').unwrap_or(l).to_string());
            }
            if block.is_empty() && !msg.is_empty() {
                out.push(msg.to_string());
            }
            out.extend(block);
        } else if let Some((_, err)) = rest.split_once(" err=\"") {
            // "command failed" err="<message>" (a one-line value, Go-quoted)
            let err = err.strip_suffix('"').unwrap_or(err);
            let err = serde_json::from_str::<String>(&format!("\"{err}\""))
                .unwrap_or_else(|_| err.to_string());
            out.push(err);
        } else {
            out.push(rest.to_string());
        }
    }
    out.join("\n").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::strip_klog;

    #[test]
    fn a_one_line_err_value_is_the_message_unquoted() {
        let s = "E1201 23:01:02.123456    1234 run.go:72] \"command failed\" err=\"accumulating \
                 resources: accumulation err='accumulating resources from 'missing.yaml': \
                 \\\"x\\\" not found'\"\n";
        assert_eq!(
            strip_klog(s),
            "accumulating resources: accumulation err='accumulating resources from \
             'missing.yaml': \"x\" not found'"
        );
    }

    #[test]
    fn a_multi_line_err_value_is_its_lines_without_the_tab() {
        let s = "E1201 18:28:48.995418   2729 run.go:72] \"command failed\" err=<\n\
                 \tmust build at directory: first line\n\
                 \tsecond line\n \
                 >\n";
        assert_eq!(
            strip_klog(s),
            "must build at directory: first line\nsecond line"
        );
    }

    #[test]
    fn other_headed_lines_keep_their_text_and_unheaded_lines_stay() {
        let s = "W0102 03:04:05.000001 77 loader.go:10] a warning\nerror: unable to find one";
        assert_eq!(strip_klog(s), "a warning\nerror: unable to find one");
    }

    #[test]
    fn text_without_a_header_is_unchanged() {
        for s in [
            "error: accumulating resources: x",
            "E is a letter: 1201 not a header",
            "E1201 no time here] x",
        ] {
            assert_eq!(strip_klog(s), s);
        }
        assert_eq!(strip_klog("  padded\n"), "padded");
    }

    #[test]
    fn no_header_survives_from_a_real_kubectl_kustomize_failure() {
        // The real kubectl of this machine (the one both plugins run).
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("kustomization.yaml"),
            "resources:\n- missing.yaml\n",
        )
        .unwrap();
        let out = std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(dir.path())
            .output()
            .expect("kubectl on PATH (the plugins run it)");
        assert!(!out.status.success());
        let raw = String::from_utf8_lossy(&out.stderr);
        let clean = strip_klog(&raw);
        assert!(clean.contains("missing.yaml"), "{clean}");
        assert!(!clean.contains("run.go"), "{clean}");
        assert!(!clean.contains("command failed"), "{clean}");
        assert!(
            !clean.lines().any(|l| l.len() > 5
                && l.as_bytes()[0] == b'E'
                && l[1..5].bytes().all(|b| b.is_ascii_digit())),
            "{clean}"
        );
    }
}
