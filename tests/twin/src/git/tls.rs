//! The Git server's private PKI: one CA per server and one server certificate it signs.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::GitError;

/// A CA and the server certificate it issued, ready for rustls.
pub(crate) struct Pki {
    /// The CA certificate, PEM: what a client puts in `GIT_SSL_CAINFO` / `http.sslCAInfo`, or
    /// a Flux source Secret's `ca.crt`.
    pub(crate) ca_pem: String,
    /// The server (leaf) certificate, PEM.
    pub(crate) server_pem: String,
    pub(crate) config: Arc<rustls::ServerConfig>,
}

fn tls_err(what: &str, e: impl std::fmt::Display) -> GitError {
    GitError::Tls(format!("{what}: {e}"))
}

/// Generates a fresh ECDSA P-256 CA ("cluster-loop twin Git CA <unique hex>") and a server certificate for
/// `127.0.0.1`, `localhost` and `dns_names` (subjectAltName entries; IP literals become IP
/// SANs), and a rustls server config offering ALPN `h2` and `http/1.1` like a typical
/// reverse proxy in front of Gitea.
pub(crate) fn generate(dns_names: &[String]) -> Result<Pki, GitError> {
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).map_err(|e| tls_err("CA params", e))?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // Each server's CA gets a distinct subject, as real CAs have: TLS libraries look issuers up
    // by subject name, so two CAs with one name in a bundle would shadow each other.
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
        ^ u128::from(std::process::id());
    ca_params.distinguished_name.push(
        DnType::CommonName,
        format!("cluster-loop twin Git CA {unique:x}"),
    );
    ca_params
        .distinguished_name
        .push(DnType::OrganizationName, "cluster-loop twin");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().map_err(|e| tls_err("CA key", e))?;
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(|e| tls_err("CA cert", e))?;

    let mut sans = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
    for n in dns_names {
        if !sans.contains(n) {
            sans.push(n.clone());
        }
    }
    let mut params = CertificateParams::new(sans).map_err(|e| tls_err("server cert SANs", e))?;
    params
        .distinguished_name
        .push(DnType::CommonName, super::messages::SERVER_CERT_CN);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().map_err(|e| tls_err("server key", e))?;
    let cert = params
        .signed_by(&key, &ca)
        .map_err(|e| tls_err("server cert", e))?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err("TLS versions", e))?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(|e| tls_err("server TLS config", e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Pki {
        ca_pem: ca.pem(),
        server_pem: cert.pem(),
        config: Arc::new(config),
    })
}
