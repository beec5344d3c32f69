//! MCP over streamable HTTP (`kubectl gitops mcp --http ADDR`), rmcp's
//! [`StreamableHttpService`] on one endpoint, `http://ADDR/mcp`, served with hyper (HTTP/1.1).
//!
//! Security (docs/gitops-mcp.md, "Security"): the endpoint has no authentication of its
//! own, and every tool runs with the identity of the pinned kubeconfig context, so whoever can
//! reach the port can do what the tools do with it. Hence:
//! - loopback only by default: a non-loopback address is a usage error unless
//!   `--allow-non-loopback` is given, and even then it must be one specific address (never
//!   `0.0.0.0` or `::`);
//! - `Host` must be a loopback name (`localhost`, `127.0.0.1`, `::1`) or the bound address
//!   (rmcp `allowed_hosts`): a page that rebinds a DNS name to 127.0.0.1 is refused (DNS
//!   rebinding, MCP specification "Security Warning" for streamable HTTP);
//! - any request that carries an `Origin` header is refused (rmcp origin validation with an
//!   empty allow list): browsers send one, MCP clients do not;
//! - every path but `/mcp` is 404.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use cluster_loop::error::Error;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::session::Session;
use crate::tools::Server;

/// The endpoint path.
pub const PATH: &str = "/mcp";

/// `--http`'s value: `IP:PORT`, `[IPv6]:PORT` or `localhost:PORT` (127.0.0.1); port 0 lets
/// the system choose (the bound address is printed on stderr). Errors: anything else, with
/// the forms accepted.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Some(port) = s.strip_prefix("localhost:") {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{s}: the port must be a number 0-65535"))?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    s.parse().map_err(|_| {
        format!("{s}: give IP:PORT, [IPv6]:PORT or localhost:PORT (e.g. 127.0.0.1:0; port 0 picks a free port)")
    })
}

/// Whether `addr` may be bound: any loopback address; another one only with
/// `allow_non_loopback` and never an unspecified one (`0.0.0.0`, `::`). Errors (usage):
/// saying why, and the flag.
pub fn check_addr(addr: SocketAddr, allow_non_loopback: bool) -> Result<(), Error> {
    let ip = addr.ip();
    if ip.is_loopback() {
        return Ok(());
    }
    if ip.is_unspecified() {
        return Err(Error::usage(format!(
            "--http {addr}: an unspecified address (every interface) is never bound; give one address (127.0.0.1:PORT, or with --allow-non-loopback the one address clients reach)"
        )));
    }
    if !allow_non_loopback {
        return Err(Error::usage(format!(
            "--http {addr}: not a loopback address. The endpoint has no authentication and its tools act with your kubeconfig's identity, so anyone who can reach {ip} could use them; serve 127.0.0.1:PORT (and tunnel, e.g. ssh -L), or pass --allow-non-loopback if that network is yours alone"
        )));
    }
    Ok(())
}

/// rmcp's configuration for `bound`: loopback `Host` names plus the bound address, `Origin`
/// refused, sessions ended with `stop`.
fn config(bound: SocketAddr, stop: &CancellationToken) -> StreamableHttpServerConfig {
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    let ip = bound.ip().to_string();
    if !hosts.contains(&ip) {
        hosts.push(ip);
    }
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .enforce_origin_validation()
        .with_cancellation_token(stop.child_token())
}

fn not_found() -> hyper::Response<BoxBody<Bytes, Infallible>> {
    let mut r = hyper::Response::new(
        Full::new(Bytes::from_static(b"not found: the MCP endpoint is /mcp\n")).boxed(),
    );
    *r.status_mut() = hyper::StatusCode::NOT_FOUND;
    r
}

/// Serves `session` over streamable HTTP at `addr` until SIGINT or SIGTERM; prints
/// `serving MCP (streamable HTTP) at http://<bound>/mcp` on stderr once listening (so a
/// client of `--http 127.0.0.1:0` reads the port there). Then ends every MCP session and
/// waits (up to 10 minutes) for flows still undoing. Returns the signal's name. Errors:
/// binding the address (exit 3), naming it.
pub async fn serve(session: Session, addr: SocketAddr) -> Result<&'static str, Error> {
    let mut signals = cluster_loop::signals::Signals::install();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::Other(format!("--http {addr}: cannot listen: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::Other(format!("--http {addr}: {e}")))?;
    let session = Arc::new(session);
    let stop = CancellationToken::new();
    let shared = session.clone();
    let service = StreamableHttpService::new(
        move || Ok(Server::shared(shared.clone())),
        Arc::new(LocalSessionManager::default()),
        config(bound, &stop),
    );
    eprintln!("kubectl gitops mcp: serving MCP (streamable HTTP) at http://{bound}{PATH}");
    let signal = loop {
        let (stream, _) = tokio::select! {
            name = signals.recv() => break name,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("kubectl gitops mcp: accept failed: {e}");
                    continue;
                }
            },
        };
        let service = service.clone();
        let conn = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let service = service.clone();
            async move {
                if req.uri().path() != PATH {
                    return Ok::<_, Infallible>(not_found());
                }
                Ok(service.handle(req).await)
            }
        });
        let io = hyper_util::rt::TokioIo::new(stream);
        let stopped = stop.clone();
        tokio::spawn(async move {
            let served = hyper::server::conn::http1::Builder::new().serve_connection(io, conn);
            tokio::select! {
                _ = served => {}
                _ = stopped.cancelled() => {}
            }
        });
    };
    stop.cancel();
    crate::session::wait_for_flows(&session).await;
    Ok(signal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_loopback_unless_allowed_and_never_every_interface() {
        let a = |s: &str| parse_addr(s).unwrap();
        assert_eq!(a("localhost:0"), "127.0.0.1:0".parse().unwrap());
        for ok in ["127.0.0.1:0", "[::1]:8080", "localhost:7000", "127.0.0.2:1"] {
            assert!(check_addr(a(ok), false).is_ok(), "{ok}");
        }
        let e = check_addr(a("10.1.2.3:8080"), false).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--allow-non-loopback"), "{e}");
        assert!(check_addr(a("10.1.2.3:8080"), true).is_ok());
        for every in ["0.0.0.0:80", "[::]:80"] {
            let e = check_addr(a(every), true).unwrap_err();
            assert!(e.to_string().contains("is never bound"), "{e}");
        }
        for bad in ["8080", "example.com:80", "localhost:x", "127.0.0.1"] {
            assert!(parse_addr(bad).is_err(), "{bad}");
        }
    }
}
