//! One seeded mistake per rule, each on our own small fixture (tests/common), each giving
//! exactly its rule; the unseeded fixture lints clean.

mod common;
use common::{clean_fleet, rules, show};

const KS_PLAIN: &str = r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: NAME
  namespace: flux-system
spec:
  interval: 10m0s
  path: ./apps/NAME
  prune: true
  wait: true
  sourceRef:
    kind: GitRepository
    name: flux-system
"#;

fn ks(name: &str, extra_spec: &str) -> String {
    let mut s = KS_PLAIN.replace("NAME", name);
    s.push_str(extra_spec);
    s
}

fn configmap_dir(f: &common::Fleet, name: &str, data: &str) {
    f.write(
        &format!("apps/{name}/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - cm.yaml\n",
    );
    f.write(
        &format!("apps/{name}/cm.yaml"),
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n{data}"
        ),
    );
}

fn add_to_root(f: &common::Fleet, file: &str, text: &str) {
    f.write(&format!("clusters/test/{file}"), text);
    let k = std::fs::read_to_string(f.root().join("clusters/test/kustomization.yaml")).unwrap();
    f.write(
        "clusters/test/kustomization.yaml",
        &format!("{k}  - {file}\n"),
    );
}

#[test]
fn clean_fixture_lints_clean() {
    let f = clean_fleet();
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
    assert_eq!(r.overlays.len(), 1);
    assert_eq!(r.overlays[0].dir, "clusters/test");
    let ids: Vec<&str> = r.overlays[0]
        .kustomizations
        .iter()
        .map(|k| k.id.as_str())
        .collect();
    assert_eq!(ids, ["flux-system/flux-system", "flux-system/app"]);
}

/// FL030: a `${VAR}` in a path whose Kustomization has no postBuild (no substituteFrom).
#[test]
fn var_in_path_without_substitute_from() {
    let f = clean_fleet();
    configmap_dir(&f, "extra", "  CLUSTER: ${CLUSTER_NAME}\n");
    add_to_root(&f, "extra.yaml", &ks("extra", ""));
    let r = f.lint();
    assert_eq!(rules(&r), ["FL030"], "{}", show(&r));
    let x = &r.findings[0];
    assert_eq!((x.file.as_str(), x.line), ("apps/extra/cm.yaml", 7));
    assert!(x.message.contains("${CLUSTER_NAME}") && x.message.contains("flux-system/extra"));
}

/// FL050: the gateway VIP outside the Cilium LB-IPAM pool, reported where the variable is set.
#[test]
fn vip_outside_pool() {
    let f = clean_fleet();
    let v = std::fs::read_to_string(f.root().join("clusters/test/vars.yaml")).unwrap();
    f.write(
        "clusters/test/vars.yaml",
        &v.replace("10.20.0.100", "10.30.0.100"),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL050"], "{}", show(&r));
    let x = &r.findings[0];
    assert_eq!((x.file.as_str(), x.line), ("clusters/test/vars.yaml", 8));
    assert!(x.message.contains("10.30.0.100") && x.message.contains("10.20.0.100-10.20.0.150"));
}

/// FL051: inside the pool but not its first address: this fleet's convention, so only when
/// `.fleetlint.yaml` says so (`vipConvention: pool-start`); off otherwise.
#[test]
fn vip_not_pool_start() {
    let f = clean_fleet();
    let v = std::fs::read_to_string(f.root().join("clusters/test/vars.yaml")).unwrap();
    f.write(
        "clusters/test/vars.yaml",
        &v.replace("10.20.0.100", "10.20.0.120"),
    );
    let r = f.lint();
    assert!(r.findings.is_empty(), "off by default: {}", show(&r));
    assert_eq!(r.stats.suppressed, 0, "off is not suppressed");
    f.write(".fleetlint.yaml", "vipConvention: pool-start\n");
    let r = f.lint();
    assert_eq!(rules(&r), ["FL051"], "{}", show(&r));
}

/// FL040: a TBD placeholder in prod's values.
#[test]
fn tbd_placeholder_in_prod() {
    let f = clean_fleet();
    let v = std::fs::read_to_string(f.root().join("clusters/test/vars.yaml")).unwrap();
    f.write(
        "clusters/test/vars.yaml",
        &v.replace("10.20.0.100", "TBD-PROD-VIP"),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL040"], "{}", show(&r));
    let x = &r.findings[0];
    assert_eq!((x.file.as_str(), x.line), ("clusters/test/vars.yaml", 8));
    assert!(
        x.message
            .contains("Service web/gateway spec.loadBalancerIP"),
        "{}",
        x.message
    );
    // another pattern: the default one no longer matches
    let r = f.lint_with(|c| c.options.placeholder = "CHANGEME-*".into());
    assert!(r.findings.is_empty(), "{}", show(&r));
}

/// FL011: a dependsOn cycle, printed.
#[test]
fn depends_on_cycle() {
    let f = clean_fleet();
    configmap_dir(&f, "a", "  x: \"1\"\n");
    configmap_dir(&f, "b", "  x: \"1\"\n");
    add_to_root(&f, "a.yaml", &ks("a", "  dependsOn:\n    - name: b\n"));
    add_to_root(&f, "b.yaml", &ks("b", "  dependsOn:\n    - name: a\n"));
    let r = f.lint();
    // on every file holding an edge of the cycle
    assert_eq!(rules(&r), ["FL011", "FL011"], "{}", show(&r));
    let files: Vec<&str> = r.findings.iter().map(|x| x.file.as_str()).collect();
    assert_eq!(files, ["clusters/test/a.yaml", "clusters/test/b.yaml"]);
    assert!(
        r.findings[0]
            .message
            .contains("flux-system/a -> flux-system/b -> flux-system/a"),
        "{}",
        r.findings[0].message
    );
}

/// FL061: a same-namespace Service's injected REDIS_PORT collides with the REDIS_* settings
/// the workload reads through envFrom.
#[test]
fn service_link_collision() {
    let f = clean_fleet();
    let d = std::fs::read_to_string(f.root().join("apps/app/deploy.yaml")).unwrap();
    let d = d.replace(
        "          env:\n",
        "          envFrom:\n            - configMapRef:\n                name: web-config\n          env:\n",
    );
    f.write(
        "apps/app/deploy.yaml",
        &format!(
            "{d}---\napiVersion: v1\nkind: Service\nmetadata:\n  name: redis\nspec:\n  ports:\n    - port: 6379\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  REDIS_HOST: redis.web\n"
        ),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL061"], "{}", show(&r));
    assert!(r.findings[0].message.contains("REDIS_PORT=tcp://"));
    // the fix: no service links
    let d = std::fs::read_to_string(f.root().join("apps/app/deploy.yaml")).unwrap();
    f.write(
        "apps/app/deploy.yaml",
        &d.replacen(
            "    spec:\n      initContainers:",
            "    spec:\n      enableServiceLinks: false\n      initContainers:",
            1,
        ),
    );
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
}

/// FL060: envFrom without enableServiceLinks: false, nothing colliding.
#[test]
fn env_from_without_service_links_off() {
    let f = clean_fleet();
    let d = std::fs::read_to_string(f.root().join("apps/app/deploy.yaml")).unwrap();
    let d = d.replace(
        "          env:\n",
        "          envFrom:\n            - configMapRef:\n                name: web-config\n          env:\n",
    );
    f.write(
        "apps/app/deploy.yaml",
        &format!("{d}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  GREETING: hi\n"),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL060"], "{}", show(&r));
}

/// FL070: an untagged initContainer.
#[test]
fn untagged_init_container() {
    let f = clean_fleet();
    let d = std::fs::read_to_string(f.root().join("apps/app/deploy.yaml")).unwrap();
    f.write(
        "apps/app/deploy.yaml",
        &d.replace("ghcr.io/example/init:1.0.0", "ghcr.io/example/init"),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL070"], "{}", show(&r));
    let x = &r.findings[0];
    assert_eq!((x.file.as_str(), x.line), ("apps/app/deploy.yaml", 17));
    assert!(x.message.contains("initContainer init"), "{}", x.message);
}

/// FL031: a variable no overlay value defines, without a default.
#[test]
fn variable_undefined() {
    let f = clean_fleet();
    let d = std::fs::read_to_string(f.root().join("apps/app/deploy.yaml")).unwrap();
    f.write(
        "apps/app/deploy.yaml",
        &d.replace("${LOG_LEVEL:=info}", "${LOG_LEVEL}"),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL031"], "{}", show(&r));
    assert_eq!(r.findings[0].line, 24);
}

/// FL032: a shell `${HOSTNAME}` in a command, not escaped.
#[test]
fn shell_variable_not_escaped() {
    let f = clean_fleet();
    let d = std::fs::read_to_string(f.root().join("apps/app/deploy.yaml")).unwrap();
    f.write(
        "apps/app/deploy.yaml",
        &d.replace("$${HOSTNAME}", "${HOSTNAME}"),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL032"], "{}", show(&r));
    assert!(r.findings[0].fix.contains("$${HOSTNAME}"));
}

/// FL032 only where a shell reads the text (trial item 14): an exec-form argument
/// (`args: ["--ui-color=${UI_COLOR}"]`, no shell) and an operand after a `sh -c` script (it is
/// $0, never parsed) are FL031 (define the variable; escaping would hand the process the
/// literal); the `-c` script of `command: ["/bin/sh", "-ec"]` + args, a `#!` script and a
/// ConfigMap `run.sh` entry are FL032 (escape it as $$).
#[test]
fn shell_variable_only_where_a_shell_reads_it() {
    let f = clean_fleet();
    let d = std::fs::read_to_string(f.root().join("apps/app/deploy.yaml")).unwrap();
    let exec_form = "          image: ghcr.io/example/web:2.3.4\n          command: [\"/app/web\"]\n          args: [\"--listen=:8080\", \"--ui-color=${UI_COLOR}\"]\n";
    f.write(
        "apps/app/deploy.yaml",
        &d.replace("          image: ghcr.io/example/web:2.3.4\n", exec_form),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL031"], "{}", show(&r));
    let x = &r.findings[0];
    assert!(x.message.contains("${UI_COLOR}"), "{}", x.message);
    assert!(x.message.contains("without a shell"), "{}", x.message);
    assert!(x.fix.starts_with("define UI_COLOR"), "{}", x.fix);
    assert!(!x.fix.contains("$${UI_COLOR}"), "{}", x.fix);

    // the operand after the script is $0 for the shell: passed as is
    f.write(
        "apps/app/deploy.yaml",
        &d.replace(
            "[\"sh\", \"-c\", \"echo $${HOSTNAME} ready\"]",
            "[\"sh\", \"-c\", \"echo $0 ready\", \"${NODE_ROLE}\"]",
        ),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL031"], "{}", show(&r));
    assert!(r.findings[0].message.contains("${NODE_ROLE}"));

    // the script of `sh -ec`, split across command and args
    f.write(
        "apps/app/deploy.yaml",
        &d.replace(
            "command: [\"sh\", \"-c\", \"echo $${HOSTNAME} ready\"]",
            "command: [\"/bin/sh\", \"-ec\"]\n          args: [\"echo ${HOSTNAME} ready\"]",
        ),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL032"], "{}", show(&r));
    assert!(
        r.findings[0].fix.contains("$${HOSTNAME}"),
        "{}",
        r.findings[0].fix
    );

    // scripts in a ConfigMap: a `#!` text under any key, any text under a *.sh key; a
    // multi-line text that is neither (a config file) is FL031
    f.write("apps/app/deploy.yaml", &d);
    let k = std::fs::read_to_string(f.root().join("apps/app/kustomization.yaml")).unwrap();
    f.write(
        "apps/app/kustomization.yaml",
        &format!("{k}  - scripts.yaml\n"),
    );
    f.write(
        "apps/app/scripts.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: scripts\ndata:\n  entry: |\n    #!/bin/sh\n    exec web --name ${POD_NAME}\n  run.sh: echo ${RUN_ID}\n  app.conf: |\n    color = ${THEME}\n    listen = 8080\n",
    );
    let r = f.lint();
    let mut got: Vec<(String, bool)> = r
        .findings
        .iter()
        .map(|x| {
            let var = ["${POD_NAME}", "${RUN_ID}", "${THEME}"]
                .into_iter()
                .find(|v| x.message.contains(v))
                .unwrap_or("?");
            (format!("{} {var}", x.rule), x.fix.contains("$$"))
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("FL031 ${THEME}".to_string(), false),
            ("FL032 ${POD_NAME}".to_string(), true),
            ("FL032 ${RUN_ID}".to_string(), true),
        ],
        "{}",
        show(&r)
    );
}

/// FL052 (trial item 14): `GATEWAY_VIP: 192.168.2.300` is not an address; neither is a
/// four-part number under another name. Address lists, CIDRs, ranges, a non-address value of an
/// IP-named flag and the placeholder (FL040's) are not findings.
#[test]
fn address_variable_invalid() {
    let f = clean_fleet();
    let vars = std::fs::read_to_string(f.root().join("clusters/test/vars.yaml")).unwrap();
    let fine = "  NODE_IPS: 10.20.0.1, 10.20.0.2\n  POD_IP_CIDR: 10.244.0.0/16\n  LB_IP_RANGE: 10.20.0.100-10.20.0.150\n  SKIP_IP_CHECK: \"true\"\n  GATEWAY_IPV6: fd00::1\n  APP_VERSION: 1.2.3\n";
    f.write("clusters/test/vars.yaml", &format!("{vars}{fine}"));
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
    f.write(
        "clusters/test/vars.yaml",
        &format!(
            "{}{fine}  UPSTREAM: 10.0.0.256\n",
            vars.replace("GATEWAY_VIP: 10.20.0.100", "GATEWAY_VIP: 192.168.2.300")
        ),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL052", "FL052"], "{}", show(&r));
    let at: Vec<(&str, usize)> = r
        .findings
        .iter()
        .map(|x| (x.file.as_str(), x.line))
        .collect();
    assert_eq!(
        at,
        [
            ("clusters/test/vars.yaml", 8),
            ("clusters/test/vars.yaml", 15)
        ]
    );
    assert!(
        r.findings[0]
            .message
            .contains("GATEWAY_VIP = \"192.168.2.300\"")
            && r.findings[0].message.contains("0-255"),
        "{}",
        r.findings[0].message
    );
    assert!(r.findings[1].message.contains("UPSTREAM"));
    assert_eq!(r.findings[0].kustomizations, ["flux-system/app"]);
    // a placeholder there is FL040's, not FL052's
    f.write(
        "clusters/test/vars.yaml",
        &vars.replace("GATEWAY_VIP: 10.20.0.100", "GATEWAY_VIP: TBD-GATEWAY-VIP"),
    );
    assert!(!rules(&f.lint()).contains(&"FL052".to_string()));
}

/// FL033: substituteFrom names a ConfigMap the overlay never applies.
#[test]
fn substitute_from_missing() {
    let f = clean_fleet();
    let a = std::fs::read_to_string(f.root().join("clusters/test/app.yaml")).unwrap();
    f.write(
        "clusters/test/app.yaml",
        &format!("{a}      - kind: ConfigMap\n        name: nowhere\n"),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL033"], "{}", show(&r));
    // one finding per input, naming every reader (a fleet had one per reader: 73 for one
    // Secret)
    configmap_dir(&f, "second", "  X: ${REPLICAS}\n");
    add_to_root(
        &f,
        "second.yaml",
        &ks(
            "second",
            "  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: nowhere\n",
        ),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL033"], "{}", show(&r));
    assert_eq!(
        r.findings[0].kustomizations,
        ["flux-system/app", "flux-system/second"]
    );
    assert!(
        r.findings[0].message.contains(
            "ConfigMap flux-system/nowhere, read by substituteFrom of 2 Kustomizations (flux-system/app, flux-system/second)"
        ) && r.findings[0].message.contains("substitution of 3 object(s)"),
        "{}",
        r.findings[0].message
    );
    f.remove("clusters/test/second.yaml");
    let k = std::fs::read_to_string(f.root().join("clusters/test/kustomization.yaml")).unwrap();
    f.write(
        "clusters/test/kustomization.yaml",
        &k.replace("  - second.yaml\n", ""),
    );
    // optional: true is skipped by the controller
    f.write(
        "clusters/test/app.yaml",
        &format!("{a}      - kind: ConfigMap\n        name: nowhere\n        optional: true\n"),
    );
    assert!(f.lint().findings.is_empty());
}

/// FL002 + FL001: a path that does not exist; a directory that does not render.
#[test]
fn path_missing_and_render_error() {
    let f = clean_fleet();
    add_to_root(&f, "gone.yaml", &ks("gone", ""));
    let r = f.lint();
    assert_eq!(rules(&r), ["FL002"], "{}", show(&r));
    f.remove("clusters/test/gone.yaml");
    let k = std::fs::read_to_string(f.root().join("clusters/test/kustomization.yaml")).unwrap();
    f.write(
        "clusters/test/kustomization.yaml",
        &k.replace("  - gone.yaml\n", ""),
    );
    f.write(
        "apps/app/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - deploy.yaml\n  - missing.yaml\n",
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL001"], "{}", show(&r));
    assert!(
        r.findings[0].message.contains("missing.yaml"),
        "{}",
        r.findings[0].message
    );
}

/// FL003: sourceRef names a source the overlay does not apply.
#[test]
fn source_missing() {
    let f = clean_fleet();
    configmap_dir(&f, "extra", "  x: \"1\"\n");
    add_to_root(
        &f,
        "extra.yaml",
        &ks("extra", "").replace("name: flux-system\n", "name: elsewhere\n"),
    );
    // a source no document of the tree defines is made elsewhere: listed once (info), no error
    let r = f.lint();
    assert_eq!(rules(&r), ["FL004"], "{}", show(&r));
    assert!(!r.has_errors());
    // the tree defines it, the overlay does not apply it: the error
    f.write(
        "sources/elsewhere.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: elsewhere\n  namespace: flux-system\nspec:\n  interval: 1m\n  url: https://git.example.com/x\n",
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL003"], "{}", show(&r));
    assert!(r.findings[0].message.contains("sources/elsewhere.yaml"));
}

/// FL010, FL013, FL014: a missing dependency, a wave depending on a later wave, and a
/// dependency without wait.
#[test]
fn depends_on_rules() {
    let f = clean_fleet();
    configmap_dir(&f, "a", "  x: \"1\"\n");
    add_to_root(&f, "a.yaml", &ks("a", "  dependsOn:\n    - name: nope\n"));
    assert_eq!(rules(&f.lint()), ["FL010"]);

    let f = clean_fleet();
    configmap_dir(&f, "wave-1", "  x: \"1\"\n");
    configmap_dir(&f, "wave-2", "  x: \"1\"\n");
    add_to_root(
        &f,
        "w1.yaml",
        &ks("wave-1", "  dependsOn:\n    - name: wave-2\n"),
    );
    add_to_root(&f, "w2.yaml", &ks("wave-2", ""));
    let r = f.lint();
    assert_eq!(rules(&r), ["FL013"], "{}", show(&r));

    let f = clean_fleet();
    configmap_dir(&f, "a", "  x: \"1\"\n");
    configmap_dir(&f, "b", "  x: \"1\"\n");
    add_to_root(
        &f,
        "a.yaml",
        &ks("a", "").replace("  wait: true\n", "  timeout: 3m\n"),
    );
    add_to_root(
        &f,
        "b.yaml",
        &ks("b", "  timeout: 4m\n  dependsOn:\n    - name: a\n"),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL014"], "{}", show(&r));
    assert!(
        r.findings[0].message.contains("up to 7m0s"),
        "{}",
        r.findings[0].message
    );
}

/// FL071: the workload pulls the scanned repository under another host name.
#[test]
fn image_host_mismatch() {
    let f = clean_fleet();
    configmap_dir(&f, "x", "  x: \"1\"\n");
    f.write(
        "apps/app/imagerepo.yaml",
        "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageRepository\nmetadata:\n  name: web\n  namespace: flux-system\nspec:\n  image: registry.lan:5000/example/web\n  interval: 5m\n",
    );
    let k = std::fs::read_to_string(f.root().join("apps/app/kustomization.yaml")).unwrap();
    f.write(
        "apps/app/kustomization.yaml",
        &k.replace("namespace: web\n", "")
            .replace("  - deploy.yaml\n", "  - deploy.yaml\n  - imagerepo.yaml\n"),
    );
    let d = std::fs::read_to_string(f.root().join("apps/app/deploy.yaml")).unwrap();
    f.write(
        "apps/app/deploy.yaml",
        &d.replace(
            "ghcr.io/example/web:2.3.4",
            "registry.internal:5000/example/web:2.3.4",
        ),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL071"], "{}", show(&r));
}

/// FL036: postBuild with no variables at all: nothing is substituted.
#[test]
fn substitution_skipped_without_variables() {
    let f = clean_fleet();
    let a = std::fs::read_to_string(f.root().join("clusters/test/app.yaml")).unwrap();
    f.write(
        "clusters/test/app.yaml",
        &a.replace(
            "    substituteFrom:\n      - kind: ConfigMap\n        name: cluster-vars\n",
            "    substitute: {}\n",
        ),
    );
    let r = f.lint();
    assert!(rules(&r).iter().all(|x| x == "FL036"), "{}", show(&r));
    assert!(!r.findings.is_empty());
    // nothing is substituted: what ships is what the author wrote, a warning (severity
    // follows certainty)
    assert!(!r.has_errors(), "{}", show(&r));
}

/// A Grafana dashboard's own `${DS_PROMETHEUS}` (grafana-operator fills it in) under a
/// Kustomization with `postBuild: {substitute: {}}`: envsubst never runs, the literal is what
/// the author wants. FL036 as a warning, never an error; a malformed `${` there is not FL034
/// either (no envsubst error can happen when substitution does not run).
#[test]
fn a_grafana_placeholder_under_an_empty_substitute_is_a_warning() {
    let f = clean_fleet();
    configmap_dir(
        &f,
        "dashboards",
        "  node.json: |\n    {\"datasource\": \"${DS_PROMETHEUS}\"}\n",
    );
    f.write(
        "apps/dashboards/legacy.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: legacy\n  namespace: default\ndata:\n  legend: \"${ broken\"\n",
    );
    f.write(
        "apps/dashboards/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - cm.yaml\n  - legacy.yaml\n",
    );
    add_to_root(
        &f,
        "dashboards.yaml",
        &ks("dashboards", "  postBuild:\n    substitute: {}\n"),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL036"], "{}", show(&r));
    assert_eq!(r.findings[0].severity, fleetlint::rules::Severity::Warning);
    assert!(r.findings[0].message.contains("${DS_PROMETHEUS}"));
    assert!(!r.has_errors(), "{}", show(&r));
}

/// FL012: dependsOn into another namespace.
#[test]
fn depends_on_cross_namespace() {
    let f = clean_fleet();
    configmap_dir(&f, "a", "  x: \"1\"\n");
    configmap_dir(&f, "b", "  x: \"1\"\n");
    add_to_root(
        &f,
        "a.yaml",
        &ks("a", "").replace("namespace: flux-system", "namespace: team-a"),
    );
    add_to_root(
        &f,
        "b.yaml",
        &ks(
            "b",
            "  dependsOn:\n    - name: a\n      namespace: team-a\n",
        ),
    );
    // team-a's Kustomization needs its source in team-a too
    let sync = common::GOTK_SYNC
        .split("---")
        .next()
        .unwrap()
        .replace("namespace: flux-system", "namespace: team-a");
    add_to_root(&f, "team-a-source.yaml", &sync);
    // allowed unless the fleet turns the multi-tenancy lockdown on
    let r = f.lint();
    assert!(r.findings.is_empty(), "no lockdown: {}", show(&r));
    f.write(
        "flux-patches/lockdown.yaml",
        "- op: add\n  path: /spec/template/spec/containers/0/args/-\n  value: --no-cross-namespace-refs=true\n",
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL012"], "{}", show(&r));
    assert_eq!(
        (r.findings[0].file.as_str(), r.findings[0].line),
        ("clusters/test/b.yaml", 15)
    );
}

/// FL034 and FL035: text envsubst cannot parse; a variable name outside varsubRegex.
#[test]
fn substitution_syntax_and_bad_name() {
    let f = clean_fleet();
    let d = std::fs::read_to_string(f.root().join("apps/app/deploy.yaml")).unwrap();
    f.write(
        "apps/app/deploy.yaml",
        &d.replace("${LOG_LEVEL:=info}", "${LOG_LEVEL-info}"),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL034"], "{}", show(&r));
    assert!(
        r.findings[0].message.contains("missing closing brace"),
        "{}",
        r.findings[0].message
    );

    let f = clean_fleet();
    let v = std::fs::read_to_string(f.root().join("clusters/test/vars.yaml")).unwrap();
    f.write(
        "clusters/test/vars.yaml",
        &format!("{v}  log-level: debug\n"),
    );
    let r = f.lint();
    assert_eq!(rules(&r), ["FL035"], "{}", show(&r));
    assert_eq!(
        (r.findings[0].file.as_str(), r.findings[0].line),
        ("clusters/test/vars.yaml", 9)
    );
}

/// FL041: a base value that looks environment-specific (a LAN address) that an overlay does
/// not set; the overlay that sets it is clean.
#[test]
fn overlay_inherits_base_lan_address() {
    let f = common::Fleet {
        dir: tempfile::tempdir().unwrap(),
    };
    let k = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n";
    f.write(
        "clusters/base/kustomization.yaml",
        &format!("{k}resources:\n  - vars.yaml\n  - app.yaml\n"),
    );
    f.write(
        "clusters/base/vars.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-vars\n  namespace: flux-system\ndata:\n  DB_HOST: 192.168.10.5\n  REPLICAS: \"1\"\n",
    );
    let app = std::fs::read_to_string(clean_fleet().root().join("clusters/test/app.yaml")).unwrap();
    f.write("clusters/base/app.yaml", &app);
    f.write(
        "apps/app/kustomization.yaml",
        &format!("{k}resources:\n  - cm.yaml\n"),
    );
    f.write(
        "apps/app/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: default\ndata:\n  db: ${DB_HOST}\n  replicas: ${REPLICAS}\n",
    );
    for (env, sets_db) in [("dev", true), ("prod", false)] {
        f.write(
            &format!("clusters/{env}/flux-system/gotk-sync.yaml"),
            &common::GOTK_SYNC.replace("./clusters/test", &format!("./clusters/{env}")),
        );
        f.write(
            &format!("clusters/{env}/flux-system/kustomization.yaml"),
            &format!("{k}resources:\n  - gotk-sync.yaml\n"),
        );
        f.write(
            &format!("clusters/{env}/kustomization.yaml"),
            &format!(
                "{k}resources:\n  - ../base\n  - flux-system\npatches:\n  - path: vars.yaml\n"
            ),
        );
        let db = if sets_db {
            "  DB_HOST: 192.168.10.5\n"
        } else {
            ""
        };
        f.write(
            &format!("clusters/{env}/vars.yaml"),
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-vars\n  namespace: flux-system\ndata:\n{db}  REPLICAS: \"2\"\n"),
        );
    }
    let r = f.lint();
    assert_eq!(rules(&r), ["FL041"], "{}", show(&r));
    let x = &r.findings[0];
    assert_eq!(x.overlay.as_deref(), Some("clusters/prod"));
    assert_eq!((x.file.as_str(), x.line), ("clusters/base/vars.yaml", 7));
    assert!(x.message.contains("192.168.10.5"), "{}", x.message);
}

/// A YAML alias bomb of our own: nine levels of nine anchors, 9^9 strings once expanded
/// (kustomize expands them all; unbounded it grew `kubectl kustomize` to 8 GB in 20 s).
fn alias_bomb() -> String {
    let mut s = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n  namespace: default\ndata:\n  a0: &a0 [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n",
    );
    for i in 1..9 {
        let refs = vec![format!("*a{}", i - 1); 9].join(", ");
        s.push_str(&format!("  a{i}: &a{i} [{refs}]\n"));
    }
    s
}

/// The clean fleet plus Kustomization `bomb` (./apps/bomb lists the alias bomb) and `unpinned`
/// (./apps/unpinned, a Deployment whose image has no tag: FL070), so a report holding FL070
/// proves the rest of the fleet was linted.
fn bomb_fleet() -> common::Fleet {
    let f = clean_fleet();
    f.write(
        "apps/bomb/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - bomb.yaml\n",
    );
    f.write("apps/bomb/bomb.yaml", &alias_bomb());
    add_to_root(&f, "bomb.yaml", &ks("bomb", ""));
    f.write(
        "apps/unpinned/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - deploy.yaml\n",
    );
    f.write(
        "apps/unpinned/deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: unpinned\n  namespace: default\nspec:\n  selector:\n    matchLabels: {app: unpinned}\n  template:\n    metadata:\n      labels: {app: unpinned}\n    spec:\n      containers:\n        - name: app\n          image: ghcr.io/example/unpinned\n",
    );
    add_to_root(&f, "unpinned.yaml", &ks("unpinned", ""));
    f
}

/// A render past its memory bound (set low here: 256Mi of data segment, which a real render
/// of this size never needs) is FL001 naming the directory and the bound, and the rest of the
/// fleet is linted. No time is measured: the run ends because the bound ends the render.
#[test]
fn a_render_past_its_memory_bound_is_fl001_and_the_rest_is_linted() {
    let f = bomb_fleet();
    let r = f.lint_with(|c| {
        c.render_bounds = fleetlint::render::RenderBounds {
            timeout: std::time::Duration::ZERO,
            memory: 256 << 20,
        }
    });
    assert_eq!(rules(&r), ["FL001", "FL070"], "{}", show(&r));
    let x = r.findings.iter().find(|x| x.rule == "FL001").unwrap();
    assert!(
        x.message.contains("flux-system/bomb (path apps/bomb)")
            && x.message.contains("memory bound 256Mi (--render-memory)"),
        "{}",
        x.message
    );
    assert_eq!(x.severity, fleetlint::rules::Severity::Error);
}

/// A render past its time bound (no memory bound; 2s here, the bomb never finishes in any
/// time) is FL001 naming the directory and the bound.
#[test]
fn a_render_past_its_time_bound_is_fl001() {
    let f = bomb_fleet();
    f.remove("apps/unpinned/deploy.yaml");
    f.write(
        "apps/unpinned/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n",
    );
    let r = f.lint_with(|c| {
        c.render_bounds = fleetlint::render::RenderBounds {
            timeout: std::time::Duration::from_secs(2),
            memory: 0,
        }
    });
    let x = r
        .findings
        .iter()
        .find(|x| x.rule == "FL001" && x.message.contains("(path apps/bomb)"))
        .unwrap_or_else(|| panic!("{}", show(&r)));
    assert!(
        x.message.contains("flux-system/bomb (path apps/bomb)")
            && x.message.contains("time bound 2s (--render-timeout)"),
        "{}",
        show(&r)
    );
}

/// Our own YAML readers are bounded too: serde-saphyr's default budget (250,000 nodes,
/// 1,000,000 events replayed from aliases, nesting 64 deep) refuses the bomb instead of
/// expanding it, and the tree reader keeps aliases unexpanded.
#[test]
fn our_own_yaml_parsing_refuses_an_alias_bomb() {
    let e = serde_saphyr::from_str::<serde_json::Value>(&alias_bomb()).unwrap_err();
    assert!(e.to_string().contains("budget breached"), "{e}");
}
