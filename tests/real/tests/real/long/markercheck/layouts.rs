//! A seeded generator of fleet files with image policy markers (our own, deterministic for a
//! seed: `fastrand::Rng::with_seed`). Each file combines layout classes at random: comments,
//! blank lines, block and flow scalars, anchors and merge keys, CRLF, `kind: List`, quoting and
//! indentation styles, several documents, every setter kind (image, `:tag`, `:name`,
//! `:digest`). A file records the classes it holds, so the differential test can report each
//! class and whether the simulation is exact on it.

use std::collections::BTreeSet;

/// Namespace of the generated layouts' ImagePolicies and ImageUpdateAutomation.
pub const NS: &str = "iacdiff";

/// An ImagePolicy and the `status.latestRef` the test writes for it.
pub struct Policy {
    /// metadata.name.
    pub name: &'static str,
    /// latestRef.name.
    pub image: &'static str,
    /// latestRef.tag.
    pub tag: &'static str,
    /// latestRef.digest ("" for none).
    pub digest: &'static str,
}

impl Policy {
    /// The value of the full image setter: image-reflector-controller api v1 `ImageRef.String`
    /// (`name:tag`, `@digest` when there is one).
    pub fn full(&self) -> String {
        if self.digest.is_empty() {
            format!("{}:{}", self.image, self.tag)
        } else {
            format!("{}:{}@{}", self.image, self.tag, self.digest)
        }
    }

    /// The new value of setter `kind` ("" = full image, "tag", "name", "digest").
    pub fn value(&self, kind: &str) -> String {
        match kind {
            "tag" => self.tag.to_owned(),
            "name" => self.image.to_owned(),
            "digest" => self.digest.to_owned(),
            _ => self.full(),
        }
    }
}

/// The policies the markers name: new values that stay plain, YAML 1.1 non-strings that
/// kyaml quotes (`1.10`, `yes`, `20240101`), a digest, a registry with a port.
pub const POLICIES: &[Policy] = &[
    Policy {
        name: "app",
        image: "ghcr.io/org/app",
        tag: "1.2.3",
        digest: "",
    },
    Policy {
        name: "api",
        image: "ghcr.io/org/api",
        tag: "1.10",
        digest: "",
    },
    Policy {
        name: "web",
        image: "ghcr.io/org/web",
        tag: "yes",
        digest: "",
    },
    Policy {
        name: "db",
        image: "ghcr.io/org/db",
        tag: "2.0.0",
        digest: "sha256:6745aaad46d795c9836632e1fb62f24b7e7f4c843144da8e47a5465c411a14be",
    },
    Policy {
        name: "svc",
        image: "registry.example.com:5000/team/svc",
        tag: "v2.0.0-rc.1",
        digest: "",
    },
    Policy {
        name: "job",
        image: "ghcr.io/org/job",
        tag: "20240101",
        digest: "",
    },
];

/// One generated file.
pub struct Layout {
    /// Path in the repository.
    pub path: String,
    /// Bytes.
    pub text: String,
    /// The layout classes it holds.
    pub classes: BTreeSet<&'static str>,
}

struct G {
    rng: fastrand::Rng,
    /// Mapping indentation step (2 is go-yaml's, 4 is not).
    u: usize,
    /// Block sequences indented under their key ("wide") or not ("compact").
    wide: bool,
    classes: BTreeSet<&'static str>,
    lines: Vec<String>,
    /// For unique keys and anchor names.
    k: usize,
    /// The sibling-entry kinds of [`G::extras`] this file uses (one to three, so that each
    /// file holds few classes and a difference points at its class).
    enabled: Vec<u32>,
    /// The last line written is block scalar content.
    block_last: bool,
}

impl G {
    fn p(&mut self, pct: u32) -> bool {
        self.rng.u32(0..100) < pct
    }

    fn line(&mut self, ind: usize, s: &str) {
        // a comment after a blank line, however composed, is the blank-before-comment class
        if s.starts_with('#') && self.lines.last().is_some_and(|l| l.is_empty()) {
            self.class("blank-before-comment");
        }
        self.lines.push(format!("{}{s}", " ".repeat(ind)));
        self.block_last = false;
    }

    fn class(&mut self, c: &'static str) {
        self.classes.insert(c);
    }

    fn next(&mut self) -> usize {
        self.k += 1;
        self.k
    }

    /// The column of a sequence's `- ` under a key at `key_ind`.
    fn seq_ind(&self, key_ind: usize) -> usize {
        if self.wide { key_ind + self.u } else { key_ind }
    }

    /// Zero to two sibling entries (mapping keys at `ind`) of the classes the generator covers.
    fn extras(&mut self, ind: usize) {
        if self.enabled.is_empty() || self.p(40) {
            return;
        }
        let n = self.rng.usize(1..3);
        for _ in 0..n {
            let k = self.next();
            let kind = self.enabled[self.rng.usize(0..self.enabled.len())];
            match kind {
                0 => {
                    self.class("comment-line");
                    self.line(ind, &format!("# note {k}"));
                    self.line(ind, &format!("noted{k}: v"));
                }
                1 => {
                    self.class("blank-line");
                    self.lines.push(String::new());
                }
                2 => {
                    self.class("blank-after-comment");
                    self.line(ind, &format!("# section {k}"));
                    self.lines.push(String::new());
                    self.line(ind, &format!("after{k}: v"));
                }
                3 => {
                    self.class("blank-before-comment");
                    self.lines.push(String::new());
                    self.line(ind, &format!("# section {k}"));
                    self.line(ind, &format!("before{k}: v"));
                }
                4 => {
                    self.class("literal-block");
                    self.line(ind, &format!("script{k}: |"));
                    self.line(ind + self.u, "echo one");
                    self.line(ind + self.u, "echo two");
                    self.block_last = true;
                    if self.p(50) {
                        self.class("blank-after-block");
                        self.lines.push(String::new());
                    }
                }
                5 => {
                    self.class("folded-block");
                    self.line(ind, &format!("text{k}: >"));
                    self.line(ind + self.u, "folded words");
                    self.line(ind + self.u, "more words");
                    self.block_last = true;
                }
                6 => {
                    self.class("flow-seq");
                    self.line(ind, &format!("args{k}: [\"--a\", \"--b={k}\"]"));
                }
                7 => {
                    self.class("flow-map");
                    self.line(ind, &format!("labels{k}: {{a: b, c: \"{k}\"}}"));
                }
                8 => {
                    self.class("empty-flow");
                    self.line(ind, &format!("empty{k}: {{}}"));
                }
                9 => {
                    self.class("quoted-key");
                    self.line(ind, &format!("\"quoted{k}\": 'v'"));
                }
                10 => {
                    self.class("trailing-spaces");
                    self.line(ind, &format!("spaced{k}: x   "));
                }
                11 => {
                    self.class("anchor-merge");
                    self.line(ind, &format!("defaults{k}: &d{k}"));
                    self.line(ind + self.u, "pullPolicy: IfNotPresent");
                    self.line(ind, &format!("merged{k}:"));
                    self.line(ind + self.u, &format!("<<: *d{k}"));
                    self.line(ind + self.u, "extra: 1");
                }
                12 => {
                    self.class("comment-after-key");
                    self.line(ind, &format!("nested{k}: # about nested"));
                    self.line(ind + self.u, "a: 1");
                }
                13 => {
                    self.class("plain-non-strings");
                    self.line(ind, &format!("count{k}: 1.0"));
                    self.line(ind, &format!("flag{k}: yes"));
                }
                15 => {
                    self.class("flow-noncanonical");
                    if self.p(50) {
                        self.line(ind, &format!("args{k}: [ \"--a\",\"--b\" ]"));
                    } else {
                        self.line(ind, &format!("labels{k}: {{a: b,c:  d}}"));
                    }
                }
                16 => {
                    self.class("flow-long");
                    let items: Vec<String> =
                        (0..12).map(|n| format!("\"--flag-{n}={k}\"")).collect();
                    self.line(ind, &format!("args{k}: [{}]", items.join(", ")));
                }
                _ => {
                    self.class("block-seq-of-scalars");
                    self.line(ind, &format!("items{k}:"));
                    let si = self.seq_ind(ind);
                    self.line(si, "- one");
                    self.line(si, "- 'two'");
                }
            }
        }
    }

    /// The old value a marker of setter `kind` starts from (the policy's own value for the
    /// unchanged class).
    fn old_value(&mut self, pol: &Policy, kind: &str) -> String {
        if self.p(8) {
            self.class("unchanged-value");
            return pol.value(kind);
        }
        match kind {
            "tag" => "0.9.0".into(),
            "name" => format!("{}-old", pol.image),
            "digest" => format!("sha256:{}", "0".repeat(64)),
            _ => format!("{}:0.9.0", pol.image),
        }
    }

    /// A marked scalar `key: VALUE # {"$imagepolicy": "iacdiff:POLICY[:kind]"}` at `ind`
    /// (`first` is the text before the key, e.g. `- ` of a sequence item).
    fn marked(&mut self, ind: usize, first: &str, key: &str, kind: &str) {
        let pol = &POLICIES[self.rng.usize(0..POLICIES.len())];
        if kind == "digest" && pol.digest.is_empty() {
            // a :digest marker for a policy without digest: kyaml sets the empty string
            self.class("empty-new-value");
        }
        self.class(match kind {
            "tag" => "setter-tag",
            "name" => "setter-name",
            "digest" => "setter-digest",
            _ => "setter-image",
        });
        let setter = if kind.is_empty() {
            format!("{NS}:{}", pol.name)
        } else {
            format!("{NS}:{}:{kind}", pol.name)
        };
        let marker = format!("{{\"$imagepolicy\": \"{setter}\"}}");
        let old = self.old_value(pol, kind);
        let gap = if self.p(15) {
            self.class("comment-spacing");
            "   "
        } else {
            " "
        };
        let anchor = if self.p(6) {
            self.class("anchored-marker");
            format!("&m{} ", self.next())
        } else {
            String::new()
        };
        match self.rng.u32(0..20) {
            0..=10 => {
                self.class("plain-value");
                self.line(ind, &format!("{first}{key}: {anchor}{old}{gap}# {marker}"));
            }
            11..=14 => {
                self.class("single-quoted");
                self.line(
                    ind,
                    &format!("{first}{key}: {anchor}'{old}'{gap}# {marker}"),
                );
            }
            15..=18 => {
                self.class("double-quoted");
                self.line(
                    ind,
                    &format!("{first}{key}: {anchor}\"{old}\"{gap}# {marker}"),
                );
            }
            _ => {
                self.class("block-marker");
                let ind2 = ind + first.len() + self.u;
                self.line(ind, &format!("{first}{key}: |{gap}# {marker}"));
                self.line(ind2, &old);
                self.block_last = true;
            }
        }
    }

    fn deployment(&mut self, i: usize) {
        self.class("kind-deployment");
        let u = self.u;
        self.line(0, "apiVersion: apps/v1");
        self.line(0, "kind: Deployment");
        self.line(0, "metadata:");
        let k = self.next();
        self.line(u, &format!("name: app-{i}-{k}"));
        self.extras(u);
        self.line(0, "spec:");
        self.extras(u);
        self.line(u, "replicas: 1");
        self.line(u, "template:");
        self.line(2 * u, "spec:");
        self.extras(3 * u);
        self.line(3 * u, "containers:");
        let si = self.seq_ind(3 * u);
        for c in 0..self.rng.usize(1..3) {
            self.line(si, &format!("- name: c{c}"));
            self.extras(si + 2);
            self.marked(si + 2, "", "image", "");
            self.extras(si + 2);
        }
    }

    fn kustomization(&mut self) {
        self.class("kind-kustomization-images");
        self.line(0, "apiVersion: kustomize.config.k8s.io/v1beta1");
        self.line(0, "kind: Kustomization");
        self.extras(0);
        self.line(0, "resources:");
        let si = self.seq_ind(0);
        self.line(si, "- deploy.yaml");
        self.line(0, "images:");
        for n in 0..self.rng.usize(1..3) {
            self.line(si, &format!("- name: img{n}"));
            let kinds: &[&str] = match self.rng.u32(0..3) {
                0 => &["name", "tag"],
                1 => &["tag", "digest"],
                _ => &["tag"],
            };
            for kind in kinds {
                let key = match *kind {
                    "name" => "newName",
                    "digest" => "digest",
                    _ => "newTag",
                };
                self.marked(si + 2, "", key, kind);
            }
            self.extras(si + 2);
        }
    }

    fn helmrelease(&mut self, i: usize) {
        self.class("kind-helmrelease-values");
        let u = self.u;
        self.line(0, "apiVersion: helm.toolkit.fluxcd.io/v2");
        self.line(0, "kind: HelmRelease");
        self.line(0, "metadata:");
        let k = self.next();
        self.line(u, &format!("name: hr-{i}-{k}"));
        self.line(0, "spec:");
        self.line(u, "interval: 10m");
        self.extras(u);
        self.line(u, "values:");
        self.line(2 * u, "image:");
        self.extras(3 * u);
        self.marked(3 * u, "", "repository", "name");
        self.marked(3 * u, "", "tag", "tag");
        self.extras(3 * u);
    }

    /// One document's lines (no separator).
    fn document(&mut self, i: usize) -> Vec<String> {
        self.lines.clear();
        if self.p(25) {
            self.class("head-comment");
            self.line(0, &format!("# document {i}"));
            if self.p(50) {
                self.class("head-comment-blank");
                self.lines.push(String::new());
            }
        }
        match self.rng.u32(0..5) {
            0 => self.kustomization(),
            1 => self.helmrelease(i),
            _ => self.deployment(i),
        }
        if self.p(10) {
            self.class("foot-comment");
            self.line(0, "# end of document");
        }
        std::mem::take(&mut self.lines)
    }

    fn file(&mut self, i: usize) -> String {
        self.enabled.clear();
        for _ in 0..self.rng.usize(0..4) {
            let e = self.rng.u32(0..17);
            if !self.enabled.contains(&e) {
                self.enabled.push(e);
            }
        }
        self.u = if self.p(12) {
            self.class("indent-4");
            4
        } else {
            2
        };
        self.wide = self.p(50);
        self.class(if self.wide { "seq-wide" } else { "seq-compact" });
        let mut out = String::new();
        if self.p(10) {
            // kind: List, one document: kyaml unwraps its items
            self.class("kind-list");
            out.push_str("apiVersion: v1\nkind: List\nitems:\n");
            let si = self.seq_ind(0);
            for _ in 0..self.rng.usize(1..3) {
                let doc = self.document(i);
                for (n, l) in doc.iter().enumerate() {
                    if l.is_empty() {
                        out.push('\n');
                    } else if n == 0 {
                        out.push_str(&format!("{}- {l}\n", " ".repeat(si)));
                    } else {
                        out.push_str(&format!("{}  {l}\n", " ".repeat(si)));
                    }
                }
            }
        } else {
            let docs = if self.p(25) {
                self.class("multi-document");
                self.rng.usize(2..4)
            } else {
                1
            };
            if self.p(15) {
                self.class("leading-separator");
                out.push_str("---\n");
            }
            for d in 0..docs {
                if d > 0 {
                    if self.p(20) {
                        self.class("separator-comment");
                        out.push_str("--- # next\n");
                    } else {
                        out.push_str("---\n");
                    }
                }
                for l in self.document(i) {
                    out.push_str(&l);
                    out.push('\n');
                }
            }
        }
        if self.p(10) {
            self.class("trailing-blank-lines");
            out.push_str("\n\n");
        } else if self.p(5) {
            self.class("no-final-newline");
            if self.block_last {
                self.class("block-at-eof-without-newline");
            }
            out.pop();
        }
        if self.p(12) {
            self.class("crlf");
            out = out.replace('\n', "\r\n");
        }
        out
    }
}

/// `n` files `<dir>/g<NNN>.yaml` for `seed`: the same bytes for the same seed.
pub fn generate(seed: u64, n: usize, dir: &str) -> Vec<Layout> {
    let mut g = G {
        rng: fastrand::Rng::with_seed(seed),
        u: 2,
        wide: false,
        classes: BTreeSet::new(),
        lines: Vec::new(),
        k: 0,
        enabled: Vec::new(),
        block_last: false,
    };
    (0..n)
        .map(|i| {
            g.classes.clear();
            let text = g.file(i);
            Layout {
                path: format!("{dir}/g{i:03}.yaml"),
                text,
                classes: std::mem::take(&mut g.classes),
            }
        })
        .collect()
}
