//! PEM files read for a connection: certificates and keys, with a problem and its cause in words
//! when a file cannot be used. The parser's own errors are never passed on, since they may quote
//! a key.

use std::io;
use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::ConnectProblem;

/// Why a file could not be used, and in words.
pub(crate) type FileProblem = (ConnectProblem, String);

pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, FileProblem> {
    std::fs::read(path).map_err(|error| {
        let cause = match error.kind() {
            io::ErrorKind::NotFound => "file not found".to_owned(),
            io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
            _ => format!("cannot read: {error}"),
        };
        (ConnectProblem::Unreadable, cause)
    })
}

pub(crate) fn malformed(cause: impl Into<String>) -> FileProblem {
    (ConnectProblem::Malformed, cause.into())
}

/// The certificates of a PEM file; the parser's own errors are not passed on, since they may
/// quote the file's contents.
pub(crate) fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, FileProblem> {
    let bytes = read_file(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| malformed("not a valid PEM certificate file"))?;
    if certs.is_empty() {
        return Err(malformed("holds no PEM certificate"));
    }
    Ok(certs)
}

pub(crate) fn read_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, FileProblem> {
    let bytes = read_file(path)?;
    PrivateKeyDer::from_pem_slice(&bytes)
        .map_err(|_| malformed("holds no PEM private key (PKCS#8, PKCS#1 or SEC1)"))
}
