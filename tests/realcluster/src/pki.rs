//! The control plane's private PKI, generated at start with rcgen: one CA that signs the
//! apiserver's serving certificate and the client certificates (admin in `system:masters`,
//! kube-controller-manager as `system:kube-controller-manager`), and the ECDSA key that signs
//! and verifies service-account tokens. kube-apiserver reads them as files
//! (`--client-ca-file`, `--tls-cert-file`, `--service-account-key-file`, ...).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::Error;

/// Paths of the PEM files written by [`generate`].
#[derive(Debug, Clone)]
pub struct Pki {
    /// CA certificate (`--client-ca-file`, kubeconfig `certificate-authority`).
    pub ca_cert: PathBuf,
    /// CA private key (kube-controller-manager `--cluster-signing-key-file`).
    pub ca_key: PathBuf,
    /// Serving certificate for `127.0.0.1`, `localhost` and the in-cluster names.
    pub serving_cert: PathBuf,
    /// Serving key.
    pub serving_key: PathBuf,
    /// Service-account signing key (PKCS#8 ECDSA P-256).
    pub sa_key: PathBuf,
    /// Its public half (`--service-account-key-file` verifies tokens with it; kube-apiserver's
    /// keyutil does not read a PKCS#8 private key there).
    pub sa_pub: PathBuf,
    /// Client certificate and key of `admin` (group `system:masters`).
    pub admin: (PathBuf, PathBuf),
    /// Client certificate and key of `system:kube-controller-manager`.
    pub controller_manager: (PathBuf, PathBuf),
    /// Client certificate and key of the real kubelet's node
    /// (`system:node:<`[`crate::realnode::REAL_NODE_NAME`]`>`, group `system:nodes`, as the
    /// kubelet's TLS bootstrap would get); used only when
    /// [`crate::ClusterOptions::real_kubelet`] is on.
    pub kubelet: (PathBuf, PathBuf),
}

fn err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Setup(format!("PKI: {what}: {e}"))
}

fn write(dir: &Path, name: &str, pem: &str) -> Result<PathBuf, Error> {
    let p = dir.join(name);
    std::fs::write(&p, pem).map_err(|e| err(&format!("write {}", p.display()), e))?;
    Ok(p)
}

/// Writes a fresh PKI into `dir`. Errors: [`Error::Setup`] on a key or file failure.
pub fn generate(dir: &Path) -> Result<Pki, Error> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(|e| err("CA", e))?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "cluster-loop realcluster CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().map_err(|e| err("CA key", e))?;
    let ca_key_pem = ca_key.serialize_pem();
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).map_err(|e| err("CA cert", e))?;

    let sans = [
        "127.0.0.1",
        "localhost",
        "10.96.0.1",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut serving = CertificateParams::new(sans).map_err(|e| err("serving", e))?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_key = KeyPair::generate().map_err(|e| err("serving key", e))?;
    let serving_cert = serving
        .signed_by(&serving_key, &ca)
        .map_err(|e| err("serving cert", e))?;

    let client = |cn: &str, org: Option<&str>| -> Result<(String, String), Error> {
        let mut p = CertificateParams::new(Vec::<String>::new()).map_err(|e| err(cn, e))?;
        p.distinguished_name.push(DnType::CommonName, cn);
        if let Some(o) = org {
            p.distinguished_name.push(DnType::OrganizationName, o);
        }
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let k = KeyPair::generate().map_err(|e| err(cn, e))?;
        let c = p.signed_by(&k, &ca).map_err(|e| err(cn, e))?;
        Ok((c.pem(), k.serialize_pem()))
    };
    let (admin_cert, admin_key) = client("admin", Some("system:masters"))?;
    let (kcm_cert, kcm_key) = client("system:kube-controller-manager", None)?;
    let (kubelet_cert, kubelet_key) = client(
        &format!("system:node:{}", crate::realnode::REAL_NODE_NAME),
        Some("system:nodes"),
    )?;
    let sa = KeyPair::generate().map_err(|e| err("service-account key", e))?;

    Ok(Pki {
        ca_cert: write(dir, "ca.crt", &ca.pem())?,
        ca_key: write(dir, "ca.key", &ca_key_pem)?,
        serving_cert: write(dir, "apiserver.crt", &serving_cert.pem())?,
        serving_key: write(dir, "apiserver.key", &serving_key.serialize_pem())?,
        sa_key: write(dir, "sa.key", &sa.serialize_pem())?,
        sa_pub: write(dir, "sa.pub", &sa.public_key_pem())?,
        admin: (
            write(dir, "admin.crt", &admin_cert)?,
            write(dir, "admin.key", &admin_key)?,
        ),
        controller_manager: (
            write(dir, "kcm.crt", &kcm_cert)?,
            write(dir, "kcm.key", &kcm_key)?,
        ),
        kubelet: (
            write(dir, "kubelet.crt", &kubelet_cert)?,
            write(dir, "kubelet.key", &kubelet_key)?,
        ),
    })
}

/// A kubeconfig (context `realcluster`, user `user`) for `server` with a client certificate.
pub fn kubeconfig(server: &str, ca: &Path, cert: &Path, key: &Path, namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: realcluster\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n- name: user\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: realcluster\n  context:\n    cluster: realcluster\n    user: user\n    namespace: {namespace}\ncurrent-context: realcluster\n",
        ca.display(),
        cert.display(),
        key.display()
    )
}
