//! `kubectl gitops mcp --http 127.0.0.1:0`: the streamable HTTP transport driven by the
//! official Python SDK's streamable HTTP client on the real cluster. Port 0: the server binds a
//! port the system picks and prints its URL on stderr, which the test reads, so no test
//! depends on a free port staying free.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use realcluster::testkit::eventually;
use serde_json::{Value, json};

use super::{SERVER, cli, mcp_cluster, python, ready, text};

/// The server process with `--http 127.0.0.1:0`, its URL (read from its stderr) and the rest
/// of its stderr (collected on a thread); SIGINT on drop.
struct HttpServer {
    child: std::process::Child,
    url: String,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl HttpServer {
    fn start(kubeconfig: &Path) -> HttpServer {
        let mut child = Command::new(SERVER)
            .args(["--http", "127.0.0.1:0", "--kubeconfig"])
            .arg(kubeconfig)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        let url = loop {
            let line = lines
                .next()
                .unwrap_or_else(|| panic!("the server ended before listening: {seen}"))
                .unwrap();
            seen.push_str(&line);
            seen.push('\n');
            if let Some(i) = line.find("http://") {
                break line[i..].trim().to_string();
            }
        };
        let log = std::sync::Arc::new(std::sync::Mutex::new(seen));
        let l = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut l = l.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        HttpServer { child, url, log }
    }

    /// Sends SIGINT and returns the exit code.
    fn interrupt(&mut self) -> Option<i32> {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        eventually(Duration::from_secs(30), "the server exits", || {
            self.child.try_wait().unwrap()
        })
        .code()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The official client over streamable HTTP at `url`: one JSON value per step.
fn http_client(url: &str, steps: Value) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/client.py");
    let mut child = Command::new(python())
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json!({"url": url, "steps": steps}).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed:\n{stdout}\n{stderr}");
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{stderr}")))
        .collect()
}

/// A raw HTTP/1.1 request to the server's address with `headers`; returns the status code.
fn raw_status(url: &str, path: &str, headers: &[(&str, &str)]) -> u16 {
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let mut req = format!("POST {path} HTTP/1.1\r\n");
    let has_host = headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host"));
    if !has_host {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!(
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

/// Over streamable HTTP the official client lists the same tools and gets the plugin's own
/// document; a request with a browser's `Origin`, a foreign `Host` (DNS rebinding) or another
/// path is refused; SIGINT stops the server with exit 130.
#[test]
fn streamable_http_on_loopback_serves_the_tools_and_refuses_browsers() {
    let c = mcp_cluster();
    c.fleet(
        "mcp-http",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mcp-http\n  namespace: default\n",
        )],
        "  interval: 10m\n  path: ./\n  prune: true\n",
    )
    .unwrap();
    eventually(Duration::from_secs(90), "mcp-http Ready", || {
        ready(&c, "mcp-http").then_some(())
    });
    let mut server = HttpServer::start(c.kubeconfig());
    assert!(
        server.url.starts_with("http://127.0.0.1:") && server.url.ends_with("/mcp"),
        "{}",
        server.url
    );
    let r = http_client(
        &server.url,
        json!([
            {"list": true},
            {"call": "diagnose_kustomization", "arguments": {"name": "mcp-http", "namespace": "flux-system"}},
            {"call": "unstick", "arguments": {"name": "mcp-http", "namespace": "flux-system"}},
        ]),
    );
    let tools = r[0]["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t == "fleet_report"), "{}", r[0]);
    assert!(!tools.iter().any(|t| t == "unstick"), "{}", r[0]);
    let (code, want) = cli(
        &c,
        crate::bin!("kubectl-unstick"),
        &["ks/mcp-http", "-n", "flux-system", "--dry-run"],
    );
    assert_eq!(code, 0, "{want}");
    let got = &r[1]["structured"];
    assert_eq!(r[1]["isError"], false, "{}", r[1]);
    for key in ["apiVersion", "kind", "diagnosis", "controller", "action"] {
        assert_eq!(got[key], want[key], "{key}: {got} vs {want}");
    }
    assert!(text(&r[1]).contains("exit 0"), "{}", r[1]);
    assert!(
        r[2]["error"]
            .as_str()
            .is_some_and(|e| e.contains("not found")),
        "{}",
        r[2]
    );

    // The endpoint answers a well-formed initialize (control), and refuses the same request
    // from a browser page (Origin), through a rebound DNS name (Host) or on another path.
    assert_eq!(raw_status(&server.url, "/mcp", &[]), 200);
    assert_eq!(
        raw_status(&server.url, "/mcp", &[("Origin", "http://evil.example")]),
        403
    );
    assert_eq!(
        raw_status(&server.url, "/mcp", &[("Host", "evil.example")]),
        403
    );
    assert_eq!(raw_status(&server.url, "/", &[]), 404);

    assert_eq!(
        server.interrupt(),
        Some(130),
        "{}",
        server.log.lock().unwrap()
    );
    assert!(
        server.log.lock().unwrap().contains("stopped (SIGINT)"),
        "{}",
        server.log.lock().unwrap()
    );
}
