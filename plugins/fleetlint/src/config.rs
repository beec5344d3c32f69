//! `.fleetlint.yaml` (the repository's configuration) and inline `# fleetlint:ignore`
//! comments, as kube-linter, yamllint and kubeconform let a team silence what it has decided.
//!
//! ```yaml
//! # .fleetlint.yaml, at the repository root
//! rules:
//!   FL060: off          # off | on | error | warning | info
//!   FL030: warning      # a severity override turns the rule on too
//! ignorePaths:          # gitignore patterns: findings in these files are suppressed
//!   - archive/
//! placeholder: "CHANGEME-*"
//! vipConvention: pool-start   # this fleet's convention: turns FL051 on
//! ```
//!
//! Inline, on the finding's line or anywhere in the same YAML document (the object):
//! `# fleetlint:ignore FL030 the shell expands it` (several IDs separated by commas). A
//! suppressed finding is never dropped silently: it is counted in the summary and listed in
//! `-o json` (`suppressed[]`) with what suppressed it.

use crate::lint::Finding;
use crate::rules::{OFF_BY_DEFAULT, Severity};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use std::collections::BTreeMap;
use std::path::Path;

/// The configuration file's name, read at the repository root.
pub const FILE: &str = ".fleetlint.yaml";

/// `.fleetlint.yaml` as written.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    rules: BTreeMap<String, String>,
    #[serde(default)]
    ignore_paths: Vec<String>,
    #[serde(default)]
    placeholder: Option<String>,
    #[serde(default)]
    vip_convention: Option<String>,
}

/// What the configuration says of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleSetting {
    /// Findings of the rule are suppressed.
    Off,
    /// On, at the rule's own severity.
    On,
    /// On, at this severity.
    Severity(Severity),
}

/// The loaded configuration.
#[derive(Debug, Default)]
pub struct FileConfig {
    /// The file it came from (`None`: no file, defaults).
    pub file: Option<String>,
    /// Per rule ID (upper case).
    pub rules: BTreeMap<String, RuleSetting>,
    /// `ignorePaths` as one matcher (rooted at the repository root).
    ignore_paths: Option<Gitignore>,
    /// `placeholder`.
    pub placeholder: Option<String>,
    /// `vipConvention: pool-start` (FL051 on).
    pub vip_pool_start: bool,
}

/// Why a finding was suppressed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Suppressed {
    /// The finding.
    #[serde(flatten)]
    pub finding: Finding,
    /// `config rules: FL030: off`, `config ignorePaths`, or `inline file:line: reason`.
    pub by: String,
}

impl FileConfig {
    /// Reads `ROOT/.fleetlint.yaml` (defaults when absent).
    ///
    /// Errors: the file exists but cannot be read, does not parse, names an unknown rule or an
    /// unknown setting (the message names the file and what to write).
    pub fn load(root: &Path) -> Result<FileConfig, String> {
        let path = root.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FileConfig::default()),
            Err(e) => return Err(format!("{FILE}: {e}")),
        };
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig::default()
        } else {
            serde_saphyr::from_str(&text).map_err(|e| {
                format!("{FILE}: {e} (keys: rules, ignorePaths, placeholder, vipConvention)")
            })?
        };
        let mut rules = BTreeMap::new();
        for (id, v) in raw.rules {
            let known = crate::rules::find(&id).is_some()
                || markercheck::check::RULES
                    .iter()
                    .any(|m| m.0.eq_ignore_ascii_case(&id));
            if !known {
                return Err(format!(
                    "{FILE}: rules: unknown rule {id:?} (kubectl fleetlint --list-rules lists them)"
                ));
            }
            let setting = match v.to_ascii_lowercase().as_str() {
                "off" | "false" => RuleSetting::Off,
                "on" | "true" => RuleSetting::On,
                "error" => RuleSetting::Severity(Severity::Error),
                "warning" => RuleSetting::Severity(Severity::Warning),
                "info" => RuleSetting::Severity(Severity::Info),
                other => {
                    return Err(format!(
                        "{FILE}: rules: {id}: {other:?} is not one of off, on, error, warning, info"
                    ));
                }
            };
            rules.insert(id.to_ascii_uppercase(), setting);
        }
        let vip_pool_start = match raw.vip_convention.as_deref() {
            None | Some("none") => false,
            Some("pool-start") => true,
            Some(o) => {
                return Err(format!(
                    "{FILE}: vipConvention: {o:?} is not one of pool-start, none"
                ));
            }
        };
        let ignore_paths = if raw.ignore_paths.is_empty() {
            None
        } else {
            let mut b = GitignoreBuilder::new(root);
            for p in &raw.ignore_paths {
                b.add_line(None, p)
                    .map_err(|e| format!("{FILE}: ignorePaths: {p:?}: {e}"))?;
            }
            Some(b.build().map_err(|e| format!("{FILE}: ignorePaths: {e}"))?)
        };
        Ok(FileConfig {
            file: Some(FILE.into()),
            rules,
            ignore_paths,
            placeholder: raw.placeholder,
            vip_pool_start,
        })
    }

    /// True when the rule runs: not `off`, and a rule of [`OFF_BY_DEFAULT`] only when turned on
    /// (`FL051` also by `vipConvention: pool-start`).
    pub fn enabled(&self, id: &str) -> bool {
        match self.rules.get(id) {
            Some(RuleSetting::Off) => false,
            Some(_) => true,
            None => !OFF_BY_DEFAULT.contains(&id) || (id == "FL051" && self.vip_pool_start),
        }
    }

    /// Applies the configuration and the inline comments to `findings`: drops the findings of
    /// rules that are off by default and not turned on, sets severity overrides, and moves the
    /// suppressed ones (rule off, ignored path, inline comment) to the returned list.
    /// `text_of` gives a repository-relative file's text (`None`: not read).
    pub fn apply<'a>(
        &self,
        root: &Path,
        findings: &mut Vec<Finding>,
        text_of: impl Fn(&str) -> Option<&'a str>,
    ) -> Vec<Suppressed> {
        let mut suppressed = Vec::new();
        let mut kept = Vec::with_capacity(findings.len());
        for mut f in findings.drain(..) {
            match self.rules.get(&f.rule) {
                Some(RuleSetting::Off) => {
                    suppressed.push(Suppressed {
                        by: format!("{FILE} rules: {}: off", f.rule),
                        finding: f,
                    });
                    continue;
                }
                Some(RuleSetting::Severity(s)) => f.severity = *s,
                Some(RuleSetting::On) => {}
                None if OFF_BY_DEFAULT.contains(&f.rule.as_str()) && !self.enabled(&f.rule) => {
                    continue;
                }
                None => {}
            }
            if let Some(g) = &self.ignore_paths
                && !f.file.is_empty()
                && g.matched_path_or_any_parents(root.join(&f.file), false)
                    .is_ignore()
            {
                suppressed.push(Suppressed {
                    by: format!("{FILE} ignorePaths"),
                    finding: f,
                });
                continue;
            }
            if let Some(by) = text_of(&f.file).and_then(|t| inline(t, f.line, &f.rule)) {
                suppressed.push(Suppressed {
                    by: format!("inline {}:{by}", f.file),
                    finding: f,
                });
                continue;
            }
            kept.push(f);
        }
        *findings = kept;
        suppressed
    }
}

/// The `# fleetlint:ignore ID[,ID...] reason` comment that silences `rule` at 1-based `line` of
/// `text`: on the line itself or on any line of the same YAML document (between `---`
/// separators). Returns "LINE: reason" (or "LINE" without a reason).
pub fn inline(text: &str, line: usize, rule: &str) -> Option<String> {
    if line == 0 || !text.contains("fleetlint:ignore") {
        return None;
    }
    let lines: Vec<&str> = text.lines().collect();
    let at = line.min(lines.len()).saturating_sub(1);
    let sep = |l: &str| l.starts_with("---");
    let start = (0..=at).rev().find(|&i| sep(lines[i])).map_or(0, |i| i + 1);
    let end = (at + 1..lines.len())
        .find(|&i| sep(lines[i]))
        .unwrap_or(lines.len());
    for (i, l) in lines.iter().enumerate().take(end).skip(start) {
        let Some((_, rest)) = l.split_once("fleetlint:ignore") else {
            continue;
        };
        let rest = rest.trim_start();
        let (ids, reason) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if ids
            .split(',')
            .any(|id| id.trim().eq_ignore_ascii_case(rule))
        {
            let reason = reason.trim();
            return Some(if reason.is_empty() {
                format!("{}", i + 1)
            } else {
                format!("{}: {reason}", i + 1)
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_comment_covers_its_line_and_its_document_only() {
        let t = "a: 1\n---\n# fleetlint:ignore FL070,FL030 pinned by digest in prod\nkind: X\nimage: x:latest\n---\nimage: y:latest\n";
        assert_eq!(
            inline(t, 5, "FL070").as_deref(),
            Some("3: pinned by digest in prod")
        );
        assert!(inline(t, 5, "FL031").is_none());
        assert!(inline(t, 7, "FL070").is_none());
        assert!(inline(t, 1, "FL070").is_none());
        assert_eq!(
            inline("image: x # fleetlint:ignore FL070\n", 1, "fl070").as_deref(),
            Some("1")
        );
    }

    #[test]
    fn config_file_reads_rules_paths_and_conventions_and_rejects_unknown_ones() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(
            t.path().join(FILE),
            "rules:\n  FL060: off\n  FL030: warning\nignorePaths:\n  - archive/\nplaceholder: CHANGEME-*\nvipConvention: pool-start\n",
        )
        .unwrap();
        let c = FileConfig::load(t.path()).unwrap();
        assert_eq!(c.rules["FL060"], RuleSetting::Off);
        assert_eq!(c.rules["FL030"], RuleSetting::Severity(Severity::Warning));
        assert!(c.enabled("FL051") && !c.enabled("FL060"));
        assert_eq!(c.placeholder.as_deref(), Some("CHANGEME-*"));
        assert!(!FileConfig::default().enabled("FL051"));
        std::fs::write(t.path().join(FILE), "rules:\n  FL999: off\n").unwrap();
        let e = FileConfig::load(t.path()).unwrap_err();
        assert!(e.contains(".fleetlint.yaml") && e.contains("FL999"), "{e}");
        std::fs::write(t.path().join(FILE), "rulez: {}\n").unwrap();
        assert!(FileConfig::load(t.path()).is_err());
    }
}
