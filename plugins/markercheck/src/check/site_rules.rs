//! Rules on one marker, one function per rule, in the order Flux meets the marker: whether it
//! reads the file and the comment at all, the setter name, what the setter writes into the
//! marked field, then the policy the marker names.

use super::{
    Applicable, LatestRefExt, PolicyIndex, Severity, Sink, describe_image_value,
    extract_setter_guess, has_tag_or_digest, image_field, list_item_path, normalize_name,
    tagish_key, value_name,
};
use crate::marker::{Field, NotMarker, Parsed, SetterRef};
use crate::objects::{
    FluxKustomization, ImagePolicy, ImageUpdateAutomation, LatestRef, Objects, TreeFacts,
};
use crate::scan::{FileScan, Placement, Problem, Site, Target};
use crate::simulate;

/// One marker and what its rules read: the file it is in and the run's objects.
pub(super) struct SiteCtx<'a> {
    pub(super) site: &'a Site,
    pub(super) f: &'a FileScan,
    /// The file as displayed.
    pub(super) file: &'a str,
    pub(super) objects: &'a Objects,
    pub(super) facts: &'a TreeFacts,
    pub(super) index: &'a PolicyIndex,
    /// The automations whose spec.update.path covers the file.
    pub(super) covering: &'a [&'a ImageUpdateAutomation],
    pub(super) app: &'a Applicable,
    /// The Flux Kustomizations of the tree whose build includes the file (files with a Job).
    pub(super) appliers: &'a [&'a FluxKustomization],
}

/// A marker Flux reads on a scalar, with a setter name that parses: what the rules on the
/// marked field and on the named policy read.
struct Marked<'a> {
    c: &'a SiteCtx<'a>,
    t: &'a Target,
    sr: SetterRef,
    /// The marked field's key (empty for a sequence item).
    key: String,
    policy: Option<&'a ImagePolicy>,
    latest: Option<&'a LatestRef>,
}

impl Marked<'_> {
    /// The line the setter writes for value `v`, as the message shows it.
    fn would_write(&self, v: &str) -> String {
        let val = simulate::render_scalar(v, self.t.style);
        if self.key.is_empty() {
            format!("- {val}")
        } else {
            format!("{}: {val}", self.key)
        }
    }
}

/// Applies every rule to one marker. `outside_reported`: MC013 was already reported for this
/// file (once per file).
pub(super) fn check_site(c: &SiteCtx<'_>, outside_reported: &mut bool, out: &mut Sink) {
    if file_skipped(c, out) || not_a_comment(c, out) {
        return;
    }
    let Some(setter) = parse_marker(c, out) else {
        return;
    };
    if !c.f.has_token || unattached(c, &setter, out) {
        return;
    }
    let Some(t) = &c.site.target else { return };
    let Some(sr) = setter_ref(c, &setter, out) else {
        return;
    };
    list_item(c, out);
    let policy = c.index.get(&c.objects.policies, &sr.namespace, &sr.name);
    let m = Marked {
        c,
        t,
        key: t.key.clone().unwrap_or_default(),
        latest: policy.and_then(|p| p.latest.as_ref()),
        policy,
        sr,
    };
    match m.sr.field {
        Field::Tag => tag_on_image(&m, out),
        Field::Full => full_on_tag_field(&m, out),
        Field::Name => name_on_tagged(&m, out),
        Field::Digest => {
            digest_on_image(&m, out);
            digest_not_reflected(&m, out);
        }
    }
    job_template(&m, out);
    // policy existence / namespace / selector / path
    if c.objects.policies.is_empty() || namespace_from_build(&m, out) {
        return;
    }
    let Some(p) = policy_exists(&m, out) else {
        return;
    };
    if !c.objects.automations.is_empty() && !covered(&m, p, outside_reported, out) {
        return;
    }
    host_rewrite(&m, p, out);
}

/// MC022 (a file Flux never reads) and MC023 (a problem file): file-level reasons Flux never
/// sees the marker. True when one was reported.
fn file_skipped(c: &SiteCtx<'_>, out: &mut Sink) -> bool {
    let (f, file, line, col) = (c.f, c.file.to_string(), c.site.line, c.site.col);
    if !f.selected {
        out.push(
            "MC022",
            file,
            line,
            col,
            format!(
                "marker in a file Flux never reads: only *.yaml, *.yml and files named Kustomization are scanned (filereader.go), not {:?}",
                f.rel
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ),
            "rename the file to .yaml/.yml, or move the value into a scanned manifest".into(),
        );
        return true;
    }
    if let Some(p) = &f.problem
        && f.has_token
    {
        {
            let hint = match p {
                Problem::NotAMapping {
                    what: "sequence", ..
                } => " (e.g. a JSON6902 patch file)",
                Problem::Syntax { .. } if f.text.contains("{{") => {
                    " (looks like a Helm/Go template)"
                }
                _ => "",
            };
            out.push("MC023", file, line, col,
                format!("Flux skips this file as a \"problem file\" ({p}{hint}): the marker is never applied"),
                "make the file a valid YAML mapping document, or move the marker to a manifest Flux can parse".into());
            return true;
        }
    }
    false
}

/// MC021 (inside a block scalar) and MC025 (inside a value): marker text that is no comment.
/// True when one was reported.
fn not_a_comment(c: &SiteCtx<'_>, out: &mut Sink) -> bool {
    let (site, file, line, col) = (c.site, c.file.to_string(), c.site.line, c.site.col);
    match site.placement {
        Placement::BlockScalarContent => {
            out.push("MC021", file, line, col,
                "marker text inside a block scalar (`|`/`>`): it is string data (e.g. Helm values), not a YAML comment, so Flux never applies it".into(),
                "move the value into structured YAML (HelmRelease spec.values as a mapping) and put the marker as the line comment of the image/tag value".into());
            return true;
        }
        Placement::InsideValue => {
            out.push(
                "MC025",
                file,
                line,
                col,
                "marker text inside a quoted or plain value: not a comment".into(),
                "make it a line comment: value # {\"$imagepolicy\": \"ns:policy\"}".into(),
            );
            return true;
        }
        _ => {}
    }
    false
}

/// MC001: the marker's setter name, or `None` when Flux cannot read the marker.
fn parse_marker(c: &SiteCtx<'_>, out: &mut Sink) -> Option<String> {
    let (site, f, file, line, col) = (c.site, c.f, c.file.to_string(), c.site.line, c.site.col);
    let parsed = site
        .parsed
        .clone()
        .unwrap_or(Parsed::NotMarker(NotMarker::Empty));
    let setter = match &parsed {
        Parsed::Marker(s) => s.clone(),
        Parsed::NotMarker(why) => {
            let never = if f.has_token {
                ""
            } else {
                "; the file does not even contain the bytes \"$imagepolicy\" so Flux never parses it"
            };
            out.push(
                "MC001",
                file,
                line,
                col,
                format!("Flux cannot read this marker: {why}{never}"),
                correct_marker(&extract_setter_guess(&site.comment)),
            );
            return None;
        }
    };
    Some(setter)
}

/// `write it as: ...`: the marker as Flux reads it, from the setter name guessed in `s`.
fn correct_marker(s: &str) -> String {
    let name = SetterRef::parse(s)
        .map(|r| r.policy_key())
        .unwrap_or_else(|| "NAMESPACE:POLICY".into());
    format!("write it as: # {{\"$imagepolicy\": \"{name}\"}}")
}

/// MC020: a marker that is not the line comment of a scalar value. True when reported.
fn unattached(c: &SiteCtx<'_>, setter: &str, out: &mut Sink) -> bool {
    let (site, file, line, col) = (c.site, c.file.to_string(), c.site.line, c.site.col);
    match site.placement {
        Placement::AboveKey | Placement::OnKey | Placement::Elsewhere | Placement::Shadowed => {
            let why = match site.placement {
                Placement::AboveKey => {
                    "a comment on the line above `key: value` belongs to the key (go-yaml head comment), and Flux only reads the value's comment"
                }
                Placement::OnKey => {
                    "a comment after `key:` belongs to the key, not to the value on the next line"
                }
                Placement::Shadowed => {
                    "the item's own line comment hides this head comment (fieldmeta reads the line comment first)"
                }
                _ => "it is not the line comment of a scalar value",
            };
            out.push("MC020", file, line, col,
                format!("marker {setter:?} is never applied: {why}"),
                "put the marker at the end of the value's line: `image: repo:tag # {\"$imagepolicy\": \"ns:policy\"}`".into());
            return true;
        }
        _ => {}
    }
    false
}

/// MC002: the setter name as NAMESPACE:POLICY[:field], or `None` when it is not one.
fn setter_ref(c: &SiteCtx<'_>, setter: &str, out: &mut Sink) -> Option<SetterRef> {
    let (file, line, col) = (c.file.to_string(), c.site.line, c.site.col);
    let Some(sr) = SetterRef::parse(setter) else {
        let guess = setter.replace('/', ":");
        let fix = if SetterRef::parse(&guess).is_some() {
            format!("use ':' between namespace and name: {guess:?}")
        } else {
            "use \"NAMESPACE:POLICY\" with an optional :tag, :name or :digest suffix".into()
        };
        out.push(
            "MC002",
            file,
            line,
            col,
            format!(
                "setter {setter:?} is not NAMESPACE:POLICY[:tag|:name|:digest]: no setter has this name, Flux silently ignores the marker"
            ),
            fix,
        );
        return None;
    };
    Some(sr)
}

/// MC024: a marker inside an item of a `kind: List`.
fn list_item(c: &SiteCtx<'_>, out: &mut Sink) {
    let (site, file, line, col) = (c.site, c.file.to_string(), c.site.line, c.site.col);
    if site.in_list_item {
        out.push(
            "MC024",
            file.clone(),
            line,
            col,
            format!(
                "marker inside an item of a kind: List: Flux never updates this file. kyaml's ByteReader unwraps the List and puts the file's path annotation on the List, not on its items; when a marker changes a value, the setters filter keeps every node without a path (every item of every List under spec.update.path) and kio.LocalPackageWriter writes each to a new file <spec.update.path>/<namespace>/<kind>_<name>.yaml (this item: {}), replacing any file of that name, while this file keeps the old value (kyaml v0.21.1 byteio_reader.go, kioutil.DefaultPathAndIndexAnnotation)",
                list_item_path(&site.object)
            ),
            "split the List into plain multi-document YAML (---), which Flux rewrites in place"
                .into(),
        );
    }
}

/// MC003: a `:tag` marker on a field holding an image reference.
fn tag_on_image(m: &Marked<'_>, out: &mut Sink) {
    let tag = m
        .latest
        .map(|l| l.tag.clone())
        .unwrap_or_else(|| "<tag>".into());
    bare_value_on_image(
        m,
        "MC003",
        "tag",
        &tag,
        "(or put :tag on a newTag/tag field)",
        out,
    );
}

/// A `:tag` or `:digest` marker (`field`) on a field holding an image reference: the setter
/// replaces the whole value with the bare `value` (rule `id`; `fix_tail` ends the fix).
fn bare_value_on_image(
    m: &Marked<'_>,
    id: &'static str,
    field: &str,
    value: &str,
    fix_tail: &str,
    out: &mut Sink,
) {
    let (t, key, sr) = (m.t, &m.key, &m.sr);
    if !image_field(key, &t.value) {
        return;
    }
    out.push(
        id,
        m.c.file.to_string(),
        m.c.site.line,
        m.c.site.col,
        format!(
            "':{field}' marker on {}: the automation replaces the whole value with the bare {field} and writes `{}`, an image the node cannot pull",
            describe_image_value(key, &t.value),
            m.would_write(value)
        ),
        format!(
            "use the plain marker here: # {{\"$imagepolicy\": \"{}\"}} {fix_tail}",
            sr.policy_key()
        ),
    );
}

/// MC004: a plain marker on a tag or version field.
fn full_on_tag_field(m: &Marked<'_>, out: &mut Sink) {
    let (key, sr, latest) = (&m.key, &m.sr, m.latest);
    let (file, line, col) = (m.c.file.to_string(), m.c.site.line, m.c.site.col);
    if tagish_key(key) {
        let full = latest
            .map(LatestRefExt::full_ref)
            .unwrap_or_else(|| "<name>:<tag>".into());
        out.push(
            "MC004",
            file.clone(),
            line,
            col,
            format!(
                "plain marker on `{key}:` writes the full reference `{}` into a tag field",
                m.would_write(&full)
            ),
            format!("use # {{\"$imagepolicy\": \"{}:tag\"}}", sr.policy_key()),
        );
    }
}

/// MC005: a `:name` marker on a value that carries a tag or digest.
fn name_on_tagged(m: &Marked<'_>, out: &mut Sink) {
    let (t, sr) = (m.t, &m.sr);
    let (file, line, col) = (m.c.file.to_string(), m.c.site.line, m.c.site.col);
    if has_tag_or_digest(&t.value) {
        out.push(
            "MC005",
            file.clone(),
            line,
            col,
            format!(
                "':name' marker on {:?}, which carries a tag or digest: the automation writes only the name and the tag is lost",
                t.value
            ),
            format!(
                "use the plain marker # {{\"$imagepolicy\": \"{}\"}}, or split name and tag (kustomize images: newName/newTag)",
                sr.policy_key()
            ),
        );
    }
}

/// MC007: a `:digest` marker on a field holding an image reference.
fn digest_on_image(m: &Marked<'_>, out: &mut Sink) {
    // image-automation-controller d36e2ea internal/update/setters.go: the `ns:p:digest`
    // setter's value is status.latestRef.digest alone, and the kyaml setter replaces the
    // whole scalar with it
    let digest = m
        .latest
        .map(|l| l.digest.clone())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "<digest>".into());
    bare_value_on_image(
        m,
        "MC007",
        "digest",
        &digest,
        "(it writes name:tag@digest when the ImagePolicy reflects digests), or split the fields and put :digest only on a digest field (kustomize images: newName + digest)",
        out,
    );
}

/// MC006: a `:digest` marker naming a policy that reflects no digest.
fn digest_not_reflected(m: &Marked<'_>, out: &mut Sink) {
    let (sr, latest) = (&m.sr, m.latest);
    let (file, line, col) = (m.c.file.to_string(), m.c.site.line, m.c.site.col);
    if let Some(l) = latest
        && l.digest.is_empty()
    {
        out.push(
            "MC006",
            file.clone(),
            line,
            col,
            format!(
                "':digest' marker but ImagePolicy {} reflects no digest: the automation writes `{}`",
                sr.policy_key(),
                m.would_write("")
            ),
            "enable spec.digestReflectionPolicy on the ImagePolicy, or use the :tag marker"
                .into(),
        );
    }
}

/// MC040: a marker on the pod template of a Job.
fn job_template(m: &Marked<'_>, out: &mut Sink) {
    let (site, t, appliers) = (m.c.site, m.t, m.c.appliers);
    let (file, line, col) = (m.c.file.to_string(), m.c.site.line, m.c.site.col);
    // Job pod template: immutable, so the apply of the change fails, unless the Flux
    // Kustomization applying it has spec.force: true (kustomize-controller then deletes and
    // recreates the Job: api/v1 KustomizationSpec.Force, "recreate resources on immutable field
    // changes")
    if site.object.kind == "Job" && t.pod_template {
        let name = |k: &&FluxKustomization| format!("{}/{}", k.namespace, k.name);
        let unforced: Vec<String> = appliers.iter().filter(|k| !k.force).map(name).collect();
        let (sev, msg) = if appliers.is_empty() {
            (
                Severity::Warning,
                format!(
                    "marker on the pod template of Job {}, which is immutable; no Flux Kustomization in this tree applies this file, so the outcome depends on the one that does: with spec.force: true Flux recreates the Job with the new image, otherwise applying the automation's commit fails with \"field is immutable\"",
                    site.object.name
                ),
            )
        } else if unforced.is_empty() {
            (
                Severity::Info,
                format!(
                    "marker on the pod template of Job {}: the template is immutable, but Kustomization {} applies it with spec.force: true, so Flux deletes and recreates the Job, which runs again with the new image",
                    site.object.name,
                    appliers.iter().map(name).collect::<Vec<_>>().join(", ")
                ),
            )
        } else {
            (
                Severity::Error,
                format!(
                    "marker on the pod template of Job {}: a Job's template is immutable, and Kustomization {} applies it without spec.force, so applying the automation's commit fails with \"field is immutable\"",
                    site.object.name,
                    unforced.join(", ")
                ),
            )
        };
        out.severity(sev);
        out.push(
            "MC040",
            file.clone(),
            line,
            col,
            msg,
            "run the migration as an initContainer of the Deployment, use a CronJob, or set spec.force: true on the Flux Kustomization that applies it".into(),
        );
    }
}

/// MC010 (info): the named policy's namespace depends on the kustomize build. True when
/// reported.
fn namespace_from_build(m: &Marked<'_>, out: &mut Sink) -> bool {
    let (facts, sr) = (m.c.facts, &m.sr);
    let (file, line, col) = (m.c.file.to_string(), m.c.site.line, m.c.site.col);
    {
        if let Some(((_, n), nss)) = facts.unknown_namespaces.iter().find(|((ans, n), nss)| {
            *n == sr.name && (*ans == sr.namespace || nss.contains(&sr.namespace))
        }) {
            out.severity(Severity::Info);
            out.push(
                "MC010",
                file.clone(),
                line,
                col,
                format!(
                    "ImagePolicy {n} gets its namespace from kustomize, and the kustomizations that include it give different ones ({}): whether {}/{n} exists depends on the build, not checked",
                    nss.iter()
                        .map(|x| if x.is_empty() { "none" } else { x.as_str() })
                        .collect::<Vec<_>>()
                        .join(", "),
                    sr.namespace
                ),
                "include the ImagePolicy from one kustomization, or set its namespace in one place"
                    .into(),
            );
            return true;
        }
    }
    false
}

/// MC010: the named policy, or `None` when it does not exist.
fn policy_exists<'a>(m: &Marked<'a>, out: &mut Sink) -> Option<&'a ImagePolicy> {
    let (policy, sr) = (m.policy, &m.sr);
    let (file, line, col) = (m.c.file.to_string(), m.c.site.line, m.c.site.col);
    let Some(p) = policy else {
        out.push(
            "MC010",
            file.clone(),
            line,
            col,
            format!(
                "no ImagePolicy {}/{} found (tree, --policies, --from-cluster, --set): Flux silently ignores the marker",
                sr.namespace, sr.name
            ),
            "fix the policy name or namespace in the marker".into(),
        );
        return None;
    };
    Some(p)
}

/// MC013 (outside every spec.update.path, once per file), MC011 (policy of another namespace)
/// and MC012 (excluded by the policySelector). True when an automation uses policy `p` here.
fn covered(m: &Marked<'_>, p: &ImagePolicy, outside_reported: &mut bool, out: &mut Sink) -> bool {
    let (objects, covering, app) = (m.c.objects, m.c.covering, m.c.app);
    let (file, line, col) = (m.c.file.to_string(), m.c.site.line, m.c.site.col);
    if covering.is_empty() {
        if !*outside_reported {
            *outside_reported = true;
            let paths: Vec<String> = objects
                .automations
                .iter()
                .map(|a| {
                    format!(
                        "{}/{}: {:?}",
                        a.namespace,
                        a.name,
                        if a.update_path.is_empty() {
                            "."
                        } else {
                            &a.update_path
                        }
                    )
                })
                .collect();
            out.push(
                "MC013",
                file.clone(),
                line,
                col,
                format!(
                    "file is outside every ImageUpdateAutomation spec.update.path ({}): no automation reads it",
                    paths.join(", ")
                ),
                "move the file under an automation's spec.update.path or widen the path".into(),
            );
        }
        return false;
    }
    if !covering.iter().any(|a| a.namespace == p.namespace) {
        let nss: Vec<String> = covering
            .iter()
            .map(|a| format!("{}/{}", a.namespace, a.name))
            .collect();
        out.push("MC011", file.clone(), line, col,
            format!("ImagePolicy {}/{} is not in the namespace of the automation(s) covering this file ({}): automations only use policies of their own namespace", p.namespace, p.name, nss.join(", ")),
            "create the ImagePolicy in the automation's namespace, or an automation in the policy's namespace".into());
        return false;
    }
    if !app.keys.contains(&(p.namespace.clone(), p.name.clone())) {
        out.push(
            "MC012",
            file.clone(),
            line,
            col,
            format!(
                "ImagePolicy {}/{} is excluded by the policySelector of every automation covering this file",
                p.namespace, p.name
            ),
            "add the selector's labels to the ImagePolicy".into(),
        );
        return false;
    }
    true
}

/// MC030: a plain marker whose field names another image than the ImageRepository.
fn host_rewrite(m: &Marked<'_>, p: &ImagePolicy, out: &mut Sink) {
    let (objects, t, sr, latest) = (m.c.objects, m.t, &m.sr, m.latest);
    let (file, line, col) = (m.c.file.to_string(), m.c.site.line, m.c.site.col);
    // host rewrite
    if sr.field == Field::Full {
        let repo_image = p
            .repository
            .as_ref()
            .and_then(|(ns, n)| {
                objects
                    .repositories
                    .iter()
                    .find(|r| &r.namespace == ns && &r.name == n)
            })
            .map(|r| value_name(&r.image).to_string())
            .or_else(|| latest.map(|l| l.name.clone()));
        if let Some(img) = repo_image {
            let cur = value_name(&t.value);
            // same image spelled differently (nginx vs docker.io/library/nginx): harmless
            if !cur.is_empty() && cur != img && normalize_name(cur) != normalize_name(&img) {
                let same = false;
                out.push("MC030", file.clone(), line, col,
                    if same {
                        format!("manifest spells the image {cur:?} but the ImageRepository is {img:?}: the automation rewrites the name to {img:?} (same image, different text)")
                    } else {
                        format!("manifest image {cur:?} differs from ImageRepository spec.image {img:?}: the automation rewrites the host/path to {img:?} (automation may rewrite tags, never hosts)")
                    },
                    "make the manifest's image name equal to ImageRepository spec.image, or use the :tag marker on a separate tag field".into());
            }
        }
    }
}
