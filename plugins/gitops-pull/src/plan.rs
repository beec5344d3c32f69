//! The decision, in one ordered table ([`RULES`]): the first rule whose facts hold decides,
//! and its words say why and what to run. Then the warnings about the next push
//! ([`warnings`]), which never change the checkout but are findings (exit 1).
//!
//! Safety rules (the issue's, and git's own): pull changes the checked-out branch only by a
//! fast-forward to the branch Flux reads; it refuses a diverged branch (naming the files both
//! sides changed and the rebase command), a dirty work tree, an operation in progress,
//! untracked files the incoming commits would overwrite, a detached HEAD, and a checkout on
//! another branch than the one Flux reads. A refusal changes nothing but the remote-tracking
//! ref (and, without `--dry-run`, not even that when nothing was fetched).

use crate::history::SetterLine;
use crate::source::Automation;

/// The facts a decision is made from.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The branch Flux reads; `None` when the GitRepository pins something else.
    pub source_branch: Option<String>,
    /// What the GitRepository pins instead of a branch (`tag v1.2.0`).
    pub pinned: Option<String>,
    /// The checked-out branch; `None` on a detached HEAD.
    pub local_branch: Option<String>,
    /// The checkout's HEAD commit (`None`: no commit yet).
    pub local_head: Option<String>,
    /// The fetched branch head.
    pub remote_head: String,
    /// The remote-tracking ref as typed in commands: `flux/main`.
    pub tracking: String,
    /// Commits the local branch lacks (`HEAD..flux/main`).
    pub behind: u64,
    /// Local commits the server Flux reads lacks (`flux/main..HEAD`).
    pub ahead: u64,
    /// Files both sides changed since the merge base (when both moved).
    pub both_changed: Vec<String>,
    /// Tracked paths with uncommitted changes (`XY path`).
    pub dirty: Vec<String>,
    /// An operation in progress, as the command that ends it.
    pub in_progress: Option<&'static str>,
    /// Untracked files the incoming commits would create.
    pub untracked_in_the_way: Vec<String>,
}

/// What pull does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Fast-forward the checked-out branch to the fetched head.
    FastForward,
    /// Nothing to bring home.
    UpToDate,
    /// Refused: nothing in the work tree, index or branches changes.
    Refused,
}

/// The decision and its words.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// What pull does.
    pub action: Action,
    /// The rule of [`RULES`] that decided.
    pub rule: &'static str,
    /// Why, in one sentence.
    pub message: String,
    /// The files concerned (both sides changed, dirty, in the way).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// The command to run next (the fast-forward's own, or what ends the refusal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

use cluster_loop::output::count;

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(7)]
}

type Rule = (&'static str, fn(&Facts) -> Option<Decision>);

fn refuse(
    rule: &'static str,
    message: String,
    files: Vec<String>,
    command: Option<String>,
) -> Option<Decision> {
    Some(Decision {
        action: Action::Refused,
        rule,
        message,
        files,
        command,
    })
}

/// The rules, in order: the first that returns a decision decides.
pub const RULES: &[Rule] = &[
    ("not-a-branch", |f| {
        let pinned = f.pinned.as_ref()?;
        refuse(
            "not-a-branch",
            format!(
                "the GitRepository follows {pinned}, not a branch: image automation pushes to a \
                 branch, so there is nothing to bring home"
            ),
            vec![],
            None,
        )
    }),
    ("detached-head", |f| {
        if f.local_branch.is_some() {
            return None;
        }
        let b = f.source_branch.as_deref().unwrap_or("main");
        refuse(
            "detached-head",
            format!(
                "HEAD is detached{}: pull moves a branch, and only the one Flux reads ({b})",
                f.local_head
                    .as_deref()
                    .map(|h| format!(" at {}", short(h)))
                    .unwrap_or_default()
            ),
            vec![],
            Some(format!("git switch {b}")),
        )
    }),
    ("other-branch", |f| {
        let (local, flux) = (f.local_branch.as_ref()?, f.source_branch.as_ref()?);
        if local == flux {
            return None;
        }
        refuse(
            "other-branch",
            format!(
                "the checkout is on {local}, but Flux reads {flux}: pull fast-forwards only the \
                 branch Flux reads"
            ),
            vec![],
            Some(format!("git switch {flux}")),
        )
    }),
    ("operation-in-progress", |f| {
        let what = f.in_progress?;
        refuse(
            "operation-in-progress",
            format!("the checkout is in the middle of {what}: finish or abort it first"),
            vec![],
            None,
        )
    }),
    ("up-to-date", |f| {
        if f.behind > 0 {
            return None;
        }
        let local = f.local_branch.as_deref().unwrap_or("HEAD");
        Some(Decision {
            action: Action::UpToDate,
            rule: "up-to-date",
            message: if f.ahead > 0 {
                format!(
                    "{local} has every commit of {}; {} not on the server Flux reads yet",
                    f.tracking,
                    if f.ahead == 1 {
                        "1 local commit is".to_string()
                    } else {
                        format!("{} local commits are", f.ahead)
                    }
                )
            } else {
                format!("{local} is at {} already", f.tracking)
            },
            files: vec![],
            command: None,
        })
    }),
    ("diverged", |f| {
        if f.ahead == 0 {
            return None;
        }
        let local = f.local_branch.as_deref().unwrap_or("HEAD");
        refuse(
            "diverged",
            format!(
                "{local} and {} diverged: {} here and {} only on the server Flux reads; a \
                 fast-forward is impossible and pull merges nothing. {} both sides changed",
                f.tracking,
                count(f.ahead, "local commit"),
                count(f.behind, "commit"),
                match f.both_changed.len() {
                    0 => "No file".to_string(),
                    1 => "1 file".to_string(),
                    n => format!("{n} files"),
                }
            ),
            f.both_changed.clone(),
            Some(format!("git rebase {}", f.tracking)),
        )
    }),
    ("dirty-work-tree", |f| {
        if f.dirty.is_empty() {
            return None;
        }
        refuse(
            "dirty-work-tree",
            format!(
                "the work tree has {}: pull never touches a dirty work tree",
                count(f.dirty.len() as u64, "uncommitted change")
            ),
            f.dirty.clone(),
            Some("git stash".into()),
        )
    }),
    ("untracked-in-the-way", |f| {
        if f.untracked_in_the_way.is_empty() {
            return None;
        }
        refuse(
            "untracked-in-the-way",
            format!(
                "{} the incoming commits add would be overwritten",
                count(f.untracked_in_the_way.len() as u64, "untracked file")
            ),
            f.untracked_in_the_way.clone(),
            Some("git stash --include-untracked".into()),
        )
    }),
    ("fast-forward", |f| {
        let local = f.local_branch.as_deref().unwrap_or("HEAD");
        Some(Decision {
            action: Action::FastForward,
            rule: "fast-forward",
            message: format!(
                "fast-forward {local} {} -> {} ({})",
                f.local_head.as_deref().map(short).unwrap_or("(no commit)"),
                short(&f.remote_head),
                count(f.behind, "commit")
            ),
            files: vec![],
            command: Some(format!("git merge --ff-only {}", f.tracking)),
        })
    }),
];

/// The decision for `facts`: the first rule of [`RULES`] that holds (the last always does).
pub fn decide(facts: &Facts) -> Decision {
    RULES
        .iter()
        .find_map(|(_, rule)| rule(facts))
        .expect("the fast-forward rule always decides")
}

/// A warning about the next push.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Warning {
    /// `origin-not-flux-server`, `setter-will-be-rewritten` or `push-branch-differs`.
    pub kind: &'static str,
    /// What will go astray.
    pub message: String,
    /// What to do.
    pub fix: String,
}

/// The facts the warnings are read from.
#[derive(Debug, Clone, Default)]
pub struct PushFacts<'a> {
    /// The local `origin`'s URL (`None`: no origin).
    pub origin: Option<String>,
    /// `spec.url`.
    pub flux_url: &'a str,
    /// `namespace/name` of the GitRepository.
    pub source: String,
    /// The remote pull keeps for the server Flux reads.
    pub remote: &'a str,
    /// The checked-out branch.
    pub local_branch: Option<&'a str>,
    /// The automations that update the source.
    pub automations: &'a [Automation],
    /// Setter lines of the checkout the automation will rewrite (markercheck's simulation
    /// with the live ImagePolicies).
    pub rewrites: &'a [SetterLine],
}

/// The warnings, in this order: the origin is not the server Flux reads; each setter line the
/// automation will rewrite; each automation whose push branch is not the checkout's branch.
pub fn warnings(f: &PushFacts<'_>) -> Vec<Warning> {
    let mut out = Vec::new();
    if let Some(origin) = &f.origin
        && !crate::url::same_repository(origin, f.flux_url)
    {
        let branch = f.local_branch.unwrap_or("HEAD");
        out.push(Warning {
            kind: "origin-not-flux-server",
            message: format!(
                "origin is {}, but Flux reads {} (GitRepository {} spec.url): a git push to \
                 origin goes to a repository Flux does not read",
                crate::url::redacted(origin),
                crate::url::redacted(f.flux_url),
                f.source
            ),
            fix: format!(
                "push to the server Flux reads (git push {} {branch}), or point origin at it \
                 (git remote set-url origin {})",
                f.remote,
                crate::url::redacted(f.flux_url)
            ),
        });
    }
    let active: Vec<&Automation> = f.automations.iter().filter(|a| !a.suspended).collect();
    let who = match active.as_slice() {
        [one] => format!("ImageUpdateAutomation {}", one.id()),
        _ => "the image automation".to_string(),
    };
    for r in f.rewrites {
        out.push(Warning {
            kind: "setter-will-be-rewritten",
            message: format!(
                "{}:{} {}: {who} will rewrite {} -> {} (the ImagePolicy's latest), so a push of \
                 this line is undone by its next commit",
                r.file, r.line, r.setter, r.old, r.new
            ),
            fix: format!(
                "commit {} here, or change the ImagePolicy (or remove the marker) if {} is meant \
                 to stay",
                r.new, r.old
            ),
        });
    }
    if let Some(local) = f.local_branch {
        for a in f.automations {
            if let Some(push) = a.push_branch.as_deref()
                && push != local
            {
                out.push(Warning {
                    kind: "push-branch-differs",
                    message: format!(
                        "ImageUpdateAutomation {} pushes to {push}, not to {local} (the \
                         checkout's branch): its commits reach {local} only when {push} is \
                         merged there",
                        a.id()
                    ),
                    fix: format!(
                        "merge {push} into {local} on the server (a pull request), then pull; or \
                         set spec.git.push.branch to {local}"
                    ),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            source_branch: Some("main".into()),
            local_branch: Some("main".into()),
            local_head: Some("a".repeat(40)),
            remote_head: "b".repeat(40),
            tracking: "flux/main".into(),
            behind: 2,
            ..Facts::default()
        }
    }

    #[test]
    fn the_table_decides_in_order() {
        let d = decide(&facts());
        assert_eq!((d.action, d.rule), (Action::FastForward, "fast-forward"));
        assert_eq!(
            d.message,
            "fast-forward main aaaaaaa -> bbbbbbb (2 commits)"
        );
        assert_eq!(d.command.as_deref(), Some("git merge --ff-only flux/main"));

        let diverged = Facts {
            ahead: 1,
            both_changed: vec!["apps/web.yaml".into()],
            dirty: vec![" M x".into()],
            ..facts()
        };
        let d = decide(&diverged);
        assert_eq!((d.action, d.rule), (Action::Refused, "diverged"));
        assert_eq!(d.files, vec!["apps/web.yaml".to_string()]);
        assert_eq!(d.command.as_deref(), Some("git rebase flux/main"));
        assert!(
            d.message
                .contains("1 local commit here and 2 commits only on the server"),
            "{}",
            d.message
        );

        let dirty = Facts {
            dirty: vec![" M apps/web.yaml".into()],
            ..facts()
        };
        assert_eq!(decide(&dirty).rule, "dirty-work-tree");
        // a dirty tree with nothing to bring home is left alone, and that is no refusal
        let clean_up = Facts { behind: 0, ..dirty };
        assert_eq!(decide(&clean_up).action, Action::UpToDate);

        let other = Facts {
            local_branch: Some("feature".into()),
            ..facts()
        };
        let d = decide(&other);
        assert_eq!(
            (d.rule, d.command.as_deref()),
            ("other-branch", Some("git switch main"))
        );
        assert_eq!(
            decide(&Facts {
                local_branch: None,
                ..facts()
            })
            .rule,
            "detached-head"
        );
        let pinned = Facts {
            source_branch: None,
            pinned: Some("tag v1".into()),
            ..facts()
        };
        assert_eq!(decide(&pinned).rule, "not-a-branch");
        let ahead = Facts {
            behind: 0,
            ahead: 3,
            ..facts()
        };
        let d = decide(&ahead);
        assert_eq!(d.action, Action::UpToDate);
        assert!(
            d.message.contains("3 local commits are not on the server"),
            "{}",
            d.message
        );
    }

    #[test]
    fn warnings_name_the_astray_push() {
        let a = crate::source::Automation {
            namespace: "flux-system".into(),
            name: "fleet".into(),
            author_name: "fluxcdbot".into(),
            author_email: "bot@example.com".into(),
            checkout_branch: Some("main".into()),
            push_branch: Some("image-updates".into()),
            push_refspec: None,
            suspended: false,
            last_push_commit: None,
            setters: markercheck::objects::ImageUpdateAutomation {
                api_version: String::new(),
                namespace: "flux-system".into(),
                name: "fleet".into(),
                update_path: String::new(),
                strategy: String::new(),
                selector: None,
                message_template: None,
                origin: markercheck::objects::Origin::Cluster,
            },
        };
        let rewrites = [SetterLine {
            file: "apps/web.yaml".into(),
            line: 11,
            setter: "flux-system:web".into(),
            old: "ghcr.io/org/web:1.0.0".into(),
            new: "ghcr.io/org/web:1.2.3".into(),
        }];
        let automations = [a];
        let w = warnings(&PushFacts {
            origin: Some("https://old.example/org/fleet.git".into()),
            flux_url: "https://new.example/org/fleet.git",
            source: "flux-system/flux-system".into(),
            remote: "flux",
            local_branch: Some("main"),
            automations: &automations,
            rewrites: &rewrites,
        });
        let kinds: Vec<&str> = w.iter().map(|w| w.kind).collect();
        assert_eq!(
            kinds,
            [
                "origin-not-flux-server",
                "setter-will-be-rewritten",
                "push-branch-differs"
            ]
        );
        assert!(w[0].fix.contains("git push flux main"), "{}", w[0].fix);
        assert!(
            w[1].message.starts_with("apps/web.yaml:11 flux-system:web: ImageUpdateAutomation flux-system/fleet will rewrite ghcr.io/org/web:1.0.0 -> ghcr.io/org/web:1.2.3"),
            "{}",
            w[1].message
        );
        // the same repository spelled another way is no warning
        let none = warnings(&PushFacts {
            origin: Some("git@new.example:org/fleet".into()),
            flux_url: "https://new.example/org/fleet.git",
            local_branch: Some("main"),
            ..PushFacts::default()
        });
        assert!(none.is_empty(), "{none:?}");
    }
}
