//! What the kubelet and the container runtime write into a pod's `/etc/resolv.conf` and
//! `/etc/hosts`, and the DNS records the twin's cluster DNS serves.
//!
//! Sources:
//! - kubernetes `pkg/kubelet/network/dns/dns.go` (`getPodDNSType`, `GetPodDNS`,
//!   `generateSearchesForDNSClusterFirst`, `appendDNSConfig`, `mergeDNSOptions`,
//!   `formDNSConfigFitsLimits`, `parseResolvConf`): ClusterFirst = the kubelet's clusterDNS
//!   as the only nameservers, search `<ns>.svc.<domain> svc.<domain> <domain>` + the node's
//!   search list (duplicates omitted), options `ndots:5` (the node's options are dropped);
//!   ClusterFirst on hostNetwork falls back to Default; ClusterFirstWithHostNet = ClusterFirst;
//!   Default = the node's resolv.conf (nameservers, search, options); None = empty; then
//!   `dnsConfig` nameservers and searches are appended (duplicates omitted) and options merged
//!   by name (dnsConfig wins). Limits: 3 nameservers (`validation.MaxDNSNameservers`), 32
//!   search domains / 2048 characters (`MaxDNSSearchPathsExpanded`,
//!   `MaxDNSSearchListCharsExpanded`, ExpandedDNSConfig GA in 1.28).
//! - containerd `internal/cri/server/podsandbox` `parseDNSOptions`: the file is written as
//!   `search ...`, then one `nameserver X` line each, then `options ...`.
//! - kubernetes `pkg/kubelet/kubelet_pods.go` `managedHostsFileContent` and
//!   `hostsEntriesFromHostAliases`: the managed header, localhost/IPv6 lines, the pod IP
//!   with its hostname (FQDN first when `subdomain` is set), then
//!   `# Entries added by HostAliases.` and one `IP<TAB>name<TAB>name` line per alias.
//!
//! Difference: Go iterates `mergeDNSOptions`' map in random order; we keep the node's order
//! and append new options in dnsConfig order (deterministic; resolvers do not care).

use serde_json::Value;

/// The node's resolver setup, as the kubelet sees it (`--cluster-dns`, `--cluster-domain`,
/// `--resolv-conf`).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDns {
    /// kubelet `clusterDNS` (the kube-dns Service ClusterIP), e.g. `["10.96.0.10"]`.
    pub cluster_dns: Vec<String>,
    /// kubelet `clusterDomain`, e.g. `cluster.local`.
    pub cluster_domain: String,
    /// The node's own resolv.conf nameservers (dnsPolicy Default).
    pub host_nameservers: Vec<String>,
    /// The node's search list.
    pub host_searches: Vec<String>,
    /// The node's options (`ndots:1`, `edns0`, ...).
    pub host_options: Vec<String>,
    /// Node name (hostNetwork pods' /etc/hosts).
    pub node_name: String,
}

/// nameservers, searches, options.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DnsConfig {
    /// `nameserver` lines in order.
    pub servers: Vec<String>,
    /// The `search` line.
    pub searches: Vec<String>,
    /// The `options` line.
    pub options: Vec<String>,
}

fn omit_duplicates(v: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

fn strs(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `mergeDNSOptions`: options by name, dnsConfig entries overwrite (`{name, value?}`).
fn merge_options(existing: &[String], extra: Option<&Value>) -> Vec<String> {
    let mut out: Vec<(String, String)> = existing
        .iter()
        .map(|o| match o.split_once(':') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => (o.clone(), String::new()),
        })
        .collect();
    for o in extra.and_then(Value::as_array).into_iter().flatten() {
        let name = o["name"].as_str().unwrap_or_default().to_string();
        let value = o["value"].as_str().unwrap_or_default().to_string();
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 = value,
            None => out.push((name, value)),
        }
    }
    out.into_iter()
        .map(|(n, v)| if v.is_empty() { n } else { format!("{n}:{v}") })
        .collect()
}

/// The DNS config the kubelet computes for `pod` (dns.go `GetPodDNS`), limits applied.
pub fn pod_dns_config(pod: &Value, node: &NodeDns) -> DnsConfig {
    let spec = &pod["spec"];
    let host_network = spec["hostNetwork"].as_bool().unwrap_or(false);
    let policy = spec["dnsPolicy"].as_str().unwrap_or("ClusterFirst");
    #[derive(PartialEq)]
    enum T {
        None,
        Cluster,
        Host,
    }
    let t = match policy {
        "None" => T::None,
        "ClusterFirstWithHostNet" => T::Cluster,
        "ClusterFirst" if !host_network => T::Cluster,
        "ClusterFirst" | "Default" => T::Host,
        _ => T::Cluster,
    };
    let host = DnsConfig {
        servers: node.host_nameservers.clone(),
        searches: node.host_searches.clone(),
        options: node.host_options.clone(),
    };
    let mut c = match t {
        T::None => DnsConfig::default(),
        T::Cluster if !node.cluster_dns.is_empty() => {
            let d = &node.cluster_domain;
            let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
            let mut searches = if d.is_empty() {
                vec![]
            } else {
                vec![format!("{ns}.svc.{d}"), format!("svc.{d}"), d.clone()]
            };
            searches.extend(host.searches.clone());
            DnsConfig {
                servers: node.cluster_dns.clone(),
                searches: omit_duplicates(searches),
                options: vec!["ndots:5".into()],
            }
        }
        _ => host,
    };
    let dc = &spec["dnsConfig"];
    if dc.is_object() {
        let mut servers = c.servers.clone();
        servers.extend(strs(dc.get("nameservers")));
        c.servers = omit_duplicates(servers);
        let mut searches = c.searches.clone();
        searches.extend(strs(dc.get("searches")));
        c.searches = omit_duplicates(searches);
        c.options = merge_options(&c.options, dc.get("options"));
    }
    // formDNSConfigFitsLimits
    c.servers.truncate(3);
    c.searches.truncate(32);
    while c.searches.join(" ").len() > 2048 {
        c.searches.pop();
    }
    c
}

/// `/etc/resolv.conf` text as containerd writes it (`parseDNSOptions`).
pub fn resolv_conf_text(c: &DnsConfig) -> String {
    let mut out = String::new();
    if !c.searches.is_empty() {
        out.push_str(&format!("search {}\n", c.searches.join(" ")));
    }
    for s in &c.servers {
        out.push_str(&format!("nameserver {s}\n"));
    }
    if !c.options.is_empty() {
        out.push_str(&format!("options {}\n", c.options.join(" ")));
    }
    out
}

/// `/etc/resolv.conf` for `pod`.
pub fn pod_resolv_conf(pod: &Value, node: &NodeDns) -> String {
    resolv_conf_text(&pod_dns_config(pod, node))
}

/// `/etc/hosts` for `pod` with IP `pod_ip` (kubelet `managedHostsFileContent`). hostNetwork
/// pods get the node's file: localhost lines and the node name, plus the aliases.
pub fn pod_hosts_file(pod: &Value, pod_ip: &str, node: &NodeDns) -> String {
    let spec = &pod["spec"];
    let mut out = String::from("# Kubernetes-managed hosts file.\n");
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    if spec["hostNetwork"].as_bool().unwrap_or(false) {
        out = format!(
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n172.18.0.2\t{}\n",
            node.node_name
        );
    } else {
        let name = pod_hostname(pod);
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
        match spec["subdomain"].as_str().filter(|s| !s.is_empty()) {
            Some(sub) => out.push_str(&format!(
                "{pod_ip}\t{name}.{sub}.{ns}.svc.{}\t{name}\n",
                node.cluster_domain
            )),
            None => out.push_str(&format!("{pod_ip}\t{name}\n")),
        }
    }
    if let Some(aliases) = spec["hostAliases"].as_array()
        && !aliases.is_empty()
    {
        out.push_str("\n# Entries added by HostAliases.\n");
        for a in aliases {
            let names = strs(a.get("hostnames"));
            out.push_str(&format!(
                "{}\t{}\n",
                a["ip"].as_str().unwrap_or_default(),
                names.join("\t")
            ));
        }
    }
    out
}

/// The pod's hostname: `spec.hostname` or the pod name, truncated to 63 characters
/// (kubelet `GeneratePodHostNameAndDomain` / `truncatePodHostnameIfNeeded`, which also drops
/// a trailing `-` or `.`).
pub fn pod_hostname(pod: &Value) -> String {
    let name = pod["spec"]["hostname"]
        .as_str()
        .filter(|s| !s.is_empty())
        .or(pod["metadata"]["name"].as_str())
        .unwrap_or("pod");
    let mut h: String = name.chars().take(63).collect();
    while h.ends_with('-') || h.ends_with('.') {
        h.pop();
    }
    h
}

/// Inline entries of every `hosts` block of a CoreDNS Corefile: `(ip, [names])`. Entries of
/// a `hosts FILE` live in the CoreDNS pod and are not known here; options (`fallthrough`,
/// `ttl`, `reload`, `no_reverse`) are skipped. Names are lower-cased without a trailing dot.
pub fn corefile_hosts_pins(corefile: &str) -> Vec<(String, Vec<String>)> {
    let mut pins = Vec::new();
    let mut in_hosts = false;
    let mut depth = 0usize;
    for raw in corefile.lines() {
        let line = raw.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let toks: Vec<&str> = line.split_whitespace().collect();
        if in_hosts {
            if line.starts_with('}') {
                in_hosts = false;
                depth = depth.saturating_sub(1);
                continue;
            }
            if toks[0].parse::<std::net::IpAddr>().is_ok() && toks.len() > 1 {
                pins.push((
                    toks[0].to_string(),
                    toks[1..]
                        .iter()
                        .map(|n| n.trim_end_matches('.').to_ascii_lowercase())
                        .collect(),
                ));
            }
            continue;
        }
        if toks[0] == "hosts" && depth == 1 && line.ends_with('{') {
            in_hosts = true;
            depth += 1;
            continue;
        }
        depth += line.matches('{').count();
        depth = depth.saturating_sub(line.matches('}').count());
    }
    pins
}

/// The hosts-format file the cluster DNS (dnsmasq standing in for CoreDNS) serves: the
/// Corefile's inline `hosts` pins, then `<svc>.<ns>.svc.<domain> -> clusterIP` for every
/// Service with a ClusterIP (the `kubernetes` plugin; headless and ExternalName Services are
/// not served).
pub fn cluster_hosts(corefile: Option<&str>, services: &[Value], domain: &str) -> String {
    let mut out = String::from("# twin podexec: CoreDNS hosts pins and Service records\n");
    for (ip, names) in corefile.map(corefile_hosts_pins).unwrap_or_default() {
        out.push_str(&format!("{ip} {}\n", names.join(" ")));
    }
    let mut svc: Vec<(String, String)> = services
        .iter()
        .filter_map(|s| {
            let ip = s["spec"]["clusterIP"].as_str()?;
            if ip.is_empty() || ip == "None" {
                return None;
            }
            Some((
                format!(
                    "{}.{}.svc.{domain}",
                    s["metadata"]["name"].as_str()?,
                    s["metadata"]["namespace"].as_str()?
                ),
                ip.to_string(),
            ))
        })
        .collect();
    svc.sort();
    for (name, ip) in svc {
        out.push_str(&format!("{ip} {name}\n"));
    }
    out
}

/// The hosts-format file the upstream resolver serves (`name -> [ips]`).
pub fn upstream_hosts(records: &std::collections::BTreeMap<String, Vec<String>>) -> String {
    let mut out = String::from("# twin podexec: upstream records\n");
    for (name, ips) in records {
        for ip in ips {
            out.push_str(&format!("{ip} {}\n", name.trim_end_matches('.')));
        }
    }
    out
}
