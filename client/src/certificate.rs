//! What a client certificate says about itself: its identities (SANs in the server's notation,
//! `dns:...`, `uri:...`, `email:...`) and its validity, for the probe's and the plugin's warnings.

use std::path::Path;

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The facts of a client certificate that matter to an operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateInfo {
    /// The SANs in the server's notation, in certificate order.
    pub identities: Vec<String>,
    /// The subject and issuer distinguished names (`CN=...`).
    pub subject: String,
    pub issuer: String,
    pub not_before: jiff::Timestamp,
    pub not_after: jiff::Timestamp,
}

/// Why a certificate could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CertificateError {
    #[error("cannot read the certificate {path}: {cause}")]
    Unreadable { path: String, cause: String },
    #[error("the certificate is not valid X.509: {0}")]
    Invalid(String),
}

/// Reads the first certificate of a PEM file such as `tls.crt`.
pub fn read_certificate_info(path: &Path) -> Result<CertificateInfo, CertificateError> {
    let certs =
        crate::pem::read_certificates(path).map_err(|(_, cause)| CertificateError::Unreadable {
            path: path.display().to_string(),
            cause,
        })?;
    let first = certs
        .first()
        .ok_or_else(|| CertificateError::Invalid("no certificate".to_owned()))?;
    certificate_info(first.as_ref())
}

/// The facts of one DER certificate.
pub fn certificate_info(der: &[u8]) -> Result<CertificateInfo, CertificateError> {
    let (_, cert) = X509Certificate::from_der(der)
        .map_err(|error| CertificateError::Invalid(error.to_string()))?;
    let timestamp = |time: x509_parser::time::ASN1Time| {
        jiff::Timestamp::from_second(time.timestamp())
            .map_err(|error| CertificateError::Invalid(format!("validity out of range: {error}")))
    };
    Ok(CertificateInfo {
        identities: identities_of(&cert),
        subject: cert.subject().to_string(),
        issuer: cert.issuer().to_string(),
        not_before: timestamp(cert.validity().not_before)?,
        not_after: timestamp(cert.validity().not_after)?,
    })
}

/// The identities (SANs) of one DER certificate; empty when it cannot be parsed.
pub fn certificate_identities(der: &[u8]) -> Vec<String> {
    X509Certificate::from_der(der)
        .map(|(_, cert)| identities_of(&cert))
        .unwrap_or_default()
}

fn identities_of(cert: &X509Certificate<'_>) -> Vec<String> {
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some(format!("dns:{dns}")),
            GeneralName::URI(uri) => Some(format!("uri:{uri}")),
            GeneralName::RFC822Name(email) => Some(format!("email:{email}")),
            _ => None,
        })
        .collect()
}
