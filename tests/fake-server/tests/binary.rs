//! The binary: one command with a config file, certificates generated into an empty folder, one
//! parsable line on stdout, and the control API.

#![allow(clippy::unwrap_used)]

mod support;

use nauthera_shared::catalog::ServerReason;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use nauthera_client::{AdminClient, ConnectSettings, TlsFiles};

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(config: &std::path::Path) -> (Running, serde_json::Value) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nauthera-fake-server"))
        .arg("--config")
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let running = Running(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).unwrap();
    (running, ready)
}

/// One HTTP/1.1 request to the control API; returns the status code and body. Async, so the
/// test's runtime keeps serving its gRPC connection meanwhile.
async fn control(address: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (status, body)
}

#[tokio::test]
async fn the_binary_generates_certificates_prints_its_addresses_and_serves_controls() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fake-server.yaml");
    std::fs::write(
        &config,
        r#"
listen: 127.0.0.1:0
control_listen: 127.0.0.1:0
certificate_dir: certs
client_identity: dns:nauthera-operator.nauthera.svc
organizations:
  - slug: acme
    issuer: https://login.example.com/acme
    fapi_mode: "off"
allowed_clients:
  - identity: dns:nauthera-operator.nauthera.svc
    operations: [clients, brandings]
    organizations: ["*"]
    namespaces: ["*"]
"#,
    )
    .unwrap();
    let (_running, ready) = start(&config);
    let grpc = ready["grpc_address"].as_str().unwrap().to_owned();
    let control_address = ready["control_address"].as_str().unwrap().to_owned();
    let client_dir = ready["client_tls_dir"].as_str().unwrap().to_owned();
    for file in [
        "ca.crt",
        "server.crt",
        "server.key",
        "client/tls.crt",
        "client/tls.key",
        "client/ca.crt",
    ] {
        assert!(dir.path().join("certs").join(file).exists(), "{file}");
    }

    let settings = ConnectSettings::new(grpc.clone(), TlsFiles::in_dir(&client_dir))
        .with_server_name(ready["server_name"].as_str().unwrap());
    let client = AdminClient::connect(settings.clone()).await.unwrap();
    let info = client.get_server_info().await.unwrap();
    assert_eq!(info.identity, "dns:nauthera-operator.nauthera.svc");

    let (status, _) = control(
        &control_address,
        "POST",
        "/v1/faults",
        r#"{"method":"GetServerInfo","code":"Unavailable","count":1}"#,
    )
    .await;
    assert_eq!(status, 204);
    let error = client.get_server_info().await.unwrap_err();
    assert_eq!(error.server().unwrap().code, tonic::Code::Unavailable);

    let (status, body) = control(&control_address, "GET", "/v1/counters", "").await;
    assert_eq!(status, 200);
    let counters: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(counters["calls"]["GetServerInfo"], 2);

    let (status, body) = control(
        &control_address,
        "POST",
        "/v1/faults",
        r#"{"code":"Sideways"}"#,
    )
    .await;
    assert_eq!(status, 422, "{body}");

    let (status, _) = control(&control_address, "POST", "/v1/unreachable", "").await;
    assert_eq!(status, 204);
    assert!(AdminClient::connect(settings.clone()).await.is_err());
    let (status, _) = control(&control_address, "POST", "/v1/restart", "").await;
    assert_eq!(status, 204);
    assert!(
        AdminClient::connect(settings)
            .await
            .unwrap()
            .get_server_info()
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_second_start_reads_the_certificates_it_generated() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fake-server.yaml");
    std::fs::write(&config, "certificate_dir: certs\n").unwrap();
    let (first, _) = start(&config);
    drop(first);
    let ca = std::fs::read_to_string(dir.path().join("certs/ca.crt")).unwrap();
    let (_second, ready) = start(&config);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("certs/ca.crt")).unwrap(),
        ca
    );
    assert!(
        ready["grpc_address"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
}

#[tokio::test]
async fn more_client_identities_get_a_certificate_folder_each_and_authenticate_as_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fake-server.yaml");
    std::fs::write(
        &config,
        r#"
certificate_dir: certs
client_identity: dns:reconciler.prod-eu.svc
client_identities:
  - label: prod-us
    identity: dns:reconciler.prod-us.svc
allowed_clients:
  - identity: dns:reconciler.prod-eu.svc
    operations: [clients]
    organizations: ["*"]
    namespaces: ["prod-eu/team-a"]
  - identity: dns:reconciler.prod-us.svc
    operations: [clients]
    organizations: ["*"]
    namespaces: ["prod-us/team-a"]
"#,
    )
    .unwrap();
    let (running, ready) = start(&config);
    let more = ready["client_identities"].as_array().unwrap();
    assert_eq!(more.len(), 1, "{ready}");
    assert_eq!(more[0]["label"], "prod-us");
    assert_eq!(more[0]["identity"], "dns:reconciler.prod-us.svc");
    let us_dir = more[0]["tls_dir"].as_str().unwrap().to_owned();
    assert_eq!(
        std::path::Path::new(&us_dir),
        dir.path()
            .join("certs/client/prod-us")
            .canonicalize()
            .unwrap()
    );
    let grpc = ready["grpc_address"].as_str().unwrap().to_owned();
    let server_name = ready["server_name"].as_str().unwrap().to_owned();
    for (tls_dir, identity, namespace) in [
        (
            ready["client_tls_dir"].as_str().unwrap().to_owned(),
            "dns:reconciler.prod-eu.svc",
            "prod-eu/team-a",
        ),
        (
            us_dir.clone(),
            "dns:reconciler.prod-us.svc",
            "prod-us/team-a",
        ),
    ] {
        let settings = ConnectSettings::new(grpc.clone(), TlsFiles::in_dir(&tls_dir))
            .with_server_name(&server_name);
        let info = AdminClient::connect(settings)
            .await
            .unwrap()
            .get_server_info()
            .await
            .unwrap();
        assert_eq!(info.identity, identity);
        let grants: Vec<&str> = info
            .grants
            .iter()
            .flat_map(|g| g.namespaces.iter().map(String::as_str))
            .collect();
        assert_eq!(grants, [namespace], "{identity} sees its own grant");
    }
    drop(running);

    // A second start reuses them; without its folder it says which files are missing.
    let cert = std::fs::read_to_string(format!("{us_dir}/tls.crt")).unwrap();
    let (second, _) = start(&config);
    drop(second);
    assert_eq!(
        std::fs::read_to_string(format!("{us_dir}/tls.crt")).unwrap(),
        cert
    );
    std::fs::remove_dir_all(&us_dir).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_nauthera-fake-server"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("client/prod-us/tls.crt"), "{stderr}");
}

#[test]
fn an_incomplete_certificate_folder_is_refused_with_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fake-server.yaml");
    std::fs::write(&config, "certificate_dir: certs\n").unwrap();
    std::fs::create_dir(dir.path().join("certs")).unwrap();
    std::fs::write(dir.path().join("certs/ca.crt"), "x").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_nauthera-fake-server"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("server.crt") && stderr.contains("server.key"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_control_api_edits_deletes_and_restores_behind_the_clients_back() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fake-server.yaml");
    std::fs::write(
        &config,
        "organizations:\n  - slug: acme\n    issuer: https://login.example.com/acme\nallowed_clients:\n  - identity: dns:nauthera-operator.nauthera.svc\n    operations: [clients]\n    organizations: [\"*\"]\n    namespaces: [\"*\"]\n",
    )
    .unwrap();
    let (_running, ready) = start(&config);
    let control_address = ready["control_address"].as_str().unwrap().to_owned();
    let settings = ConnectSettings::new(
        ready["grpc_address"].as_str().unwrap(),
        TlsFiles::in_dir(ready["client_tls_dir"].as_str().unwrap()),
    )
    .with_server_name(ready["server_name"].as_str().unwrap());
    let client = AdminClient::connect(settings).await.unwrap();
    let reference = support::acme("team-a", "web");
    client
        .apply_client(support::apply(reference.clone(), support::web_spec(), 1))
        .await
        .unwrap();

    // What checks of invariants read: the hash of each secret in force, and the audit log.
    let (status, body) = control(&control_address, "GET", "/v1/secret-hashes", "").await;
    assert_eq!(status, 200, "{body}");
    let hashes: serde_json::Value = serde_json::from_str(&body).unwrap();
    let web = hashes
        .as_array()
        .unwrap()
        .iter()
        .find(|hash| hash["kind"] == "client" && hash["name"] == "web")
        .cloned()
        .unwrap_or_default();
    assert_eq!(web["namespace"], "team-a", "{hashes}");
    assert_eq!(web["sha256"].as_str().map(str::len), Some(64), "{hashes}");
    let (status, body) = control(&control_address, "GET", "/v1/audit", "").await;
    assert_eq!(status, 200, "{body}");
    let audit: serde_json::Value = serde_json::from_str(&body).unwrap();
    let applied = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["name"] == "web")
        .cloned()
        .unwrap_or_default();
    assert_eq!(applied["kind"], "OBJECT_KIND_CLIENT", "{audit}");
    assert_eq!(
        applied["actor"], "dns:nauthera-operator.nauthera.svc",
        "{audit}"
    );
    assert!(
        applied["time"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{audit}"
    );

    let (status, body) = control(&control_address, "POST", "/v1/backups", "").await;
    assert_eq!(status, 200, "{body}");
    let backup: serde_json::Value = serde_json::from_str(&body).unwrap();

    let edit = r#"{"issuer":"https://login.example.com/acme","namespace":"team-a","name":"web","actor":"user:alice@example.com","cause":"hotfix","changes":{"display_name":"By hand","scopes":["openid"]}}"#;
    let (status, body) = control(&control_address, "POST", "/v1/clients/edit", edit).await;
    assert_eq!(status, 200, "{body}");
    let held = client.get_client(reference.clone()).await.unwrap();
    assert_eq!(held.spec.unwrap().display_name, "By hand");
    let written = held.last_write.unwrap();
    assert_eq!(
        (written.manager.as_str(), written.actor.as_str()),
        ("", "user:alice@example.com")
    );

    let delete = r#"{"kind":"client","issuer":"https://login.example.com/acme","namespace":"team-a","name":"web","actor":"user:alice@example.com"}"#;
    let (status, _) = control(&control_address, "POST", "/v1/delete", delete).await;
    assert_eq!(status, 204);
    assert!(client.get_client(reference.clone()).await.is_err());
    let (status, _) = control(&control_address, "POST", "/v1/delete", delete).await;
    assert_eq!(status, 404);

    let (status, body) = control(
        &control_address,
        "POST",
        &format!("/v1/backups/{}/restore", backup["id"]),
        r#"{"actor":"user:ops@example.com"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let restored: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(restored["changed"], 1);
    assert_ne!(
        restored["change_hint"]["epoch"],
        backup["change_hint"]["epoch"]
    );
    assert_eq!(
        client
            .get_client(reference)
            .await
            .unwrap()
            .spec
            .unwrap()
            .display_name,
        "Web"
    );

    let (status, _) = control(
        &control_address,
        "POST",
        "/v1/unimplemented",
        r#"{"method":"GetChangeHint"}"#,
    )
    .await;
    assert_eq!(status, 204);
    assert!(
        client
            .get_change_hint()
            .await
            .unwrap_err()
            .is_unimplemented()
    );

    let (status, _) = control(&control_address, "PUT", "/v1/allowed-clients", "[]").await;
    assert_eq!(status, 204);
    let refused = client.get_server_info().await.unwrap_err();
    assert_eq!(refused.reason(), Some(ServerReason::IdentityNotAllowed));
}

#[tokio::test]
async fn the_control_api_hangs_the_server_and_breaks_its_streams() {
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fake-server.yaml");
    std::fs::write(
        &config,
        "organizations:\n  - slug: acme\n    issuer: https://login.example.com/acme\nallowed_clients:\n  - identity: dns:nauthera-operator.nauthera.svc\n    operations: [clients]\n    organizations: [\"*\"]\n    namespaces: [\"*\"]\n",
    )
    .unwrap();
    let (_running, ready) = start(&config);
    let control_address = ready["control_address"].as_str().unwrap().to_owned();
    let settings = ConnectSettings::new(
        ready["grpc_address"].as_str().unwrap(),
        TlsFiles::in_dir(ready["client_tls_dir"].as_str().unwrap()),
    )
    .with_server_name(ready["server_name"].as_str().unwrap());
    let client = AdminClient::connect(settings).await.unwrap();
    client
        .apply_client(support::apply(
            support::acme("team-a", "web"),
            support::web_spec(),
            1,
        ))
        .await
        .unwrap();
    let edit = r#"{"issuer":"https://login.example.com/acme","namespace":"team-a","name":"web","actor":"user:alice@example.com","changes":{"display_name":"By hand"}}"#;

    // A timed hang holds the call until it is over.
    let started = Instant::now();
    let (status, _) = control(&control_address, "POST", "/v1/hang", r#"{"millis":300}"#).await;
    assert_eq!(status, 204);
    let (_, body) = control(&control_address, "GET", "/v1/state", "").await;
    let state: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(state["hung"], true, "{state}");
    client.get_server_info().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));

    // A long hang is ended by `millis: 0`, and the held call goes on.
    let (status, _) = control(&control_address, "POST", "/v1/hang", r#"{"millis":60000}"#).await;
    assert_eq!(status, 204);
    let held = {
        let client = client.clone();
        tokio::spawn(async move { client.get_server_info().await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!held.is_finished());
    let (status, _) = control(&control_address, "POST", "/v1/hang", r#"{"millis":0}"#).await;
    assert_eq!(status, 204);
    tokio::time::timeout(Duration::from_secs(1), held)
        .await
        .expect("released at once")
        .unwrap()
        .unwrap();

    // A mid-stream fault spares the opening call and breaks the stream at its next event.
    let (status, body) = control(
        &control_address,
        "POST",
        "/v1/faults",
        r#"{"method":"WatchChanges","code":"Aborted","mid_stream":true}"#,
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let mut stream = client.watch_changes(None).await.unwrap();
    let (status, _) = control(&control_address, "POST", "/v1/clients/edit", edit).await;
    assert_eq!(status, 200);
    let broken = stream.next().await.unwrap_err();
    assert_eq!(broken.server().unwrap().code, tonic::Code::Aborted);
    let (status, _) = control(&control_address, "DELETE", "/v1/faults", "").await;
    assert_eq!(status, 204);
    let (status, body) = control(
        &control_address,
        "POST",
        "/v1/faults",
        r#"{"code":"Aborted","mid_stream":true,"lose_answer":true}"#,
    )
    .await;
    assert_eq!(status, 400, "{body}");

    // Breaking the open streams ends them now with the code.
    let mut stream = client.watch_changes(None).await.unwrap();
    let (status, _) = control(
        &control_address,
        "POST",
        "/v1/streams/break",
        r#"{"code":"Unavailable"}"#,
    )
    .await;
    assert_eq!(status, 204);
    let broken = tokio::time::timeout(Duration::from_secs(1), stream.next())
        .await
        .expect("ended at once")
        .unwrap_err();
    assert_eq!(broken.server().unwrap().code, tonic::Code::Unavailable);
    let (_, body) = control(&control_address, "GET", "/v1/counters", "").await;
    let counters: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(counters["faults"]["WatchChanges"], 2, "{counters}");
}
