//! `nauthera-fake-server --config fake-server.yaml`: serves the fake AdminService over mutual TLS
//! and its control API on loopback, and prints where on stdout (one line of JSON).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Parser;
use nauthera_fake_server::pki::{
    self, ServerTls, TestCa, write_atomically, write_private_atomically,
};
use nauthera_fake_server::{ClientCertOptions, FakeServer, FakeServerConfig, IssuedCert};

/// A fake nauthera-server for tests and the sandbox.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The configuration file (YAML); see the README for its keys.
    #[arg(long, short = 'c', env = "NAUTHERA_FAKE_SERVER_CONFIG")]
    config: PathBuf,
}

const SERVER_CERT: &str = "server.crt";
const SERVER_KEY: &str = "server.key";
const CA_CERT: &str = "ca.crt";
const CLIENT_DIR: &str = "client";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let config = FakeServerConfig::from_file(&args.config)?;
    let certificate_dir = match &config.certificate_dir {
        Some(dir) if dir.is_absolute() => dir.clone(),
        Some(dir) => args.config.parent().unwrap_or(Path::new(".")).join(dir),
        None => args.config.parent().unwrap_or(Path::new(".")).join("certs"),
    };
    let tls = certificates(&certificate_dir, &config)?;
    let certificate_dir = certificate_dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", certificate_dir.display()))?;

    let server = Arc::new(FakeServer::start(&config, tls).await?);
    let control = tokio::net::TcpListener::bind(config.control_listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.control_listen))?;
    let control_address = control.local_addr()?;
    let router = nauthera_fake_server::control_api::router(Arc::clone(&server));
    let control_task = tokio::spawn(async move { axum::serve(control, router).await });

    let ready = serde_json::json!({
        "grpc_address": server.address().to_string(),
        "control_address": control_address.to_string(),
        "server_name": config.server_name,
        "certificate_dir": certificate_dir,
        "client_tls_dir": certificate_dir.join(CLIENT_DIR),
        "client_identity": config.client_identity,
        "client_identities": config
            .client_identities
            .iter()
            .map(|client| serde_json::json!({
                "label": client.label,
                "identity": client.identity,
                "tls_dir": certificate_dir.join(CLIENT_DIR).join(&client.label),
            }))
            .collect::<Vec<_>>(),
    });
    eprintln!(
        "nauthera-fake-server: gRPC on {} (TLS name {}), control API on http://{}",
        server.address(),
        config.server_name,
        control_address
    );
    println!("{ready}");

    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminated() => {}
        result = control_task => {
            result.context("the control API stopped")?.context("the control API failed")?;
        }
    }
    server.go_unreachable().await;
    Ok(())
}

#[cfg(unix)]
async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(_) => std::future::pending::<()>().await,
    }
}

#[cfg(not(unix))]
async fn terminated() {
    std::future::pending::<()>().await
}

/// Reads the server's certificate, key and CA from `dir`, or, when `dir` holds none of them,
/// generates a CA, a server certificate and a client certificate for each configured identity.
fn certificates(dir: &Path, config: &FakeServerConfig) -> anyhow::Result<ServerTls> {
    let server_files = [SERVER_CERT, SERVER_KEY, CA_CERT].map(|name| dir.join(name));
    if !server_files.iter().any(|path| path.exists()) {
        return generate(dir, config);
    }
    // The CA's key is not kept, so the client certificates of a second start are the ones the
    // first generated: each configured one must be there.
    let client_files = config.client_identities.iter().flat_map(|client| {
        ["tls.crt", "tls.key", "ca.crt"]
            .map(|name| dir.join(CLIENT_DIR).join(&client.label).join(name))
    });
    let files: Vec<PathBuf> = server_files.iter().cloned().chain(client_files).collect();
    let missing: Vec<_> = files
        .iter()
        .filter(|path| !path.exists())
        .map(|path| path.display().to_string())
        .collect();
    if !missing.is_empty() {
        bail!(
            "the certificate folder {} is incomplete: {} missing (empty the folder to generate new certificates)",
            dir.display(),
            missing.join(", ")
        );
    }
    let files = server_files;
    let read = |path: &PathBuf| {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
    };
    Ok(ServerTls {
        cert: IssuedCert {
            cert_pem: read(&files[0])?,
            key_pem: read(&files[1])?,
        },
        client_ca_pems: vec![read(&files[2])?],
    })
}

fn generate(dir: &Path, config: &FakeServerConfig) -> anyhow::Result<ServerTls> {
    let ca = TestCa::new("nauthera fake-server CA")?;
    let server = ca.issue_server(&[config.server_name.as_str(), "localhost", "127.0.0.1"])?;
    let client = ca.issue_client(&ClientCertOptions::identity(&config.client_identity))?;
    write_atomically(&dir.join(CA_CERT), ca.cert_pem())?;
    write_private_atomically(&dir.join(SERVER_KEY), &server.key_pem)?;
    write_atomically(&dir.join(SERVER_CERT), &server.cert_pem)?;
    pki::write_tls_dir(&dir.join(CLIENT_DIR), &client, &[ca.cert_pem()])?;
    for more in &config.client_identities {
        let client = ca.issue_client(&ClientCertOptions::identity(&more.identity))?;
        pki::write_tls_dir(
            &dir.join(CLIENT_DIR).join(&more.label),
            &client,
            &[ca.cert_pem()],
        )?;
    }
    tracing::info!(
        dir = %dir.display(),
        identity = %config.client_identity,
        more = config.client_identities.len(),
        "generated certificates"
    );
    Ok(ServerTls {
        cert: server,
        client_ca_pems: vec![ca.cert_pem().to_owned()],
    })
}
