//! The real probe script, run by the real `sh`: values arrive as argv and are never
//! evaluated, even if validation were bypassed.

use podresolve::parse::ProbeLog;
use podresolve::probe::SCRIPT;
use std::process::Command;

#[test]
fn hostile_argv_is_never_evaluated() {
    let dir = tempfile::tempdir().unwrap();
    let m1 = dir.path().join("pwned1");
    let m2 = dir.path().join("pwned2");
    let m3 = dir.path().join("pwned3");
    let hostile = [
        format!("x;touch {}", m1.display()),
        format!("$(touch {})", m2.display()),
        format!("`touch {}`\nnext", m3.display()),
    ];
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg("podresolve")
        .arg("--tls")
        .arg("443;touch /nonexistent")
        .arg("--")
        .args(&hostile)
        .env("PATH", "/nonexistent-tools-dir")
        .env_remove("ENV")
        .output()
        .expect("sh runs");
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(!m1.exists() && !m2.exists() && !m3.exists(), "{log}");
    let parsed = ProbeLog::parse(&log);
    assert!(parsed.complete, "{log}");
    let g = parsed
        .section("getent", &hostile[0])
        .expect("section per argv value");
    assert_eq!(g.rc, Some(127));
    assert!(g.body.contains("getent: not found in image"));
    assert!(parsed.section("getent", &hostile[1]).is_some());
    assert!(parsed.tools.iter().all(|t| t.path.is_none()));
}

#[test]
fn real_tools_produce_parseable_sections() {
    // getent is part of libc-bin on every Debian/Ubuntu machine; an IP literal and
    // "localhost" resolve without any DNS server.
    if Command::new("getent").arg("--version").output().is_err() {
        eprintln!("getent not installed; skipping");
        return;
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg("podresolve")
        .arg("--")
        .arg("127.0.0.1")
        .arg("localhost")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    let parsed = ProbeLog::parse(&log);
    assert!(parsed.complete);
    assert_eq!(parsed.version.as_deref(), Some("v1"));
    let g = parsed.section("getent", "127.0.0.1").unwrap();
    let r = podresolve::parse::parse_getent(&g.body, g.rc);
    assert_eq!(
        r.addresses,
        vec!["127.0.0.1".parse::<std::net::IpAddr>().unwrap()]
    );
    let l = parsed.section("getent", "localhost").unwrap();
    assert_eq!(l.rc, Some(0), "{log}");
    assert!(parsed.section("resolv.conf", "").is_some());
    // The libc line reads this machine's getent binary (Debian/Ubuntu: glibc).
    let ldd = Command::new("ldd").arg("--version").output();
    if ldd.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("GLIBC")) {
        assert_eq!(parsed.libc.as_deref(), Some("glibc"), "{log}");
    }
}
