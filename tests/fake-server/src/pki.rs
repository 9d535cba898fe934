//! Test certificates made at test time: a CA, the server's certificate, client certificates with
//! chosen identities and validity, written the way a cert-manager Secret mounts them.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// A certificate could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("cannot make a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("identity {0:?} must start with dns:, uri: or email:")]
    Identity(String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A certificate and its key, in PEM.
#[derive(Clone)]
pub struct IssuedCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for IssuedCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedCert").finish_non_exhaustive()
    }
}

/// A certificate authority that can issue server and client certificates.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

/// What a client certificate should say.
#[derive(Clone, Debug)]
pub struct ClientCertOptions {
    /// SANs in the server's notation: `dns:name`, `uri:spiffe://...`, `email:someone@example.com`.
    pub identities: Vec<String>,
    /// Validity start; about a day ago when `None`.
    pub not_before: Option<jiff::Timestamp>,
    /// Validity end; in a year when `None`.
    pub not_after: Option<jiff::Timestamp>,
}

impl ClientCertOptions {
    /// A client certificate for one identity, valid now.
    pub fn identity(identity: &str) -> ClientCertOptions {
        ClientCertOptions {
            identities: vec![identity.to_owned()],
            not_before: None,
            not_after: None,
        }
    }
}

fn set_validity(
    params: &mut CertificateParams,
    not_before: jiff::Timestamp,
    not_after: jiff::Timestamp,
) {
    // rcgen takes `time` values; build them from the calendar date so this crate needs no
    // second time library.
    let to_time = |timestamp: jiff::Timestamp| {
        let date = timestamp.to_zoned(jiff::tz::TimeZone::UTC);
        let midnight = rcgen::date_time_ymd(
            i32::from(date.year()),
            u8::try_from(date.month()).unwrap_or(1),
            u8::try_from(date.day()).unwrap_or(1),
        );
        let seconds = u64::try_from(
            i64::from(date.hour()) * 3600
                + i64::from(date.minute()) * 60
                + i64::from(date.second()),
        )
        .unwrap_or(0);
        midnight + std::time::Duration::from_secs(seconds)
    };
    params.not_before = to_time(not_before);
    params.not_after = to_time(not_after);
}

fn san(identity: &str) -> Result<SanType, PkiError> {
    let invalid = || PkiError::Identity(identity.to_owned());
    if let Some(name) = identity.strip_prefix("dns:") {
        Ok(SanType::DnsName(name.try_into().map_err(|_| invalid())?))
    } else if let Some(uri) = identity.strip_prefix("uri:") {
        Ok(SanType::URI(uri.try_into().map_err(|_| invalid())?))
    } else if let Some(email) = identity.strip_prefix("email:") {
        Ok(SanType::Rfc822Name(
            email.try_into().map_err(|_| invalid())?,
        ))
    } else {
        Err(invalid())
    }
}

impl TestCa {
    /// A new self-signed CA.
    pub fn new(common_name: &str) -> Result<TestCa, PkiError> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = jiff::Timestamp::now();
        set_validity(
            &mut params,
            now - jiff::SignedDuration::from_hours(48),
            now + jiff::SignedDuration::from_hours(24 * 3650),
        );
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(TestCa {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate (PEM), what `ca.crt` holds.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A server certificate for these DNS names and IP addresses (`127.0.0.1` becomes an IP
    /// SAN).
    pub fn issue_server(&self, names: &[&str]) -> Result<IssuedCert, PkiError> {
        let mut params = CertificateParams::new(
            names
                .iter()
                .map(|name| name.to_string())
                .collect::<Vec<_>>(),
        )?;
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().copied().unwrap_or("server"),
        );
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let now = jiff::Timestamp::now();
        set_validity(
            &mut params,
            now - jiff::SignedDuration::from_hours(24),
            now + jiff::SignedDuration::from_hours(24 * 365),
        );
        self.sign(params)
    }

    /// A client certificate as described.
    pub fn issue_client(&self, options: &ClientCertOptions) -> Result<IssuedCert, PkiError> {
        let mut params = CertificateParams::default();
        params.subject_alt_names = options
            .identities
            .iter()
            .map(|identity| san(identity))
            .collect::<Result<_, _>>()?;
        let common_name = options
            .identities
            .first()
            .and_then(|identity| identity.split_once(':').map(|(_, name)| name.to_owned()))
            .unwrap_or_else(|| "client".to_owned());
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let now = jiff::Timestamp::now();
        set_validity(
            &mut params,
            options
                .not_before
                .unwrap_or(now - jiff::SignedDuration::from_hours(24)),
            options
                .not_after
                .unwrap_or(now + jiff::SignedDuration::from_hours(24 * 365)),
        );
        self.sign(params)
    }

    /// A client certificate for one identity that expired yesterday.
    pub fn issue_expired_client(&self, identity: &str) -> Result<IssuedCert, PkiError> {
        let now = jiff::Timestamp::now();
        self.issue_client(&ClientCertOptions {
            identities: vec![identity.to_owned()],
            not_before: Some(now - jiff::SignedDuration::from_hours(24 * 30)),
            not_after: Some(now - jiff::SignedDuration::from_hours(24)),
        })
    }

    fn sign(&self, params: CertificateParams) -> Result<IssuedCert, PkiError> {
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// Writes `contents` to `path` by renaming a temporary file over it, so a reader never sees a
/// half-written file (the kubelet swaps a Secret's files atomically too). For certificates and
/// CA bundles; a private key goes through [`write_private_atomically`].
pub fn write_atomically(path: &Path, contents: &str) -> Result<(), PkiError> {
    write_atomically_with_mode(path, contents, 0o644)
}

/// [`write_atomically`] for a file only its owner may read (mode 0600): a private key. The
/// temporary file is created with that mode, so the key is never readable by others, not even
/// before the rename.
pub fn write_private_atomically(path: &Path, contents: &str) -> Result<(), PkiError> {
    write_atomically_with_mode(path, contents, 0o600)
}

fn write_atomically_with_mode(path: &Path, contents: &str, mode: u32) -> Result<(), PkiError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let error = |source| PkiError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(error)?;
    }
    let temporary = path.with_extension("tmp-write");
    // A leftover temporary file would keep its old mode: start from none.
    match std::fs::remove_file(&temporary) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(error(e)),
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temporary)
        .map_err(error)?;
    file.write_all(contents.as_bytes()).map_err(error)?;
    drop(file);
    std::fs::rename(&temporary, path).map_err(error)
}

/// Writes `tls.crt`, `tls.key` and `ca.crt` into `dir` (created when missing), like a mounted
/// cert-manager Secret. `ca_pems` are concatenated into `ca.crt` (several CAs during a rotation).
pub fn write_tls_dir(dir: &Path, cert: &IssuedCert, ca_pems: &[&str]) -> Result<(), PkiError> {
    write_private_atomically(&dir.join("tls.key"), &cert.key_pem)?;
    write_atomically(&dir.join("tls.crt"), &cert.cert_pem)?;
    write_ca_bundle(dir, ca_pems)
}

/// Replaces the client certificate and key in a folder written by [`write_tls_dir`].
pub fn rotate_client_certificate(dir: &Path, cert: &IssuedCert) -> Result<(), PkiError> {
    write_private_atomically(&dir.join("tls.key"), &cert.key_pem)?;
    write_atomically(&dir.join("tls.crt"), &cert.cert_pem)
}

/// Replaces `ca.crt` in a folder with the given CAs.
pub fn write_ca_bundle(dir: &Path, ca_pems: &[&str]) -> Result<(), PkiError> {
    write_atomically(&dir.join("ca.crt"), &ca_pems.concat())
}

/// The server's TLS material: its certificate and key, and the CAs whose client certificates
/// it trusts.
#[derive(Clone)]
pub struct ServerTls {
    pub cert: IssuedCert,
    pub client_ca_pems: Vec<String>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("client_cas", &self.client_ca_pems.len())
            .finish_non_exhaustive()
    }
}

/// A CA with a server certificate, the usual starting point of a test.
#[derive(Debug)]
pub struct TestPki {
    pub ca: TestCa,
    pub server: IssuedCert,
    /// The DNS name in the server certificate, to use as the TLS server name.
    pub server_name: String,
}

/// The server name the fake's certificate carries by default.
pub const DEFAULT_SERVER_NAME: &str = "nauthera-server.nauthera.svc";

impl TestPki {
    /// A new CA and a server certificate for [`DEFAULT_SERVER_NAME`], `localhost` and
    /// `127.0.0.1`.
    pub fn new() -> Result<TestPki, PkiError> {
        let ca = TestCa::new("nauthera test CA")?;
        let server = ca.issue_server(&[DEFAULT_SERVER_NAME, "localhost", "127.0.0.1"])?;
        Ok(TestPki {
            ca,
            server,
            server_name: DEFAULT_SERVER_NAME.to_owned(),
        })
    }

    /// The server's TLS material trusting this CA for client certificates.
    pub fn server_tls(&self) -> ServerTls {
        ServerTls {
            cert: self.server.clone(),
            client_ca_pems: vec![self.ca.cert_pem().to_owned()],
        }
    }

    /// Issues a client certificate for `identity` and writes it with this CA as `ca.crt` into
    /// `dir`.
    pub fn write_client_dir(&self, dir: &Path, identity: &str) -> Result<(), PkiError> {
        let cert = self
            .ca
            .issue_client(&ClientCertOptions::identity(identity))?;
        write_tls_dir(dir, &cert, &[self.ca.cert_pem()])
    }
}
