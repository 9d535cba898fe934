//! The three files a cert-manager Secret mounts (`tls.crt`, `tls.key`, `ca.crt`), turned into a
//! rustls client configuration with the ring provider. Read again on every connection attempt, so
//! a renewed certificate is used without a restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};

use crate::error::{ConnectError, ConnectProblem};
use crate::pem::{FileProblem, malformed, read_certificates, read_private_key};

/// Where the client certificate, its key and the CA that signed the server's certificate live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The client certificate chain (PEM), `tls.crt`.
    pub cert: PathBuf,
    /// The client certificate's private key (PEM), `tls.key`.
    pub key: PathBuf,
    /// The CA bundle that signed the server's certificate (PEM), `ca.crt`.
    pub ca: PathBuf,
}

impl TlsFiles {
    /// The name of the certificate file in a mounted `kubernetes.io/tls` Secret.
    pub const CERT_FILE: &'static str = "tls.crt";
    /// The name of the key file in a mounted `kubernetes.io/tls` Secret.
    pub const KEY_FILE: &'static str = "tls.key";
    /// The name of the CA file in a mounted cert-manager Secret.
    pub const CA_FILE: &'static str = "ca.crt";

    /// The three files in one folder, the way a Secret is mounted without `subPath`.
    pub fn in_dir(dir: impl AsRef<Path>) -> TlsFiles {
        let dir = dir.as_ref();
        TlsFiles {
            cert: dir.join(Self::CERT_FILE),
            key: dir.join(Self::KEY_FILE),
            ca: dir.join(Self::CA_FILE),
        }
    }

    /// Reads the three files and builds the client configuration (ring provider, TLS 1.2 and 1.3,
    /// ALPN `h2`).
    pub fn client_config(&self) -> Result<ClientConfig, ConnectError> {
        let certs = read_certificates(&self.cert).map_err(|(problem, cause)| {
            ConnectError::CredentialUnavailable {
                path: self.cert.clone(),
                problem,
                cause,
            }
        })?;
        let key = read_private_key(&self.key).map_err(|(problem, cause)| {
            ConnectError::CredentialUnavailable {
                path: self.key.clone(),
                problem,
                cause,
            }
        })?;
        let roots = read_trust_anchors(&self.ca).map_err(|(problem, cause)| {
            ConnectError::TrustAnchorUnavailable {
                path: self.ca.clone(),
                problem,
                cause,
            }
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| ConnectError::CredentialUnavailable {
                path: self.cert.clone(),
                problem: ConnectProblem::Malformed,
                cause: format!("no usable TLS protocol version: {error}"),
            })?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)
            .map_err(|error| ConnectError::CredentialUnavailable {
                path: self.key.clone(),
                problem: ConnectProblem::Malformed,
                cause: format!("the key does not fit the certificate: {error}"),
            })?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }
}

fn read_trust_anchors(path: &Path) -> Result<RootCertStore, FileProblem> {
    let certs = read_certificates(path)?;
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|error| malformed(format!("not a usable CA certificate: {error}")))?;
    }
    Ok(roots)
}

/// What a TLS error of a connection means, named for the file it concerns: the alerts a server
/// sends about the client certificate, and this side's verdict on the server's certificate.
pub(crate) fn classify(
    error: &rustls::Error,
    address: &str,
    tls: Option<&TlsFiles>,
) -> ConnectError {
    use rustls::{AlertDescription as Alert, CertificateError, Error};
    let cert = tls.map(|files| files.cert.clone()).unwrap_or_default();
    let ca = tls.map(|files| files.ca.clone()).unwrap_or_default();
    let about = tls
        .and_then(|files| super::certificate::read_certificate_info(&files.cert).ok())
        .map(|info| {
            format!(
                " (client certificate {}, issued by {}, not after {})",
                info.subject, info.issuer, info.not_after
            )
        })
        .unwrap_or_default();
    let credential = |problem, cause: String| ConnectError::CredentialUnavailable {
        path: cert.clone(),
        problem,
        cause,
    };
    match error {
        Error::AlertReceived(Alert::CertificateExpired) => credential(
            ConnectProblem::Expired,
            format!("the server rejected the client certificate as expired{about}"),
        ),
        Error::AlertReceived(Alert::CertificateRevoked) => credential(
            ConnectProblem::Revoked,
            format!("the server rejected the client certificate as revoked{about}"),
        ),
        Error::AlertReceived(
            alert @ (Alert::BadCertificate
            | Alert::UnsupportedCertificate
            | Alert::CertificateUnknown),
        ) => credential(
            ConnectProblem::Rejected,
            format!("the server rejected the client certificate ({alert:?}){about}"),
        ),
        Error::AlertReceived(Alert::UnknownCA) => ConnectError::TrustAnchorUnavailable {
            path: cert.clone(),
            problem: ConnectProblem::UnknownCa,
            cause: format!(
                "the server does not trust the CA that issued the client certificate{about}"
            ),
        },
        Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            ConnectError::TrustAnchorUnavailable {
                path: ca.clone(),
                problem: ConnectProblem::ServerNotTrusted,
                cause: format!(
                    "the server's certificate is not signed by a CA in {}",
                    ca.display()
                ),
            }
        }
        other => ConnectError::Unreachable {
            address: address.to_owned(),
            problem: ConnectProblem::TlsHandshake,
            cause: format!("TLS handshake failed: {other}"),
        },
    }
}
