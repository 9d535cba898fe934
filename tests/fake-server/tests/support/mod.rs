//! What every test of the fake needs: a PKI, a running fake, clients with chosen identities.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::Duration;

use nauthera_client::{AdminClient, ConnectSettings, TlsFiles};
use nauthera_fake_server::{FakeServer, FakeServerConfig, TestPki};
use nauthera_proto::v1::{self, ClientSpec, ObjectRef, client_spec};
use tempfile::TempDir;

pub const OPERATOR: &str = "dns:nauthera-operator.nauthera.svc";
pub const ACME_ISSUER: &str = "https://login.example.com/acme";
pub const MANAGER: &str = "nauthera-reconciler";

pub struct Harness {
    pub pki: TestPki,
    pub server: FakeServer,
    pub dir: TempDir,
}

impl Harness {
    pub async fn start() -> Harness {
        Harness::start_with(FakeServerConfig::for_tests()).await
    }

    pub async fn start_with(config: FakeServerConfig) -> Harness {
        let pki = TestPki::new().unwrap();
        let server = FakeServer::start(&config, pki.server_tls()).await.unwrap();
        Harness {
            pki,
            server,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A folder with `tls.crt`, `tls.key`, `ca.crt` for `identity`.
    pub fn client_dir(&self, identity: &str) -> PathBuf {
        let dir = self.dir.path().join(identity.replace([':', '/', '@'], "_"));
        self.pki.write_client_dir(&dir, identity).unwrap();
        dir
    }

    pub fn settings(&self, dir: &std::path::Path) -> ConnectSettings {
        let mut settings =
            ConnectSettings::new(self.server.address().to_string(), TlsFiles::in_dir(dir))
                .with_server_name(&self.pki.server_name);
        settings.connect_timeout = Duration::from_secs(5);
        settings.request_timeout = Some(Duration::from_secs(10));
        settings
    }

    /// A connected client for `identity`.
    pub async fn client(&self, identity: &str) -> AdminClient {
        let dir = self.client_dir(identity);
        AdminClient::connect(self.settings(&dir)).await.unwrap()
    }

    /// A connected client for the operator identity.
    pub async fn operator(&self) -> AdminClient {
        self.client(OPERATOR).await
    }
}

pub fn acme(namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        issuer: ACME_ISSUER.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    }
}

/// A valid confidential web client with a generated secret.
pub fn web_spec() -> ClientSpec {
    ClientSpec {
        display_name: "Web".into(),
        redirect_uris: vec!["https://app.example.com/callback".into()],
        grant_types: vec!["authorization_code".into(), "refresh_token".into()],
        response_types: vec!["code".into()],
        scopes: vec!["openid".into(), "profile".into()],
        token_endpoint_auth_method: "client_secret_basic".into(),
        require_pkce: true,
        secret: Some(client_spec::Secret::GenerateSecret(true)),
        ..Default::default()
    }
}

pub fn apply(reference: ObjectRef, spec: ClientSpec, generation: i64) -> v1::ApplyClientRequest {
    v1::ApplyClientRequest {
        r#ref: Some(reference),
        spec: Some(spec),
        generation,
        manager: MANAGER.to_owned(),
        if_revision: None,
        rotate_secret: false,
    }
}

pub fn if_revision(revision: &str) -> Option<v1::Precondition> {
    Some(v1::Precondition {
        condition: Some(v1::precondition::Condition::Revision(revision.to_owned())),
    })
}

pub fn if_absent() -> Option<v1::Precondition> {
    Some(v1::Precondition {
        condition: Some(v1::precondition::Condition::Absent(true)),
    })
}

/// Polls `check` until it holds or `timeout` passes.
pub async fn eventually(timeout: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
